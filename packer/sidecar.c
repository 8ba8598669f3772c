/*
 * sidecar.c - noting precompressed copies (sidecar.h).
 */
#include "sidecar.h"

#include "mime.h"
#include "walk.h"

#include <stdlib.h>
#include <string.h>

/* The file X of s that f is a copy of (f is X.gz, X.br or X.zst: the
 * suffixes of pk_encoded_suffix), or NULL. */
static const pk_file *sidecar_base(const pk_site *s, const pk_file *f)
{
    int enc;
    size_t sfx = pk_encoded_suffix(f->key, f->key_len, &enc);
    if (!sfx)
        return NULL;
    char base[SF_KEY_MAX + 1];
    memcpy(base, f->key, f->key_len - sfx);
    base[f->key_len - sfx] = '\0';
    return pk_site_find(s, base);
}

void pk_sidecars_note(pk_site *s)
{
    for (size_t i = 0; i < s->n; i++) {
        if (s->files[i].encoded) /* stored as what it contains: not a copy */
            continue;
        const pk_file *x = sidecar_base(s, &s->files[i]);
        if (!x || x->cls == PK_CLASS_NONE)
            continue;
        if (s->nsidecar_names < PK_SIDECAR_NAMES)
            s->sidecar_names[s->nsidecar_names++] = s->files[i].key;
        s->sidecars++;
    }
}
