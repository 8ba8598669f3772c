/*
 * build.c - the phases of servd-pack build (build.h).
 */
#include "build.h"
#include "msg.h"

#include "base.h"
#include "commands.h"
#include "compress.h"
#include "decode.h"
#include "manifest.h"
#include "mime.h"
#include "pool.h"
#include "progress.h"
#include "rules.h"
#include "sidecar.h"
#include "walk.h"
#include "sf/httpdate.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

/* Room for a message naming a file and a cause. */
#define PK_ERR_LEN 2048

/* LMDB's page layout, for sizing the map from what will really be stored:
 * a value whose node (header + key + value) exceeds LMDB_NODE_MAX goes to
 * overflow pages of its own, rounded up to whole pages; smaller ones share
 * leaf pages, which splits leave at worst half full. The constants are
 * liblmdb's (mdb.c: PAGEHDRSZ, NODESIZE, me_nodemax for 4 KiB pages). */
#define LMDB_PAGE      4096u
#define LMDB_PAGE_HDR  16u
#define LMDB_NODE_HDR  8u
#define LMDB_NODE_MAX  2038u
#define LMDB_INDEX_LEN 2u

/* Slack added to the map capacity for LMDB's own pages (meta, branch pages
 * and the three database roots) on top of what the records and bodies need. */
#define MAP_SLACK (1u << 20)

/* Paths written between two redraws of the progress bar while writing. */
#define WRITE_TICK_EVERY 256

typedef struct job {
    size_t file;
    int enc; /* SF_ENC_IDENTITY: read + hash; -1: reuse from base */
} job;

#define JOB_REUSE (-1)

typedef struct build {
    const pk_build_opts *o;
    pk_rules *rules;
    pk_site site;
    pk_base *base;
    pk_compressor **comp;
    unsigned nthreads;
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

/* Reads the file the walk found. The tree can change in between (a deploy
 * step still writing it): what is opened must be that same file, not a
 * link put in its place (which could lead outside the root) nor a FIFO
 * (O_NONBLOCK: the open does not wait for a writer), and it must not be
 * written while it is read, or the pack would hold bytes that never
 * existed together. */
static int read_file(pk_file *f, const char *root, char *err, size_t errlen)
{
    int fd = open(f->src, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
        snprintf(err, errlen, "%s: cannot open: %s", f->src, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        snprintf(err, errlen, "%s: %s", f->src, strerror(errno));
        goto out_close;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s: no longer a regular file", f->src);
        goto out_close;
    }
    if ((uint64_t)st.st_dev != f->dev || (uint64_t)st.st_ino != f->ino) {
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
    if ((uint64_t)st.st_size > PK_FILE_MAX) {
        snprintf(err, errlen, "%s: larger than the limit of %llu bytes", f->src,
                 (unsigned long long)PK_FILE_MAX);
        goto out_close;
    }
    size_t n = (size_t)st.st_size;
    uint8_t *p = malloc(n ? n : 1);
    if (!p) {
        snprintf(err, errlen, "%s: out of memory (%zu bytes)", f->src, n);
        goto out_close;
    }
    int rc = read_all(fd, p, n);
    struct stat after;
    if (rc == 0 && fstat(fd, &after) != 0) {
        rc = -1;
    } else if (rc == 0 && (!same_time(&after.st_mtim, &st.st_mtim) ||
                           !same_time(&after.st_ctim, &st.st_ctim))) {
        errno = EAGAIN; /* written in place, same size */
        rc = -1;
    }
    if (rc != 0) {
        snprintf(err, errlen, "%s: cannot read: %s", f->src,
                 errno == EAGAIN ? "the file changed while being read" : strerror(errno));
        free(p);
        goto out_close;
    }
    close(fd);
    f->read_size = (uint64_t)after.st_size;
    f->read_mtim = after.st_mtim;
    f->read_ctim = after.st_ctim;
    if (pk_svgz_key(f->key, f->key_len) && n >= 2 && p[0] == 0x1f && p[1] == 0x8b) {
        uint8_t *svg;
        size_t svgn;
        char why[128];
        rc = pk_decompress(SF_ENC_GZIP, p, n, PK_FILE_MAX, &svg, &svgn, why, sizeof why);
        free(p);
        if (rc != 0) {
            snprintf(err, errlen, "%s: an .svgz must be a gzip file of an SVG: %s", f->src,
                     rc == PK_DECODE_TOO_BIG ? "it decompresses to more than the file limit" : why);
            return -1;
        }
        p = svg;
        n = svgn;
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
    return 0;
out_close:
    close(fd);
    return -1;
}

/* Whether every file is still what was read: a file written, replaced or
 * removed after its read (a deploy step still writing the tree while the
 * others were compressed) would leave the pack a mix of two states of the
 * tree. Run just before anything is put in place. @return 0, or -1 with
 * err naming the file. */
static int tree_unchanged(const pk_site *s, char *err, size_t errlen)
{
    for (size_t i = 0; i < s->n; i++) {
        const pk_file *f = &s->files[i];
        struct stat st;
        if (stat(f->src, &st) != 0) {
            snprintf(err, errlen, "%s: %s while the site was being packed", f->src,
                     errno == ENOENT ? "removed" : strerror(errno));
            return -1;
        }
        if ((uint64_t)st.st_dev != f->dev || (uint64_t)st.st_ino != f->ino ||
            (uint64_t)st.st_size != f->read_size || !same_time(&st.st_mtim, &f->read_mtim) ||
            !same_time(&st.st_ctim, &f->read_ctim)) {
            snprintf(err, errlen,
                     "%s: changed while the site was being packed (after it was read); pack "
                     "the tree once it is complete",
                     f->src);
            return -1;
        }
    }
    return 0;
}

/* ---- compress / reuse ---- */

static int reuse(build *b, pk_file *f, char *err, size_t errlen)
{
    const pk_base_entry *be = pk_base_find(b->base, f->var[SF_ENC_IDENTITY].digest, f->cls);
    for (unsigned i = 0; be && i < be->nvar; i++) {
        pk_variant *v = &f->var[be->v[i].encoding];
        v->bytes = (const uint8_t *)be->v[i].bytes.ptr;
        v->len = be->v[i].bytes.len;
        v->owned = 0;
        /* Re-hash: a corrupt base must not spread into the new pack. */
        if (pk_sha256(v->bytes, v->len, v->digest) != 0 ||
            memcmp(v->digest, be->v[i].key, PK_DIGEST_LEN) != 0) {
            snprintf(err, errlen,
                     "%s: the %s body of %s is corrupt (SHA-256 mismatch); run servd-pack "
                     "verify on it",
                     b->o->base, sf_encoding_name(be->v[i].encoding), f->key);
            return -1;
        }
        v->present = 1;
    }
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
        return read_file(f, b->site.root, err, errlen);
    if (jb->enc == JOB_REUSE)
        return reuse(b, f, err, errlen);
    return compress_one(b, f, jb->enc, thread, err, errlen);
}

static uint64_t job_weight(const build *b, const job *jb)
{
    uint64_t size = b->site.files[jb->file].size + 1;
    if (jb->enc == SF_ENC_IDENTITY || jb->enc == JOB_REUSE)
        return size;
    return size * pk_compress_cost(jb->enc);
}

static const uint64_t *sort_weights; /* qsort has no context argument */

static int cmp_weight_desc(const void *a, const void *c)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)c;
    if (sort_weights[x] != sort_weights[y])
        return sort_weights[x] < sort_weights[y] ? 1 : -1;
    return (x > y) - (x < y);
}

/* Runs b->jobs on the pool, heaviest first. @return 0 or -1 (b->err set). */
static int run_jobs(build *b, const char *phase)
{
    if (b->njobs == 0)
        return 0;
    uint64_t *w = malloc(b->njobs * sizeof *w);
    size_t *order = malloc(b->njobs * sizeof *order);
    if (!w || !order) {
        snprintf(b->err, sizeof b->err, "out of memory scheduling %zu jobs", b->njobs);
        free(w);
        free(order);
        return -1;
    }
    for (size_t i = 0; i < b->njobs; i++) {
        w[i] = job_weight(b, &b->jobs[i]);
        order[i] = i;
    }
    sort_weights = w;
    qsort(order, b->njobs, sizeof *order, cmp_weight_desc);
    pk_progress_phase(&b->prog, phase);
    int rc = pk_pool_run(b->njobs, order, w, b->nthreads, run_job, b, pk_progress_tick, &b->prog,
                         b->err, sizeof b->err);
    pk_progress_clear(&b->prog);
    free(w);
    free(order);
    return rc;
}

/* ---- decide types, caching and headers ---- */

static int decide(build *b)
{
    pk_magic *magic = NULL;
    size_t nh = pk_rules_nheaders(b->rules);
    int rc = 0;
    size_t future = 0;
    const pk_file *first_future = NULL;
    pk_buf extras = PK_BUF_INIT;
    for (size_t i = 0; i < b->site.n && rc == 0; i++) {
        pk_file *f = &b->site.files[i];
        const pk_variant *id = &f->var[SF_ENC_IDENTITY];
        char why[512];
        f->mime = pk_mime_decide(f->key, f->key_len, pk_rules_mime(b->rules, f->key, f->key_len),
                                 id->bytes, id->len, &magic, why, sizeof why);
        if (!f->mime) {
            snprintf(b->err, sizeof b->err, "%s: %s", f->src, why);
            rc = -1;
            break;
        }
        f->cls = pk_mime_class(f->mime);
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
        int64_t old;
        pk_rep r = {.extra = f->extra, .nextra = f->nextra};
        if (pk_render_extras(&extras, &r) != 0) {
            snprintf(b->err, sizeof b->err, "%s: out of memory", f->src);
            rc = -1;
            break;
        }
        int in_base = pk_base_last_modified(b->base, f->key, f->key_len, id->digest, f->mime,
                                            extras.p, extras.len, &old);
        if (in_base == 1 && old <= b->now) {
            f->last_modified = old;
            continue;
        }
        if (in_base == 0 && f->last_modified <= old && old < b->now)
            f->last_modified = old + 1;
        if (!b->o->have_epoch && f->mtime > b->now && future++ == 0)
            first_future = f;
    }
    pk_magic_close(magic);
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
    for (size_t i = 0; i < b->site.n; i++) {
        pk_file *f = &b->site.files[i];
        if (f->cls == PK_CLASS_NONE || f->size <= PK_KEEP_MIN_BYTES)
            continue;
        if (pk_base_find(b->base, f->var[SF_ENC_IDENTITY].digest, f->cls)) {
            f->reused = 1;
            (*reused)++;
            b->jobs[b->njobs++] = (job){i, JOB_REUSE};
            continue;
        }
        for (int e = SF_ENC_GZIP; e < SF_ENC_COUNT; e++)
            b->jobs[b->njobs++] = (job){i, e};
    }
    return 0;
}

/* ---- write ---- */

/* Temporary names removed if a signal ends the process mid-write, and the
 * line that says what the signal left (written before and after the pack
 * is in place: all prepared beforehand, as a handler may only write). */
static char sig_tmp_pack[PATH_MAX], sig_tmp_manifest[PATH_MAX];
static char sig_msg[2][PATH_MAX + 64];
static volatile sig_atomic_t sig_in_place;

static void on_signal(int sig)
{
    if (sig_tmp_pack[0])
        unlink(sig_tmp_pack);
    if (sig_tmp_manifest[0])
        unlink(sig_tmp_manifest);
    pk_manifest_rollback(); /* a no-op unless the manifest was renamed */
    const char *m = sig_msg[sig_in_place ? 1 : 0];
    if (m[0] && write(STDERR_FILENO, m, strlen(m)) < 0) {
        /* nothing left to tell */
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

/* The signals that end a build: each blocks the others while it is handled,
 * so one cleanup runs once. */
static void stop_signals(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGHUP);
}

/* From the start of a build: a stop signal says what it left (nothing
 * changed at -o before the pack is in place). */
static void catch_signals(const pk_build_opts *o)
{
    snprintf(sig_msg[0], sizeof sig_msg[0], "servd-pack: interrupted; %s was not changed\n",
             o->output);
    snprintf(sig_msg[1], sizeof sig_msg[1], "servd-pack: interrupted; %s is the new pack\n",
             o->output);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    stop_signals(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

/* Before writing: the temporary names the handler removes (a manifest
 * streamed into a pipe or device has none). Each is made aside and copied
 * in with the stop signals blocked: a name half written is its final
 * path, ".tmp-<pid>" not yet appended, and the handler would remove the
 * pack or manifest in place. */
static void note_tmp_names(const build *b)
{
    const pk_build_opts *o = b->o;
    char pack[PATH_MAX] = "", manifest[PATH_MAX] = "";
    if (sf_tmp_name(o->output, pack, sizeof pack) != SF_OK) /* what sf_writer_open uses */
        pack[0] = '\0'; /* too long: sf_writer_open refuses it */
    if (o->manifest && !b->manifest_stream)
        pk_manifest_tmp_name(o->manifest, manifest, sizeof manifest);
    sigset_t stops, old;
    stop_signals(&stops);
    sigprocmask(SIG_BLOCK, &stops, &old);
    memcpy(sig_tmp_pack, pack, sizeof pack);
    memcpy(sig_tmp_manifest, manifest, sizeof manifest);
    sigprocmask(SIG_SETMASK, &old, NULL);
}

/* Two builds to the same pack, each with a manifest file, must not
 * interleave their renames: one's manifest would be left beside the
 * other's pack, and both would say they succeeded. Builds into one
 * directory take turns through a lock file there, ".servd-pack-lock":
 * hidden, so a walk of a root that holds the output never packs it, one
 * per directory however many releases it holds, and named for servd-pack
 * alone, so that no deploy script serialising itself with flock(1) holds
 * it while it waits for the build it started (a lock on the directory
 * itself did that: the build waited for its own script). The file stays:
 * removing a lock file races with the next build opening it.
 *
 * Made before the compression; the turn is held only while the files go
 * into place: the manifest's rename, then the pack's rename and directory
 * sync (sf_writer_commit). Both files are written and synced before it.
 * A build without a manifest takes no turn: it leaves any manifest there
 * stale whenever it lands, and landing between another build's two
 * renames only lets that build's pair win. A lock
 * that cannot be had (a link or a FIFO put there, a file system without
 * locks) is warned about, and the build goes on without a turn, as builds
 * did before there were turns. */
static void lock_warn(build *b, const char *why)
{
    pk_err("warning: %s: cannot take a turn with other builds into this directory (%s); going "
           "on without one",
           b->lock_name, why);
    if (b->lock_fd >= 0)
        close(b->lock_fd);
    b->lock_fd = -1;
}

static void open_commit_lock(build *b)
{
    const char *out = b->o->output;
    const char *slash = strrchr(out, '/');
    int dirlen = slash ? (int)(slash - out + 1) : 0;
    int n = snprintf(b->lock_name, sizeof b->lock_name, "%.*s.servd-pack-lock", dirlen, out);
    if (n < 0 || (size_t)n >= sizeof b->lock_name) {
        snprintf(b->lock_name, sizeof b->lock_name, "the lock file beside %s", out);
        lock_warn(b, "its name is too long");
        return;
    }
    /* O_NOFOLLOW: a link put there would make a file elsewhere; O_NONBLOCK:
     * a FIFO put there would hang the open. Read-write where possible (NFS
     * emulates flock with write locks); read-only is enough elsewhere. A
     * file of another user in a sticky directory refuses O_CREAT
     * (fs.protected_regular) even when it exists: then open it as it is. */
    int fl = O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY;
    static const int modes[][2] = {
        {O_RDWR, O_CREAT}, {O_RDONLY, O_CREAT}, {O_RDWR, 0}, {O_RDONLY, 0}};
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        b->lock_fd = open(b->lock_name, modes[i][0] | modes[i][1] | fl, 0644);
        if (b->lock_fd >= 0 || errno != EACCES)
            break;
    }
    struct stat st;
    if (b->lock_fd < 0 || fstat(b->lock_fd, &st) != 0) {
        lock_warn(b, errno == ELOOP ? "a symbolic link" : strerror(errno));
        return;
    }
    if (!S_ISREG(st.st_mode)) {
        lock_warn(b, "not a regular file");
        return;
    }
    /* every builder may open it, whatever the umask of the first */
    if (st.st_uid == geteuid() && (st.st_mode & 0444) != 0444)
        fchmod(b->lock_fd, (st.st_mode & 07777) | 0444);
}

/* Whether the locked descriptor is still the file at the lock's name: one
 * removed or replaced while this build waited is a lock no later build
 * takes. */
static int lock_is_current(build *b)
{
    struct stat a, n;
    return fstat(b->lock_fd, &a) == 0 && lstat(b->lock_name, &n) == 0 && a.st_dev == n.st_dev &&
           a.st_ino == n.st_ino;
}

/* Waits until no other build is putting its pack and manifest in place
 * (stop signals still end the wait). */
static void take_turn(build *b)
{
    int said = 0;
    for (int tries = 0; b->lock_fd >= 0; tries++) {
        int rc = flock(b->lock_fd, LOCK_EX | LOCK_NB);
        if (rc != 0 && errno == EWOULDBLOCK) {
            if (!b->o->quiet && !said++)
                pk_err("waiting for another build to put its pack in place (%s)", b->lock_name);
            while ((rc = flock(b->lock_fd, LOCK_EX)) != 0 && errno == EINTR)
                ;
        }
        if (rc != 0) {
            lock_warn(b, strerror(errno));
            return;
        }
        if (lock_is_current(b))
            return;
        if (tries == 8) {
            lock_warn(b, "it keeps being replaced");
            return;
        }
        close(b->lock_fd); /* the file at that name now is the one to lock */
        b->lock_fd = -1;
        open_commit_lock(b);
    }
}

/* The files are in place (or not, for good): the next build's turn. */
static void end_turn(build *b)
{
    if (b->lock_fd >= 0)
        close(b->lock_fd);
    b->lock_fd = -1;
}

typedef struct body_ref {
    uint8_t key[PK_DIGEST_LEN];
    uint64_t len;
} body_ref;

static int cmp_body(const void *a, const void *c)
{
    return memcmp(a, c, PK_DIGEST_LEN);
}

/* Encodes the entry of f (kind 200) or, with for_404, the status:404 entry,
 * into a malloc'd *rec. @return 0, or -1 with "FILE: cause" in err. */
static int encode_entry(const pk_file *f, int for_404, uint8_t **rec, size_t *reclen, char *err,
                        size_t errlen)
{
    char date[SF_HTTP_DATE_LEN + 1];
    if (sf_http_date_format(f->last_modified, date) != 0) {
        snprintf(err, errlen,
                 "%s: cannot encode its record: Last-Modified %lld is not a date "
                 "HTTP can express",
                 f->src, (long long)f->last_modified);
        return -1;
    }
    pk_buf h200[SF_ENC_COUNT] = {PK_BUF_INIT, PK_BUF_INIT, PK_BUF_INIT, PK_BUF_INIT};
    pk_buf h304[SF_ENC_COUNT] = {PK_BUF_INIT, PK_BUF_INIT, PK_BUF_INIT, PK_BUF_INIT};
    unsigned nv = pk_file_nvariants(f);
    pk_rep r = {.mime = f->mime,
                .cache_control = f->cache_control,
                .last_modified = f->last_modified,
                .negotiable = nv > 1,
                .extra = f->extra,
                .nextra = f->nextra};
    sf_entry_spec spec = {.kind = SF_KIND_FILE,
                          .flags = nv > 1 ? SF_ENTRY_NEGOTIABLE : 0,
                          .last_modified = f->last_modified,
                          .mime = {f->mime, strlen(f->mime)}};
    int rc = 0;
    for (int e = 0; e < SF_ENC_COUNT && rc == 0; e++) {
        const pk_variant *v = &f->var[e];
        if (!v->present)
            continue;
        sf_variant_spec *vs = &spec.variants[spec.nvariants];
        vs->encoding = e;
        vs->body_len = v->len;
        memcpy(vs->body_key, v->digest, SF_KEY_LEN);
        if (for_404) {
            rc = pk_render_404(&h200[e], &vs->rep_off, &r, e, v->len);
        } else {
            rc = pk_render_200(&h200[e], &vs->rep_off, &r, e, v->len, v->etag);
            if (rc == 0)
                rc = pk_render_304(&h304[e], &r, v->etag);
            vs->etag = (sf_view){v->etag, strlen(v->etag)};
            vs->h304 = (sf_view){h304[e].p, h304[e].len};
        }
        vs->h200 = (sf_view){h200[e].p, h200[e].len};
        spec.nvariants++;
    }
    if (rc != 0)
        snprintf(err, errlen, "%s: cannot encode its record: out of memory", f->src);
    else if ((rc = sf_entry_encode(&spec, rec, reclen)) != 0)
        snprintf(err, errlen, "%s: cannot encode its record: %s", f->src, sf_strerror(rc));
    for (int e = 0; e < SF_ENC_COUNT; e++) {
        pk_buf_free(&h200[e]);
        pk_buf_free(&h304[e]);
    }
    return rc == 0 ? 0 : -1;
}

/* Bytes of map one key/value pair can take (see LMDB_PAGE). */
static uint64_t lmdb_cost(size_t klen, uint64_t vlen)
{
    uint64_t node = LMDB_NODE_HDR + klen + vlen;
    if (node <= LMDB_NODE_MAX)
        return 2 * (node + LMDB_INDEX_LEN); /* in a leaf page at least half full */
    uint64_t pages = (LMDB_PAGE_HDR + vlen + LMDB_PAGE - 1) / LMDB_PAGE;
    return pages * LMDB_PAGE + 2 * (LMDB_NODE_HDR + klen + sizeof(uint64_t) + LMDB_INDEX_LEN);
}

/* The map capacity the pack needs: every body and every encoded record as
 * LMDB will lay it out (records are encoded once here to learn their real
 * length: header values such as a long Cache-Control repeat in every block).
 * @return 0, or -1 with b->err set. */
static int map_capacity(build *b, uint64_t *capacity, size_t *nrefs, uint64_t *record_bytes)
{
    const pk_site *s = &b->site;
    uint64_t cap = MAP_SLACK, records = 0;
    size_t refs = 0;
    for (size_t i = 0; i < s->n; i++) {
        const pk_file *f = &s->files[i];
        for (int e = 0; e < SF_ENC_COUNT; e++)
            if (f->var[e].present) {
                cap += lmdb_cost(SF_KEY_LEN, f->var[e].len);
                refs++;
            }
        for (int for_404 = 0; for_404 <= (strcmp(f->key, PK_404_KEY) == 0); for_404++) {
            uint8_t *rec;
            size_t reclen;
            if (encode_entry(f, for_404, &rec, &reclen, b->err, sizeof b->err) != 0)
                return -1;
            free(rec);
            cap += lmdb_cost(for_404 ? strlen(PK_404_SPECIAL) : f->key_len, reclen);
            records += reclen;
        }
    }
    *capacity = cap;
    *nrefs = refs;
    *record_bytes = records;
    return 0;
}

/* The directory a file is (or will be) in, into d. */
static void dir_of(const char *path, char *d, size_t cap)
{
    snprintf(d, cap, "%s", path);
    char *slash = strrchr(d, '/');
    if (!slash)
        snprintf(d, cap, ".");
    else if (slash == d)
        d[1] = '\0';
    else
        *slash = '\0';
}

/* Bytes free for us on the file system of the output's directory, or -1. */
static int64_t free_bytes(const char *output)
{
    char d[PATH_MAX];
    struct statvfs sv;
    dir_of(output, d, sizeof d);
    if (statvfs(d, &sv) != 0)
        return -1;
    return (int64_t)((uint64_t)sv.f_bavail * sv.f_frsize);
}

/* Refuses to start writing when the output's file system clearly cannot hold
 * need bytes (the bodies and records alone, before LMDB's page overhead):
 * better a message now than "Input/output error" halfway through. */
static int check_space(build *b, uint64_t need)
{
    int64_t have = free_bytes(b->o->output);
    if (have < 0 || need <= (uint64_t)have)
        return 0;
    char d[PATH_MAX], hn[32], hh[32];
    dir_of(b->o->output, d, sizeof d);
    pk_human_bytes(need, hn, sizeof hn);
    pk_human_bytes((uint64_t)have, hh, sizeof hh);
    if (strcmp(hn, hh) == 0) { /* rounded alike: "need 0.2 MiB, have 0.2 MiB" says nothing */
        snprintf(hn, sizeof hn, "%llu bytes", (unsigned long long)need);
        snprintf(hh, sizeof hh, "%llu bytes", (unsigned long long)have);
    }
    snprintf(b->err, sizeof b->err, "%s: not enough space in %.1024s: need about %s, have %s",
             b->o->output, d, hn, hh);
    return -1;
}

/* Appends the free space of the output's file system to b->err after a
 * write failed for want of room: an I/O error from storing (io_error: LMDB
 * reports a short write as EIO), or a commit message that names no space,
 * a quota or an I/O error. Any other cause (a rename refused, a read-only
 * file) gets no hint: it would point the user the wrong way. */
static void note_space(build *b, int io_error)
{
    static const int space_errors[] = {ENOSPC, EDQUOT, EIO, EFBIG};
    int related = io_error;
    for (size_t i = 0; i < sizeof space_errors / sizeof space_errors[0]; i++)
        related |= strstr(b->err, strerror(space_errors[i])) != NULL;
    int64_t have = free_bytes(b->o->output);
    size_t n = strlen(b->err);
    char h[32];
    pk_human_bytes(have >= 0 ? (uint64_t)have : 0, h, sizeof h);
    if (related && have >= 0 && n < sizeof b->err)
        snprintf(b->err + n, sizeof b->err - n,
                 " (disk full? %s free on the output's file system once the partial pack "
                 "is removed)",
                 h);
}

/* The bytes of distinct bodies in refs (sorted by key). */
static uint64_t distinct_bytes(const body_ref *refs, size_t n, uint64_t *count)
{
    uint64_t bytes = 0, c = 0;
    for (size_t i = 0; i < n; i++) {
        if (i > 0 && memcmp(refs[i].key, refs[i - 1].key, PK_DIGEST_LEN) == 0)
            continue;
        c++;
        bytes += refs[i].len;
    }
    if (count)
        *count = c;
    return bytes;
}

/* The message for a failed store into the pack: map full is a bug of
 * map_capacity, and says so. */
static const char *store_error(int rc)
{
    return rc == SF_EFULL ? "pack map full (the size estimate was too small: please report this "
                            "as a bug of servd-pack)"
                          : sf_strerror(rc);
}

static int write_pack(build *b, pk_stats *st)
{
    const pk_build_opts *o = b->o;
    pk_site *s = &b->site;
    uint64_t capacity, record_bytes;
    size_t nrefs, r = 0;
    if (map_capacity(b, &capacity, &nrefs, &record_bytes) != 0)
        return -1;
    body_ref *refs = malloc((nrefs ? nrefs : 1) * sizeof *refs);
    if (!refs) {
        snprintf(b->err, sizeof b->err, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < s->n; i++)
        for (int e = 0; e < SF_ENC_COUNT; e++)
            if (s->files[i].var[e].present) {
                memcpy(refs[r].key, s->files[i].var[e].digest, PK_DIGEST_LEN);
                refs[r++].len = s->files[i].var[e].len;
            }
    qsort(refs, r, sizeof *refs, cmp_body);
    if (check_space(b, distinct_bytes(refs, r, NULL) + record_bytes) != 0) {
        free(refs);
        return -1;
    }
    note_tmp_names(b);
    sf_writer *w;
    if (sf_writer_open(o->output, capacity, &w, b->err, sizeof b->err) != 0) {
        free(refs);
        return -1;
    }
    sf_pack_id *idsha = NULL;
    sf_meta meta;
    memset(&meta, 0, sizeof meta);
    int has_404 = 0, rc = 0;
    if (sf_pack_id_begin(&idsha) != 0) {
        idsha = NULL;
        snprintf(b->err, sizeof b->err, "out of memory");
        goto out_abort;
    }
    pk_progress_phase(&b->prog, "writing");
    for (size_t i = 0; i < s->n; i++) {
        const pk_file *f = &s->files[i];
        for (int e = 0; e < SF_ENC_COUNT; e++) {
            const pk_variant *v = &f->var[e];
            if (!v->present)
                continue;
            if ((rc = sf_writer_put_body(w, v->digest, v->bytes, v->len)) != 0) {
                snprintf(b->err, sizeof b->err, "%s: cannot store the %s body of %s: %s", o->output,
                         sf_encoding_name(e), f->key, store_error(rc));
                goto out_abort;
            }
            st->enc_files[e]++;
            st->enc_bytes[e] += v->len;
            st->enc_identity[e] += f->size;
        }
        uint8_t *rec;
        size_t reclen;
        if (encode_entry(f, 0, &rec, &reclen, b->err, sizeof b->err) != 0)
            goto out_abort;
        rc = sf_writer_put_path(w, f->key, f->key_len, rec, reclen);
        if (rc == 0)
            rc = sf_pack_id_add(idsha, f->key, f->key_len, rec, reclen);
        free(rec);
        if (rc != 0) {
            snprintf(b->err, sizeof b->err, "%s: cannot store the record of %s: %s", o->output,
                     f->key, store_error(rc));
            goto out_abort;
        }
        if (strcmp(f->key, PK_404_KEY) == 0) {
            if (encode_entry(f, 1, &rec, &reclen, b->err, sizeof b->err) != 0)
                goto out_abort;
            rc = sf_writer_put_special(w, PK_404_SPECIAL, rec, reclen); /* and its id_404 */
            free(rec);
            if (rc != 0) {
                snprintf(b->err, sizeof b->err, "%s: cannot store the 404 entry: %s", o->output,
                         store_error(rc));
                goto out_abort;
            }
            has_404 = 1;
        }
        meta.identity_bytes += f->size;
        if (b->prog.enabled && i % WRITE_TICK_EVERY == 0)
            pk_progress_tick(&b->prog, i, s->n);
    }
    pk_progress_clear(&b->prog);

    uint8_t id[SF_PACK_ID_LEN];
    if (sf_pack_id_end(idsha, id) != 0) {
        idsha = NULL;
        snprintf(b->err, sizeof b->err, "SHA-256 failed");
        goto out_abort;
    }
    idsha = NULL;
    meta.stored_bytes = distinct_bytes(refs, r, &meta.n_bodies);
    meta.created = o->have_epoch ? o->epoch : b->now;
    meta.n_paths = s->n;
    memcpy(meta.pack_id, id, sizeof meta.pack_id);
    snprintf(meta.packer, sizeof meta.packer, "servd-pack %s", SERVD_VERSION);
    pk_profile(meta.profile);

    if (tree_unchanged(s, b->err, sizeof b->err) != 0)
        goto out_abort;

    /* The pack is made whole and durable under its temporary name first, so
     * that only two renames remain: a kill between them is the one moment
     * the new manifest stands beside the old pack. */
    if ((rc = sf_writer_seal(w, &meta, b->err, sizeof b->err)) != 0)
        goto out_abort;
    /* The manifest goes into place first: once the pack is renamed over -o
     * (which may be the previous good pack or the --base), nothing may fail
     * and nothing may remove it. If the pack then fails to appear, the
     * previous manifest is put back. */
    if (o->manifest && !b->manifest_stream &&
        pk_manifest_write_tmp(o->manifest, s, &meta, has_404, b->err, sizeof b->err) != 0)
        goto out_abort;
    take_turn(b);
    /* A stop signal waits from here until the outcome is noted: the renames
     * inside the two commits and what the handler would say and undo must
     * agree (the compressors have finished: this thread is the only one). */
    sigset_t stops, old;
    stop_signals(&stops);
    sigprocmask(SIG_BLOCK, &stops, &old);
    if (o->manifest && !b->manifest_stream &&
        pk_manifest_commit(o->manifest, b->err, sizeof b->err) != 0) {
        sigprocmask(SIG_SETMASK, &old, NULL);
        end_turn(b);
        goto out_abort;
    }
    sig_tmp_manifest[0] = '\0';
    struct stat tst;
    int have_tmp = stat(sig_tmp_pack, &tst) == 0;
    if (sf_writer_commit(w, &meta, b->err, sizeof b->err) != 0) {
        /* A failure after the rename (syncing the directory) leaves the new
         * pack in place: then the new manifest stays with it. */
        struct stat pst;
        int in_place = have_tmp && stat(o->output, &pst) == 0 && pst.st_dev == tst.st_dev &&
                       pst.st_ino == tst.st_ino;
        sig_tmp_pack[0] = '\0';
        sig_in_place = in_place;
        if (in_place)
            pk_manifest_finish();
        else
            pk_manifest_rollback();
        sigprocmask(SIG_SETMASK, &old, NULL);
        end_turn(b);
        note_space(b, 0);
        free(refs);
        return -1;
    }
    sig_tmp_pack[0] = '\0';
    sig_in_place = 1;
    pk_manifest_finish();
    sigprocmask(SIG_SETMASK, &old, NULL);
    end_turn(b);
    /* A stream has no previous content to restore: it is written once the
     * pack is in place, so it never describes a pack that is not there. */
    if (o->manifest && b->manifest_stream &&
        pk_manifest_stream(o->manifest, b->manifest_fd, s, &meta, has_404, b->err, sizeof b->err) !=
            0) {
        size_t n = strlen(b->err);
        snprintf(b->err + n, sizeof b->err - n, " (the pack %s is in place)", o->output);
        free(refs);
        return -1;
    }
    st->paths = meta.n_paths;
    st->bodies = meta.n_bodies;
    st->stored_bytes = meta.stored_bytes;
    struct stat pst;
    if (stat(o->output, &pst) == 0)
        st->pack_file_bytes = (uint64_t)pst.st_size;
    free(refs);
    return 0;

out_abort:
    pk_progress_clear(&b->prog);
    sf_pack_id_free(idsha);
    sf_writer_abort(w);
    if (rc == SF_EIO) /* once the partial pack is gone */
        note_space(b, 1);
    if (o->manifest && !b->manifest_stream)
        pk_manifest_abort(o->manifest);
    free(refs);
    return -1;
}

/* ---- driver ---- */

/* Fails early, before minutes of compression, if the output cannot be made:
 * its directory must exist and be writable, and the temporary name beside
 * it ("<name>.tmp-<pid>") must be a legal file name there. */
static int check_output_dir(build *b, const char *path)
{
    char d[PATH_MAX];
    snprintf(d, sizeof d, "%s", path);
    char *slash = strrchr(d, '/');
    const char *base = slash ? path + (slash - d) + 1 : path;
    if (!slash)
        snprintf(d, sizeof d, ".");
    else if (slash == d)
        d[1] = '\0';
    else
        *slash = '\0';
    struct stat st;
    if (stat(d, &st) != 0) {
        snprintf(b->err, sizeof b->err, "%s: output directory %.1024s: %s", path, d,
                 strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        snprintf(b->err, sizeof b->err, "%s: %.1024s is not a directory", path, d);
        return -1;
    }
    if (access(d, W_OK) != 0) {
        snprintf(b->err, sizeof b->err, "%s: output directory %.1024s: %s", path, d,
                 strerror(errno));
        return -1;
    }
    char tmp[PATH_MAX];
    long name_max = pathconf(d, _PC_NAME_MAX);
    if (name_max <= 0)
        name_max = NAME_MAX;
    if (sf_tmp_name(base, tmp, sizeof tmp) != 0 || strlen(tmp) > (size_t)name_max) {
        snprintf(b->err, sizeof b->err,
                 "%s: the file name is too long: servd-pack writes %s first and renames it, and "
                 "names in %.1024s hold at most %ld bytes",
                 path, tmp, d, name_max);
        return -1;
    }
    return 0;
}

/* The descriptor a name stands for: /dev/stdout (1), /dev/stderr (2),
 * /dev/fd/N or /proc/self/fd/N, also through symbolic links to those;
 * else -1. Written through that descriptor, output goes where the shell
 * sent it (appended after ">>", into a pipe), never renamed over a file. */
static int descriptor_name(const char *path)
{
    char buf[PATH_MAX], link[PATH_MAX];
    snprintf(buf, sizeof buf, "%s", path);
    for (int hops = 0; hops < 8; hops++) {
        static const char *const dirs[] = {"/dev/fd/", "/proc/self/fd/", "/proc/thread-self/fd/"};
        if (strcmp(buf, "/dev/stdout") == 0)
            return STDOUT_FILENO;
        if (strcmp(buf, "/dev/stderr") == 0)
            return STDERR_FILENO;
        for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
            size_t n = strlen(dirs[i]);
            char *end;
            if (strncmp(buf, dirs[i], n) == 0 && buf[n] >= '0' && buf[n] <= '9') {
                long fd = strtol(buf + n, &end, 10);
                if (*end == '\0' && fd <= INT_MAX)
                    return (int)fd;
            }
        }
        ssize_t len = readlink(buf, link, sizeof link - 1);
        if (len <= 0 || link[0] != '/')
            return -1; /* not a link, or a relative one: not a descriptor's name */
        link[len] = '\0';
        memcpy(buf, link, (size_t)len + 1);
    }
    return -1;
}

/* Whether the existing regular file at path is one servd-pack may replace:
 * empty, or what a build writes there - a pack (sf_lmdb_magic, so that a
 * damaged pack is still replaced) or a manifest (a JSON object whose first
 * member is "servd_manifest"). Anything else was put there by someone
 * else: a mistyped -o must not destroy it. @return 0, or -1 with b->err. */
static int replaceable(build *b, const char *opt, const char *path, int manifest)
{
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0)
        return 0; /* a new file (resolve_output refused the other kinds) */
    unsigned char h[64];
    ssize_t n = -1;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd >= 0) {
        n = pread(fd, h, sizeof h, 0);
        int e = errno;
        close(fd);
        errno = e;
    }
    if (n < 0) {
        snprintf(b->err, sizeof b->err,
                 "%s: cannot read it to see whether it is a %s servd-pack may replace (%s)", path,
                 manifest ? "manifest" : "pack", strerror(errno));
        return -1;
    }
    if (!manifest && sf_lmdb_magic(h, (size_t)n))
        return 0;
    if (manifest) {
        ssize_t i = 0;
        while (i < n && (h[i] == ' ' || h[i] == '\t' || h[i] == '\r' || h[i] == '\n'))
            i++;
        if (i < n && h[i] == '{') {
            i++;
            while (i < n && (h[i] == ' ' || h[i] == '\t' || h[i] == '\r' || h[i] == '\n'))
                i++;
            static const char key[] = "\"servd_manifest\"";
            if (n - i >= (ssize_t)sizeof key - 1 && memcmp(h + i, key, sizeof key - 1) == 0)
                return 0;
        }
    }
    snprintf(b->err, sizeof b->err,
             "%s: exists and is not a %s; %s replaces only what servd-pack wrote "
             "(remove the file first, or name another)",
             path, manifest ? "servd-pack manifest" : "servd pack", opt);
    return -1;
}

/* Resolves the name given to -o or --manifest (opt) into out: through a
 * symbolic link to the file it leads to (the file a reader of that name
 * sees, as with a shell redirection), and refuses what servd-pack must not
 * replace. The pack needs a regular file; the manifest may also go to a
 * pipe, a terminal or a device (*stream is then set: it is written into,
 * never replaced). @return 0, or -1 with b->err. */
static int resolve_output(build *b, const char *opt, const char *path, char *out, size_t cap,
                          int *stream)
{
    struct stat lst, st;
    if (stream)
        *stream = 0;
    if ((size_t)snprintf(out, cap, "%s", path) >= cap) {
        snprintf(b->err, sizeof b->err, "%s %.256s...: the name is too long", opt, path);
        return -1;
    }
    int fd = descriptor_name(path);
    if (fd >= 0) {
        if (!stream) {
            snprintf(b->err, sizeof b->err,
                     "%s: names descriptor %d; %s must name a file, which servd-pack replaces "
                     "with the new pack",
                     path, fd, opt);
            return -1;
        }
        if (fcntl(fd, F_GETFD) < 0) {
            snprintf(b->err, sizeof b->err, "%s: descriptor %d is not open", path, fd);
            return -1;
        }
        b->manifest_fd = fd;
        *stream = 1;
        return 0;
    }
    if (lstat(path, &lst) != 0)
        return check_output_dir(b, out); /* a new file */
    if (stat(path, &st) != 0) {
        snprintf(b->err, sizeof b->err,
                 "%s: a symbolic link to a file that cannot be reached (%s); remove the link or "
                 "name the file itself",
                 path, strerror(errno));
        return -1;
    }
    if (S_ISDIR(st.st_mode)) {
        snprintf(b->err, sizeof b->err, "%s: is a directory", path);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        if (stream && !S_ISSOCK(st.st_mode)) { /* a socket file cannot be opened */
            *stream = 1;
            return 0;
        }
        if (stream)
            snprintf(b->err, sizeof b->err,
                     "%s: is a socket; --manifest must name a file, a pipe, a terminal or a device",
                     path);
        else
            snprintf(b->err, sizeof b->err,
                     "%s: is %s; %s must name a regular file, which servd-pack replaces with the "
                     "new pack",
                     path, pk_kind_name(st.st_mode), opt);
        return -1;
    }
    if (S_ISLNK(lst.st_mode) && !realpath(path, out)) {
        snprintf(b->err, sizeof b->err, "%s: %s", path, strerror(errno));
        return -1;
    }
    return check_output_dir(b, out);
}

/* Whether a and b are one file: the same inode (links of any kind), or the
 * same name when one does not exist yet. */
static int same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    if (stat(a, &sa) == 0 && stat(b, &sb) == 0)
        return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    return pk_same_file_name(a, b);
}

/* Refuses an output that is one of the inputs: writing it would destroy a
 * file of the site (or the rules) that the build was reading. */
static int check_not_input(build *b, const char *opt, const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return 0;
    for (size_t i = 0; i < b->site.n; i++) {
        const pk_file *f = &b->site.files[i];
        if (f->dev == (uint64_t)st.st_dev && f->ino == (uint64_t)st.st_ino) {
            snprintf(b->err, sizeof b->err,
                     "%s %s is the file %s of the web root (served as %s); writing it would "
                     "replace a file that is being packed: choose an output outside %s",
                     opt, path, f->src, f->key, b->site.root);
            return -1;
        }
    }
    struct stat rst;
    if (b->o->rules && stat(b->o->rules, &rst) == 0 && rst.st_dev == st.st_dev &&
        rst.st_ino == st.st_ino) {
        snprintf(b->err, sizeof b->err, "%s %s is the --rules file", opt, path);
        return -1;
    }
    return 0;
}

/* Writes realpath(dirname(path)) + "/" + basename(path) into out: the name a
 * file at path has or would have, whatever the spelling. @return 0 or -1
 * (the directory does not resolve). */
static int canonical_name(const char *path, char *out, size_t cap)
{
    char d[PATH_MAX], real[PATH_MAX];
    snprintf(d, sizeof d, "%s", path);
    char *slash = strrchr(d, '/');
    const char *base = path;
    if (!slash) {
        snprintf(d, sizeof d, ".");
    } else {
        base = path + (slash - d) + 1;
        if (slash == d)
            d[1] = '\0';
        else
            *slash = '\0';
    }
    if (!realpath(d, real))
        return -1;
    int n = snprintf(out, cap, "%s/%s", strcmp(real, "/") == 0 ? "" : real, base);
    return n < 0 || (size_t)n >= cap ? -1 : 0;
}

int pk_same_file_name(const char *a, const char *b)
{
    char ca[PATH_MAX], cb[PATH_MAX];
    if (canonical_name(a, ca, sizeof ca) != 0 || canonical_name(b, cb, sizeof cb) != 0)
        return strcmp(a, b) == 0;
    return strcmp(ca, cb) == 0;
}

/* Before compressing: the identity bodies alone must fit (they are all
 * stored), so a hopeless build stops before minutes of compression. */
static int check_identity_space(build *b)
{
    body_ref *refs = malloc((b->site.n ? b->site.n : 1) * sizeof *refs);
    if (!refs)
        return 0; /* the precise check before writing still runs */
    for (size_t i = 0; i < b->site.n; i++) {
        memcpy(refs[i].key, b->site.files[i].var[SF_ENC_IDENTITY].digest, PK_DIGEST_LEN);
        refs[i].len = b->site.files[i].var[SF_ENC_IDENTITY].len;
    }
    qsort(refs, b->site.n, sizeof *refs, cmp_body);
    int rc = check_space(b, distinct_bytes(refs, b->site.n, NULL));
    free(refs);
    return rc;
}

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
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
    double t0 = now_seconds();
    pk_stats st;
    memset(&st, 0, sizeof st);
    int ok = 0, code = 1;

    if (!o->output[0] || (o->manifest && !o->manifest[0])) {
        pk_err("%s: an empty file name", o->output[0] ? "--manifest" : "-o");
        return PK_EXIT_USAGE;
    }
    /* From here on b.o names the files the outputs lead to. */
    b.opts = *o;
    if (resolve_output(&b, "-o", o->output, b.output, sizeof b.output, NULL) != 0 ||
        (o->manifest && resolve_output(&b, "--manifest", o->manifest, b.manifest, sizeof b.manifest,
                                       &b.manifest_stream) != 0))
        goto out;
    /* --manifest may not be -o or --base, whatever the spelling or the links */
    if (o->manifest && !b.manifest_stream) {
        int is_out = same_file(b.manifest, b.output);
        if (is_out || (o->base && same_file(b.manifest, o->base))) {
            pk_err("--manifest %s leads to the same file as %s %s", o->manifest,
                   is_out ? "-o" : "--base", is_out ? o->output : o->base);
            return PK_EXIT_USAGE;
        }
    }
    b.opts.output = b.output;
    b.opts.manifest = o->manifest ? b.manifest : NULL;
    b.o = o = &b.opts;
    catch_signals(o);
    if (o->rules && pk_rules_load(o->rules, &b.rules, b.err, sizeof b.err) != 0)
        goto out;
    if (pk_walk(o->root, b.rules, &b.site, b.err, sizeof b.err) != 0)
        goto out;
    pk_rules_warn_unused(b.rules);
    if (b.site.n == 0) {
        /* say where the files went, when the walk saw some */
        const pk_site *ws = &b.site;
        if (ws->skipped_dot + ws->skipped_excluded + ws->skipped_sidecar == 0)
            snprintf(b.err, sizeof b.err, "%s: no files to pack", o->root);
        else
            snprintf(b.err, sizeof b.err,
                     "%s: no files to pack (skipped: %llu dotfiles, %llu sidecars, %llu excluded "
                     "by rules)",
                     o->root, (unsigned long long)ws->skipped_dot,
                     (unsigned long long)ws->skipped_sidecar,
                     (unsigned long long)ws->skipped_excluded);
        goto out;
    }
    if (check_not_input(&b, "-o", o->output) != 0 ||
        (o->manifest && !b.manifest_stream &&
         check_not_input(&b, "--manifest", o->manifest) != 0)) {
        code = PK_EXIT_USAGE;
        goto out;
    }
    if (replaceable(&b, "-o", o->output, 0) != 0 ||
        (o->manifest && !b.manifest_stream && replaceable(&b, "--manifest", o->manifest, 1) != 0))
        goto out;
    if (o->manifest && !b.manifest_stream)
        open_commit_lock(&b);
    if (o->base) {
        char profile[PK_PROFILE_SIZE];
        int usable = 0;
        pk_profile(profile);
        if (pk_base_open(o->base, profile, &b.base, &usable, b.err, sizeof b.err) != 0)
            goto out;
        if (!usable) {
            if (!o->quiet)
                pk_err("%s: made with another compression profile (%s, now %s); "
                       "compressing everything",
                       o->base, pk_base_profile(b.base), profile);
            /* kept open (with nothing indexed) for pk_base_last_modified */
        }
    }

    /* Read and hash every file. */
    b.jobs = malloc(b.site.n * sizeof *b.jobs);
    if (!b.jobs) {
        snprintf(b.err, sizeof b.err, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < b.site.n; i++)
        b.jobs[i] = (job){i, SF_ENC_IDENTITY};
    b.njobs = b.site.n;
    if (run_jobs(&b, "reading") != 0 || pk_sidecars_drop(&b.site, b.err, sizeof b.err) != 0)
        goto out;
    /* The time of packing is taken after the reads: a file written during
     * a long read phase is not "in the future" (nor clamped). */
    b.now = (int64_t)time(NULL);
    if (decide(&b) != 0 || check_identity_space(&b) != 0)
        goto out;

    if (plan_compression(&b, &st.reused) != 0 || start_compressors(&b) != 0 ||
        run_jobs(&b, "compressing") != 0 || name_variants(&b) != 0)
        goto out;
    if (write_pack(&b, &st) != 0)
        goto out;
    ok = 1;
    st.skipped_dot = b.site.skipped_dot;
    st.skipped_sidecar = b.site.skipped_sidecar;
    st.sidecar_names = (const char *const *)b.site.sidecar_names;
    st.nsidecar_names = b.site.nsidecar_names;
    st.skipped_excluded = b.site.skipped_excluded;
    st.seconds = now_seconds() - t0;
    if (!o->quiet)
        pk_summary_print(stderr, &st, o->output);

out:
    pk_progress_clear(&b.prog);
    if (!ok)
        pk_err("%s", b.err[0] ? b.err : "build failed");
    end_turn(&b);
    for (unsigned i = 0; b.comp && i < b.nthreads; i++)
        pk_compressor_free(b.comp[i]);
    free(b.comp);
    free(b.jobs);
    pk_site_free(&b.site); /* before the base: it may point into it */
    pk_base_close(b.base);
    pk_rules_free(b.rules);
    return ok ? 0 : code;
}
