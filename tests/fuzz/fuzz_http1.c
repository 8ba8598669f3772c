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
 * change how it parses (they are the next request's).
 */
#include "http.h"
#include "sf/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char tmpdir[256];
static sf_pack *pack;
static sf_reader *rd;
static sv_date date;

static void die(const char *what)
{
    fprintf(stderr, "fuzz_http1: %s\n", what);
    abort();
}

static void key_of(const char *p, size_t n, uint8_t key[SF_KEY_LEN])
{
    for (int k = 0; k < 4; k++) {
        uint64_t h = 1469598103934665603ULL ^ (uint64_t)(k + 1);
        for (size_t i = 0; i < n; i++)
            h = (h ^ (unsigned char)p[i]) * 1099511628211ULL;
        for (int b = 0; b < 8; b++)
            key[k * 8 + b] = (uint8_t)(h >> (8 * b));
    }
}

/* Stores an entry laid out as servd-pack lays them out (see sf/store.h). */
static void put(sf_writer *w, const char *path, const char *mime, int n, const int *enc,
                const char *const *bodies, int is404, unsigned flags, int64_t lm)
{
    static char buf[SF_ENC_COUNT][3][512];
    /* lines a rules file gives, which 406, 412, 416 and OPTIONS copy */
    int cors = path && strcmp(path, "/app.js") == 0;
    sf_entry_spec s;
    memset(&s, 0, sizeof s);
    s.kind = SF_KIND_FILE;
    s.flags = (n > 1 ? SF_ENTRY_NEGOTIABLE : 0) | flags;
    s.last_modified = lm;
    s.mime.ptr = mime;
    s.mime.len = strlen(mime);
    s.nvariants = (unsigned)n;
    for (int i = 0; i < n; i++) {
        sf_variant_spec *v = &s.variants[i];
        size_t bl = strlen(bodies[i]);
        key_of(bodies[i], bl, v->body_key);
        v->encoding = enc[i];
        v->body_len = bl;
        /* 19 opaque characters, all bchars: a multipart boundary */
        int el = snprintf(buf[i][0], 512, "\"e%d-%02x%02x%02x%02x%02x%02x%02x%02x\"", enc[i],
                          v->body_key[0], v->body_key[1], v->body_key[2], v->body_key[3],
                          v->body_key[4], v->body_key[5], v->body_key[6], v->body_key[7]);
        int rep = snprintf(buf[i][1], 512, "HTTP/1.1 %s\r\nContent-Length: %zu\r\n",
                           is404 ? "404 Not Found" : "200 OK", bl);
        int hl = rep + snprintf(buf[i][1] + rep, 512 - (size_t)rep,
                                "Content-Type: %s\r\n%s%s%s%sETag: %s\r\nLast-Modified: Tue, 14 "
                                "Nov 2023 22:13:20 GMT\r\nCache-Control: no-cache\r\n%s%s",
                                mime, enc[i] ? "Content-Encoding: " : "",
                                enc[i] ? sf_encoding_name(enc[i]) : "", enc[i] ? "\r\n" : "",
                                cors ? "Access-Control-Allow-Origin: *\r\n" : "", buf[i][0],
                                n > 1 ? "Vary: Accept-Encoding\r\n" : "",
                                is404 ? "" : "Accept-Ranges: bytes\r\n");
        int l3 = snprintf(buf[i][2], 512,
                          "HTTP/1.1 304 Not Modified\r\nETag: %s\r\nCache-Control: no-cache\r\n%s",
                          buf[i][0], n > 1 ? "Vary: Accept-Encoding\r\n" : "");
        v->etag.ptr = buf[i][0];
        v->etag.len = (size_t)el;
        v->h200.ptr = buf[i][1];
        v->h200.len = (size_t)hl;
        v->rep_off = (size_t)rep;
        v->h304.ptr = buf[i][2];
        v->h304.len = (size_t)l3;
        if (sf_writer_put_body(w, v->body_key, bodies[i], bl) != 0)
            die("put body");
    }
    uint8_t *rec;
    size_t len;
    if (sf_entry_encode(&s, &rec, &len) != 0)
        die("encode");
    int rc = is404 ? sf_writer_put_special(w, "status:404", rec, len)
                   : sf_writer_put_path(w, path, strlen(path), rec, len);
    if (rc != 0)
        die("put path");
    free(rec);
}

static void cleanup(void)
{
    char p[300];
    sf_reader_end(rd);
    sf_pack_close(pack);
    snprintf(p, sizeof p, "%s/site.lmdb", tmpdir);
    unlink(p);
    rmdir(tmpdir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    char err[512], path[300];
    snprintf(tmpdir, sizeof tmpdir, "/tmp/fuzz_http1-XXXXXX");
    if (!mkdtemp(tmpdir))
        die("mkdtemp");
    snprintf(path, sizeof path, "%s/site.lmdb", tmpdir);
    sf_writer *w;
    if (sf_writer_open(path, 1 << 20, &w, err, sizeof err) != 0)
        die(err);
    static const int e3[] = {SF_ENC_IDENTITY, SF_ENC_GZIP, SF_ENC_BR};
    static const char *const home[] = {"<html>home page</html>", "gz-home", "br"};
    put(w, "/index.html", "text/html", 3, e3, home, 0, 0, 1700000000);
    static const int e1[] = {SF_ENC_IDENTITY};
    static const char *const docs[] = {"<html>docs</html>"};
    put(w, "/docs/index.html", "text/html", 1, e1, docs, 0, 0, 1900000000); /* ahead */
    static const char *const txt[] = {"0123456789abcdefghijklmnopqrstuvwxyz"};
    put(w, "/a.txt", "text/plain", 1, e1, txt, 0, SF_ENTRY_DATE_WEAK, 1700000000);
    static const int e4[] = {SF_ENC_IDENTITY, SF_ENC_GZIP, SF_ENC_BR, SF_ENC_ZSTD};
    static const char *const js[] = {"var x = 1; var y = 2; var z = 3; console.log(x + y + z);",
                                     "gzgzgzgzgzgzgzgzgzgz", "brbrbrbrbrbrbr", "zszszszszszszszs"};
    put(w, "/app.js", "text/javascript", 4, e4, js, 0, 0, 1700000000);
    static const int e2[] = {SF_ENC_IDENTITY, SF_ENC_GZIP};
    static const char *const nf[] = {"<h1>missing</h1>", "gz404"};
    put(w, NULL, "text/html", 2, e2, nf, 1, 0, 1700000000);
    sf_entry_spec r;
    memset(&r, 0, sizeof r);
    r.kind = SF_KIND_REDIRECT;
    r.target = (sf_view){"/docs/", 6};
    uint8_t *rec;
    size_t len;
    if (sf_entry_encode(&r, &rec, &len) != 0 || sf_writer_put_path(w, "/old", 4, rec, len) != 0)
        die("put redirect");
    free(rec);
    sf_meta m;
    memset(&m, 0, sizeof m);
    if (sf_writer_commit(w, &m, err, sizeof err) != 0)
        die(err);
    if (sf_pack_open(path, &pack, err, sizeof err) != 0)
        die(err);
    if (sf_reader_begin(pack, &rd) != 0)
        die("reader");
    sv_date_update(&date, 1800000000);
    atexit(cleanup);
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

static void check_plan(const sv_request *req, const sv_plan *p)
{
    static char out[1 << 16];
    size_t n = 0;
    if (p->iovcnt < 1 || p->iovcnt > SV_PLAN_IOV)
        die("iovcnt");
    for (int i = 0; i < p->iovcnt; i++) {
        if (!p->iov[i].iov_base || p->iov[i].iov_len > sizeof out - n)
            die("iov");
        memcpy(out + n, p->iov[i].iov_base, p->iov[i].iov_len);
        n += p->iov[i].iov_len;
    }
    const char *end = memmem(out, n, "\r\n\r\n", 4);
    if (!end)
        die("no end of head");
    size_t head = (size_t)(end - out) + 4;
    if (n - head != p->body_bytes)
        die("body_bytes");
    if (memcmp(out, "HTTP/1.1 ", 9) != 0 || memmem(out + 1, head - 1, "HTTP/1.1 ", 9))
        die("status line");
    for (size_t i = 0; i < head; i++) {
        if (out[i] == '\n' && (i == 0 || out[i - 1] != '\r'))
            die("bare LF in the head");
        if (out[i] == '\r' && (i + 1 >= head || out[i + 1] != '\n'))
            die("bare CR in the head");
    }
    const char *loc = memmem(out, head, "\r\nLocation: ", 12);
    if (loc) {
        if (loc[12] != '/' || loc[13] == '/' || loc[13] == '\\')
            die("a Location that is not an absolute path on this host");
        for (const char *q = loc + 12; *q != '\r'; q++)
            if ((unsigned char)*q > 0x7e || (unsigned char)*q < 0x21)
                die("a Location that is not a URI reference (raw byte)");
    }
    const char *v = memmem(out, head, "\r\nVary:", 7);
    if (v && memmem(v + 7, head - (size_t)(v + 7 - out), "\r\nVary:", 7))
        die("two Vary lines");
    const char *cl = memmem(out, head, "\r\nContent-Length: ", 18);
    if (p->status == 304) {
        if (cl || p->body_bytes)
            die("304 with a length or body");
    } else {
        if (!cl || memmem(cl + 18, head - (size_t)(cl + 18 - out), "\r\nContent-Length:", 17))
            die("not exactly one Content-Length");
        unsigned long long want = strtoull(cl + 18, NULL, 10);
        if (req->method == SV_M_HEAD) {
            if (p->body_bytes)
                die("HEAD with a body");
        } else if (want != p->body_bytes) {
            die("Content-Length differs from the body");
        }
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
            die("a prefix of a head that parses is not incomplete");
        free(p);
    }
    static const char next[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    char *p = malloc((size_t)rc + sizeof next - 1);
    if (!p)
        return;
    memcpy(p, buf, (size_t)rc);
    memcpy(p + rc, next, sizeof next - 1);
    if (sv_http1_parse(p, (size_t)rc + sizeof next - 1, &r2) != rc)
        die("bytes after a head change how it parses");
    if (r2.method != req->method || r2.minor != req->minor || r2.keep_alive != req->keep_alive ||
        r2.nheaders != req->nheaders || !same_view(req->target, buf, (size_t)rc, r2.target, p) ||
        !same_view(req->path, buf, (size_t)rc, r2.path, p) ||
        !same_view(req->host, buf, (size_t)rc, r2.host, p) ||
        !same_view(req->range, buf, (size_t)rc, r2.range, p))
        die("bytes after a head change what it parses to");
    free(p);
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
            die("head length");
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
            die("minor");
        if (req.chunked && req.keep_alive)
            die("chunked body on a kept connection");
        int high = 0;
        for (size_t i = 0; i < req.target.len; i++)
            high |= (unsigned char)req.target.ptr[i] > 0x7e;
        if (high != req.target_8bit)
            die("target_8bit does not say whether the target has bytes above 0x7E");
        static sv_scratch scratch;
        static sv_plan plan;
        static sv_site site;
        site.spa = size & 1;
        sv_respond(&req, rd, &site, &date, &scratch, &plan);
        check_plan(&req, &plan);
        check_streaming(buf, rc, &req);
    } else if (rc == 0) {
        if (size >= SV_MAX_HEAD)
            die("incomplete although the buffer is full");
    } else {
        if (rc != -400 && rc != -414 && rc != -431 && rc != -501 && rc != -505)
            die("unexpected error status");
    }
    free(buf);
    return 0;
}
