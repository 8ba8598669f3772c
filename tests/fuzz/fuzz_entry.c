/*
 * fuzz_entry - a path's entry record, as servd loads and answers it, on
 * arbitrary bytes.
 *
 * A record that decodes (sf_entry_decode) and passes servd's load check
 * (sv_snapshot_check_entry, which sv_snapshot_open runs on every path) is answered
 * as servd answers a path it has cached (sv_pathcache_put, sv_respond) for
 * a set of requests: every encoding, HEAD, HTTP/1.0, a closing connection,
 * one range, several (multipart/byteranges), one past the end, If-Range by
 * date and by the record's own ETag, If-None-Match, If-Match,
 * If-Modified-Since, If-Unmodified-Since and nothing acceptable. Each plan
 * must be one well-formed message whose Content-Length is its body
 * (fz_check_plan): the property is that no record servd accepts can make
 * it frame a response wrongly, and that respond.c's readers of stored
 * header blocks (the Last-Modified replaced when it lies ahead of the
 * clock, the Access-Control-* lines copied into errors, the multipart
 * boundary taken from the ETag) stay inside them. A record that passes the
 * check of the site's 404 page ("status:404") is also served as that page
 * (sv__serve with is404, as not_found does) for the same requests: a 404
 * (or a 500), framed as well.
 *
 * The bodies are in a small pack built at start-up; the seeds are records
 * of it (written by FUZZ_ENTRY_SEEDS=dir ./fuzz_entry, see README.md), so
 * mutations keep body keys that exist.
 */
#include "fuzz_site.h"
#include "http.h"
#include "pathcache.h"
#include "respond_int.h"
#include "sf/store.h"
#include "snapshot.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static sf_reader *rd;
static sv_date date;

/* Requests parsed once; a few more are made from each record's ETag. */
static const char *const raw[] = {
    "GET /f HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip, br, zstd\r\n\r\n",
    "HEAD /f HTTP/1.1\r\nHost: x\r\nAccept-Encoding: br\r\n\r\n",
    "GET /f HTTP/1.0\r\n\r\n",
    "GET /f HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAccept-Encoding: zstd\r\n\r\n",
    "GET /f HTTP/1.1\r\nHost: x\r\nRange: bytes=0-3\r\n\r\n",
    "GET /f HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\nRange: bytes=1-2,4-5,-1\r\n\r\n",
    "GET /f HTTP/1.1\r\nHost: x\r\nRange: bytes=99999999-\r\n\r\n",
    ("GET /f HTTP/1.1\r\nHost: x\r\nRange: bytes=0-0\r\n"
     "If-Range: Tue, 14 Nov 2023 22:13:20 GMT\r\n\r\n"),
    "GET /f HTTP/1.1\r\nHost: x\r\nIf-None-Match: *\r\n\r\n",
    "GET /f HTTP/1.1\r\nHost: x\r\nIf-Match: \"nope\"\r\nAccept-Encoding: gzip\r\n\r\n",
    "GET /f HTTP/1.1\r\nHost: x\r\nIf-Modified-Since: Fri, 01 Jan 2100 00:00:00 GMT\r\n\r\n",
    "GET /f HTTP/1.1\r\nHost: x\r\nIf-Unmodified-Since: Thu, 01 Jan 1970 00:00:01 GMT\r\n\r\n",
    "GET /f HTTP/1.1\r\nHost: x\r\nAccept-Encoding: identity;q=0, *;q=0\r\n\r\n",
    "HEAD /f HTTP/1.1\r\nHost: x\r\nIf-None-Match: W/\"x\", *\r\n\r\n",
};
#define NRAW (sizeof raw / sizeof raw[0])
static sv_request reqs[NRAW];

/* The seeds' bodies, long enough for the ranges above. */
static const char b_id[] = "<html>a page of some length, for ranges</html>";
static const char b_gz[] = "gzip bytes gzip bytes gzip bytes";
static const char b_br[] = "brotli bytes brotli bytes";
static const char b_zs[] = "zstd bytes zstd bytes zstd";

/* Stores the bodies of one seed with w, and writes its record to
 * dir/name when dir is not NULL. */
static void seed(sf_writer *w, const char *dir, const char *name, const char *path, int n,
                 const int *enc, int is404, unsigned flags, int64_t lm)
{
    static const char *const bodies[] = {b_id, b_gz, b_br, b_zs};
    const char *const *b = bodies;
    static const char *const two[] = {b_id, b_br};
    if (n == 2)
        b = two;
    uint8_t *rec;
    size_t len;
    fz_entry(w, path, "text/html; charset=utf-8", n, enc, b, is404, flags, lm, &rec, &len);
    if (dir) {
        char p[512];
        snprintf(p, sizeof p, "%s/%s", dir, name);
        FILE *f = fopen(p, "wb");
        if (!f || fwrite(rec, 1, len, f) != len || fclose(f) != 0)
            fz_die("writing a seed");
    }
    free(rec);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    const char *dir = getenv("FUZZ_ENTRY_SEEDS");
    sf_writer *w = fz_pack_begin("fuzz_entry");
    static const int e1[] = {SF_ENC_IDENTITY};
    static const int e2[] = {SF_ENC_IDENTITY, SF_ENC_BR};
    static const int e4[] = {SF_ENC_IDENTITY, SF_ENC_GZIP, SF_ENC_BR, SF_ENC_ZSTD};
    seed(w, dir, "one", "/f", 1, e1, 0, 0, 1700000000);
    seed(w, dir, "two", "/f", 2, e2, 0, 0, 1700000000);
    seed(w, dir, "four-cors", "/app.js", 4, e4, 0, 0, 1700000000);
    seed(w, dir, "weak", "/f", 1, e1, 0, SF_ENTRY_DATE_WEAK, 1700000000);
    seed(w, dir, "ahead", "/f", 4, e4, 0, 0, 1900000000); /* later than the clock */
    seed(w, dir, "404", NULL, 2, e2, 1, 0, 1700000000);
    if (dir) {
        fz_pack_abort(w);
        exit(0);
    }
    /* one path, so that the pack is a pack */
    fz_put(w, "/index.html", "text/html", 1, e1, (const char *const[]){b_id}, 0, 0, 1700000000);
    rd = fz_pack_end(w);
    sv_date_update(&date, 1800000000);
    for (size_t i = 0; i < NRAW; i++)
        if (sv_http1_parse(raw[i], strlen(raw[i]), &reqs[i]) <= 0)
            fz_die("a request of the table does not parse");
    return 0;
}

static void answer(const sv_request *req)
{
    static sv_scratch scratch;
    static sv_plan plan;
    static const sv_site site;
    sv_respond(req, rd, &site, &date, &scratch, &plan);
    fz_check_plan(req, &plan, 0);
}

/* The request answered with the record as the site's 404 page (as
 * respond.c's not_found serves the "status:404" entry, its bodies from
 * hit), the context set up by sv_respond's own sv__resp_begin. */
static void answer_404(const sv_request *req, const sv_cached *hit)
{
    static sv_scratch scratch;
    static sv_plan plan;
    sv__resp c;
    sv__resp_begin(&c, req, rd, NULL, &date, &scratch, &plan);
    sv__serve(&c, &hit->e, 1, hit->body);
    if (plan.overflow)
        fz_die("a 404 plan outgrew its iovecs");
    if (plan.status != 404 && plan.status != 500)
        fz_die("the 404 page answered with another status");
    fz_check_plan(req, &plan, 0);
}

/* Requests naming the ETag of variant v, when it can be sent in a field. */
static void answer_etag(const sf_variant *v)
{
    static const char *const fmt[] = {
        "GET /f HTTP/1.1\r\nHost: x\r\nIf-None-Match: %.*s\r\n\r\n",
        "GET /f HTTP/1.1\r\nHost: x\r\nIf-Range: %.*s\r\nRange: bytes=0-1,3-4\r\n\r\n",
        "GET /f HTTP/1.1\r\nHost: x\r\nIf-Range: %.*s\r\nRange: bytes=2-\r\n\r\n",
        "GET /f HTTP/1.1\r\nHost: x\r\nIf-Match: %.*s\r\nRange: bytes=-3\r\n\r\n",
    };
    static char buf[1024];
    static sv_request req;
    if (v->etag.len > 512)
        return;
    for (size_t i = 0; i < sizeof fmt / sizeof fmt[0]; i++) {
        int n = snprintf(buf, sizeof buf, fmt[i], (int)v->etag.len, v->etag.ptr);
        if (n > 0 && (size_t)n < sizeof buf && sv_http1_parse(buf, (size_t)n, &req) == n)
            answer(&req);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *rec = malloc(size ? size : 1);
    if (!rec)
        return 0;
    memcpy(rec, data, size);
    sf_entry e;
    char err[512];
    sf_view name = {"/f", 2};
    if (sf_entry_decode(rec, size, &e) == 0) {
        const sv_cached *hit;
        if (e.kind == SF_KIND_FILE &&
            sv_snapshot_check_entry(rd, &e, 1, "fuzz", "entry", name, err, sizeof err) == 0 &&
            (hit = sv_pathcache_put(rd, "/404", 4, &e)) != NULL)
            for (size_t i = 0; i < NRAW; i++)
                answer_404(&reqs[i], hit);
        if (e.kind == SF_KIND_FILE &&
            sv_snapshot_check_entry(rd, &e, 0, "fuzz", "path", name, err, sizeof err) == 0) {
            if (!sv_pathcache_put(rd, "/f", 2, &e))
                fz_die("a checked entry cannot be cached");
            for (size_t i = 0; i < NRAW; i++)
                answer(&reqs[i]);
            for (unsigned i = 0; i < e.nvariants; i++)
                answer_etag(&e.variants[i]);
        }
    }
    free(rec);
    return 0;
}
