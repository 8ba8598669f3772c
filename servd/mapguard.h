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
 * of zeros and reports the pack corrupt; a writev of such a body fails with
 * EFAULT). The watch sees the file's new size and mtime and loads whatever
 * the path holds once the copy is complete, and the old map goes away with
 * its last response. A fault anywhere else is not the guard's: the previous
 * disposition is restored and the fault repeats, so real bugs still crash.
 *
 * Ranges are added by the thread that opens a snapshot and removed by the
 * thread that drops its last reference, both before the map exists /
 * after it is last used; the handler reads them with atomic loads only.
 */
#ifndef SV_MAPGUARD_H
#define SV_MAPGUARD_H

#include <stdatomic.h>
#include <stddef.h>

/* Maps guarded at once: snapshots alive together (the current pack, plus
 * old ones still finishing responses). Beyond it a map is unguarded. */
#define SV_MAPGUARD_SLOTS 64

/* Installs the SIGBUS handler. @return 0, or -1 with errno. */
int sv_mapguard_install(void);

/* Guards [start, start + len). @return a slot for sv_mapguard_remove, or -1
 * when every slot is taken. */
int sv_mapguard_add(const void *start, size_t len);

/* Stops guarding the range of slot (-1: nothing). */
void sv_mapguard_remove(int slot);

/* The flag set once a fault hit slot's range: from then on its map may
 * hold anything (a file written in place shows its new bytes through the
 * map too), and servd answers 503 from it until a swap. A never-set flag
 * for slot -1. */
const atomic_int *sv_mapguard_flag(int slot);

/* Pages replaced by zeros since startup. */
unsigned long sv_mapguard_faults(void);

#endif
