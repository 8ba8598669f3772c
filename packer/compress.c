/*
 * compress.c - the three encoders at their strongest settings (compress.h).
 *
 * Each worker thread owns one pk_compressor: libdeflate and zstd contexts,
 * kept between files; a brotli encoder is made for each file.
 */
#include "compress.h"

#include "mime.h"
#include "sf/store.h"

#include <brotli/encode.h>
#include <libdeflate.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
/* ZSTD_getCParams and ZSTD_estimateCCtxSize_usingCParams: zstd's
 * "experimental" API, stable since 1.4 and exported by the shared library
 * Debian builds */
#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>
#include <zstd_errors.h>

/* brotli()'s result when its encoder ran out of memory. */
#define PK_COMPRESS_NOMEM 2

typedef struct br_link {
    struct br_link *prev, *next;
} br_link;

typedef struct br_block {
    br_link link;
    max_align_t bytes[]; /* the caller's */
} br_block;

typedef struct br_arena {
    br_link live; /* the blocks not freed yet */
    jmp_buf out_of_memory;
} br_arena;

struct pk_compressor {
    struct libdeflate_compressor *gz;
    ZSTD_CCtx *zs;
    br_arena br; /* not a local of brotli(): it changes between setjmp and longjmp */
};

int pk_keep(uint64_t identity, uint64_t comp)
{
    if (comp >= identity)
        return 0;
    uint64_t saved = identity - comp;
    return saved >= PK_KEEP_MIN_BYTES && saved * 100 >= identity * PK_KEEP_MIN_PERCENT;
}

int pk_profile(char out[PK_PROFILE_SIZE])
{
    uint32_t bv = BrotliEncoderVersion();
    char cls[PK_CLASS_DIGEST_SIZE];
    if (pk_mime_class_digest(cls) != 0)
        return -1;
    snprintf(out, PK_PROFILE_SIZE,
             "r%d cls=%s gzip=libdeflate-%s/%d br=%u.%u.%u/%d/w%d zstd=%s/%d/w%d keep=%d%%/%dB",
             PK_PROFILE_REV, cls, LIBDEFLATE_VERSION_STRING, PK_GZIP_LEVEL, bv >> 24,
             bv >> 12 & 0xfff, bv & 0xfff, PK_BR_QUALITY, PK_BR_LGWIN, ZSTD_versionString(),
             PK_ZSTD_LEVEL, PK_ZSTD_WINDOW_LOG, PK_KEEP_MIN_PERCENT, PK_KEEP_MIN_BYTES);
    return 0;
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

/* brotli's encoder (1.0.9, as Debian builds it) calls exit(1) when an
 * allocation fails: the build ended without a word. So the encoder
 * allocates through br_alloc, which keeps every block on a list and, when
 * malloc fails, jumps back to brotli(): the blocks are freed there and the
 * failure is an error like any other. */
static void *br_alloc(void *opaque, size_t n)
{
    br_arena *a = opaque;
    br_block *b = n <= SIZE_MAX - sizeof *b ? malloc(sizeof *b + n) : NULL;
    if (!b)
        longjmp(a->out_of_memory, 1);
    b->link.prev = &a->live;
    b->link.next = a->live.next;
    a->live.next->prev = &b->link;
    a->live.next = &b->link;
    return b->bytes;
}

static void br_unlink_free(br_link *l)
{
    l->prev->next = l->next;
    l->next->prev = l->prev;
    free(l); /* the link is the block's first member */
}

static void br_free(void *opaque, void *p)
{
    (void)opaque;
    if (p)
        br_unlink_free((br_link *)((char *)p - offsetof(br_block, bytes)));
}

/* What BrotliEncoderCompress does (the same bytes), through br_alloc. */
static int brotli(pk_compressor *c, int cls, const uint8_t *in, size_t n, uint8_t *out, size_t cap,
                  size_t *outn)
{
    BrotliEncoderMode mode = cls == PK_CLASS_TEXT   ? BROTLI_MODE_TEXT
                             : cls == PK_CLASS_FONT ? BROTLI_MODE_FONT
                                                    : BROTLI_MODE_GENERIC;
    if (n == 0) { /* BrotliEncoderCompress's own answer: an empty last block */
        out[0] = 6;
        *outn = 1;
        return 0;
    }
    br_arena *a = &c->br;
    a->live.prev = a->live.next = &a->live;
    if (setjmp(a->out_of_memory) != 0) {
        while (a->live.next != &a->live)
            br_unlink_free(a->live.next);
        return PK_COMPRESS_NOMEM;
    }
    BrotliEncoderState *s = BrotliEncoderCreateInstance(br_alloc, br_free, a);
    if (!s)
        return -1;
    BrotliEncoderSetParameter(s, BROTLI_PARAM_QUALITY, PK_BR_QUALITY);
    BrotliEncoderSetParameter(s, BROTLI_PARAM_LGWIN, PK_BR_LGWIN);
    BrotliEncoderSetParameter(s, BROTLI_PARAM_MODE, (uint32_t)mode);
    BrotliEncoderSetParameter(s, BROTLI_PARAM_SIZE_HINT, (uint32_t)n);
    size_t avail_in = n, avail_out = cap, total = 0;
    const uint8_t *next_in = in;
    uint8_t *next_out = out;
    int ok = BrotliEncoderCompressStream(s, BROTLI_OPERATION_FINISH, &avail_in, &next_in,
                                         &avail_out, &next_out, &total) &&
             BrotliEncoderIsFinished(s);
    BrotliEncoderDestroyInstance(s);
    if (!ok)
        return -1;
    *outn = total;
    return 0;
}

static int zstd(pk_compressor *c, const uint8_t *in, size_t n, uint8_t *out, size_t cap,
                size_t *outn)
{
    if (!c->zs && !(c->zs = ZSTD_createCCtx()))
        return PK_COMPRESS_NOMEM;
    ZSTD_CCtx_reset(c->zs, ZSTD_reset_session_and_parameters);
    if (ZSTD_isError(ZSTD_CCtx_setParameter(c->zs, ZSTD_c_compressionLevel, PK_ZSTD_LEVEL)) ||
        ZSTD_isError(ZSTD_CCtx_setParameter(c->zs, ZSTD_c_windowLog, PK_ZSTD_WINDOW_LOG)) ||
        ZSTD_isError(ZSTD_CCtx_setParameter(c->zs, ZSTD_c_checksumFlag, 0)) ||
        ZSTD_isError(ZSTD_CCtx_setParameter(c->zs, ZSTD_c_contentSizeFlag, 1)))
        return -1;
    size_t r = ZSTD_compress2(c->zs, out, cap, in, n);
    if (ZSTD_sizeof_CCtx(c->zs) > PK_ZSTD_KEEP_BYTES) { /* made again for the next file */
        ZSTD_freeCCtx(c->zs);
        c->zs = NULL;
    }
    if (ZSTD_isError(r))
        return ZSTD_getErrorCode(r) == ZSTD_error_memory_allocation ? PK_COMPRESS_NOMEM : -1;
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
             : enc == SF_ENC_BR ? brotli(c, cls, in, n, buf, cap, outn)
                                : zstd(c, in, n, buf, cap, outn);
    if (rc != 0) {
        snprintf(err, errlen, "%s compression failed%s", sf_encoding_name(enc),
                 rc == PK_COMPRESS_NOMEM ? ": out of memory" : "");
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

/* Brotli at quality 11 (1.0.9) reserves its whole 16 MiB window's tables
 * for any file above a few hundred KB (178 MB of address space), but
 * touches them as the file needs: resident, it held 4.5 MB for 64 KB of
 * text, 14.5 MB for 256 KB, 22 MB for 1 MB, 60 MB for 4 MB, 172 MB for
 * 16 MB and 207 MB for 32 MB (text, shared objects and random bytes
 * alike, within 10%). Fonts hold more between 2 and 6 MB: 57 MiB for
 * 2.3 MB of TrueType, 20 MiB more than for 2.1 MB (a review; an array
 * doubling, it seems). The bound: 4 MiB, and for each byte of the file 60
 * up to 256 KiB, 13 up to the window, 3 past it; 24 MiB more past 2 MiB. */
#define PK_BR_BASE_BYTES   (4u << 20)
#define PK_BR_SMALL_BYTES  (256u << 10)
#define PK_BR_STEP_AT      (2u << 20)
#define PK_BR_STEP_BYTES   (24u << 20)
#define PK_BR_WINDOW_BYTES (1ull << PK_BR_LGWIN)

/* The part of n from a up to b. */
static uint64_t span(uint64_t n, uint64_t a, uint64_t b)
{
    return n <= a ? 0 : (n < b ? n : b) - a;
}

uint64_t pk_compress_memory(int enc, uint64_t n)
{
    uint64_t tables = 0;
    if (enc == SF_ENC_BR) {
        tables = PK_BR_BASE_BYTES + 60 * span(n, 0, PK_BR_SMALL_BYTES) +
                 13 * span(n, PK_BR_SMALL_BYTES, PK_BR_WINDOW_BYTES) +
                 3 * span(n, PK_BR_WINDOW_BYTES, UINT64_MAX) +
                 (n > PK_BR_STEP_AT ? PK_BR_STEP_BYTES : 0);
    } else if (enc == SF_ENC_ZSTD) {
        /* zstd's own reckoning of its context, exact here, and as much
         * again as the file for its buffers around incompressible input */
        ZSTD_compressionParameters p = ZSTD_getCParams(PK_ZSTD_LEVEL, n, 0);
        if (p.windowLog > PK_ZSTD_WINDOW_LOG)
            p.windowLog = PK_ZSTD_WINDOW_LOG;
        tables = ZSTD_estimateCCtxSize_usingCParams(p) + n;
    } /* gzip: libdeflate's compressor is the thread's */
    /* the output: its encoder's bound, a little over the file for bytes
     * that do not compress (and not kept then) */
    return tables + n + n / 64 + (1u << 20);
}
