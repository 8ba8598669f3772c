/*
 * decode.h - decompressing gzip, br and zstd bytes, with a bound on the
 * output size.
 *
 * Used where servd-pack must know what compressed bytes stand for: a
 * variant reused from --base must be exactly the file compressed, an
 * .svgz is stored as the SVG it contains (mime.h), and verify checks that
 * every compressed variant decodes to its identity body. The bound keeps a
 * decompression bomb from taking more memory than the answer needs.
 */
#ifndef PK_DECODE_H
#define PK_DECODE_H

#include <stddef.h>
#include <stdint.h>

/* pk_decompress's result when the output would be larger than the bound. */
#define PK_DECODE_TOO_BIG 1
/* ... and when memory ran out: no verdict on the data. */
#define PK_DECODE_NOMEM 2

/* Decompresses n bytes at in, of encoding enc (SF_ENC_GZIP: one or more gzip
 * members; SF_ENC_BR; SF_ENC_ZSTD: one or more frames), into a malloc'd
 * buffer *out of *outn bytes, at most max bytes.
 * @return 0; PK_DECODE_TOO_BIG (nothing allocated); PK_DECODE_NOMEM, with
 * "out of memory" in err; or -1 with the cause in err (not valid data of
 * that encoding, truncated, trailing bytes). */
int pk_decompress(int enc, const uint8_t *in, size_t n, size_t max, uint8_t **out, size_t *outn,
                  char *err, size_t errlen);

/* 1 if n bytes at in, of encoding enc, decompress to exactly want[0..wn);
 * 0 if not; -1 when memory ran out before it could tell. */
int pk_decompresses_to(int enc, const uint8_t *in, size_t n, const uint8_t *want, size_t wn);

#endif
