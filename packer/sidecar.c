/*
 * sidecar.c - finding and dropping true sidecars (sidecar.h).
 */
#include "sidecar.h"

#include "decode.h"
#include "mime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *ext;
    int enc;
} sidecar_ext[] = {{".gz", SF_ENC_GZIP}, {".br", SF_ENC_BR}, {".zst", SF_ENC_ZSTD}};

static int cmp_file(const void *a, const void *b)
{
    return strcmp(((const pk_file *)a)->key, ((const pk_file *)b)->key);
}

/* The file X of s that f would be a sidecar of under extension e, or NULL. */
static pk_file *sidecar_base(const pk_site *s, const pk_file *f, size_t e)
{
    size_t el = strlen(sidecar_ext[e].ext);
    if (f->key_len <= el + 1 || strcmp(f->key + f->key_len - el, sidecar_ext[e].ext) != 0)
        return NULL;
    char base[SF_KEY_MAX + 1];
    memcpy(base, f->key, f->key_len - el);
    base[f->key_len - el] = '\0';
    pk_file probe = {.key = base};
    return bsearch(&probe, s->files, s->n, sizeof *s->files, cmp_file);
}

void pk_sidecars_mark(pk_site *s)
{
    for (size_t i = 0; i < s->n; i++)
        for (size_t e = 0; e < sizeof sidecar_ext / sizeof sidecar_ext[0]; e++) {
            pk_file *x = sidecar_base(s, &s->files[i], e);
            if (x)
                s->files[i].keep_bytes = x->keep_bytes = 1;
        }
}

/* 1 if f is X.gz / X.br / X.zst of a packed X that servd-pack compresses
 * and decompresses to X (*base = X); 0 if not; -1 when memory ran out before
 * it could tell. Beside an X of a type stored only as identity (an image, a
 * disk image: PK_CLASS_NONE), X.gz is no precompressed copy: servd-pack
 * makes no variant to replace it, and a link to it is a download. */
static int true_sidecar(const pk_site *s, const pk_file *f, const pk_file **base)
{
    for (size_t e = 0; e < sizeof sidecar_ext / sizeof sidecar_ext[0]; e++) {
        const pk_file *x = sidecar_base(s, f, e);
        if (!x || x->cls == PK_CLASS_NONE)
            continue;
        const pk_variant *fv = &f->var[SF_ENC_IDENTITY];
        int same = pk_decompresses_to(sidecar_ext[e].enc, fv->bytes, fv->len,
                                      x->var[SF_ENC_IDENTITY].bytes, x->var[SF_ENC_IDENTITY].len);
        if (same != 0) {
            *base = x;
            return same;
        }
    }
    return 0;
}

int pk_sidecars_drop(pk_site *s, char *err, size_t errlen)
{
    if (s->n == 0)
        return 0;
    unsigned char *drop = calloc(s->n, 1);
    if (!drop) {
        snprintf(err, errlen, "out of memory checking sidecars");
        return -1;
    }
    size_t *base = malloc(s->n * sizeof *base);
    if (!base) {
        free(drop);
        snprintf(err, errlen, "out of memory checking sidecars");
        return -1;
    }
    for (size_t i = 0; i < s->n; i++) {
        const pk_file *x = NULL;
        int t = true_sidecar(s, &s->files[i], &x);
        if (t < 0) {
            /* kept, it would be packed as a file of its own: another pack */
            free(drop);
            free(base);
            snprintf(err, errlen, "%s: out of memory checking it as a sidecar", s->files[i].src);
            return -1;
        }
        drop[i] = (unsigned char)t;
        base[i] = t ? (size_t)(x - s->files) : i;
    }
    /* A sidecar of a dropped sidecar (X.gz.gz when a mime rule makes .gz
     * files text and X.gz goes) stays: nothing else would serve its bytes.
     * A base sorts before its sidecars (its key is their prefix), so its
     * verdict is final when theirs is looked at. */
    for (size_t i = 0; i < s->n; i++)
        if (drop[i] && drop[base[i]])
            drop[i] = 0;
    free(base);
    size_t o = 0;
    for (size_t i = 0; i < s->n; i++) {
        pk_file *f = &s->files[i];
        if (!drop[i]) {
            s->files[o++] = *f;
            continue;
        }
        if (s->nsidecar_names < PK_SIDECAR_NAMES)
            s->sidecar_names[s->nsidecar_names++] = f->key; /* ownership moves */
        else
            free(f->key);
        free(f->src);
        free(f->mime);
        if (f->var[SF_ENC_IDENTITY].owned)
            free((void *)f->var[SF_ENC_IDENTITY].bytes);
        s->skipped_sidecar++;
    }
    s->n = o;
    free(drop);
    return 0;
}
