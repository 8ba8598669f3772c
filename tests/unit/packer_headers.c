/* ETag format, the keep rule, HTTP dates and the exact header blocks. */
#include "compress.h"
#include "digest.h"
#include "fields.h"
#include "headers.h"
#include "runner.h"

#include <stdio.h>

TEST(etag_format)
{
    uint8_t d[PK_DIGEST_LEN];
    char etag[PK_ETAG_SIZE];
    ASSERT_EQ(pk_sha256("", 0, d), 0);
    pk_etag(d, etag);
    /* SHA-256("") = 47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU in base64url. */
    ASSERT_STR_EQ(etag, "\"47DEQpj8HBSa-_TImW-5JA\"");
    ASSERT_EQ(strlen(etag), PK_ETAG_LEN);
    ASSERT_EQ(pk_sha256("abc", 3, d), 0);
    pk_etag(d, etag);
    /* SHA-256("abc") = ba7816bf8f01cfea414140de5dae2223..., base64url "ungWv48Bz-pBQUDeXa4iIw". */
    ASSERT_STR_EQ(etag, "\"ungWv48Bz-pBQUDeXa4iIw\"");
    for (size_t i = 1; i + 1 < PK_ETAG_LEN; i++) {
        char c = etag[i];
        ASSERT((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
               c == '-' || c == '_');
    }
}

TEST(etag_matches_format_doc_example)
{
    /* docs/format.md §6.3 gives the ETag of bench/fixtures/w1/index.html. */
    char path[4096];
    snprintf(path, sizeof path, "%s/bench/fixtures/w1/index.html", t_source_dir());
    FILE *f = fopen(path, "rb");
    if (!f)
        t__fail(__FILE__, __LINE__, "%s: missing", path);
    char buf[4096];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    uint8_t d[PK_DIGEST_LEN];
    char etag[PK_ETAG_SIZE];
    ASSERT_EQ(pk_sha256(buf, n, d), 0);
    pk_etag(d, etag);
    ASSERT_STR_EQ(etag, "\"ZQ7j-Bo29tzcIaOKwxMMWQ\"");
}

TEST(keep_rule)
{
    ASSERT_EQ(PK_KEEP_MIN_PERCENT, 5);
    ASSERT_EQ(PK_KEEP_MIN_BYTES, 64);
    ASSERT_EQ(pk_keep(1000, 936), 1);   /* 64 bytes and 6.4% */
    ASSERT_EQ(pk_keep(1000, 937), 0);   /* 63 bytes */
    ASSERT_EQ(pk_keep(10000, 9500), 1); /* exactly 5% */
    ASSERT_EQ(pk_keep(10000, 9501), 0); /* just under 5% */
    ASSERT_EQ(pk_keep(100, 10), 1);
    ASSERT_EQ(pk_keep(100, 100), 0);
    ASSERT_EQ(pk_keep(100, 150), 0);
    ASSERT_EQ(pk_keep(60, 1), 0); /* cannot save 64 bytes */
}

static const pk_header extras[] = {{"X-Frame-Options", "DENY"}, {"Link", "</a.css>; rel=preload"}};

TEST(headers_200_304_negotiable)
{
    pk_rep r = {"text/css; charset=utf-8", "no-cache", 784111777, 1, extras, 2};
    pk_buf b = PK_BUF_INIT;
    size_t rep = 0;
    ASSERT_EQ(pk_render_200(&b, &rep, &r, 2, 1234, "\"abc\""), 0);
    const char *want = "HTTP/1.1 200 OK\r\n"
                       "Content-Length: 1234\r\n"
                       "Content-Type: text/css; charset=utf-8\r\n"
                       "Content-Encoding: br\r\n"
                       "ETag: \"abc\"\r\n"
                       "Last-Modified: Sun, 06 Nov 1994 08:49:37 GMT\r\n"
                       "Cache-Control: no-cache\r\n"
                       "Vary: Accept-Encoding\r\n"
                       "Accept-Ranges: bytes\r\n"
                       "X-Frame-Options: DENY\r\n"
                       "Link: </a.css>; rel=preload\r\n";
    ASSERT_STR_EQ(b.p, want);
    ASSERT_STR_EQ(b.p + rep, strstr(want, "Content-Type"));
    ASSERT_EQ(pk_render_304(&b, &r, "\"abc\""), 0);
    ASSERT_STR_EQ(b.p, "HTTP/1.1 304 Not Modified\r\n"
                       "ETag: \"abc\"\r\n"
                       "Last-Modified: Sun, 06 Nov 1994 08:49:37 GMT\r\n"
                       "Cache-Control: no-cache\r\n"
                       "Vary: Accept-Encoding\r\n"
                       "X-Frame-Options: DENY\r\n"
                       "Link: </a.css>; rel=preload\r\n");
    /* Identity of a negotiable entry: Vary too, no Content-Encoding. */
    ASSERT_EQ(pk_render_200(&b, &rep, &r, 0, 5, "\"i\""), 0);
    ASSERT(strstr(b.p, "Vary: Accept-Encoding\r\n") != NULL);
    ASSERT(strstr(b.p, "Content-Encoding") == NULL);
    pk_buf_free(&b);
}

TEST(headers_single_variant_has_no_vary)
{
    pk_rep r = {"image/png", "public, max-age=3600", 0, 0, NULL, 0};
    pk_buf b = PK_BUF_INIT;
    size_t rep = 0;
    ASSERT_EQ(pk_render_200(&b, &rep, &r, 0, 7, "\"p\""), 0);
    ASSERT_STR_EQ(b.p, "HTTP/1.1 200 OK\r\nContent-Length: 7\r\nContent-Type: image/png\r\n"
                       "ETag: \"p\"\r\nLast-Modified: Thu, 01 Jan 1970 00:00:00 GMT\r\n"
                       "Cache-Control: public, max-age=3600\r\nAccept-Ranges: bytes\r\n");
    ASSERT_EQ(rep, strlen("HTTP/1.1 200 OK\r\nContent-Length: 7\r\n"));
    ASSERT_EQ(pk_render_304(&b, &r, "\"p\""), 0);
    ASSERT(strstr(b.p, "Vary") == NULL);
    pk_buf_free(&b);
}

TEST(headers_404_block)
{
    pk_rep r = {"text/html; charset=utf-8", "no-cache", 0, 1, extras, 1};
    pk_buf b = PK_BUF_INIT;
    size_t rep = 0;
    ASSERT_EQ(pk_render_404(&b, &rep, &r, 1, 99), 0);
    ASSERT_STR_EQ(b.p, "HTTP/1.1 404 Not Found\r\n"
                       "Content-Length: 99\r\n"
                       "Content-Type: text/html; charset=utf-8\r\n"
                       "Content-Encoding: gzip\r\n"
                       "Cache-Control: no-cache\r\n"
                       "Vary: Accept-Encoding\r\n"
                       "X-Frame-Options: DENY\r\n");
    ASSERT_EQ(rep, strlen("HTTP/1.1 404 Not Found\r\nContent-Length: 99\r\n"));
    pk_buf_free(&b);
}

/* The 404 is no-cache whatever /404.html's rule says, but keeps a
 * no-transform the rule asks for (Cloudflare must not recompress it). */
TEST(headers_404_keeps_no_transform)
{
    pk_rep r = {.mime = "text/html",
                .cache_control = "public, max-age=0, s-maxage=60, must-revalidate, no-transform",
                .negotiable = 1};
    pk_buf b = PK_BUF_INIT;
    size_t rep = 0;
    ASSERT_EQ(pk_render_404(&b, &rep, &r, 0, 5), 0);
    ASSERT(strstr(b.p, "\r\nCache-Control: no-cache, no-transform\r\n") != NULL);
    r.cache_control = "private=\"a, no-transform\", max-age=60";
    ASSERT_EQ(pk_render_404(&b, &rep, &r, 0, 5), 0);
    ASSERT(strstr(b.p, "\r\nCache-Control: no-cache\r\n") != NULL);
    pk_buf_free(&b);
}

TEST(cache_control_has)
{
    ASSERT(pk_cache_control_has("no-transform", "no-transform"));
    ASSERT(pk_cache_control_has("public,max-age=60 ,  No-Transform", "no-transform"));
    ASSERT(pk_cache_control_has("max-age=60, s-maxage=5", "s-maxage"));
    ASSERT(!pk_cache_control_has("no-transformx, xno-transform", "no-transform"));
    ASSERT(!pk_cache_control_has("no-cache=\"no-transform\"", "no-transform"));
    ASSERT(!pk_cache_control_has("max-age=60", "max"));
}

TEST(headers_find)
{
    const char *blk = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\ncache-control: no-cache\r\n";
    const char *v;
    size_t n;
    ASSERT_EQ(pk_header_find(blk, strlen(blk), "Cache-Control", &v, &n), 0);
    ASSERT_MEM_EQ(v, n, "no-cache", 8);
    ASSERT_NE(pk_header_find(blk, strlen(blk), "ETag", &v, &n), 0);
    ASSERT_NE(pk_header_find(blk, strlen(blk), "Content", &v, &n), 0);
}
