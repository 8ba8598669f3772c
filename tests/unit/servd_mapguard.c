/*
 * The SIGBUS guard of pack maps (servd/mapguard.c): a read past the end of
 * a guarded map cut short reads zeros and sets its flag; every other SIGBUS
 * still ends the process; slots run out and come back, and while none is
 * free no pack is loaded unguarded. The process-killing
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
