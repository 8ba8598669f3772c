/*
 * watch.h - noticing that the --pack path now names another file, so that a
 * deploy by rename (mv -T new.lmdb site.lmdb) or by symlink flip
 * (site.lmdb -> releases/v2.lmdb, replaced atomically) reloads the pack
 * without a SIGHUP.
 *
 * The watch compares identities, never contents: what the path resolves to
 * (device and inode, with its size and mtime: sv_file_seen_same) against
 * the last file a reload opened or refused. A change is seen
 *
 *   - by inotify (libuv uv_fs_event): the path's name, or the symlink
 *     target's name, moved, created or deleted in its directory, or the
 *     file under it written (a cp over the served pack, not supported, but
 *     told to the caller at once);
 *   - by a stat every poll interval (--watch-interval, default 2 s), for file
 *     systems where inotify sees nothing (NFS and other network file systems,
 *     FUSE) and for symlinks further up the path;
 *
 * and the path is looked at again (and reloaded if it names another file)
 * once no change has come for SV_WATCH_SETTLE_MS.
 *
 * Everything runs on the loop passed to sv_watch_start (servd's main loop),
 * the same thread that handles SIGHUP, so a reload from the watch and one
 * from a signal never run at once.
 */
#ifndef SV_WATCH_H
#define SV_WATCH_H

#include <stdint.h>
#include <uv.h>

#include "snapshot.h"

/* How long the path must be quiet before the watch looks at it. A deploy
 * script's renames come microseconds to a few milliseconds apart (mv site.lmdb
 * prev.lmdb; mv new.lmdb site.lmdb), and a SIGHUP often follows at once:
 * looking once after the burst avoids refusing a half-done state (a missing
 * file), loads the final file once, and lets a SIGHUP sent with the rename
 * load it first (then the look finds it loaded). 75 ms is far below anything
 * a person deploying notices. */
#define SV_WATCH_SETTLE_MS 75
/* The longest a burst of changes can postpone the look, so a name that is
 * renamed over and over still gets loaded. */
#define SV_WATCH_SETTLE_MAX_MS 1000
/* Default interval of the stat(2) fallback: one stat every 2 s costs nothing
 * and bounds how late a change is seen where inotify is blind. */
#define SV_WATCH_DEFAULT_POLL_MS 2000
/* While the directory that holds the path is gone, it is looked for this
 * often when --watch-interval is 0 (nothing else would see it come back:
 * mv /srv /srv.old; mkdir /srv); any other interval's poll looks for it. */
#define SV_WATCH_REGAIN_MS 250

typedef struct sv_watch sv_watch;

/* Called on the loop's thread when the path resolves to a file other than the
 * one last noted. The callback is expected to reload and then report what it
 * opened or refused with sv_watch_note (reload() in server.c does). */
typedef void (*sv_watch_cb)(void *arg);

/* Starts watching path on loop. current: the identity of the pack being
 * served (sv_snapshot.file). poll_ms: the fallback interval, 0 for none.
 * cb: called as above. written: called at once, on the loop's thread, for
 * every write or attribute change inotify reports of the file the path
 * names, while it differs from the one last noted (a cp over the served
 * pack, a touch); the look that calls cb follows once the writes have
 * stopped for SV_WATCH_SETTLE_MS.
 * Directories that cannot be watched with inotify are logged once and left
 * to the poll.
 * @return 0, or -1 when out of memory (nothing was started). */
int sv_watch_start(uv_loop_t *loop, const char *path, const sv_file_seen *current, uint64_t poll_ms,
                   sv_watch_cb cb, sv_watch_cb written, void *arg, sv_watch **out);

/* Records what a reload (from the watch or from SIGHUP) just opened or
 * refused: the watch calls back only when the path changes again. A
 * SIGHUP that already loaded the file thus cancels the watch's reload of
 * the same file. The directory watches are aimed again at where the path
 * now leads. */
void sv_watch_note(sv_watch *w, const sv_file_seen *seen);

/* Stops the watch and closes its handles; the memory is freed once the loop
 * has run their close callbacks. */
void sv_watch_stop(sv_watch *w);

#endif
