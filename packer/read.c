/*
 * read.c - the read phase of servd-pack build: each file the walk found
 * opened (the same file, inside the root), read whole, hashed and its type
 * decided; and, before the write, the checks that a file is still what was
 * read (pk__reread, pk__tree_unchanged).
 */
#include "build_int.h"

#include "decode.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* Reads the whole of fd, opened as st, into p (st->st_size bytes), and
 * stats it again into *after; it must not be written while it is read, or
 * the pack would hold bytes that never existed together. @return 0, or -1
 * with err naming the file. */
static int read_into(const pk_file *f, int fd, const struct stat *st, struct stat *after,
                     uint8_t *p, char *err, size_t errlen)
{
    int rc = read_all(fd, p, (size_t)st->st_size);
    if (rc == 0 && fstat(fd, after) != 0) {
        rc = -1;
    } else if (rc == 0 && (!same_time(&after->st_mtim, &st->st_mtim) ||
                           !same_time(&after->st_ctim, &st->st_ctim))) {
        errno = EAGAIN; /* written in place, same size */
        rc = -1;
    }
    if (rc != 0)
        snprintf(err, errlen, "%s: cannot read: %s", f->src,
                 errno == EAGAIN ? "the file changed while being read" : strerror(errno));
    return rc;
}

/* read_into a new buffer. @return the bytes, or NULL with err filled. */
static uint8_t *read_whole(const pk_file *f, int fd, const struct stat *st, struct stat *after,
                           char *err, size_t errlen)
{
    size_t n = (size_t)st->st_size;
    uint8_t *p = malloc(n ? n : 1);
    if (!p) {
        snprintf(err, errlen, "%s: out of memory (%zu bytes)", f->src, n);
        return NULL;
    }
    if (read_into(f, fd, st, after, p, err, errlen) != 0) {
        free(p);
        return NULL;
    }
    return p;
}

/* Drops the identity bytes of f once nothing needs them until its
 * compression or the write, which then read the file again (pk__reread):
 * so no phase holds the whole site. Not a file stored as what it contains
 * (an .svgz, an encoded rule's), whose bytes are not the file's. */
void pk__drop_identity(pk_file *f)
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
 * only its digest: the write reads it again (pk__reread), so a site of
 * images or video is never held in memory whole (nor is a site of text:
 * the read job drops a compressible file's bytes too, jobs.c). */
int pk__read_file(build *b, pk_file *f, pk_magic **magic, char *err, size_t errlen)
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
        if (!sfx && !pk_opens_with_tag(inner, innern)) {
            free(inner);
            snprintf(err, errlen,
                     "%s: an .svgz must be a gzip file of an SVG: it decompresses to bytes that "
                     "do not start like XML (a '<', after a byte order mark and whitespace)",
                     f->src);
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
        snprintf(err, errlen, "%s: out of memory computing its SHA-256", f->src);
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
        pk__drop_identity(f);
    return 0;
}

int pk__reread(const pk_file *f, const char *root, uint8_t *out, char *err, size_t errlen)
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
    int rc = read_into(f, fd, &st, &after, out, err, errlen);
    close(fd);
    if (rc != 0)
        return -1;
    uint8_t digest[PK_DIGEST_LEN];
    if (pk_sha256(out, f->read_size, digest) != 0) {
        snprintf(err, errlen, "%s: out of memory computing its SHA-256", f->src);
        return -1;
    }
    /* the same size and times, other bytes: written with its times put back */
    if (memcmp(digest, f->var[SF_ENC_IDENTITY].digest, PK_DIGEST_LEN) != 0) {
        changed_after_read(f, err, errlen);
        return -1;
    }
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
