/*
 * write.c - the last phase of servd-pack build: every body and record into
 * a temporary pack (format/src/store_write.c), the manifest, and both put in
 * place; the signal handler that cleans up after an interrupted build, and
 * the turn that builds into one directory take for their renames.
 */
#include "build_int.h"
#include "msg.h"
#include "guard.h"

#include "headers.h"
#include "manifest.h"
#include "sf/httpdate.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

/* Slack added to the map capacity for LMDB's own pages (meta, branch pages
 * and the three database roots) on top of what the records and bodies need. */
#define MAP_SLACK (1u << 20)

/* Paths written between two redraws of the progress bar while writing; and
 * a body at least this large redraws it too (it may have been read again
 * from disk, and a run of large ones would otherwise be silent). */
#define WRITE_TICK_EVERY 256
#define WRITE_TICK_BYTES (1u << 20)

/* Temporary names removed if a signal ends the process mid-write, and the
 * line that says what the signal left (written before and after the pack
 * is in place: all prepared beforehand, as a handler may only write), for
 * a stop signal and for a pack read cut short under its map (guard.h). */
static char sig_tmp_pack[PATH_MAX], sig_tmp_manifest[PATH_MAX];
static char sig_msg[2][PATH_MAX + 64], fault_msg[2][PATH_MAX + 64];
static volatile sig_atomic_t sig_in_place;

/* Removes what the build has not put in place, and says what it left. */
static void clean_up(char msg[2][PATH_MAX + 64])
{
    if (sig_tmp_pack[0])
        unlink(sig_tmp_pack);
    if (sig_tmp_manifest[0])
        unlink(sig_tmp_manifest);
    pk_manifest_rollback(NULL, 0); /* a no-op unless the manifest was renamed */
    const char *m = msg[sig_in_place ? 1 : 0];
    if (m[0] && write(STDERR_FILENO, m, strlen(m)) < 0) {
        /* nothing left to tell */
    }
}

static void on_signal(int sig)
{
    clean_up(sig_msg);
    signal(sig, SIG_DFL);
    raise(sig);
}

static void on_fault(void)
{
    clean_up(fault_msg);
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
void pk__catch_signals(const pk_build_opts *o)
{
    pk_format_line(sig_msg[0], sizeof sig_msg[0], "interrupted; %s was not changed", o->output);
    pk_format_line(sig_msg[1], sizeof sig_msg[1], "interrupted; %s is the new pack", o->output);
    pk_format_line(fault_msg[0], sizeof fault_msg[0], "%s was not changed", o->output);
    pk_format_line(fault_msg[1], sizeof fault_msg[1], "%s is the new pack", o->output);
    pk_guard_on_fault(on_fault);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    stop_signals(&sa.sa_mask);
    /* A signal the parent ignores stays ignored (nohup for SIGHUP; a
     * shell's background job for SIGINT): the build goes on. */
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction was;
        if (sigaction(sigs[i], NULL, &was) == 0 && was.sa_handler == SIG_IGN)
            continue;
        sigaction(sigs[i], &sa, NULL);
    }
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
    /* about the machine, not what is packed: not one that --strict counts */
    pk_err("warning: %s: cannot take a turn with other builds into this directory (%s); going "
           "on without one",
           b->lock_name, why);
    if (b->lock_fd >= 0)
        close(b->lock_fd);
    b->lock_fd = -1;
}

void pk__open_commit_lock(build *b)
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
        pk__open_commit_lock(b);
    }
}

/* The files are in place (or not, for good): the next build's turn. */
void pk__end_turn(build *b)
{
    if (b->lock_fd >= 0)
        close(b->lock_fd);
    b->lock_fd = -1;
}

typedef struct body_ref {
    uint8_t key[PK_DIGEST_LEN];
    uint64_t len;
    size_t file; /* the file and encoding it is a variant of */
    int enc;
    uint64_t spill; /* 1 + its offset in the spill file, or 0: not spilled */
} body_ref;

/* By key; then, within a key, the bodies not spilled first and each
 * region of the spill file together (a twin shares its file's region). */
static int cmp_body(const void *a, const void *c)
{
    const body_ref *x = a, *y = c;
    int d = memcmp(x->key, y->key, PK_DIGEST_LEN);
    if (d)
        return d;
    return (x->spill > y->spill) - (x->spill < y->spill);
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
                          .flags = (nv > 1 ? SF_ENTRY_NEGOTIABLE : 0) |
                                   (f->date_weak ? SF_ENTRY_DATE_WEAK : 0),
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
                cap += sf_store_cost(SF_KEY_LEN, f->var[e].len);
                refs++;
            }
        for (int for_404 = 0; for_404 <= (strcmp(f->key, PK_404_KEY) == 0); for_404++) {
            uint8_t *rec;
            size_t reclen;
            if (encode_entry(f, for_404, &rec, &reclen, b->err, sizeof b->err) != 0)
                return -1;
            free(rec);
            cap += sf_store_cost(for_404 ? strlen(PK_404_SPECIAL) : f->key_len, reclen);
            records += reclen;
        }
    }
    *capacity = cap;
    *nrefs = refs;
    *record_bytes = records;
    return 0;
}

void pk__dir_of(const char *path, char *d, size_t cap)
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

/* Bytes free for us on the file system of the output's directory, or -1
 * when it does not say: a size of 0 blocks is unknown, not full (ramfs,
 * some FUSE file systems; df prints "-"). */
static int64_t free_bytes(const char *output)
{
    char d[PATH_MAX];
    struct statvfs sv;
    pk__dir_of(output, d, sizeof d);
    if (statvfs(d, &sv) != 0 || sv.f_blocks == 0)
        return -1;
    return (int64_t)((uint64_t)sv.f_bavail * sv.f_frsize);
}

/* Refuses to start writing when the output's file system clearly cannot hold
 * need bytes (the bodies and records alone, before LMDB's page overhead):
 * better a message now than "Input/output error" halfway through. The room
 * of the spill file counts as free: the write gives it back as it goes. */
static int check_space(build *b, uint64_t need)
{
    int64_t have = free_bytes(b->o->output);
    if (have >= 0)
        have += (int64_t)pk_spill_room(b->spill);
    if (have < 0 || need <= (uint64_t)have)
        return 0;
    char d[PATH_MAX], hn[32], hh[32];
    pk__dir_of(b->o->output, d, sizeof d);
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

void pk__note_space(build *b, int io_error, uint64_t capacity, const char *removed)
{
    static const int space_errors[] = {ENOSPC, EDQUOT, EIO, EFBIG};
    pk_spill_close(b->spill); /* its room is free once the failed build ends */
    b->spill = NULL;
    int related = io_error;
    for (size_t i = 0; i < sizeof space_errors / sizeof space_errors[0]; i++)
        related |= strstr(b->err, strerror(space_errors[i])) != NULL;
    int64_t have = free_bytes(b->o->output);
    size_t n = strlen(b->err);
    char h[32];
    pk_human_bytes(have >= 0 ? (uint64_t)have : 0, h, sizeof h);
    /* A file size limit (ulimit -f, LimitFSIZE=) stops the write as a full
     * disk does: EFBIG, or a short write LMDB reports as EIO. */
    struct rlimit fs;
    if (related && getrlimit(RLIMIT_FSIZE, &fs) == 0 && fs.rlim_cur != RLIM_INFINITY &&
        (uint64_t)fs.rlim_cur < capacity && n < sizeof b->err) {
        char l[32];
        pk_human_bytes((uint64_t)fs.rlim_cur, l, sizeof l);
        snprintf(b->err + n, sizeof b->err - n,
                 " (the file size limit is %s: ulimit -f, LimitFSIZE=; or the disk is full: %s "
                 "free once %s is removed)",
                 l, h, removed);
    } else if (related && have >= 0 && n < sizeof b->err) {
        snprintf(b->err + n, sizeof b->err - n,
                 " (disk full? %s free on the output's file system once %s is removed)", h,
                 removed);
    }
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

/* The pack's creation time: the newest Last-Modified of its files (each
 * at most the time of packing), so that the same tree packed again gives
 * the same file, byte for byte. A build has at least one file. */
static int64_t created_at(const pk_site *s)
{
    int64_t t = s->files[0].last_modified;
    for (size_t i = 1; i < s->n; i++)
        if (s->files[i].last_modified > t)
            t = s->files[i].last_modified;
    return t;
}

/* The message for a failed store into the pack: map full is a bug of
 * map_capacity, and says so. */
static const char *store_error(int rc)
{
    return rc == SF_EFULL ? "pack map full (the size estimate was too small: please report this "
                            "as a bug of servd-pack)"
                          : sf_strerror(rc);
}

/* Says in b->err that storing what (rc) failed; or, when the writer's batch
 * commit inside that put failed, that writing the pack did, and why: what
 * was stored, and the cause is the disk's. */
static void store_failed(build *b, const sf_writer *w, int rc, const char *what)
{
    const char *cause = rc == SF_EFULL ? NULL : sf_writer_cause(w);
    if (cause)
        snprintf(b->err, sizeof b->err, "%s: cannot write the pack: %s", b->o->output, cause);
    else
        snprintf(b->err, sizeof b->err, "%s: cannot store %s: %s", b->o->output, what,
                 store_error(rc));
}

/* Every stored variant's body (at most @p nrefs), sorted by key, so that
 * the copies of one body are adjacent. @return the array with *n set, or
 * NULL when out of memory. */
static body_ref *body_refs(const pk_site *s, size_t nrefs, size_t *n)
{
    body_ref *refs = malloc((nrefs ? nrefs : 1) * sizeof *refs);
    if (!refs)
        return NULL;
    size_t r = 0;
    for (size_t i = 0; i < s->n; i++)
        for (int e = 0; e < SF_ENC_COUNT; e++)
            if (s->files[i].var[e].present) {
                memcpy(refs[r].key, s->files[i].var[e].digest, PK_DIGEST_LEN);
                refs[r].len = s->files[i].var[e].len;
                refs[r].file = i;
                refs[r].enc = e;
                refs[r++].spill = s->files[i].var[e].spilled ? s->files[i].var[e].spill_off + 1 : 0;
            }
    qsort(refs, r, sizeof *refs, cmp_body);
    *n = r;
    return refs;
}

/* Reads the spilled variant v of f back into room, which must then hold
 * the bytes its digest names. @return 0, or -1 with b->err. */
static int unspill(build *b, const pk_file *f, int enc, const pk_variant *v, void *room)
{
    uint8_t digest[PK_DIGEST_LEN];
    if (pk_spill_get(b->spill, v->spill_off, room, v->len, b->err, sizeof b->err) != 0)
        return -1;
    if (pk_sha256(room, v->len, digest) != 0) {
        snprintf(b->err, sizeof b->err, "%s: out of memory computing a SHA-256", f->src);
        return -1;
    }
    if (memcmp(digest, v->digest, PK_DIGEST_LEN) != 0) {
        char d[PATH_MAX];
        pk__dir_of(b->o->output, d, sizeof d);
        snprintf(b->err, sizeof b->err,
                 "%s: its %s variant, read back from the temporary file in %.1024s, is not "
                 "what was written there (SHA-256 mismatch): is that disk failing?",
                 f->src, sf_encoding_name(enc), d);
        return -1;
    }
    pk_spill_drop(b->spill, v->spill_off, v->len); /* read once: a body is written once */
    return 0;
}

/* Writes one body, reading its file again if its bytes were dropped after
 * the reads (pk__reread), or a compressed one from the spill file.
 * @return 0, or the writer's error or -1, with b->err set. */
static int put_body(build *b, sf_writer *w, pk_file *f, int enc)
{
    pk_variant *v = &f->var[enc];
    int reread = enc == SF_ENC_IDENTITY && !v->bytes && f->reread;
    void *room = NULL;
    /* a file read again, or a spilled variant, goes straight into the room
     * LMDB reserves for its body, not into a buffer of its own that LMDB
     * then copies: the largest file is held once, not twice; on a failure
     * the build ends and the unfilled body is never committed */
    int rc = reread || v->spilled ? sf_writer_reserve_body(w, v->digest, v->len, &room)
                                  : sf_writer_put_body(w, v->digest, v->bytes, v->len);
    if (rc == 0 && room && reread && pk__reread(f, b->site.root, room, b->err, sizeof b->err) != 0)
        return -1;
    if (rc == 0 && room && v->spilled && unspill(b, f, enc, v, room) != 0)
        return -1;
    if (rc != 0) {
        char what[SF_KEY_MAX + 32];
        snprintf(what, sizeof what, "the %s body of %s", sf_encoding_name(enc), f->key);
        store_failed(b, w, rc, what);
    }
    return rc;
}

/* Writes the bodies in key order, each once, so that the writer appends
 * them; each file's copy is freed once it is in the pack. @return 0, or the
 * writer's error or -1, with b->err set. */
static int put_bodies(build *b, sf_writer *w, const body_ref *refs, size_t r)
{
    pk_site *s = &b->site;
    for (size_t i = 0; i < r; i++) {
        pk_file *f = &s->files[refs[i].file];
        pk_variant *v = &f->var[refs[i].enc];
        if (i == 0 || memcmp(refs[i].key, refs[i - 1].key, PK_DIGEST_LEN) != 0) {
            int rc = put_body(b, w, f, refs[i].enc);
            if (rc != 0)
                return rc;
        } else if (refs[i].spill && refs[i].spill != refs[i - 1].spill) {
            /* another region of the spill file with the same bytes (the
             * variant of a file with the same bytes in another class): never
             * read, so given back here; a twin's is its file's (sorted
             * together), given back once */
            pk_spill_drop(b->spill, refs[i].spill - 1, refs[i].len);
        }
        if (v->owned) {
            free((void *)v->bytes);
            v->bytes = NULL;
            v->owned = 0;
        }
        if (b->prog.enabled && (i % WRITE_TICK_EVERY == 0 || v->len >= WRITE_TICK_BYTES))
            pk_progress_tick(&b->prog, i, r + s->n);
    }
    return 0;
}

/* Writes every path's record, and the 404 entry, adding each record to the
 * pack id and counting it in @p st and @p meta. @p done is the progress
 * count so far. @return 0, or the writer's error or -1, with b->err set. */
static int put_paths(build *b, sf_writer *w, sf_pack_id *idsha, size_t done, pk_stats *st,
                     sf_meta *meta, int *has_404)
{
    pk_site *s = &b->site;
    int rc;
    for (size_t i = 0; i < s->n; i++) {
        const pk_file *f = &s->files[i];
        for (int e = 0; e < SF_ENC_COUNT; e++) {
            const pk_variant *v = &f->var[e];
            if (!v->present)
                continue;
            st->enc_files[e]++;
            st->enc_bytes[e] += v->len;
            st->enc_identity[e] += f->size;
        }
        uint8_t *rec;
        size_t reclen;
        if (encode_entry(f, 0, &rec, &reclen, b->err, sizeof b->err) != 0)
            return -1;
        rc = sf_writer_put_path(w, f->key, f->key_len, rec, reclen);
        if (rc == 0)
            rc = sf_pack_id_add(idsha, f->key, f->key_len, rec, reclen);
        free(rec);
        if (rc != 0) {
            char what[SF_KEY_MAX + 32];
            snprintf(what, sizeof what, "the record of %s", f->key);
            store_failed(b, w, rc, what);
            return rc;
        }
        if (strcmp(f->key, PK_404_KEY) == 0) {
            if (encode_entry(f, 1, &rec, &reclen, b->err, sizeof b->err) != 0)
                return -1;
            rc = sf_writer_put_special(w, PK_404_SPECIAL, rec, reclen); /* and its id_404 */
            free(rec);
            if (rc != 0) {
                store_failed(b, w, rc, "the 404 entry");
                return rc;
            }
            *has_404 = 1;
        }
        meta->identity_bytes += f->size;
        if (b->prog.enabled && i % WRITE_TICK_EVERY == 0)
            pk_progress_tick(&b->prog, done + i, done + s->n);
    }
    if (b->prog.enabled) /* the last frame before the bar is cleared: done */
        pk_progress_tick(&b->prog, done + s->n, done + s->n);
    return 0;
}

/* Puts the sealed pack and its manifest in place: the manifest first, then
 * the pack over -o; a stop signal waits until the outcome is noted. Consumes
 * @p w. @return 0 (a warning about the manifest said at once), or -1 with
 * b->err set. */
static int put_in_place(build *b, sf_writer *w, const sf_meta *meta, int has_404, uint64_t capacity)
{
    const pk_build_opts *o = b->o;
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
        pk__end_turn(b);
        sf_writer_abort(w);
        pk_manifest_abort(o->manifest);
        return -1;
    }
    sig_tmp_manifest[0] = '\0';
    struct stat tst;
    int have_tmp = stat(sig_tmp_pack, &tst) == 0;
    if (sf_writer_commit(w, meta, b->err, sizeof b->err) != 0) {
        /* A failure after the rename (syncing the directory) leaves the new
         * pack in place: then the new manifest stays with it. */
        struct stat pst;
        int in_place = have_tmp && stat(o->output, &pst) == 0 && pst.st_dev == tst.st_dev &&
                       pst.st_ino == tst.st_ino;
        sig_tmp_pack[0] = '\0';
        sig_in_place = in_place;
        if (in_place) {
            char note[sizeof b->err];
            if (pk_manifest_finish(note, sizeof note) != 0) {
                size_t n = strlen(b->err);
                snprintf(b->err + n, sizeof b->err - n, "; %s", note);
            }
        } else
            pk_manifest_rollback(b->err, sizeof b->err);
        sigprocmask(SIG_SETMASK, &old, NULL);
        pk__end_turn(b);
        if (!in_place) /* nothing is partial: the new pack is there */
            pk__note_space(b, 0, capacity, "the partial pack");
        return -1;
    }
    sig_tmp_pack[0] = '\0';
    sig_in_place = 1;
    int fin = pk_manifest_finish(b->err, sizeof b->err);
    sigprocmask(SIG_SETMASK, &old, NULL);
    pk__end_turn(b);
    if (fin < 0) {
        size_t n = strlen(b->err);
        snprintf(b->err + n, sizeof b->err - n, " (the pack %s is in place)", o->output);
        return -1;
    }
    if (fin > 0) { /* about the machine: not one that --strict counts */
        pk_err("warning: %s", b->err);
        b->err[0] = '\0';
    }
    /* A stream has no previous content to restore: it is written once the
     * pack is in place, so it never describes a pack that is not there. */
    if (o->manifest && b->manifest_stream &&
        pk_manifest_stream(o->manifest, b->manifest_fd, &b->site, meta, has_404, b->err,
                           sizeof b->err) != 0) {
        size_t n = strlen(b->err);
        snprintf(b->err + n, sizeof b->err - n, " (the pack %s is in place)", o->output);
        return -1;
    }
    return 0;
}

int pk__write_pack(build *b, pk_stats *st)
{
    const pk_build_opts *o = b->o;
    pk_site *s = &b->site;
    uint64_t capacity, record_bytes;
    size_t nrefs, r = 0;
    if (map_capacity(b, &capacity, &nrefs, &record_bytes) != 0)
        return -1;
    body_ref *refs = body_refs(s, nrefs, &r);
    if (!refs) {
        snprintf(b->err, sizeof b->err, "out of memory");
        return -1;
    }
    if (check_space(b, distinct_bytes(refs, r, NULL) + record_bytes) != 0) {
        free(refs);
        return -1;
    }
    note_tmp_names(b);
    sf_writer *w;
    if (sf_writer_open(o->output, capacity, &w, b->err, sizeof b->err) != 0) {
        pk__note_space(b, 0, capacity, "the partial pack"); /* LMDB's first pages did not fit */
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
    if ((rc = put_bodies(b, w, refs, r)) != 0 ||
        (rc = put_paths(b, w, idsha, r, st, &meta, &has_404)) != 0)
        goto out_abort;
    pk_progress_clear(&b->prog);

    uint8_t id[SF_PACK_ID_LEN];
    if (sf_pack_id_end(idsha, id) != 0) {
        idsha = NULL;
        snprintf(b->err, sizeof b->err, "out of memory computing the pack id");
        goto out_abort;
    }
    idsha = NULL;
    meta.stored_bytes = distinct_bytes(refs, r, &meta.n_bodies);
    meta.created = o->have_epoch ? o->epoch : created_at(s);
    meta.n_paths = s->n;
    memcpy(meta.pack_id, id, sizeof meta.pack_id);
    snprintf(meta.packer, sizeof meta.packer, "servd-pack %s", SERVD_VERSION);
    if (pk_profile(meta.profile) != 0) {
        snprintf(b->err, sizeof b->err, "out of memory");
        goto out_abort;
    }

    if (pk__tree_unchanged(s, b->err, sizeof b->err) != 0)
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
    if (put_in_place(b, w, &meta, has_404, capacity) != 0) {
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
        pk__note_space(b, 1, capacity, "the partial pack");
    if (o->manifest && !b->manifest_stream)
        pk_manifest_abort(o->manifest);
    free(refs);
    return -1;
}

/* A build killed outright (SIGKILL, the OOM killer) leaves its temporary
 * file, "<path>.tmp-<pid>" (sf_tmp_name), beside path, and, if killed
 * between the manifest's rename and the pack's, the previous manifest at
 * "<manifest>.old-<pid>" (pk_manifest_commit). A later build cannot tell
 * them from the files of a build still running elsewhere (a shared
 * directory), so none removes them; each names those whose process is not
 * running here, with their size, as they may be what fills the disk. */
static void warn_leftovers_tagged(const char *path, const char *tag, const char *what)
{
    char d[PATH_MAX];
    pk__dir_of(path, d, sizeof d);
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    size_t bl = strlen(base);
    DIR *dir = opendir(d);
    if (!dir)
        return;
    struct dirent *e;
    while ((e = readdir(dir)) != NULL) {
        const char *n = e->d_name;
        size_t fl;
        long pid = sf_name_pid(n, tag, &fl);
        struct stat st;
        if (pid <= 0 || fl != bl || memcmp(n, base, bl) != 0 || pid == (long)getpid() ||
            kill((pid_t)pid, 0) == 0 || errno != ESRCH ||
            fstatat(dirfd(dir), n, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
            continue;
        char h[32];
        pk_human_bytes((uint64_t)st.st_size, h, sizeof h);
        /* about the machine, not what is packed: not one that --strict counts */
        pk_err("warning: %s%s%s (%s) is left from a build that did not finish (no process %ld "
               "runs here)%s",
               slash ? d : "", slash && strcmp(d, "/") != 0 ? "/" : "", n, h, pid, what);
    }
    closedir(dir);
}

static void warn_leftovers(const char *path)
{
    warn_leftovers_tagged(path, ".tmp-",
                          "; remove it unless a build on another machine is writing it");
}

/* Before compressing: the identity bodies alone must fit (they are all
 * stored), so a hopeless build stops before minutes of compression. A
 * killed build's leftovers, which may take the room, are named first. */
int pk__check_identity_space(build *b)
{
    warn_leftovers(b->o->output);
    if (b->o->manifest && !b->manifest_stream) {
        warn_leftovers(b->o->manifest);
        warn_leftovers_tagged(b->o->manifest, ".old-",
                              ": the manifest it replaced, kept until its pack was in place; "
                              "remove it unless a build on another machine is still running");
    }
    body_ref *refs = malloc((b->site.n ? b->site.n : 1) * sizeof *refs);
    if (!refs)
        return 0; /* the precise check before writing still runs */
    for (size_t i = 0; i < b->site.n; i++) {
        memcpy(refs[i].key, b->site.files[i].var[SF_ENC_IDENTITY].digest, PK_DIGEST_LEN);
        refs[i].len = b->site.files[i].var[SF_ENC_IDENTITY].len;
        refs[i].spill = 0;
    }
    qsort(refs, b->site.n, sizeof *refs, cmp_body);
    int rc = check_space(b, distinct_bytes(refs, b->site.n, NULL));
    free(refs);
    return rc;
}
