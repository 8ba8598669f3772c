/* The spill file of a build's compressed variants (spill.h): bytes put from
 * several threads at once come back whole at their offsets, and the file
 * has no name in its directory. */
#include "runner.h"
#include "spill.h"

#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NTHREADS 4
#define NPUTS    300

typedef struct putter {
    pk_spill *s;
    int id;
    uint64_t off[NPUTS];
    int failed;
} putter;

/* Chunk i of thread id: its own length and bytes. */
static size_t chunk_len(int id, int i)
{
    return (size_t)(1 + (id * 7919 + i * 104729) % 9000);
}

static void chunk_fill(uint8_t *p, size_t n, int id, int i)
{
    for (size_t k = 0; k < n; k++)
        p[k] = (uint8_t)(id * 31 + i * 7 + k);
}

static void *put_chunks(void *arg)
{
    putter *t = arg;
    uint8_t buf[9000];
    char err[256];
    for (int i = 0; i < NPUTS && !t->failed; i++) {
        size_t n = chunk_len(t->id, i);
        chunk_fill(buf, n, t->id, i);
        t->failed = pk_spill_put(t->s, buf, n, &t->off[i], err, sizeof err) != 0;
    }
    return NULL;
}

static size_t entries(const char *dir)
{
    DIR *d = opendir(dir);
    size_t n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    if (d)
        closedir(d);
    return n;
}

/* A spill file in the test's own directory (t_tmpdir), or the test fails. */
static pk_spill *spill_open_in(const char *dir)
{
    char err[256];
    pk_spill *s = NULL;
    if (pk_spill_open(dir, &s, err, sizeof err) != 0)
        t__fail(__FILE__, __LINE__, "%s", err);
    return s;
}

TEST(spill_puts_from_threads_come_back_at_their_offsets)
{
    const char *dir = t_tmpdir();
    char err[256];
    pk_spill *s = spill_open_in(dir);
    ASSERT_EQ(entries(dir), 0); /* no name, even while open */
    static putter t[NTHREADS];
    pthread_t th[NTHREADS];
    uint64_t total = 0;
    for (int id = 0; id < NTHREADS; id++) {
        t[id] = (putter){.s = s, .id = id};
        ASSERT_EQ(pthread_create(&th[id], NULL, put_chunks, &t[id]), 0);
        for (int i = 0; i < NPUTS; i++)
            total += chunk_len(id, i);
    }
    for (int id = 0; id < NTHREADS; id++) {
        pthread_join(th[id], NULL);
        ASSERT_EQ(t[id].failed, 0);
    }
    ASSERT_EQ(pk_spill_size(s), total);
    uint8_t want[9000], got[9000];
    for (int id = 0; id < NTHREADS; id++)
        for (int i = 0; i < NPUTS; i++) {
            size_t n = chunk_len(id, i);
            chunk_fill(want, n, id, i);
            ASSERT_EQ(pk_spill_get(s, t[id].off[i], got, n, err, sizeof err), 0);
            if (memcmp(got, want, n) != 0)
                t__fail(__FILE__, __LINE__, "chunk %d of thread %d came back changed", i, id);
        }
    /* past the end: an error, not bytes that were never put */
    ASSERT_EQ(pk_spill_get(s, total - 1, got, 2, err, sizeof err), -1);
    ASSERT(strstr(err, "it ended early") != NULL);
    pk_spill_close(s);
    ASSERT_EQ(entries(dir), 0);
}

TEST(spill_in_a_missing_directory_names_it)
{
    char err[256];
    pk_spill *s = NULL;
    ASSERT_EQ(pk_spill_open("/nonexistent-servd-dir", &s, err, sizeof err), -1);
    ASSERT(s == NULL);
    ASSERT(strstr(err, "cannot create a temporary file in /nonexistent-servd-dir: No such "
                       "file or directory") != NULL);
}

/* The spill file open in dir: a link of /proc/self/fd/ into dir that says
 * "(deleted)". @return its descriptor, or -1. */
static int spill_fd(const char *dir)
{
    for (int fd = 3; fd < 1024; fd++) {
        char link[64], name[4096];
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        ssize_t n = readlink(link, name, sizeof name - 1);
        if (n <= 0)
            continue;
        name[n] = '\0';
        if (strncmp(name, dir, strlen(dir)) == 0 && strstr(name, "(deleted)"))
            return fd;
    }
    return -1;
}

TEST(spill_gives_back_the_blocks_of_dropped_bytes)
{
    const char *dir = t_tmpdir();
    char err[256];
    pk_spill *s = spill_open_in(dir);
    int fd = spill_fd(dir);
    ASSERT(fd >= 0);
    enum { N = 64, LEN = 10007 }; /* chunks across block boundaries */
    static uint8_t chunk[LEN];
    uint64_t off[N];
    for (int i = 0; i < N; i++) {
        memset(chunk, 'a' + i % 26, sizeof chunk);
        ASSERT_EQ(pk_spill_put(s, chunk, sizeof chunk, &off[i], err, sizeof err), 0);
    }
    ASSERT_EQ(fsync(fd), 0);
    struct stat st;
    ASSERT_EQ(fstat(fd, &st), 0);
    blkcnt_t full = st.st_blocks;
    ASSERT(full * 512 >= (blkcnt_t)N * LEN);
    /* all but chunk 7, in an order of their own (the write's is by digest) */
    for (int i = N - 1; i >= 0; i--)
        if (i != 7)
            pk_spill_drop(s, off[i], LEN);
    ASSERT_EQ(fstat(fd, &st), 0);
    if (st.st_blocks == full) {
        pk_spill_close(s);
        t_skip("the file system of /tmp does not punch holes");
    }
    /* what is left: the blocks chunk 7 touches (and the file system's own,
     * as ext4's extent blocks) */
    ASSERT(st.st_blocks < full / 16);
    uint8_t got[LEN];
    ASSERT_EQ(pk_spill_get(s, off[7], got, LEN, err, sizeof err), 0);
    memset(chunk, 'a' + 7, sizeof chunk);
    ASSERT(memcmp(got, chunk, LEN) == 0);
    pk_spill_drop(s, off[7], LEN);
    ASSERT_EQ(fstat(fd, &st), 0);
    ASSERT(st.st_blocks * 512 <= 2 * (blkcnt_t)st.st_blksize); /* ext4's extent blocks */
    pk_spill_close(s);
}
