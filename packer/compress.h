/*
 * compress.h - producing the gzip, br and zstd variants, and the rule that
 * decides whether a variant is worth keeping.
 *
 * Settings (all in the profile string, see pk_profile()):
 *   gzip  libdeflate level 12 (its strongest; smaller than zlib -9 at a
 *         reasonable speed), gzip header with MTIME 0, so output is reproducible.
 *   br    quality 11, lgwin 24 (the format's maximum without large-window
 *         mode, which browsers do not support), mode TEXT / FONT / GENERIC by
 *         the type's class.
 *   zstd  level 19, windowLog capped at 23 (8 MiB: Chromium refuses frames
 *         that need a larger window), no checksum (HTTP has its own integrity
 *         and every byte counts), content size in the frame header.
 */
#ifndef PK_COMPRESS_H
#define PK_COMPRESS_H

#include <stddef.h>
#include <stdint.h>

#define PK_GZIP_LEVEL 12
#define PK_BR_QUALITY 11
#define PK_BR_LGWIN   24
#define PK_ZSTD_LEVEL 19
/* 2^23 = 8 MiB: the largest window Chromium's zstd decoder accepts. */
#define PK_ZSTD_WINDOW_LOG 23

/* The keep rule: a compressed variant is stored only if it is at least
 * PK_KEEP_MIN_PERCENT smaller than identity AND at least PK_KEEP_MIN_BYTES
 * smaller. Below 5% the extra representation costs more than it saves
 * (client decode work, one more object per cache key in every CDN); below
 * 64 bytes the saving is eaten by the Content-Encoding and Vary lines the
 * variant adds to every response. */
#define PK_KEEP_MIN_PERCENT 5
#define PK_KEEP_MIN_BYTES   64

/* Bump when anything that changes compressed bytes or the choice of what is
 * compressed changes (classes, keep rule, settings): --base then stops
 * reusing bodies made by an older packer. */
#define PK_PROFILE_REV 1

/* Size of the buffer pk_profile() needs (the meta record holds 128 bytes). */
#define PK_PROFILE_SIZE 129

/* 1 if a variant of comp bytes is worth keeping next to identity bytes. */
int pk_keep(uint64_t identity, uint64_t comp);

/* Writes the profile string, e.g. "r1 cls=1a2b3c4d gzip=libdeflate-1.14/12
 * br=1.0.9/11/w24 zstd=1.5.4/19/w23 keep=5%/64B": everything that determines
 * the compressed bytes - the class tables (pk_mime_class_digest), library
 * versions and settings - so that --base reuses bodies only when a fresh
 * pack would have produced the very same bytes. @return 0, or -1 when out
 * of memory (for the class digest's hash). */
int pk_profile(char out[PK_PROFILE_SIZE]);

/* Per-thread compression state (libdeflate compressor, zstd context). */
typedef struct pk_compressor pk_compressor;
pk_compressor *pk_compressor_new(void);
void pk_compressor_free(pk_compressor *c);

/* Compresses n bytes with encoding enc (SF_ENC_GZIP/BR/ZSTD) for a file of
 * class cls (enum pk_class). On success *out is a malloc'd buffer of *outn
 * bytes. @return 0, or -1 with the cause in err. */
int pk_compress(pk_compressor *c, int enc, int cls, const uint8_t *in, size_t n, uint8_t **out,
                size_t *outn, char *err, size_t errlen);

/* A zstd context keeps its tables for the next file: above this size they
 * are freed after the file instead, so that a thread holds the memory of a
 * large file only while it compresses it (pk_compress_memory). Making them
 * again costs their page faults, about a millisecond for the 17 MB of a
 * 1 MB file, which takes half a second to compress. */
#define PK_ZSTD_KEEP_BYTES (8u << 20)

/* The memory an encoder holds for the whole life of a thread's
 * pk_compressor: libdeflate's compressor at level 12 (8.6 MB, its pages
 * touched as a file needs them) and a zstd context kept for the next file. */
#define PK_COMPRESSOR_STATE_BYTES ((9u << 20) + PK_ZSTD_KEEP_BYTES)

/* The share of --memory for each thread that compresses: its state, and as
 * much again for its jobs (the encoders of idle threads hold memory too). */
#define PK_COMPRESS_THREAD_SHARE (2ull * PK_COMPRESSOR_STATE_BYTES)

/* An upper bound of the memory compressing n bytes with enc holds beyond
 * the thread's state (PK_COMPRESSOR_STATE_BYTES): the encoder's tables and
 * the output, not the input. Measured on the libraries Debian 12 has
 * (tests/unit/packer_compress.c checks it against what the encoder holds):
 * zstd's tables at level 19 are about 20 times the file up to its 8 MiB
 * window (83 MB), brotli's at quality 11 about 10 times up to its 16 MiB
 * window (172 MB) and more slowly beyond it. */
uint64_t pk_compress_memory(int enc, uint64_t n);

/* Relative cost of compressing one byte with enc, for job ordering and the
 * progress bar (measured on text: br 11 is the slowest by far). */
unsigned pk_compress_cost(int enc);

#endif
