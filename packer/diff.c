/*
 * diff.c - servd-pack diff OLD NEW: the paths a CDN must purge.
 *
 * A path is "changed" when anything a client could see differs: the type,
 * the set of encodings, any variant's ETag, or any byte of its 200 / 304
 * header blocks (so a new Cache-Control or Last-Modified counts too).
 * Output, sorted by path: "+ /added", "~ /changed", "- /removed", or with
 * --json {"added": [...], "changed": [...], "removed": [...]}. Exit 0 either
 * way; a failure to read a pack is exit 1.
 */
#include "commands.h"

#include "digest.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct item {
    char *path;
    size_t len;
    uint8_t fp[PK_DIGEST_LEN]; /* fingerprint of everything visible */
} item;

typedef struct list {
    item *v;
    size_t n, cap;
    int failed;
} list;

static void fp_view(pk_sha *s, sf_view v)
{
    uint64_t n = v.len;
    pk_sha_update(s, &n, sizeof n); /* length-prefixed: no ambiguity */
    pk_sha_update(s, v.ptr, v.len);
}

static int collect(void *arg, sf_view path, const sf_entry *e)
{
    list *l = arg;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 256;
        item *nv = realloc(l->v, cap * sizeof *nv);
        if (!nv)
            goto out_nomem;
        l->v = nv;
        l->cap = cap;
    }
    item *it = &l->v[l->n];
    pk_sha *s = pk_sha_new();
    if (!s || !(it->path = strndup(path.ptr, path.len))) {
        pk_sha_free(s);
        goto out_nomem;
    }
    it->len = path.len;
    uint32_t head[3] = {(uint32_t)e->kind, e->flags, e->nvariants};
    pk_sha_update(s, head, sizeof head);
    fp_view(s, e->mime);
    fp_view(s, e->target);
    for (unsigned i = 0; i < e->nvariants; i++) {
        const sf_variant *v = &e->variants[i];
        uint32_t enc = (uint32_t)v->encoding;
        pk_sha_update(s, &enc, sizeof enc);
        fp_view(s, v->etag);
        fp_view(s, v->h200);
        fp_view(s, v->h304);
    }
    if (pk_sha_final(s, it->fp) != 0) {
        free(it->path);
        goto out_nomem;
    }
    l->n++;
    return 0;
out_nomem:
    l->failed = 1;
    return SF_ENOMEM;
}

static int load(const char *site, list *l)
{
    sf_pack *pack;
    sf_reader *r;
    if (pk_open_pack(site, &pack, &r) != 0)
        return -1;
    char err[512] = "";
    int rc = sf_foreach_path(r, collect, l, err, sizeof err);
    pk_close_pack(pack, r);
    if (rc != 0) {
        fprintf(stderr, "servd-pack: %s: %s\n", site, err[0] ? err : sf_strerror(rc));
        return -1;
    }
    return 0;
}

static void free_list(list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i].path);
    free(l->v);
}

/* Byte order, as LMDB sorts keys: memcmp, then the shorter first. */
static int cmp_key(const item *a, const item *b)
{
    size_t n = a->len < b->len ? a->len : b->len;
    int c = memcmp(a->path, b->path, n);
    return c ? c : (a->len > b->len) - (a->len < b->len);
}

static void emit(json_t *arr, char sign, const item *it)
{
    if (arr)
        json_array_append_new(arr, json_stringn_nocheck(it->path, it->len));
    else
        printf("%c %s\n", sign, it->path);
}

int pk_cmd_diff(const char *old_site, const char *new_site, int json)
{
    list a = {0}, b = {0};
    int status = PK_EXIT_FAIL;
    if (load(old_site, &a) != 0 || load(new_site, &b) != 0)
        goto out;
    json_t *added = NULL, *changed = NULL, *removed = NULL;
    if (json &&
        (!(added = json_array()) || !(changed = json_array()) || !(removed = json_array()))) {
        fprintf(stderr, "servd-pack: out of memory\n");
        goto out_json;
    }
    size_t i = 0, j = 0;
    while (i < a.n || j < b.n) {
        int c = i == a.n ? 1 : j == b.n ? -1 : cmp_key(&a.v[i], &b.v[j]);
        if (c < 0) {
            emit(removed, '-', &a.v[i++]);
        } else if (c > 0) {
            emit(added, '+', &b.v[j++]);
        } else {
            if (memcmp(a.v[i].fp, b.v[j].fp, PK_DIGEST_LEN) != 0)
                emit(changed, '~', &b.v[j]);
            i++;
            j++;
        }
    }
    if (json) {
        json_t *doc =
            json_pack("{s:O, s:O, s:O}", "added", added, "changed", changed, "removed", removed);
        if (!doc || json_dumpf(doc, stdout,
                               JSON_INDENT(2) | JSON_ENSURE_ASCII | JSON_PRESERVE_ORDER) != 0) {
            fprintf(stderr, "servd-pack: cannot write the diff\n");
            json_decref(doc);
            goto out_json;
        }
        putchar('\n');
        json_decref(doc);
    }
    if (fflush(stdout) != 0) {
        fprintf(stderr, "servd-pack: cannot write the diff to stdout\n");
        goto out_json;
    }
    status = PK_EXIT_OK;
out_json:
    json_decref(added);
    json_decref(changed);
    json_decref(removed);
out:
    free_list(&a);
    free_list(&b);
    return status;
}
