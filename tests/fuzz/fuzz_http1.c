/*
 * fuzz_http1 - the request parser and the responder on arbitrary bytes.
 *
 * sv_http1_parse() runs on an exact-size heap copy (ASan catches any read
 * past the end). On success every view must lie within the input (the only
 * exception is the static "/" of an absolute-form URI without a path), and
 * the head length must fit. Each parsed request is then answered by
 * sv_respond() from a small pack built once at start-up, and the plan is
 * checked: it fits SV_PLAN_IOV, has one status line, CRLF-only header
 * lines, at most one Vary, and a Content-Length equal to the body bytes.
 * The pack's ETags are long enough for multipart/byteranges boundaries; it
 * holds a redirect entry, a weak date and a date ahead of the clock.
 *
 * The parser's streaming contract is checked too: a prefix of a head that
 * parses is incomplete (0), never refused, and bytes after a head do not
 * change how it parses (they are the next request's); more bytes that
 * sv_http1_still_incomplete() judges alone to leave an incomplete prefix
 * incomplete (conn.c then skips the parse) are incomplete to the parser.
 */
#include "fuzz_site.h"
#include "http.h"
#include "sf/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static sf_reader *rd;
static sv_date date;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    sf_writer *w = fz_pack_begin("fuzz_http1");
    fz_put_basics(w);
    static const int e1[] = {SF_ENC_IDENTITY};
    static const char *const docs[] = {"<html>docs</html>"};
    fz_put(w, "/docs/index.html", "text/html", 1, e1, docs, 0, 0, 1900000000); /* ahead */
    static const int e4[] = {SF_ENC_IDENTITY, SF_ENC_GZIP, SF_ENC_BR, SF_ENC_ZSTD};
    static const char *const js[] = {"var x = 1; var y = 2; var z = 3; console.log(x + y + z);",
                                     "gzgzgzgzgzgzgzgzgzgz", "brbrbrbrbrbrbr", "zszszszszszszszs"};
    fz_put(w, "/app.js", "text/javascript", 4, e4, js, 0, 0, 1700000000);
    rd = fz_pack_end(w);
    sv_date_update(&date, 1800000000);
    return 0;
}

static void within(sf_view v, const char *buf, size_t n, const char *what)
{
    if (v.len == 0)
        return;
    if (v.ptr < buf || v.ptr > buf + n || v.len > (size_t)(buf + n - v.ptr)) {
        fprintf(stderr, "view %s outside the input\n", what);
        abort();
    }
}

/* The same bytes, at the same offset of its own buffer (a view outside
 * the input, the static "/" of an absolute-form URI without a path, only
 * the same bytes). */
static int same_view(sf_view a, const char *abuf, size_t an, sf_view b, const char *bbuf)
{
    if (a.len != b.len || (a.len && memcmp(a.ptr, b.ptr, a.len) != 0))
        return 0;
    int inside = a.len && a.ptr >= abuf && a.ptr < abuf + an;
    return !inside || a.ptr - abuf == b.ptr - bbuf;
}

/* A prefix of a head that parses is incomplete; the head followed by
 * another request parses the same (req: what buf parsed to). */
static void check_streaming(const char *buf, int rc, const sv_request *req)
{
    static sv_request r2;
    /* the last byte cut, half, and a cut that varies with the bytes */
    size_t cuts[3] = {(size_t)rc - 1, (size_t)rc / 2,
                      ((unsigned char)buf[rc / 2] * 131u + (unsigned char)buf[rc - 1]) %
                          (size_t)rc};
    for (int i = 0; i < 3; i++) {
        char *p = malloc(cuts[i] ? cuts[i] : 1);
        if (!p)
            return;
        memcpy(p, buf, cuts[i]);
        if (sv_http1_parse(p, cuts[i], &r2) != 0)
            fz_die("a prefix of a head that parses is not incomplete");
        free(p);
    }
    static const char next[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    char *p = malloc((size_t)rc + sizeof next - 1);
    if (!p)
        return;
    memcpy(p, buf, (size_t)rc);
    memcpy(p + rc, next, sizeof next - 1);
    if (sv_http1_parse(p, (size_t)rc + sizeof next - 1, &r2) != rc)
        fz_die("bytes after a head change how it parses");
    if (r2.method != req->method || r2.minor != req->minor || r2.keep_alive != req->keep_alive ||
        r2.nheaders != req->nheaders || !same_view(req->target, buf, (size_t)rc, r2.target, p) ||
        !same_view(req->path, buf, (size_t)rc, r2.path, p) ||
        !same_view(req->host, buf, (size_t)rc, r2.host, p) ||
        !same_view(req->range, buf, (size_t)rc, r2.range, p))
        fz_die("bytes after a head change what it parses to");
    free(p);
}

/* A refused input is refused the same way however it arrives: a prefix of
 * it is incomplete, or refused with the same status and method (servd
 * answers the first refusal it parses; a HEAD's has no body). */
static void check_refusal_streaming(const char *buf, size_t size, int rc, const sv_request *req)
{
    static sv_request r2;
    /* and where servd's buffer is full: it refuses a head with 431 there */
    size_t cuts[4] = {size - 1, size / 2,
                      ((unsigned char)buf[size / 2] * 131u + (unsigned char)buf[size - 1]) % size,
                      size > SV_MAX_HEAD ? SV_MAX_HEAD : size - 1};
    for (int i = 0; i < 4; i++) {
        char *p = malloc(cuts[i] ? cuts[i] : 1);
        if (!p)
            return;
        memcpy(p, buf, cuts[i]);
        int r = sv_http1_parse(p, cuts[i], &r2);
        free(p);
        if (r > 0)
            fz_die("a prefix of a refused input parses");
        if (r < 0 && r != rc)
            fz_die("a prefix of a refused input is refused with another status");
        if (r < 0 && r2.method != req->method)
            fz_die("a prefix of a refused input is refused with another method");
    }
}

/* Bytes judged alone are judged right: for a prefix of the input that is
 * incomplete, more bytes that sv_http1_still_incomplete() finds to be
 * incomplete (conn.c then does not call the parser) are incomplete to
 * the parser too, and it reads only them (exact-size copies). */
static void check_judged_alone(const char *buf, size_t size)
{
    static sv_request r2;
    if (size < 2)
        return;
    size_t cuts[3] = {size / 2, size - 1,
                      ((unsigned char)buf[size - 1] * 257u + (unsigned char)buf[0]) % size};
    for (int i = 0; i < 3; i++) {
        size_t k = cuts[i], at;
        if (k == 0)
            continue;
        char *p = malloc(k);
        if (!p)
            return;
        memcpy(p, buf, k);
        int state = sv_http1_parse(p, k, &r2) == 0 ? sv_http1_partial(p, k, &at) : SV_PARTIAL_NONE;
        free(p);
        if (state == SV_PARTIAL_NONE)
            continue;
        size_t ends[3] = {k + 1, k + (size - k + 1) / 2, size};
        for (int j = 0; j < 3; j++) {
            size_t n = ends[j];
            char *q = malloc(n);
            if (!q)
                return;
            memcpy(q, buf, n);
            if (sv_http1_still_incomplete(state, at, q, k, n) && sv_http1_parse(q, n, &r2) != 0)
                fz_die("bytes judged alone to leave a head incomplete change the parser's answer");
            free(q);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    static sv_request req;
    int rc = sv_http1_parse(buf, size, &req);
    if (rc > 0) {
        if ((size_t)rc > size || (size_t)rc != req.head_len || req.nheaders > SV_MAX_HEADERS)
            fz_die("head length");
        within(req.method_tok, buf, size, "method");
        within(req.target, buf, size, "target");
        if (!(req.path.len == 1 && req.path.ptr[0] == '/'))
            within(req.path, buf, size, "path");
        within(req.query, buf, size, "query");
        within(req.host, buf, size, "host");
        within(req.accept_encoding, buf, size, "accept-encoding");
        within(req.range, buf, size, "range");
        within(req.if_match, buf, size, "if-match");
        within(req.if_none_match, buf, size, "if-none-match");
        within(req.if_modified_since, buf, size, "if-modified-since");
        within(req.if_unmodified_since, buf, size, "if-unmodified-since");
        within(req.if_range, buf, size, "if-range");
        for (size_t i = 0; i < req.nheaders; i++) {
            within(req.headers[i].name, buf, size, "header name");
            within(req.headers[i].value, buf, size, "header value");
        }
        if (req.minor != 0 && req.minor != 1)
            fz_die("minor");
        within(req.version, buf, size, "version");
        if (req.version.len != 8 || memcmp(req.version.ptr, "HTTP/1.", 7) != 0 ||
            req.minor != (req.version.ptr[7] != '0'))
            fz_die("the version view is not the HTTP/1.x that minor says");
        int high = 0;
        for (size_t i = 0; i < req.target.len; i++)
            high |= (unsigned char)req.target.ptr[i] > 0x7e;
        if (high != req.target_8bit)
            fz_die("target_8bit does not say whether the target has bytes above 0x7E");
        static sv_scratch scratch;
        static sv_plan plan;
        static sv_site site;
        site.spa = size & 1;
        sv_respond(&req, rd, &site, &date, &scratch, &plan);
        fz_check_plan(&req, &plan, 1);
        check_streaming(buf, rc, &req);
    } else if (rc == 0) {
        if (size >= SV_MAX_HEAD)
            fz_die("incomplete although the buffer is full");
    } else {
        if (rc != -400 && rc != -414 && rc != -431 && rc != -501 && rc != -505)
            fz_die("unexpected error status");
        /* a refusal's request line, for the access log, lies in the input */
        within(req.method_tok, buf, size, "method of a refusal");
        within(req.target, buf, size, "target of a refusal");
        within(req.version, buf, size, "version of a refusal");
        if (req.version.len && (req.version.len != 8 || memcmp(req.version.ptr, "HTTP/", 5) != 0))
            fz_die("a refusal's version view is not HTTP/d.d");
        check_refusal_streaming(buf, size, rc, &req);
    }
    check_judged_alone(buf, size);
    free(buf);
    return 0;
}
