/*
 * worker.c - a worker's loop: accepting on its listening sockets (with the
 * 503 over --max-conns and the back-off when descriptors run out), the
 * sweep timer, the Date clock, taking swaps and stops from the main thread,
 * and draining. The connections themselves are conn.c's.
 *
 * The listening socket is watched with a uv_poll_t and accepted with
 * accept4() here rather than with uv_listen(): libuv answers EMFILE by
 * accepting and dropping the waiting connections, while servd wants to
 * leave them in the backlog and retry SV_ACCEPT_PAUSE_MS later, when
 * descriptors may be free again.
 *
 * Everything here runs on the worker's own thread, except sv__worker_init
 * and sv__worker_free (main thread, before the thread starts and after it
 * is joined).
 */
#include "server.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "conn.h"
#include "log.h"
#include "say.h"

void sv__clock_update(sv_worker *w)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    sv_date_update(&w->date, (int64_t)ts.tv_sec);
    if (w->log)
        w->logtime_len = sv_log_time((int64_t)ts.tv_sec, w->logtime, sizeof w->logtime);
    w->date_next = uv_now(&w->loop) + (uint64_t)(1000 - ts.tv_nsec / 1000000);
}

static void on_listen(uv_poll_t *p, int status, int events);

static void set_accepting(sv_worker *w, int on)
{
    if (w->accepting == on || w->draining)
        return;
    for (int i = 0; i < w->nlisten; i++) {
        if (on)
            uv_poll_start(&w->lpoll[i], UV_READABLE, on_listen);
        else
            uv_poll_stop(&w->lpoll[i]);
    }
    w->accepting = on;
}

static void on_accept_pause_end(uv_timer_t *t)
{
    sv_worker *w = t->data;
    w->settled_turn = w->turn + 1;
    set_accepting(w, 1);
}

/* Answers a connection over --max-conns with 503 and closes it. It is a
 * response like any other in the metrics and the access log (no request
 * is parsed: the request field is "-"). What arrived with the connection is
 * read first, without waiting: a HEAD gets its 503 without the body (RFC
 * 9110 §9.3.2); a request yet to come is answered as a GET would be. */
static void reject(sv_worker *w, int fd, const struct sockaddr_storage *peer)
{
    sv__clock(w);
    ssize_t got = recv(fd, w->rbuf, sizeof w->rbuf, MSG_DONTWAIT);
    int head = got >= 5 && memcmp(w->rbuf, "HEAD ", 5) == 0;
    sv_respond_error_method(503, 1, head ? SV_M_HEAD : 0, &w->date, &w->plan);
    /* counted before it is sent, as every response is (add_plan): a client
     * that reads the 503 and then asks /metrics must find it there */
    sv__count(&w->ctr->conns_rejected, 1);
    sv__count(&w->ctr->status[5], 1);
    ssize_t r = writev(fd, w->plan.iov, w->plan.iovcnt); /* the socket is new: it takes it */
    if (r > 0)
        sv__count(&w->ctr->bytes_sent, (uint64_t)r);
    if (w->log) {
        sv_log_entry e = {0};
        e.peer = (const struct sockaddr *)peer;
        e.time = w->logtime;
        e.time_len = w->logtime_len;
        e.status = 503;
        e.body_bytes = w->plan.body_bytes;
        e.encoding = -1;
        sv_log_write(w->log, w->id, &e);
    }
    shutdown(fd, SHUT_WR);
    sv__drop_arrived(fd, w->rbuf, sizeof w->rbuf); /* free between reads */
    close(fd);
}

void sv__drop_arrived(int fd, char *buf, size_t len)
{
    /* a few reads: a client still sending is not waited for */
    for (int i = 0; i < 4 && recv(fd, buf, len, MSG_DONTWAIT) > 0; i++)
        ;
}

int sv__accept_one(int lfd, struct sockaddr_storage *peer)
{
    for (;;) {
        socklen_t len = sizeof *peer;
        int fd =
            accept4(lfd, (struct sockaddr *)peer, peer ? &len : NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0)
            return fd;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return SV_ACCEPT_NONE;
        if (errno != EINTR && errno != ECONNABORTED && errno != EPROTO)
            return SV_ACCEPT_PAUSE;
    }
}

/* Counted in the metrics alone, a servd that no accept succeeded on (a
 * security module's EPERM, descriptors gone for good) said nothing of it
 * while its clients waited in the backlog. */
#define SV_ACCEPT_SAY_MS 60000

void sv__say_accept_failure(sv_accept_said *said, const char *who, int id, int e, uint64_t now)
{
    if (e == said->err && now - said->ms < SV_ACCEPT_SAY_MS)
        return;
    said->err = e;
    said->ms = now;
    sv_say(SV_WARNING,
           "%s%.*d: cannot accept a connection: %s%s; trying again within %d ms, "
           "connections wait in the backlog (said again in a minute if it lasts)",
           who, id < 0 ? 0 : 1, id < 0 ? 0 : id, strerror(e),
           e == EMFILE || e == ENFILE ? " (out of descriptors: raise ulimit -n, LimitNOFILE=)" : "",
           SV_ACCEPT_PAUSE_MS);
}

static void on_listen(uv_poll_t *p, int status, int events)
{
    sv_worker *w = p->data;
    int lfd = w->lfd[p - w->lpoll];
    if (status < 0)
        return;
    int settled = w->settled_turn == w->turn + 1, may_reclaim = 1;
    for (int i = 0; i < SV_ACCEPT_BATCH; i++) {
        /* At the limit, wait one loop turn before refusing: a client that
         * closes a connection and opens another at once puts both in the
         * same epoll batch, and the closed one leaves nconns only when its
         * handle closes, at the end of this turn. The new connection waits
         * in the backlog meanwhile. Still at the limit after that turn, a
         * slot that frees by the end of the next is looked for (a
         * connection closed in this turn, a client that has gone, one idle
         * for SV_RECLAIM_IDLE_MS: sv__conn_make_room), with another
         * turn's wait; only without one is the new connection refused, and
         * the rest of this batch with it, without another scan. */
        if (w->nconns >= w->cfg->max_conns && may_reclaim) {
            if (!settled || sv__conn_make_room(w, 1)) {
                set_accepting(w, 0);
                uv_timer_start(&w->accept_pause, on_accept_pause_end, 0, 0);
                return;
            }
            may_reclaim = 0;
        }
        struct sockaddr_storage peer;
        int fd = sv__accept_one(lfd, &peer);
        if (fd == SV_ACCEPT_NONE)
            return;
        if (fd == SV_ACCEPT_PAUSE) {
            int e = errno;
            int fds = e == EMFILE || e == ENFILE;
            int emfile = fds || e == ENOBUFS || e == ENOMEM;
            sv__count(&w->ctr->errors[emfile ? SV_ERR_EMFILE : SV_ERR_ACCEPT], 1);
            sv__say_accept_failure(&w->said, "worker ", w->id, e, uv_now(&w->loop));
            set_accepting(w, 0);
            /* Out of descriptors, a connection that frees one by the end
             * of this turn is looked for as at --max-conns (an idle one, a
             * silent one, one whose client has gone), and the accept is
             * tried again after the turn: without it, silent sockets held
             * every descriptor until the header timeout. */
            int room = fds && may_reclaim && sv__conn_make_room(w, 1);
            uv_timer_start(&w->accept_pause, on_accept_pause_end, room ? 0 : SV_ACCEPT_PAUSE_MS, 0);
            return;
        }
        if (w->nconns >= w->cfg->max_conns) {
            reject(w, fd, &peer);
        } else {
            sv__conn_accept(w, fd, &peer);
            /* If that took the last slot, room for a next client is made
             * only once one waits after a turn: looked for now, it cost a
             * connection for a client that may not exist. */
            settled = 0;
        }
    }
}

/* The sweep period for a timeout of timeout_ms: a quarter of it, but not
 * under SV_SWEEP_MIN_MS, and never longer than period, the one so far. */
static uint64_t sweep_period(uint64_t timeout_ms, uint64_t period)
{
    uint64_t quarter = timeout_ms / 4 < SV_SWEEP_MIN_MS ? SV_SWEEP_MIN_MS : timeout_ms / 4;
    return quarter < period ? quarter : period;
}

static void on_sweep(uv_timer_t *t)
{
    sv_worker *w = t->data;
    sv__conn_sweep(w);
    if (w->log) {
        sv__clock(w);
        sv_log_flush(w->log, w->id);
    }
}

static void on_turn(uv_check_t *h)
{
    ((sv_worker *)h->data)->turn++;
}

static void on_listen_closed(uv_handle_t *h)
{
    sv_worker *w = h->data;
    close(w->lfd[(uv_poll_t *)h - w->lpoll]);
}

/* Closes every loop handle: uv_run returns once they are closed. */
void sv__worker_idle(sv_worker *w)
{
    sv_wslot *slot = w->slot;
    if (w->handles_open == 0)
        return;
    w->handles_open = 0;
    pthread_mutex_lock(&slot->lock);
    slot->closed = 1;
    pthread_mutex_unlock(&slot->lock);
    uv_close((uv_handle_t *)&w->wake, NULL);
    uv_close((uv_handle_t *)&w->sweep, NULL);
    uv_close((uv_handle_t *)&w->accept_pause, NULL);
    uv_close((uv_handle_t *)&w->turn_check, NULL);
    uv_close((uv_handle_t *)&w->ready_idle, NULL);
}

static void begin_drain(sv_worker *w)
{
    set_accepting(w, 0);
    w->draining = 1;
    uv_timer_stop(&w->accept_pause);
    /* Sweep often enough that the connections kept for a request after
     * their last response are closed soon after SV_STOP_IDLE_MS (a sweep
     * a second would hold the stop by up to another second), and, for a
     * short --shutdown-timeout, before the forced close (at half of it,
     * sweep.c's idle_limit). */
    uint64_t every = sweep_period(SV_STOP_IDLE_MS, uv_timer_get_repeat(&w->sweep));
    every = sweep_period(w->cfg->shutdown_ms, every);
    if (every < uv_timer_get_repeat(&w->sweep))
        uv_timer_start(&w->sweep, on_sweep, every, every);
    for (int i = 0; i < w->nlisten; i++)
        uv_close((uv_handle_t *)&w->lpoll[i], on_listen_closed);
    sv__conn_stop_all(w, 0);
}

/* The main thread has something for this loop: a new snapshot or a stop. */
static void on_wake(uv_async_t *a)
{
    sv_worker *w = a->data;
    sv_snapshot *s = atomic_exchange(&w->pending, NULL);
    if (s) {
        sv_snapshot *old = w->snap;
        w->snap = s;
        sv_snapshot_unref(old); /* queued writes may still hold it */
    }
    int stop = atomic_load(&w->stop);
    if (!stop)
        return;
    if (!w->draining)
        begin_drain(w);
    if (stop == 2)
        sv__conn_stop_all(w, 1);
    if (w->nconns == 0)
        sv__worker_idle(w);
}

void sv__worker_main(void *arg)
{
    sv_worker *w = arg;
    char name[16]; /* the kernel keeps 15 bytes: top -H and ps -L show it */
    snprintf(name, sizeof name, "servd-w%d", w->id);
    pthread_setname_np(pthread_self(), name);
    uv_run(&w->loop, UV_RUN_DEFAULT);
    atomic_fetch_add(w->finished, 1);
    uv_async_send(w->done);
}

static void close_handle(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

void sv__loop_discard(uv_loop_t *loop)
{
    uv_walk(loop, close_handle, NULL);
    uv_run(loop, UV_RUN_DEFAULT);
    uv_loop_close(loop);
}

int sv__worker_init(sv_worker *w, sv_snapshot *snap)
{
    const sv_config *cfg = w->cfg;
    sv__list_init(&w->conns);
    sv__list_init(&w->ready);
    int rc = uv_loop_init(&w->loop);
    if (rc != 0)
        return rc;
    /* out of descriptors (an eventfd) or memory: no worker */
    if ((rc = uv_async_init(&w->loop, &w->wake, on_wake)) != 0) {
        uv_loop_close(&w->loop);
        return rc;
    }
    uv_timer_init(&w->loop, &w->sweep);
    uv_timer_init(&w->loop, &w->accept_pause);
    uv_check_init(&w->loop, &w->turn_check);
    uv_idle_init(&w->loop, &w->ready_idle);
    w->wake.data = w->sweep.data = w->accept_pause.data = w->turn_check.data = w->ready_idle.data =
        w;
    w->handles_open = 1;
    uv_check_start(&w->turn_check, on_turn);
    uv_unref((uv_handle_t *)&w->turn_check);

    uint64_t sweep = sweep_period(cfg->idle_ms, SV_SWEEP_MS);
    sweep = sweep_period(cfg->header_ms, sweep);
    sweep = sweep_period(cfg->send_ms, sweep);
    uv_timer_start(&w->sweep, on_sweep, sweep, sweep);

    for (int i = 0; i < w->nlisten; i++) {
        if ((rc = uv_poll_init_socket(&w->loop, &w->lpoll[i], w->lfd[i])) != 0) {
            sv__loop_discard(&w->loop);
            return rc;
        }
        w->lpoll[i].data = w;
    }
    set_accepting(w, 1);
    w->snap = snap;
    sv_snapshot_ref(snap);
    sv__clock_update(w);
    return 0;
}

void sv__worker_free(sv_worker *w, int started)
{
    if (started) {
        uv_loop_close(&w->loop);
    } else {
        for (int i = 0; i < w->nlisten; i++)
            close(w->lfd[i]);
    }
    sv_snapshot *s = atomic_exchange(&w->pending, NULL);
    if (s)
        sv_snapshot_unref(s);
    if (w->snap)
        sv_snapshot_unref(w->snap);
    while (w->inbuf_free) {
        char *b = w->inbuf_free;
        memcpy(&w->inbuf_free, b, sizeof(void *));
        free(b);
    }
    free(w->logb);
    free(w);
}
