/*
 * record.c - the byte layout of entry and meta records (docs/format.md).
 *
 * All integers are little-endian and unaligned: records are read with
 * memcpy-free byte loads so that a record may sit at any address in the map.
 * Bytes from a pack are untrusted: every offset and length is checked
 * against the record's own length before a view is made.
 *
 * Entry record, version 1:
 *   OFFSET SIZE DESCRIPTION
 *   0      1    kind (1 file, 2 redirect)
 *   1      1    nvariants (file: 1..4, redirect: 0)
 *   2      2    flags (bit 0: negotiable; bit 1, minor 3: the date is weak)
 *   4      4    blob_len
 *   8      8    last_modified, signed Unix seconds
 *   16     4    mime_off     (in blob)
 *   20     4    mime_len
 *   24     4    target_off   (in blob)
 *   28     4    target_len
 *   32     72n  variant descriptors
 *   32+72n blob_len  blob: the bytes every (off, len) pair points into
 *
 * Variant descriptor (72 bytes):
 *   0  1  encoding     4  4 etag_off    8  4 etag_len
 *   12 4  h200_off     16 4 h200_len    20 4 rep_off (inside h200)
 *   24 4  h304_off     28 4 h304_len    32 8 body_len
 *   40 32 body_key (SHA-256 of the stored bytes)
 *   1..3 are reserved and zero.
 */
#include "sf/store.h"

#include <stdlib.h>
#include <string.h>

#define ENTRY_HEAD  32
#define VARIANT_LEN 72
#define VARIANT_KEY 40 /* body_key's offset in a variant descriptor */

static uint16_t ld16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t ld32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t ld64(const uint8_t *p)
{
    return (uint64_t)ld32(p) | (uint64_t)ld32(p + 4) << 32;
}

static void st16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static void st32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void st64(uint8_t *p, uint64_t v)
{
    st32(p, (uint32_t)v);
    st32(p + 4, (uint32_t)(v >> 32));
}

/* Makes a view of blob[off, off + len) if it lies inside the blob. */
static int blob_view(const uint8_t *blob, uint32_t blob_len, uint32_t off, uint32_t len,
                     sf_view *out)
{
    if (off > blob_len || len > blob_len - off)
        return SF_ECORRUPT;
    out->ptr = (const char *)blob + off;
    out->len = len;
    return SF_OK;
}

int sf_entry_decode(const void *rec, size_t n, sf_entry *e)
{
    const uint8_t *p = rec;
    if (n < ENTRY_HEAD)
        return SF_ECORRUPT;
    e->kind = p[0];
    e->nvariants = p[1];
    e->flags = ld16(p + 2);
    uint32_t blob_len = ld32(p + 4);
    e->last_modified = (int64_t)ld64(p + 8);

    if (e->kind == SF_KIND_FILE) {
        if (e->nvariants < 1 || e->nvariants > SF_ENC_COUNT)
            return SF_ECORRUPT;
    } else if (e->kind == SF_KIND_REDIRECT) {
        if (e->nvariants != 0)
            return SF_ECORRUPT;
    } else {
        return SF_ECORRUPT;
    }
    /* The flag decides whether the pre-rendered blocks carry Vary. */
    if (!!(e->flags & SF_ENTRY_NEGOTIABLE) != (e->nvariants > 1))
        return SF_ECORRUPT;
    size_t need = ENTRY_HEAD + (size_t)VARIANT_LEN * e->nvariants + blob_len;
    if (n != need)
        return SF_ECORRUPT;
    const uint8_t *blob = p + ENTRY_HEAD + VARIANT_LEN * e->nvariants;

    if (blob_view(blob, blob_len, ld32(p + 16), ld32(p + 20), &e->mime) ||
        blob_view(blob, blob_len, ld32(p + 24), ld32(p + 28), &e->target))
        return SF_ECORRUPT;

    unsigned seen = 0;
    for (unsigned i = 0; i < e->nvariants; i++) {
        const uint8_t *d = p + ENTRY_HEAD + VARIANT_LEN * i;
        sf_variant *v = &e->variants[i];
        v->encoding = d[0];
        if (v->encoding >= SF_ENC_COUNT || (seen & 1u << v->encoding))
            return SF_ECORRUPT;
        if (i == 0 && v->encoding != SF_ENC_IDENTITY)
            return SF_ECORRUPT;
        seen |= 1u << v->encoding;
        if (blob_view(blob, blob_len, ld32(d + 4), ld32(d + 8), &v->etag) ||
            blob_view(blob, blob_len, ld32(d + 12), ld32(d + 16), &v->h200) ||
            blob_view(blob, blob_len, ld32(d + 24), ld32(d + 28), &v->h304))
            return SF_ECORRUPT;
        uint32_t rep_off = ld32(d + 20), h200_off = ld32(d + 12);
        if (rep_off < h200_off || rep_off - h200_off > v->h200.len)
            return SF_ECORRUPT;
        v->rep.ptr = v->h200.ptr + (rep_off - h200_off);
        v->rep.len = v->h200.len - (rep_off - h200_off);
        v->body_len = ld64(d + 32);
        v->body_key = d + VARIANT_KEY;
    }
    return SF_OK;
}

uint32_t sf_variant_reserved(const sf_variant *v)
{
    const uint8_t *d = v->body_key - VARIANT_KEY; /* the descriptor the key ends */
    return (uint32_t)d[1] | (uint32_t)d[2] << 8 | (uint32_t)d[3] << 16;
}

/* Appends s to the blob being built; returns its offset. */
static uint32_t put(uint8_t *blob, uint32_t *used, sf_view s)
{
    uint32_t off = *used;
    if (s.len)
        memcpy(blob + off, s.ptr, s.len);
    *used += (uint32_t)s.len;
    return off;
}

/* Where s already lies in the blob written so far, else put(): an ETag is
 * in its 200 block's ETag line, the type in a Content-Type line. The
 * bytes saved keep a small file's record, four variants with their 200 and
 * 304 blocks, under LMDB's node limit (2038 bytes with the key on 4 KiB
 * pages): just over it, every path took an overflow page of its own. */
static uint32_t share(uint8_t *blob, uint32_t *used, sf_view s)
{
    const uint8_t *at = s.len ? memmem(blob, *used, s.ptr, s.len) : NULL;
    return at ? (uint32_t)(at - blob) : put(blob, used, s);
}

int sf_entry_encode(const sf_entry_spec *s, uint8_t **out, size_t *outlen)
{
    if (s->kind == SF_KIND_FILE) {
        if (s->nvariants < 1 || s->nvariants > SF_ENC_COUNT ||
            s->variants[0].encoding != SF_ENC_IDENTITY)
            return SF_EINVAL;
    } else if (s->kind != SF_KIND_REDIRECT || s->nvariants != 0) {
        return SF_EINVAL;
    }
    if (!!(s->flags & SF_ENTRY_NEGOTIABLE) != (s->nvariants > 1))
        return SF_EINVAL;
    uint64_t blob_len = s->mime.len + s->target.len; /* at most: share() may save some */
    unsigned seen = 0;
    for (unsigned i = 0; i < s->nvariants; i++) {
        const sf_variant_spec *v = &s->variants[i];
        if (v->rep_off > v->h200.len || v->encoding < 0 || v->encoding >= SF_ENC_COUNT ||
            (seen & 1u << v->encoding))
            return SF_EINVAL; /* what sf_entry_decode would refuse */
        seen |= 1u << v->encoding;
        blob_len += v->etag.len + v->h200.len + v->h304.len;
    }
    if (blob_len > UINT32_MAX / 2)
        return SF_EINVAL;
    size_t n = ENTRY_HEAD + (size_t)VARIANT_LEN * s->nvariants + blob_len;
    uint8_t *p = calloc(1, n);
    if (!p)
        return SF_ENOMEM;
    uint8_t *blob = p + ENTRY_HEAD + VARIANT_LEN * s->nvariants;
    uint32_t used = 0;

    p[0] = (uint8_t)s->kind;
    p[1] = (uint8_t)s->nvariants;
    st16(p + 2, (uint16_t)s->flags);
    st64(p + 8, (uint64_t)s->last_modified);
    st32(p + 24, put(blob, &used, s->target));
    st32(p + 28, (uint32_t)s->target.len);
    for (unsigned i = 0; i < s->nvariants; i++) {
        const sf_variant_spec *v = &s->variants[i];
        uint8_t *d = p + ENTRY_HEAD + VARIANT_LEN * i;
        d[0] = (uint8_t)v->encoding;
        uint32_t h200_off = put(blob, &used, v->h200);
        st32(d + 4, share(blob, &used, v->etag));
        st32(d + 8, (uint32_t)v->etag.len);
        st32(d + 12, h200_off);
        st32(d + 16, (uint32_t)v->h200.len);
        st32(d + 20, h200_off + (uint32_t)v->rep_off);
        st32(d + 24, share(blob, &used, v->h304));
        st32(d + 28, (uint32_t)v->h304.len);
        st64(d + 32, v->body_len);
        memcpy(d + VARIANT_KEY, v->body_key, SF_KEY_LEN);
    }
    st32(p + 16, share(blob, &used, s->mime));
    st32(p + 20, (uint32_t)s->mime.len);
    st32(p + 4, used);
    *out = p;
    *outlen = n - ((size_t)blob_len - used); /* the calloc'd tail is not part of it */
    return SF_OK;
}

/*
 * Meta record:
 *   OFFSET SIZE DESCRIPTION
 *   0      8    magic "SERVDPK1"
 *   8      2    format major      10  2  format minor     12  4  reserved (0)
 *   16     8    created, signed Unix seconds
 *   24     8    n_paths           32  8  n_bodies
 *   40     8    identity_bytes    48  8  stored_bytes
 *   56     16   pack id
 *   72     64   packer version, NUL-padded UTF-8
 *   136    128  compression profile, NUL-padded
 *   264    16   id_404 (minor 1; reserved, 0, in minor 0)
 * A later minor version may append fields: readers accept n >= 280.
 */
void sf_meta_encode(const sf_meta *m, uint8_t b[SF_META_RECORD_LEN])
{
    memset(b, 0, SF_META_RECORD_LEN);
    memcpy(b, SF_META_MAGIC, SF_META_MAGIC_LEN);
    st16(b + 8, SF_FORMAT_MAJOR);
    st16(b + 10, SF_FORMAT_MINOR);
    st64(b + 16, (uint64_t)m->created);
    st64(b + 24, m->n_paths);
    st64(b + 32, m->n_bodies);
    st64(b + 40, m->identity_bytes);
    st64(b + 48, m->stored_bytes);
    memcpy(b + 56, m->pack_id, 16);
    memcpy(b + SF_META_PACKER_OFF, m->packer, strnlen(m->packer, SF_META_PACKER_LEN));
    memcpy(b + SF_META_PROFILE_OFF, m->profile, strnlen(m->profile, SF_META_PROFILE_LEN));
    memcpy(b + SF_META_ID404_OFF, m->id_404, SF_PACK_ID_LEN);
}

int sf_meta_decode(const void *rec, size_t n, sf_meta *m)
{
    const uint8_t *b = rec;
    if (n < 12 || memcmp(b, SF_META_MAGIC, SF_META_MAGIC_LEN) != 0)
        return SF_EMAGIC;
    m->major = ld16(b + 8);
    m->minor = ld16(b + 10);
    if (m->major != SF_FORMAT_MAJOR)
        return SF_EVERSION;
    if (n < SF_META_RECORD_LEN)
        return SF_ECORRUPT;
    m->created = (int64_t)ld64(b + 16);
    m->n_paths = ld64(b + 24);
    m->n_bodies = ld64(b + 32);
    m->identity_bytes = ld64(b + 40);
    m->stored_bytes = ld64(b + 48);
    memcpy(m->pack_id, b + 56, 16);
    memcpy(m->packer, b + SF_META_PACKER_OFF, SF_META_PACKER_LEN);
    m->packer[SF_META_PACKER_LEN] = '\0';
    memcpy(m->profile, b + SF_META_PROFILE_OFF, SF_META_PROFILE_LEN);
    m->profile[SF_META_PROFILE_LEN] = '\0';
    memcpy(m->id_404, b + SF_META_ID404_OFF, SF_PACK_ID_LEN); /* reserved, so zero, in minor 0 */
    return SF_OK;
}

static const char *const enc_names[SF_ENC_COUNT] = {"identity", "gzip", "br", "zstd"};

const char *sf_encoding_name(int enc)
{
    return enc >= 0 && enc < SF_ENC_COUNT ? enc_names[enc] : NULL;
}

int sf_encoding_parse(const char *s, size_t len)
{
    for (int i = 0; i < SF_ENC_COUNT; i++)
        if (strlen(enc_names[i]) == len && memcmp(enc_names[i], s, len) == 0)
            return i;
    return -1;
}

const char *sf_strerror(int err)
{
    switch (err) {
    case SF_OK:
        return "success";
    case SF_ENOTFOUND:
        return "not found";
    case SF_ECORRUPT:
        return "corrupt record";
    case SF_EVERSION:
        return "unsupported pack format version";
    case SF_EMAGIC:
        return "not a servd pack";
    case SF_EIO:
        return "I/O error";
    case SF_ELMDB:
        return "LMDB error";
    case SF_ENOMEM:
        return "out of memory";
    case SF_EINVAL:
        return "invalid argument";
    case SF_EPATH:
        return "invalid path";
    case SF_ETOOLONG:
        return "too long";
    case SF_EFULL:
        return "pack map full";
    case SF_ETIMEDOUT:
        return "the check did not finish in time";
    case SF_ECANCELED:
        return "abandoned";
    }
    return "unknown error";
}
