/*
 * log.c - the access log (see log.h for the format and the hand-over rules).
 *
 * Threads: worker i only touches log->w[i].active; the full and free lists
 * of worker i are shared with the log thread under log->w[i].lock, which is
 * only ever held for a few pointer moves. The log thread sleeps on a
 * condition variable until a worker hands something over, SIGUSR1 asks for a
 * reopen, or the log is closed.
 */
#include "log.h"
#include "say.h"
#include "sf/cpus.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct lbuf {
    struct lbuf *next;
    size_t len;
    char data[SV_LOG_BUF];
};

/* One worker's buffers; aligned so two workers never share a cache line. */
struct lworker {
    _Alignas(64) pthread_mutex_t lock;
    struct lbuf *full_head, *full_tail; /* under lock: waiting for the log thread */
    struct lbuf *free;                  /* under lock: written, ready for reuse */
    struct lbuf *active;                /* the worker's own: being filled */
    _Atomic uint64_t *dropped;          /* the worker's counter */
    _Atomic uint64_t *lines;
};

struct sv_log {
    char *path;
    int fd;
    int nworkers;
    pthread_t thread;
    pthread_mutex_t wlock; /* guards pending, reopen, stop */
    pthread_cond_t wcond;
    int pending, reopen, stop;
    int write_failed;       /* reported once until a write succeeds again */
    int mid_line;           /* a failed write left part of a line in the file */
    int piped;              /* not a regular file: a pipe, a socket (the journal's) */
    _Atomic uint64_t *lost; /* lines lost to failed writes (the metrics') */
    struct lworker *w;
};

static void wake(sv_log *log, int *flag)
{
    pthread_mutex_lock(&log->wlock);
    *flag = 1;
    pthread_cond_signal(&log->wcond);
    pthread_mutex_unlock(&log->wlock);
}

/* Worker side: hands lw->active over if it holds anything, then takes a
 * free buffer if there is one (lw->active stays NULL otherwise). */
static void hand_over(sv_log *log, struct lworker *lw)
{
    int handed = 0;
    pthread_mutex_lock(&lw->lock);
    if (lw->active && lw->active->len) {
        lw->active->next = NULL;
        if (lw->full_tail)
            lw->full_tail->next = lw->active;
        else
            lw->full_head = lw->active;
        lw->full_tail = lw->active;
        lw->active = NULL;
        handed = 1;
    }
    if (!lw->active && lw->free) {
        lw->active = lw->free;
        lw->free = lw->free->next;
        lw->active->len = 0;
    }
    pthread_mutex_unlock(&lw->lock);
    if (handed)
        wake(log, &log->pending);
}

/* Writes p[0, n) whole, waiting for room as a blocking write would: standard
 * output may be a pipe made non-blocking by another process that shares it
 * (a parent on libuv), where a full pipe is EAGAIN. @return 0; or -1, with
 * *done the bytes that went out and errno the cause (0: the file took no
 * more, as at ulimit -f). */
static int write_whole(int fd, const char *p, size_t n, size_t *done)
{
    *done = 0;
    while (*done < n) {
        ssize_t r = write(fd, p + *done, n - *done);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            struct pollfd pfd = {.fd = fd, .events = POLLOUT};
            if (poll(&pfd, 1, -1) >= 0 || errno == EINTR)
                continue;
            return -1;
        }
        if (r <= 0) {
            if (r == 0)
                errno = 0;
            return -1;
        }
        *done += (size_t)r;
    }
    return 0;
}

/* write_whole() for a pipe or socket, which another writer may share
 * (standard error on standard output's pipe, as in 2>&1 and under
 * systemd's StandardOutput=journal, another servd on the FIFO): whole lines
 * in writes of at most PIPE_BUF bytes, which the kernel never interleaves
 * with another writer's (a line is at most SV_LOG_LINE_MAX bytes). */
static int write_lines(int fd, const char *p, size_t n, size_t *done)
{
    *done = 0;
    while (*done < n) {
        size_t len = n - *done;
        if (len > PIPE_BUF) {
            const char *nl = memrchr(p + *done, '\n', PIPE_BUF);
            len = nl ? (size_t)(nl - (p + *done)) + 1 : PIPE_BUF;
        }
        size_t part;
        int rc = write_whole(fd, p + *done, len, &part);
        *done += part;
        if (rc != 0)
            return rc;
    }
    return 0;
}

_Static_assert(SV_LOG_LINE_MAX <= PIPE_BUF, "a line must fit in one atomic write to a pipe");

static void write_all(sv_log *log, const char *p, size_t n)
{
    size_t done = 0;
    /* After a write that stopped inside a line, the next lines start on
     * one of their own: a parser loses the cut line, not the next. Unless
     * the file was emptied meanwhile (logrotate's copytruncate): the cut
     * line went with the copy, and the new file would begin with an empty
     * line. */
    struct stat st;
    if (log->mid_line && fstat(log->fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 0)
        log->mid_line = 0;
    int rc = log->mid_line ? write_whole(log->fd, "\n", 1, &done) : 0;
    if (rc == 0) {
        log->mid_line = 0;
        rc = log->piped ? write_lines(log->fd, p, n, &done) : write_whole(log->fd, p, n, &done);
    }
    if (rc != 0) {
        if (!log->write_failed)
            sv_say(SV_ERR, "cannot write the access log %s: %s (lines lost)", log->path,
                   errno ? strerror(errno) : "short write");
        log->write_failed = 1;
        if (done > 0 && p[done - 1] != '\n')
            log->mid_line = 1;
        uint64_t lines = 0; /* the lines begun in what is left, a cut one included */
        for (const char *q = p + done, *end = p + n; q < end; lines++) {
            const char *nl = memchr(q, '\n', (size_t)(end - q));
            q = nl ? nl + 1 : end;
        }
        atomic_fetch_add(log->lost, lines);
        return;
    }
    if (log->write_failed)
        sv_say(SV_INFO, "writing the access log %s again", log->path);
    log->write_failed = 0;
}

/* Opens the log file for appending. O_NONBLOCK for the open only: a FIFO
 * nobody reads is refused (ENXIO) rather than waited on; the writes, made
 * by the log thread, block as usual. */
static int open_log(const char *path)
{
    if (strcmp(path, "-") == 0) /* standard output, as it is (a pipe, the journal) */
        return fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NONBLOCK, 0644);
    if (fd >= 0 && fcntl(fd, F_SETFL, O_APPEND) != 0) {
        int e = errno; /* left non-blocking, a FIFO would drop lines (EAGAIN) */
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

static int is_piped(int fd)
{
    struct stat st;
    return fstat(fd, &st) == 0 && !S_ISREG(st.st_mode);
}

static void do_reopen(sv_log *log)
{
    int fd = open_log(log->path);
    if (fd < 0) {
        sv_say(SV_ERR, "cannot reopen the access log %s: %s (still writing the old file)",
               log->path, strerror(errno));
        return;
    }
    close(log->fd);
    log->fd = fd;
    log->piped = is_piped(fd);
    log->mid_line = 0; /* the cut line stays in the old file */
}

/* The log thread: writes what workers hand over until the log is closed. */
static void *writer(void *arg)
{
    sv_log *log = arg;
    pthread_setname_np(pthread_self(), "servd-log");
    for (;;) {
        pthread_mutex_lock(&log->wlock);
        while (!log->pending && !log->reopen && !log->stop)
            pthread_cond_wait(&log->wcond, &log->wlock);
        int reopen = log->reopen, stop = log->stop;
        log->pending = log->reopen = 0;
        pthread_mutex_unlock(&log->wlock);

        /* Buffers handed over before a reopen request belong to the old
         * file only if written first; rotation tools accept either. */
        if (reopen)
            do_reopen(log);
        for (int i = 0; i < log->nworkers; i++) {
            struct lworker *lw = &log->w[i];
            pthread_mutex_lock(&lw->lock);
            struct lbuf *list = lw->full_head;
            lw->full_head = lw->full_tail = NULL;
            pthread_mutex_unlock(&lw->lock);
            if (!list)
                continue;
            struct lbuf *last = list;
            for (struct lbuf *b = list; b; b = b->next) {
                write_all(log, b->data, b->len);
                b->len = 0;
                last = b;
            }
            pthread_mutex_lock(&lw->lock);
            last->next = lw->free;
            lw->free = list;
            pthread_mutex_unlock(&lw->lock);
        }
        if (stop)
            return NULL;
    }
}

/* Frees the buffers and the log itself (not the thread or the file). */
static void free_log(sv_log *log)
{
    for (int i = 0; log->w && i < log->nworkers; i++) {
        free(log->w[i].active);
        for (struct lbuf *b = log->w[i].free, *n; b; b = n) {
            n = b->next;
            free(b);
        }
    }
    free(log->w);
    free(log->path);
    free(log);
}

int sv_log_open(const char *path, int nworkers, sv_metrics *metrics, sv_log **out, char *err,
                size_t errlen)
{
    sv_log *log = calloc(1, sizeof *log);
    if (!log) {
        snprintf(err, errlen, "%s: out of memory for the access log", path);
        return -1;
    }
    log->nworkers = nworkers;
    log->path = strdup(path);
    log->w = aligned_alloc(64, (size_t)nworkers * sizeof *log->w);
    if (!log->path || !log->w)
        goto out_nomem;
    memset(log->w, 0, (size_t)nworkers * sizeof *log->w);
    for (int i = 0; i < nworkers; i++) {
        struct lworker *lw = &log->w[i];
        pthread_mutex_init(&lw->lock, NULL);
        lw->dropped = &metrics->ctr[i].log_dropped;
        lw->lines = &metrics->ctr[i].log_lines;
        for (int b = 0; b < SV_LOG_BUFS; b++) {
            struct lbuf *nb = malloc(sizeof *nb);
            if (!nb)
                goto out_nomem;
            nb->len = 0;
            nb->next = lw->free;
            lw->free = nb;
        }
    }
    log->lost = &metrics->log_write_lost;
    log->fd = open_log(path);
    if (log->fd < 0) {
        snprintf(err, errlen, "%s: cannot open the access log: %s%s", path, strerror(errno),
                 errno == ENXIO ? " (a FIFO nobody reads)" : "");
        goto out_free;
    }
    log->piped = is_piped(log->fd);
    pthread_mutex_init(&log->wlock, NULL);
    pthread_cond_init(&log->wcond, NULL);
    int e = pthread_create(&log->thread, NULL, writer, log);
    if (e != 0) {
        snprintf(err, errlen, "%s: cannot start the access-log thread: %s", path,
                 sf_spawn_strerror(e));
        goto out_close_fd;
    }
    *out = log;
    return 0;

out_close_fd:
    close(log->fd);
    goto out_free;
out_nomem:
    snprintf(err, errlen, "%s: out of memory for the access log", path);
out_free:
    free_log(log);
    return -1;
}

void sv_log_reopen(sv_log *log)
{
    wake(log, &log->reopen);
}

int sv_log_close(sv_log *log, int timeout_ms)
{
    if (!log)
        return 0;
    for (int i = 0; i < log->nworkers; i++)
        hand_over(log, &log->w[i]);
    wake(log, &log->stop);
    /* A writer blocked on a full pipe or a hung disk must not keep the
     * process from exiting: wait at most timeout_ms, then leave it (and
     * the lines it holds) to the exit. */
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += timeout_ms / 1000;
    until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    if (pthread_timedjoin_np(log->thread, NULL, &until) != 0) {
        sv_say(SV_ERR,
               "the access log %s takes no more lines (a write is blocked); the lines "
               "not yet written are lost",
               log->path);
        return -1;
    }
    close(log->fd);
    for (int i = 0; i < log->nworkers; i++)
        pthread_mutex_destroy(&log->w[i].lock);
    pthread_mutex_destroy(&log->wlock);
    pthread_cond_destroy(&log->wcond);
    free_log(log);
    return 0;
}

/* ---- Formatting a line (worker thread) ---- */

/* A bounded appender: a line that would not fit is cut, never overrun. */
struct line {
    char *p;
    size_t len, cap;
};

static void add(struct line *l, const char *s, size_t n)
{
    if (n > l->cap - l->len)
        n = l->cap - l->len;
    memcpy(l->p + l->len, s, n);
    l->len += n;
}

static void add_str(struct line *l, const char *s)
{
    add(l, s, strlen(s));
}

static void add_u64(struct line *l, uint64_t v)
{
    char tmp[24];
    int n = snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)v);
    add(l, tmp, (size_t)n);
}

/* Appends v with ", \ and bytes outside printable ASCII escaped as \xHH (as
 * nginx does: a parser that splits on quotes, lnav or awk -F'"', never
 * meets a quote inside a field), so that a client can never forge a field
 * or a line; "-" when empty. At most max
 * bytes: a longer field is cut and ends in "...", so that a huge target or
 * User-Agent never pushes the status and the fields after it off the line
 * (the budgets of the line's fields add up to less than SV_LOG_LINE_MAX). */
static void add_esc(struct line *l, sf_view v, size_t max)
{
    static const char hex[] = "0123456789abcdef";
    if (v.len == 0) {
        add(l, "-", 1);
        return;
    }
    size_t whole = 0; /* the escaped length, counted up to the point it is too long */
    for (size_t i = 0; i < v.len && whole <= max; i++) {
        unsigned char ch = (unsigned char)v.ptr[i];
        whole += ch == '"' || ch == '\\' || ch < 0x20 || ch >= 0x7f ? 4 : 1;
    }
    size_t start = l->len;
    for (size_t i = 0; i < v.len; i++) {
        unsigned char ch = (unsigned char)v.ptr[i];
        char e[4];
        size_t n = 1;
        if (ch == '"' || ch == '\\' || ch < 0x20 || ch >= 0x7f) {
            e[0] = '\\', e[1] = 'x', e[2] = hex[ch >> 4], e[3] = hex[ch & 15], n = 4;
        } else {
            e[0] = (char)ch;
        }
        if (whole > max && l->len - start + n > max - 3) {
            add(l, "...", 3);
            return;
        }
        add(l, e, n);
    }
}

_Static_assert(SV_LOG_METHOD_MAX + SV_LOG_TARGET_MAX + 2 * SV_LOG_HEADER_MAX + 256 <
                   SV_LOG_LINE_MAX,
               "the access log's field budgets must fit in a line");

static void add_peer(struct line *l, const struct sockaddr *sa)
{
    char host[INET6_ADDRSTRLEN] = "-";
    if (sa && sa->sa_family == AF_INET) {
        inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, host, sizeof host);
    } else if (sa && sa->sa_family == AF_INET6) {
        /* an IPv4 client of a dual-stack socket (systemd's BindIPv6Only=both)
         * is logged as the IPv4 address it is, as by --real-ip-* */
        const struct in6_addr *a6 = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(a6))
            inet_ntop(AF_INET, a6->s6_addr + 12, host, sizeof host);
        else
            inet_ntop(AF_INET6, a6, host, sizeof host);
    }
    add_str(l, host);
}

static void count(_Atomic uint64_t *c)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1,
                          memory_order_relaxed);
}

size_t sv_log_format(const sv_log_entry *e, char *buf)
{
    /* Leave room for the newline: cap is one less than the line maximum. */
    struct line l = {buf, 0, SV_LOG_LINE_MAX - 1};
    add_peer(&l, e->peer);
    add(&l, " - - ", 5);
    add(&l, e->time, e->time_len);
    add(&l, " \"", 2);
    if (!e->version.len) {
        add(&l, "-", 1);
    } else { /* the line as the client sent it, as nginx's $request */
        add_esc(&l, e->method, SV_LOG_METHOD_MAX);
        add(&l, " ", 1);
        add_esc(&l, e->target, SV_LOG_TARGET_MAX);
        add(&l, " ", 1);
        add_esc(&l, e->version, SV_LOG_VERSION_MAX);
    }
    add(&l, "\" ", 2);
    add_u64(&l, (uint64_t)e->status);
    add(&l, " ", 1);
    if (e->body_bytes)
        add_u64(&l, e->body_bytes);
    else
        add(&l, "-", 1);
    add(&l, " \"", 2);
    add_esc(&l, e->referer, SV_LOG_HEADER_MAX);
    add(&l, "\" \"", 3);
    add_esc(&l, e->user_agent, SV_LOG_HEADER_MAX);
    add(&l, "\" ", 2);
    const char *enc = e->encoding >= 0 ? sf_encoding_name(e->encoding) : NULL;
    add_str(&l, enc ? enc : "-");
    add(&l, " ", 1);
    add_u64(&l, e->micros);
    l.p[l.len++] = '\n';
    return l.len;
}

void sv_log_write(sv_log *log, int worker, const sv_log_entry *e)
{
    struct lworker *lw = &log->w[worker];
    if (!lw->active || SV_LOG_BUF - lw->active->len < SV_LOG_LINE_MAX) {
        hand_over(log, lw);
        if (!lw->active) {
            /* made and lost, as a line a failed write loses is: dropped
             * is always a part of lines */
            count(lw->lines);
            count(lw->dropped);
            return;
        }
    }
    lw->active->len += sv_log_format(e, lw->active->data + lw->active->len);
    count(lw->lines);
}

void sv_log_flush(sv_log *log, int worker)
{
    struct lworker *lw = &log->w[worker];
    if (lw->active && lw->active->len)
        hand_over(log, lw);
}

size_t sv_log_time(int64_t t, char *buf, size_t cap)
{
    static const char months[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                       "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    struct tm tm;
    time_t tt = (time_t)t;
    gmtime_r(&tt, &tm);
    int n = snprintf(buf, cap, "[%02d/%s/%04d:%02d:%02d:%02d +0000]", tm.tm_mday,
                     months[tm.tm_mon % 12], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
    return n < 0 ? 0 : (size_t)n >= cap ? cap - 1 : (size_t)n;
}
