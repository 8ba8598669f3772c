/*
 * fuzz_conn - a connection's request path (conn.c, conn_write.c) on arbitrary
 * bytes over a real socket (a socketpair: a loopback TCP connection per
 * input would run out of ports to TIME_WAIT; conn.c's TCP-only calls,
 * TCP_NODELAY and the send-queue reads of the sweep, are not reached).
 *
 * The input is two bytes of schedule, then what the client sends. A worker
 * loop like servd's (sv__worker_init, no listening socket) serves the
 * server's end of each connection (sv__conn_accept); the client writes the
 * bytes in chunks whose sizes the schedule picks (1 byte to 64 KiB, 16383 to
 * 16385 among them: the end of the first input buffer), runs the loop after
 * each chunk, reads the answers every 1, 4 or 16 rounds, then shuts its
 * write side down and runs the loop until servd has closed the connection.
 * This drives what fuzz_http1 cannot: heads split anywhere and held across
 * reads (the 16 KiB buffer, the move to a 32 KiB one), pipelined requests
 * answered in batches, bodies drained (by Content-Length or chunked),
 * connections paused at their share of a loop turn (a 70 KB body: four
 * answers pass SV_CONN_TURN_BYTES) with their requests held, resumed when
 * their writes drain or, with nothing queued, in the next turn, and writes
 * queued when the client does not read.
 *
 * The same bytes, parsed whole by sv_http1_parse() and answered by
 * sv_respond() (the model), say what servd must send: the answers are a
 * stream of HTTP/1.1 messages, each framed by its one Content-Length (no
 * body for HEAD; a 304 has neither), in the order of the requests, each
 * the bytes sv_respond() plans for its request (its status, head and body;
 * the Date's second aside; with Connection: close when it was answered
 * before its body had all arrived), none after one that says Connection:
 * close; every request up to the first one after
 * which servd may close (a body, Connection: close, HTTP/1.0) is answered;
 * a request that does not parse, or whose chunked body is malformed
 * (sv_http1_chunked_length), gets an error status and is the last one
 * answered; the connection closes; and the access log (conn_log.c, written
 * as responses leave, lines to /dev/null) has one line per answer, with its
 * status, its body length as BYTES and its request's target. In
 * one input of four the client goes away once it has sent everything: then
 * every response servd planned must still be logged once, with what went
 * out.
 */
#include "conn.h"
#include "fuzz_site.h"
#include "http.h"
#include "log.h"
#include "sf/httpdate.h"
#include "sf/isolate.h"
#include "snapshot.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BIG_BODY  70000
#define MAX_MODEL 4096

static sv_config cfg;
static sv_snapshot *snap;
static sv_worker *w;
static sv_wslot slot;
static sv_metrics metrics;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    /* sv_snapshot_open() checks a pack in a fresh run of this program
     * (snapshot.c: /proc/self/exe --check-pack FD PID): answer as servd
     * does. */
    if ((*argc == 3 || *argc == 4) && strcmp((*argv)[1], "--check-pack") == 0) {
        char err[1024] = "";
        int rc = sf_sha256_ready() != 0
                     ? SF_ENOMEM
                     : sf_pack_check_structure(NULL, (*argv)[2], err, sizeof err);
        printf("%s\n", rc == 0 ? SF_CHECK_OK : err[0] ? err : sf_strerror(rc));
        exit(rc == SF_ENOMEM || rc == SF_EIO ? SF_CHECK_EXIT_NO_VERDICT : rc != 0);
    }
    signal(SIGPIPE, SIG_IGN); /* as servd (main.c): sendfile and libuv's writev raise it */
    fz_sha256_keys = 1;
    sf_writer *pw = fz_pack_begin("fuzz_conn");
    fz_put_basics(pw);
    char *big = malloc(BIG_BODY + 1);
    if (!big)
        fz_die("malloc");
    for (int i = 0; i < BIG_BODY; i++)
        big[i] = (char)('a' + i % 26);
    big[BIG_BODY] = 0;
    static const int e1[] = {SF_ENC_IDENTITY};
    const char *bigv[] = {big};
    fz_put(pw, "/big.txt", "text/plain", 1, e1, bigv, 0, 0, 1700000000);
    free(big);
    fz_pack_end(pw);
    char err[512];
    if (sv_snapshot_open(fz_pack_path(), 1, &snap, NULL, err, sizeof err) != 0)
        fz_die(err);

    cfg.idle_ms = cfg.header_ms = cfg.send_ms = cfg.shutdown_ms = 60000;
    cfg.max_conns = 16;
    w = calloc(1, sizeof *w);
    if (!w || sv_metrics_init(&metrics, 1) != 0)
        fz_die("malloc");
    pthread_mutex_init(&slot.lock, NULL);
    w->cfg = &cfg;
    w->ctr = metrics.ctr;
    w->slot = &slot;
    /* An access log (its lines go to /dev/null): each answer must make
     * exactly one line, whenever its bytes leave (conn_log.c). */
    sv_log *log;
    if (sv_log_open("/dev/null", 1, &metrics, &log, err, sizeof err) != 0)
        fz_die(err);
    w->log = log;
    if (sv__worker_init(w, snap) != 0)
        fz_die("worker");

    return 0;
}

/* ---- Answers compared by hash: FNV-1a over the head, with its Date
 * (and a Last-Modified servd replaced by it) masked, then the body ---- */

#define FNV_START 14695981039346656037ull

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* Hashes a whole head: each copy of its Date line's date (a clock's
 * second, which the model's may not share) counts as '#'s. */
static uint64_t head_hash(char *head, size_t len)
{
    const char *d = memmem(head, len, "\r\nDate: ", 8);
    if (d && (size_t)(head + len - d) >= 8 + SF_HTTP_DATE_LEN) {
        char date[SF_HTTP_DATE_LEN];
        memcpy(date, d + 8, sizeof date);
        char *q = head;
        while ((q = memmem(q, (size_t)(head + len - q), date, sizeof date)) != NULL)
            memset(q, '#', sizeof date);
    }
    return fnv(FNV_START, head, len);
}

/* The hash of what a plan writes: its head (all but the last body_bytes
 * of it), then its body. */
static uint64_t plan_hash(const sv_plan *plan)
{
    static char head[65536];
    size_t total = 0, hlen = 0;
    for (int i = 0; i < plan->iovcnt; i++)
        total += plan->iov[i].iov_len;
    size_t want = total - plan->body_bytes;
    if (want > sizeof head)
        fz_die("a planned head over 64 KiB");
    int i = 0;
    size_t off = 0;
    for (; hlen < want; i++) {
        size_t t = plan->iov[i].iov_len < want - hlen ? plan->iov[i].iov_len : want - hlen;
        memcpy(head + hlen, plan->iov[i].iov_base, t);
        hlen += t;
        off = t;
    }
    uint64_t h = head_hash(head, hlen);
    if (off && off < plan->iov[i - 1].iov_len) /* a piece both head and body */
        i--;
    else
        off = 0;
    for (; i < plan->iovcnt; i++, off = 0)
        h = fnv(h, (const char *)plan->iov[i].iov_base + off, plan->iov[i].iov_len - off);
    return h;
}

/* ---- The model: the input parsed whole ---- */

typedef struct {
    int n;                        /* requests that parse */
    int certain;                  /* of them, how many servd answers whatever the reads */
    int error;                    /* request n does not parse: servd answers it with an error */
    int error_status, error_head; /* that error, and whether it answers a HEAD */
    int head[MAX_MODEL];
    /* its chunked body is malformed: servd answers it with a 400, or as
     * answered before its body had all arrived if the bytes that show it
     * had not come */
    int bad_body[MAX_MODEL];
    int status[MAX_MODEL];
    /* each answer's bytes, hashed; and as answered before its body had
     * all arrived (conn.c then closes after it: Connection: close) */
    uint64_t hash[MAX_MODEL], hash_early[MAX_MODEL];
    size_t toff[MAX_MODEL], tlen[MAX_MODEL]; /* the request target in the input */
} model;

static void build_model(const uint8_t *p, size_t len, model *m)
{
    static sv_request req;
    static sv_scratch sc;
    static sv_plan plan;
    static sv_date date;
    sv_date_update(&date, (int64_t)time(NULL));
    memset(m, 0, sizeof *m);
    m->certain = -1;
    size_t pos = 0;
    while (pos < len && m->n < MAX_MODEL) {
        int r = sv_http1_parse((const char *)p + pos, len - pos, &req);
        if (r == SV_PARSE_INCOMPLETE)
            break;
        if (r < 0) {
            /* refused the same however the bytes arrive (http1.c) */
            m->error = 1;
            m->error_status = -r;
            m->error_head = req.method == SV_M_HEAD;
            break;
        }
        /* a chunked body's length: 0 when not all here (or too long to
         * skip), -400 when malformed */
        int chunk = req.chunked ? sv_http1_chunked_length((const char *)p + pos + (size_t)r,
                                                          len - pos - (size_t)r)
                                : 0;
        if (chunk > 0)
            req.body_len = (uint64_t)chunk;
        sv_respond(&req, sv_snapshot_reader(snap, 0), &cfg.site, &date, &sc, &plan);
        m->head[m->n] = req.method == SV_M_HEAD;
        m->bad_body[m->n] = chunk < 0;
        m->status[m->n] = plan.status;
        m->hash[m->n] = m->hash_early[m->n] = plan_hash(&plan);
        int close = plan.close;
        if ((req.body_len || req.chunked) && req.keep_alive) {
            sv_request early = req;
            early.keep_alive = 0;
            sv_respond(&early, sv_snapshot_reader(snap, 0), &cfg.site, &date, &sc, &plan);
            m->hash_early[m->n] = plan_hash(&plan);
        }
        m->toff[m->n] = (size_t)((const uint8_t *)req.target.ptr - p);
        m->tlen[m->n] = req.target.len;
        m->n++;
        pos += (size_t)r;
        if ((req.body_len || req.chunked || !req.keep_alive || close) && m->certain < 0)
            m->certain = m->n; /* servd may close after this one */
        if (req.body_len > SV_MAX_DRAIN || req.body_len > len - pos || !req.keep_alive || close ||
            (req.chunked && chunk <= 0))
            return; /* servd closes after it */
        pos += (size_t)req.body_len;
    }
    if (m->certain < 0)
        m->certain = m->n + m->error;
}

/* ---- The log lines, seen on their way (-Wl,--wrap=sv_log_write) ---- */

static struct {
    int status;
    uint64_t body;
    char target[64]; /* its first bytes */
    size_t tlen;
} lines[MAX_MODEL];
static int nlines;

void __real_sv_log_write(sv_log *log, int worker, const sv_log_entry *e);
void __wrap_sv_log_write(sv_log *log, int worker, const sv_log_entry *e)
{
    if (nlines < MAX_MODEL) {
        lines[nlines].status = e->status;
        lines[nlines].body = e->body_bytes;
        lines[nlines].tlen = e->target.len;
        if (e->target.len)
            memcpy(lines[nlines].target, e->target.ptr, e->target.len < 64 ? e->target.len : 64);
    }
    nlines++;
    __real_sv_log_write(log, worker, e);
}

/* ---- The answers, checked as they stream in ---- */

typedef struct {
    const model *m;
    int got;     /* answers complete */
    int in_body; /* reading a body */
    size_t body; /* its bytes still to come */
    char head[65536];
    size_t hlen;
    int last;                 /* no answer may follow: an error, or Connection: close */
    int refused;              /* the answer being read is the 400 of a bad chunked body */
    int closes;               /* the answer being read says Connection: close */
    uint64_t hash;            /* of the answer being read, so far */
    int status[MAX_MODEL];    /* of each answer, */
    size_t bodies[MAX_MODEL]; /* and its body's length */
} checker;

/* An answer read whole: the bytes sv_respond() planned for its request;
 * one that says Connection: close is the last. */
static void answer_done(checker *k)
{
    const model *m = k->m;
    if (k->got < m->n && !k->refused && k->hash != m->hash[k->got] &&
        k->hash != m->hash_early[k->got]) {
        fprintf(stderr, "answer %d: not the bytes sv_respond plans\n", k->got);
        fz_die("an answer other than sv_respond's");
    }
    if (k->closes)
        k->last = 1; /* nothing may follow it */
    k->got++;
}

static void head_done(checker *k)
{
    const model *m = k->m;
    if (k->last)
        fz_die("an answer after one that said Connection: close or answered a request that does "
               "not parse");
    if (k->hlen < 12 || memcmp(k->head, "HTTP/1.1 ", 9) != 0)
        fz_die("an answer that does not start with HTTP/1.1");
    int status = atoi(k->head + 9);
    int head;
    k->refused = 0;
    if (k->got < m->n && m->bad_body[k->got] && status == 400) {
        head = m->head[k->got]; /* its chunked body was seen to be malformed */
        k->refused = 1;
        k->last = 1;
    } else if (k->got < m->n) {
        if (status != m->status[k->got]) {
            fprintf(stderr, "answer %d: status %d, sv_respond gives %d\n", k->got, status,
                    m->status[k->got]);
            fz_die("a status other than sv_respond's");
        }
        head = m->head[k->got];
    } else if (k->got == m->n && m->error) {
        if (status != m->error_status) {
            fprintf(stderr, "status %d, the parser gives %d\n", status, m->error_status);
            fz_die("a request that does not parse answered with another error");
        }
        head = m->error_head;
        k->last = 1;
    } else {
        fprintf(stderr, "answer %d of %d requests\n", k->got, m->n);
        fz_die("more answers than requests");
    }
    int ncl, nconn;
    const char *v = fz_field(k->head, k->hlen, "content-length", &ncl);
    long cl = v ? strtol(v, NULL, 10) : -1;
    v = fz_field(k->head, k->hlen, "connection", &nconn);
    k->closes = v && strncmp(v, "close\r\n", 7) == 0;
    if (status == 304 ? ncl > 1 : ncl != 1 || cl < 0) {
        fprintf(stderr, "answer %d:\n%.*s\n", k->got, (int)k->hlen, k->head);
        fz_die("an answer without exactly one Content-Length");
    }
    if (k->refused && !k->closes)
        fz_die("the 400 of a malformed chunked body without Connection: close");
    k->body = head || status == 304 ? 0 : (size_t)cl;
    if (k->got < MAX_MODEL) {
        k->status[k->got] = status;
        k->bodies[k->got] = k->body;
    }
    k->hash = head_hash(k->head, k->hlen);
    k->in_body = k->body != 0;
    k->hlen = 0;
    if (!k->in_body)
        answer_done(k);
}

static void feed(checker *k, const char *p, size_t n)
{
    while (n) {
        if (k->in_body) {
            size_t t = n < k->body ? n : k->body;
            k->hash = fnv(k->hash, p, t);
            p += t;
            n -= t;
            if ((k->body -= t) == 0) {
                k->in_body = 0;
                answer_done(k);
            }
            continue;
        }
        if (k->hlen == sizeof k->head)
            fz_die("an answer head over 64 KiB");
        k->head[k->hlen++] = *p++;
        n--;
        if (k->hlen >= 4 && memcmp(k->head + k->hlen - 4, "\r\n\r\n", 4) == 0)
            head_done(k);
    }
}

/* ---- The client ---- */

/* Responses servd has planned: counted by status class (conn.c add_plan). */
static uint64_t planned(void)
{
    uint64_t n = 0;
    for (int i = 0; i < 6; i++)
        n += metrics.ctr->status[i];
    return n;
}

static const size_t chunk_sizes[] = {1, 2, 5, 64, 700, 4096, 16383, 16384, 16385, 65536};

/* Reads what has arrived; @return 1 at the end of the stream. */
static int drain(int fd, checker *k)
{
    static char buf[65536];
    for (;;) {
        ssize_t r = recv(fd, buf, sizeof buf, 0);
        if (r > 0) {
            feed(k, buf, (size_t)r);
            continue;
        }
        if (r == 0 || (errno != EAGAIN && errno != EINTR))
            return 1; /* closed (or reset after a close with input unread) */
        if (errno == EAGAIN)
            return 0;
    }
}

static void pump(void)
{
    for (int i = 0; i < 3; i++)
        uv_run(&w->loop, UV_RUN_NOWAIT);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    unsigned seed = (unsigned)data[0] << 8 | data[1];
    const uint8_t *p = data + 2;
    size_t len = size - 2;
    static model m;
    static checker k;
    uint64_t lines0 = metrics.ctr->log_lines, planned0 = planned();
    nlines = 0;
    build_model(p, len, &m);
    memset(&k, 0, sizeof k);
    k.m = &m;

    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        fz_die("socketpair");
    int c = sv[0], s = sv[1];
    if (fcntl(c, F_SETFL, O_NONBLOCK) != 0 || fcntl(s, F_SETFL, O_NONBLOCK) != 0)
        fz_die("nonblock");
    /* One input in four: servd's end takes 416 KiB before a write waits,
     * as a loopback TCP socket's tuned buffer does (a socketpair's default
     * is 208 KiB), so that a connection paused at its share of a loop turn
     * can have nothing queued and go on from the ready list (conn.c
     * defer(), on_ready()), not only once its writes drain. */
    if ((seed >> 4) % 4 == 0) {
        int room = 212992; /* net.core.wmem_max's default; the kernel doubles it */
        setsockopt(s, SOL_SOCKET, SO_SNDBUF, &room, sizeof room);
    }
    struct sockaddr_storage peer = {0}; /* a socketpair's: logged as "-" */
    sv__conn_accept(w, s, &peer);

    unsigned every = (unsigned[]){1, 4, 16}[seed % 3];
    /* One input in four: the client goes away once it has sent everything,
     * reading nothing more (servd's writes fail with lines still queued). */
    int abandon = (seed >> 2) % 4 == 0;
    size_t sent = 0;
    int eof = 0;
    for (unsigned round = 0; sent < len && !eof; round++) {
        seed = seed * 1103515245u + 12345u;
        size_t want = chunk_sizes[(seed >> 16) % (sizeof chunk_sizes / sizeof *chunk_sizes)];
        if (want > len - sent)
            want = len - sent;
        ssize_t r = send(c, p + sent, want, MSG_NOSIGNAL);
        if (r > 0)
            sent += (size_t)r;
        else if (errno != EAGAIN && errno != EINTR)
            break; /* servd closed: it answered an error or a request that closes */
        pump();
        if (r <= 0 || round % every == 0)
            eof = drain(c, &k);
        if (round > 10000000)
            fz_die("the client could not send its input");
    }
    if (abandon) {
        close(c);
        for (unsigned round = 0; w->nconns; round++) {
            pump();
            if (round > 1000000)
                fz_die("servd never closed an abandoned connection");
        }
        if (metrics.ctr->log_lines - lines0 != planned() - planned0)
            fz_die("an abandoned connection's answers not logged once each");
        return 0;
    }
    shutdown(c, SHUT_WR);
    for (unsigned round = 0; !eof || w->nconns; round++) {
        pump();
        if (!eof)
            eof = drain(c, &k);
        if (round > 1000000)
            fz_die("servd never closed the connection");
    }
    close(c);

    if (k.hlen || k.in_body)
        fz_die("the last answer was cut short");
    if (metrics.ctr->log_lines - lines0 != (uint64_t)k.got ||
        planned() - planned0 != (uint64_t)k.got) {
        fprintf(stderr, "%d answers, %llu log lines\n", k.got,
                (unsigned long long)(metrics.ctr->log_lines - lines0));
        fz_die("answers not logged once each");
    }
    /* Each line says its answer's status and body length, and its
     * request's target (the first bytes; a line keeps SV_LOG_TARGET_MAX + 1) */
    for (int i = 0; i < k.got && i < MAX_MODEL; i++) {
        if (lines[i].status != k.status[i] || lines[i].body != k.bodies[i]) {
            fprintf(stderr, "line %d: status %d, BYTES %llu; answer: %d, %zu body bytes\n", i,
                    lines[i].status, (unsigned long long)lines[i].body, k.status[i], k.bodies[i]);
            fz_die("a log line that does not say its answer");
        }
        if (i < m.n) {
            size_t want = m.tlen[i] > SV_LOG_TARGET_MAX + 1 ? SV_LOG_TARGET_MAX + 1 : m.tlen[i];
            size_t n = want < 64 ? want : 64;
            if (lines[i].tlen != want && lines[i].tlen != m.tlen[i])
                fz_die("a log line's target of another length than its request's");
            if (memcmp(lines[i].target, p + m.toff[i], n) != 0)
                fz_die("a log line's target is not its request's");
        }
    }
    if (k.got < m.certain) {
        fprintf(stderr, "%d answers, %d requests certain to be answered\n", k.got, m.certain);
        fz_die("a request not answered");
    }
    return 0;
}
