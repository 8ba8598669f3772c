/*
 * build.c - the phases of servd-pack build (build.h).
 */
#include "build_int.h"
#include "msg.h"

#include "base.h"
#include "commands.h"
#include "compress.h"
#include "decode.h"
#include "mime.h"
#include "pool.h"
#include "progress.h"
#include "rules.h"
#include "sidecar.h"
#include "walk.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- read + hash ---- */

/* Reads exactly the n bytes fstat promised, then checks that the file ends
 * there: a file that shrank or grew while being read (or one whose size
 * fstat does not know, as in /proc) fails with errno EAGAIN instead of
 * being packed cut short. */
static int read_all(int fd, uint8_t *p, size_t n)
{
    size_t got = 0;
    for (;;) {
        uint8_t extra;
        ssize_t r = got < n ? read(fd, p + got, n - got) : read(fd, &extra, 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if ((r == 0) != (got == n)) {
            errno = EAGAIN; /* shrank (r == 0 early) or grew (a byte past n) */
            return -1;
        }
        if (r == 0)
            return 0;
        got += (size_t)r;
    }
}

static int same_time(const struct timespec *a, const struct timespec *b)
{
    return a->tv_sec == b->tv_sec && a->tv_nsec == b->tv_nsec;
}

/* 1 when the open file fd lies inside root (a realpath), by the path the
 * kernel resolved it through: a directory swapped for a link while the
 * walk was inside it leads the walk out of the root by path names, and
 * no check of names can see that. Without /proc, 1 (not checked). */
static int opened_inside(int fd, const char *root)
{
    char proc[32], real[PATH_MAX];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(proc, real, sizeof real - 1);
    if (n < 0)
        return 1;
    real[n] = '\0';
    size_t rl = strlen(root);
    return strncmp(real, root, rl) == 0 && (real[rl] == '/' || (rl == 1 && root[0] == '/'));
}

/* Opens the file the walk found. The tree can change in between (a deploy
 * step still writing it): what is opened must be that same file, not a
 * link put in its place (which could lead outside the root) nor a FIFO
 * (O_NONBLOCK: the open does not wait for a writer). @return the
 * descriptor, with *st, or -1 with err filled. */
static int open_walked(const pk_file *f, const char *root, struct stat *st, char *err,
                       size_t errlen)
{
    int fd = open(f->src, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
        snprintf(err, errlen, "%s: cannot open: %s", f->src, strerror(errno));
        return -1;
    }
    if (fstat(fd, st) != 0) {
        snprintf(err, errlen, "%s: %s", f->src, strerror(errno));
        goto out_close;
    }
    if (!S_ISREG(st->st_mode)) {
        snprintf(err, errlen, "%s: no longer a regular file", f->src);
        goto out_close;
    }
    if ((uint64_t)st->st_dev != f->dev || (uint64_t)st->st_ino != f->ino) {
        snprintf(err, errlen, "%s: replaced while being packed (no longer the file the walk found)",
                 f->src);
        goto out_close;
    }
    if (!opened_inside(fd, root)) {
        snprintf(err, errlen,
                 "%s: reached outside the root %s (a directory on its path was "
                 "replaced by a link while being packed)",
                 f->src, root);
        goto out_close;
    }
    /* a regular file: reads block as usual (some FUSE file systems honour
     * O_NONBLOCK, and EAGAIN means a changed file to read_all) */
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
        snprintf(err, errlen, "%s: %s", f->src, strerror(errno));
        goto out_close;
    }
    if ((uint64_t)st->st_size > PK_FILE_MAX) {
        snprintf(err, errlen, "%s: larger than the limit of %llu bytes", f->src,
                 (unsigned long long)PK_FILE_MAX);
        goto out_close;
    }
    return fd;
out_close:
    close(fd);
    return -1;
}

/* Reads the whole of fd, opened as st, into a new buffer; it must not be
 * written while it is read, or the pack would hold bytes that never
 * existed together. @return the bytes (st->st_size of them), with *after,
 * or NULL with err filled. */
static uint8_t *read_whole(const pk_file *f, int fd, const struct stat *st, struct stat *after,
                           char *err, size_t errlen)
{
    size_t n = (size_t)st->st_size;
    uint8_t *p = malloc(n ? n : 1);
    if (!p) {
        snprintf(err, errlen, "%s: out of memory (%zu bytes)", f->src, n);
        return NULL;
    }
    int rc = read_all(fd, p, n);
    if (rc == 0 && fstat(fd, after) != 0) {
        rc = -1;
    } else if (rc == 0 && (!same_time(&after->st_mtim, &st->st_mtim) ||
                           !same_time(&after->st_ctim, &st->st_ctim))) {
        errno = EAGAIN; /* written in place, same size */
        rc = -1;
    }
    if (rc != 0) {
        snprintf(err, errlen, "%s: cannot read: %s", f->src,
                 errno == EAGAIN ? "the file changed while being read" : strerror(errno));
        free(p);
        return NULL;
    }
    return p;
}

/* Drops the identity bytes of f once nothing but the write needs them,
 * which then reads the file again (pk__reread): so the compression phase
 * does not hold every file beside all of its variants. Not a file stored
 * as what it contains (an .svgz, an encoded rule's), whose bytes are not
 * the file's. */
static void drop_identity(pk_file *f)
{
    pk_variant *id = &f->var[SF_ENC_IDENTITY];
    if (!id->owned || id->len == 0 || f->encoded)
        return;
    free((void *)id->bytes);
    id->bytes = NULL;
    id->owned = 0;
    f->reread = 1;
}

static void changed_after_read(const pk_file *f, char *err, size_t errlen)
{
    snprintf(err, errlen,
             "%s: changed while the site was being packed (after it was read); pack "
             "the tree once it is complete",
             f->src);
}

/* Whether st, of f's file, shows the size and times f had when it was read. */
static int same_as_read(const pk_file *f, const struct stat *st)
{
    return (uint64_t)st->st_size == f->read_size && same_time(&st->st_mtim, &f->read_mtim) &&
           same_time(&st->st_ctim, &f->read_ctim);
}

/* Whether f, by its path, is still the file that was read: the same file,
 * size and times. @return 0, or -1 with err naming the file. */
static int file_unchanged(const pk_file *f, char *err, size_t errlen)
{
    struct stat st;
    if (stat(f->src, &st) != 0) {
        snprintf(err, errlen, "%s: %s while the site was being packed", f->src,
                 errno == ENOENT ? "removed" : strerror(errno));
        return -1;
    }
    if ((uint64_t)st.st_dev != f->dev || (uint64_t)st.st_ino != f->ino || !same_as_read(f, &st)) {
        changed_after_read(f, err, errlen);
        return -1;
    }
    return 0;
}

/* Reads and hashes a file the walk found, and decides its type (with the
 * thread's libmagic handle, *magic). A file nothing will compress keeps
 * only its digest: the write
 * reads it again (pk__reread), so a site of images or video is never held
 * in memory whole. */
static int read_file(build *b, pk_file *f, pk_magic **magic, char *err, size_t errlen)
{
    struct stat st, after;
    int fd = open_walked(f, b->site.root, &st, err, errlen);
    if (fd < 0)
        return -1;
    uint8_t *p = read_whole(f, fd, &st, &after, err, errlen);
    close(fd);
    if (!p)
        return -1;
    size_t n = (size_t)st.st_size;
    f->read_size = (uint64_t)after.st_size;
    f->read_mtim = after.st_mtim;
    f->read_ctim = after.st_ctim;
    /* Stored as what it contains: a file an encoded rule matches, and an
     * .svgz that is gzip. */
    int enc = 0;
    size_t sfx = 0;
    if (pk_rules_encoded(b->rules, f->key, f->key_len)) {
        if (!(sfx = pk_encoded_suffix(f->key, f->key_len, &enc))) {
            free(p);
            snprintf(err, errlen,
                     "%s: an encoded rule matches it, but its name does not end in .gz, .br or "
                     ".zst (make the rule's glob match only the compressed files)",
                     f->src);
            return -1;
        }
    } else if (pk_svgz_key(f->key, f->key_len) && n >= 2 && p[0] == 0x1f && p[1] == 0x8b) {
        enc = SF_ENC_GZIP;
    }
    if (enc) {
        uint8_t *inner;
        size_t innern;
        char why[128];
        /* what it starts like, for the message: another encoding's magic */
        const char *like = enc != SF_ENC_GZIP && n >= 2 && p[0] == 0x1f && p[1] == 0x8b
                               ? " (it starts like gzip data: name it .gz)"
                           : enc != SF_ENC_ZSTD && n >= 4 && memcmp(p, "\x28\xb5\x2f\xfd", 4) == 0
                               ? " (it starts like zstd data: name it .zst)"
                               : "";
        int rc = pk_decompress(enc, p, n, PK_FILE_MAX, &inner, &innern, why, sizeof why);
        free(p);
        if (rc == PK_DECODE_NOMEM) {
            snprintf(err, errlen, "%s: out of memory decompressing it", f->src);
            return -1;
        }
        if (rc == PK_DECODE_TOO_BIG)
            snprintf(why, sizeof why, "it decompresses to more than the file limit");
        if (rc != 0) {
            if (sfx)
                snprintf(err, errlen,
                         "%s: an encoded rule matches it, so by its name it is %s: %s%s", f->src,
                         enc == SF_ENC_BR ? "brotli" : sf_encoding_name(enc), why, like);
            else
                snprintf(err, errlen, "%s: an .svgz must be a gzip file of an SVG: %s", f->src,
                         why);
            return -1;
        }
        p = inner;
        n = innern;
        f->encoded = 1;
    }
    f->size = n;
    f->mtime = (int64_t)st.st_mtim.tv_sec;
    pk_variant *v = &f->var[SF_ENC_IDENTITY];
    v->bytes = p;
    v->owned = 1;
    v->len = n;
    v->present = 1;
    if (pk_sha256(p, n, v->digest) != 0) {
        snprintf(err, errlen, "%s: SHA-256 failed", f->src);
        return -1;
    }
    char why[512];
    const char *rule_type = pk_rules_mime(b->rules, f->key, f->key_len);
    f->mime = pk_mime_decide(f->key, f->key_len - sfx, rule_type, p, n, magic, why, sizeof why);
    if (!f->mime) {
        snprintf(err, errlen, "%s: %s", f->src, why);
        return -1;
    }
    f->cls = pk_mime_class(f->mime);
    /* of no known type (not a rule's choice): compressed if a sample
     * shrinks (glTF buffers, pdf.js CMaps, Emscripten's .data) */
    if (f->cls == PK_CLASS_NONE && !rule_type && n > PK_KEEP_MIN_BYTES &&
        strcmp(f->mime, "application/octet-stream") == 0 && pk_probe_compressible(p, n))
        f->cls = PK_CLASS_BINARY;
    /* shipped compressed, so worth compressing, whatever its type (a Unity
     * build's game.data.br is application/octet-stream) */
    if (sfx && f->cls == PK_CLASS_NONE)
        f->cls = PK_CLASS_BINARY;
    if (f->cls == PK_CLASS_NONE) /* nothing will compress it */
        drop_identity(f);
    return 0;
}

int pk__reread(const pk_file *f, const char *root, uint8_t **out, char *err, size_t errlen)
{
    /* first by its path, in the words of the final check (pk__tree_unchanged)
     * that a file still in memory would meet; then the file opened */
    if (file_unchanged(f, err, errlen) != 0)
        return -1;
    struct stat st, after;
    int fd = open_walked(f, root, &st, err, errlen);
    if (fd < 0)
        return -1;
    if (!same_as_read(f, &st)) {
        close(fd);
        changed_after_read(f, err, errlen);
        return -1;
    }
    uint8_t *p = read_whole(f, fd, &st, &after, err, errlen);
    close(fd);
    if (!p)
        return -1;
    uint8_t digest[PK_DIGEST_LEN];
    if (pk_sha256(p, f->read_size, digest) != 0) {
        free(p);
        snprintf(err, errlen, "%s: SHA-256 failed", f->src);
        return -1;
    }
    /* the same size and times, other bytes: written with its times put back */
    if (memcmp(digest, f->var[SF_ENC_IDENTITY].digest, PK_DIGEST_LEN) != 0) {
        free(p);
        changed_after_read(f, err, errlen);
        return -1;
    }
    *out = p;
    return 0;
}

/* Whether every file is still what was read: a file written, replaced or
 * removed after its read (a deploy step still writing the tree while the
 * others were compressed) would leave the pack a mix of two states of the
 * tree. Run just before anything is put in place. @return 0, or -1 with
 * err naming the file. */
int pk__tree_unchanged(const pk_site *s, char *err, size_t errlen)
{
    for (size_t i = 0; i < s->n; i++)
        if (file_unchanged(&s->files[i], err, errlen) != 0)
            return -1;
    return 0;
}

/* ---- compress / reuse ---- */

static int reuse(build *b, pk_file *f, char *err, size_t errlen)
{
    const pk_variant *id = &f->var[SF_ENC_IDENTITY];
    const pk_base_entry *be = pk_base_find(b->base, id->digest, f->cls);
    for (unsigned i = 0; be && i < be->nvar; i++) {
        pk_variant *v = &f->var[be->v[i].encoding];
        const char *enc = sf_encoding_name(be->v[i].encoding);
        v->bytes = (const uint8_t *)be->v[i].bytes.ptr;
        v->len = be->v[i].bytes.len;
        v->owned = 0;
        /* Re-hash: a corrupt base must not spread into the new pack. */
        if (pk_sha256(v->bytes, v->len, v->digest) != 0 ||
            memcmp(v->digest, be->v[i].key, PK_DIGEST_LEN) != 0) {
            snprintf(err, errlen,
                     "%s: the %s body of %s is corrupt (SHA-256 mismatch); run servd-pack "
                     "verify on it",
                     b->o->base, enc, f->key);
            return -1;
        }
        /* And decode: an intact body that a damaged record names for the
         * wrong file (another file's gzip) must not be served as this one. */
        int same = pk_decompresses_to(be->v[i].encoding, v->bytes, v->len, id->bytes, id->len);
        if (same != 1) {
            snprintf(err, errlen,
                     same < 0 ? "%s: out of memory checking the %s body of %s"
                              : "%s: the %s body it gives %s does not decompress to that file; "
                                "run servd-pack verify on it",
                     b->o->base, enc, f->key);
            return -1;
        }
        v->present = 1;
    }
    drop_identity(f); /* the variants come from the base */
    return 0;
}

static int compress_one(build *b, pk_file *f, int enc, unsigned thread, char *err, size_t errlen)
{
    const pk_variant *id = &f->var[SF_ENC_IDENTITY];
    uint8_t *out;
    size_t outn;
    char why[256];
    if (pk_compress(b->comp[thread], enc, f->cls, id->bytes, id->len, &out, &outn, why,
                    sizeof why) != 0) {
        snprintf(err, errlen, "%s: %s", f->src, why);
        return -1;
    }
    if (!pk_keep(id->len, outn)) {
        free(out);
        return 0;
    }
    pk_variant *v = &f->var[enc];
    v->bytes = out;
    v->owned = 1;
    v->len = outn;
    if (pk_sha256(out, outn, v->digest) != 0) {
        snprintf(err, errlen, "%s: SHA-256 failed", f->src);
        return -1; /* v->owned: freed with the site */
    }
    v->present = 1;
    return 0;
}

static int run_job(void *arg, size_t j, unsigned thread, char *err, size_t errlen)
{
    build *b = arg;
    const job *jb = &b->jobs[j];
    pk_file *f = &b->site.files[jb->file];
    if (jb->enc == SF_ENC_IDENTITY)
        return read_file(b, f, &b->magic[thread], err, errlen);
    if (jb->enc == JOB_REUSE)
        return reuse(b, f, err, errlen);
    if (compress_one(b, f, jb->enc, thread, err, errlen) != 0)
        return -1;
    /* the last of the file's jobs: the others are done with its bytes */
    if (atomic_fetch_sub_explicit(&b->pending[jb->file], 1, memory_order_acq_rel) == 1)
        drop_identity(f);
    return 0;
}

static uint64_t job_weight(const build *b, const job *jb)
{
    uint64_t size = b->site.files[jb->file].size + 1;
    if (jb->enc == SF_ENC_IDENTITY || jb->enc == JOB_REUSE)
        return size;
    return size * pk_compress_cost(jb->enc);
}

/* Files are taken in blocks of about this much input, largest files first;
 * within a block, the heaviest job first. A file's jobs thus end close
 * together, and its bytes are dropped early (drop_identity), while one
 * encoder still runs over many files in a row (interleaving encoders job
 * by job cost 7-10% more CPU on a site of small files, in two pairs of
 * runs). */
#define JOB_BLOCK_BYTES (8u << 20)

/* qsort has no context argument */
static const uint64_t *sort_weights;
static const size_t *sort_block; /* per job: its file's block */

static int cmp_weight_desc(const void *a, const void *c)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)c;
    if (sort_block[x] != sort_block[y])
        return sort_block[x] > sort_block[y] ? 1 : -1;
    if (sort_weights[x] != sort_weights[y])
        return sort_weights[x] < sort_weights[y] ? 1 : -1;
    return (x > y) - (x < y);
}

static const pk_file *sort_files;

static int cmp_size_desc(const void *a, const void *c)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)c;
    if (sort_files[x].size != sort_files[y].size)
        return sort_files[x].size < sort_files[y].size ? 1 : -1;
    return (x > y) - (x < y);
}

/* block[job]: the block of the job's file (JOB_BLOCK_BYTES). @return 0, or
 * -1 out of memory. */
static int job_blocks(const build *b, size_t *block)
{
    size_t n = b->site.n;
    size_t *files = malloc((n ? n : 1) * sizeof *files),
           *fblock = malloc((n ? n : 1) * sizeof *fblock);
    if (!files || !fblock) {
        free(files);
        free(fblock);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        files[i] = i;
    sort_files = b->site.files;
    qsort(files, n, sizeof *files, cmp_size_desc);
    uint64_t sum = 0;
    for (size_t i = 0; i < n; i++) {
        fblock[files[i]] = (size_t)(sum / JOB_BLOCK_BYTES);
        sum += b->site.files[files[i]].size;
    }
    for (size_t j = 0; j < b->njobs; j++)
        block[j] = fblock[b->jobs[j].file];
    free(files);
    free(fblock);
    return 0;
}

/* Runs b->jobs on the pool, heaviest first. @return 0 or -1 (b->err set). */
static int run_jobs(build *b, const char *phase)
{
    if (b->njobs == 0)
        return 0;
    uint64_t *w = malloc(b->njobs * sizeof *w);
    size_t *order = malloc(b->njobs * sizeof *order);
    size_t *block = malloc(b->njobs * sizeof *block);
    if (!w || !order || !block || job_blocks(b, block) != 0) {
        snprintf(b->err, sizeof b->err, "out of memory scheduling %zu jobs", b->njobs);
        free(w);
        free(order);
        free(block);
        return -1;
    }
    for (size_t i = 0; i < b->njobs; i++) {
        w[i] = job_weight(b, &b->jobs[i]);
        order[i] = i;
    }
    sort_weights = w;
    sort_block = block;
    qsort(order, b->njobs, sizeof *order, cmp_weight_desc);
    free(block);
    pk_progress_phase(&b->prog, phase);
    int rc = pk_pool_run(b->njobs, order, w, b->nthreads, run_job, b, pk_progress_tick, &b->prog,
                         b->err, sizeof b->err);
    pk_progress_clear(&b->prog);
    free(w);
    free(order);
    return rc;
}

/* ---- decide types, caching and headers ---- */

/* mtimes before this (2000-01-02) are taken for ones a build normalised:
 * Nix's 1, zip's 1980-01-01, 2000-01-01; a date every file of a tree
 * shares, whatever its content, so no validator. */
#define PK_DATE_NORMALISED 946771200

static int decide(build *b)
{
    size_t nh = pk_rules_nheaders(b->rules);
    int rc = 0;
    size_t future = 0;
    const pk_file *first_future = NULL;
    pk_buf extras = PK_BUF_INIT;
    for (size_t i = 0; i < b->site.n && rc == 0; i++) {
        pk_file *f = &b->site.files[i];
        const pk_variant *id = &f->var[SF_ENC_IDENTITY];
        f->cache_control = pk_rules_cache_control(b->rules, f->key, f->key_len, f->mime);
        if (nh) {
            f->extra = calloc(nh, sizeof *f->extra);
            if (!f->extra) {
                snprintf(b->err, sizeof b->err, "%s: out of memory", f->src);
                rc = -1;
                break;
            }
            if (pk_rules_headers(b->rules, f->key, f->key_len, f->extra, &f->nextra, b->err,
                                 sizeof b->err) != 0) {
                rc = -1;
                break;
            }
        }
        /* Last-Modified: never later than the pack (servd's Date); with
         * --base, an unchanged file keeps the one it had, and a changed one
         * gets a later one even when its mtime (a file rewritten with its
         * old mtime, a new type from the rules) or SOURCE_DATE_EPOCH did
         * not move, unless the clock has not passed the old one. */
        f->last_modified = b->o->have_epoch ? b->o->epoch : f->mtime > b->now ? b->now : f->mtime;
        /* A date other than the file's own mtime, or an mtime a build
         * normalised, tells no change apart: If-Range must not take it. */
        f->date_weak = b->o->have_epoch || f->mtime > b->now || f->mtime < PK_DATE_NORMALISED;
        int64_t old;
        int old_weak = 0;
        pk_rep r = {.extra = f->extra, .nextra = f->nextra};
        if (pk_render_extras(&extras, &r) != 0) {
            snprintf(b->err, sizeof b->err, "%s: out of memory", f->src);
            rc = -1;
            break;
        }
        int in_base = pk_base_last_modified(b->base, f->key, f->key_len, id->digest, f->mime,
                                            extras.p, extras.len, &old, &old_weak);
        if (in_base == 1 && old <= b->now) {
            /* weak as it was; a base older than format 1.3 marks nothing,
             * so a kept date that is SOURCE_DATE_EPOCH's, or normalised,
             * is weak whatever it says */
            f->last_modified = old;
            f->date_weak =
                old_weak || (b->o->have_epoch && old == b->o->epoch) || old < PK_DATE_NORMALISED;
            continue;
        }
        if (in_base == 0 && f->last_modified <= old && old < b->now) {
            f->last_modified = old + 1;
            f->date_weak = 1;
        }
        if (!b->o->have_epoch && f->mtime > b->now && future++ == 0)
            first_future = f;
    }
    pk_buf_free(&extras);
    if (rc == 0 && future == 1)
        pk_err("warning: %s has a modification time in the future; its Last-Modified is the "
               "time of packing, so two builds of this tree differ (fix the clock or the mtime, "
               "or set SOURCE_DATE_EPOCH)",
               first_future->src);
    else if (rc == 0 && future > 1)
        pk_err("warning: %zu files have a modification time in the future, the first %s; their "
               "Last-Modified is the time of packing, so two builds of this tree differ (fix "
               "the clock or the mtimes, or set SOURCE_DATE_EPOCH)",
               future, first_future->src);
    return rc;
}

/* Gives every variant its ETag, once its bytes, its type and its rule
 * headers are all known: the ETag covers the three (digest.h). */
static int name_variants(build *b)
{
    pk_buf ex = PK_BUF_INIT;
    int rc = 0;
    for (size_t i = 0; i < b->site.n && rc == 0; i++) {
        pk_file *f = &b->site.files[i];
        pk_rep r = {.extra = f->extra, .nextra = f->nextra};
        if (pk_render_extras(&ex, &r) != 0) {
            snprintf(b->err, sizeof b->err, "%s: out of memory", f->src);
            rc = -1;
        }
        for (int e = 0; e < SF_ENC_COUNT && rc == 0; e++) {
            pk_variant *v = &f->var[e];
            if (v->present &&
                pk_etag_rep(v->digest, f->mime, strlen(f->mime), ex.p, ex.len, v->etag) != 0) {
                snprintf(b->err, sizeof b->err, "%s: SHA-256 failed", f->src);
                rc = -1;
            }
        }
    }
    pk_buf_free(&ex);
    return rc;
}

/* Queues the compression (or reuse) work. Files smaller than the keep rule's
 * byte minimum cannot produce a variant worth keeping and are skipped. */
static int plan_compression(build *b, uint64_t *reused)
{
    size_t cap = b->site.n * (SF_ENC_COUNT - 1);
    free(b->jobs);
    b->jobs = malloc((cap ? cap : 1) * sizeof *b->jobs);
    b->njobs = 0;
    if (!b->jobs) {
        snprintf(b->err, sizeof b->err, "out of memory planning compression");
        return -1;
    }
    b->pending = calloc(b->site.n ? b->site.n : 1, sizeof *b->pending);
    if (!b->pending) {
        snprintf(b->err, sizeof b->err, "out of memory planning compression");
        return -1;
    }
    for (size_t i = 0; i < b->site.n; i++) {
        pk_file *f = &b->site.files[i];
        if (f->cls == PK_CLASS_NONE || f->size <= PK_KEEP_MIN_BYTES)
            continue;
        if (pk_base_find(b->base, f->var[SF_ENC_IDENTITY].digest, f->cls)) {
            f->reused = 1;
            (*reused)++;
            b->jobs[b->njobs++] = (job){i, JOB_REUSE}; /* which drops its bytes */
            continue;
        }
        for (int e = SF_ENC_GZIP; e < SF_ENC_COUNT; e++)
            b->jobs[b->njobs++] = (job){i, e};
        atomic_init(&b->pending[i], SF_ENC_COUNT - 1);
    }
    return 0;
}

/* The per-thread helpers, freed as soon as their phase is over: a
 * compressor holds its encoders' working memory (libdeflate's alone is
 * 9 MB at level 12), a libmagic handle about 10 MB, per thread. */
static void free_compressors(build *b)
{
    for (unsigned i = 0; b->comp && i < b->nthreads; i++)
        pk_compressor_free(b->comp[i]);
    free(b->comp);
    b->comp = NULL;
}

static void close_magic(build *b)
{
    for (unsigned i = 0; b->magic && i < b->nthreads; i++)
        pk_magic_close(b->magic[i]);
    free(b->magic);
    b->magic = NULL;
}

static int start_compressors(build *b)
{
    b->comp = calloc(b->nthreads, sizeof *b->comp);
    if (!b->comp)
        goto out_nomem;
    for (unsigned i = 0; i < b->nthreads; i++)
        if (!(b->comp[i] = pk_compressor_new()))
            goto out_nomem;
    return 0;
out_nomem:
    snprintf(b->err, sizeof b->err, "out of memory creating %u compressors", b->nthreads);
    return -1;
}

int pk_build(const pk_build_opts *o)
{
    build b;
    memset(&b, 0, sizeof b);
    b.o = o;
    b.manifest_fd = -1;
    b.lock_fd = -1;
    b.nthreads = o->jobs ? o->jobs : 1;
    pk_progress_init(&b.prog, o->quiet);
    double t0 = pk_monotonic_seconds();
    pk_stats st;
    memset(&st, 0, sizeof st);
    int ok = 0, code = 1;

    if (!o->output[0] || (o->manifest && !o->manifest[0])) {
        pk_err("%s: an empty file name", o->output[0] ? "--manifest" : "-o");
        return PK_EXIT_USAGE;
    }
    /* From here on b.o names the files the outputs lead to. */
    b.opts = *o;
    if (pk__resolve_output(&b, "-o", o->output, b.output, sizeof b.output, NULL) != 0 ||
        (o->manifest && pk__resolve_output(&b, "--manifest", o->manifest, b.manifest,
                                           sizeof b.manifest, &b.manifest_stream) != 0))
        goto out_free;
    /* --manifest may not be -o or --base, whatever the spelling or the links;
     * nor a stream (/dev/stdout) that is one of them (`> site.lmdb`) */
    if (o->manifest) {
        int is_out = b.manifest_stream ? pk__fd_is_file(b.manifest_fd, b.output)
                                       : pk__same_file(b.manifest, b.output);
        int is_base = o->base && (b.manifest_stream ? pk__fd_is_file(b.manifest_fd, o->base)
                                                    : pk__same_file(b.manifest, o->base));
        if (is_out || is_base) {
            pk_err("--manifest %s leads to the same file as %s %s", o->manifest,
                   is_out ? "-o" : "--base", is_out ? o->output : o->base);
            return PK_EXIT_USAGE;
        }
    }
    b.opts.output = b.output;
    b.opts.manifest = o->manifest ? b.manifest : NULL;
    b.o = o = &b.opts;
    pk__catch_signals(o);
    if (o->rules && pk_rules_load(o->rules, &b.rules, b.err, sizeof b.err) != 0)
        goto out_free;
    if (pk_walk(o->root, b.rules, &b.site, b.err, sizeof b.err) != 0)
        goto out_free;
    pk_rules_warn_unused(b.rules);
    if (b.site.n == 0) {
        /* say where the files went, when the walk saw some */
        const pk_site *ws = &b.site;
        if (ws->skipped_dot + ws->skipped_excluded == 0)
            snprintf(b.err, sizeof b.err, "%s: no files to pack", o->root);
        else
            snprintf(b.err, sizeof b.err,
                     "%s: no files to pack (skipped: %llu dotfiles, %llu excluded by rules)",
                     o->root, (unsigned long long)ws->skipped_dot,
                     (unsigned long long)ws->skipped_excluded);
        goto out_free;
    }
    if (pk__check_not_input(&b, "-o", o->output) != 0 ||
        (o->manifest && !b.manifest_stream &&
         pk__check_not_input(&b, "--manifest", o->manifest) != 0)) {
        code = PK_EXIT_USAGE;
        goto out_free;
    }
    if (pk__replaceable(&b, "-o", o->output, 0) != 0 ||
        (o->manifest && !b.manifest_stream &&
         pk__replaceable(&b, "--manifest", o->manifest, 1) != 0))
        goto out_free;
    if (o->manifest && !b.manifest_stream)
        pk__open_commit_lock(&b);
    if (o->base) {
        char profile[PK_PROFILE_SIZE];
        int usable = 0;
        pk_profile(profile);
        if (pk_base_open(o->base, profile, &b.base, &usable, b.err, sizeof b.err) != 0)
            goto out_free;
        if (!usable) {
            if (!o->quiet)
                pk_err("%s: made with another compression profile (%s, now %s); "
                       "compressing everything",
                       o->base, pk_base_profile(b.base), profile);
            /* kept open (with nothing indexed) for pk_base_last_modified */
        }
    }

    /* Read and hash every file, and decide its type. */
    b.jobs = malloc(b.site.n * sizeof *b.jobs);
    b.magic = calloc(b.nthreads, sizeof *b.magic);
    if (!b.jobs || !b.magic) {
        snprintf(b.err, sizeof b.err, "out of memory");
        goto out_free;
    }
    for (size_t i = 0; i < b.site.n; i++)
        b.jobs[i] = (job){i, SF_ENC_IDENTITY};
    b.njobs = b.site.n;
    if (run_jobs(&b, "reading") != 0)
        goto out_free;
    pk_sidecars_note(&b.site);
    pk_rules_warn_unused_encoded(b.rules);
    close_magic(&b);
    /* The time of packing is taken after the reads: a file written during
     * a long read phase is not "in the future" (nor clamped). */
    b.now = (int64_t)time(NULL);
    if (decide(&b) != 0 || pk__check_identity_space(&b) != 0)
        goto out_free;

    if (plan_compression(&b, &st.reused) != 0 || start_compressors(&b) != 0 ||
        run_jobs(&b, "compressing") != 0 || name_variants(&b) != 0)
        goto out_free;
    free_compressors(&b);
    if (pk__write_pack(&b, &st) != 0)
        goto out_free;
    ok = 1;
    st.skipped_dot = b.site.skipped_dot;
    st.sidecars = b.site.sidecars;
    for (size_t i = 0; i < b.site.n; i++)
        st.decoded += (uint64_t)b.site.files[i].encoded;
    st.sidecar_names = (const char *const *)b.site.sidecar_names;
    st.nsidecar_names = b.site.nsidecar_names;
    st.skipped_excluded = b.site.skipped_excluded;
    st.seconds = pk_monotonic_seconds() - t0;
    if (!o->quiet)
        pk_summary_print(stderr, &st, o->output);

out_free:
    pk_progress_clear(&b.prog);
    if (!ok)
        pk_err("%s", b.err[0] ? b.err : "build failed");
    pk__end_turn(&b);
    free_compressors(&b);
    close_magic(&b);
    free(b.pending);
    free(b.jobs);
    pk_site_free(&b.site); /* before the base: it may point into it */
    pk_base_close(b.base);
    pk_rules_free(b.rules);
    return ok ? 0 : code;
}
