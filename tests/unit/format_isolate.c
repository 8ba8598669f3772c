/* sf_check_isolated: a check that crashes, hangs or fails in the child is a
 * refusal with a message; the parent survives all of them. */
#include "runner.h"
#include "sf/isolate.h"
#include "sf/store.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int passes(void *arg, const char *path, char *err, size_t errlen)
{
    return 0;
}

static int fails(void *arg, const char *path, char *err, size_t errlen)
{
    snprintf(err, errlen, "%s: corrupt pack: %s", path, (const char *)arg);
    return SF_ECORRUPT;
}

static int crashes(void *arg, const char *path, char *err, size_t errlen)
{
    raise(*(int *)arg); /* what a damaged LMDB page does to a reader */
    return 0;
}

static int hangs(void *arg, const char *path, char *err, size_t errlen)
{
    for (;;)
        pause();
    return 0;
}

TEST(isolated_check_passes)
{
    char err[256] = "";
    ASSERT_EQ(sf_check_isolated(passes, NULL, "site.lmdb", 5000, err, sizeof err), SF_OK);
}

TEST(isolated_check_failure_keeps_code_and_message)
{
    char err[256] = "";
    int rc = sf_check_isolated(fails, "bad record", "site.lmdb", 5000, err, sizeof err);
    ASSERT_EQ(rc, SF_ECORRUPT);
    ASSERT_STR_EQ(err, "site.lmdb: corrupt pack: bad record");
}

TEST(isolated_check_crash_is_a_refusal)
{
    static int sigs[] = {SIGSEGV, SIGBUS, SIGABRT, SIGFPE};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        char err[256] = "";
        /* the sanitizers' handlers would turn the signal into a report and an
         * exit status: both must be refusals */
        int rc = sf_check_isolated(crashes, &sigs[i], "site.lmdb", 5000, err, sizeof err);
        ASSERT_EQ(rc, SF_ECORRUPT);
        ASSERT(strstr(err, "site.lmdb: corrupt pack: reading it crashed") == err);
    }
}

TEST(isolated_check_hang_is_a_refusal)
{
    char err[256] = "";
    int rc = sf_check_isolated(hangs, NULL, "site.lmdb", 200, err, sizeof err);
    /* a refusal of its own kind: it says nothing of which bytes changed */
    ASSERT_EQ(rc, SF_ETIMEDOUT);
    ASSERT(strstr(err, "did not finish in 200 ms") != NULL);
}

/* A large pack on a slow disk is not refused for the time its whole read
 * takes: the limit grows by a second for every 8 MiB of the file. */
TEST(check_limit_grows_with_the_pack)
{
    ASSERT_EQ(sf_check_timeout_ms(0), 60000);
    ASSERT_EQ(sf_check_timeout_ms(8u << 20), 61000);
    ASSERT_EQ(sf_check_timeout_ms(12u << 20), 61500);
    /* 16 GiB, 2048 s of reading allowed at 8 MiB/s: a minute was 7.5 GB
     * at 125 MB/s */
    ASSERT_EQ(sf_check_timeout_ms((uint64_t)16 << 30), 60000 + 2048000);
    ASSERT_EQ(sf_check_timeout_ms(UINT64_MAX), INT_MAX);
}

/* Bodies are content addressed: a body whose bytes do not hash to its key
 * (damage inside the body, which no structure check sees) is refused. */
/* sf_check_spawn's verdicts on what a child program prints and how it ends. */
static int spawned(const char *script, char *err, size_t errlen)
{
    char *argv[] = {"/bin/sh", "-c", (char *)script, NULL};
    return sf_check_spawn(argv[0], argv, "site.lmdb", 10000, -1, err, errlen);
}

TEST(spawned_check_passes_only_on_its_ok)
{
    char err[512] = "";
    ASSERT_EQ(spawned("echo " SF_CHECK_OK, err, sizeof err), SF_OK);
    /* an exit 0 without the report: a runtime that ends a crash with 0 */
    ASSERT_EQ(spawned("exit 0", err, sizeof err), SF_ECORRUPT);
    ASSERT(strstr(err, "site.lmdb: corrupt pack: reading it crashed") != NULL);
    ASSERT_EQ(spawned("echo okay", err, sizeof err), SF_ECORRUPT);
    /* a refusal keeps the child's reason; no verdict is no verdict */
    ASSERT_EQ(spawned("echo 'site.lmdb: corrupt pack: bad'; exit 1", err, sizeof err), SF_ECORRUPT);
    ASSERT_STR_EQ(err, "site.lmdb: corrupt pack: bad");
    ASSERT_EQ(spawned("exit 3", err, sizeof err), SF_ENOMEM);
    ASSERT_EQ(spawned("kill -SEGV $$", err, sizeof err), SF_ECORRUPT);
    ASSERT(strstr(err, "crashed (signal") != NULL);
}

/* The program executed and the name it is given apart (servd runs its
 * check from /proc/self/fd/N, named as itself); the name in messages. */
TEST(spawned_check_runs_prog_under_argv0)
{
    char err[512] = "";
    char *named[] = {"sf-named-check", "-c",
                     "[ \"$(tr '\\0' '\\n' < /proc/$$/cmdline | head -n 1)\" = sf-named-check ] "
                     "&& echo " SF_CHECK_OK,
                     NULL};
    ASSERT_EQ(sf_check_spawn("/bin/sh", named, "site.lmdb", 10000, -1, err, sizeof err), SF_OK);
    char *absent[] = {"sf-named-check", NULL};
    ASSERT_EQ(sf_check_spawn("/nonexistent/prog", absent, "site.lmdb", 10000, -1, err, sizeof err),
              SF_EIO);
    ASSERT(strstr(err, "site.lmdb: cannot check the pack: sf-named-check: ") == err);
}

/* Writes a byte to the descriptor *arg after 200 ms: a stop that comes
 * while the check runs. */
static void *cancel_later(void *arg)
{
    struct timespec d = {0, 200 * 1000 * 1000};
    nanosleep(&d, NULL);
    ssize_t n = write(*(int *)arg, "x", 1);
    (void)n;
    return NULL;
}

/* A check the caller abandons (servd stopping during a load) ends at once,
 * whether the stop came before the check or while it runs: the child is
 * killed, not waited for, and the answer is no verdict. */
TEST(spawned_check_is_abandoned_when_cancel_fd_is_readable)
{
    /* sleep itself, not a shell around it: a sleep left behind by a
     * killed shell would hold the test's output open for its 30 s */
    char *argv[] = {"/bin/sleep", "30", NULL};
    for (int during = 0; during < 2; during++) {
        int fds[2];
        pthread_t t;
        ASSERT_EQ(pipe(fds), 0);
        if (during)
            ASSERT_EQ(pthread_create(&t, NULL, cancel_later, &fds[1]), 0);
        else
            ASSERT_EQ(write(fds[1], "x", 1), 1);
        char err[512] = "";
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        int rc = sf_check_spawn(argv[0], argv, "site.lmdb", 60000, fds[0], err, sizeof err);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        if (during)
            pthread_join(t, NULL);
        ASSERT_EQ(rc, SF_ECANCELED);
        ASSERT_STR_EQ(err, "site.lmdb: the check of the pack was abandoned; not a verdict");
        ASSERT(t1.tv_sec - t0.tv_sec < 20); /* not the child's 30 s */
        /* reaped: no child of this process is left */
        ASSERT(waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD);
        close(fds[0]);
        close(fds[1]);
    }
}

TEST(structure_check_refuses_damaged_body)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/body.lmdb", t_tmpdir());
    sf_writer *w;
    char err[512];
    ASSERT_EQ(sf_writer_open(path, 1 << 20, &w, err, sizeof err), SF_OK);
    uint8_t key[SF_KEY_LEN] = {0}; /* not the SHA-256 of "hello" */
    ASSERT_EQ(sf_writer_put_body(w, key, "hello", 5), SF_OK);
    sf_meta m;
    memset(&m, 0, sizeof m);
    sf_pack_id *id; /* the right id (of no paths): only the body is wrong */
    ASSERT_EQ(sf_pack_id_begin(&id), SF_OK);
    ASSERT_EQ(sf_pack_id_end(id, m.pack_id), SF_OK);
    ASSERT_EQ(sf_writer_commit(w, &m, err, sizeof err), SF_OK);
    int rc = sf_check_isolated(sf_pack_check_structure, NULL, path, 5000, err, sizeof err);
    ASSERT_EQ(rc, SF_ECORRUPT);
    ASSERT(strstr(err, "does not match its SHA-256") != NULL);
}

/* ---- The check reads the pack back in large folios ---- */

/* Fraction (0..1) of the pages of path's page cache that sit in large
 * folios, from /proc/kpageflags; -1 when this system cannot say (no access
 * to the page flags) or when no page is cached. Maps the file to find the
 * pages: touching a cached page does not change its folio. */
static double large_fraction(const char *path)
{
    int fd = open(path, O_RDONLY);
    ASSERT(fd >= 0);
    struct stat st;
    ASSERT_EQ(fstat(fd, &st), 0);
    size_t len = (size_t)st.st_size, npages = (len + 4095) / 4096;
    unsigned char *map = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
    ASSERT(map != MAP_FAILED);
    close(fd);
    volatile unsigned sum = 0;
    for (size_t i = 0; i < npages; i++)
        sum += map[i * 4096];
    (void)sum; /* the reads fault the pages in */
    int pm = open("/proc/self/pagemap", O_RDONLY), kf = open("/proc/kpageflags", O_RDONLY);
    size_t large = 0, seen = 0;
    for (size_t i = 0; pm >= 0 && kf >= 0 && i < npages; i++) {
        uint64_t e, flags;
        off_t at = (off_t)(((uintptr_t)map / 4096 + i) * 8);
        if (pread(pm, &e, 8, at) != 8 || !(e >> 63) || (e & ((1ULL << 55) - 1)) == 0)
            continue; /* not present, or no PFN shown (not privileged) */
        if (pread(kf, &flags, 8, (off_t)((e & ((1ULL << 55) - 1)) * 8)) != 8)
            continue;
        seen++;
        large += (flags >> 15 & 1) || (flags >> 16 & 1); /* KPF_COMPOUND_HEAD / _TAIL */
    }
    if (pm >= 0)
        close(pm);
    if (kf >= 0)
        close(kf);
    munmap(map, len);
    return seen ? (double)large / (double)seen : -1;
}

/* Drops path's cached pages; @return whether none is left (mincore). */
static int evict(const char *path)
{
    int fd = open(path, O_RDONLY);
    ASSERT(fd >= 0);
    fdatasync(fd);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    struct stat st;
    ASSERT_EQ(fstat(fd, &st), 0);
    size_t len = (size_t)st.st_size, npages = (len + 4095) / 4096, cached = 0;
    void *map = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
    ASSERT(map != MAP_FAILED);
    unsigned char *vec = malloc(npages);
    ASSERT(vec && mincore(map, len, vec) == 0);
    for (size_t i = 0; i < npages; i++)
        cached += vec[i] & 1;
    free(vec);
    munmap(map, len);
    close(fd);
    return cached == 0;
}

/* A pack whose pages were dropped (a restart after memory pressure) comes
 * back through the check's hashing walk. Read back as 4 KiB pages, every
 * sendfile() of a body costs a page reference per 4 KiB; the check brings
 * it back in large folios instead. Meaningful where the file system keeps
 * large folios in the page cache (as written files show) and the page flags
 * are readable; elsewhere it is skipped, saying why. */
TEST(structure_check_reads_the_pack_back_in_large_folios)
{
    char path[4096], probe[4096];
    snprintf(path, sizeof path, "%s/big.lmdb", t_tmpdir());
    snprintf(probe, sizeof probe, "%s/probe", t_tmpdir());

    /* Does this file system cache large folios at all? A written file shows. */
    static unsigned char bytes[1 << 20];
    for (size_t i = 0; i < sizeof bytes; i++)
        bytes[i] = (unsigned char)(i * 2654435761u >> 13);
    FILE *f = fopen(probe, "wb");
    ASSERT(f && fwrite(bytes, 1, sizeof bytes, f) == sizeof bytes && fclose(f) == 0);
    double written = large_fraction(probe);
    if (written < 0)
        t_skip("the page flags (/proc/kpageflags) are not readable here");
    if (written < 0.5)
        t_skip("this page cache keeps a written file in large folios for %.2f of its pages: "
               "nothing to compare",
               written);
    if (!evict(probe))
        t_skip("this file system keeps pages that POSIX_FADV_DONTNEED should drop");

    sf_writer *w;
    char err[512];
    ASSERT_EQ(sf_writer_open(path, 8 << 20, &w, err, sizeof err), SF_OK);
    for (int i = 0; i < 8; i++) { /* eight 128 KiB bodies: 1 MiB of overflow pages */
        const unsigned char *body = bytes + i * (128 << 10);
        uint8_t key[SF_KEY_LEN];
        unsigned mdlen;
        ASSERT(EVP_Digest(body, 128 << 10, key, &mdlen, EVP_sha256(), NULL) && mdlen == SF_KEY_LEN);
        ASSERT_EQ(sf_writer_put_body(w, key, body, 128 << 10), SF_OK);
    }
    sf_meta m;
    memset(&m, 0, sizeof m);
    sf_pack_id *id;
    ASSERT_EQ(sf_pack_id_begin(&id), SF_OK);
    ASSERT_EQ(sf_pack_id_end(id, m.pack_id), SF_OK);
    ASSERT_EQ(sf_writer_commit(w, &m, err, sizeof err), SF_OK);
    ASSERT(evict(path));

    ASSERT_EQ(sf_check_isolated(sf_pack_check_structure, NULL, path, 5000, err, sizeof err), SF_OK);
    double back = large_fraction(path);
    printf("pages in large folios: %.2f of a written file, %.2f of the pack read back\n", written,
           back);
    /* without the check's preload: 0.06 here; a fragmented memory may give
     * fewer large folios than the written file got, not a few */
    ASSERT(back >= written / 2);
}
