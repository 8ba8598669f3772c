/*
 * sweep.c - what a worker checks every sweep and at a stop: the timeouts of
 * its connections (send, idle, header, linger), and the graceful or forced
 * close of all of them. The request path itself is conn.c.
 */
#include "conn.h"
#include "say.h"
#include "tcpinfo.h"

#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

/* Response bytes the kernel still holds for c: written to the socket but not
 * yet acknowledged by the client (SIOCOUTQ; the FIN after a shutdown counts
 * one). The send buffer grows to net.ipv4.tcp_wmem's maximum (4 MiB by
 * default), so for a slow reader this is seconds or minutes of its reading
 * while servd's own write queue stands still or is empty. */
size_t sv__conn_kernel_unacked(sv_conn *c)
{
    uv_os_fd_t fd;
    int n = 0;
    if (uv_fileno((uv_handle_t *)&c->tcp, &fd) != 0 || ioctl(fd, SIOCOUTQ, &n) != 0 || n < 0)
        return 0;
    return (size_t)n;
}

/* How long a keep-alive connection may stay idle: --idle-timeout, and
 * during a graceful stop at most SV_STOP_IDLE_MS, or half of
 * --shutdown-timeout if that is shorter (idle ones are then all closed
 * before the stop's forced close). */
static uint64_t idle_limit(const sv_worker *w)
{
    uint64_t ms = w->cfg->idle_ms;
    if (!w->draining)
        return ms;
    if (ms > SV_STOP_IDLE_MS)
        ms = SV_STOP_IDLE_MS;
    return ms > w->cfg->shutdown_ms / 2 ? w->cfg->shutdown_ms / 2 : ms;
}

int sv__peek_input(uv_tcp_t *t)
{
    uv_os_fd_t fd;
    char b;
    if (uv_fileno((uv_handle_t *)t, &fd) != 0)
        return -1;
    ssize_t r = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return r > 0 ? 1 : r == 0 ? 0 : -1;
}

/* Whether c has sent nothing since its accept (t_head is set at accept and
 * cleared when a head is answered; the bytes of one arriving are held). */
static int silent_since_accept(const sv_conn *c)
{
    return c->t_head && c->produced == 0 && !c->inlen && !c->paused;
}

/* Whether a graceful stop closes c now: open, nothing queued, in the kernel
 * or on its way in, and idle for idle_limit - counted from its last
 * activity or, when a sweep saw its last response still in flight, from the
 * first sweep that saw it all acknowledged (t_taken): the client took the
 * last byte somewhere in between and sends its next request right after.
 * A connection that has sent nothing since its accept (a preconnect, a
 * pool's spare) is as idle as a keep-alive one: closing it loses no
 * request, where waiting held the stop until the header timeout. */
static int stop_closes(sv_worker *w, sv_conn *c, uint64_t now)
{
    if (c->state != SV_CS_OPEN || c->in_kernel || sv__conn_queued(c))
        return 0;
    uint64_t since = c->t_active > c->t_taken ? c->t_active : c->t_taken;
    if (now - since < idle_limit(w))
        return 0;
    return silent_since_accept(c) ? sv__peek_input(&c->tcp) <= 0 : !sv__conn_request_coming(c);
}

/* The timeouts, checked every sweep. A connection with response bytes in
 * flight - in its write queue or in the kernel's send queue - is judged by
 * the send timeout alone: it is closed when the client acknowledged none of
 * them for --send-timeout (bytes added to the flight are not progress: a
 * client that pipelines requests but never reads would otherwise be kept
 * until its responses filled the kernel's buffer and the per-turn cap
 * paused it). The acknowledged count is what servd produced minus what is
 * in flight. Only when
 * the client has taken everything do the idle, header and linger timers
 * apply, counting from the last sweep that saw bytes in flight (during a
 * stop, from the first that saw none: stop_closes). The kernel
 * is asked only about connections that wrote since it was last seen empty
 * (in_kernel), so idle connections cost no system call. */
void sv__conn_sweep(sv_worker *w)
{
    uint64_t now = uv_now(&w->loop);
    const sv_config *cfg = w->cfg;
    for (sv_link *l = w->conns.next; l != &w->conns; l = l->next) {
        sv_conn *c = SV__CONTAINER(l, sv_conn, link);
        if (c->state == SV_CS_CLOSED)
            continue;
        size_t flight = sv__conn_queued(c);
        if (flight || c->in_kernel) {
            size_t k = sv__conn_kernel_unacked(c);
            uv_os_fd_t fd;
            /* A client that closed, then reset at the data still coming
             * (it read none of it): nothing is in flight any more, though
             * SIOCOUTQ still counts it. Looked at only for those, which
             * linger unread (on_shutdown) and would wait for the send
             * timeout. */
            if (k && c->eof && uv_fileno((uv_handle_t *)&c->tcp, &fd) == 0 && sv_tcp_reset(fd))
                k = 0;
            /* The client took the last bytes since the last sweep; a stop
             * counts its idle time from now (stop_closes), not from servd's
             * last write (a large response to a slow reader drains long
             * after it), so the request it sends next is answered. */
            if (!flight && !k)
                c->t_taken = now;
            c->in_kernel = k > 0;
            flight += k;
        }
        if (flight) {
            c->t_active = now; /* a response is on its way: not idle */
            uint64_t acked = c->produced > flight ? c->produced - flight : 0; /* a FIN counts 1 */
            if (!c->flight_seen || acked > c->acked_seen) {
                c->flight_seen = 1;
                c->acked_seen = acked;
                c->t_progress = now;
            } else if (now - c->t_progress >= cfg->send_ms) {
                sv__count(&w->ctr->timeouts[SV_TO_SEND], 1);
                sv__conn_abort(c);
            }
            continue;
        }
        c->flight_seen = 0;
        if (c->state == SV_CS_LINGER) {
            /* During a stop, a client that has acknowledged everything,
             * the FIN too, is not waited for SV_LINGER_MS: it has the
             * whole response. It is given idle_limit, as an idle
             * connection is, for the rest of a request body on its way,
             * and is not closed with input unread: that close is a RST,
             * on which some stacks (Windows) drop what the client has not
             * read yet (RFC 9112 section 9.6); the next read discards the
             * input, a later sweep closes. */
            if (c->eof || /* closed by the client, which now has it all */
                (w->draining && now - c->t_active >= idle_limit(w) &&
                 sv__peek_input(&c->tcp) <= 0) ||
                now - c->t_active >= SV_LINGER_MS)
                sv__conn_close(c);
        } else if (c->state == SV_CS_OPEN && !c->paused) {
            if (w->draining && stop_closes(w, c, now)) {
                sv__conn_close(c); /* not counted as a timeout */
            } else if (c->t_head) {
                if (now - c->t_head >= cfg->header_ms) {
                    sv__count(&w->ctr->timeouts[SV_TO_HEADER], 1);
                    sv__conn_log_header_timeout(c);
                    sv__conn_close(c);
                }
            } else if (!w->draining && now - c->t_active >= idle_limit(w) &&
                       !sv__conn_request_coming(c)) {
                /* A request that came since the loop last read (timers
                 * run before the poll) is served, not met with a RST. */
                sv__count(&w->ctr->timeouts[SV_TO_IDLE], 1);
                sv__conn_close(c);
            }
        }
    }
}

/* Whether c holds nothing servd would lose by closing it: no request on
 * its way that servd has seen, nothing queued. */
static int quiet(sv_conn *c)
{
    return c->state == SV_CS_OPEN && !c->paused && !c->inlen && !sv__conn_queued(c);
}

/* Whether c may be closed to make room for a newcomer: idle for
 * SV_RECLAIM_IDLE_MS or longer with nothing queued, in the kernel or on its
 * way: a keep-alive one, or one that has sent nothing since its accept
 * (t_head is set at accept), as idle as a keep-alive one: closing it loses
 * no request. Without the latter, a few silent sockets (preconnects, or a
 * client holding slots) kept new clients at 503 until the header timeout.
 * @return 0 no, 1 idle, 2 its client has gone (its FIN unread). */
static int reclaimable_idle(sv_conn *c, uint64_t now)
{
    if (!quiet(c) || now - c->t_active < SV_RECLAIM_IDLE_MS || (c->t_head && c->produced) ||
        sv__conn_kernel_unacked(c))
        return 0;
    int in = sv__peek_input(&c->tcp);
    return in < 0 ? 1 : in == 0 ? 2 : 0;
}

unsigned sv__conn_make_room(sv_worker *w, unsigned max)
{
    uint64_t now = uv_now(&w->loop);
    /* Closed earlier in this turn (its client's FIN read in the same poll
     * batch as the newcomer): its slot frees at the end of the turn, as
     * one closed here would. */
    unsigned found = w->nclosing < max ? w->nclosing : max;
    /* A client that has gone (its FIN, with nothing before it, not yet
     * read: a probe that connects and leaves, in the same poll batch as
     * the newcomer): closing it costs nobody anything. Only a connection
     * that has been sent nothing is asked, and SV_RECLAIM_PEEKS of them at
     * most, newest first (w->conns is in accept order). */
    unsigned peeks = 0;
    for (sv_link *l = w->conns.prev; l != &w->conns && found < max && peeks < SV_RECLAIM_PEEKS;
         l = l->prev) {
        sv_conn *c = SV__CONTAINER(l, sv_conn, link);
        if (!quiet(c) || c->produced)
            continue;
        peeks++;
        if (sv__peek_input(&c->tcp) == 0) {
            sv__conn_close(c);
            found++;
        }
    }
    /* Then the idle, oldest first. */
    for (sv_link *l = w->conns.next; l != &w->conns && found < max; l = l->next) {
        sv_conn *c = SV__CONTAINER(l, sv_conn, link);
        int why = reclaimable_idle(c, now);
        if (!why)
            continue;
        if (why == 1) /* idle: a timeout; a client that has gone is none */
            sv__count(&w->ctr->timeouts[SV_TO_IDLE], 1);
        sv__conn_close(c);
        found++;
    }
    return found;
}

/* During a graceful stop: is a request on its way on this connection,
 * although nothing is queued? A fresh connection whose first head has not
 * come yet (t_head is set at accept), a head arriving, held input, or bytes
 * the kernel holds that the loop has not read. Closing such a connection
 * would throw away a request the client has already sent - during a restart
 * (socket activation hands the queue to the next servd), a failed request.
 * These are answered with Connection: close instead (answer() sees
 * draining); the header timeout and --shutdown-timeout still bound them. */
int sv__conn_request_coming(sv_conn *c)
{
    return c->t_head || c->inlen || c->paused || sv__peek_input(&c->tcp) > 0;
}

void sv__conn_stop_all(sv_worker *w, int force)
{
    uint64_t now = uv_now(&w->loop);
    if (force && w->nconns) {
        /* Say what the graceful stop was still waiting for: the forced
         * close is the exception, and the reason is gone once it is done. */
        unsigned queued_n = 0, unacked = 0, head = 0, held = 0, paused = 0, open = 0, linger = 0,
                 idle = 0;
        for (sv_link *l = w->conns.next; l != &w->conns; l = l->next) {
            sv_conn *c = SV__CONTAINER(l, sv_conn, link);
            if (c->state == SV_CS_CLOSED)
                continue;
            open++;
            size_t q = sv__conn_queued(c), k = sv__conn_kernel_unacked(c);
            queued_n += q != 0;
            /* all handed to the kernel, not all acknowledged (a slow reader) */
            unacked += q == 0 && k > 0;
            head += c->t_head != 0 && !silent_since_accept(c);
            held += c->inlen != 0;
            paused += c->paused != 0;
            linger += c->state == SV_CS_LINGER && k == 0;
            /* kept for a request after its last response or since the
             * accept (stop_closes) */
            idle += c->state == SV_CS_OPEN && !q && !k &&
                    (silent_since_accept(c) || (!c->t_head && !c->inlen && !c->paused));
        }
        if (open) /* those closed in this turn are not counted */
            sv_say(SV_WARNING,
                   "worker %d: closing %u connection%s (%u with responses queued, %u with "
                   "responses sent but not yet acknowledged, %u with a head pending, %u with "
                   "input held, %u paused, %u with all sent, waiting "
                   "for the client to close, %u idle after a response or since their accept)",
                   w->id, open, open == 1 ? "" : "s", queued_n, unacked, head, held, paused, linger,
                   idle);
    }
    for (sv_link *l = w->conns.next; l != &w->conns; l = l->next) {
        sv_conn *c = SV__CONTAINER(l, sv_conn, link);
        if (c->state == SV_CS_CLOSED)
            continue;
        if (force) {
            sv__conn_close(c);
        } else if (stop_closes(w, c, now)) {
            /* Idle for long already: closed now. A request on its way is
             * answered, even behind queued responses: the first one read,
             * with Connection: close, which tells a pipelining client that
             * those after it were not processed (it sends them again, RFC
             * 9112 section 9.3.2). A connection with responses in flight,
             * or idle only since a moment ago, is closed by the sweep once
             * idle SV_STOP_IDLE_MS (idle_limit), so that the request its
             * client sends after reading them is answered. */
            sv__conn_close(c);
        }
    }
}
