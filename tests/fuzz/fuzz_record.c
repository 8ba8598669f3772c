/*
 * fuzz_record - the pack's record decoders on arbitrary bytes (every byte of
 * a pack is untrusted). sf_entry_decode(): on success every view lies inside
 * the record, rep is a suffix of h200 and the kinds and counts are valid.
 * sf_meta_decode(): on success its strings are NUL-terminated and the
 * major version is the one this build reads.
 */
#include "sf/store.h"

#include <stdlib.h>
#include <string.h>

static void within(sf_view v, const uint8_t *p, size_t n)
{
    if (v.len == 0)
        return;
    const char *b = (const char *)p;
    if (v.ptr < b || v.ptr > b + n || v.len > (size_t)(b + n - v.ptr))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *p = malloc(size ? size : 1);
    if (!p)
        return 0;
    memcpy(p, data, size);
    sf_entry e;
    if (sf_entry_decode(p, size, &e) == 0) {
        if (e.kind != SF_KIND_FILE && e.kind != SF_KIND_REDIRECT)
            abort();
        if (e.nvariants > SF_ENC_COUNT || (e.kind == SF_KIND_FILE && e.nvariants == 0))
            abort();
        within(e.mime, p, size);
        within(e.target, p, size);
        for (unsigned i = 0; i < e.nvariants; i++) {
            const sf_variant *v = &e.variants[i];
            if (v->encoding < 0 || v->encoding >= SF_ENC_COUNT)
                abort();
            within(v->etag, p, size);
            within(v->h200, p, size);
            within(v->rep, p, size);
            within(v->h304, p, size);
            if (v->rep.ptr < v->h200.ptr || v->rep.ptr + v->rep.len != v->h200.ptr + v->h200.len)
                abort();
            if (v->body_key < p || v->body_key + SF_KEY_LEN > p + size)
                abort();
        }
    }
    sf_meta m;
    if (sf_meta_decode(p, size, &m) == 0) {
        if (strlen(m.packer) > 64 || strlen(m.profile) > 128 || m.major != SF_FORMAT_MAJOR)
            abort();
    }
    free(p);
    return 0;
}
