/*
 * conn.h - one client connection on a worker loop: reading, answering
 * (pipelined requests batched into as few writev calls as possible),
 * writing with back-pressure, timeouts and closing.
 *
 * Memory per connection is this struct (472 bytes on x86-64) plus, only while a
 * request head is incomplete at the end of a read, one SV_HEAD_BUF input
 * buffer from the loop's free list (SV_MAX_HEAD, from the heap, once the
 * head outgrows it), or, while complete requests are held back by the
 * per-turn cap, a buffer of their size.
 * Requests are parsed straight from the loop's shared read buffer.
 */
#ifndef SV_CONN_H
#define SV_CONN_H

#include <netinet/in.h>
#include <stdint.h>
#include <uv.h>

#include "server.h"

enum sv_conn_state {
    SV_CS_OPEN,    /* reading requests */
    SV_CS_CLOSING, /* last response planned: shutdown once it is written */
    SV_CS_LINGER,  /* write side shut: discarding input until FIN or SV_LINGER_MS */
    SV_CS_CLOSED,  /* uv_close called; freed in the close callback */
};

/* Access-log lines of a batch written at most together (conn_log.c). */
#define SV_BATCH_LOG 32

typedef struct sv_logrec sv_logrec;

typedef struct sv_conn {
    uv_tcp_t tcp; /* first: a uv_stream_t* of it is the connection */
    sv_worker *w;
    sv_link link;  /* in w->conns */
    sv_link ready; /* in w->ready while deferred to the next loop turn */
    char *in;      /* held input or NULL */
    uint32_t inlen;
    uint32_t incap; /* bytes at in: SV_HEAD_BUF, SV_MAX_HEAD, or what a pause kept */
    uint8_t state;  /* enum sv_conn_state */
    uint8_t paused; /* reading stopped by the per-turn cap */
    uint8_t reading;
    uint8_t in_ready;
    uint8_t shut;        /* uv_shutdown issued */
    uint8_t eof;         /* the client sent FIN */
    uint8_t in_kernel;   /* wrote since the sweep last saw the kernel's send queue empty */
    uint8_t flight_seen; /* the last sweep saw response bytes in flight */
    uint8_t empty_lines; /* dropped since the last head (SV_MAX_LEADING_CRLF) */
    uint8_t pend_state;  /* enum sv_partial of the held incomplete head's last line */
    uint32_t pend_len;   /* with pend_state: bytes of the held head found incomplete, */
    uint32_t pend_at;    /* and where its unended line starts (conn.c process()) */
    uint64_t t_head;     /* uv_now() when the pending head began; 0: none pending */
    uint64_t t_active;   /* uv_now() of the last read, response or write completion,
                            or of the last sweep that saw bytes in flight */
    uint64_t t_progress; /* uv_now() when the bytes in flight last changed */
    uint64_t t_taken;    /* uv_now() of the first sweep that saw all of the last
                            response acknowledged after one in flight (stops) */
    uint64_t produced;   /* response bytes ever written to the socket or queued for it */
    uint64_t wr_queued;  /* bytes of the queued writes whose callback has not run; the
                            rest of produced is counted as written */
    size_t wr_heap;      /* heap those queued writes hold (SV_CONN_HEAP_BYTES) */
    uint64_t acked_seen; /* of those, acknowledged by the client at the last sweep */
    uint64_t turn;       /* the loop turn turn_bytes counts for */
    uint64_t turn_bytes; /* response bytes produced in that turn */
    uint64_t t_req_us;   /* uv_hrtime()/1000 at the current request's first byte (log) */
    sv_logrec *logq;     /* log lines waiting for their responses' queued bytes, */
    sv_logrec *logq_end; /* oldest first (conn_log.c) */
    uint64_t unsent;     /* of produced, bytes a failed write did not send (log) */
    uint64_t taken_end;  /* of produced, the bytes the kernel took before the close */
    union {
        struct sockaddr sa;
        struct sockaddr_in in4;
        struct sockaddr_in6 in6;
    } peer; /* filled only with an access log */
} sv_conn;

/* Takes an accepted, non-blocking socket fd, from the client at peer, and
 * starts serving it. Closes the fd on failure. */
void sv__conn_accept(sv_worker *w, int fd, const struct sockaddr_storage *peer);

/* Bytes of c's responses libuv still holds (its write queue). */
size_t sv__conn_queued(sv_conn *c);

/* Closes c now: queued writes are cancelled. Safe on a closed connection. */
void sv__conn_close(sv_conn *c);

/* Closes c with a reset, its unsent and unacknowledged bytes dropped: for a
 * client that took nothing for --send-timeout. */
void sv__conn_abort(sv_conn *c);

/* conn_log.c, with an access log: a line (408, request "-") for c, closed
 * by the header timeout, when part of a request head had arrived on it. */
void sv__conn_log_header_timeout(sv_conn *c);

/* conn_log.c: notes the response just added to the batch (its body is the
 * last body_bytes of the batch) for the log; req NULL: the request could
 * not be parsed. The batch must have room (SV_BATCH_LOG). */
void sv__log_note(sv_conn *c, const sv_request *req, int status, uint64_t body_bytes, int encoding);

/* conn_log.c: after the batch was written (or the connection closed):
 * logs the batch's responses the kernel took whole, queues the rest. */
void sv__log_settle(sv_conn *c);

/* conn_log.c: after a queued write completed: logs what is now out. */
void sv__log_sent(sv_conn *c);

/* conn_log.c: c is closing: logs every queued line with the bytes out. */
void sv__log_close(sv_conn *c);

/* Shuts c's write side down once its write queue is empty (libuv waits);
 * closes c when the shutdown cannot be issued. */
void sv__conn_start_shutdown(sv_conn *c);

/* Continues a paused connection: answers what it holds, then reads again
 * (conn_write.c calls it when the queue drained). */
void sv__conn_resume(sv_conn *c);

/* conn_write.c: writes the worker's batch for c, directly if the socket
 * takes it, else queued (the queued write pins the snapshot until its
 * callback); then, on a closing connection, shuts the write side down. */
void sv__conn_flush(sv_conn *c);

/* sweep.c: response bytes the kernel holds for c, not yet acknowledged. */
size_t sv__conn_kernel_unacked(sv_conn *c);

/* sweep.c: whether a request is on its way on c although nothing is queued
 * (see there); a graceful stop answers it before closing. */
int sv__conn_request_coming(sv_conn *c);

/* sweep.c: at --max-conns, finds up to max slots that free at the end of
 * this loop turn, oldest first: connections already closed in it, and ones
 * it closes: a client that has closed (its FIN not yet read), and a
 * keep-alive connection, or one that has sent nothing since its accept,
 * idle for SV_RECLAIM_IDLE_MS or longer. @return how many it found. */
unsigned sv__conn_make_room(sv_worker *w, unsigned max);

/* sweep.c: closes connections whose timeout passed (called every sweep). */
void sv__conn_sweep(sv_worker *w);

/* sweep.c: graceful stop: closes connections with nothing in flight and
 * lets the others finish their queued responses and then close. force
 * closes all. */
void sv__conn_stop_all(sv_worker *w, int force);

#endif
