/*
 * headers.c - rendering the header blocks of headers.h.
 *
 * These bytes go on the wire unchanged for every response, so the order and
 * spelling are fixed here, in one place, and tested byte for byte.
 */
#include "headers.h"
#include "fields.h"

#include "sf/httpdate.h"
#include "sf/store.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

static void extras(pk_buf *b, const pk_rep *r)
{
    for (size_t i = 0; i < r->nextra; i++)
        pk_buf_addf(b, "%s: %s\r\n", r->extra[i].name, r->extra[i].value);
}

static void content_encoding(pk_buf *b, int enc)
{
    if (enc != SF_ENC_IDENTITY)
        pk_buf_addf(b, "Content-Encoding: %s\r\n", sf_encoding_name(enc));
}

static void vary(pk_buf *b, const pk_rep *r)
{
    if (r->negotiable)
        pk_buf_adds(b, "Vary: Accept-Encoding\r\n");
}

int pk_render_200(pk_buf *b, size_t *rep_off, const pk_rep *r, int enc, uint64_t len,
                  const char *etag)
{
    char date[SF_HTTP_DATE_LEN + 1];
    if (sf_http_date_format(r->last_modified, date) != 0)
        return -1;
    pk_buf_reset(b);
    pk_buf_addf(b, "HTTP/1.1 200 OK\r\nContent-Length: %llu\r\n", (unsigned long long)len);
    *rep_off = b->len;
    pk_buf_addf(b, "Content-Type: %s\r\n", r->mime);
    content_encoding(b, enc);
    pk_buf_addf(b, "ETag: %s\r\nLast-Modified: %s\r\nCache-Control: %s\r\n", etag, date,
                r->cache_control);
    vary(b, r);
    pk_buf_adds(b, "Accept-Ranges: bytes\r\n");
    extras(b, r);
    return pk_buf_failed(b);
}

int pk_render_304(pk_buf *b, const pk_rep *r, const char *etag)
{
    char date[SF_HTTP_DATE_LEN + 1];
    if (sf_http_date_format(r->last_modified, date) != 0)
        return -1;
    pk_buf_reset(b);
    pk_buf_addf(b, "HTTP/1.1 304 Not Modified\r\nETag: %s\r\nLast-Modified: %s\r\n", etag, date);
    pk_buf_addf(b, "Cache-Control: %s\r\n", r->cache_control);
    vary(b, r);
    extras(b, r);
    return pk_buf_failed(b);
}

int pk_render_404(pk_buf *b, size_t *rep_off, const pk_rep *r, int enc, uint64_t len)
{
    pk_buf_reset(b);
    pk_buf_addf(b, "HTTP/1.1 404 Not Found\r\nContent-Length: %llu\r\n", (unsigned long long)len);
    *rep_off = b->len;
    pk_buf_addf(b, "Content-Type: %s\r\n", r->mime);
    content_encoding(b, enc);
    /* no-cache whatever /404.html's policy: a deploy that adds the path
     * must reach caches at once. A no-transform asked for is kept (a CDN
     * must not recompress the page either). */
    pk_buf_adds(b, r->cache_control && pk_cache_control_has(r->cache_control, "no-transform")
                       ? "Cache-Control: no-cache, no-transform\r\n"
                       : "Cache-Control: no-cache\r\n");
    vary(b, r);
    extras(b, r);
    return pk_buf_failed(b);
}

int pk_render_extras(pk_buf *b, const pk_rep *r)
{
    pk_buf_reset(b);
    extras(b, r);
    return pk_buf_failed(b);
}

int pk_extras_of_200(const char *block, size_t len, const char **extra, size_t *n)
{
    static const char ar[] = "\r\nAccept-Ranges: bytes\r\n";
    const char *p = memmem(block, len, ar, sizeof ar - 1);
    if (!p)
        return -1;
    *extra = p + sizeof ar - 1;
    *n = (size_t)(block + len - *extra);
    return 0;
}

int pk_header_find(const char *block, size_t len, const char *name, const char **val, size_t *vlen)
{
    size_t nl = strlen(name);
    const char *p = block, *end = block + len;
    while (p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        const char *line_end = eol ? eol : end;
        size_t ll = (size_t)(line_end - p);
        if (ll > 0 && p[ll - 1] == '\r')
            ll--;
        if (ll > nl && p[nl] == ':' && strncasecmp(p, name, nl) == 0) {
            const char *v = p + nl + 1;
            while (v < p + ll && (*v == ' ' || *v == '\t'))
                v++;
            *val = v;
            *vlen = (size_t)(p + ll - v);
            return 0;
        }
        p = eol ? eol + 1 : end;
    }
    return -1;
}
