/*
 * compress.c - the three encoders at their strongest settings (compress.h).
 *
 * Each worker thread owns one pk_compressor; brotli's one-shot API keeps its
 * state internally per call, so only libdeflate and zstd need contexts.
 */
#include "compress.h"

#include "mime.h"
#include "sf/store.h"

#include <brotli/encode.h>
#include <libdeflate.h>
#include <stdio.h>
#include <stdlib.h>
#include <zstd.h>

struct pk_compressor {
    struct libdeflate_compressor *gz;
    ZSTD_CCtx *zs;
};

int pk_keep(uint64_t identity, uint64_t comp)
{
    if (comp >= identity)
        return 0;
    uint64_t saved = identity - comp;
    return saved >= PK_KEEP_MIN_BYTES && saved * 100 >= identity * PK_KEEP_MIN_PERCENT;
}

void pk_profile(char out[PK_PROFILE_SIZE])
{
    uint32_t bv = BrotliEncoderVersion();
    char cls[PK_CLASS_DIGEST_SIZE];
    pk_mime_class_digest(cls);
    snprintf(out, PK_PROFILE_SIZE,
             "r%d cls=%s gzip=libdeflate-%s/%d br=%u.%u.%u/%d/w%d zstd=%s/%d/w%d keep=%d%%/%dB",
             PK_PROFILE_REV, cls, LIBDEFLATE_VERSION_STRING, PK_GZIP_LEVEL, bv >> 24,
             bv >> 12 & 0xfff, bv & 0xfff, PK_BR_QUALITY, PK_BR_LGWIN, ZSTD_versionString(),
             PK_ZSTD_LEVEL, PK_ZSTD_WINDOW_LOG, PK_KEEP_MIN_PERCENT, PK_KEEP_MIN_BYTES);
}

pk_compressor *pk_compressor_new(void)
{
    pk_compressor *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->gz = libdeflate_alloc_compressor(PK_GZIP_LEVEL);
    c->zs = ZSTD_createCCtx();
    if (!c->gz || !c->zs) {
        pk_compressor_free(c);
        return NULL;
    }
    return c;
}

void pk_compressor_free(pk_compressor *c)
{
    if (!c)
        return;
    if (c->gz)
        libdeflate_free_compressor(c->gz);
    ZSTD_freeCCtx(c->zs);
    free(c);
}

static int gzip(pk_compressor *c, const uint8_t *in, size_t n, uint8_t *out, size_t cap,
                size_t *outn)
{
    size_t r = libdeflate_gzip_compress(c->gz, in, n, out, cap);
    if (r == 0)
        return -1;
    *outn = r;
    return 0;
}

static int brotli(int cls, const uint8_t *in, size_t n, uint8_t *out, size_t cap, size_t *outn)
{
    BrotliEncoderMode mode = cls == PK_CLASS_TEXT   ? BROTLI_MODE_TEXT
                             : cls == PK_CLASS_FONT ? BROTLI_MODE_FONT
                                                    : BROTLI_MODE_GENERIC;
    size_t r = cap;
    if (!BrotliEncoderCompress(PK_BR_QUALITY, PK_BR_LGWIN, mode, n, in, &r, out))
        return -1;
    *outn = r;
    return 0;
}

static int zstd(pk_compressor *c, const uint8_t *in, size_t n, uint8_t *out, size_t cap,
                size_t *outn)
{
    ZSTD_CCtx_reset(c->zs, ZSTD_reset_session_and_parameters);
    if (ZSTD_isError(ZSTD_CCtx_setParameter(c->zs, ZSTD_c_compressionLevel, PK_ZSTD_LEVEL)) ||
        ZSTD_isError(ZSTD_CCtx_setParameter(c->zs, ZSTD_c_windowLog, PK_ZSTD_WINDOW_LOG)) ||
        ZSTD_isError(ZSTD_CCtx_setParameter(c->zs, ZSTD_c_checksumFlag, 0)) ||
        ZSTD_isError(ZSTD_CCtx_setParameter(c->zs, ZSTD_c_contentSizeFlag, 1)))
        return -1;
    size_t r = ZSTD_compress2(c->zs, out, cap, in, n);
    if (ZSTD_isError(r))
        return -1;
    *outn = r;
    return 0;
}

int pk_compress(pk_compressor *c, int enc, int cls, const uint8_t *in, size_t n, uint8_t **out,
                size_t *outn, char *err, size_t errlen)
{
    size_t cap;
    switch (enc) {
    case SF_ENC_GZIP:
        cap = libdeflate_gzip_compress_bound(c->gz, n);
        break;
    case SF_ENC_BR:
        cap = BrotliEncoderMaxCompressedSize(n);
        break;
    case SF_ENC_ZSTD:
        cap = ZSTD_compressBound(n);
        break;
    default:
        snprintf(err, errlen, "unknown encoding %d", enc);
        return -1;
    }
    if (cap == 0) { /* brotli: input too large to bound */
        snprintf(err, errlen, "%s: input too large", sf_encoding_name(enc));
        return -1;
    }
    uint8_t *buf = malloc(cap);
    if (!buf) {
        snprintf(err, errlen, "%s: out of memory (%zu bytes)", sf_encoding_name(enc), cap);
        return -1;
    }
    int rc = enc == SF_ENC_GZIP ? gzip(c, in, n, buf, cap, outn)
             : enc == SF_ENC_BR ? brotli(cls, in, n, buf, cap, outn)
                                : zstd(c, in, n, buf, cap, outn);
    if (rc != 0) {
        snprintf(err, errlen, "%s compression failed", sf_encoding_name(enc));
        free(buf);
        return -1;
    }
    /* Give back the slack of the bound; a failed shrink keeps the big buffer. */
    uint8_t *shrunk = realloc(buf, *outn ? *outn : 1);
    *out = shrunk ? shrunk : buf;
    return 0;
}

unsigned pk_compress_cost(int enc)
{
    switch (enc) {
    case SF_ENC_GZIP:
        return 4;
    case SF_ENC_BR:
        return 20;
    case SF_ENC_ZSTD:
        return 8;
    default:
        return 1;
    }
}
