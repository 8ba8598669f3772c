/*
 * build_int.h - what the files of servd-pack build share (build.c runs the
 * phases, read.c reads the web root, jobs.c runs the reads and the
 * compression on the pool, write.c writes the pack and puts it in place,
 * outputs.c checks where -o and --manifest lead). Not used outside them.
 */
#ifndef PK_BUILD_INT_H
#define PK_BUILD_INT_H

#include "base.h"
#include "budget.h"
#include "build.h"
#include "compress.h"
#include "mime.h"
#include "progress.h"
#include "rules.h"
#include "spill.h"
#include "walk.h"

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>

/* Room for a message naming a file and a cause. */
#define PK_ERR_LEN 2048

/* One unit of parallel work: read and hash a file (and take its variants
 * from --base when it has them there), or compress it into one encoding. */
typedef struct job {
    size_t file;
    int enc; /* SF_ENC_IDENTITY: read + hash */
} job;

typedef struct build {
    const pk_build_opts *o;
    pk_rules *rules;
    pk_site site;
    pk_base *base;
    pk_compressor **comp;
    pk_spill *spill;         /* the compressed variants, from their compression to the write */
    atomic_int spill_failed; /* a write into it failed */
    pk_magic **magic;        /* one libmagic handle per thread, opened on first use */
    atomic_uint *pending;    /* per file: its compression jobs not yet done */
    /* The read phase drops a compressible file's bytes; its first
     * compression job reads the file again (jobs.c, load_identity) while
     * the others wait on load_cv: so only the files being compressed are
     * held, never the whole site. */
    unsigned char *load; /* per file: enum load_state, under load_mu */
    pthread_mutex_t load_mu;
    pthread_cond_t load_cv;
    char load_err[PK_ERR_LEN]; /* why the first failed read of them failed */
    pk_budget budget;          /* the memory the compression jobs may hold (--memory) */
    unsigned nthreads;
    unsigned comp_threads; /* the threads that compress: nthreads, fewer under --memory */
    job *jobs;
    size_t njobs;
    int64_t now;
    pk_progress prog;
    char err[PK_ERR_LEN];
    pk_build_opts opts;      /* the caller's, with the output names resolved */
    char output[PATH_MAX];   /* the file -o leads to */
    char manifest[PATH_MAX]; /* the file --manifest leads to */
    int manifest_stream;     /* --manifest is not a regular file: written straight into */
    int manifest_fd;         /* ... through this descriptor (/dev/stdout), or -1 */
    int lock_fd;             /* the lock builds into -o's directory take turns with, or -1 */
    char lock_name[PATH_MAX];
} build;

/* ---- read.c ---- */

/* Reads and hashes a file the walk found and decides its type, with the
 * thread's libmagic handle (*magic, opened on first use): the job of the
 * reading phase (jobs.c). @return 0, or -1 with err naming the file. */
int pk__read_file(build *b, pk_file *f, pk_magic **magic, char *err, size_t errlen);

/* Drops the identity bytes of f until its compression or the write, which
 * then read the file again (pk__reread); not those of a file stored as
 * what it contains. */
void pk__drop_identity(pk_file *f);

/* Whether every file is still what was read (a file written, replaced or
 * removed since would make the pack a mix of two states of the tree).
 * @return 0, or -1 with err naming the file. */
int pk__tree_unchanged(const pk_site *s, char *err, size_t errlen);

/* Reads a file whose identity bytes were dropped (reread) again, into out
 * (f->read_size bytes: the room the writer reserved for its body), for the
 * write: it must still be the file that was read, the same size, times and
 * SHA-256 (else "changed while the site was being packed", and what out
 * holds must not be committed). @return 0, or -1 with err. */
int pk__reread(const pk_file *f, const char *root, uint8_t *out, char *err, size_t errlen);

/* ---- jobs.c ---- */

/* Queues the compression of every file worth it in b->jobs, counting those
 * whose variants came from --base in st->reused. A file with the same bytes
 * and class as an earlier one is not queued: it shares that file's variants
 * (pk__share_twins), counted in st->twins. @return 0, or -1 with b->err. */
int pk__plan_compression(build *b, pk_stats *st);

/* After the compression: gives each file planned as a twin the variants
 * of the file it is the twin of. */
void pk__share_twins(build *b);

/* Runs b->jobs (reads or compressions, phase names them on the progress
 * line) on nthreads threads of the pool, heaviest first. A compression job
 * takes the memory it will hold from b->budget first. @return 0, or -1 with
 * b->err. */
int pk__run_jobs(build *b, const char *phase, unsigned nthreads);

/* ---- write.c ---- */

/* From the start of a build: SIGINT, SIGTERM and SIGHUP remove the
 * temporary files and say what they left at -o. */
void pk__catch_signals(const pk_build_opts *o);

/* Opens the lock file that builds into -o's directory take turns with for
 * their renames (warns, and goes on without one, when it cannot). */
void pk__open_commit_lock(build *b);

/* Releases the turn, if taken, and closes the lock file. */
void pk__end_turn(build *b);

/* Before compressing: -1 (b->err set) when the identity bodies alone do not
 * fit on the output's file system, else 0. */
int pk__check_identity_space(build *b);

/* Writes every record and body into a temporary pack and puts it and the
 * manifest in place (the manifest first, in a turn with other builds).
 * @return 0, or -1 with b->err (no temporary file left behind). */
int pk__write_pack(build *b, pk_stats *st);

/* The directory path is (or will be) in, into d. */
void pk__dir_of(const char *path, char *d, size_t cap);

/* Appends the free space of the output's file system to b->err after a
 * write failed for want of room: an I/O error from storing (io_error: LMDB
 * reports a short write as EIO), or a message that names no space, a quota,
 * an I/O error or a file too large. Any other cause (a rename refused, a
 * read-only file) gets no hint: it would point the user the wrong way.
 * capacity bounds the size of the file written: a file size limit above it
 * is no cause. removed names that file ("the partial pack"), which the
 * failed build removes. For a build that has failed: the spill file is
 * closed first, so that the free space counts its room. */
void pk__note_space(build *b, int io_error, uint64_t capacity, const char *removed);

/* ---- outputs.c ---- */

/* Resolves the name given to -o or --manifest (opt) into the file it leads
 * to (out), refusing what servd-pack must not replace; *stream is set for a
 * manifest written into a pipe, terminal or device. @return 0, or -1 with
 * b->err. */
int pk__resolve_output(build *b, const char *opt, const char *path, char *out, size_t cap,
                       int *stream);

/* Whether a and b are one file: the same inode, or the same name when one
 * does not exist yet. */
int pk__same_file(const char *a, const char *b);

/* Whether descriptor fd is open on the file at path (a --manifest stream
 * such as /dev/stdout redirected to -o). */
int pk__fd_is_file(int fd, const char *path);

/* -1 with b->err when path is one of the inputs (a file of the site or the
 * rules), else 0. */
int pk__check_not_input(build *b, const char *opt, const char *path);

/* The same for a --manifest written into a descriptor (/dev/stdout): a
 * regular file there, which the shell made before the walk (> www/m.json),
 * must not be a file of the site. */
int pk__check_stream_not_input(build *b, const char *path);

/* -1 with b->err when the existing file at path is not one servd-pack may
 * replace: empty, a pack, or (manifest set) a manifest. Else 0. */
int pk__replaceable(build *b, const char *opt, const char *path, int manifest);

#endif
