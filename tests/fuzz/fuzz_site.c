/*
 * fuzz_site.c - see fuzz_site.h.
 */
#include "fuzz_site.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void fz_die(const char *what)
{
    fprintf(stderr, "fuzz: %s\n", what);
    abort();
}

static char tmpdir[256], path[300];
static sf_pack *pack;
static sf_reader *rd;

/* The paths put, for the pack id (servd refuses a pack whose id is not its
 * records'). */
typedef struct {
    char *key;
    size_t klen;
    uint8_t *rec;
    size_t n;
} put_rec;
static put_rec puts_[64];
static int nputs;

static int key_order(const void *a, const void *b)
{
    const put_rec *x = a, *y = b;
    int c = memcmp(x->key, y->key, x->klen < y->klen ? x->klen : y->klen);
    return c ? c : (x->klen > y->klen) - (x->klen < y->klen);
}

static void pack_id(uint8_t out[SF_PACK_ID_LEN])
{
    qsort(puts_, (size_t)nputs, sizeof *puts_, key_order);
    sf_pack_id *id;
    if (sf_sha256_ready() != 0 || sf_pack_id_begin(&id) != 0)
        fz_die("pack id");
    for (int i = 0; i < nputs; i++) {
        if (sf_pack_id_add(id, puts_[i].key, puts_[i].klen, puts_[i].rec, puts_[i].n) != 0)
            fz_die("pack id");
        free(puts_[i].key);
        free(puts_[i].rec);
    }
    nputs = 0;
    if (sf_pack_id_end(id, out) != 0)
        fz_die("pack id");
}

void fz_put_record(sf_writer *w, const char *key, size_t klen, const uint8_t *rec, size_t n)
{
    if (nputs == (int)(sizeof puts_ / sizeof *puts_))
        fz_die("too many paths");
    put_rec *p = &puts_[nputs++];
    p->key = malloc(klen);
    p->rec = malloc(n);
    if (!p->key || !p->rec)
        fz_die("malloc");
    memcpy(p->key, key, klen);
    memcpy(p->rec, rec, n);
    p->klen = klen;
    p->n = n;
    if (sf_writer_put_path(w, key, klen, rec, n) != 0)
        fz_die("put path");
}

static void cleanup(void)
{
    sf_reader_end(rd);
    sf_pack_close(pack);
    unlink(path);
    rmdir(tmpdir);
}

sf_writer *fz_pack_begin(const char *name)
{
    char err[512];
    snprintf(tmpdir, sizeof tmpdir, "/tmp/%s-XXXXXX", name);
    if (!mkdtemp(tmpdir))
        fz_die("mkdtemp");
    snprintf(path, sizeof path, "%s/site.lmdb", tmpdir);
    sf_writer *w;
    if (sf_writer_open(path, 1 << 20, &w, err, sizeof err) != 0)
        fz_die(err);
    return w;
}

sf_reader *fz_pack_end(sf_writer *w)
{
    char err[512];
    sf_meta m;
    memset(&m, 0, sizeof m);
    m.n_paths = (uint64_t)nputs;
    pack_id(m.pack_id);
    if (sf_writer_commit(w, &m, err, sizeof err) != 0)
        fz_die(err);
    if (sf_pack_open(path, &pack, err, sizeof err) != 0)
        fz_die(err);
    if (sf_reader_begin(pack, &rd) != 0)
        fz_die("reader");
    atexit(cleanup);
    return rd;
}

const char *fz_pack_path(void)
{
    return path;
}

void fz_pack_abort(sf_writer *w)
{
    sf_writer_abort(w);
    rmdir(tmpdir);
}

int fz_sha256_keys;

void fz_key_of(const char *p, size_t n, uint8_t key[SF_KEY_LEN])
{
    unsigned len;
    if (fz_sha256_keys) {
        if (!EVP_Digest(p, n, key, &len, EVP_sha256(), NULL) || len != SF_KEY_LEN)
            fz_die("sha256");
        return;
    }
    for (int k = 0; k < 4; k++) {
        uint64_t h = 1469598103934665603ULL ^ (uint64_t)(k + 1);
        for (size_t i = 0; i < n; i++)
            h = (h ^ (unsigned char)p[i]) * 1099511628211ULL;
        for (int b = 0; b < 8; b++)
            key[k * 8 + b] = (uint8_t)(h >> (8 * b));
    }
}

void fz_entry(sf_writer *w, const char *path, const char *mime, int n, const int *enc,
              const char *const *bodies, int is404, unsigned flags, int64_t lm, uint8_t **rec,
              size_t *len)
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
        fz_key_of(bodies[i], bl, v->body_key);
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
        if (w && sf_writer_put_body(w, v->body_key, bodies[i], bl) != 0)
            fz_die("put body");
    }
    if (sf_entry_encode(&s, rec, len) != 0)
        fz_die("encode");
}

void fz_put(sf_writer *w, const char *path, const char *mime, int n, const int *enc,
            const char *const *bodies, int is404, unsigned flags, int64_t lm)
{
    uint8_t *rec;
    size_t len;
    fz_entry(w, path, mime, n, enc, bodies, is404, flags, lm, &rec, &len);
    if (is404) {
        if (sf_writer_put_special(w, "status:404", rec, len) != 0)
            fz_die("put 404");
    } else {
        fz_put_record(w, path, strlen(path), rec, len);
    }
    free(rec);
}

void fz_put_basics(sf_writer *w)
{
    static const int e3[] = {SF_ENC_IDENTITY, SF_ENC_GZIP, SF_ENC_BR};
    static const char *const home[] = {"<html>home page</html>", "gz-home", "br"};
    fz_put(w, "/index.html", "text/html", 3, e3, home, 0, 0, 1700000000);
    static const int e1[] = {SF_ENC_IDENTITY};
    static const char *const txt[] = {"0123456789abcdefghijklmnopqrstuvwxyz"};
    fz_put(w, "/a.txt", "text/plain", 1, e1, txt, 0, SF_ENTRY_DATE_WEAK, 1700000000);
    static const int e2[] = {SF_ENC_IDENTITY, SF_ENC_GZIP};
    static const char *const nf[] = {"<h1>missing</h1>", "gz404"};
    fz_put(w, NULL, "text/html", 2, e2, nf, 1, 0, 1700000000);
    sf_entry_spec r;
    memset(&r, 0, sizeof r);
    r.kind = SF_KIND_REDIRECT;
    r.target = (sf_view){"/docs/", 6};
    uint8_t *rec;
    size_t len;
    if (sf_entry_encode(&r, &rec, &len) != 0)
        fz_die("encode redirect");
    fz_put_record(w, "/old", 4, rec, len);
    free(rec);
}

/* A finding in a plan: says what, shows the start of the message (escaped)
 * and aborts. */
__attribute__((noreturn)) static void bad(const char *out, size_t n, const char *what)
{
    fprintf(stderr, "fuzz: %s in:\n", what);
    for (size_t i = 0; i < n && i < 2048; i++) {
        unsigned char ch = (unsigned char)out[i];
        if (ch == '\n')
            fputs("\\n\n", stderr);
        else if (ch < 0x20 || ch > 0x7e || ch == '\\')
            fprintf(stderr, "\\x%02x", ch);
        else
            fputc(ch, stderr);
    }
    fputc('\n', stderr);
    abort();
}

void fz_check_plan(const sv_request *req, const sv_plan *p, int packed)
{
    static char out[1 << 16];
    size_t n = 0;
    if (p->iovcnt < 1 || p->iovcnt > SV_PLAN_IOV)
        fz_die("iovcnt");
    for (int i = 0; i < p->iovcnt; i++) {
        if (!p->iov[i].iov_base || p->iov[i].iov_len > sizeof out - n)
            fz_die("iov");
        memcpy(out + n, p->iov[i].iov_base, p->iov[i].iov_len);
        n += p->iov[i].iov_len;
    }
    const char *end = memmem(out, n, "\r\n\r\n", 4);
    if (!end)
        bad(out, n, "no end of head");
    size_t head = (size_t)(end - out) + 4;
    if (n - head != p->body_bytes)
        bad(out, n, "body_bytes");
    if (memcmp(out, "HTTP/1.1 ", 9) != 0 || memmem(out, head, "\r\nHTTP/", 7))
        bad(out, n, "status line");
    for (size_t i = 0; i < head; i++) {
        if (out[i] == '\n' && (i == 0 || out[i - 1] != '\r'))
            bad(out, n, "bare LF in the head");
        if (out[i] == '\r' && (i + 1 >= head || out[i + 1] != '\n'))
            bad(out, n, "bare CR in the head");
    }
    const char *loc = packed ? memmem(out, head, "\r\nLocation: ", 12) : NULL;
    if (loc) {
        if (loc[12] != '/' || loc[13] == '/' || loc[13] == '\\')
            bad(out, n, "a Location that is not an absolute path on this host");
        for (const char *q = loc + 12; *q != '\r'; q++)
            if ((unsigned char)*q > 0x7e || (unsigned char)*q < 0x21)
                bad(out, n, "a Location that is not a URI reference (raw byte)");
    }
    const char *v = packed ? memmem(out, head, "\r\nVary:", 7) : NULL;
    if (v && memmem(v + 7, head - (size_t)(v + 7 - out), "\r\nVary:", 7))
        bad(out, n, "two Vary lines");
    /* the framing fields, by name in any case: one Content-Length (none on
     * a 304), no Transfer-Encoding */
    int ncl, nte;
    const char *cl = fz_field(out, head, "content-length", &ncl);
    fz_field(out, head, "transfer-encoding", &nte);
    if (nte)
        bad(out, n, "a Transfer-Encoding");
    if (p->status == 304) {
        if (ncl || p->body_bytes)
            bad(out, n, "304 with a length or body");
    } else {
        if (ncl != 1)
            bad(out, n, "not exactly one Content-Length");
        unsigned long long want = strtoull(cl, NULL, 10);
        if (req->method == SV_M_HEAD) {
            if (p->body_bytes)
                bad(out, n, "HEAD with a body");
        } else if (want != p->body_bytes) {
            bad(out, n, "Content-Length differs from the body");
        }
    }
}
