/*
 * fuzz_admin - the admin endpoint (servd/admin.c) as a client reaches it:
 * the admin thread serves a listening socket on 127.0.0.1, and each input
 * is sent to it over a TCP connection of its own.
 *
 * Input: a byte of schedule (bits 0-1: sent in pieces of 1, 7 or 512 bytes,
 * or whole; bit 2: servd is stopping), then what the client sends. The
 * client sends it and reads until servd closes (having shut its side when
 * no answer is due, so that servd sees the input end). What servd
 * must answer is said by the parser on the same bytes, as the admin reads
 * them (at most SV_ADMIN_HEAD_MAX): a head that never completes gets
 * nothing, or a 431 once the buffer is full; a parse error its status; GET
 * or HEAD of /metrics a 200, of /healthz or /health a 200 (503 when
 * stopping), of anything else a 404; any other method a 405 with Allow.
 * Every answer is one HTTP/1.1 message framed by its one Content-Length (a
 * HEAD's has no body), with Connection: close, and nothing after it.
 */
#include "admin.h"
#include "fuzz_site.h"
#include "http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define ADMIN_HEAD_MAX 4096  /* SV_ADMIN_HEAD_MAX (admin.c) */
#define READ_MS        10000 /* servd answers at once; this is a hang */
#define ID             "0123456789abcdef0123456789abcdef" /* the pack id */

static sv_metrics metrics;
static atomic_int stopping;
static struct sockaddr_in addr;

static void die(const char *what, const char *resp, size_t n)
{
    fprintf(stderr, "fuzz_admin: %s\n--- response (%zu bytes) ---\n%.*s\n", what, n,
            (int)(n > 2000 ? 2000 : n), resp);
    abort();
}

static void start(void)
{
    char err[256] = "a loopback socket";
    sv_admin *a;
    if (sv_metrics_init(&metrics, 2) != 0)
        abort();
    sv_metrics_set_pack(&metrics, ID, "/srv/site.lmdb", 1764979200, 19, NULL);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t alen = sizeof addr;
    if (fd < 0 || bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0 ||
        getsockname(fd, (struct sockaddr *)&addr, &alen) != 0 ||
        sv_admin_start(fd, "127.0.0.1", &metrics, &stopping, &a, err, sizeof err) != 0) {
        fprintf(stderr, "fuzz_admin: cannot start the admin endpoint: %s\n", err);
        abort();
    }
}

/* Sends data in pieces of step bytes (0: whole) and reads until the peer
 * closes; when no answer is due (answer 0), shuts the sending side first,
 * the end of input that makes servd close. @return the bytes read into out. */
static size_t exchange(const uint8_t *data, size_t len, size_t step, int answer, char *out,
                       size_t cap)
{
    /* libFuzzer's timer (SIGALRM, for -timeout) interrupts the calls below:
     * each is retried, and a connect goes on in the background */
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), rc, err = 0;
    socklen_t el = sizeof err;
    if (fd < 0)
        abort();
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
        if (errno == EINTR) {
            struct pollfd p = {fd, POLLOUT, 0};
            while ((rc = poll(&p, 1, READ_MS)) < 0 && errno == EINTR)
                ;
            if (rc != 1)
                err = ETIMEDOUT;
            else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0)
                err = errno;
        } else {
            err = errno;
        }
        if (err) {
            fprintf(stderr, "fuzz_admin: connect: %s\n", strerror(err));
            abort();
        }
    }
    for (size_t off = 0; off < len;) {
        size_t n = step && len - off > step ? step : len - off;
        ssize_t w;
        while ((w = send(fd, data + off, n, MSG_NOSIGNAL)) < 0 && errno == EINTR)
            ;
        if (w <= 0)
            break; /* servd closed: it answered, or gave up on the head */
        off += (size_t)w;
    }
    if (!answer)
        shutdown(fd, SHUT_WR);
    size_t got = 0;
    for (;;) {
        struct pollfd p = {fd, POLLIN, 0};
        while ((rc = poll(&p, 1, READ_MS)) < 0 && errno == EINTR)
            ;
        if (rc != 1) {
            struct tcp_info ti = {0};
            socklen_t tl = sizeof ti;
            getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &tl); /* for the report */
            fprintf(stderr, "fuzz_admin: TCP state %u, %u segments unacknowledged, %u resent\n",
                    ti.tcpi_state, ti.tcpi_unacked, ti.tcpi_total_retrans);
            die("servd neither answered nor closed", out, got);
        }
        ssize_t r;
        while ((r = recv(fd, out + got, cap - got, 0)) < 0 && errno == EINTR)
            ;
        if (r <= 0)
            break; /* closed (a reset after the answer: servd read no more) */
        got += (size_t)r;
        if (got == cap)
            die("a response longer than any the admin sends", out, got);
    }
    /* Close with a reset: servd closed first, and its side would sit in
     * TIME_WAIT had both sides ended with FINs (tens of thousands of them
     * in a run, each holding a port pair). */
    struct linger l = {1, 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    close(fd);
    return got;
}

/* The status servd must answer, or 0 for none; *head_only for a HEAD,
 * *what 'm' for /metrics, 'h' for the health check, else 0. */
static int expected(const uint8_t *data, size_t len, int *head_only, int *what)
{
    sv_request req;
    size_t n = len < ADMIN_HEAD_MAX ? len : ADMIN_HEAD_MAX;
    int r = sv_http1_parse((const char *)data, n, &req);
    *head_only = req.method == SV_M_HEAD;
    *what = 0;
    if (r == SV_PARSE_INCOMPLETE)
        return n == ADMIN_HEAD_MAX ? 431 : 0;
    if (r < 0)
        return -r;
    if (req.method != SV_M_GET && req.method != SV_M_HEAD) {
        *head_only = 0;
        return 405;
    }
    const sf_view p = req.path;
    if (p.len == 8 && memcmp(p.ptr, "/metrics", 8) == 0)
        return *what = 'm', 200;
    if ((p.len == 8 && memcmp(p.ptr, "/healthz", 8) == 0) ||
        (p.len == 7 && memcmp(p.ptr, "/health", 7) == 0))
        return *what = 'h', atomic_load(&stopping) ? 503 : 200;
    return 404;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const size_t steps[] = {1, 7, 512, 0};
    static char resp[1 << 16];
    static int started;
    if (!started) {
        start();
        started = 1;
    }
    if (size < 1)
        return 0;
    size_t step = steps[data[0] & 3];
    atomic_store(&stopping, (data[0] & 4) != 0);
    data++, size--;

    int head_only, what, want = expected(data, size, &head_only, &what);
    size_t n = exchange(data, size, step, want != 0, resp, sizeof resp);
    if (want == 0) {
        if (n != 0)
            die("an answer to a head that never completed", resp, n);
        return 0;
    }
    char status[32];
    int sl = snprintf(status, sizeof status, "HTTP/1.1 %d ", want);
    if (n < (size_t)sl || memcmp(resp, status, (size_t)sl) != 0) {
        fprintf(stderr, "fuzz_admin: want status %d\n", want);
        die("another status", resp, n);
    }
    const char *end = memmem(resp, n, "\r\n\r\n", 4);
    if (!end)
        die("no end of the head", resp, n);
    size_t hlen = (size_t)(end - resp) + 4, blen = n - hlen;
    for (size_t i = 0; i + 1 < hlen; i++)
        if ((resp[i] == '\n') != (i > 0 && resp[i - 1] == '\r'))
            die("a line not ended by CRLF", resp, n);
    int count;
    const char *cl = fz_field(resp, hlen, "content-length", &count);
    if (count != 1)
        die("not exactly one Content-Length", resp, n);
    char *e;
    unsigned long len = strtoul(cl, &e, 10);
    if (e == cl || *e != '\r')
        die("a Content-Length that is not digits", resp, n);
    if (blen != (head_only ? 0 : len))
        die(head_only ? "a body after a HEAD's head" : "a body of another length than said", resp,
            n);
    const char *conn = fz_field(resp, hlen, "connection", &count);
    if (count != 1 || strncmp(conn, "close\r\n", 7) != 0)
        die("no Connection: close", resp, n);
    fz_field(resp, hlen, "allow", &count);
    if (count != (want == 405))
        die(want == 405 ? "a 405 without Allow" : "an Allow line off a 405", resp, n);
    static const char health[] = "stopping " ID "\n", healthy[] = "ok " ID "\n";
    const char *say = want == 503 ? health : healthy;
    if (!head_only && what == 'h' && (blen != strlen(say) || memcmp(resp + hlen, say, blen) != 0))
        die("a health check that does not say the state and the pack", resp, n);
    if (!head_only && what == 'm' && !memmem(resp + hlen, blen, "\nservd_pack_info{", 17))
        die("metrics without the pack's", resp, n);
    return 0;
}
