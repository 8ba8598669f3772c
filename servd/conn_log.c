/*
 * conn_log.c - the access-log lines of one connection's responses, written
 * once each response has left: BYTES is the body bytes the kernel took and
 * MICROS runs until its last byte was taken, as nginx's $body_bytes_sent
 * and $request_time, so a download the client abandoned is logged with what
 * it got, and a slow one with how long it took.
 *
 * answer() notes each response of a batch in the worker's log batch, with
 * views into the input its request was parsed from (the loop's read buffer
 * or the connection's input buffer, both unchanged until process()
 * returns) and its place in the connection's output stream: the offset of
 * its body and of its end, counted like c->produced. When the batch has
 * been written (sv__conn_flush, still inside process()), a response the
 * kernel took whole is logged at once, without a copy: the usual case. The
 * others are copied into a record of their own and queued on the
 * connection, logged as queued writes complete (on_write), and on close
 * with the bytes that went out. Their heap counts as the queued writes'
 * does (c->wr_heap, SV_CONN_HEAP_BYTES), so a client that reads nothing
 * cannot make servd hold lines without bound.
 */
#include "conn.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "log.h"

/* A response noted for the log: the line's fields but BYTES, MICROS and
 * TIME, which are known when it has gone out. */
struct sv_logpend {
    sv_log_entry e; /* views: into the input, or into the record */
    union {
        struct sockaddr sa;
        struct sockaddr_in in4;
        struct sockaddr_in6 in6;
    } peer;                   /* the client (e.peer points here), or */
    int has_peer;             /* none: "-" */
    uint64_t body_start, end; /* offsets in the connection's output stream */
    uint64_t t_req_us;        /* uv_hrtime()/1000 at the request's first byte */
};

/* A line waiting for its response's queued bytes. */
struct sv_logrec {
    struct sv_logrec *next;
    sv_logpend p;
    size_t heap;
    char data[];
};

/* Bytes of c's output stream the kernel has taken: all produced but what
 * libuv still holds, and, after a failed write, what the client's
 * acknowledgements show did not leave (c->unsent). */
static uint64_t taken(sv_conn *c)
{
    uint64_t held = sv__conn_queued(c) + c->unsent;
    return c->produced > held ? c->produced - held : 0;
}

static sf_view find_header(const sv_request *req, const char *name, size_t len)
{
    for (size_t i = 0; i < req->nheaders; i++) {
        const sv_header *h = &req->headers[i];
        if (h->name.len == len && strncasecmp(h->name.ptr, name, len) == 0)
            return h->value;
    }
    return (sf_view){NULL, 0};
}

/* Writes p's line; t: the bytes of the stream taken. */
static void emit(sv_conn *c, sv_logpend *p, uint64_t t)
{
    sv_worker *w = c->w;
    uint64_t body = p->end - p->body_start;
    p->e.body_bytes = t >= p->end ? body : t > p->body_start ? t - p->body_start : 0;
    p->e.peer = p->has_peer ? &p->peer.sa : NULL;
    p->e.time = w->logtime;
    p->e.time_len = w->logtime_len;
    uint64_t now_us = uv_hrtime() / 1000;
    p->e.micros = now_us >= p->t_req_us ? now_us - p->t_req_us : 0;
    sv_log_write(w->log, w->id, &p->e);
}

static char *keep_view(char *to, sf_view *v)
{
    if (v->len)
        memcpy(to, v->ptr, v->len);
    v->ptr = to;
    return to + v->len;
}

/* A view no longer than what a line shows of it: sv_log_format() writes
 * at most max bytes of a field and decides on its "..." from the first
 * max + 1, so the line comes out the same. */
static void cap_view(sf_view *v, size_t max)
{
    if (v->len > max + 1)
        v->len = max + 1;
}

/* Copies p out of the input into a record queued on c: of each field, what
 * its line can show (a record is at most ~3.3 KB, not a whole head). */
static void defer(sv_conn *c, sv_logpend *p)
{
    sv_log_entry *e = &p->e;
    cap_view(&e->method, SV_LOG_METHOD_MAX);
    cap_view(&e->target, SV_LOG_TARGET_MAX);
    cap_view(&e->version, SV_LOG_VERSION_MAX);
    cap_view(&e->referer, SV_LOG_HEADER_MAX);
    cap_view(&e->user_agent, SV_LOG_HEADER_MAX);
    size_t need =
        e->method.len + e->target.len + e->version.len + e->referer.len + e->user_agent.len;
    sv_logrec *r = malloc(sizeof *r + need);
    if (!r) { /* logged now, with the bytes out so far */
        sv__count(&c->w->ctr->errors[SV_ERR_NOMEM], 1);
        emit(c, p, taken(c));
        return;
    }
    r->next = NULL;
    r->p = *p;
    char *d = r->data;
    d = keep_view(d, &r->p.e.method);
    d = keep_view(d, &r->p.e.target);
    d = keep_view(d, &r->p.e.version);
    d = keep_view(d, &r->p.e.referer);
    keep_view(d, &r->p.e.user_agent);
    r->heap = sizeof *r + need;
    c->wr_heap += r->heap;
    if (c->logq)
        c->logq_end->next = r;
    else
        c->logq = r;
    c->logq_end = r;
}

void sv__log_note(sv_conn *c, const sv_request *req, int status, uint64_t body_bytes, int encoding)
{
    sv_worker *w = c->w;
    if (!w->logb && !(w->logb = malloc(SV_BATCH_LOG * sizeof *w->logb))) {
        sv__count(&w->ctr->errors[SV_ERR_NOMEM], 1);
        return;
    }
    sv_logpend *p = &w->logb[w->nlog++];
    memset(&p->e, 0, sizeof p->e);
    p->has_peer = c->peer.sa.sa_family != 0;
    struct sockaddr_storage client;
    if (p->has_peer && req && sv_realip_client(&w->cfg->realip, &c->peer.sa, req, &client))
        memcpy(&p->peer, &client, sizeof p->peer); /* an IPv4 or IPv6 address */
    else if (p->has_peer)
        memcpy(&p->peer, &c->peer, sizeof p->peer);
    if (req) {
        p->e.method = req->method_tok;
        p->e.target = req->target;
        p->e.version = req->version;
        p->e.referer = find_header(req, "referer", 7);
        p->e.user_agent = find_header(req, "user-agent", 10);
    }
    p->e.status = status;
    p->e.encoding = encoding;
    /* The response is the batch's last bytes so far. */
    p->end = c->produced + w->batch_bytes;
    p->body_start = p->end - body_bytes;
    p->t_req_us = c->t_req_us;
}

/* Logs the queued lines whose responses are out by t, oldest first. */
static void sent_by(sv_conn *c, uint64_t t)
{
    while (c->logq && t >= c->logq->p.end) {
        sv_logrec *r = c->logq;
        c->logq = r->next;
        emit(c, &r->p, t);
        c->wr_heap -= r->heap;
        free(r);
    }
}

void sv__log_settle(sv_conn *c)
{
    sv_worker *w = c->w;
    unsigned n = w->nlog;
    w->nlog = 0;
    if (c->state == SV_CS_CLOSED) { /* the close logged the queue */
        for (unsigned i = 0; i < n; i++)
            emit(c, &w->logb[i], c->taken_end);
        return;
    }
    /* uv_write writes at once into an empty queue and calls back later:
     * lines queued before this batch may be out too, and go first. */
    uint64_t t = taken(c);
    sent_by(c, t);
    for (unsigned i = 0; i < n; i++) {
        sv_logpend *p = &w->logb[i];
        if (t >= p->end && !c->logq)
            emit(c, p, t);
        else
            defer(c, p);
    }
}

void sv__log_sent(sv_conn *c)
{
    sv__clock(c->w);
    sent_by(c, taken(c));
}

void sv__log_close(sv_conn *c)
{
    c->taken_end = taken(c);
    if (!c->logq)
        return;
    sv__clock(c->w);
    while (c->logq) {
        sv_logrec *r = c->logq;
        c->logq = r->next;
        emit(c, &r->p, c->taken_end);
        c->wr_heap -= r->heap;
        free(r);
    }
}

void sv__conn_log_header_timeout(sv_conn *c)
{
    /* Part of a head arrived and no more in time: a request that never
     * completed, logged as nginx logs it (408, nothing sent). A connection
     * that sent nothing (a browser's preconnect) made no request. */
    sv_worker *w = c->w;
    if (!w->log || c->inlen == 0)
        return;
    sv__clock(w);
    sv_log_entry e = {0};
    e.peer = c->peer.sa.sa_family ? &c->peer.sa : NULL;
    e.time = w->logtime;
    e.time_len = w->logtime_len;
    e.status = 408;
    e.encoding = -1;
    uint64_t now_us = uv_hrtime() / 1000;
    e.micros = now_us >= c->t_req_us ? now_us - c->t_req_us : 0;
    sv_log_write(w->log, w->id, &e);
}
