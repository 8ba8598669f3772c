/*
 * watch.c - the --pack watch: inotify on the directories that hold the pack
 * path and the file it finally resolves to, a short settle delay, and a
 * periodic stat(2) fallback; see watch.h for what it guarantees.
 *
 * Why directories and not the file: a rename over the path replaces the
 * directory entry, not the file - an inotify watch on the old file would
 * only ever report that the old file lost its name. Watching the directory
 * sees IN_MOVED_TO / IN_CREATE for the name, whatever file it now names.
 *
 * Which names matter: the path's own last component (a rename or a symlink
 * flip over it) and, when the path is a symlink, the last component of what
 * it resolves to (a release file replaced in place by a rename). Events for
 * other names in those directories (the temporary file a deploy writes, an
 * access log) are ignored, a rename among them after one stat(2) of the
 * directory (its own move is reported under its own name: dir_replaced()).
 * Both watches are re-aimed after every check, because a flip can move the
 * target to another directory, or the directory be replaced.
 */
#include "watch.h"
#include "say.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Directories watched at once: the path's and its symlink target's. */
#define SV_WATCH_DIRS 2
/* Names that matter in one directory: the path's and the target's, when
 * both live in the same directory (site.lmdb -> site-v2.lmdb). */
#define SV_WATCH_NAMES 2

struct dirwatch {
    uv_fs_event_t ev;
    sv_watch *w;
    int started;   /* ev is watching dir */
    int warned;    /* the failure to watch dir was logged */
    sv_file_id id; /* the directory's identity when the watch started */
    char dir[PATH_MAX];
    char names[SV_WATCH_NAMES][NAME_MAX + 1]; /* "" for an unused slot */
};

struct sv_watch {
    uv_loop_t *loop;
    uint64_t burst_start; /* uv_now() of the first change of a burst; 0: none */
    char *path;
    sv_file_seen noted; /* the file last opened or refused by a reload */
    int missing;        /* the last look found no file: logged once */
    int dir_gone;       /* the path's directory is gone: logged once, looked for */
    uint64_t poll_ms;
    sv_watch_cb cb, written;
    void *arg;
    uv_timer_t settle;
    uv_timer_t poll;
    struct dirwatch dw[SV_WATCH_DIRS];
    int open_handles; /* freed when the last close callback has run */
};

/* Splits path into its directory ("." when none, "/" for the root) and last
 * component. @return 0, or -1 when a part does not fit. */
static int split(const char *path, char *dir, size_t dircap, char *name, size_t namecap)
{
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    size_t dlen = slash ? (size_t)(slash - path) : 0;
    if (strlen(base) >= namecap)
        return -1;
    memcpy(name, base, strlen(base) + 1);
    if (!slash) {
        snprintf(dir, dircap, ".");
        return 0;
    }
    if (dlen == 0) {
        snprintf(dir, dircap, "/");
        return 0;
    }
    if (dlen >= dircap)
        return -1;
    memcpy(dir, path, dlen);
    dir[dlen] = '\0';
    return 0;
}

static void on_settled(uv_timer_t *t);
static void on_poll(uv_timer_t *t);

/* A change was seen (inotify, or the poll): look at the path once it has
 * been quiet for SV_WATCH_SETTLE_MS, but no later than SV_WATCH_SETTLE_MAX_MS
 * after the first change of the burst. Every change restarts the delay, so
 * that a SIGHUP sent right after a rename (mv -T new site; kill -HUP) is
 * always handled before the look - never a look armed by an earlier rename
 * firing between the two, which would load the file twice. */
static void changed(sv_watch *w)
{
    uint64_t now = uv_now(w->loop), delay = SV_WATCH_SETTLE_MS;
    if (!w->burst_start)
        w->burst_start = now;
    if (now - w->burst_start + delay > SV_WATCH_SETTLE_MAX_MS)
        delay = now - w->burst_start >= SV_WATCH_SETTLE_MAX_MS
                    ? 0
                    : SV_WATCH_SETTLE_MAX_MS - (now - w->burst_start);
    uv_timer_start(&w->settle, on_settled, delay, 0);
}

/* Writes into the file under the name: looked at once they have stopped
 * for SV_WATCH_SETTLE_MS, however long they go on (a long cp would
 * otherwise have its partial file checked, and refused, every
 * SV_WATCH_SETTLE_MAX_MS), unless a burst of renames is already waiting. */
static void writes_seen(sv_watch *w)
{
    if (w->burst_start)
        changed(w);
    else
        uv_timer_start(&w->settle, on_settled, SV_WATCH_SETTLE_MS, 0);
}

/* Whether d's directory no longer has its name (moved, deleted, or another
 * directory in its place: mv site site.old; mkdir site). inotify keeps
 * watching the old one, and says so with an event that libuv names by the
 * directory's own last component (IN_MOVE_SELF, IN_DELETE_SELF); asked on
 * a rename of any name that does not matter, which a deploy makes a few
 * of, it costs one stat(2) each. */
static int dir_replaced(const struct dirwatch *d)
{
    sv_file_id id;
    return sv_file_id_get(d->dir, &id) != 0 || !sv_file_id_eq(&id, &d->id);
}

static void on_dir_event(uv_fs_event_t *h, const char *filename, int events, int status)
{
    struct dirwatch *d = h->data;
    sv_watch *w = d->w;
    if (status < 0)
        return; /* the poll still looks */
    if (filename) {
        int match = 0;
        for (int i = 0; i < SV_WATCH_NAMES; i++)
            match |= d->names[i][0] && strcmp(filename, d->names[i]) == 0;
        if (!match && !((events & UV_RENAME) && dir_replaced(d)))
            return;
    }
    if (events & UV_RENAME) { /* what the name refers to: moved, created, deleted */
        changed(w);
        return;
    }
    /* UV_CHANGE: a write into the file under the name, or an attribute
     * change. One that leaves its size and mtime as noted (a chmod, a hard
     * link kept for a rollback: only the ctime moves) is nothing new and
     * arms nothing. One that changed them is told at once (a write into
     * the served pack shows through the map), and looked at once the
     * writes stop. */
    sv_file_seen now = {0};
    if (sv_file_state_get(w->path, &now.id, &now.stamp) != 0 || sv_file_seen_same(&now, &w->noted))
        return;
    w->written(w->arg);
    writes_seen(w);
}

/* Points d at dir with the given names, restarting the inotify watch only
 * when the directory (by name or identity) changed. dir NULL: unused. */
static void aim(struct dirwatch *d, const char *dir, const sv_file_id *id, const char *n0,
                const char *n1)
{
    snprintf(d->names[0], sizeof d->names[0], "%s", n0 ? n0 : "");
    snprintf(d->names[1], sizeof d->names[1], "%s", n1 ? n1 : "");
    if (d->started && dir && strcmp(d->dir, dir) == 0 && sv_file_id_eq(&d->id, id))
        return;
    if (d->started) {
        uv_fs_event_stop(&d->ev);
        d->started = 0;
    }
    if (!dir)
        return;
    if (strcmp(d->dir, dir) != 0)
        d->warned = 0;
    snprintf(d->dir, sizeof d->dir, "%s", dir);
    d->id = *id;
    int rc = uv_fs_event_start(&d->ev, on_dir_event, dir, 0);
    if (rc == 0) {
        d->started = 1;
        d->warned = 0; /* a later failure is news */
    } else if (!d->warned) {
        d->warned = 1;
        if (d->w->poll_ms)
            sv_say(SV_WARNING, "watch: cannot watch %s (%s); checking the pack every %.1f s", dir,
                   uv_strerror(rc), (double)d->w->poll_ms / 1000);
        else
            sv_say(SV_WARNING,
                   "watch: cannot watch %s (%s), and --watch-interval is 0: "
                   "only SIGHUP reloads",
                   dir, uv_strerror(rc));
    }
}

/* Re-aims both directory watches at where the path and its target are now. */
static void aim_all(sv_watch *w)
{
    char dir0[PATH_MAX], name0[NAME_MAX + 1], real[PATH_MAX], dir1[PATH_MAX], name1[NAME_MAX + 1];
    sv_file_id id0, id1;

    int rc = split(w->path, dir0, sizeof dir0, name0, sizeof name0) != 0
                 ? -ENAMETOOLONG
                 : sv_file_id_get(dir0, &id0);
    if (rc != 0) {
        aim(&w->dw[0], NULL, NULL, NULL, NULL);
        aim(&w->dw[1], NULL, NULL, NULL, NULL);
        /* Nothing watches for the directory to come back: it is looked
         * for, by the poll, or with --watch-interval 0 by the same timer
         * at SV_WATCH_REGAIN_MS until it is back. */
        if (!w->dir_gone)
            sv_say(SV_WARNING,
                   "watch: cannot watch the directory of %s (%s); looking for it every %.2f s",
                   w->path, strerror(-rc),
                   (double)(w->poll_ms ? w->poll_ms : SV_WATCH_REGAIN_MS) / 1000);
        w->dir_gone = 1;
        if (!w->poll_ms && !uv_is_active((uv_handle_t *)&w->poll))
            uv_timer_start(&w->poll, on_poll, SV_WATCH_REGAIN_MS, SV_WATCH_REGAIN_MS);
        return;
    }
    if (w->dir_gone && !w->poll_ms)
        uv_timer_stop(&w->poll);
    w->dir_gone = 0;
    /* The file the path finally resolves to, when it is a symlink to a
     * file in another directory or under another name. */
    int have_target = realpath(w->path, real) != NULL &&
                      split(real, dir1, sizeof dir1, name1, sizeof name1) == 0 &&
                      sv_file_id_get(dir1, &id1) == 0;
    if (!have_target) {
        aim(&w->dw[0], dir0, &id0, name0, NULL);
        aim(&w->dw[1], NULL, NULL, NULL, NULL);
    } else if (sv_file_id_eq(&id0, &id1)) {
        aim(&w->dw[0], dir0, &id0, name0, strcmp(name0, name1) ? name1 : NULL);
        aim(&w->dw[1], NULL, NULL, NULL, NULL);
    } else {
        aim(&w->dw[0], dir0, &id0, name0, NULL);
        aim(&w->dw[1], dir1, &id1, name1, NULL);
    }
}

/* Looks at the path: a file other than the one noted means a reload - at
 * once when the change has settled (load), else after the settle delay (the
 * poll found it: a SIGHUP may be on its way, see changed()). */
static void look(sv_watch *w, int load)
{
    sv_file_seen now = {0};
    int rc = sv_file_state_get(w->path, &now.id, &now.stamp);
    if (rc != 0) {
        if (!w->missing)
            sv_say(SV_WARNING, "watch: %s: %s; still serving the current pack", w->path,
                   strerror(-rc));
        w->missing = 1;
    } else {
        w->missing = 0;
        if (!sv_file_seen_same(&now, &w->noted) && !load) {
            changed(w);
        } else if (!sv_file_seen_same(&now, &w->noted)) {
            /* Noted before the call, so that a callback that declines to
             * reload (during a stop) is not asked again for this file. The
             * reload notes the exact file it opened afterwards. */
            w->noted = now;
            w->cb(w->arg);
        }
    }
    aim_all(w);
}

static void on_settled(uv_timer_t *t)
{
    sv_watch *w = t->data;
    w->burst_start = 0;
    look(w, 1);
}

static void on_poll(uv_timer_t *t)
{
    sv_watch *w = t->data;
    /* A change inotify already reported is looked at by the settle timer. */
    if (!uv_is_active((uv_handle_t *)&w->settle))
        look(w, 0);
}

int sv_watch_start(uv_loop_t *loop, const char *path, const sv_file_seen *current, uint64_t poll_ms,
                   sv_watch_cb cb, sv_watch_cb written, void *arg, sv_watch **out)
{
    sv_watch *w = calloc(1, sizeof *w);
    if (!w)
        return -1;
    w->path = strdup(path);
    if (!w->path) {
        free(w);
        return -1;
    }
    w->loop = loop;
    w->noted = *current;
    w->poll_ms = poll_ms;
    w->cb = cb;
    w->written = written;
    w->arg = arg;
    uv_timer_init(loop, &w->settle);
    uv_timer_init(loop, &w->poll);
    w->settle.data = w->poll.data = w;
    w->open_handles = 2;
    for (int i = 0; i < SV_WATCH_DIRS; i++) {
        uv_fs_event_init(loop, &w->dw[i].ev);
        w->dw[i].ev.data = &w->dw[i];
        w->dw[i].w = w;
        w->open_handles++;
    }
    /* A rename while servd started, after its pack was opened and before
     * these watches were set, is seen now, not at the first poll (never,
     * with --watch-interval 0). */
    look(w, 0);
    if (poll_ms)
        uv_timer_start(&w->poll, on_poll, poll_ms, poll_ms);
    *out = w;
    return 0;
}

void sv_watch_note(sv_watch *w, const sv_file_seen *seen)
{
    w->noted = *seen;
    /* a SIGHUP that followed a flip to another directory: watch that one
     * now, not at the next look (never, with --watch-interval 0) */
    aim_all(w);
}

static void on_closed(uv_handle_t *h)
{
    sv_watch *w = uv_handle_get_type(h) == UV_TIMER ? h->data : ((struct dirwatch *)h->data)->w;
    if (--w->open_handles > 0)
        return;
    free(w->path);
    free(w);
}

void sv_watch_stop(sv_watch *w)
{
    uv_close((uv_handle_t *)&w->settle, on_closed);
    uv_close((uv_handle_t *)&w->poll, on_closed);
    for (int i = 0; i < SV_WATCH_DIRS; i++)
        uv_close((uv_handle_t *)&w->dw[i].ev, on_closed);
}
