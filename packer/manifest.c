/*
 * manifest.c - writing the JSON manifest (manifest.h) with jansson, one path
 * at a time (jsonw.h).
 */
#include "manifest.h"
#include "jsonw.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void pk_manifest_tmp_name(const char *path, char *out, size_t cap)
{
    sf_tmp_name(path, out, cap); /* the pack's formula: one name for temporaries */
}

/* One path's member of "paths"; NULL when out of memory. */
static json_t *path_object(const pk_file *f)
{
    json_t *headers = json_array(), *variants = json_array();
    json_t *p = json_pack("{s:s, s:s, s:I, s:o, s:o}", "mime", f->mime, "cache_control",
                          f->cache_control, "last_modified", (json_int_t)f->last_modified,
                          "headers", headers, "variants", variants);
    if (!p)
        return NULL;
    for (size_t h = 0; h < f->nextra; h++)
        if (json_array_append_new(headers, json_pack("{s:s, s:s}", "name", f->extra[h].name,
                                                     "value", f->extra[h].value)) != 0)
            goto out_nomem;
    for (int e = 0; e < SF_ENC_COUNT; e++) {
        const pk_variant *v = &f->var[e];
        if (!v->present)
            continue;
        if (json_array_append_new(variants,
                                  json_pack("{s:s, s:I, s:s}", "encoding", sf_encoding_name(e),
                                            "size", (json_int_t)v->len, "etag", v->etag)) != 0)
            goto out_nomem;
    }
    return p;
out_nomem:
    json_decref(p);
    return NULL;
}

/* Writes the document and a newline to fp, one path at a time (jsonw.h),
 * and flushes it. @return 0, or -1 with errno (ENOMEM: out of memory). */
static int write_doc(FILE *fp, const pk_site *site, const sf_meta *meta, int has_404)
{
    char hex[2 * sizeof meta->pack_id + 1];
    sf_hex(meta->pack_id, sizeof meta->pack_id, hex);
    pk_jsonw w;
    pk_jsonw_init(&w, fp, JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII);
    pk_jsonw_open(&w, NULL, '{');
    pk_jsonw_put(&w, "servd_manifest", json_integer(1));
    pk_jsonw_put(&w, "pack_id", json_string(hex));
    pk_jsonw_put(&w, "packer", json_string(meta->packer));
    pk_jsonw_put(&w, "profile", json_string(meta->profile));
    pk_jsonw_put(&w, "not_found", has_404 ? json_string("/404.html") : json_null());
    pk_jsonw_put(&w, "totals",
                 json_pack("{s:I, s:I, s:I, s:I}", "paths", (json_int_t)meta->n_paths, "bodies",
                           (json_int_t)meta->n_bodies, "identity_bytes",
                           (json_int_t)meta->identity_bytes, "stored_bytes",
                           (json_int_t)meta->stored_bytes));
    pk_jsonw_open(&w, "paths", '{');
    for (size_t i = 0; i < site->n && !w.failed; i++)
        pk_jsonw_put(&w, site->files[i].key, path_object(&site->files[i]));
    pk_jsonw_close(&w);
    pk_jsonw_close(&w);
    /* ferror too (pk_jsonw_status): jansson's writes are not checked one by one */
    if (fputc('\n', fp) == EOF || fflush(fp) != 0 || pk_jsonw_status(&w) != 0) {
        if (errno == 0)
            errno = EIO;
        return -1;
    }
    return 0;
}

int pk_manifest_write_tmp(const char *path, const pk_site *site, const sf_meta *meta, int has_404,
                          char *err, size_t errlen)
{
    char tmp[PATH_MAX];
    pk_manifest_tmp_name(path, tmp, sizeof tmp);
    /* 0600 while written (the list of a private site's paths); the bits
     * of a new file, or the previous manifest's, at the commit */
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOCTTY, 0600);
    FILE *fp = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!fp && fd >= 0) {
        int e = errno;
        close(fd);
        unlink(tmp);
        errno = e;
    }
    if (!fp) {
        if (errno == ENOMEM) /* the user named path; tmp is ours */
            snprintf(err, errlen, "%s: out of memory", path);
        else
            snprintf(err, errlen, "%s: %s", tmp, strerror(errno));
        return -1;
    }
    errno = 0;
    int rc = write_doc(fp, site, meta, has_404);
    if (rc == 0 && fsync(fileno(fp)) != 0)
        rc = -1;
    int saved = errno;
    if (fclose(fp) != 0 && rc == 0) {
        rc = -1;
        saved = errno;
    }
    if (rc != 0) { /* named by path: tmp is removed */
        if (saved == ENOMEM)
            snprintf(err, errlen, "%s: out of memory", path);
        else
            snprintf(err, errlen, "%s: cannot write: %s", path, strerror(saved));
        unlink(tmp);
        return -1;
    }
    return 0;
}

int pk_manifest_stream(const char *path, int fd, const pk_site *site, const sf_meta *meta,
                       int has_404, char *err, size_t errlen)
{
    /* a reader that went away is an error to report, not a reason to die */
    struct sigaction ign = {.sa_handler = SIG_IGN}, old;
    sigaction(SIGPIPE, &ign, &old);
    fd = fd >= 0 ? fcntl(fd, F_DUPFD_CLOEXEC, 0) : open(path, O_WRONLY | O_NOCTTY | O_CLOEXEC);
    FILE *fp = fd >= 0 ? fdopen(fd, "w") : NULL;
    int rc = -1, saved = errno;
    if (fp) {
        errno = 0;
        rc = write_doc(fp, site, meta, has_404);
        saved = errno;
        if (fclose(fp) != 0 && rc == 0) {
            rc = -1;
            saved = errno;
        }
    } else if (fd >= 0) {
        close(fd);
    }
    sigaction(SIGPIPE, &old, NULL);
    if (rc != 0)
        snprintf(err, errlen, "%s: cannot write the manifest: %s", path, strerror(saved));
    return rc;
}

/* Between pk_manifest_commit and pk_manifest_finish / rollback: the names
 * (computed beforehand, so that rollback is async-signal-safe) and whether
 * the new manifest is in place with (PREVIOUS) or without (FRESH) a copy of
 * the previous one. One build per process, so one set of names. */
enum { NOT_COMMITTED = 0, COMMITTED_PREVIOUS = 1, COMMITTED_FRESH = 2 };
static volatile sig_atomic_t state;
static char final_name[PATH_MAX], old_name[PATH_MAX];

/* Copies the file at from to a new file at to, with its permission bits.
 * @return 0, 1 when there is no file at from, or -1 with errno set
 * (nothing is left at to). */
static int copy_file(const char *from, const char *to)
{
    int in = open(from, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (in < 0)
        return errno == ENOENT ? 1 : -1;
    struct stat st;
    int out = -1, saved = 0;
    if (fstat(in, &st) != 0)
        saved = errno;
    else if (!S_ISREG(st.st_mode))
        saved = EINVAL;
    else if ((out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, st.st_mode & 07777)) < 0)
        saved = errno;
    if (saved) {
        close(in);
        errno = saved;
        return -1;
    }
    char buf[65536];
    for (;;) {
        ssize_t n = read(in, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            saved = n < 0 ? errno : 0;
            break;
        }
        for (ssize_t off = 0; off < n && saved == 0;) {
            ssize_t w = write(out, buf + off, (size_t)(n - off));
            if (w < 0 && errno != EINTR)
                saved = errno;
            else if (w == 0)
                saved = EIO;
            else if (w > 0)
                off += w;
        }
        if (saved)
            break;
    }
    if (close(out) != 0 && saved == 0)
        saved = errno;
    close(in);
    if (saved) {
        unlink(to);
        errno = saved;
        return -1;
    }
    return 0;
}

int pk_manifest_commit(const char *path, char *err, size_t errlen)
{
    char tmp[PATH_MAX];
    pk_manifest_tmp_name(path, tmp, sizeof tmp);
    snprintf(final_name, sizeof final_name, "%s", path);
    snprintf(old_name, sizeof old_name, "%s.old-%ld", path, (long)getpid());
    unlink(old_name);
    /* The previous manifest is kept beside it until the pack is in place:
     * a hard link, or a copy where no link can be made (a file system
     * without them; fs.protected_hardlinks and a file of another user).
     * Without either, nothing is replaced. */
    int previous = link(path, old_name) == 0;
    if (!previous && errno != ENOENT) {
        /* a link that failed otherwise (EIO) says nothing of whether there
         * is a previous manifest: the copy finds out */
        int copied = copy_file(path, old_name);
        if (copied < 0) {
            snprintf(err, errlen, "%s: cannot keep a copy of the previous manifest (%s): %s", path,
                     old_name, strerror(errno));
            unlink(tmp);
            return -1;
        }
        previous = copied == 0;
    }
    sf_keep_attributes(tmp, path, 0666);
    if (rename(tmp, path) != 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        unlink(tmp);
        if (previous)
            unlink(old_name);
        return -1;
    }
    state = previous ? COMMITTED_PREVIOUS : COMMITTED_FRESH;
    return 0;
}

int pk_manifest_finish(char *err, size_t errlen)
{
    int rc = 0;
    if (state == COMMITTED_PREVIOUS && unlink(old_name) != 0 && errno != ENOENT) {
        snprintf(err, errlen, "%s: cannot remove the copy of the previous manifest: %s", old_name,
                 strerror(errno));
        rc = 1;
    }
    if (state != NOT_COMMITTED) {
        /* Makes the rename durable: done now, not between the two renames,
         * to keep that gap short. */
        int e = sf_sync_dir_of(final_name);
        if (e) {
            size_t n = rc ? strlen(err) : 0; /* after the warning, if there is one */
            snprintf(err + n, errlen - n,
                     "%s%s: renamed into place, but syncing its directory failed: %s",
                     n ? "; " : "", final_name, strerror(e));
            rc = -1;
        }
    }
    state = NOT_COMMITTED;
    return rc;
}

void pk_manifest_rollback(char *note, size_t notelen)
{
    if (state == NOT_COMMITTED)
        return;
    if (state != COMMITTED_PREVIOUS || rename(old_name, final_name) != 0) {
        int e = errno;
        unlink(final_name);
        if (state == COMMITTED_PREVIOUS && note) {
            size_t n = strlen(note);
            snprintf(note + n, notelen - n,
                     "; the previous manifest could not be put back (%s): it is %s", strerror(e),
                     old_name);
        }
    }
    state = NOT_COMMITTED;
}

void pk_manifest_abort(const char *path)
{
    char tmp[PATH_MAX];
    pk_manifest_tmp_name(path, tmp, sizeof tmp);
    unlink(tmp);
}
