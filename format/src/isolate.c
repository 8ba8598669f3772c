/* isolate.c - run a pack check in a child process (see sf/isolate.h). */
#include "sf/cpus.h"
#include "sf/isolate.h"
#include "sf/path.h"
#include "sf/store.h"

#include <errno.h>
#include <spawn.h>
#include <openssl/evp.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* What the child sends back: its return code, then its message. */
struct report {
    int32_t rc;
    char msg[1024];
};

void (*sf__isolate_child_hook)(void);

static void child(sf_check_fn check, void *arg, const char *path, int fd, pid_t parent)
{
    /* Dies with the program that started it (a kill, a CI job's timeout):
     * an orphan would go on reading the whole pack, or spinning where a
     * damaged one makes liblmdb loop, for nothing. The parent may have
     * ended before the request. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(0);
    if (sf__isolate_child_hook)
        sf__isolate_child_hook();
    struct report r;
    memset(&r, 0, sizeof r);
    r.rc = check(arg, path, r.msg, sizeof r.msg);
    size_t n = offsetof(struct report, msg) + strnlen(r.msg, sizeof r.msg);
    const char *p = (const char *)&r;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        p += w;
        n -= (size_t)w;
    }
    _exit(0); /* no atexit handlers, no stdio flush of the parent's buffers */
}

int sf_check_timeout_ms(uint64_t bytes)
{
    uint64_t ms = SF_CHECK_TIMEOUT_MS + bytes / SF_CHECK_RATE * 1000 +
                  bytes % SF_CHECK_RATE * 1000 / SF_CHECK_RATE;
    return ms > INT_MAX ? INT_MAX : (int)ms;
}

/* "reading it did not finish in 200 ms", or "in 61 s" from 10 s on. */
static void timed_out_msg(const char *path, int timeout_ms, char *err, size_t errlen)
{
    if (timeout_ms < 10000)
        snprintf(err, errlen, "%s: corrupt pack: reading it did not finish in %d ms", path,
                 timeout_ms);
    else
        snprintf(err, errlen, "%s: corrupt pack: reading it did not finish in %d s", path,
                 timeout_ms / 1000);
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Reads the child's report from fd into buf[0, cap) until the child closes
 * its end, cap bytes came, timeout_ms passed, or cancel_fd (-1: none) became
 * readable; then closes fd, kills the child if it timed out or was
 * cancelled, and reaps it into *status. @return the bytes read; *ended
 * says why it stopped early (0: the report is whole; COLLECT_TIMED_OUT,
 * COLLECT_CANCELLED), *read_errno is the error of a poll or read that
 * failed (0: none), after which the report is lost whatever the child
 * said. */
enum { COLLECT_TIMED_OUT = 1, COLLECT_CANCELLED };
static size_t collect(int fd, pid_t pid, int cancel_fd, void *buf, size_t cap, int timeout_ms,
                      int *ended, int *read_errno, int *status)
{
    size_t got = 0;
    int64_t deadline = now_ms() + timeout_ms;
    *ended = 0;
    *read_errno = 0;
    while (got < cap) {
        int64_t left = deadline - now_ms();
        if (left <= 0) {
            *ended = COLLECT_TIMED_OUT;
            break;
        }
        struct pollfd p[2] = {{.fd = fd, .events = POLLIN}, {.fd = cancel_fd, .events = POLLIN}};
        int n = poll(p, cancel_fd >= 0 ? 2 : 1, (int)left);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            *ended = n == 0 ? COLLECT_TIMED_OUT : 0;
            *read_errno = n < 0 ? errno : 0;
            break;
        }
        if (p[1].revents) {
            *ended = COLLECT_CANCELLED;
            break;
        }
        ssize_t rd = read(fd, (char *)buf + got, cap - got);
        if (rd < 0 && errno == EINTR)
            continue;
        if (rd < 0)
            *read_errno = errno;
        if (rd <= 0)
            break;
        got += (size_t)rd;
    }
    close(fd);
    if (*ended || *read_errno)
        kill(pid, SIGKILL);
    /* -1: not reaped (SIGCHLD ignored reaps children itself): no status,
     * which the callers must not read as "exited 0" */
    *status = -1;
    pid_t r;
    while ((r = waitpid(pid, status, 0)) < 0 && errno == EINTR)
        ;
    if (r != pid)
        *status = -1;
    return got;
}

/* A signal someone else sends to stop a process (kill, a service manager,
 * the OOM killer, a terminal) rather than one a bad read raises (SIGSEGV,
 * SIGBUS, SIGABRT, SIGFPE...): a child that died of it said nothing about
 * the pack. */
static int stopped_from_outside(int sig)
{
    return sig == SIGKILL || sig == SIGTERM || sig == SIGINT || sig == SIGHUP || sig == SIGQUIT;
}

/* The refusal of a check stopped that way: no verdict (see isolate.h). */
static int stopped(const char *path, int sig, char *err, size_t errlen)
{
    snprintf(err, errlen, "%s: the check of the pack was stopped (signal %s); not a verdict", path,
             strsignal(sig));
    return SF_ENOMEM;
}

/* The refusal of a check whose report could not be read: no verdict. */
static int report_lost(const char *path, int e, char *err, size_t errlen)
{
    snprintf(err, errlen, "%s: cannot check the pack: reading the check's report: %s", path,
             strerror(e));
    return SF_EIO;
}

/* The refusal of a check whose child could not be waited for: no verdict. */
static int not_waited(const char *path, char *err, size_t errlen)
{
    snprintf(err, errlen, "%s: cannot check the pack: the check's exit status was lost", path);
    return SF_EIO;
}

/* A crash or a refusal of a file written while it was checked (a cp in
 * place cuts it, then writes it again) is no verdict: says so in err.
 * @return 1 when the file at path is no longer as before. */
static int written_meanwhile(const char *path, const struct stat *before, char *err, size_t errlen)
{
    struct stat after;
    if (stat(path, &after) != 0 ||
        (after.st_size == before->st_size && after.st_mtim.tv_sec == before->st_mtim.tv_sec &&
         after.st_mtim.tv_nsec == before->st_mtim.tv_nsec))
        return 0;
    snprintf(err, errlen, "%s: the file %s while it was checked (written in place?)", path,
             after.st_size < before->st_size ? "was cut short" : "changed");
    return 1;
}

int sf_check_isolated(sf_check_fn check, void *arg, const char *path, int timeout_ms, char *err,
                      size_t errlen)
{
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
        snprintf(err, errlen, "%s: cannot check the pack: pipe: %s", path, strerror(errno));
        return SF_EIO;
    }
    struct stat before;
    int sized = stat(path, &before) == 0;
    pid_t parent = getpid(), pid = fork();
    if (pid < 0) {
        snprintf(err, errlen, "%s: cannot check the pack: fork: %s", path,
                 sf_spawn_strerror(errno));
        close(fds[0]);
        close(fds[1]);
        return SF_EIO;
    }
    if (pid == 0) {
        close(fds[0]);
        child(check, arg, path, fds[1], parent);
    }
    close(fds[1]);

    /* Read the report until the child closes its end (exit or death). */
    struct report r;
    int ended, read_errno, st;
    size_t got = collect(fds[0], pid, -1, &r, sizeof r, timeout_ms, &ended, &read_errno, &st);
    if (read_errno)
        return report_lost(path, read_errno, err, errlen);

    if (ended) {
        timed_out_msg(path, timeout_ms, err, errlen);
        return SF_ETIMEDOUT;
    }
    if (st == -1)
        return not_waited(path, err, errlen);
    if (WIFSIGNALED(st) && stopped_from_outside(WTERMSIG(st)))
        return stopped(path, WTERMSIG(st), err, errlen);
    if (WIFSIGNALED(st) || !WIFEXITED(st) || WEXITSTATUS(st) != 0 ||
        got < offsetof(struct report, msg)) {
        /* a crash (SIGBUS, or a sanitizer's report of it) reading a file
         * that was written meanwhile: written in place, not damaged */
        if (sized && written_meanwhile(path, &before, err, errlen))
            return SF_EIO;
        int sig = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
        snprintf(err, errlen, "%s: corrupt pack: reading it crashed (%s%s%s)", path,
                 sig ? "signal " : "exit status", sig ? strsignal(sig) : "",
                 sig ? "" : (WIFEXITED(st) && WEXITSTATUS(st) ? " non-zero" : " without a report"));
        return SF_ECORRUPT;
    }
    /* a refusal (corrupt, LMDB's MDB_CORRUPTED) of what was being written */
    if (r.rc != 0 && r.rc != SF_ENOMEM && sized && written_meanwhile(path, &before, err, errlen))
        return SF_EIO;
    if (r.rc != 0) {
        size_t n = got - offsetof(struct report, msg);
        snprintf(err, errlen, "%.*s", (int)n, r.msg);
        return r.rc;
    }
    return SF_OK;
}

void sf_name_file(char *err, size_t errlen, const char *fdpath, const char *path)
{
    size_t n = strlen(fdpath);
    char tmp[1024];
    if (strncmp(err, fdpath, n) != 0)
        return;
    snprintf(tmp, sizeof tmp, "%s%s", path, err + n);
    snprintf(err, errlen, "%s", tmp);
}

int sf_fd_path(int fd, const char *path, char *out, size_t outlen, char *err, size_t errlen)
{
    struct stat named, open_file;
    snprintf(out, outlen, "/proc/self/fd/%d", fd);
    if (fstat(fd, &open_file) != 0) { /* the file's own error (EIO), not /proc's */
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return SF_EIO;
    }
    if (stat(out, &named) != 0) {
        if (errno != ENOENT && errno != ENOTDIR && errno != EACCES) {
            /* the name leads on, and the file's own stat failed (EIO) */
            snprintf(err, errlen, "%s: %s", path, strerror(errno));
            return SF_EIO;
        }
    } else if (named.st_dev == open_file.st_dev && named.st_ino == open_file.st_ino) {
        return 0;
    }
    snprintf(err, errlen, "%s: cannot reach the open file as %s (is /proc mounted?)", path, out);
    return SF_EIO;
}

extern char **environ;

int sf_check_spawn(const char *prog, char *const argv[], const char *path, int timeout_ms,
                   int cancel_fd, char *err, size_t errlen)
{
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
        snprintf(err, errlen, "%s: cannot check the pack: pipe: %s", path, strerror(errno));
        return SF_EIO;
    }
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    pid_t pid;
    int rc = posix_spawn_file_actions_init(&fa);
    if (rc == 0 && (rc = posix_spawnattr_init(&attr)) != 0)
        posix_spawn_file_actions_destroy(&fa);
    if (rc == 0) {
        /* The child starts with no signal blocked, whatever the calling
         * thread blocks (a thread pool's may block them all): a kill of
         * the check from outside must not wait in its queue. */
        sigset_t none;
        sigemptyset(&none);
        /* without the dup2 the child's report would go to our stdout */
        if ((rc = posix_spawn_file_actions_adddup2(&fa, fds[1], 1)) == 0 &&
            (rc = posix_spawnattr_setsigmask(&attr, &none)) == 0 &&
            (rc = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK)) == 0)
            rc = posix_spawn(&pid, prog, &fa, &attr, argv, environ);
        posix_spawnattr_destroy(&attr);
        posix_spawn_file_actions_destroy(&fa);
    }
    close(fds[1]);
    if (rc != 0) {
        close(fds[0]);
        snprintf(err, errlen, "%s: cannot check the pack: %s: %s", path, argv[0],
                 sf_spawn_strerror(rc));
        return SF_EIO;
    }
    char msg[1024];
    int ended, read_errno, st;
    size_t got =
        collect(fds[0], pid, cancel_fd, msg, sizeof msg - 1, timeout_ms, &ended, &read_errno, &st);
    if (read_errno)
        return report_lost(path, read_errno, err, errlen);
    msg[got] = '\0';
    while (got > 0 && (msg[got - 1] == '\n' || msg[got - 1] == '\r'))
        msg[--got] = '\0';
    if (ended == COLLECT_CANCELLED) {
        snprintf(err, errlen, "%s: the check of the pack was abandoned; not a verdict", path);
        return SF_ECANCELED;
    }
    if (ended) {
        timed_out_msg(path, timeout_ms, err, errlen);
        return SF_ETIMEDOUT;
    }
    if (st == -1)
        return not_waited(path, err, errlen);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
        if (strcmp(msg, SF_CHECK_OK) == 0)
            return SF_OK;
        snprintf(err, errlen, "%s: corrupt pack: reading it crashed (exit status 0 without \"%s\")",
                 path, SF_CHECK_OK);
        return SF_ECORRUPT;
    }
    if (WIFEXITED(st) && WEXITSTATUS(st) == SF_CHECK_EXIT_NO_VERDICT) {
        /* the child ran out of something; its message may not have come */
        if (got > 0)
            snprintf(err, errlen, "%s", msg);
        else
            snprintf(err, errlen, "%s: cannot check the pack: the check ran out of memory", path);
        return SF_ENOMEM;
    }
    if (WIFEXITED(st) && got > 0) {
        snprintf(err, errlen, "%s", msg);
        return SF_ECORRUPT;
    }
    int sig = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
    if (stopped_from_outside(sig))
        return stopped(path, sig, err, errlen);
    snprintf(err, errlen, "%s: corrupt pack: reading it crashed (%s%s)", path,
             sig ? "signal " : "exit status without a report", sig ? strsignal(sig) : "");
    return SF_ECORRUPT;
}

struct walk {
    int hash;
    sf_reader *rd;
    const char *path;
    char *err;
    size_t errlen;
};

static int check_variants(struct walk *w, sf_view name, const sf_entry *e)
{
    for (unsigned i = 0; i < e->nvariants; i++) {
        sf_view body;
        int rc = sf_body(w->rd, &e->variants[i], &body);
        if (rc != 0) {
            char show[256]; /* key bytes are untrusted */
            sf_escape(name.ptr, name.len, show, sizeof show);
            snprintf(w->err, w->errlen, "%s: corrupt pack: the %s body of %s %s", w->path,
                     sf_encoding_name(e->variants[i].encoding), show,
                     rc == SF_ENOTFOUND  ? "is missing"
                     : rc == SF_ECORRUPT ? "is damaged (its length is wrong or runs past the end "
                                           "of the file)"
                                         : sf_strerror(rc));
            return rc;
        }
    }
    return 0;
}

/* A path the walk found must also be found by a lookup, which servd does
 * for every request: the walk follows the B-tree's child links but never
 * compares the keys in its branch pages, and a damaged branch key sends
 * the binary search of sf_lookup to the wrong child (a 404 for whole
 * ranges of paths). The same record, at the same place in the map. */
static int walk_path(void *arg, sf_view name, const sf_entry *e)
{
    struct walk *w = arg;
    sf_entry again;
    int rc = sf_lookup(w->rd, name.ptr, name.len, &again);
    if (rc != 0 || again.kind != e->kind || again.mime.ptr != e->mime.ptr ||
        again.target.ptr != e->target.ptr) {
        char show[256]; /* key bytes are untrusted */
        sf_escape(name.ptr, name.len, show, sizeof show);
        snprintf(w->err, w->errlen, "%s: corrupt pack: %s is in the paths index but a lookup %s",
                 w->path, show, rc == 0 ? "finds another record" : "does not find it");
        return SF_ECORRUPT;
    }
    return check_variants(arg, name, e);
}

/* Every body is content addressed: its key must be the SHA-256 of its bytes.
 * This catches damage inside bodies, which no structure check can see. */
static int walk_body(void *arg, const uint8_t key[SF_KEY_LEN], sf_view bytes)
{
    struct walk *w = arg;
    if (!w->hash)
        return 0;
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    if (!EVP_Digest(bytes.ptr, bytes.len, md, &mdlen, EVP_sha256(), NULL) || mdlen != SF_KEY_LEN) {
        snprintf(w->err, w->errlen, "%s: cannot hash the bodies (OpenSSL)", w->path);
        return SF_EIO;
    }
    if (memcmp(md, key, SF_KEY_LEN) != 0) {
        char hex[2 * 8 + 1];
        sf_hex(key, 8, hex);
        snprintf(w->err, w->errlen,
                 "%s: corrupt pack: a stored body (key %s...) does not match its SHA-256", w->path,
                 hex);
        return SF_ECORRUPT;
    }
    return 0;
}

/* How a failed check begins its message: "corrupt pack" is a verdict on
 * the file, which running out of memory or a failed read is not. */
static const char *failed(int rc)
{
    return rc == SF_ENOMEM || rc == SF_EIO ? "cannot check the pack" : "corrupt pack";
}

/* The pack id in meta must be the one the records hash to (sf_pack_id_compute):
 * a byte changed inside a record after packing - a pre-rendered header
 * block, a Last-Modified, a MIME type - decodes fine and would be served as
 * is. Cheap: one SHA-256 pass over the records, a few hundred bytes a path. */
static int check_pack_id(sf_pack *pack, sf_reader *rd, const char *path, char *err, size_t errlen)
{
    uint8_t id[SF_PACK_ID_LEN];
    int rc = sf_pack_id_compute(rd, id);
    if (rc != 0) {
        snprintf(err, errlen, "%s: %s: cannot recompute the pack id: %s", path, failed(rc),
                 sf_strerror(rc));
        return rc;
    }
    const uint8_t *want = sf_pack_meta(pack)->pack_id;
    if (memcmp(id, want, SF_PACK_ID_LEN) != 0) {
        char got_hex[2 * SF_PACK_ID_LEN + 1], want_hex[2 * SF_PACK_ID_LEN + 1];
        sf_pack_id_hex(id, got_hex);
        sf_pack_id_hex(want, want_hex);
        snprintf(err, errlen,
                 "%s: corrupt pack: pack id mismatch: entry records were changed after packing "
                 "(meta says %s, the records hash to %s)",
                 path, want_hex, got_hex);
        return SF_ECORRUPT;
    }
    /* Format minor 1: the status:404 entry, outside the paths, has its own id. */
    const sf_meta *m = sf_pack_meta(pack);
    if (!sf_meta_has_id_404(m))
        return 0;
    if ((rc = sf_pack_id_404(rd, id)) != 0) {
        snprintf(err, errlen, "%s: %s: cannot recompute the 404 entry's id: %s", path, failed(rc),
                 sf_strerror(rc));
        return rc;
    }
    if (memcmp(id, m->id_404, SF_PACK_ID_LEN) != 0) {
        char got_hex[2 * SF_PACK_ID_LEN + 1], want_hex[2 * SF_PACK_ID_LEN + 1];
        sf_pack_id_hex(id, got_hex);
        sf_pack_id_hex(m->id_404, want_hex);
        snprintf(err, errlen,
                 "%s: corrupt pack: pack id mismatch: the status:404 entry was changed after "
                 "packing (meta says %s, the entry hashes to %s)",
                 path, want_hex, got_hex);
        return SF_ECORRUPT;
    }
    return 0;
}

/*
 * Brings the whole pack into the page cache before LMDB reads a byte of it,
 * as large folios where the kernel and the file system can (madvise
 * MADV_HUGEPAGE, then MADV_POPULATE_READ). The hashing walk reads every body
 * anyway, so this adds no I/O; it decides the size of the cached pages. A
 * pack read back after its pages were dropped otherwise comes in as 4 KiB
 * pages (LMDB's pread of the header, then read-around on each fault), and
 * sendfile() takes and drops a reference on every page it sends from: a
 * 37 KB body costs ten of them instead of one or two (bench/RESULTS.md,
 * "Page-cache state": 7-9% of servd's CPU per W2 response). Pages already
 * cached keep their size.
 *
 * Only for a regular file that starts like an LMDB file, and only when it
 * fits in half the memory this process can get (the kernel's MemAvailable,
 * or the cgroup's room if less): a larger pack would be read twice
 * (populated, partly dropped, walked), and anything else is for
 * sf_pack_open to refuse. Best effort: any failure leaves the pack to be
 * read as before.
 */
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22 /* Linux 5.14; older headers lack it, older kernels refuse it */
#endif

/* The first number in file path, or UINT64_MAX when it is absent or "max". */
static uint64_t read_u64(const char *path, const char *prefix)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return UINT64_MAX;
    char line[256];
    unsigned long long v = 0;
    int found = 0;
    size_t plen = strlen(prefix);
    while (!found && fgets(line, sizeof line, f))
        if (strncmp(line, prefix, plen) == 0 && sscanf(line + plen, "%llu", &v) == 1)
            found = 1;
    fclose(f);
    return found ? (uint64_t)v : UINT64_MAX;
}

/* Bytes this process can have in memory without pushing out its own pages. */
static uint64_t mem_room(void)
{
    uint64_t kib = read_u64("/proc/meminfo", "MemAvailable:");
    uint64_t room = kib == UINT64_MAX ? 0 : kib * 1024;
    /* The memory cgroup: "0::/path" (v2, limits under /sys/fs/cgroup) or
     * "N:memory:/path" (v1, under /sys/fs/cgroup/memory) in /proc/self/cgroup. */
    FILE *f = fopen("/proc/self/cgroup", "re");
    char line[512], file[640];
    if (!f)
        return room;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        const char *v1 = strstr(line, ":memory:");
        const char *dir = strncmp(line, "0::", 3) == 0 ? line + 3 : v1 ? v1 + 8 : NULL;
        if (!dir)
            continue;
        snprintf(file, sizeof file, "/sys/fs/cgroup%s%s/%s", v1 ? "/memory" : "", dir,
                 v1 ? "memory.limit_in_bytes" : "memory.max");
        uint64_t max = read_u64(file, "");
        snprintf(file, sizeof file, "/sys/fs/cgroup%s%s/%s", v1 ? "/memory" : "", dir,
                 v1 ? "memory.usage_in_bytes" : "memory.current");
        uint64_t cur = read_u64(file, "");
        if (max != UINT64_MAX && cur != UINT64_MAX) {
            uint64_t left = max > cur ? max - cur : 0;
            if (left < room)
                room = left;
        }
    }
    fclose(f);
    return room;
}

static void preload(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO must not block here */
    if (fd < 0)
        return;
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size >= 4096 &&
        (uint64_t)st.st_size <= SIZE_MAX && (uint64_t)st.st_size <= mem_room() / 2) {
        size_t len = (size_t)st.st_size;
        const unsigned char *map = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
        if (map != MAP_FAILED) {
            (void)madvise((void *)map, len, MADV_HUGEPAGE);
            if (sf_lmdb_magic(map, len))
                (void)madvise((void *)map, len, MADV_POPULATE_READ);
            munmap((void *)map, len);
        }
    }
    close(fd);
}

int sf_pack_check_structure(void *arg, const char *path, char *err, size_t errlen)
{
    sf_pack *pack;
    sf_reader *rd;
    if (arg != SF_CHECK_NO_HASH)
        preload(path);
    int rc = sf_pack_open(path, &pack, err, errlen);
    if (rc != 0)
        return rc;
    if ((rc = sf_reader_begin(pack, &rd)) != 0) {
        snprintf(err, errlen, "%s: cannot read the pack: %s", path, sf_strerror(rc));
        goto out_close;
    }
    struct walk w = {arg != SF_CHECK_NO_HASH, rd, path, err, errlen};
    char why[256] = "";
    err[0] = '\0';
    rc = sf_foreach_path(rd, walk_path, &w, why, sizeof why);
    if (rc != 0) {
        if (!err[0])
            snprintf(err, errlen, "%s: %s: %s", path, failed(rc), why[0] ? why : sf_strerror(rc));
        goto out_end;
    }
    sf_entry e;
    rc = sf_lookup_special(rd, "status:404", &e);
    if (rc == 0) {
        sf_view name = {"status:404", 10};
        if ((rc = check_variants(&w, name, &e)) != 0)
            goto out_end;
    } else if (rc != SF_ENOTFOUND) {
        snprintf(err, errlen, "%s: %s: the 404 entry cannot be read: %s", path, failed(rc),
                 sf_strerror(rc));
        goto out_end;
    }
    if (w.hash && (rc = check_pack_id(pack, rd, path, err, errlen)) != 0)
        goto out_end;
    err[0] = '\0';
    if ((rc = sf_foreach_body(rd, walk_body, &w)) != 0 && !err[0])
        snprintf(err, errlen, "%s: %s: walking the bodies: %s", path, failed(rc), sf_strerror(rc));
out_end:
    sf_reader_end(rd);
out_close:
    sf_pack_close(pack);
    return rc;
}
