/*
 * snapshot.h - a loaded, fully validated pack and the references that keep
 * it mapped.
 *
 * A snapshot owns an open sf_pack and one sf_reader per worker, created when
 * the pack is loaded. Every pointer servd writes from the pack (pre-rendered
 * header blocks, bodies) points into the pack's read-only map, so the map must
 * stay until the last byte of every response that points into it is written.
 * The snapshot's atomic reference count tracks exactly that:
 *
 *   - the server holds one reference on the current snapshot;
 *   - each worker holds one reference on the snapshot it serves from;
 *   - each queued write (a response the socket did not take at once) holds
 *     one reference until its write callback runs.
 *
 * When the count drops to zero - on whichever thread drops it - the readers
 * are ended and the pack closed (the file is unmapped). docs/architecture.md
 * describes the whole chain.
 */
#ifndef SV_SNAPSHOT_H
#define SV_SNAPSHOT_H

#include <limits.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "sf/store.h"

/* What a pack path resolved to when it was opened: the (device, inode) of
 * the file at the end of any symlinks. A rename over the path or a symlink
 * flip changes it; this is how the watch (watch.c) tells a new pack from the
 * one being served without reading a byte of it. */
typedef struct sv_file_id {
    uint64_t dev, ino;
} sv_file_id;

/* Fills id with what path resolves to now (stat(2), following symlinks).
 * @return 0, or -errno (id zeroed) when it cannot be stat'ed. */
int sv_file_id_get(const char *path, sv_file_id *id);

static inline int sv_file_id_eq(const sv_file_id *a, const sv_file_id *b)
{
    return a->dev == b->dev && a->ino == b->ino;
}

/* What tells one state of a file from another: its size and the time of
 * its contents (a rewrite in place, which is not supported, changes it).
 * Not the ctime: a hard link kept for a rollback or a chmod changes that,
 * and neither makes a new pack. */
typedef struct sv_file_stamp {
    int64_t size, mtime_ns;
} sv_file_stamp;

/* Fills id and stamp with what path resolves to now. @return 0, or -errno
 * (id zeroed). */
int sv_file_state_get(const char *path, sv_file_id *id, sv_file_stamp *stamp);
/* The same of an open file. */
int sv_file_state_of(int fd, sv_file_id *id, sv_file_stamp *stamp);

static inline int sv_file_stamp_eq(const sv_file_stamp *a, const sv_file_stamp *b)
{
    return a->size == b->size && a->mtime_ns == b->mtime_ns;
}

/* A file as a reload saw it: which file, and its state then. */
typedef struct sv_file_seen {
    sv_file_id id;
    sv_file_stamp stamp;
    /* set by sv_snapshot_open (or its halves) when a refusal was no
     * verdict on the file (servd had no descriptor or memory for it, its
     * open or a read of its first pages failed with EIO, its check could
     * not run or was stopped, or the load was abandoned): worth trying the
     * same file again later */
    int retry;
} sv_file_seen;

/* Whether two looks at a path found the same pack: the same file in the
 * same state. An inode number alone is not enough: a file system hands a
 * freed one to the next file (rm bad.lmdb; cp good.lmdb; mv -T - the good
 * pack can get the refused one's number). */
static inline int sv_file_seen_same(const sv_file_seen *a, const sv_file_seen *b)
{
    return sv_file_id_eq(&a->id, &b->id) && sv_file_stamp_eq(&a->stamp, &b->stamp);
}

/* Bytes of each of a pack's two LMDB meta pages hashed to tell a rewrite
 * from a touch: they (transaction id, root pages, last page) differ for
 * almost any other pack. The second starts at the page size the first
 * states: 4 KiB here, 16 KiB for a pack built where pages are, 32 KiB
 * (LMDB's largest) where they are 64 KiB. */
#define SV_SNAPSHOT_HEAD 4096

typedef struct sv_snapshot {
    atomic_long refs;
    sf_pack *pack;
    int64_t loaded_at;     /* Unix seconds when it was opened */
    uint64_t n_paths;      /* paths walked during validation */
    char id_hex[33];       /* pack id as 32 lowercase hex digits, NUL-terminated */
    sv_file_id file;       /* the file that was checked and opened */
    sv_file_stamp stamp;   /* its size and times then */
    int guard;             /* its map's slot in mapguard.h, or -1 */
    const atomic_int *cut; /* set when a read of its map found the file cut short */
    uint64_t head_hash;    /* sv_snapshot_head_hash() of the file then */
    char target[PATH_MAX]; /* the file opened, when the path led to it by a symlink; else "" */
    int nreaders;
    sf_reader *readers[]; /* one per worker; readers[i] is used by worker i only */
} sv_snapshot;

/* Opens the pack at path and validates it completely: the meta record (magic,
 * version, truncation - sf_pack_open), then every path record decodes, every
 * key is a normalised path, every variant's body exists with the recorded
 * length, redirects have a target, and the 404 entry (if any) is sound.
 * Creates nreaders readers. On failure writes a sentence naming the file and
 * the cause into err.
 *
 * The path is opened once, and the identity of that descriptor (fstat) is
 * what the snapshot records, what the check child walks (/proc/self/fd/N)
 * and what LMDB maps: a pack renamed over the path meanwhile is neither
 * served under the old one's identity nor missed (the next check of the
 * path sees a difference and loads it).
 * @param[out] out   the snapshot with one reference (the caller's)
 * @param[out] seen  may be NULL; set on success AND on failure to what the
 *                   path resolved to (zeroed when the stat failed), so a
 *                   refused file is not retried until the path changes again
 * @return 0 or a negative SF_E* code. */
int sv_snapshot_open(const char *path, int nreaders, sv_snapshot **out, sv_file_seen *seen,
                     char *err, size_t errlen);

/* sv_snapshot_open in two halves, for a caller that must not wait for a
 * whole pack's read (servd's main thread, which handles the stop signals):
 *
 * sv_snapshot_open_file, quick (an open and an fstat), sets *seen as above
 * and, for a regular file, *fd to a descriptor of it. @return 0 or a
 * negative SF_E* code (nothing left open).
 *
 * sv_snapshot_load does the rest, which reads the whole pack (the check in
 * a child, then the walk here), on any thread, one load at a time (the
 * guard slots, mapguard.h). It takes fd (closes it) and seen as the first
 * half left it, and sets seen->retry on failure. cancel_fd: -1, or a
 * descriptor that becomes readable when the load is to be abandoned: the
 * check child is killed, the walk stops within 4096 paths (snapshot.c), and
 * SF_ECANCELED is returned (no verdict: seen->retry). */
int sv_snapshot_open_file(const char *path, int *fd, sv_file_seen *seen, char *err, size_t errlen);
int sv_snapshot_load(int fd, const char *path, int nreaders, int cancel_fd, sv_snapshot **out,
                     sv_file_seen *seen, char *err, size_t errlen);

/* The load check of one decoded entry (sv_snapshot_open runs it on every
 * path and on the status:404 entry, is404 = 1): a redirect's target is a
 * normalised path; a file has 1 to 4 variants, the first identity, each
 * with an ETag and a 304 block (but in the status:404 entry), header
 * blocks laid out as docs/format.md §6 says (the status line first, in a
 * 200 block then the Content-Length of its body and the Content-Type,
 * then field lines, none of them one servd writes itself) and its body
 * there with the recorded length. file, what and name only word the error written into err.
 * @return 0 or a negative SF_E* code. */
int sv_snapshot_check_entry(sf_reader *rd, const sf_entry *e, int is404, const char *file,
                            const char *what, sf_view name, char *err, size_t errlen);

/* The FNV-1a hash of the first SV_SNAPSHOT_HEAD bytes of each LMDB meta
 * page of the file open at fd: at 0, and at the page size the first states
 * (at SV_SNAPSHOT_HEAD when it states none: the file's first bytes). Bytes
 * past its end count as zeros. @return 0, or -1 when a read failed (*hash
 * is then the hash of what was read, zeros for the rest). */
int sv_snapshot_head_hash(int fd, uint64_t *hash);

/* Whether the open file fd starts as s's did: 1 yes, 0 no, -1 it cannot be
 * read (errno set): a failing disk, which says nothing of a rewrite. */
int sv_snapshot_head_same(const sv_snapshot *s, int fd);

/* Takes one more reference. The caller must already hold one (or own the
 * pointer through a published slot it is responsible for). */
static inline void sv_snapshot_ref(sv_snapshot *s)
{
    atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
}

/* Drops one reference; the last one ends the readers, closes the pack (the
 * map goes away) and frees the snapshot. Safe from any thread. */
void sv_snapshot_unref(sv_snapshot *s);

/* The reader of worker i. Valid while the caller holds a reference. */
static inline sf_reader *sv_snapshot_reader(const sv_snapshot *s, int i)
{
    return s->readers[i];
}

/* Number of snapshots currently open in this process (for tests and
 * metrics: after swaps settle it must come back to 1). */
long sv_snapshot_live(void);

#endif
