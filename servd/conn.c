/*
 * conn.c - the request path of one connection.
 *
 * Reading: libuv reads into the loop's shared buffer (w->rbuf) and every
 * complete request in it is answered at once, straight from that buffer.
 * Only bytes left over at the end of a read - an incomplete head, or input
 * held back by the per-turn cap - are copied into an input buffer taken from
 * the loop's free list; while a connection holds one, libuv reads into its
 * tail, so the head grows in place and is parsed from there. A head that
 * fills that buffer (SV_HEAD_BUF) moves once to one of SV_MAX_HEAD.
 *
 * Answering: sv_respond() plans each response as iovecs into the pack map,
 * the loop's Date line and the loop's scratch buffers; the plans of all
 * requests answered in one pass are gathered into one iovec batch.
 *
 * Writing (conn_write.c): the batch goes out directly on the socket, and
 * what the socket did not take is queued with uv_write.
 *
 * Fairness and back-pressure: a connection stops answering once it produced
 * SV_CONN_TURN_BYTES in this loop turn or has that much queued, or once its
 * queued writes hold SV_CONN_HEAP_BYTES of heap (copies), stops reading,
 * and resumes when its queue drains (on_write, conn_write.c) or on the next
 * turn (ready list run from an idle handle).
 *
 * Logging (conn_log.c): each response is noted in the worker's log batch
 * and its access-log line written once the kernel has taken it.
 *
 * Closing: after a response that ends the connection, input is still read
 * and dropped while it is written (close_after_write); the write side is
 * shut down once everything is written and the input is drained for up to
 * SV_LINGER_MS (lingering close), then the socket is closed. The timeouts
 * that close a connection, and the stop, are in sweep.c.
 */
#include "conn.h"

#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define STREAM(c) ((uv_stream_t *)&(c)->tcp)

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);
static void on_close(uv_handle_t *h);

/* ---- Input buffers (per-loop free list) ---- */

static char *inbuf_get(sv_worker *w)
{
    if (w->inbuf_free) {
        char *b = w->inbuf_free;
        memcpy(&w->inbuf_free, b, sizeof(void *));
        w->ninbuf_free--;
        return b;
    }
    return malloc(SV_HEAD_BUF);
}

/* Gives back an input buffer of cap bytes: one of SV_HEAD_BUF to the free
 * list, any other (a pause's own size, or SV_MAX_HEAD) to the heap. */
static void inbuf_put(sv_worker *w, char *b, uint32_t cap)
{
    if (cap != SV_HEAD_BUF || w->ninbuf_free >= SV_INBUF_SPARE) {
        free(b);
        return;
    }
    memcpy(b, &w->inbuf_free, sizeof(void *));
    w->inbuf_free = b;
    w->ninbuf_free++;
}

static void release_input(sv_conn *c)
{
    if (c->in) {
        inbuf_put(c->w, c->in, c->incap);
        c->in = NULL;
    }
    c->inlen = c->incap = 0;
    c->pend_state = SV_PARTIAL_NONE;
}

/* Before reading into the input buffer: makes room for more of a head. A
 * buffer of held input's own size (a pause) becomes an SV_HEAD_BUF one; a
 * full SV_HEAD_BUF one, the start of a longer head, becomes SV_MAX_HEAD.
 * A full SV_MAX_HEAD one cannot be read into: process() answers 431 at that
 * length. @return 0, or -1 when out of memory. */
static int grow_input(sv_conn *c)
{
    if (c->inlen < c->incap && c->incap >= SV_HEAD_BUF)
        return 0;
    uint32_t cap = c->inlen < SV_HEAD_BUF ? SV_HEAD_BUF : SV_MAX_HEAD;
    if (c->inlen >= cap)
        return -1;
    char *b = cap == SV_HEAD_BUF ? inbuf_get(c->w) : malloc(cap);
    if (!b)
        return -1;
    memcpy(b, c->in, c->inlen);
    inbuf_put(c->w, c->in, c->incap);
    c->in = b;
    c->incap = cap;
    return 0;
}

/* ---- State changes ---- */

size_t sv__conn_queued(sv_conn *c)
{
    return STREAM(c)->write_queue_size;
}

void sv__conn_close(sv_conn *c)
{
    if (c->state == SV_CS_CLOSED)
        return;
    if (c->w->log)
        sv__log_close(c);
    /* Queued writes are cancelled now and on_write counts none of them; the
     * kernel took whatever libuv no longer holds (a response cut off by a
     * client that went away still sent those bytes). Exact when the close
     * comes from anywhere but a failed write (see on_write). */
    if (c->wr_queued > sv__conn_queued(c))
        sv__count(&c->w->ctr->bytes_sent, c->wr_queued - sv__conn_queued(c));
    c->wr_queued = 0;
    c->state = SV_CS_CLOSED;
    c->w->nclosing++;
    if (c->in_ready) {
        sv__list_del(&c->ready);
        c->in_ready = 0;
    }
    uv_close((uv_handle_t *)&c->tcp, on_close);
}

void sv__conn_abort(sv_conn *c)
{
    /* A reset (SO_LINGER 0): after a FIN, the kernel would keep what the
     * client never took, up to a send buffer (megabytes, autotuned), in an
     * orphaned socket in FIN-WAIT-1 that probes a closed window for minutes;
     * a slow-read attack would pile them up. */
    uv_os_fd_t fd;
    struct linger now = {1, 0};
    if (c->state != SV_CS_CLOSED && uv_fileno((uv_handle_t *)&c->tcp, &fd) == 0)
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &now, sizeof now);
    sv__conn_close(c);
}

static void on_close(uv_handle_t *h)
{
    sv_conn *c = (sv_conn *)h;
    sv_worker *w = c->w;
    release_input(c);
    sv__list_del(&c->link);
    w->nconns--;
    w->nclosing--;
    sv__count(&w->ctr->conns_closed, 1);
    free(c);
    if (w->draining && w->nconns == 0)
        sv__worker_idle(w);
}

static void start_reading(sv_conn *c)
{
    if (c->reading)
        return;
    if (uv_read_start(STREAM(c), on_alloc, on_read) != 0) {
        sv__conn_close(c);
        return;
    }
    c->reading = 1;
}

static void stop_reading(sv_conn *c)
{
    if (c->reading) {
        uv_read_stop(STREAM(c));
        c->reading = 0;
    }
}

/* The last response is planned: no more requests are answered; the write
 * side is shut down after the next flush (sv__conn_flush ->
 * sv__conn_start_shutdown). Input is still read, and dropped (on_read),
 * while the response is written: a client may write its whole request, a
 * body servd does not drain included, before it reads, and would block in
 * its write while servd blocks in its own until the send timeout (RFC 9112
 * §9.6: a server that closes should keep reading and discarding what the
 * client sends). */
static void close_after_write(sv_conn *c)
{
    if (c->state != SV_CS_OPEN)
        return;
    c->state = SV_CS_CLOSING;
    c->paused = 0;
    if (c->in_ready) {
        sv__list_del(&c->ready);
        c->in_ready = 0;
    }
    if (!c->eof)
        start_reading(c); /* a paused connection had stopped */
}

static void on_shutdown(uv_shutdown_t *req, int status)
{
    sv_conn *c = (sv_conn *)req->handle;
    free(req);
    if (c->state == SV_CS_CLOSED)
        return;
    /* (once the client has closed, a FIN alone unacknowledged is no reason
     * to stay: SIOCOUTQ counts it as one byte) */
    if (status < 0 || (c->eof && sv__conn_kernel_unacked(c) <= 1)) {
        sv__conn_close(c);
        return;
    }
    /* Everything is written and the FIN sent: drain input until the client
     * closes too, so that no RST overtakes the response. A client that
     * closed its side already sends nothing more, but may still be reading
     * what the kernel holds: kept (under --max-conns) until it has taken it
     * all, or the send timeout resets it (sweep.c). Closed now, the kernel
     * kept an orphaned socket holding up to a send buffer for minutes, out
     * of every bound of servd's. */
    c->state = SV_CS_LINGER;
    c->t_active = uv_now(&c->w->loop);
    release_input(c);
    if (!c->eof)
        start_reading(c);
}

/* Shuts the write side down once the write queue is empty (libuv waits). */
void sv__conn_start_shutdown(sv_conn *c)
{
    if (c->shut)
        return;
    uv_shutdown_t *req = malloc(sizeof *req);
    if (!req || uv_shutdown(req, STREAM(c), on_shutdown) != 0) {
        free(req);
        sv__conn_close(c);
        return;
    }
    c->shut = 1;
}

/* Puts a paused connection with nothing queued on the ready list: it goes on
 * in the next loop turn, after every other connection had its turn. */
static void on_ready(uv_idle_t *idle);

static void defer(sv_conn *c)
{
    sv_worker *w = c->w;
    if (c->in_ready)
        return;
    sv__list_push(&w->ready, &c->ready);
    c->in_ready = 1;
    uv_idle_start(&w->ready_idle, on_ready);
}

/* ---- Answering ---- */

/* Appends a plan to the batch and counts it. */
static void add_plan(sv_conn *c, const sv_plan *plan)
{
    sv_worker *w = c->w;
    size_t bytes = 0;
    for (int i = 0; i < plan->iovcnt; i++) {
        size_t n = plan->iov[i].iov_len;
        if (n == 0)
            continue;
        w->iov[w->niov].base = plan->iov[i].iov_base;
        w->iov[w->niov].len = n;
        w->niov++;
        bytes += n;
    }
    w->batch_bytes += bytes;
    c->turn_bytes += bytes;
    int cls = plan->status / 100;
    sv__count(&w->ctr->status[cls >= 1 && cls <= 5 ? cls : 5], 1);
    if (plan->encoding >= 0 && plan->encoding < SF_ENC_COUNT)
        sv__count(&w->ctr->encoding[plan->encoding], 1);
}

/* Makes room in the batch for one more plan. */
static void reserve(sv_conn *c)
{
    sv_worker *w = c->w;
    if (w->niov + 1 + SV_PLAN_IOV > SV_BATCH_IOV || w->nscratch == SV_BATCH_SCRATCH ||
        w->nlog == SV_BATCH_LOG)
        sv__conn_flush(c);
}

/* Answers one parsed request; body_here: the bytes after its head that have
 * arrived (its body, and perhaps requests after it). */
static void answer(sv_conn *c, sv_request *req, size_t body_here)
{
    sv_worker *w = c->w;
    reserve(c);
    if (c->state != SV_CS_OPEN)
        return;
    /* A body we will not skip: answer, then close (RFC 9112 §9.6 lets a
     * server close instead of reading an unwanted body). */
    if (req->body_len > SV_MAX_DRAIN)
        req->keep_alive = 0;
    if (w->draining)
        req->keep_alive = 0;
    /* Answered before its whole body has arrived, a request closes its
     * connection after the answer (RFC 9110 §10.1.1 lets a server answer
     * early if it says whether it closes), rather than staying open to read
     * the rest: behind a front end that takes the answer and reuses the
     * connection without ever sending the body (Apache Traffic Server 9.2
     * does), the next request it sent there was read as the missing body,
     * and what followed it as a request of the sender's choosing, whose
     * answer the front end cached under another URL. The same covers a
     * client that sent "Expect: 100-continue" and waits for a 100: it gets
     * the answer at once, with Connection: close, and need not send the
     * body (curl does not). */
    if (req->body_len > body_here)
        req->keep_alive = 0;
    sv_scratch *sc = &w->scratch[w->nscratch];
    sv_plan *plan = &w->plan;
    if (atomic_load_explicit(w->snap->cut, memory_order_relaxed))
        /* the pack was cut under its map: no body for HEAD, and the
         * connection closes (the client retries on a new one) */
        sv_respond_error_method(503, 1, req->method, &w->date, plan);
    else {
        sv_respond(req, sv_snapshot_reader(w->snap, w->id), &w->cfg->site, &w->date, sc, plan);
        if (plan->overflow) /* a plan cut short (http.h): a 500, not a wrong length */
            sv_respond_error_method(500, 1, req->method, &w->date, plan);
    }
    if (sc->used) {
        w->nscratch++;
        /* The heap bound counts the batch's copies too, which queuing it
         * would make: eight formatted responses (a 301 of a long query is
         * 12 KiB) went out in one batch before it was looked at, 96 KiB
         * queued for a client reading nothing. Past it, the connection's
         * turn ends here (process() pauses it). */
        w->batch_copied += sc->used;
        if (c->wr_heap + w->batch_copied >= SV_CONN_HEAP_BYTES)
            c->turn_bytes = SV_CONN_TURN_BYTES;
    }
    add_plan(c, plan);
    if (w->log)
        sv__log_note(c, req, plan->status, plan->body_bytes, plan->encoding);
    if (plan->close || !req->keep_alive)
        close_after_write(c);
}

/* Answers a request that could not be parsed (req NULL) or whose chunked
 * body is malformed, then closes: after a framing error nothing later on
 * the connection can be trusted (RFC 9112 §9.3). */
static void answer_error(sv_conn *c, const sv_request *req, int status)
{
    sv_worker *w = c->w;
    reserve(c);
    if (c->state != SV_CS_OPEN)
        return;
    sv_respond_error_method(status, 1, w->req.method, &w->date, &w->plan);
    add_plan(c, &w->plan);
    sv__count(&w->ctr->errors[SV_ERR_PARSE], 1);
    if (w->log)
        sv__log_note(c, req, w->plan.status, w->plan.body_bytes, w->plan.encoding);
    close_after_write(c);
}

/* Notes what the unended last line of the incomplete head buf[pos, len) is, for
 * consume_held() to judge the next bytes of that line alone. The head is
 * kept from its start (keep(), consume_held()), where this applies to it.
 * Out of line: inlined, it cost the request path an instruction. */
__attribute__((noinline)) static void pending(sv_conn *c, const char *buf, size_t pos, size_t len)
{
    size_t at;
    c->pend_state = (uint8_t)sv_http1_partial(buf + pos, len - pos, &at);
    c->pend_at = (uint32_t)at;
    c->pend_len = (uint32_t)(len - pos);
}

/* Answers every complete request in buf[0, len), in order, and writes the
 * batch. @return the bytes consumed; the caller keeps the rest (an
 * incomplete head, or input held back because the connection paused). */
static size_t process(sv_conn *c, const char *buf, size_t len)
{
    sv_worker *w = c->w;
    size_t pos = 0;

    sv__clock(w);
    if (c->turn != w->turn) {
        c->turn = w->turn;
        c->turn_bytes = 0;
    }
    while (pos < len && c->state == SV_CS_OPEN) {
        if (c->turn_bytes >= SV_CONN_TURN_BYTES || sv__conn_queued(c) >= SV_CONN_TURN_BYTES ||
            c->wr_heap >= SV_CONN_HEAP_BYTES) {
            c->paused = 1;
            break;
        }
        if (__builtin_expect(buf[pos] == '\r', 0)) {
            /* Empty lines before a request line (RFC 9112 §2.2: an old
             * client's CRLF after a body) are dropped here, and counted
             * since the last head, so that SV_MAX_LEADING_CRLF gives the
             * same answer however the bytes arrive. Dropped alone, they
             * start no head: they do not arm the header timeout of a
             * connection that is only idle. */
            size_t e = sv_http1_empty_lines(buf + pos, len - pos);
            if (e / 2 > (size_t)(SV_MAX_LEADING_CRLF - c->empty_lines)) {
                w->req.method = 0; /* no request line was read */
                answer_error(c, NULL, 400);
                pos = len;
                break;
            }
            c->empty_lines = (uint8_t)(c->empty_lines + e / 2);
            pos += e;
            if (pos == len) {
                w->blank = 1; /* no timer restarts for them (on_read) */
                break;
            }
        }
        int r = sv_http1_parse(buf + pos, len - pos, &w->req);
        if (r == SV_PARSE_INCOMPLETE) {
            if (len - pos < SV_MAX_HEAD) {
                pending(c, buf, pos, len);
                break;
            }
            r = -431; /* the parser's contract; never wait on a full buffer */
        }
        if (r < 0) {
            /* Logged with its request line when that was read whole, but
             * none of its field lines: the head was not read whole, and a
             * client's X-Forwarded-For before the fault would stand in for
             * the line a trusted proxy appends after it (--real-ip-from). */
            w->req.nheaders = 0;
            answer_error(c, w->req.version.len ? &w->req : NULL, -r);
            pos = len;
            break;
        }
        pos += (size_t)r;
        c->t_head = 0;
        c->empty_lines = 0;
        if (w->req.chunked) {
            /* Skipped like a body of that Content-Length when it is all
             * here; one still arriving is not waited for: the connection
             * closes after the answer, as in answer(). */
            int b = sv_http1_chunked_length(buf + pos, len - pos);
            if (b < 0) {
                answer_error(c, &w->req, -b);
                pos = len;
                break;
            }
            if (b > 0)
                w->req.body_len = (uint64_t)b;
            else
                w->req.keep_alive = 0;
        }
        answer(c, &w->req, len - pos);
        /* Still open, it keeps its connection, so its body (if any) is no
         * longer than SV_MAX_DRAIN and all here (answer()): skipped. */
        if (c->state == SV_CS_OPEN)
            pos += (size_t)w->req.body_len;
    }
    sv__conn_flush(c);
    return pos;
}

/* Keeps n unconsumed bytes of the loop buffer in an input buffer. An
 * incomplete head gets a whole SV_HEAD_BUF buffer, to be read into; input
 * held back by a pause (requests already complete, a few hundred bytes
 * each) gets a buffer of its own size, grown only if more must be read
 * after it: under a burst, every connection past its share of a loop turn
 * holds its next request, and 16 KiB each would add up. */
static void keep(sv_conn *c, const char *p, size_t n)
{
    if (n == 0 || c->state != SV_CS_OPEN)
        return;
    c->incap = c->paused ? (uint32_t)n : SV_HEAD_BUF;
    c->in = c->paused ? malloc(n) : inbuf_get(c->w);
    if (!c->in) {
        sv__count(&c->w->ctr->errors[SV_ERR_NOMEM], 1);
        sv__conn_close(c);
        return;
    }
    memcpy(c->in, p, n);
    c->inlen = (uint32_t)n;
}

/* Answers what the input buffer holds and keeps the rest at its start. */
static void consume_held(sv_conn *c)
{
    /* More of the unended last line of a held head: judged alone when it
     * can be (http.h, sv_http1_still_incomplete), else the head is parsed
     * again from its start. Parsing it all at each read made a head sent a
     * byte at a time cost the square of its length: 578 million
     * instructions for 30 KB, 26 million now (bench/RESULTS.md). */
    if (c->pend_state != SV_PARTIAL_NONE &&
        sv_http1_still_incomplete(c->pend_state, c->pend_at, c->in, c->pend_len, c->inlen)) {
        c->pend_len = c->inlen;
        return;
    }
    c->pend_state = SV_PARTIAL_NONE; /* process() sets it again if need be */
    size_t used = process(c, c->in, c->inlen);
    if (c->state != SV_CS_OPEN)
        return; /* the buffer goes back when the connection closes or lingers */
    c->inlen -= (uint32_t)used;
    if (c->inlen == 0)
        release_input(c);
    else if (used)
        memmove(c->in, c->in + used, c->inlen);
}

/* Bookkeeping after input was processed: timeouts and pausing. */
static void after_input(sv_conn *c)
{
    if (c->state != SV_CS_OPEN)
        return;
    if (c->paused) {
        stop_reading(c);
        c->t_head = 0;
        if (sv__conn_queued(c) == 0)
            defer(c);
        return;
    }
    if (c->inlen) {
        if (!c->t_head)
            c->t_head = uv_now(&c->w->loop); /* a head is now pending */
    } else if (!c->w->blank) {
        /* (empty lines alone leave it: a new connection's, from the accept,
         * or that of the "\r" of a "\r\n" split in two) */
        c->t_head = 0; /* during a stop, the sweep closes it once idle (idle_limit) */
    }
}

/* Continues a paused connection: answers what it holds, then reads again. */
void sv__conn_resume(sv_conn *c)
{
    c->paused = 0;
    if (c->inlen)
        consume_held(c);
    after_input(c);
    c->w->blank = 0;
    if (c->state == SV_CS_OPEN && !c->paused)
        start_reading(c);
}

static void on_ready(uv_idle_t *idle)
{
    sv_worker *w = idle->data;
    sv_link list;
    sv__list_init(&list);
    /* Take the whole list: a connection that pauses again waits for the
     * next turn instead of running forever in this one. */
    if (!sv__list_empty(&w->ready)) {
        list.next = w->ready.next;
        list.prev = w->ready.prev;
        list.next->prev = &list;
        list.prev->next = &list;
        sv__list_init(&w->ready);
    }
    uv_idle_stop(idle);
    while (!sv__list_empty(&list)) {
        sv_conn *c = SV__CONTAINER(list.next, sv_conn, ready);
        sv__list_del(&c->ready);
        c->in_ready = 0;
        if (c->state == SV_CS_OPEN && c->paused && sv__conn_queued(c) == 0)
            sv__conn_resume(c);
    }
}

/* ---- Reading ---- */

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    sv_conn *c = (sv_conn *)h;
    if (c->in && c->state == SV_CS_OPEN) {
        if (grow_input(c) != 0) {
            buf->base = NULL; /* on_read gets UV_ENOBUFS and closes */
            buf->len = 0;
            return;
        }
        buf->base = c->in + c->inlen;
        buf->len = c->incap - c->inlen;
    } else {
        buf->base = c->w->rbuf;
        buf->len = sizeof c->w->rbuf;
    }
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    sv_conn *c = (sv_conn *)s;
    sv_worker *w = c->w;

    if (nread == 0)
        return;
    if (nread == UV_EOF)
        c->reading = 0; /* libuv stopped reading */
    if (c->state == SV_CS_LINGER) {
        if (nread < 0)
            sv__conn_close(c); /* the client closed too: done */
        return;                /* input after our last response is discarded */
    }
    if (c->state == SV_CS_CLOSING) { /* input after the last request: discarded */
        if (nread == UV_EOF)
            c->eof = 1; /* closed once the client took the response (on_shutdown) */
        else if (nread < 0)
            sv__conn_close(c); /* reset: the rest of the response cannot arrive */
        return;
    }
    if (c->state != SV_CS_OPEN)
        return;
    if (nread < 0) {
        if (nread != UV_EOF) {
            if (nread == UV_ENOBUFS) /* on_alloc had no buffer */
                sv__count(&w->ctr->errors[SV_ERR_NOMEM], 1);
            else if (nread != UV_ECONNRESET)
                sv__count(&w->ctr->errors[SV_ERR_READ], 1);
            sv__conn_close(c);
            return;
        }
        /* The client will send nothing more; finish what is queued, and
         * what the kernel holds (on_shutdown). */
        if (sv__conn_queued(c) == 0 && sv__conn_kernel_unacked(c) == 0) {
            sv__conn_close(c);
            return;
        }
        c->eof = 1;
        close_after_write(c);
        sv__conn_start_shutdown(c);
        return;
    }
    if (w->log && c->inlen == 0)
        c->t_req_us = uv_hrtime() / 1000;
    if (buf->base == w->rbuf) {
        size_t used = process(c, w->rbuf, (size_t)nread);
        keep(c, w->rbuf + used, (size_t)nread - used);
    } else {
        c->inlen += (uint32_t)nread;
        consume_held(c);
    }
    after_input(c);
    /* Input that ended in empty lines alone is no activity (process() set
     * w->blank): else a client sending a CRLF now and then would hold its
     * connection, and its --max-conns slot, for good. */
    if (w->blank)
        w->blank = 0;
    else
        c->t_active = uv_now(&w->loop);
}

/* ---- Entry points from worker.c ---- */

void sv__conn_accept(sv_worker *w, int fd, const struct sockaddr_storage *peer)
{
    sv_conn *c = calloc(1, sizeof *c);
    if (!c) {
        sv__count(&w->ctr->errors[SV_ERR_NOMEM], 1);
        close(fd);
        return;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (w->log && (peer->ss_family == AF_INET || peer->ss_family == AF_INET6))
        memcpy(&c->peer, peer, sizeof c->peer);
    uv_tcp_init(&w->loop, &c->tcp); /* no socket yet (AF_UNSPEC): cannot fail */
    c->w = w;
    c->state = SV_CS_OPEN;
    sv__list_init(&c->ready);
    sv__list_push(&w->conns, &c->link);
    w->nconns++;
    sv__count(&w->ctr->conns_accepted, 1);
    /* The first head must arrive within the header timeout of the accept. */
    c->t_head = c->t_active = uv_now(&w->loop);
    if (uv_tcp_open(&c->tcp, fd) != 0) {
        close(fd);
        sv__conn_close(c);
        return;
    }
    start_reading(c);
}
