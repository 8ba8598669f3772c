/*
 * mime.h - deciding a file's Content-Type and whether it is worth compressing.
 *
 * Order: a MIME rule from the rules file (verbatim), else the extension table
 * (sf/mime.h: web types; ".js" is text/javascript per RFC 9239; but UTF-8
 * text named .ts, .mts or .cts is TypeScript, text/plain), else libmagic on
 * the content. "; charset=utf-8" is appended to text types from the table
 * or libmagic when the bytes are valid UTF-8 (ASCII is) and the file does
 * not name another encoding itself: a file in another encoding, or one that
 * declares one (<meta charset> in an HTML page's first 1024 bytes, CSS
 * @charset, <?xml encoding?>), is sent without a charset, so the browser
 * follows the file's own declaration.
 *
 * The compression class is derived from the type alone, so that a given type
 * is always treated the same way whichever of the three sources named it.
 */
#ifndef PK_MIME_H
#define PK_MIME_H

#include <stddef.h>

/* How a type is compressed. The numbering is part of the profile: renumber
 * only together with PK_PROFILE_REV. */
enum pk_class {
    PK_CLASS_NONE = 0,   /* already compressed or unknown: identity only */
    PK_CLASS_TEXT = 1,   /* UTF-8 text: brotli MODE_TEXT */
    PK_CLASS_FONT = 2,   /* sfnt fonts (ttf/otf/eot): brotli MODE_FONT */
    PK_CLASS_BINARY = 3, /* compressible binary (wasm, ico, bmp): MODE_GENERIC */
};

/* 1 if the (base) type is text that browsers decode with a charset. */
int pk_mime_is_text(const char *type);

/* The compression class of a type (parameters after ';' are ignored). */
int pk_mime_class(const char *type);

/* A file of no known type (application/octet-stream) is compressed when a
 * sample of its first PK_PROBE_BYTES, deflated at level 1, shrinks to
 * PK_PROBE_KEEP percent or less: glTF buffers, pdf.js CMaps and Emscripten
 * packages do, random or already compressed data does not. The test costs
 * about 1.5 ms a file at most (random bytes; 0.2 ms on a compressible
 * buffer), where brotli at quality 11 spends about 1.6 s on every MiB of
 * bytes that do not shrink (measured on 8 MiB of random bytes). */
#define PK_PROBE_BYTES 65536
#define PK_PROBE_KEEP  90

/* 1 if p[0, n) looks compressible by that sample; 0 if not, or out of memory. */
int pk_probe_compressible(const void *p, size_t n);

/* The first 8 hex digits of a SHA-256 over the class tables (which types
 * are text, fonts, compressible binaries): part of the profile, so that
 * --base never reuses the variants (or their absence) of a type whose class
 * changed. @return 0, or -1 when out of memory for the hash. */
#define PK_CLASS_DIGEST_SIZE 9
int pk_mime_class_digest(char out[PK_CLASS_DIGEST_SIZE]);

/* 1 if the key names an .svgz file (case-insensitive). An .svgz is a gzip
 * file of an SVG; browsers can only use it with Content-Encoding: gzip, so
 * build stores the SVG it contains (image/svg+xml under the .svgz key) and
 * makes the usual variants of that. */
int pk_svgz_key(const char *key, size_t len);

/* 1 if p[0, n) opens with markup, as XML, an SVG or an HTML fragment do: a
 * '<' after a UTF-8 byte order mark and whitespace, or the same in UTF-16
 * after its byte order mark. */
int pk_opens_with_tag(const void *p, size_t n);

/* The length of the key's compression suffix (".gz", ".br" or ".zst",
 * case-insensitive, after a non-empty name), with its sf_encoding in *enc;
 * else 0. An encoded rule (rules.h) stores such a file as what it contains,
 * typed by the key without the suffix. */
size_t pk_encoded_suffix(const char *key, size_t len, int *enc);

/* 1 if n bytes at p are valid UTF-8 (no overlongs, no surrogates). */
int pk_utf8_valid(const void *p, size_t n);

/* A libmagic handle (not thread-safe: use from one thread). */
typedef struct pk_magic pk_magic;
int pk_magic_open(pk_magic **out, char *err, size_t errlen);
/* The MIME type libmagic gives for the content (an empty or undecidable
 * file gives "application/octet-stream"). The result is valid until the next
 * call or pk_magic_close(). */
const char *pk_magic_type(pk_magic *m, const void *p, size_t n);
void pk_magic_close(pk_magic *m);

/* Decides the full Content-Type value of a file: rule_type (may be NULL),
 * else the table, else libmagic (opened on first use through *magic).
 * @return a malloc'd string, or NULL with err filled. */
char *pk_mime_decide(const char *key, size_t keylen, const char *rule_type, const void *data,
                     size_t n, pk_magic **magic, char *err, size_t errlen);

#endif
