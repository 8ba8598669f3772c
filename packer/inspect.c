/*
 * inspect.c - servd-pack ls and cat: looking into a pack.
 *
 * ls prints one line per path, path first, tab-separated (a key can hold
 * spaces but never a control byte):
 *   PATH  IDENTITY-SIZE  ENCODINGS  IDENTITY-ETAG  MIME
 * where ENCODINGS is "gzip:N,br:N,zstd:N" (the variants stored beside
 * identity) or "-". Nothing in it depends on when the pack was made, so the
 * same tree gives the same listing.
 */
#include "commands.h"
#include "guard.h"
#include "jsonw.h"
#include "msg.h"

#include "headers.h"
#include "sf/isolate.h"
#include "sf/path.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Room for messages naming a pack file and a cause. */
#define MSG_LEN 1024

int pk_pack_open_checked(const char *path, sf_pack **pack, char *err, size_t errlen)
{
    /* O_NONBLOCK: a FIFO at the path is refused, not waited on */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return SF_EIO;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        snprintf(err, errlen, "%s: not a regular file", path);
        return SF_EIO;
    }
    char fdpath[32];
    int rc = sf_fd_path(fd, path, fdpath, sizeof fdpath, err, errlen);
    if (rc != 0) {
        close(fd);
        return rc;
    }
    rc = sf_check_isolated(sf_pack_check_structure, SF_CHECK_NO_HASH, fdpath,
                           sf_check_timeout_ms((uint64_t)st.st_size), err, errlen);
    if (rc == 0) {
        int slot = pk_guard_open_begin(path);
        rc = sf_pack_open(fdpath, pack, err, errlen);
        pk_guard_open_end(slot, rc == 0 ? *pack : NULL);
    }
    close(fd); /* LMDB holds its own descriptor */
    if (rc != 0) {
        sf_name_file(err, errlen, fdpath, path);
        /* sf_tmp_name's form: most likely a killed build's */
        size_t used = strlen(err);
        if (sf_tmp_name_pid(path, NULL) > 0 && used < errlen)
            snprintf(err + used, errlen - used,
                     " (a build's temporary file, which a build that did not finish leaves "
                     "behind, perhaps cut short)");
    }
    return rc;
}

int pk_open_pack(const char *path, sf_pack **pack, sf_reader **reader)
{
    char err[MSG_LEN];
    int rc = pk_pack_open_checked(path, pack, err, sizeof err);
    if (rc != 0) {
        pk_err("%s", err);
        return rc;
    }
    rc = sf_reader_begin(*pack, reader);
    if (rc != 0) {
        pk_err("%s: %s", path, sf_strerror(rc));
        pk_pack_close(*pack);
    }
    return rc;
}

void pk_pack_close(sf_pack *pack)
{
    pk_guard_forget(pack);
    sf_pack_close(pack);
}

void pk_close_pack(sf_pack *pack, sf_reader *reader)
{
    sf_reader_end(reader);
    pk_pack_close(pack);
}

typedef struct ls_ctx {
    int json;     /* --json, written through out */
    pk_jsonw out; /* one path at a time */
    int failed;
    unsigned long bad_keys; /* listed, but no request reaches them */
} ls_ctx;

/* A string of the pack as JSON. One that is not UTF-8 (a damaged or
 * hand-made pack's key, which the listing then reports) is listed as
 * sf_escape writes it, \xNN for each stray byte: JSON cannot hold it, and
 * jansson would fail the whole listing on it. */
static json_t *view_str(sf_view v)
{
    json_t *s = json_stringn(v.ptr, v.len);
    if (s || v.len > SIZE_MAX / SF_ESCAPE_CHAR_MAX - 1)
        return s;
    size_t cap = v.len * SF_ESCAPE_CHAR_MAX + 1;
    char *esc = malloc(cap);
    if (!esc)
        return NULL;
    sf_escape(v.ptr, v.len, esc, cap);
    s = json_string(esc);
    free(esc);
    return s;
}

/* Sets o[key] to v, which it takes over (jansson frees it on failure too).
 * @return 1 when set; 0 when v is NULL or the object cannot grow. */
static int put(json_t *o, const char *key, json_t *v)
{
    return v && json_object_set_new(o, key, v) == 0;
}

/* One path's object: every value checked, for a listing that is short of
 * memory must fail, not print a path without its variants. */
static json_t *ls_object(sf_view path, const sf_entry *e)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    int ok = put(o, "path", view_str(path)) &&
             put(o, "kind", json_string(e->kind == SF_KIND_FILE ? "file" : "redirect"));
    if (ok && e->kind == SF_KIND_REDIRECT) {
        ok = put(o, "target", view_str(e->target));
    } else if (ok) {
        const sf_variant *id = &e->variants[0];
        const char *cc;
        size_t ccl;
        ok = put(o, "mime", view_str(e->mime)) &&
             put(o, "size", json_integer((json_int_t)id->body_len)) &&
             put(o, "etag", view_str(id->etag)) &&
             put(o, "last_modified", json_integer(e->last_modified));
        if (ok && pk_header_find(id->rep.ptr, id->rep.len, "Cache-Control", &cc, &ccl) == 0)
            ok = put(o, "cache_control", json_stringn_nocheck(cc, ccl));
        json_t *vars = ok ? json_array() : NULL;
        for (unsigned i = 0; vars && ok && i < e->nvariants; i++) {
            const sf_variant *v = &e->variants[i];
            json_t *vo = json_object();
            ok = vo && put(vo, "encoding", json_string(sf_encoding_name(v->encoding))) &&
                 put(vo, "size", json_integer((json_int_t)v->body_len)) &&
                 put(vo, "etag", view_str(v->etag));
            if (!ok)
                json_decref(vo);
            else
                ok = json_array_append_new(vars, vo) == 0;
        }
        if (!ok)
            json_decref(vars);
        else
            ok = put(o, "variants", vars);
    }
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* What ls_one returns to stop the walk when the listing cannot be written
 * (a full disk, a reader gone): positive, never an SF_E* code of the
 * pack's. */
#define LS_UNWRITTEN 1

static int ls_json(ls_ctx *c, sf_view path, const sf_entry *e)
{
    json_t *o = ls_object(path, e);
    if (!o)
        return SF_ENOMEM;
    pk_jsonw_put(&c->out, NULL, o);
    return c->out.failed ? LS_UNWRITTEN : 0;
}

static int ls_one(void *arg, sf_view path, const sf_entry *e)
{
    ls_ctx *c = arg;
    /* listed as they are, and counted: a pack with a key that is no
     * normalised path ("/../etc/passwd") is damaged or hand-made */
    if (sf_path_check(path.ptr, path.len) != 0)
        c->bad_keys++;
    if (c->json)
        return ls_json(c, path, e);
    /* keys escaped (msg.h): one line each, shown in their own order */
    pk_esc_fwrite(path.ptr, path.len, stdout);
    if (e->kind == SF_KIND_REDIRECT) {
        fputs("\t-\t-\t-\tredirect ", stdout);
        pk_esc_fwrite(e->target.ptr, e->target.len, stdout);
        putchar('\n');
        return 0;
    }
    const sf_variant *id = &e->variants[0];
    printf("\t%llu\t", (unsigned long long)id->body_len);
    if (e->nvariants == 1)
        fputs("-", stdout);
    for (unsigned i = 1; i < e->nvariants; i++)
        printf("%s%s:%llu", i > 1 ? "," : "", sf_encoding_name(e->variants[i].encoding),
               (unsigned long long)e->variants[i].body_len);
    /* escaped as the path is: a rule's media type may hold a tab (OWS
     * before ';') or a bidi control in a quoted parameter */
    putchar('\t');
    pk_esc_fwrite(id->etag.ptr, id->etag.len, stdout);
    putchar('\t');
    pk_esc_fwrite(e->mime.ptr, e->mime.len, stdout);
    putchar('\n');
    return 0;
}

int pk_cmd_ls(const char *site, int json)
{
    sf_pack *pack;
    sf_reader *r;
    if (pk_open_pack(site, &pack, &r) != 0)
        return PK_EXIT_FAIL;
    ls_ctx c = {.json = json};
    errno = 0;
    if (json) {
        pk_jsonw_init(&c.out, stdout, JSON_ENSURE_ASCII);
        pk_jsonw_open(&c.out, NULL, '[');
    }
    char err[MSG_LEN] = "";
    int rc = sf_foreach_path(r, ls_one, &c, err, sizeof err);
    int written = 1, werr = 0; /* a failed write is the output's problem, not the pack's */
    if ((rc == 0 || rc == LS_UNWRITTEN) && json) {
        rc = 0;
        pk_jsonw_close(&c.out);
        putchar('\n');
        if (pk_jsonw_status(&c.out) != 0) {
            written = 0;
            werr = errno;
        }
    }
    pk_close_pack(pack, r);
    if (rc != 0) {
        pk_err("%s: %s", site, err[0] ? err : sf_strerror(rc));
        return PK_EXIT_FAIL;
    }
    if (written && (fflush(stdout) != 0 || ferror(stdout))) {
        written = 0;
        werr = errno;
    }
    if (!written) {
        pk_err("writing the listing: %s", werr ? strerror(werr) : "failed");
        return PK_EXIT_FAIL;
    }
    if (c.bad_keys) {
        pk_err("%s: corrupt pack: %lu path key%s not a normalised URL path (servd-pack verify "
               "names them)",
               site, c.bad_keys, c.bad_keys == 1 ? " is" : "s are");
        return PK_EXIT_FAIL;
    }
    return PK_EXIT_OK;
}

/* Lists the encodings an entry has, for the "no such variant" message. */
static void list_encodings(const sf_entry *e, char *out, size_t cap)
{
    size_t o = 0;
    out[0] = '\0';
    for (unsigned i = 0; i < e->nvariants && o < cap; i++) {
        int n = snprintf(out + o, cap - o, "%s%s", i ? ", " : "",
                         sf_encoding_name(e->variants[i].encoding));
        if (n < 0)
            break;
        o += (size_t)n;
    }
}

/* Whether path could be a key as ls prints it ("/q?.txt", "/100%.html"). */
static int could_be_key(const char *path)
{
    size_t n = strlen(path);
    return n <= SF_KEY_MAX && sf_path_check(path, n) == 0;
}

/* Writes key[0, n), a key of the pack, as a URL (servd's Location, what
 * cat takes) into url. @return 0, or -1 when it does not fit (a key of
 * the pack always does: 3 bytes for each of at most SF_KEY_MAX). */
static int key_url(const char *key, size_t n, char url[3 * SF_KEY_MAX + 1])
{
    size_t u = sf_path_to_url(key, n, url, 3 * SF_KEY_MAX);
    if (u > 3 * SF_KEY_MAX)
        return -1;
    url[u] = '\0';
    return 0;
}

/* When path, taken as a name as ls prints it, is a path of the pack: writes
 * " (ls's \"/q?.txt\" is /q%3F.txt as a URL)" to hint, for a cat given what
 * ls printed. The name is quoted, as messages quote what was given: it may
 * hold spaces (pk_err escapes controls); the URL holds none. Else hint is
 * empty. */
static void listed_hint(sf_reader *r, const char *path, char *hint, size_t cap)
{
    char url[3 * SF_KEY_MAX + 1];
    size_t n = strlen(path);
    sf_entry e;
    hint[0] = '\0';
    if (!could_be_key(path) || sf_lookup(r, path, n, &e) != 0 || key_url(path, n, url) != 0)
        return;
    snprintf(hint, cap, " (ls's \"%s\" is %s as a URL)", path, url);
}

int pk_cmd_cat(const char *site, const char *path, int encoding, int headers)
{
    char key[SF_PATH_MAX + 16], hint[4 * SF_KEY_MAX + 32]; /* the name and its URL */
    size_t klen = 0;
    int special = strcmp(path, "status:404") == 0;
    /* as servd: the query is not part of the lookup (a '?' in a file name
     * is written %3F) */
    size_t plen = strcspn(path, "?");
    sf_pack *pack;
    sf_reader *r;
    if (!special && sf_path_from_target(path, plen, key, SF_PATH_MAX, &klen) != 0) {
        hint[0] = '\0';
        char err[MSG_LEN];
        if (could_be_key(path) && pk_pack_open_checked(site, &pack, err, sizeof err) == 0) {
            if (sf_reader_begin(pack, &r) == 0) {
                listed_hint(r, path, hint, sizeof hint);
                sf_reader_end(r);
            }
            pk_pack_close(pack);
        }
        pk_err("cat: \"%s\" is not a URL path%s", path,
               hint[0]          ? hint
               : path[0] == '/' ? ""
                                : " (one starts with /, as in /index.html)");
        return PK_EXIT_USAGE;
    }
    if (pk_open_pack(site, &pack, &r) != 0)
        return PK_EXIT_FAIL;
    sf_entry e;
    int rc = special ? sf_lookup_special(r, path, &e) : sf_lookup(r, key, klen, &e);
    int slash = !special && key[klen - 1] == '/'; /* a directory's URL */
    if (rc == SF_ENOTFOUND && slash) {
        /* The directory index, as servd would serve it. */
        memcpy(key + klen, "index.html", sizeof "index.html");
        klen += strlen("index.html");
        rc = sf_lookup(r, key, klen, &e);
    }
    int status = PK_EXIT_FAIL;
    if (rc == SF_ENOTFOUND && !special && !slash && klen + sizeof "/index.html" <= sizeof key) {
        /* a directory named without its '/': servd answers a 301 to it */
        memcpy(key + klen, "/index.html", sizeof "/index.html");
        int dir = sf_lookup(r, key, klen + strlen("/index.html"), &e) == 0;
        key[klen] = '\0';
        if (dir) {
            /* the URL, as servd's Location writes it and cat takes it: the
             * key may hold a space ("/a dir/") or a '%' ("/100%/", which is
             * no URL path) */
            char url[3 * SF_KEY_MAX + 1];
            if (key_url(key, klen, url) != 0)
                url[0] = '\0';
            pk_err("%s: %s: no such path in the pack; servd answers it with a 301 to %s/ "
                   "(cat %s/ for the page)",
                   site, key, url, url);
            goto out_close_pack;
        }
    }
    if (rc != 0) {
        if (rc == SF_ENOTFOUND && !special)
            listed_hint(r, path, hint, sizeof hint);
        pk_err("%s: %s: %s%s", site, special ? path : key,
               rc == SF_ENOTFOUND ? "no such path in the pack" : sf_strerror(rc),
               rc == SF_ENOTFOUND && !special ? hint : "");
        goto out_close_pack;
    }
    if (e.kind != SF_KIND_FILE) {
        pk_err("%s: %s: a redirect to %.*s, not a file", site, key, (int)e.target.len,
               e.target.ptr);
        goto out_close_pack;
    }
    const sf_variant *v = NULL;
    for (unsigned i = 0; i < e.nvariants; i++)
        if (e.variants[i].encoding == encoding)
            v = &e.variants[i];
    if (!v) {
        char have[64];
        list_encodings(&e, have, sizeof have);
        pk_err("%s: %s has no %s variant (stored: %s)", site, special ? path : key,
               sf_encoding_name(encoding), have);
        goto out_close_pack;
    }
    sf_view out;
    if (headers) {
        out = v->h200;
    } else if ((rc = sf_body(r, v, &out)) != 0) {
        pk_err("%s: %s: %s body: %s", site, special ? path : key, sf_encoding_name(encoding),
               sf_strerror(rc));
        goto out_close_pack;
    }
    if ((out.len && fwrite(out.ptr, 1, out.len, stdout) != out.len) || fflush(stdout) != 0) {
        if (errno == EFAULT) /* the kernel read a page of the map cut off (guard.h) */
            pk_err("%s: " PK_GUARD_CUT, site);
        else
            pk_err("writing to stdout: %s", strerror(errno));
        goto out_close_pack;
    }
    status = PK_EXIT_OK;
out_close_pack:
    pk_close_pack(pack, r);
    return status;
}
