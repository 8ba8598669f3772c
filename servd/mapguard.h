/*
 * mapguard.h - surviving a pack file cut short under its map.
 *
 * A pack is served from a read-only shared map of its file. Writing into the
 * live file in place (cp, install or rsync --inplace onto the path: not
 * supported, see servd(1)) truncates it first, and any later read of a page
 * past the new end raises SIGBUS, which would kill every worker at once.
 *
 * The guard is a SIGBUS handler that knows the address ranges of the packs
 * mapped. A fault inside one is answered by mapping a page of zeros over the
 * missing page, so the read that faulted completes (LMDB then finds a page
 * of zeros and reports the pack corrupt), and servd answers 503 from that
 * pack from then on. The main thread marks it the same way when the watch
 * reports a write into the served file or a reload finds it changed, and it
 * is shorter than its map or has other first bytes, or when a reload
 * refuses the changed file (the rewrite may not
 * leave a gap to fault in, and a path in the path cache is sent by the
 * kernel from the map without a fault in servd). The watch loads whatever
 * the path holds once the copy is complete, and the old map goes away with
 * its last response. A fault anywhere else is not the guard's: the previous
 * disposition is restored and the fault repeats, so real bugs still crash.
 *
 * This narrows what an in-place write does; it cannot make it safe: bytes a
 * worker reads between the rewrite and the mark are another pack's, which
 * LMDB may trip over, and a response in flight can carry zeros or the new
 * file's bytes.
 *
 * Ranges are added by the thread that opens a snapshot (after LMDB's first
 * reads of the map, before the validation walk) and removed by the thread
 * that drops its last reference, after its last use of the map; the handler
 * reads them with atomic loads only, under a per-slot generation count.
 * LMDB's first reads come before the range is known (LMDB maps the file
 * itself, and where is found from a pointer it returns): that thread is
 * guarded meanwhile on its own (sv_mapguard_open_begin), so that a file cut
 * in that instant is a refused load, not a dead server.
 */
#ifndef SV_MAPGUARD_H
#define SV_MAPGUARD_H

#include <stdatomic.h>
#include <stddef.h>

/* Maps guarded at once: snapshots alive together (the current pack, plus
 * old ones still finishing responses: a slow reader keeps its pack as long
 * as it reads). sv_snapshot_open loads no pack it cannot guard. */
#define SV_MAPGUARD_SLOTS 256

/* Installs the SIGBUS handler. @return 0, or -1 with errno. */
int sv_mapguard_install(void);

/* Guards [start, start + len). @return a slot for sv_mapguard_remove, or -1
 * when every slot is taken. */
int sv_mapguard_add(const void *start, size_t len);

/* 1 when a slot is free for sv_mapguard_add, else 0. Slots are taken only
 * by the load of a snapshot, one at a time, so the answer holds for it. */
int sv_mapguard_room(void);

/* From here until sv_mapguard_open_end, a fault past the end of a file
 * that the calling thread takes anywhere reads zeros: the open of a pack,
 * whose map's range is not known until LMDB has read it. */
void sv_mapguard_open_begin(void);

/* 1 if the thread has read zeros since sv_mapguard_open_begin, else 0:
 * the cut() of sf_pack_open_checked. */
int sv_mapguard_open_cut(void);

/* Ends what sv_mapguard_open_begin began (harmless without it). @return 1
 * if the thread read zeros meanwhile: the file was cut while it was being
 * opened, and that map holds pages of zeros, else 0. */
int sv_mapguard_open_end(void);

/* Stops guarding the range of slot (-1: nothing). */
void sv_mapguard_remove(int slot);

/* The flag set once a fault hit slot's range: from then on its map may
 * hold anything (a file written in place shows its new bytes through the
 * map too), and servd answers 503 from it until a swap. A never-set flag
 * for slot -1. */
const atomic_int *sv_mapguard_flag(int slot);

/* Sets slot's flag from outside the handler: the main thread saw the file
 * of the pack being served change in place. */
void sv_mapguard_mark(int slot);

/* From here on, faults in slot's range count in sv_mapguard_faults: its
 * pack is served (the load that guarded it succeeded). Those of a load's
 * validation walk are the load's own refusal, not a pack in use cut. */
void sv_mapguard_serve(int slot);

/* Pages of served packs (sv_mapguard_serve) replaced by zeros since
 * startup. */
unsigned long sv_mapguard_faults(void);

#endif
