/*
 * sidecar.c - noting precompressed copies (sidecar.h).
 */
#include "sidecar.h"

#include "mime.h"

#include <stdlib.h>
#include <string.h>

static const char *const sidecar_ext[] = {".gz", ".br", ".zst"};

static int cmp_file(const void *a, const void *b)
{
    return strcmp(((const pk_file *)a)->key, ((const pk_file *)b)->key);
}

/* The file X of s that f would be a copy of under extension ext, or NULL. */
static const pk_file *sidecar_base(const pk_site *s, const pk_file *f, const char *ext)
{
    size_t el = strlen(ext);
    if (f->key_len <= el + 1 || strcmp(f->key + f->key_len - el, ext) != 0)
        return NULL;
    char base[SF_KEY_MAX + 1];
    memcpy(base, f->key, f->key_len - el);
    base[f->key_len - el] = '\0';
    pk_file probe = {.key = base};
    return bsearch(&probe, s->files, s->n, sizeof *s->files, cmp_file);
}

void pk_sidecars_note(pk_site *s)
{
    for (size_t i = 0; i < s->n; i++)
        for (size_t e = 0; e < sizeof sidecar_ext / sizeof sidecar_ext[0]; e++) {
            if (s->files[i].encoded) /* stored as what it contains: not a copy */
                break;
            const pk_file *x = sidecar_base(s, &s->files[i], sidecar_ext[e]);
            if (!x || x->cls == PK_CLASS_NONE)
                continue;
            if (s->nsidecar_names < PK_SIDECAR_NAMES)
                s->sidecar_names[s->nsidecar_names++] = s->files[i].key;
            s->sidecars++;
            break;
        }
}
