/*
 * base.c - indexing an old pack by identity digest (base.h).
 */
#include "base.h"
#include "commands.h"

#include "headers.h"

#include "mime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct pk_base {
    sf_pack *pack;
    sf_reader *reader;
    pk_base_entry *v;
    size_t n, cap;
    const char *path;
    char *err;
    size_t errlen;
};

static int cmp_entry(const void *a, const void *b)
{
    const pk_base_entry *x = a, *y = b;
    int c = memcmp(x->digest, y->digest, PK_DIGEST_LEN);
    return c ? c : (x->cls > y->cls) - (x->cls < y->cls);
}

/* index_path's failure: positive, so it cannot be mistaken for an SF_E* code
 * returned by sf_foreach_path itself. */
#define INDEX_FAILED 1

/* A buffer for a type copied out of a record to NUL-terminate it. */
#define MIME_COPY_MAX 256

static int index_path(void *arg, sf_view path, const sf_entry *e)
{
    pk_base *b = arg;
    if (e->kind != SF_KIND_FILE)
        return 0;
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 256;
        pk_base_entry *nv = realloc(b->v, cap * sizeof *nv);
        if (!nv) {
            snprintf(b->err, b->errlen, "%s: out of memory", b->path);
            return INDEX_FAILED;
        }
        b->v = nv;
        b->cap = cap;
    }
    pk_base_entry *be = &b->v[b->n];
    memset(be, 0, sizeof *be);
    memcpy(be->digest, e->variants[0].body_key, PK_DIGEST_LEN);
    char mime[MIME_COPY_MAX];
    size_t ml = e->mime.len < sizeof mime - 1 ? e->mime.len : sizeof mime - 1;
    memcpy(mime, e->mime.ptr, ml);
    mime[ml] = '\0';
    be->cls = pk_mime_class(mime);
    /* compressed variants of a type never compressed: a file of an encoded
     * rule, whose class read.c raises the same way */
    if (be->cls == PK_CLASS_NONE && e->nvariants > 1)
        be->cls = PK_CLASS_BINARY;
    for (unsigned i = 1; i < e->nvariants; i++) {
        const sf_variant *v = &e->variants[i];
        sf_view body;
        int rc = sf_body(b->reader, v, &body);
        if (rc != 0) {
            snprintf(b->err, b->errlen, "%s: %.*s: %s body: %s", b->path, (int)path.len, path.ptr,
                     sf_encoding_name(v->encoding), sf_strerror(rc));
            return INDEX_FAILED;
        }
        be->v[be->nvar].encoding = v->encoding;
        be->v[be->nvar].bytes = body;
        memcpy(be->v[be->nvar].key, v->body_key, SF_KEY_LEN);
        be->nvar++;
    }
    b->n++;
    return 0;
}

int pk_base_open(const char *path, const char *profile, pk_base **out, int *usable, char *err,
                 size_t errlen)
{
    pk_base *b = calloc(1, sizeof *b);
    if (!b) {
        snprintf(err, errlen, "%s: out of memory", path);
        return -1;
    }
    b->path = path;
    b->err = err;
    b->errlen = errlen;
    /* an older pack may be damaged: walked in a child first */
    if (pk_pack_open_checked(path, &b->pack, err, errlen) != 0)
        goto out_free;
    /* The reader is needed whatever the profile (pk_base_last_modified);
     * the bodies are indexed only when they can be reused. */
    int rc = sf_reader_begin(b->pack, &b->reader);
    if (rc != 0) {
        snprintf(err, errlen, "%s: %s", path, sf_strerror(rc));
        goto out_free;
    }
    *usable = strcmp(sf_pack_meta(b->pack)->profile, profile) == 0;
    if (*usable) {
        char why[512] = "";
        rc = sf_foreach_path(b->reader, index_path, b, why, sizeof why);
        if (rc == SF_ECORRUPT && why[0]) {
            snprintf(err, errlen, "%s: %s", path, why);
            goto out_free;
        }
        if (rc != 0) {
            if (rc != INDEX_FAILED) /* else index_path wrote the message */
                snprintf(err, errlen, "%s: %s", path, sf_strerror(rc));
            goto out_free;
        }
        if (b->n)
            qsort(b->v, b->n, sizeof *b->v, cmp_entry);
    }
    *out = b;
    return 0;
out_free:
    pk_base_close(b);
    return -1;
}

const pk_base_entry *pk_base_find(const pk_base *b, const uint8_t digest[PK_DIGEST_LEN], int cls)
{
    if (!b || !b->n)
        return NULL;
    pk_base_entry probe;
    memcpy(probe.digest, digest, PK_DIGEST_LEN);
    probe.cls = cls;
    return bsearch(&probe, b->v, b->n, sizeof *b->v, cmp_entry);
}

int pk_base_unmarked_packing_time(const pk_base *b, int64_t date)
{
    const sf_meta *m = sf_pack_meta(b->pack);
    return m->minor < 3 && date == m->created;
}

const char *pk_base_profile(const pk_base *b)
{
    return sf_pack_meta(b->pack)->profile;
}

void pk_base_close(pk_base *b)
{
    if (!b)
        return;
    sf_reader_end(b->reader);
    pk_pack_close(b->pack);
    free(b->v);
    free(b);
}

int pk_base_last_modified(const pk_base *b, const char *key, size_t len,
                          const uint8_t digest[PK_DIGEST_LEN], const char *mime, const char *extras,
                          size_t extras_len, int64_t *lm, int *weak)
{
    sf_entry e;
    const char *old_extras;
    size_t old_len;
    if (!b || !b->reader || sf_lookup(b->reader, key, len, &e) != 0 || e.kind != SF_KIND_FILE)
        return -1;
    *lm = e.last_modified;
    *weak = (e.flags & SF_ENTRY_DATE_WEAK) != 0;
    if (memcmp(e.variants[0].body_key, digest, PK_DIGEST_LEN) != 0 || e.mime.len != strlen(mime) ||
        memcmp(e.mime.ptr, mime, e.mime.len) != 0 ||
        pk_extras_of_200(e.variants[0].h200.ptr, e.variants[0].h200.len, &old_extras, &old_len) !=
            0 ||
        old_len != extras_len || (extras_len && memcmp(old_extras, extras, extras_len) != 0))
        return 0;
    return 1;
}
