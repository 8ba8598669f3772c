/*
 * server.c - servd's threads and their life cycle, on the main thread:
 * listening sockets (their addresses in addr.c), starting the workers
 * (their loops in worker.c), snapshot swaps on SIGHUP, log reopening on
 * SIGUSR1 and the graceful stop on SIGTERM/SIGINT/SIGQUIT.
 *
 * Each worker has its own listening socket per --listen address (all bound
 * with SO_REUSEPORT, so the kernel spreads new connections over the workers
 * without a shared accept lock) and its own libuv loop (worker.c).
 *
 * The main thread only handles signals: the workers take no lock per
 * request (the access log's hand-over is the one they share, see log.c). A
 * reload's read of the whole pack runs on libuv's thread pool (struct
 * sv_load), so a stop signal is never held behind it. A swap is one atomic
 * pointer exchange per worker plus a uv_async_send; see
 * docs/architecture.md for the lifetimes.
 */
#include "server.h"
#include "say.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "activation.h"
#include "admin.h"
#include "conn.h"
#include "log.h"
#include "mapguard.h"
#include "privdrop.h"
#include "sf/cpus.h"
#include "watch.h"

/* The signals the main loop handles: SIGHUP, SIGUSR1, SIGTERM, SIGINT,
 * SIGQUIT, SIGUSR2. */
#define SV_NSIGNALS 6

/* A reload in progress: the pack's read (sv_snapshot_load: the check in a
 * child, then servd's own walk) runs on libuv's thread pool, so that the
 * main thread goes on handling signals; a stop abandons it. At most one at
 * a time. */
struct sv_load {
    uv_work_t work;
    const char *why;     /* what asked for it, for the log ("SIGHUP") */
    int fd;              /* the pack opened by sv_snapshot_open_file */
    sv_file_seen seen;   /* that file, as the watch noted it */
    sv_file_seen served; /* the file served when it began */
    sv_snapshot *s;      /* the result, when rc is 0 */
    int rc;
    char err[1024];
    int told; /* the main thread's: which TOLD_ lines a reload during it logged */
};

/* The lines a reload asked for during a load logs, once a load each. */
enum { TOLD_SAME = 1, TOLD_AGAIN = 2 };

struct sv_server {
    const sv_config *cfg;
    sv_metrics metrics;
    sv_log *log;
    sv_admin *admin;
    int admin_fd;
    sv_snapshot *current; /* main thread only; one reference */
    int nworkers;
    sv_worker **workers;
    sv_wslot *slots;
    int nstarted;

    uv_loop_t loop; /* the main thread's: signals and the stop timer */
    uv_signal_t sig[SV_NSIGNALS];
    uv_timer_t stop_timer;
    uv_timer_t retry_timer; /* a reload again after a refusal that was no verdict */
    uint64_t retry_ms;      /* its last wait: 0, or doubling up to SV_RETRY_MAX_MS */
    uv_async_t done;
    struct sv_load load;
    int loading;       /* load is in progress */
    const char *again; /* a reload asked for during it, for another file: its why */
    int stop_fd;       /* eventfd, readable once a stop began: abandons a load */
    atomic_int nfinished;
    atomic_int stopping;        /* read by the admin thread (/healthz) */
    unsigned long guard_faults; /* sv_mapguard_faults() at the last reload */
    int forced;
    sv_watch *watch; /* the --pack watch (watch.c), or NULL */
    int loop_open;   /* the main loop is set up and not closed */
};

/* Sets up worker i's loop (worker.c) with what it shares with the main
 * thread; its listening sockets are already in place. */
static int worker_init(sv_server *srv, int i)
{
    sv_worker *w = srv->workers[i];
    w->id = i;
    w->cfg = srv->cfg;
    w->ctr = &srv->metrics.ctr[i];
    w->log = srv->log;
    w->slot = &srv->slots[i];
    w->finished = &srv->nfinished;
    w->done = &srv->done;
    return sv__worker_init(w, srv->current);
}

/* ---- Swaps and stops ---- */

static void wake_worker(sv_server *srv, int i)
{
    pthread_mutex_lock(&srv->slots[i].lock);
    if (!srv->slots[i].closed)
        uv_async_send(&srv->workers[i]->wake);
    pthread_mutex_unlock(&srv->slots[i].lock);
}

/* Makes s the current snapshot: each worker gets its own reference through
 * its pending slot and takes it on its next wake-up; the server's reference
 * on the old snapshot is dropped (workers and queued writes may still hold
 * theirs: the old pack is closed when the last one goes). */
static void publish(sv_server *srv, sv_snapshot *s)
{
    sv_snapshot *old = srv->current;
    srv->current = s;
    sv_metrics_set_pack(&srv->metrics, s->id_hex, srv->cfg->pack_path, s->loaded_at, s->n_paths,
                        s->cut);
    for (int i = 0; i < srv->nworkers; i++) {
        sv_snapshot_ref(s);
        sv_snapshot *prev = atomic_exchange(&srv->workers[i]->pending, s);
        if (prev)
            sv_snapshot_unref(prev); /* a swap the worker never took */
        wake_worker(srv, i);
    }
    sv_snapshot_unref(old);
    atomic_fetch_add(&srv->metrics.swaps, 1);
}

/* After a refusal that says nothing about the file (sv_file_seen.retry: no
 * descriptor or memory, a check that could not run or was stopped), the
 * file is loaded again after this wait, doubled at each such refusal up to
 * the most: the watch has noted the file and would not look at it again,
 * and a condition that lasts (a memory limit) must not cost a check of the
 * whole pack every poll. */
#define SV_RETRY_FIRST_MS 2000
#define SV_RETRY_MAX_MS   300000

/* No more answers from the pack served: its file was written in place
 * (mapguard.h). Said once. */
static void mark_written_in_place(sv_server *srv, const char *why)
{
    if (!atomic_load(srv->current->cut))
        sv_say(SV_ERR,
               "%s: %s, the file of pack %s, was written in place; answering 503 until "
               "a whole pack is loaded",
               why, srv->cfg->pack_path, srv->current->id_hex);
    sv_mapguard_mark(srv->current->guard);
}

/* Whether the pack path still names the file served, and whether that
 * file changed since it was mapped. Changed and shorter than its map, or
 * with other first bytes (LMDB's meta pages), it was written in place:
 * marked (no more answers from it). A touch changes the stamp alone,
 * which must not cost a 503; two packs can share their first bytes, and
 * then the load that follows swaps.
 * @return 1 the file served, changed; 0 the file served, unchanged; -1
 * another file, or none. */
static int served_file_changed(sv_server *srv, const char *why)
{
    sv_file_seen now, served = {srv->current->file, srv->current->stamp, 0};
    /* Identity, stamp and first bytes from one open file: a rename between
     * a stat and an open by name would compare another pack's bytes. */
    int fd = open(srv->cfg->pack_path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    int rc = fd >= 0 ? sv_file_state_of(fd, &now.id, &now.stamp)
                     : sv_file_state_get(srv->cfg->pack_path, &now.id, &now.stamp);
    int changed = -1;
    if (rc == 0 && sv_file_id_eq(&now.id, &served.id)) {
        changed = !sv_file_seen_same(&now, &served);
        /* Shorter than when it was mapped, pages of the map are gone: what
         * the kernel sends from them (a cached path's body) is cut, and no
         * fault in servd's own reads may ever tell. Without a descriptor,
         * the first bytes cannot be compared, nor when their read fails
         * (a touch and a failing disk are no write in place): the load
         * that follows decides. */
        if (changed && (now.stamp.size < served.stamp.size ||
                        (fd >= 0 && sv_snapshot_head_same(srv->current, fd) == 0)))
            mark_written_in_place(srv, why);
    }
    if (fd >= 0)
        close(fd);
    return changed;
}

/* The watch saw a write into the file the pack path names: when it is the
 * file served, a cp over it shows its new bytes through the map from the
 * first write, so it is no longer answered from at once, not when the
 * reload after the writes finds it changed. */
static void on_pack_written(void *arg)
{
    sv_server *srv = arg;
    if (!srv->cfg->builtin && !atomic_load(srv->current->cut))
        served_file_changed(srv, "pack written");
}

/* The signals the main loop takes (main_loop_init). */
static const int loop_signums[SV_NSIGNALS] = {SIGHUP, SIGUSR1, SIGTERM, SIGINT, SIGQUIT, SIGUSR2};

/* Blocks the main loop's signals in the calling thread, the main thread,
 * and keeps the mask it had in *old. Every thread servd starts (the
 * workers, the admin and log threads, libuv's pool) is started inside
 * such a block and keeps them blocked, so that only the main thread ever
 * takes them: at the end of a stop it hands them from libuv to SIG_IGN
 * with no instant at their default action (on_worker_done). */
static void block_signals(sigset_t *old)
{
    sigset_t set;
    sigemptyset(&set);
    for (int i = 0; i < SV_NSIGNALS; i++)
        sigaddset(&set, loop_signums[i]);
    pthread_sigmask(SIG_BLOCK, &set, old);
}

static void reload(sv_server *srv, const char *why);
static void on_retry(uv_timer_t *t)
{
    reload(t->data, "retry");
}

/* " (-> FILE)" when the pack path led to s's file through a symlink, else
 * "": which release a swap serves. */
static const char *leads_to(const sv_snapshot *s, char *buf, size_t cap)
{
    if (!s->target[0])
        return "";
    snprintf(buf, cap, " (-> %s)", s->target);
    return buf;
}

/* What a load found (srv->load), on the main thread: the new pack served,
 * or the refusal said (and retried, when it was no verdict on the file). */
static void load_result(sv_server *srv)
{
    struct sv_load *ld = &srv->load; /* its file noted with the watch when opened */
    if (ld->rc != 0 && ld->seen.retry) {
        atomic_fetch_add(&srv->metrics.swap_failures, 1);
        srv->retry_ms = !srv->retry_ms                         ? SV_RETRY_FIRST_MS
                        : srv->retry_ms >= SV_RETRY_MAX_MS / 2 ? SV_RETRY_MAX_MS
                                                               : 2 * srv->retry_ms;
        uv_timer_start(&srv->retry_timer, on_retry, srv->retry_ms, 0);
        sv_say(SV_ERR, "%s: refused %s; still serving pack %s; trying again in %llu s", ld->why,
               ld->err, srv->current->id_hex, (unsigned long long)(srv->retry_ms / 1000));
        return;
    }
    srv->retry_ms = 0; /* a verdict: the file was judged */
    uv_timer_stop(&srv->retry_timer);
    if (ld->rc != 0) {
        atomic_fetch_add(&srv->metrics.swap_failures, 1);
        sv_say(SV_ERR, "%s: refused %s; still serving pack %s", ld->why, ld->err,
               srv->current->id_hex);
        /* The file refused is the one served, changed since: its map shows
         * the same damage (a cut with the first pages kept, a body written
         * over), which paths served from the path cache would never read
         * through servd's own code. Not a check that only ran out of time
         * (a touched pack on a machine too busy): that says nothing of
         * the bytes served, nor does a file servd could not open (made
         * unreadable to --user: SF_EIO), which would have answered 503 to
         * every request until a swap. */
        if (ld->rc != SF_ETIMEDOUT && ld->rc != SF_EIO &&
            sv_file_id_eq(&ld->seen.id, &ld->served.id) &&
            !sv_file_stamp_eq(&ld->seen.stamp, &ld->served.stamp))
            mark_written_in_place(srv, ld->why);
        return;
    }
    publish(srv, ld->s);
    char via[PATH_MAX + 8];
    sv_say(SV_NOTICE, "%s: now serving pack %s (%llu paths) from %s%s", ld->why, ld->s->id_hex,
           (unsigned long long)ld->s->n_paths, srv->cfg->pack_path,
           leads_to(ld->s, via, sizeof via));
}

/* On a thread of libuv's pool: the whole read of the pack. */
static void load_work(uv_work_t *req)
{
    sv_server *srv = req->data;
    struct sv_load *ld = &srv->load;
    /* libuv's pool thread, which runs nothing else: named as servd's own */
    pthread_setname_np(pthread_self(), "servd-load");
    ld->rc = sv_snapshot_load(ld->fd, srv->cfg->pack_path, srv->nworkers, srv->stop_fd, &ld->s,
                              &ld->seen, ld->err, sizeof ld->err);
}

/* Back on the main thread once the load ended. */
static void load_done(uv_work_t *req, int status)
{
    sv_server *srv = req->data;
    struct sv_load *ld = &srv->load;
    (void)status; /* never cancelled (uv_cancel): the stop ends it through stop_fd */
    srv->loading = 0;
    if (atomic_load(&srv->stopping)) { /* whatever the load found, nothing is swapped */
        if (ld->rc == 0)
            sv_snapshot_unref(ld->s);
        sv_say(SV_INFO, "%s: stopping: the load of %s is dropped%s", ld->why, srv->cfg->pack_path,
               ld->rc == SF_ECANCELED ? " (abandoned)" : "");
        return;
    }
    load_result(srv);
    const char *again = srv->again;
    srv->again = NULL;
    if (again)
        reload(srv, again);
}

/* Loads the pack path again; why ("SIGHUP", "pack changed") starts the log
 * line. Whatever file was opened or refused is noted by the watch, so a
 * SIGHUP and the watch never load the same file twice. The read of the
 * pack runs off the main thread (load_work); a reload asked for meanwhile
 * follows it, unless the path still names the file being loaded. */
static void reload(sv_server *srv, const char *why)
{
    if (atomic_load(&srv->stopping))
        return;
    unsigned long faults = sv_mapguard_faults();
    if (faults != srv->guard_faults) {
        sv_say(SV_ERR,
               "%lu page(s) of a pack in use were cut from its file (written in place?) "
               "and read as zeros; requests for them failed",
               faults - srv->guard_faults);
        srv->guard_faults = faults;
    }
    if (srv->cfg->builtin) {
        sv_say(SV_INFO, "%s: serving the built-in site; there is no pack file to load", why);
        return;
    }
    if (srv->loading) { /* said once a load: a storm of SIGHUPs is one line */
        sv_file_seen now = {0};
        int same = sv_file_state_get(srv->cfg->pack_path, &now.id, &now.stamp) == 0 &&
                   sv_file_seen_same(&now, &srv->load.seen);
        int bit = same ? TOLD_SAME : TOLD_AGAIN;
        if (!(srv->load.told & bit))
            sv_say(SV_INFO,
                   same ? "%s: %s is being loaded already (%s)"
                        : "%s: %s is loaded again once the load under way (%s) ends",
                   why, srv->cfg->pack_path, srv->load.why);
        srv->load.told |= bit;
        /* The first to ask names the load that follows, as its line said. */
        if (!same && !srv->again)
            srv->again = why;
        return;
    }
    /* The file being served, unchanged: a SIGHUP after a deploy whose
     * rename the watch has already loaded (systemctl reload comes well
     * after the watch's 75 ms) must not validate and swap it again. The
     * same file changed is loaded again in any case, and if it was written
     * in place, no more answers come from the old map (mapguard.h),
     * whatever the reload finds. */
    struct sv_load *ld = &srv->load;
    sv_file_seen served = {srv->current->file, srv->current->stamp, 0};
    if (served_file_changed(srv, why) == 0 && !atomic_load(srv->current->cut)) {
        sv_say(SV_INFO, "%s: %s is still the file of pack %s; nothing to reload", why,
               srv->cfg->pack_path, srv->current->id_hex);
        srv->retry_ms = 0; /* the path is back to the pack served: nothing to retry */
        uv_timer_stop(&srv->retry_timer);
        return;
    }
    *ld = (struct sv_load){.why = why, .served = served, .fd = -1};
    ld->work.data = srv;
    ld->rc =
        sv_snapshot_open_file(srv->cfg->pack_path, &ld->fd, &ld->seen, ld->err, sizeof ld->err);
    /* Noted now, not when the load ends: the watch's look at the path
     * during the load must not ask for the same file again. */
    if (srv->watch)
        sv_watch_note(srv->watch, &ld->seen);
    /* Once the work is queued, its fields are the pool thread's until
     * load_done (all but told): it may be filling them in already. */
    if (ld->rc == 0) {
        sigset_t old;
        block_signals(&old); /* the first queued work starts libuv's pool threads */
        int qrc = uv_queue_work(&srv->loop, &ld->work, load_work, load_done);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (qrc == 0) { /* ld is the pool thread's now: not read again here */
            srv->loading = 1;
            return;
        }
        /* uv_queue_work fails only for a missing callback */
        close(ld->fd);
        snprintf(ld->err, sizeof ld->err, "%s: cannot start its load: %s", srv->cfg->pack_path,
                 uv_strerror(qrc));
        ld->rc = SF_EIO;
        ld->seen.retry = 1;
    }
    load_result(srv);
}

static void on_pack_changed(void *arg)
{
    reload(arg, "pack changed");
}

static void stop_workers(sv_server *srv, int level)
{
    for (int i = 0; i < srv->nstarted; i++) {
        atomic_store(&srv->workers[i]->stop, level);
        wake_worker(srv, i);
    }
}

static void on_stop_timeout(uv_timer_t *t)
{
    sv_server *srv = t->data;
    sv_say(SV_WARNING, "stop: %.1f s passed, closing the connections left",
           (double)srv->cfg->shutdown_ms / 1000);
    stop_workers(srv, 2);
}

static void begin_stop(sv_server *srv, const char *why)
{
    if (atomic_load(&srv->stopping)) {
        if (!srv->forced) {
            srv->forced = 1;
            sv_say(SV_WARNING, "%s again: closing every connection now", why);
            stop_workers(srv, 2);
        }
        return;
    }
    atomic_store(&srv->stopping, 1);
    sv_say(SV_NOTICE, "%s: stopping; finishing responses in flight (at most %.1f s)", why,
           (double)srv->cfg->shutdown_ms / 1000);
    /* a pack being loaded is abandoned (load_done): its check is killed */
    uint64_t one = 1;
    if (write(srv->stop_fd, &one, sizeof one) < 0)
        sv_say(SV_WARNING, "stop: cannot abandon the load of the pack: %s", strerror(errno));
    stop_workers(srv, 1);
    uv_timer_start(&srv->stop_timer, on_stop_timeout, srv->cfg->shutdown_ms, 0);
}

/* SIGHUP and SIGUSR1 that came while servd started (sv_server_note_early_signals). */
static volatile sig_atomic_t early_hup, early_usr1;

static void on_early_signal(int signum)
{
    if (signum == SIGHUP)
        early_hup = 1;
    else
        early_usr1 = 1;
}

void sv_server_note_early_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_early_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGHUP, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
    signal(SIGUSR2, SIG_IGN); /* see on_signal */
}

static const int stop_signals[] = {SIGTERM, SIGINT, SIGQUIT};
static char early_stop_line[3][80];
static size_t early_stop_len[3];

static void on_early_stop(int signum)
{
    for (int i = 0; i < 3; i++)
        if (stop_signals[i] == signum &&
            write(STDERR_FILENO, early_stop_line[i], early_stop_len[i]) < 0)
            break; /* nowhere to say it */
    _exit(0);
}

void sv_server_end_on_early_stop(void)
{
    static const char *const names[] = {"SIGTERM", "SIGINT", "SIGQUIT"};
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_early_stop;
    sigfillset(&sa.sa_mask);
    for (int i = 0; i < 3; i++) {
        int n = snprintf(early_stop_line[i], sizeof early_stop_line[i],
                         "%sservd: %s while starting: stopped before serving\n",
                         sv_say_journal() ? "<5>" : "", names[i]);
        early_stop_len[i] = n < 0 ? 0 : strnlen(early_stop_line[i], sizeof early_stop_line[i]);
        sigaction(stop_signals[i], &sa, NULL);
    }
}

static void on_signal(uv_signal_t *h, int signum)
{
    sv_server *srv = h->data;
    switch (signum) {
    case SIGHUP:
        reload(srv, "SIGHUP");
        break;
    case SIGUSR1:
        if (srv->log)
            sv_log_reopen(srv->log);
        break;
    case SIGTERM:
        begin_stop(srv, "SIGTERM");
        break;
    case SIGINT:
        begin_stop(srv, "SIGINT");
        break;
    case SIGQUIT: /* nginx's graceful stop, and the STOPSIGNAL of images built for it */
        begin_stop(srv, "SIGQUIT");
        break;
    case SIGUSR2:
        /* nginx's binary upgrade, sent by habit or by its tooling: by
         * default it would end servd at once, responses in flight cut */
        sv_say(SV_WARNING, "SIGUSR2 ignored: servd has no binary upgrade; with socket "
                           "activation a restart refuses no connection (servd(1))");
        break;
    }
}

/* A worker finished: once all have, the main loop ends. */
static void on_worker_done(uv_async_t *a)
{
    sv_server *srv = a->data;
    /* unreferenced below: the last worker's own send came after the count */
    if (!uv_has_ref((uv_handle_t *)a) || atomic_load(&srv->nfinished) < srv->nstarted)
        return;
    /* Ignored from here: the exit can still wait for the access log (at
     * most 2 s, log.c), a reload or reopen now is moot, nginx's SIGUSR2
     * must not end servd with lines unwritten, and a second stop signal
     * finds no connection left to close (by its default action it would
     * end servd as killed, status 128 + signal, SIGQUIT with a core).
     * Closing a handle gives its signal the default action back: blocked
     * meanwhile (here and in every other thread, block_signals()), one
     * that comes stays pending, and SIG_IGN discards it. */
    sigset_t old;
    block_signals(&old);
    for (int i = 0; i < SV_NSIGNALS; i++)
        uv_close((uv_handle_t *)&srv->sig[i], NULL);
    for (int i = 0; i < SV_NSIGNALS; i++)
        signal(loop_signums[i], SIG_IGN);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    uv_close((uv_handle_t *)&srv->stop_timer, NULL);
    uv_close((uv_handle_t *)&srv->retry_timer, NULL);
    /* Not closed yet: the last worker may still be about to send it (it
     * counts itself finished first). Unreferenced, it no longer keeps the
     * loop running; it is closed once every worker has been joined. */
    uv_unref((uv_handle_t *)&srv->done);
    if (srv->watch)
        sv_watch_stop(srv->watch);
    srv->watch = NULL;
}

/* The main loop: signals, the stop and retry timers, workers reporting
 * back; and the stop_fd that abandons a load. @return 0, or a libuv error
 * (out of descriptors: the loop's epoll, signal pipe and eventfd, and
 * stop_fd), with nothing left open. */
static int main_loop_init(sv_server *srv)
{
    /* The first loop of a process makes libuv's process-wide signal pipe
     * after the loop's epoll descriptor, and libuv aborts when it cannot:
     * three descriptors must be free. */
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0)
        return -errno;
    int third = fcntl(p[0], F_DUPFD_CLOEXEC, 0), e = errno;
    close(p[0]);
    close(p[1]);
    if (third < 0)
        return -e;
    close(third);
    int rc = uv_loop_init(&srv->loop);
    if (rc != 0)
        return rc;
    for (int i = 0; i < SV_NSIGNALS && rc == 0; i++) {
        if ((rc = uv_signal_init(&srv->loop, &srv->sig[i])) == 0) {
            srv->sig[i].data = srv;
            rc = uv_signal_start(&srv->sig[i], on_signal, loop_signums[i]);
        }
    }
    if (rc == 0 && (rc = uv_async_init(&srv->loop, &srv->done, on_worker_done)) == 0)
        srv->done.data = srv;
    if (rc == 0 && (srv->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0)
        rc = -errno;
    if (rc != 0) {
        sv__loop_discard(&srv->loop);
        return rc;
    }
    uv_timer_init(&srv->loop, &srv->stop_timer);
    srv->stop_timer.data = srv;
    uv_timer_init(&srv->loop, &srv->retry_timer);
    srv->retry_timer.data = srv;
    return 0;
}

/* Descriptors servd needs besides connections: the pack, the log, the
 * admin socket and its clients, and each worker's loop and listeners. */
#define SV_FD_SLACK(workers) (64 + (rlim_t)(workers)*8)

/* Raises the soft descriptor limit toward what --max-conns allows (never
 * above the hard limit: an operator's ulimit -Hn stays the bound), and says
 * so when the hard limit leaves far less: beyond it, connections wait in
 * the backlog (counted as servd_errors_total{kind="emfile"}). */
static void raise_fd_limit(const sv_config *cfg)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return;
    rlim_t conns = (rlim_t)cfg->workers * cfg->max_conns;
    rlim_t want = conns + SV_FD_SLACK(cfg->workers);
    if (rl.rlim_max != RLIM_INFINITY && want > rl.rlim_max)
        want = rl.rlim_max;
    if (want > rl.rlim_cur) {
        rl.rlim_cur = want;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0 && getrlimit(RLIMIT_NOFILE, &rl) != 0)
            return;
    }
    rlim_t room =
        rl.rlim_cur > SV_FD_SLACK(cfg->workers) ? rl.rlim_cur - SV_FD_SLACK(cfg->workers) : 0;
    if (rl.rlim_cur != RLIM_INFINITY && room < conns - conns / 10) /* more than 10% short */
        sv_say(SV_WARNING,
               "warning: the descriptor limit (%llu) leaves room for about %llu "
               "connections, not the %llu that --max-conns %u and %d worker%s allow; raise "
               "it (ulimit -n, LimitNOFILE=) or lower --max-conns",
               (unsigned long long)rl.rlim_cur, (unsigned long long)room, (unsigned long long)conns,
               cfg->max_conns, cfg->workers, cfg->workers == 1 ? "" : "s");
}

/* Frees what server_new() and the startup set up, in reverse. With
 * @p abandoned_log the log thread still counts into srv->metrics until the
 * exit, so the metrics, the pack and the server itself are left. */
static void server_free(sv_server *srv, int abandoned_log)
{
    if (srv->loop_open)
        sv__loop_discard(&srv->loop); /* startup failed after it was set up */
    if (srv->stop_fd >= 0)
        close(srv->stop_fd);
    if (srv->admin_fd >= 0)
        close(srv->admin_fd);
    /* workers and their slot locks were set up together, in order */
    for (int i = 0; srv->workers && i < srv->nworkers && srv->workers[i]; i++) {
        sv__worker_free(srv->workers[i], i < srv->nstarted);
        pthread_mutex_destroy(&srv->slots[i].lock);
    }
    free(srv->workers);
    free(srv->slots);
    if (abandoned_log)
        return;
    sv_metrics_free(&srv->metrics);
    if (srv->current)
        sv_snapshot_unref(srv->current);
    free(srv);
}

/* The server with its workers' memory and the main loop, before any socket
 * or thread. Takes the reference @p snap. @return NULL, said. */
static sv_server *server_new(const sv_config *cfg, sv_snapshot *snap)
{
    sv_server *srv = calloc(1, sizeof *srv);
    if (!srv) {
        sv_say(SV_ERR, "out of memory");
        sv_snapshot_unref(snap);
        return NULL;
    }
    srv->cfg = cfg;
    srv->current = snap;
    srv->nworkers = cfg->workers;
    srv->admin_fd = srv->stop_fd = -1;
    raise_fd_limit(cfg);
    if (sv_metrics_init(&srv->metrics, cfg->workers) != 0)
        goto nomem;
    sv_metrics_set_pack(&srv->metrics, snap->id_hex, cfg->pack_path, snap->loaded_at, snap->n_paths,
                        snap->cut);
    srv->workers = calloc((size_t)cfg->workers, sizeof *srv->workers);
    srv->slots = calloc((size_t)cfg->workers, sizeof *srv->slots);
    if (!srv->workers || !srv->slots)
        goto nomem;
    for (int i = 0; i < cfg->workers; i++) {
        /* each worker on its own cache lines; C11 wants the size to be a
         * multiple of the alignment (glibc does not check, ASan does) */
        sv_worker *w = aligned_alloc(64, (sizeof *w + 63) & ~(size_t)63);
        if (!w)
            goto nomem;
        memset(w, 0, sizeof *w);
        srv->workers[i] = w;
        pthread_mutex_init(&srv->slots[i].lock, NULL);
    }
    /* The main loop before any socket or thread: libuv makes a process-wide
     * pipe at the first loop, and aborts when it cannot (out of descriptors) */
    int uvrc = main_loop_init(srv);
    if (uvrc != 0) {
        sv_say(SV_ERR, "cannot set up the main loop: %s", uv_strerror(uvrc));
        server_free(srv, 0);
        return NULL;
    }
    srv->loop_open = 1;
    return srv;

nomem:
    sv_say(SV_ERR, "out of memory");
    server_free(srv, 0);
    return NULL;
}

/* Appends ", text" (or "text" first) to the startup line's address list. */
static void add_where(char *where, size_t cap, const char *text)
{
    size_t len = strlen(where);
    snprintf(where + len, cap - len, "%s%s", len ? ", " : "", text);
}

/* Binds every --listen address once per worker and the admin socket, or
 * takes the sockets passed in, before any thread: every startup error comes
 * first. Port 0 takes the port the first socket got for all workers.
 * @p where gets the addresses for the startup line, @p admin_where the
 * admin address with the port it took. @return 0, or -1 said. */
static int open_sockets(sv_server *srv, char *where, size_t wcap, char *admin_where, size_t acap)
{
    const sv_config *cfg = srv->cfg;
    char err[1024];
    /* Every address checked before any is bound, so that two overlapping
     * --listen addresses of this servd do not see each other. Not with
     * passed sockets: that is a hand-over, and the servd it takes over from
     * may still listen on the same --listen addresses. */
    for (int a = 0; cfg->ninherited == 0 && a < cfg->nlisten; a++)
        if (sv_addr_port(&cfg->listen[a]) != 0 && sv_addr_taken(&cfg->listen[a], err, sizeof err)) {
            sv_say(SV_ERR, "%s", err);
            return -1;
        }
    /* The admin socket before the listeners: once --listen accepts a
     * connection, /metrics and /healthz accept one too. */
    if (cfg->has_admin) {
        srv->admin_fd = cfg->admin_inherited >= 0 ? cfg->admin_inherited
                                                  : sv_addr_listen(&cfg->admin, 0, err, sizeof err);
        if (srv->admin_fd < 0) {
            sv_say(SV_ERR, "admin: %s", err);
            return -1;
        }
        if (cfg->admin_inherited < 0 && sv_addr_port(&cfg->admin) == 0) {
            sv_addr bound = cfg->admin; /* port 0: say which port it took */
            socklen_t len = bound.len;
            if (getsockname(srv->admin_fd, (struct sockaddr *)&bound.ss, &len) == 0)
                sv_addr_format(&bound, admin_where, acap);
        }
    }
    for (int a = 0; a < cfg->nlisten; a++) {
        sv_addr addr = cfg->listen[a];
        for (int i = 0; i < cfg->workers; i++) {
            int fd = sv_addr_listen(&addr, 1, err, sizeof err);
            if (fd < 0) {
                sv_say(SV_ERR, "%s", err);
                return -1;
            }
            srv->workers[i]->lfd[a] = fd;
            srv->workers[i]->nlisten = a + 1;
            /* port 0: the other workers bind the port the first one got */
            socklen_t len = addr.len;
            if (sv_addr_port(&addr) == 0 &&
                getsockname(fd, (struct sockaddr *)&addr.ss, &len) != 0) {
                sv_say(SV_ERR, "%s: cannot read the port bound: %s", cfg->listen[a].text,
                       strerror(errno));
                return -1;
            }
        }
        char text[80];
        sv_addr_format(&addr, text, sizeof text);
        add_where(where, wcap, text);
    }
    /* Sockets passed by a service manager (activation.c): worker 0 takes the
     * descriptor, every other worker accepts on a duplicate of it - one
     * accept queue that outlives this process, see activation.c. */
    for (int j = 0; j < cfg->ninherited; j++) {
        int a = srv->workers[0]->nlisten;
        for (int i = 0; i < cfg->workers; i++) {
            int fd = i == 0 ? cfg->inherited[j] : fcntl(cfg->inherited[j], F_DUPFD_CLOEXEC, 0);
            if (fd < 0) {
                sv_say(SV_ERR, "passed socket %d: %s", cfg->inherited[j], strerror(errno));
                return -1;
            }
            srv->workers[i]->lfd[a] = fd;
            srv->workers[i]->nlisten = a + 1;
        }
        char text[80], item[100];
        sv_activation_describe(cfg->inherited[j], text, sizeof text);
        snprintf(item, sizeof item, "%s (passed in)", text);
        add_where(where, wcap, item);
    }
    return 0;
}

/* Every socket is bound: root (for ports below 1024) is not needed any
 * more. Switches to --user, checks it can read the pack, then opens the
 * access log as that user; before any thread starts. @return 0, or -1 said. */
static int drop_root_open_log(sv_server *srv)
{
    const sv_config *cfg = srv->cfg;
    char err[1024];
    if (cfg->user && sv_user_switch(cfg->user, err, sizeof err) != 0) {
        sv_say(SV_ERR, "refusing to run: %s", err);
        return -1;
    }
    /* The pack was opened as root; every swap opens it again as the user,
     * so a pack the user cannot read must fail now, not at the first deploy. */
    if (cfg->user && !cfg->builtin) {
        int fd = open(cfg->pack_path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        if (fd < 0) {
            sv_say(SV_ERR,
                   "refusing to run: %s: %s as user %s, who must read the pack to "
                   "reload it",
                   cfg->pack_path, strerror(errno), cfg->user->name);
            return -1;
        }
        close(fd);
    }
    if (cfg->access_log &&
        sv_log_open(cfg->access_log, cfg->workers, &srv->metrics, &srv->log, err, sizeof err)) {
        /* opened after the switch: who could not open it matters */
        if (cfg->user)
            sv_say(SV_ERR, "%s (as user %s, who must write the access log)", err, cfg->user->name);
        else
            sv_say(SV_ERR, "%s", err);
        return -1;
    }
    return 0;
}

/* The workers' loops first, then a check that a connection can still be
 * accepted, then their threads: no worker accepts before the check. Sets
 * srv->nstarted. @return 0, or 1 when a step failed: the workers started
 * by then are stopping, as on SIGTERM. */
static int start_workers(sv_server *srv)
{
    const sv_config *cfg = srv->cfg;
    int start_failed = 0, ninit = 0;
    for (; ninit < cfg->workers; ninit++) {
        int wrc = worker_init(srv, ninit);
        if (wrc != 0) {
            sv_say(SV_ERR, "cannot start worker %d: %s", ninit, uv_strerror(wrc));
            start_failed = 1;
            break;
        }
    }
    /* Every descriptor servd holds is open: a limit that leaves none for a
     * single connection would keep every client waiting in the backlog. */
    int spare = start_failed ? 0 : fcntl(srv->workers[0]->lfd[0], F_DUPFD_CLOEXEC, 0);
    if (spare < 0) {
        int e = errno;
        struct rlimit rl = {0, 0};
        getrlimit(RLIMIT_NOFILE, &rl);
        sv_say(SV_ERR,
               "the descriptor limit (%llu) leaves none for connections: %s; raise it "
               "(ulimit -n, LimitNOFILE=)",
               (unsigned long long)rl.rlim_cur, strerror(e));
        start_failed = 1;
    } else if (!start_failed) {
        close(spare);
    }
    for (int i = 0; !start_failed && i < cfg->workers; i++) {
        int wrc = uv_thread_create(&srv->workers[i]->thread, sv__worker_main, srv->workers[i]);
        if (wrc != 0) {
            sv_say(SV_ERR, "cannot start worker %d: %s", i, sf_spawn_strerror(-wrc));
            start_failed = 1;
            break;
        }
        srv->nstarted = i + 1;
    }
    for (int i = srv->nstarted; i < ninit; i++)
        sv__loop_discard(&srv->workers[i]->loop); /* set up, never run */
    /* The started workers stop as on SIGTERM; the exit says "not set up".
     * Not exit(): the admin and log threads may be running. */
    if (start_failed && srv->nstarted > 0)
        begin_stop(srv, "startup failure");
    return start_failed;
}

int sv_server_run(const sv_config *cfg, sv_snapshot *snap)
{
    sv_server *srv = server_new(cfg, snap);
    if (!srv)
        return 1;
    int rc = 1, abandoned_log = 0;
    char err[1024];
    char where[SV_MAX_LISTEN * 100] = ""; /* "addr, addr, ..." for the startup line */
    char admin_where[sizeof cfg->admin.text];
    snprintf(admin_where, sizeof admin_where, "%s", cfg->admin.text);
    /* The log, admin and worker threads start with the loop's signals
     * blocked (block_signals()); one sent meanwhile waits until the end
     * of the block. */
    sigset_t old_mask;
    block_signals(&old_mask);
    if (open_sockets(srv, where, sizeof where, admin_where, sizeof admin_where) != 0 ||
        drop_root_open_log(srv) != 0) {
        pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
        goto out_free;
    }
    if (cfg->has_admin) {
        int fd = srv->admin_fd;
        srv->admin_fd = -1; /* the admin thread owns it now, even on failure */
        if (sv_admin_start(fd, admin_where, &srv->metrics, &srv->stopping, &srv->admin, err,
                           sizeof err) != 0) {
            sv_say(SV_ERR, "admin: %s", err);
            pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
            goto out_close_log;
        }
    }

    sv_file_seen serving = {snap->file, snap->stamp, 0};
    if (cfg->watch && sv_watch_start(&srv->loop, cfg->pack_path, &serving, cfg->watch_poll_ms,
                                     on_pack_changed, on_pack_written, srv, &srv->watch) != 0)
        sv_say(SV_WARNING, "out of memory for the pack watch; only SIGHUP reloads");

    rc = start_workers(srv);
    pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
    if (rc == 0) {
        char via[PATH_MAX + 8];
        sv_say(SV_INFO, "serving pack %s (%llu paths) from %s%s", snap->id_hex,
               (unsigned long long)snap->n_paths, cfg->pack_path, leads_to(snap, via, sizeof via));
        sv_say(SV_INFO, "listening on %s with %d worker%s%s%s", where, cfg->workers,
               cfg->workers == 1 ? "" : "s", cfg->has_admin ? "; admin on " : "",
               cfg->has_admin ? admin_where : "");
        /* A deploy's rename + SIGHUP, or a log rotation, that came while
         * servd was opening the very files they replaced: done now, as the
         * signal asked (nothing to reload when the path did not change). */
        if (early_hup)
            reload(srv, "SIGHUP during startup");
        if (early_usr1 && srv->log)
            sv_log_reopen(srv->log);
    }

    if (srv->nstarted > 0) {
        uv_run(&srv->loop, UV_RUN_DEFAULT);
        for (int i = 0; i < srv->nstarted; i++)
            uv_thread_join(&srv->workers[i]->thread);
        uv_close((uv_handle_t *)&srv->done, NULL);
        uv_run(&srv->loop, UV_RUN_NOWAIT);
        uv_loop_close(&srv->loop);
        srv->loop_open = 0;
        sv_say(SV_INFO, "stopped");
    } else if (srv->watch) { /* no worker to wait for: server_free closes the loop */
        sv_watch_stop(srv->watch);
        srv->watch = NULL;
    }

    if (srv->admin)
        sv_admin_stop(srv->admin);
out_close_log:
    if (sv_log_close(srv->log, SV_LOG_CLOSE_MS) != 0)
        abandoned_log = 1;
out_free:
    server_free(srv, abandoned_log);
    return rc;
}
