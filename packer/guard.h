/*
 * guard.h - a pack cut short while servd-pack reads it.
 *
 * servd-pack reads packs (verify, ls, cat, diff, and a build's --base)
 * through LMDB's read-only map of the file. Writing that file in place
 * meanwhile (cp or rsync --inplace onto it) truncates it first, and a read
 * of a page past the new end raises SIGBUS: servd-pack died of "Bus error",
 * naming no file, a build leaving its temporary files. The handler here
 * knows the maps of the packs open, and the thread that is opening one
 * (LMDB reads its map before anyone can know where it lies). A fault there
 * ends servd-pack with one line naming the file and exit status 1, after a
 * build's own cleanup (pk_guard_on_fault): nothing at -o has changed. A
 * fault anywhere else is not the guard's: the previous disposition is
 * restored and the fault repeats, so real bugs still crash.
 *
 * servd answers the same fault with a page of zeros and serves on
 * (servd/mapguard.c): it must. A command reading a file that is being
 * rewritten has nothing to go on with, and reading on through zeros would
 * report damage the pack does not have.
 */
#ifndef PK_GUARD_H
#define PK_GUARD_H

#include "sf/store.h"

/* What a pack cut short under its map is told as, after "FILE: ". */
#define PK_GUARD_CUT "the file was cut short while it was read (written in place?)"

/* Packs guarded at once (diff opens two, a build one). */
#define PK_GUARD_SLOTS 4

/* Installs the SIGBUS handler: once, before any pack is opened. */
void pk_guard_install(void);

/* Before the open of the pack at path: from here, a fault in the calling
 * thread is path's. @return a slot for pk_guard_open_end, or -1 (every
 * slot taken: the pack is read unguarded). */
int pk_guard_open_begin(const char *path);

/* After the open: guards the map of pack (NULL when the open failed: the
 * slot is let go) under the slot's name, and ends the thread's guard. */
void pk_guard_open_end(int slot, const sf_pack *pack);

/* Before sf_pack_close(pack): stops guarding its map. */
void pk_guard_forget(const sf_pack *pack);

/* Called by the handler after its line, before the exit: a build removes
 * its temporary files there. It may only do what a signal handler may. */
void pk_guard_on_fault(void (*cleanup)(void));

#endif
