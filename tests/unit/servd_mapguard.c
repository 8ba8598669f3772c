/*
 * The SIGBUS guard of pack maps (servd/mapguard.c): a read past the end of
 * a guarded map cut short reads zeros and sets its flag; every other SIGBUS
 * still ends the process; slots run out and come back, and while none is
 * free no pack is loaded unguarded; a pack written in place shows in its
 * meta pages (sv_snapshot_head_hash). The process-killing
 * cases run in a forked child.
 */
#include "mapguard.h"
#include "runner.h"
#include "sf/store.h"
#include "snapshot.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

/* A two-page file mapped shared, then cut to nothing: its pages are gone. */
static volatile const char *cut_map(size_t *len)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/cut.bin", t_tmpdir());
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    ASSERT(fd >= 0);
    *len = 2 * (size_t)sysconf(_SC_PAGESIZE);
    ASSERT_EQ(ftruncate(fd, (off_t)*len), 0);
    ASSERT_EQ(pwrite(fd, "x", 1, 0), 1);
    void *p = mmap(NULL, *len, PROT_READ, MAP_SHARED, fd, 0);
    ASSERT(p != MAP_FAILED);
    ASSERT_EQ(((const char *)p)[0], 'x');
    ASSERT_EQ(ftruncate(fd, 0), 0);
    close(fd);
    return p;
}

/* Runs fn in a child. @return 1 when the child exited 0 (it survived). */
static int survives(void (*fn)(void))
{
    (void)t_tmpdir(); /* made here, so that this process removes it */
    fflush(NULL);
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        fn();
        _exit(0);
    }
    int st;
    ASSERT_EQ(waitpid(pid, &st, 0), pid);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static void read_guarded_cut_map(void)
{
    if (sv_mapguard_install() != 0)
        _exit(2);
    size_t len;
    volatile const char *p = cut_map(&len);
    int slot = sv_mapguard_add((const void *)p, len);
    if (slot < 0 || atomic_load(sv_mapguard_flag(slot)))
        _exit(3);
    /* both pages: zeros, no signal; the first read before the pack is
     * served (a load's validation walk) is not counted as a pack in use cut */
    if (p[0] != 0 || sv_mapguard_faults() != 0 || !atomic_load(sv_mapguard_flag(slot)))
        _exit(4);
    sv_mapguard_serve(slot);
    if (p[len - 1] != 0 || sv_mapguard_faults() != 1)
        _exit(5);
    sv_mapguard_remove(slot);
    if (atomic_load(sv_mapguard_flag(slot)))
        _exit(6);
}

static void read_unguarded_cut_map(void)
{
    if (sv_mapguard_install() != 0)
        _exit(0); /* "survived": the test fails, which is right */
    size_t len;
    volatile const char *p = cut_map(&len);
    char c = p[0]; /* not registered: SIGBUS must end the process */
    (void)c;
}

static void read_removed_cut_map(void)
{
    if (sv_mapguard_install() != 0)
        _exit(0);
    size_t len;
    volatile const char *p = cut_map(&len);
    sv_mapguard_remove(sv_mapguard_add((const void *)p, len));
    char c = p[0];
    (void)c;
}

static void read_cut_map_while_opening(void)
{
    if (sv_mapguard_install() != 0)
        _exit(2);
    size_t len;
    volatile const char *p = cut_map(&len);
    sv_mapguard_open_begin(); /* no range: the thread itself is guarded */
    if (sv_mapguard_open_cut() || p[0] != 0)
        _exit(3);
    if (!sv_mapguard_open_cut() || sv_mapguard_faults() != 0) /* no pack in use was cut */
        _exit(4);
    if (sv_mapguard_open_end() != 1 || sv_mapguard_open_end() != 0)
        _exit(5);
}

static void read_cut_map_after_opening(void)
{
    if (sv_mapguard_install() != 0)
        _exit(0);
    size_t len;
    volatile const char *p = cut_map(&len);
    sv_mapguard_open_begin();
    sv_mapguard_open_end();
    char c = p[len - 1]; /* the open is over: SIGBUS must end the process */
    (void)c;
}

static void sigbus_sent_by_kill(void)
{
    if (sv_mapguard_install() != 0)
        _exit(0);
    kill(getpid(), SIGBUS); /* not a fault: the guard must not swallow it */
    usleep(100000);
}

TEST(mapguard_cut_guarded_map_reads_zeros)
{
    ASSERT(survives(read_guarded_cut_map));
}

TEST(mapguard_open_reads_zeros_in_the_opening_thread)
{
    ASSERT(survives(read_cut_map_while_opening));
    ASSERT(!survives(read_cut_map_after_opening));
}

TEST(mapguard_other_sigbus_still_ends_the_process)
{
    ASSERT(!survives(read_unguarded_cut_map));
    ASSERT(!survives(read_removed_cut_map));
    ASSERT(!survives(sigbus_sent_by_kill));
}

TEST(mapguard_slots_run_out_and_come_back)
{
    static char area[SV_MAPGUARD_SLOTS + 1][16];
    int slot[SV_MAPGUARD_SLOTS];
    for (int i = 0; i < SV_MAPGUARD_SLOTS; i++) {
        slot[i] = sv_mapguard_add(area[i], sizeof area[i]);
        ASSERT(slot[i] >= 0);
    }
    ASSERT_EQ(sv_mapguard_add(area[SV_MAPGUARD_SLOTS], 16), -1);
    ASSERT_EQ(atomic_load(sv_mapguard_flag(-1)), 0);
    sv_mapguard_mark(slot[7]);
    ASSERT_EQ(atomic_load(sv_mapguard_flag(slot[7])), 1);
    sv_mapguard_remove(slot[7]);
    int again = sv_mapguard_add(area[SV_MAPGUARD_SLOTS], 16);
    ASSERT_EQ(again, slot[7]);
    ASSERT_EQ(atomic_load(sv_mapguard_flag(again)), 0); /* a new range starts clean */
    for (int i = 0; i < SV_MAPGUARD_SLOTS; i++)
        sv_mapguard_remove(i == 7 ? again : slot[i]);
}

/* With every slot taken (old packs held by slow readers), a load is refused
 * before anything is mapped, as no verdict on the file: the retry loads it
 * once a slot is free. */
TEST(mapguard_full_refuses_a_load)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/next.lmdb", t_tmpdir());
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ASSERT(fd >= 0);
    ASSERT_EQ(write(fd, "not looked at", 13), 13);
    close(fd);
    static char area[SV_MAPGUARD_SLOTS][16];
    int slot[SV_MAPGUARD_SLOTS];
    for (int i = 0; i < SV_MAPGUARD_SLOTS; i++)
        ASSERT((slot[i] = sv_mapguard_add(area[i], sizeof area[i])) >= 0);
    ASSERT_EQ(sv_mapguard_room(), 0);
    sv_snapshot *s = NULL;
    sv_file_seen seen;
    char err[512];
    ASSERT_EQ(sv_snapshot_open(path, 1, &s, &seen, err, sizeof err), SF_ENOMEM);
    ASSERT(s == NULL);
    ASSERT_EQ(seen.retry, 1);
    ASSERT(strstr(err, "packs are mapped") != NULL);
    ASSERT_EQ(sv_snapshot_live(), 0);
    sv_mapguard_remove(slot[3]);
    ASSERT_EQ(sv_mapguard_room(), 1);
    for (int i = 0; i < SV_MAPGUARD_SLOTS; i++)
        if (i != 3)
            sv_mapguard_remove(slot[i]);
}

/* The hash of a file opened at fd after one byte at off is set to v. */
static uint64_t hash_after(int fd, off_t off, unsigned char v)
{
    ASSERT_EQ(pwrite(fd, &v, 1, off), 1);
    uint64_t h;
    ASSERT_EQ(sv_snapshot_head_hash(fd, &h), 0);
    return h;
}

/* What tells a pack written in place from a touch: both LMDB meta pages,
 * wherever the page size puts the second. servd-pack writes its roots into
 * the second (transaction 1); on a host of 16 or 64 KiB pages (LMDB's
 * pages: 16 or 32 KiB, and a file may state 64) it lies past the first
 * 8 KiB, where a hash of the file's start saw only the first meta page,
 * alike for every pack. */
TEST(snapshot_head_hash_covers_both_meta_pages)
{
    static const size_t sizes[] = {4096, 16384, 32768, 65536};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t ps = sizes[i];
        char path[4096];
        snprintf(path, sizeof path, "%s/pages-%zu.lmdb", t_tmpdir(), ps);
        int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
        ASSERT(fd >= 0);
        ASSERT_EQ(ftruncate(fd, (off_t)(3 * ps)), 0);
        unsigned char meta[44] = {0};
        const unsigned char magic[4] = {0xDE, 0xC0, 0xEF, 0xBE};
        memcpy(meta + 16, magic, 4);
        meta[40] = (unsigned char)ps, meta[41] = (unsigned char)(ps >> 8);
        meta[42] = (unsigned char)(ps >> 16);
        ASSERT_EQ(pwrite(fd, meta, sizeof meta, 0), (ssize_t)sizeof meta);
        ASSERT_EQ(pwrite(fd, meta, sizeof meta, (off_t)ps), (ssize_t)sizeof meta);
        ASSERT_EQ(sf_lmdb_page_size(meta, sizeof meta), ps);
        uint64_t before = hash_after(fd, 0, 0);
        /* the second meta page's transaction id and its last page */
        ASSERT(hash_after(fd, (off_t)ps + 144, 1) != before);
        ASSERT_EQ(hash_after(fd, (off_t)ps + 144, 0), before);
        ASSERT(hash_after(fd, (off_t)ps + 136, 7) != before);
        ASSERT_EQ(hash_after(fd, (off_t)ps + 136, 0), before);
        /* and the first's */
        ASSERT(hash_after(fd, 144, 1) != before);
        ASSERT_EQ(hash_after(fd, 144, 0), before);
        /* a data page is not looked at */
        ASSERT_EQ(hash_after(fd, (off_t)(2 * ps) + 100, 9), before);
        close(fd);
    }
    /* A file that is no pack: its first 8 KiB. */
    char path[4096];
    snprintf(path, sizeof path, "%s/plain.bin", t_tmpdir());
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    ASSERT(fd >= 0);
    uint64_t empty;
    ASSERT_EQ(sv_snapshot_head_hash(fd, &empty), 0);
    ASSERT(hash_after(fd, 5000, 1) != empty);
    ASSERT_EQ(hash_after(fd, 5000, 0), empty); /* zeros, as past the end */
    ASSERT_EQ(hash_after(fd, 9000, 1), empty);
    close(fd);
}
