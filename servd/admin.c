/*
 * admin.c - the admin endpoint (--admin HOST:PORT): GET /metrics in
 * Prometheus text format and GET /healthz (or /health), on a thread and
 * loop of their own, so a scrape never costs a worker anything and the
 * public port never answers them.
 *
 * One request per connection (Connection: close); requests are parsed with
 * the daemon's own HTTP/1.1 parser. This path allocates freely: it serves a
 * few requests a minute.
 *
 * Accepted with sv__accept_one() on a uv_poll_t, as the workers do, not with
 * uv_listen(): out of descriptors, libuv frees a descriptor it keeps in
 * reserve to accept and drop the connection, and when a worker has taken
 * that descriptor meanwhile, libuv's accept loop spins until one is free.
 * Here the scraper waits in the backlog instead, and accepting pauses.
 */
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "admin.h"

/* Admin connections open at once: a scraper or two and a health checker;
 * more take the place of one (SV_ADMIN_RECLAIM_MS) or are refused, so a
 * flood on the admin port stays cheap: 64 connections and those closed in
 * the turn (at most SV_ACCEPT_BATCH). */
#define SV_ADMIN_MAX_CONNS 64
/* At the limit, a newcomer takes the place of a connection lingering after
 * its answer, or of one still without its request from the address that
 * holds the most; when every address holds one, of the oldest of them once
 * it is this old (a scraper's request follows its connect within
 * milliseconds). */
#define SV_ADMIN_RECLAIM_MS 1000
/* Connections the kernel queues for the admin thread to accept. */
#define SV_ADMIN_BACKLOG 64
/* A request must arrive whole within this time. */
#define SV_ADMIN_TIMEOUT_MS 10000
/* After an answer, input is read and dropped for at most this long, so that
 * the client's unread bytes do not make the close a reset that could destroy
 * the answer before the client reads it (RFC 9112 §9.6). */
#define SV_ADMIN_LINGER_MS 2000
/* Largest admin request head: scrapers send a few hundred bytes. */
#define SV_ADMIN_HEAD_MAX 4096

struct sv_admin {
    uv_loop_t loop;
    uv_poll_t listener; /* readable: connections to accept from lfd */
    uv_timer_t pause;   /* accepting again after running out of descriptors */
    sv_accept_said said;
    int lfd;
    uv_async_t stop;
    uv_thread_t thread;
    sv_metrics *m;
    atomic_int *stopping;
    sv_link live; /* the connections not closing, oldest first */
    int nlive;
};

typedef struct aconn {
    uv_tcp_t tcp;
    sv_link link; /* in a->live until it closes */
    uint64_t t_accept;
    unsigned char peer[16]; /* the client's address, without its port */
    unsigned char peer_len; /* 4, 16, or 0 for another family */
    uv_timer_t timer;
    uv_write_t wr;
    uv_shutdown_t shut;
    sv_admin *a;
    int handles; /* open handles: freed when both are closed */
    int answered;
    int lingering; /* the answer is sent and the write side shut down */
    char *out;
    size_t len;
    char buf[SV_ADMIN_HEAD_MAX];
} aconn;

static void on_aconn_closed(uv_handle_t *h)
{
    aconn *c = h->data;
    if (--c->handles > 0)
        return;
    free(c->out);
    free(c);
}

static void aconn_close(aconn *c)
{
    if (c->link.next != &c->link) {
        sv__list_del(&c->link);
        c->a->nlive--;
    }
    if (!uv_is_closing((uv_handle_t *)&c->tcp))
        uv_close((uv_handle_t *)&c->tcp, on_aconn_closed);
    if (!uv_is_closing((uv_handle_t *)&c->timer))
        uv_close((uv_handle_t *)&c->timer, on_aconn_closed);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);
static void on_timeout(uv_timer_t *t);

static void on_shut(uv_shutdown_t *req, int status)
{
    aconn *c = req->data;
    if (status < 0 || uv_is_closing((uv_handle_t *)&c->tcp)) {
        aconn_close(c);
        return;
    }
    /* Drain until the client closes too (or the linger time is up). */
    c->lingering = 1;
    c->len = 0;
    uv_timer_start(&c->timer, on_timeout, SV_ADMIN_LINGER_MS, 0);
    if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) != 0)
        aconn_close(c);
}

static void on_written(uv_write_t *req, int status)
{
    aconn *c = req->data;
    free(c->out); /* written: libuv no longer needs it during the linger */
    c->out = NULL;
    c->shut.data = c;
    if (status < 0 || uv_shutdown(&c->shut, (uv_stream_t *)&c->tcp, on_shut) != 0)
        aconn_close(c);
}

static const char *reason(int status)
{
    switch (status) {
    case 200:
        return "OK";
    case 400:
        return "Bad Request";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 414:
        return "URI Too Long";
    case 431:
        return "Request Header Fields Too Large";
    case 501:
        return "Not Implemented";
    case 503:
        return "Service Unavailable";
    case 505:
        return "HTTP Version Not Supported";
    default:
        return "Error";
    }
}

/* Sends one response and closes the connection after it. */
static void respond(aconn *c, int status, const char *type, const char *body, size_t len,
                    int head_only)
{
    char hdr[512], date[SF_HTTP_DATE_LEN + 1];
    sf_http_date_format((int64_t)time(NULL), date); /* RFC 9110 §6.6.1 */
    int n = snprintf(hdr, sizeof hdr,
                     "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                     "Cache-Control: no-store\r\n%sDate: %s\r\nConnection: close\r\n\r\n",
                     status, reason(status), type, len, status == 405 ? "Allow: GET, HEAD\r\n" : "",
                     date);
    size_t blen = head_only ? 0 : len;
    c->answered = 1;
    uv_read_stop((uv_stream_t *)&c->tcp);
    c->out = malloc((size_t)n + blen);
    if (!c->out) {
        aconn_close(c);
        return;
    }
    memcpy(c->out, hdr, (size_t)n);
    if (blen)
        memcpy(c->out + n, body, blen);
    uv_buf_t b = uv_buf_init(c->out, (unsigned)((size_t)n + blen));
    c->wr.data = c;
    if (uv_write(&c->wr, (uv_stream_t *)&c->tcp, &b, 1, on_written) != 0)
        aconn_close(c);
}

static int path_is(const sv_request *req, const char *p)
{
    size_t n = strlen(p);
    return req->path.len == n && memcmp(req->path.ptr, p, n) == 0;
}

static void route(aconn *c, const sv_request *req)
{
    static const char text[] = "text/plain; charset=utf-8";
    int head = req->method == SV_M_HEAD;
    if (req->method != SV_M_GET && req->method != SV_M_HEAD) {
        static const char msg[] = "method not allowed\n";
        respond(c, 405, text, msg, sizeof msg - 1, 0);
    } else if (path_is(req, "/metrics")) {
        char *body;
        size_t len;
        if (sv_metrics_render(c->a->m, &body, &len) != 0) {
            static const char msg[] = "out of memory\n";
            respond(c, 503, text, msg, sizeof msg - 1, head);
            return;
        }
        respond(c, 200, "text/plain; version=0.0.4; charset=utf-8", body, len, head);
        free(body);
    } else if (path_is(req, "/healthz") || path_is(req, "/health")) {
        char id[33], body[64];
        sv_metrics_pack_id(c->a->m, id);
        int stopping = atomic_load(c->a->stopping);
        int cut = sv_metrics_pack_cut(c->a->m);
        int n = snprintf(body, sizeof body, "%s %s\n",
                         stopping ? "stopping"
                         : cut    ? "pack-written-in-place"
                                  : "ok",
                         id);
        respond(c, stopping || cut ? 503 : 200, text, body, (size_t)n, head);
    } else {
        static const char msg[] =
            "not found: the admin port serves /metrics and /healthz (or /health)\n";
        respond(c, 404, text, msg, sizeof msg - 1, head);
    }
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    aconn *c = h->data;
    buf->base = c->buf + c->len;
    buf->len = sizeof c->buf - c->len;
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    aconn *c = s->data;
    if (nread < 0) {
        aconn_close(c); /* the client closed (or reset): nothing left to do */
        return;
    }
    if (c->lingering) {
        c->len = 0; /* input after the answer is dropped */
        return;
    }
    if (nread == 0 || c->answered)
        return;
    c->len += (size_t)nread;
    sv_request req;
    int r = sv_http1_parse(c->buf, c->len, &req);
    if (r == SV_PARSE_INCOMPLETE) {
        if (c->len < sizeof c->buf)
            return;
        r = -431;
    }
    if (r < 0) {
        char msg[64]; /* the reason phrase is the message */
        int n = snprintf(msg, sizeof msg, "%s\n", reason(-r));
        respond(c, -r, "text/plain; charset=utf-8", msg, (size_t)n, req.method == SV_M_HEAD);
        return;
    }
    route(c, &req);
}

static void on_timeout(uv_timer_t *t)
{
    aconn_close(t->data);
}

static void on_listen(uv_poll_t *p, int status, int events);

static void on_pause_end(uv_timer_t *t)
{
    sv_admin *a = t->data;
    if (uv_poll_start(&a->listener, UV_READABLE, on_listen) != 0)
        uv_timer_start(&a->pause, on_pause_end, SV_ACCEPT_PAUSE_MS, 0);
}

/* The client's address as accept(2) gave it (getpeername(2) fails once
 * the client has reset). */
static void set_peer(aconn *c, const struct sockaddr_storage *ss)
{
    if (ss->ss_family == AF_INET) {
        memcpy(c->peer, &((const struct sockaddr_in *)ss)->sin_addr, 4);
        c->peer_len = 4;
    } else if (ss->ss_family == AF_INET6) {
        memcpy(c->peer, &((const struct sockaddr_in6 *)ss)->sin6_addr, 16);
        c->peer_len = 16;
    }
}

static int same_peer(const aconn *x, const aconn *y)
{
    return x->peer_len && x->peer_len == y->peer_len && memcmp(x->peer, y->peer, x->peer_len) == 0;
}

/* The connection a newcomer at the limit takes the place of, or NULL: the
 * oldest lingering after its answer (the client has it); else one still
 * without its request and none arriving, of the address that holds the
 * most connections, the oldest of those; when every address holds one,
 * the oldest once it is SV_ADMIN_RECLAIM_MS old. Whoever holds the admin
 * port's connections from one address, re-opening them as they time out,
 * so keeps a health checker from another out no longer (it answered 503 to
 * it); from many addresses, it must open a connection for each one it
 * holds every second. At most 64 by 64 comparisons, and a recv for each
 * connection that becomes the best so far, only at the limit. */
static aconn *victim(sv_admin *a, uint64_t now)
{
    for (sv_link *l = a->live.next; l != &a->live; l = l->next)
        if (SV__CONTAINER(l, aconn, link)->lingering)
            return SV__CONTAINER(l, aconn, link);
    aconn *best = NULL;
    int best_n = 0;
    for (sv_link *l = a->live.next; l != &a->live; l = l->next) {
        aconn *c = SV__CONTAINER(l, aconn, link);
        if (c->answered) /* its answer is being written */
            continue;
        int n = 0;
        for (sv_link *m = a->live.next; m != &a->live; m = m->next)
            n += m == l || same_peer(c, SV__CONTAINER(m, aconn, link));
        /* on a tie, the older stays; not one whose request has just come */
        if (n > best_n && sv__peek_input(&c->tcp) <= 0) {
            best = c;
            best_n = n;
        }
    }
    if (best && best_n == 1 && now - best->t_accept < SV_ADMIN_RECLAIM_MS)
        return NULL;
    return best;
}

/* Takes an accepted socket: a connection, or a refusal when there are too
 * many, or nothing when there is no memory for it. */
static void take(sv_admin *a, int fd, const struct sockaddr_storage *peer)
{
    aconn *c = calloc(1, sizeof *c);
    if (!c) {
        close(fd);
        return;
    }
    c->a = a;
    c->tcp.data = c->timer.data = c;
    sv__list_init(&c->link);
    uv_tcp_init(&a->loop, &c->tcp);
    uv_timer_init(&a->loop, &c->timer);
    c->handles = 2;
    if (uv_tcp_open(&c->tcp, fd) != 0) {
        close(fd);
        aconn_close(c);
        return;
    }
    set_peer(c, peer);
    c->t_accept = uv_now(&a->loop);
    aconn *old = a->nlive >= SV_ADMIN_MAX_CONNS ? victim(a, c->t_accept) : NULL;
    if (old) {
        /* closed as the request timeout would (the slot is free at once;
         * its memory when its handles have closed, at the end of the turn) */
        aconn_close(old);
    } else if (a->nlive >= SV_ADMIN_MAX_CONNS) {
        /* Say why, in one non-blocking write from static memory, and close:
         * a flood must not get buffers or timers. A HEAD that arrived with
         * the connection gets the head alone (RFC 9110 §9.3.2). */
#define BUSY_BODY "too many admin connections; try again\n"
        _Static_assert(sizeof BUSY_BODY - 1 == 38, "the Content-Length below");
        static const char busy[] =
            "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; "
            "charset=utf-8\r\nContent-Length: 38\r\nCache-Control: "
            "no-store\r\nRetry-After: 1\r\nConnection: close\r\n\r\n" BUSY_BODY;
        size_t body_len = sizeof BUSY_BODY - 1;
#undef BUSY_BODY
        ssize_t got = recv(fd, c->buf, sizeof c->buf, MSG_DONTWAIT); /* c->buf holds nothing yet */
        int head = got >= 5 && memcmp(c->buf, "HEAD ", 5) == 0;
        uv_buf_t b = uv_buf_init((char *)busy, sizeof busy - 1 - (head ? body_len : 0));
        uv_try_write((uv_stream_t *)&c->tcp, &b, 1);
        sv__drop_arrived(fd, c->buf, sizeof c->buf);
        aconn_close(c);
        return;
    }
    sv__list_push(&a->live, &c->link);
    a->nlive++;
    uv_timer_start(&c->timer, on_timeout, SV_ADMIN_TIMEOUT_MS, 0);
    if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) != 0)
        aconn_close(c);
}

static void on_listen(uv_poll_t *p, int status, int events)
{
    sv_admin *a = p->data;
    (void)events;
    if (status < 0)
        return;
    for (int i = 0; i < SV_ACCEPT_BATCH; i++) {
        struct sockaddr_storage peer;
        int fd = sv__accept_one(a->lfd, &peer);
        if (fd == SV_ACCEPT_NONE)
            return;
        if (fd == SV_ACCEPT_PAUSE) {
            sv__say_accept_failure(&a->said, "admin", -1, errno, uv_now(&a->loop));
            uv_poll_stop(&a->listener);
            uv_timer_start(&a->pause, on_pause_end, SV_ACCEPT_PAUSE_MS, 0);
            return;
        }
        take(a, fd, &peer);
    }
}

static void on_listener_closed(uv_handle_t *h)
{
    sv_admin *a = h->data;
    close(a->lfd);
    a->lfd = -1;
}

static void close_any(uv_handle_t *h, void *arg)
{
    sv_admin *a = arg;
    if (uv_is_closing(h))
        return;
    if (h == (uv_handle_t *)&a->listener)
        uv_close(h, on_listener_closed);
    else if (h->data == a)
        uv_close(h, NULL);
    else
        aconn_close(h->data);
}

static void on_stop(uv_async_t *h)
{
    sv_admin *a = h->data;
    uv_walk(&a->loop, close_any, a);
}

static void admin_main(void *arg)
{
    sv_admin *a = arg;
    pthread_setname_np(pthread_self(), "servd-admin");
    uv_run(&a->loop, UV_RUN_DEFAULT);
}

int sv_admin_start(int fd, const char *addr_text, sv_metrics *m, atomic_int *stopping,
                   sv_admin **out, char *err, size_t errlen)
{
    sv_admin *a = calloc(1, sizeof *a);
    int rc;
    if (!a) {
        close(fd);
        snprintf(err, errlen, "%s: out of memory", addr_text);
        return -1;
    }
    a->m = m;
    a->stopping = stopping;
    sv__list_init(&a->live);
    /* out of descriptors (the loop's epoll, the eventfd) or memory: no admin */
    if ((rc = uv_loop_init(&a->loop)) != 0) {
        close(fd);
        free(a);
        snprintf(err, errlen, "%s: %s", addr_text, uv_strerror(rc));
        return -1;
    }
    a->lfd = fd;
    uv_timer_init(&a->loop, &a->pause); /* cannot fail */
    int stop_open = (rc = uv_async_init(&a->loop, &a->stop, on_stop)) == 0, poll_open = 0;
    a->listener.data = a->pause.data = a->stop.data = a;
    if (rc == 0 && listen(fd, SV_ADMIN_BACKLOG) != 0) /* an inherited socket listens already */
        rc = uv_translate_sys_error(errno);
    if (rc == 0) /* makes the socket non-blocking */
        poll_open = (rc = uv_poll_init(&a->loop, &a->listener, fd)) == 0;
    if (rc == 0)
        rc = uv_poll_start(&a->listener, UV_READABLE, on_listen);
    if (rc == 0)
        rc = uv_thread_create(&a->thread, admin_main, a);
    if (rc != 0) {
        snprintf(err, errlen, "%s: %s", addr_text, uv_strerror(rc));
        if (poll_open)
            uv_close((uv_handle_t *)&a->listener, NULL);
        uv_close((uv_handle_t *)&a->pause, NULL);
        if (stop_open)
            uv_close((uv_handle_t *)&a->stop, NULL);
        uv_run(&a->loop, UV_RUN_DEFAULT);
        uv_loop_close(&a->loop);
        close(fd);
        free(a);
        return -1;
    }
    *out = a;
    return 0;
}

void sv_admin_stop(sv_admin *a)
{
    uv_async_send(&a->stop);
    uv_thread_join(&a->thread);
    uv_loop_close(&a->loop);
    free(a);
}
