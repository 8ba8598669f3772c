/*
 * decode.c - bounded decompression with zlib, brotli and zstd (decode.h).
 *
 * Each decoder writes into a buffer that starts small and doubles up to the
 * bound (plus one byte, to tell "exactly max" from "more than max"), so a
 * small result costs little and a large one never more than the bound.
 */
#include "decode.h"

#include "sf/store.h"

#include <brotli/decode.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>
#include <zstd_errors.h>

/* First output buffer: most web files decompress to under 64 KiB. */
#define FIRST_CHUNK (64 * 1024)

typedef struct outbuf {
    uint8_t *p;
    size_t len, cap, limit; /* limit = max + 1 */
} outbuf;

/* Makes room for at least one more byte.
 * @return 0, PK_DECODE_TOO_BIG or PK_DECODE_NOMEM. */
static int grow(outbuf *o)
{
    if (o->len < o->cap)
        return 0;
    if (o->cap >= o->limit)
        return PK_DECODE_TOO_BIG;
    size_t cap = o->cap ? o->cap * 2 : FIRST_CHUNK;
    if (cap > o->limit || cap < o->cap)
        cap = o->limit;
    uint8_t *p = realloc(o->p, cap);
    if (!p)
        return PK_DECODE_NOMEM;
    o->p = p;
    o->cap = cap;
    return 0;
}

static int gunzip(const uint8_t *in, size_t n, outbuf *o, const char **why)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    int zi = inflateInit2(&z, 16 + MAX_WBITS);
    if (zi != Z_OK) {
        *why = "zlib cannot start";
        return zi == Z_MEM_ERROR ? PK_DECODE_NOMEM : -1;
    }
    z.next_in = (Bytef *)in;
    int rc = 0;
    size_t left = n;
    do {
        /* zlib counts in uInt: feed at most UINT_MAX bytes at a time. */
        while (rc == 0) {
            if ((rc = grow(o)) != 0)
                break;
            size_t feed = left > 0x7fffffffu ? 0x7fffffffu : left;
            z.avail_in = (uInt)feed;
            size_t room = o->cap - o->len;
            z.next_out = o->p + o->len;
            z.avail_out = (uInt)(room > 0x7fffffffu ? 0x7fffffffu : room);
            uInt out0 = z.avail_out;
            int zr = inflate(&z, Z_NO_FLUSH);
            left -= feed - z.avail_in;
            o->len += out0 - z.avail_out;
            if (zr == Z_STREAM_END)
                break;
            if (zr == Z_BUF_ERROR && left == 0 && z.avail_out != 0) {
                *why = "truncated gzip data";
                rc = -1;
            } else if (zr == Z_MEM_ERROR) {
                rc = PK_DECODE_NOMEM;
            } else if (zr != Z_OK && zr != Z_BUF_ERROR) {
                *why = "not valid gzip data";
                rc = -1;
            }
        }
        /* Another member follows (a concatenation is valid gzip). */
        if (rc == 0 && left > 0 && inflateReset(&z) != Z_OK) {
            *why = "zlib cannot restart";
            rc = -1;
        }
    } while (rc == 0 && left > 0);
    inflateEnd(&z);
    return rc;
}

static int unbrotli(const uint8_t *in, size_t n, outbuf *o, const char **why)
{
    BrotliDecoderState *s = BrotliDecoderCreateInstance(NULL, NULL, NULL);
    if (!s)
        return PK_DECODE_NOMEM;
    const uint8_t *next_in = in;
    size_t avail_in = n;
    int rc = 0;
    for (;;) {
        if ((rc = grow(o)) != 0)
            break;
        uint8_t *next_out = o->p + o->len;
        size_t avail_out = o->cap - o->len;
        BrotliDecoderResult r =
            BrotliDecoderDecompressStream(s, &avail_in, &next_in, &avail_out, &next_out, NULL);
        o->len = (size_t)(next_out - o->p);
        if (r == BROTLI_DECODER_RESULT_SUCCESS) {
            if (avail_in) {
                *why = "trailing bytes after the brotli stream";
                rc = -1;
            }
            break;
        }
        if (r == BROTLI_DECODER_RESULT_NEEDS_MORE_INPUT) {
            *why = "truncated brotli data";
            rc = -1;
            break;
        }
        if (r == BROTLI_DECODER_RESULT_ERROR) {
            /* the ALLOC codes: the decoder's own buffers, not the data */
            BrotliDecoderErrorCode c = BrotliDecoderGetErrorCode(s);
            int nomem = c >= BROTLI_DECODER_ERROR_ALLOC_BLOCK_TYPE_TREES &&
                        c <= BROTLI_DECODER_ERROR_ALLOC_CONTEXT_MODES;
            *why = "not valid brotli data";
            rc = nomem ? PK_DECODE_NOMEM : -1;
            break;
        }
    }
    BrotliDecoderDestroyInstance(s);
    return rc;
}

static int unzstd(const uint8_t *in, size_t n, outbuf *o, const char **why)
{
    ZSTD_DStream *d = ZSTD_createDStream();
    if (!d)
        return PK_DECODE_NOMEM;
    ZSTD_inBuffer ib = {in, n, 0};
    int rc = 0;
    for (;;) {
        if ((rc = grow(o)) != 0)
            break;
        ZSTD_outBuffer ob = {o->p, o->cap, o->len};
        size_t r = ZSTD_decompressStream(d, &ob, &ib);
        o->len = ob.pos;
        if (ZSTD_isError(r)) {
            *why = "not valid zstd data";
            rc = ZSTD_getErrorCode(r) == ZSTD_error_memory_allocation ? PK_DECODE_NOMEM : -1;
            break;
        }
        /* 0: a frame ended and all of it is out, even when that filled the
         * buffer exactly (another call would start a frame that is not
         * there); input left is another frame, which is valid zstd. */
        if (r == 0 && ib.pos == ib.size)
            break;
        /* All input taken, room left, and the frame not finished. */
        if (ib.pos == ib.size && ob.pos < ob.size) {
            *why = "truncated zstd data";
            rc = -1;
            break;
        }
    }
    ZSTD_freeDStream(d);
    return rc;
}

int pk_decompress(int enc, const uint8_t *in, size_t n, size_t max, uint8_t **out, size_t *outn,
                  char *err, size_t errlen)
{
    outbuf o = {NULL, 0, 0, max + 1 > max ? max + 1 : max};
    const char *why = "unknown encoding";
    int rc = enc == SF_ENC_GZIP   ? gunzip(in, n, &o, &why)
             : enc == SF_ENC_BR   ? unbrotli(in, n, &o, &why)
             : enc == SF_ENC_ZSTD ? unzstd(in, n, &o, &why)
                                  : -1;
    if (rc == 0 && o.len > max)
        rc = PK_DECODE_TOO_BIG;
    if (rc != 0) {
        if (rc != PK_DECODE_TOO_BIG)
            snprintf(err, errlen, "%s", rc == PK_DECODE_NOMEM ? "out of memory" : why);
        free(o.p);
        return rc;
    }
    *out = o.p ? o.p : malloc(1);
    if (!*out) {
        snprintf(err, errlen, "out of memory");
        return PK_DECODE_NOMEM;
    }
    *outn = o.len;
    return 0;
}

int pk_decompresses_to(int enc, const uint8_t *in, size_t n, const uint8_t *want, size_t wn)
{
    uint8_t *out;
    size_t outn;
    char err[64];
    int rc = pk_decompress(enc, in, n, wn, &out, &outn, err, sizeof err);
    if (rc != 0)
        return rc == PK_DECODE_NOMEM ? -1 : 0;
    int same = outn == wn && (wn == 0 || memcmp(out, want, wn) == 0);
    free(out);
    return same;
}
