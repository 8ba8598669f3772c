/*
 * server.h - servd's runtime: the configuration, the worker loops and the
 * process-wide server that starts, swaps and stops them.
 *
 *   main thread    options, the first pack's validation, signals (SIGHUP
 *                  reload, SIGUSR1 log reopen, SIGTERM/SIGINT/SIGQUIT
 *                  graceful stop)
 *   libuv's pool   a reload's validation of the new pack (server.c, sv_load),
 *                  one at a time
 *   worker i       one libuv loop, its own SO_REUSEPORT listening sockets,
 *                  its connections (conn.c); shares nothing writable with
 *                  other workers on the request path
 *   admin thread   /metrics and /healthz on --admin (admin.c)
 *   log thread     writes access-log buffers handed over by workers (log.c)
 *
 * Structures shared between server.c, worker.c and conn.c live here (sv__ names are
 * internal to the daemon). docs/architecture.md tells the whole story.
 */
#ifndef SV_SERVER_H
#define SV_SERVER_H

#include <limits.h>
#include <stddef.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/socket.h>
#include <uv.h>

#include "addr.h"
#include "http.h"
#include "metrics.h"
#include "realip.h"
#include "snapshot.h"

/* ---- Limits and defaults (all documented in docs/servd.1) ---- */

/* Most --listen addresses: more than any real deployment needs. */
#define SV_MAX_LISTEN 16
/* Most worker threads: one per core, and 256 cores is beyond any machine we
 * target; it also bounds the per-snapshot reader array. */
#define SV_MAX_WORKERS 256
/* Default keep-alive idle timeout: what nginx uses (keepalive_timeout 75s).
 * Longer than the idle timeout of the CDNs' connection pools to their
 * origins (CloudFront's keep-alive at most 60 s, Varnish's
 * backend_idle_timeout 60 s): the pool, not the origin, should end an idle
 * connection, or a request sent on it as it closes fails. */
#define SV_DEFAULT_IDLE_MS 75000
/* Default time allowed for a whole request head (slowloris): generous for
 * any real client, short enough that a trickling attacker holds a slot for
 * little time. nginx's client_header_timeout is 60 s; we are stricter. */
#define SV_DEFAULT_HEADER_MS 10000
/* Default time a response may make no write progress (client stopped
 * reading) before the connection is closed. */
#define SV_DEFAULT_SEND_MS 60000
/* Default bound on the graceful stop: responses still in flight after it
 * are cut. */
#define SV_DEFAULT_SHUTDOWN_MS 10000
/* Default maximum connections per worker: ~4 MiB of connection state at
 * most (about 400 bytes each), well under the fd limits servd asks for. */
#define SV_DEFAULT_MAX_CONNS 10000
/* At --max-conns, a keep-alive connection idle at least this long is closed
 * to make room for a new one, rather than refusing the new one with a 503
 * (nginx and Apache's event MPM reclaim idle keep-alive connections too):
 * a CDN's pool keeps many idle, and a new client would otherwise be refused
 * while they sit. Long enough not to take a connection between the requests
 * of a client's burst. */
#define SV_RECLAIM_IDLE_MS 3000
/* The connections that have been sent nothing a look for room asks the
 * kernel about (recv MSG_PEEK: has the client gone?), newest first: a
 * client that connects and leaves at once is a new one, and a look over
 * all of them cost a system call per connection held, for every newcomer
 * at --max-conns. */
#define SV_RECLAIM_PEEKS 64
/* During a graceful stop, a keep-alive connection is closed once it has
 * been idle this long (at the first sweep after), not the moment the stop
 * finds it idle: a client sends its next request as soon as it has read
 * the last response, and a close in that gap meets the request (a RST: a
 * failed request, in 3 to 20 of 20 busy connections in a test). A request
 * that comes meanwhile is answered with Connection: close. A connection
 * idle longer already is closed at once. Half a second is far more than
 * the gap of a busy client or pool (microseconds to milliseconds), and
 * short enough that a stop or a restart by a service manager, which waits
 * for it, is held by at most about a second: during a stop the sweep runs
 * every quarter of this (worker.c, begin_drain). */
#define SV_STOP_IDLE_MS 500
/* Connections accepted per readiness event before returning to the loop, so
 * a connection storm cannot delay reads on established connections. */
#define SV_ACCEPT_BATCH 64
/* Pause in accepting after EMFILE/ENFILE: long enough not to spin on a full
 * fd table, short enough that waiting clients barely notice. */
#define SV_ACCEPT_PAUSE_MS 100
/* Response bytes one connection may produce per loop turn, and the most it
 * may have queued: beyond either, it stops reading until its queue drains,
 * so one fast pipelining reader cannot starve the others (redis does the
 * same with NET_MAX_WRITES_PER_EVENT). 256 KiB keeps a 1 Gbit/s link busy
 * for 2 ms per turn. */
#define SV_CONN_TURN_BYTES (256u * 1024u)
/* The most heap one connection's queued writes may hold (their requests,
 * the Date and scratch bytes copied into them, libuv's iovec arrays):
 * beyond it the connection stops reading like at SV_CONN_TURN_BYTES. Bodies
 * queued from the map cost nothing here, but a client that pipelines small
 * responses (redirects, HEAD, 304) and reads none would otherwise fill
 * SV_CONN_TURN_BYTES with copies: 256 KiB of heap per connection. */
#define SV_CONN_HEAP_BYTES (16u * 1024u)
/* iovecs gathered into one writev: the kernel's limit. */
#define SV_BATCH_IOV IOV_MAX
/* Scratch buffers (formatted lines of 206/301/416/errors) one batch may
 * hold before it is written out. Most responses use none. */
#define SV_BATCH_SCRATCH 8
/* The loop's read buffer, and the input buffer a connection holds an
 * incomplete head in (conn.c); a head that outgrows it, up to SV_MAX_HEAD
 * (http.h), moves to a buffer of that size. Browsers' heads are 0.3-2 KB;
 * 16 KiB leaves most of the largest cookies in the first tier. */
#define SV_HEAD_BUF 16384
/* Spare input buffers kept per loop (SV_HEAD_BUF each): enough for the
 * usual number of connections with a partial head at once; more are freed. */
#define SV_INBUF_SPARE 32
/* After the last response on a connection servd shuts down its write side
 * and reads (and discards) for at most this long, waiting for the client's
 * FIN: closing with unread input would send a RST that can destroy the
 * response before the client reads it (nginx: lingering_timeout). */
#define SV_LINGER_MS 5000
/* Longest sweep interval: timeouts are checked this often, or every quarter
 * of the shortest timeout option when that is shorter (of
 * --shutdown-timeout too, from the start of a stop), but at most every
 * SV_SWEEP_MIN_MS. */
#define SV_SWEEP_MS     1000
#define SV_SWEEP_MIN_MS 50

/* Everything the command line decides. */
typedef struct sv_config {
    const char *pack_path;
    sv_addr listen[SV_MAX_LISTEN];
    int nlisten;
    int workers;
    int has_admin;
    sv_addr admin;
    const char *access_log; /* NULL: no access log */
    sv_realip realip;       /* the client behind a trusted proxy, for the log */
    sv_site site;
    uint64_t idle_ms, header_ms, send_ms, shutdown_ms;
    unsigned max_conns; /* per worker */

    /* Swaps, socket activation and privileges (main.c fills these). */
    int builtin;                  /* serving the built-in site: SIGHUP has nothing to load */
    int watch;                    /* reload when pack_path changes (watch.c) */
    uint64_t watch_poll_ms;       /* stat fallback interval of the watch; 0: none */
    int inherited[SV_MAX_LISTEN]; /* listening sockets passed in (activation.c) */
    int ninherited;
    int admin_inherited;        /* passed admin socket, or -1: bind admin */
    const struct sv_user *user; /* switch to it after binding (privdrop.c); NULL: stay */
} sv_config;

/* Until the main loop takes SIGHUP and SIGUSR1, notes them rather than
 * letting their default action kill servd while it starts; sv_server_run
 * acts on them once servd is listening. Called before the pack is opened. */
void sv_server_note_early_signals(void);

/* Until the main loop takes them, SIGTERM, SIGINT and SIGQUIT end servd at
 * once with status 0 and a line that says so: nothing is served yet, and a
 * check of a large pack can take seconds (the check child dies with servd:
 * main.c). Called after sv_say_init, not in the check child. */
void sv_server_end_on_early_stop(void);

/* Runs servd until it is stopped. Takes over the caller's reference on
 * snap. @return the process exit code (0 after a graceful stop, 1 when
 * the sockets, the admin address or the access log cannot be set up). */
int sv_server_run(const sv_config *cfg, sv_snapshot *snap);

/* ---- Internals shared by server.c, worker.c and conn.c ---- */

/* An intrusive doubly linked list (circular, with a head node). */
typedef struct sv_link {
    struct sv_link *prev, *next;
} sv_link;

static inline void sv__list_init(sv_link *head)
{
    head->prev = head->next = head;
}

static inline int sv__list_empty(const sv_link *head)
{
    return head->next == head;
}

static inline void sv__list_push(sv_link *head, sv_link *l)
{
    l->prev = head->prev;
    l->next = head;
    head->prev->next = l;
    head->prev = l;
}

static inline void sv__list_del(sv_link *l)
{
    l->prev->next = l->next;
    l->next->prev = l->prev;
    l->prev = l->next = l;
}

#define SV__CONTAINER(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

typedef struct sv_server sv_server;
typedef struct sv_logpend sv_logpend;
typedef struct sv_log sv_log;

/* What the main thread keeps per worker besides the worker itself: the
 * lock that makes "send a wake-up" and "close the wake-up handle" exclusive,
 * so that the main thread never signals a loop that is being torn down. */
/* The accept failure a listener's thread last said (sv__say_accept_failure). */
typedef struct sv_accept_said {
    int err;     /* its errno, 0 for none yet */
    uint64_t ms; /* and uv_now() then */
} sv_accept_said;

typedef struct sv_wslot {
    pthread_mutex_t lock;
    int closed; /* the wake-up handle is closed (or closing) */
} sv_wslot;

typedef struct sv_worker {
    int id;
    const sv_config *cfg;
    sv_wslot *slot;       /* the main thread's, for wake-ups */
    atomic_int *finished; /* counted up when the loop has returned, */
    uv_async_t *done;     /* and then this main-loop handle is sent */
    uv_loop_t loop;
    uv_thread_t thread;

    /* Swaps and stops: the main thread stores into pending / stop and then
     * wakes the loop; the loop takes them in on_wake (worker.c). */
    uv_async_t wake;
    _Atomic(sv_snapshot *) pending;
    atomic_int stop;   /* 0 run, 1 drain gracefully, 2 close everything */
    sv_snapshot *snap; /* the snapshot new requests use; one reference */
    int draining;

    int nlisten;
    int lfd[SV_MAX_LISTEN];
    uv_poll_t lpoll[SV_MAX_LISTEN];
    int accepting;

    uv_timer_t sweep;        /* timeouts, log hand-off */
    uv_timer_t accept_pause; /* EMFILE back-off; one turn's wait at --max-conns */
    sv_accept_said said;     /* the accept failure last said */
    uint64_t settled_turn;   /* turn + 1 in which the wait at --max-conns ended */
    uv_check_t turn_check;   /* counts loop turns (per-turn write cap) */
    uv_idle_t ready_idle;    /* resumes connections deferred to the next turn */
    uint64_t turn;
    int handles_open; /* loop handles not yet closed on stop */

    sv_link conns; /* every connection of this loop, in accept order */
    sv_link ready; /* connections paused by the per-turn cap, nothing queued */
    unsigned nconns;
    unsigned nclosing; /* of them, closed, their handles not yet (the turn's end) */
    void *inbuf_free;  /* spare input buffers (singly linked through their first bytes) */
    unsigned ninbuf_free;

    sv_date date;       /* Date lines of the current second */
    uint64_t date_next; /* uv_now() at which the second changes */
    char logtime[32];   /* "[30/Nov/2026:14:55:01 +0000]" for the access log */
    size_t logtime_len;

    sv_counters *ctr; /* this worker's counters, only written here */
    sv_log *log;      /* NULL without --access-log */

    /* The batch: iovecs of the responses being gathered for one writev.
     * Everything a batch points to inside this struct (date, scratch) is
     * copied before a write is queued (conn_write.c: queue_rest). */
    unsigned niov;
    unsigned nscratch;
    size_t batch_bytes;
    size_t batch_copied; /* of the scratch: what queuing the batch would copy */
    int blank;           /* the input just processed ended in empty lines alone */
    uv_buf_t iov[SV_BATCH_IOV];
    sv_scratch scratch[SV_BATCH_SCRATCH];
    sv_plan plan;
    sv_request req;
    /* With an access log: the batch's responses, logged once it is written
     * (conn_log.c; SV_BATCH_LOG of them, allocated at the first). */
    struct sv_logpend *logb;
    unsigned nlog;
    char rbuf[SV_HEAD_BUF]; /* the loop's read buffer */
} sv_worker;

/* ---- Worker loops (worker.c) ---- */

/* Sets up w's loop, its handles and the polling of its listening sockets
 * (main thread, before w's thread starts). The caller has set id, cfg, ctr,
 * log, slot, finished, done and the listening sockets; snap is the first
 * snapshot, of which w takes a reference.
 * @return 0, or a libuv error with nothing of the loop left open. */
int sv__worker_init(sv_worker *w, sv_snapshot *snap);

/* The worker's thread: runs its loop until the stop has closed every
 * handle, then tells the main thread (finished, done). */
void sv__worker_main(void *arg);

/* Frees a worker whose thread has finished (or never started). A worker
 * that ran closed its listening sockets when it drained. */
void sv__worker_free(sv_worker *w, int started);

/* Closes a loop that never ran, or whose thread could not start: its
 * handles, then the loop (a worker's listening descriptors stay for
 * sv__worker_free). */
void sv__loop_discard(uv_loop_t *loop);

/* Updates the Date lines (and log time) when the second has changed. */
void sv__clock_update(sv_worker *w);
static inline void sv__clock(sv_worker *w)
{
    if (uv_now(&w->loop) >= w->date_next)
        sv__clock_update(w);
}

/* Called by conn.c when the last connection of a draining worker closed. */
void sv__worker_idle(sv_worker *w);

/* Before closing a socket that answered without reading the request (the
 * 503s over a connection limit): reads what has already arrived into buf
 * and drops it, without waiting. Closing with unread input sends RST, and
 * some stacks let a reset destroy the answer before it is read. */
void sv__drop_arrived(int fd, char *buf, size_t len);

/* What the kernel holds from the peer of t that the loop has not read,
 * without taking it: 1 bytes, 0 its FIN (the peer has closed), -1 nothing. */
int sv__peek_input(uv_tcp_t *t);

/* Accepts one connection from the non-blocking listening socket lfd
 * (non-blocking and close-on-exec itself), skipping those aborted before
 * their turn; its client's address in *peer unless peer is NULL (as
 * accept(2) tells it: getpeername(2) fails once the client has reset, and
 * the access log would lose the address of a request sent before the reset).
 * @return its descriptor; SV_ACCEPT_NONE when none waits; or
 * SV_ACCEPT_PAUSE, with errno, when accepting must pause: out of
 * descriptors or memory, or an error that would come back at once, which
 * leaves the waiting connections in the backlog instead of spinning. */
#define SV_ACCEPT_NONE  (-1)
#define SV_ACCEPT_PAUSE (-2)
int sv__accept_one(int lfd, struct sockaddr_storage *peer);

/* Says on standard error the accept failure e that paused accepting on
 * the listener of who and id ("worker " and 1, "admin" and -1 for none):
 * once, and again only for another error or a minute later (a limit
 * reached under load fails every accept for a while). now: the loop's
 * uv_now(). */
void sv__say_accept_failure(sv_accept_said *said, const char *who, int id, int e, uint64_t now);

/* Relaxed add on a counter only this thread writes (no locked instruction). */
static inline void sv__count(_Atomic uint64_t *c, uint64_t n)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n,
                          memory_order_relaxed);
}

#endif
