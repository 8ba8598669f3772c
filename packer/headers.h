/*
 * headers.h - pre-rendering the response header blocks servd sends as they
 * are (the contract with servd, docs/format.md):
 *
 *   h200 = "HTTP/1.1 200 OK\r\n" "Content-Length: N\r\n" rep
 *   rep  = "Content-Type: T\r\n" ["Content-Encoding: E\r\n"] "ETag: X\r\n"
 *          "Last-Modified: D\r\n" "Cache-Control: C\r\n"
 *          ["Vary: Accept-Encoding\r\n"] "Accept-Ranges: bytes\r\n" extras
 *   h304 = "HTTP/1.1 304 Not Modified\r\n" "ETag: X\r\n" "Last-Modified: D\r\n"
 *          "Cache-Control: C\r\n" ["Vary: Accept-Encoding\r\n"] extras
 * and, for the site's 404 page (special entry "status:404"):
 *   h200 = "HTTP/1.1 404 Not Found\r\n" "Content-Length: N\r\n" rep404
 *   rep404 = "Content-Type: T\r\n" ["Content-Encoding: E\r\n"]
 *            "Cache-Control: no-cache\r\n" ["Vary: Accept-Encoding\r\n"] extras
 * Vary is present iff the entry has more than one variant (on identity too).
 * Every line ends in CRLF; there is no Date line and no blank line.
 */
#ifndef PK_HEADERS_H
#define PK_HEADERS_H

#include "buf.h"

#include <stddef.h>
#include <stdint.h>

/* An extra header from the rules (validated there). */
typedef struct pk_header {
    const char *name;
    const char *value;
} pk_header;

/* What every variant of one path shares. */
typedef struct pk_rep {
    const char *mime;
    const char *cache_control;
    int64_t last_modified;
    int negotiable;
    const pk_header *extra;
    size_t nextra;
} pk_rep;

/* Renders h200 of one variant into b (reset first); *rep_off receives the
 * offset of the representation headers. @return 0 or -1 (date or memory). */
int pk_render_200(pk_buf *b, size_t *rep_off, const pk_rep *r, int enc, uint64_t len,
                  const char *etag);

/* Renders h304 of one variant into b (reset first). */
int pk_render_304(pk_buf *b, const pk_rep *r, const char *etag);

/* Renders the 404 page's h200 into b (reset first): Cache-Control is
 * no-cache whatever r's is, with no-transform when r's has it. */
int pk_render_404(pk_buf *b, size_t *rep_off, const pk_rep *r, int enc, uint64_t len);

/* Renders the extra header lines of r alone into b (reset first): the
 * bytes the ETag covers (digest.h). @return 0 or -1 (memory). */
int pk_render_extras(pk_buf *b, const pk_rep *r);

/* The extra header lines of a rendered 200 block: the bytes after its
 * Accept-Ranges line. No value above can hold a CR or LF, so the first
 * such line is the one servd-pack wrote. @return 0 with *extra, *n set (a
 * view into block), or -1 when the block has no Accept-Ranges line. */
int pk_extras_of_200(const char *block, size_t len, const char **extra, size_t *n);

/* Finds the value of header name (case-insensitive) in a rendered block.
 * @return 0 with *val and *vlen set (a view into block), or -1. */
int pk_header_find(const char *block, size_t len, const char *name, const char **val, size_t *vlen);

#endif
