/*
 * servd's load check of one entry (sv_snapshot_check_entry, servd/snapshot.c): the
 * header blocks servd writes unchanged must be laid out as docs/format.md
 * §6 says, or the pack is refused before it serves a byte. A block whose
 * Content-Length is not its body's, or that carries a framing field or a
 * broken line, would frame responses wrongly (a cache in front would read
 * the next response from the wrong byte).
 */
#include "runner.h"
#include "sf/store.h"
#include "snapshot.h"

static const char body[] = "twelve bytes";
static uint8_t key[SF_KEY_LEN] = {7, 7, 7};

static sf_pack *pack;
static sf_reader *rd;

static void open_pack(void)
{
    char path[4200], err[512];
    snprintf(path, sizeof path, "%s/check.lmdb", t_tmpdir());
    sf_writer *w;
    if (sf_writer_open(path, 1 << 20, &w, err, sizeof err) != 0)
        t__fail(__FILE__, __LINE__, "writer: %s", err);
    ASSERT_EQ(sf_writer_put_body(w, key, body, sizeof body - 1), 0);
    sf_meta meta;
    memset(&meta, 0, sizeof meta);
    if (sf_writer_commit(w, &meta, err, sizeof err) != 0)
        t__fail(__FILE__, __LINE__, "commit: %s", err);
    if (sf_pack_open(path, &pack, err, sizeof err) != 0)
        t__fail(__FILE__, __LINE__, "open: %s", err);
    ASSERT_EQ(sf_reader_begin(pack, &rd), 0);
}

static void close_pack(void)
{
    sf_reader_end(rd);
    sf_pack_close(pack);
}

/* The check's verdict on a one-variant entry with 200 block status + rep
 * (rep starting right after status) and 304 block h304; err gets the
 * message. */
static int check_n(const char *status, const char *rep, size_t rep_len, const char *h304, int is404,
                   char *err, size_t errlen)
{
    char h200[1024];
    int sl = snprintf(h200, sizeof h200, "%s", status);
    ASSERT(sl + rep_len < sizeof h200);
    memcpy(h200 + sl, rep, rep_len);
    sf_entry_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.kind = SF_KIND_FILE;
    spec.mime.ptr = "text/plain";
    spec.mime.len = 10;
    spec.nvariants = 1;
    sf_variant_spec *v = &spec.variants[0];
    v->encoding = SF_ENC_IDENTITY;
    v->body_len = sizeof body - 1;
    memcpy(v->body_key, key, SF_KEY_LEN);
    v->etag.ptr = "\"e\"";
    v->etag.len = 3;
    v->h200.ptr = h200;
    v->h200.len = (size_t)sl + rep_len;
    v->rep_off = (size_t)sl;
    v->h304.ptr = h304;
    v->h304.len = strlen(h304);
    uint8_t *rec;
    size_t n;
    ASSERT_EQ(sf_entry_encode(&spec, &rec, &n), 0);
    sf_entry e;
    ASSERT_EQ(sf_entry_decode(rec, n, &e), 0);
    err[0] = '\0';
    int rc = sv_snapshot_check_entry(rd, &e, is404, "site.lmdb", "path", (sf_view){"/a.txt", 6},
                                     err, errlen);
    free(rec);
    return rc;
}

static int check(const char *status, const char *rep, const char *h304, int is404, char *err,
                 size_t errlen)
{
    return check_n(status, rep, strlen(rep), h304, is404, err, errlen);
}

#define S200  "HTTP/1.1 200 OK\r\nContent-Length: 12\r\n"
#define S404  "HTTP/1.1 404 Not Found\r\nContent-Length: 12\r\n"
#define REP   "Content-Type: text/plain\r\nETag: \"e\"\r\nCache-Control: no-cache\r\n"
#define RULES "X-Frame-Options: DENY\r\nAccess-Control-Allow-Origin: *\r\n"
#define H304  "HTTP/1.1 304 Not Modified\r\nETag: \"e\"\r\nCache-Control: no-cache\r\n"

TEST(check_accepts_what_servd_pack_writes)
{
    char err[512];
    open_pack();
    ASSERT_EQ(check(S200, REP, H304, 0, err, sizeof err), 0);
    ASSERT_EQ(check(S200, REP RULES, H304 RULES, 0, err, sizeof err), 0);
    ASSERT_EQ(check(S200, "Content-Type: text/plain\r\nX-Empty:\r\nX-Tab:\tv\r\n", H304, 0, err,
                    sizeof err),
              0);
    /* the status:404 entry: a 404 status line, no 304 block */
    ASSERT_EQ(check(S404, REP, "", 1, err, sizeof err), 0);
    close_pack();
}

/* Each refusal names the file, the path and the variant. */
static void refused(const char *status, const char *rep, const char *h304, int is404)
{
    char err[512];
    ASSERT_EQ(check(status, rep, h304, is404, err, sizeof err), SF_ECORRUPT);
    if (!strstr(err, "site.lmdb: corrupt pack: the identity header block of path /a.txt is not "
                     "one servd can send"))
        t__fail(__FILE__, __LINE__, "unexpected message: %s", err);
}

TEST(check_refuses_blocks_that_frame_wrongly)
{
    open_pack();
    /* a Content-Length that is not the body's (12) */
    refused("HTTP/1.1 200 OK\r\nContent-Length: 13\r\n", REP, H304, 0);
    refused("HTTP/1.1 200 OK\r\nContent-Length: 012\r\n", REP, H304, 0);
    refused("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n", "2\r\n" REP, H304, 0);
    refused("HTTP/1.1 200 OK\r\n", REP, H304, 0);
    /* another status, or the wrong one for the entry */
    refused("HTTP/1.1 206 Partial Content\r\nContent-Length: 12\r\n", REP, H304, 0);
    refused(S404, REP, H304, 0);
    refused(S200, REP, "", 1);
    refused(S200, REP, "HTTP/1.1 200 OK\r\nETag: \"e\"\r\n", 0);
    /* rep not at Content-Type: a multipart 206 would drop another line */
    refused(S200, "ETag: \"e\"\r\nContent-Type: text/plain\r\n", H304, 0);
    refused("HTTP/1.1 200 OK\r\nContent-Length: 12\r\nX-A: b\r\n", REP, H304, 0);
    /* framing fields, in the 200 block or the 304 block */
    refused(S200, REP "Transfer-Encoding: chunked\r\n", H304, 0);
    refused(S200, REP "content-length: 12\r\n", H304, 0);
    refused(S200, REP, H304 "Content-Length: 12\r\n", 0);
    /* broken lines: a bare LF or CR, no CRLF at the end, a blank line, a
     * name that is no token, no colon */
    refused(S200, "Content-Type: text/plain\nX-A: b\r\n", H304, 0);
    refused(S200, "Content-Type: text/plain\rX-A: b\r\n", H304, 0);
    refused(S200, "Content-Type: text/plain", H304, 0);
    refused(S200, REP "\r\n", H304, 0);
    refused(S200, REP "X A: b\r\n", H304, 0);
    refused(S200, REP "X-A b\r\n", H304, 0);
    refused(S200, REP, H304 "\r\nHTTP/1.1 200 OK\r\n", 0);
    /* fields servd writes itself, or a second Content-Type (a multipart
     * 206 drops only the first line of rep) */
    refused(S200, REP "Date: Tue, 14 Nov 2023 22:13:20 GMT\r\n", H304, 0);
    refused(S200, REP "Content-Range: bytes 0-1/12\r\n", H304, 0);
    refused(S200, REP "Connection: close\r\n", H304, 0);
    refused(S200, REP "content-type: text/html\r\n", H304, 0);
    refused(S200, REP, H304 "Content-Type: text/plain\r\n", 0);
    refused(S200, REP, H304 "Keep-Alive: timeout=5\r\n", 0);
    /* a NUL in a value */
    static const char nul[] = "Content-Type: text/plain\r\nX-A: a\0b\r\n";
    char err[512];
    ASSERT_EQ(check_n(S200, nul, sizeof nul - 1, H304, 0, err, sizeof err), SF_ECORRUPT);
    ASSERT_EQ(check_n(S200, nul, 26, H304, 0, err, sizeof err), 0); /* without that line */
    close_pack();
}
