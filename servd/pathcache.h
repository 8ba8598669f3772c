/*
 * pathcache.h - a per-reader cache from raw request paths to file entries.
 *
 * Answering a request for a file costs a path normalisation, two LMDB B-tree
 * lookups (the path, then the body) and an entry decode: about 1350 of the
 * 3500 user-space instructions of a small request (callgrind, bench/RESULTS.md).
 * The result depends only on the raw path and the pack, so each reader keeps
 * a small direct-mapped table: raw path -> decoded entry and the bodies of its
 * variants. The table is attached to the sf_reader (sf_reader_set_user) and
 * freed with it, so its views into the map live exactly as long as the map
 * they point into: a snapshot swap brings new readers and empty tables, and
 * nothing needs invalidating.
 *
 * A reader is used by one thread at a time, so the table takes no lock.
 */
#ifndef SV_PATHCACHE_H
#define SV_PATHCACHE_H

#include <stddef.h>

#include "sf/store.h"

/* Slots per reader (a power of two). Direct-mapped: a colliding path
 * replaces the slot's entry. 256 slots hold the hot set of a typical site;
 * each slot is ~640 bytes and is only touched (made resident) when used. */
#define SV_PATHCACHE_SLOTS 256
/* Longest raw path cached, in bytes; longer paths take the normal way. */
#define SV_PATHCACHE_KEY 128

/* A cached file entry: the decoded entry and the body of each variant
 * (body[i] belongs to e.variants[i]). Views into the map, valid while the
 * reader lives. */
typedef struct sv_cached {
    sf_entry e;
    sf_view body[SF_ENC_COUNT];
} sv_cached;

/* The cached entry for raw path p[0, n), or NULL. */
const sv_cached *sv_pathcache_get(sf_reader *rd, const char *p, size_t n);

/* Caches file entry e (SF_KIND_FILE, found for raw path p[0, n)) and looks up
 * the bodies of its variants. @return the cached copy, or NULL when it cannot
 * be cached (path too long, no memory, a body that cannot be read): the
 * caller then answers from e as usual. */
const sv_cached *sv_pathcache_put(sf_reader *rd, const char *p, size_t n, const sf_entry *e);

#endif
