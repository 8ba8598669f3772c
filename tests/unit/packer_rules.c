/* The rules file: parsing, rejection messages, matching, default Cache-Control,
 * hashed-name detection. */
#include "rules.h"
#include "runner.h"

#include <stdio.h>

static const char *write_rules(const char *name, const char *json)
{
    static char path[4096];
    snprintf(path, sizeof path, "%s/%s", t_tmpdir(), name);
    FILE *f = fopen(path, "w");
    ASSERT(f != NULL);
    fputs(json, f);
    fclose(f);
    return path;
}

/* Loading must fail, and the message must contain each of the needles. */
static void rejects(const char *json, const char *needle1, const char *needle2)
{
    const char *path = write_rules("bad.json", json);
    pk_rules *r = NULL;
    char err[1024] = "";
    if (pk_rules_load(path, &r, err, sizeof err) == 0)
        t__fail(__FILE__, __LINE__, "accepted: %s", json);
    if (!strstr(err, path) || (needle1 && !strstr(err, needle1)) ||
        (needle2 && !strstr(err, needle2)))
        t__fail(__FILE__, __LINE__, "message \"%s\" lacks the file, \"%s\" or \"%s\"", err,
                needle1 ? needle1 : "", needle2 ? needle2 : "");
}

static int hashed(const char *key)
{
    return pk_hashed_name(key, strlen(key));
}

TEST(rules_hashed_names)
{
    ASSERT_EQ(hashed("/app.3f9a1c2e.js"), 1);
    ASSERT_EQ(hashed("/assets/main-BkR2x9aQ.js"), 1);
    ASSERT_EQ(hashed("/assets/index-4f2a9c1d.css"), 1);
    ASSERT_EQ(hashed("/chunk-5X7JQ2ZL.js"), 1);
    ASSERT_EQ(hashed("/assets/index-CpZ3tG_-.js"), 1); /* base64url with '_' and '-' */
    ASSERT_EQ(hashed("/theme.8d2f7a1b.css"), 1);
    ASSERT_EQ(hashed("/app.3f9a1c2e.min.js"), 1);
    ASSERT_EQ(hashed("/x.a1b2c3d4e5f6"), 0);   /* the hash is the extension */
    ASSERT_EQ(hashed("/app-a1b2c3d4e5f6"), 1); /* no extension */
    /* The first segment of a name is never the hash. */
    ASSERT_EQ(hashed("/3f9a1c2e4b5d6a7f8e9d.js"), 0); /* webpack [contenthash].js: use a rule */
    ASSERT_EQ(hashed("/IMG_20230101.jpg"), 0);
    ASSERT_EQ(hashed("/DSC01234.JPG"), 0);
    ASSERT_EQ(hashed("/Report2023Q4.pdf"), 0);
    ASSERT_EQ(hashed("/data_2024Q1.csv"), 0);
    ASSERT_EQ(hashed("/photo-IMG20230101.png"), 0); /* no lowercase: not base64url */
    ASSERT_EQ(hashed("/img/IMG_20230101.jpg"), 0);
    ASSERT_EQ(hashed("/scan-20230101.pdf"), 0); /* digits only */
    ASSERT_EQ(hashed("/backup-2023-01-01.tar"), 0);
    ASSERT_EQ(hashed("/app.js"), 0);
    ASSERT_EQ(hashed("/jquery-3.6.0.min.js"), 0); /* a version, not a hash */
    ASSERT_EQ(hashed("/report-20230115.pdf"), 0); /* a date: digits only */
    ASSERT_EQ(hashed("/v1beta2alpha.js"), 0);     /* lowercase word with digits */
    ASSERT_EQ(hashed("/deadbeef.js"), 0);         /* hex letters, no digit */
    ASSERT_EQ(hashed("/background.png"), 0);
    ASSERT_EQ(hashed("/3f9a1c2e/app.js"), 0); /* only the file name counts */
    ASSERT_EQ(hashed("/app.3f9a1c2"), 0);     /* 7 chars: the extension here */
    ASSERT_EQ(hashed("/x.3f9a1c2.js"), 0);    /* 7 chars: too short */
    /* Hashes from real builds (Vite, Rollup, Nuxt, esbuild, webpack). */
    ASSERT_EQ(hashed("/assets/index-BRBmoGS9.js"), 1);
    ASSERT_EQ(hashed("/assets/vendor-C3k1A_bR.js"), 1);
    ASSERT_EQ(hashed("/_nuxt/entry.B8d9x_2k.js"), 1);
    ASSERT_EQ(hashed("/main-ZQ2ALVNE.js"), 1);
    ASSERT_EQ(hashed("/static/js/main.8c2f41d7e9a0b3c6.js"), 1);
    /* Names people give files: camel case with years, counts and versions.
     * Each of these looked hashed before and would have been pinned for a
     * year in every browser that fetched it. */
    static const char *const names[] = {
        "/banner-Summer2024.jpg",
        "/report-March2024.pdf",
        "/photo-Paris2019.jpg",
        "/cv-JaneDoe2024.pdf",
        "/slides-WebConf2024.pdf",
        "/brochure.Spring2025.pdf",
        "/newsletter-Issue12Final.pdf",
        "/team-JohnSmith2.jpg",
        "/hero-Background4k.webp",
        "/map-Level10Boss.png",
        "/Roboto-Bold2021.woff2",
        "/OpenSans-SemiBold2.ttf",
        "/Logo-WhiteBg2x.png",
        "/user-Avatar01Large.png",
        "/data-2024Q1report.csv",
        "/list-Top10Web.png",
        "/icon-Img01Big.png",
        "/os-Win10Pro.png",
        "/dl-arm64Mac.zip",
        "/phone-iPhone12Pro.jpg",
        "/video-H264Clip.mp4",
        "/build-20231201a.js",
        "/menu-cafe2024.pdf",
        "/notes-RELEASE2.txt",
        "/sale-WINTER22.png",
        "/iso-Ubuntu2204.txt",
        "/doc-Q3Results.pdf",
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (hashed(names[i]))
            t__fail(__FILE__, __LINE__, "%s taken for a hashed name", names[i]);
}

TEST(rules_default_cache_control)
{
    ASSERT_STR_EQ(pk_rules_cache_control(NULL, "/index.html", 11, "text/html; charset=utf-8"),
                  PK_CC_HTML);
    /* HTML stays no-cache even when its name looks hashed. */
    ASSERT_STR_EQ(pk_rules_cache_control(NULL, "/p.3f9a1c2e.html", 16, "text/html"), PK_CC_HTML);
    ASSERT_STR_EQ(pk_rules_cache_control(NULL, "/app.3f9a1c2e.js", 16, "text/javascript"),
                  PK_CC_IMMUTABLE);
    ASSERT_STR_EQ(pk_rules_cache_control(NULL, "/app.js", 7, "text/javascript"), PK_CC_DEFAULT);
    ASSERT_STR_EQ(PK_CC_IMMUTABLE, "public, max-age=31536000, immutable");
    ASSERT_STR_EQ(PK_CC_HTML, "no-cache");
}

TEST(rules_load_and_apply)
{
    const char *path = write_rules(
        "ok.json", "{\"$schema\": \"x\", \"comment\": \"test\",\n"
                   " \"cache_control\": [{\"match\": \"/static/**\", \"value\": \"public, "
                   "max-age=60\"},\n"
                   "                    {\"match\": \"*.css\", \"value\": \"no-store\"},\n"
                   "                    {\"match\": \"/static/x.css\", \"value\": \"never\"}],\n"
                   " \"headers\": [{\"match\": \"**\", \"name\": \"X-Frame-Options\", "
                   "\"value\": \"DENY\"},\n"
                   "              {\"match\": \"*.html\", \"name\": \"Link\", \"value\": "
                   "\"</a.css>; rel=preload\"}],\n"
                   " \"exclude\": [\"*.map\", \"/drafts/**\"],\n"
                   " \"encoded\": [\"/Build/*.br\"],\n"
                   " \"mime\": [{\"match\": \"*.mdx\", \"type\": \"text/markdown; "
                   "charset=utf-8\"}]}\n");
    pk_rules *r = NULL;
    char err[1024] = "";
    if (pk_rules_load(path, &r, err, sizeof err) != 0)
        t__fail(__FILE__, __LINE__, "%s", err);
    /* cache_control: first match wins, falls back to the defaults. */
    ASSERT_STR_EQ(pk_rules_cache_control(r, "/static/x.css", 13, "text/css"), "public, max-age=60");
    ASSERT_STR_EQ(pk_rules_cache_control(r, "/a/b.css", 8, "text/css"), "no-store");
    ASSERT_STR_EQ(pk_rules_cache_control(r, "/a.html", 7, "text/html"), PK_CC_HTML);
    /* headers: every match applies, in file order. */
    ASSERT_EQ(pk_rules_nheaders(r), 2);
    pk_header h[2];
    size_t nh;
    ASSERT_EQ(pk_rules_headers(r, "/docs/a.html", 12, h, &nh, err, sizeof err), 0);
    ASSERT_EQ(nh, 2);
    ASSERT_STR_EQ(h[0].name, "X-Frame-Options");
    ASSERT_STR_EQ(h[1].name, "Link");
    ASSERT_STR_EQ(h[1].value, "</a.css>; rel=preload");
    ASSERT_EQ(pk_rules_headers(r, "/a.js", 5, h, &nh, err, sizeof err), 0);
    ASSERT_EQ(nh, 1);
    /* exclude and mime */
    ASSERT_EQ(pk_rules_excluded(r, "/js/app.js.map", 14), 1);
    ASSERT_EQ(pk_rules_excluded(r, "/drafts/a/b.html", 16), 1);
    ASSERT_EQ(pk_rules_excluded(r, "/js/app.js", 10), 0);
    /* encoded */
    ASSERT_EQ(pk_rules_encoded(r, "/Build/g.wasm.br", 16), 1);
    ASSERT_EQ(pk_rules_encoded(r, "/Build/g.wasm", 13), 0);
    ASSERT_EQ(pk_rules_encoded(r, "/x/Build/g.wasm.br", 18), 0);
    ASSERT_EQ(pk_rules_encoded(NULL, "/Build/g.wasm.br", 16), 0);
    ASSERT_STR_EQ(pk_rules_mime(r, "/a/b.mdx", 8), "text/markdown; charset=utf-8");
    ASSERT(pk_rules_mime(r, "/a/b.md", 7) == NULL);
    pk_rules_free(r);
}

TEST(rules_reject_bad_json)
{
    rejects("{\"exclude\": [\"a\",]}", ":1:", NULL); /* FILE:LINE:COL */
    rejects("[]", "top level", NULL);
    rejects("{\"exclude\": [\"a\"], \"exclude\": []}", NULL, NULL); /* duplicate key */
}

TEST(rules_reject_structure)
{
    rejects("{\"cachecontrol\": []}", ": /cachecontrol: ", "unknown member \"cachecontrol\"");
    rejects("{\"a/b~c\": []}", ": /a~1b~0c: ", "unknown member"); /* RFC 6901 escapes */
    rejects("{\"cache_control\": {}}", "/cache_control", "array");
    rejects("{\"cache_control\": [{\"value\": \"x\"}]}", "/cache_control/0", "\"match\"");
    rejects("{\"cache_control\": [{\"match\": \"*\", \"value\": 3}]}",
            "/cache_control/0/value: ", "must be a string");
    rejects("{\"cache_control\": [{\"match\": \"*\", \"value\": \"x\", \"vlaue\": \"y\"}]}",
            "/cache_control/0", "vlaue");
    rejects("{\"exclude\": [\"ok\", 5]}", "/exclude/1", "glob");
    rejects("{\"exclude\": [\"/[abc\"]}", "/exclude/0", "bad glob");
    rejects("{\"encoded\": \"*.br\"}", "/encoded", "array");
    rejects("{\"encoded\": [{\"match\": \"*.br\"}]}", "/encoded/0", "glob");
    rejects("{\"mime\": [{\"match\": \"*\"}]}", "/mime/0", "\"type\"");
}

TEST(rules_reject_bad_header_names_and_values)
{
    rejects("{\"headers\": [{\"match\": \"*\", \"name\": \"X Bad\", \"value\": \"v\"}]}",
            "/headers/0", "not a valid header name");
    rejects("{\"headers\": [{\"match\": \"*\", \"name\": \"X:y\", \"value\": \"v\"}]}",
            "/headers/0", "not a valid header name");
    rejects("{\"headers\": [{\"match\": \"*\", \"name\": \"\", \"value\": \"v\"}]}", "/headers/0",
            NULL);
    rejects("{\"headers\": [{\"match\": \"*\", \"name\": \"content-length\", \"value\": \"1\"}]}",
            "/headers/0", "set by servd-pack");
    rejects("{\"headers\": [{\"match\": \"*\", \"name\": \"Vary\", \"value\": \"Origin\"}]}",
            "/headers/0", "Vary: Accept-Encoding goes out with every response that has");
    /* the refusal names the rule that sets it */
    rejects("{\"headers\": [{\"match\": \"*\", \"name\": \"cache-control\", \"value\": "
            "\"no-store\"}]}",
            "/headers/0", "(use a cache_control rule)");
    rejects("{\"headers\": [{\"match\": \"*\", \"name\": \"Content-Type\", \"value\": "
            "\"text/plain\"}]}",
            "/headers/0", "(use a mime rule)");
    /* digests differ per encoding and range; Age is a cache's */
    rejects("{\"headers\": [{\"match\": \"*\", \"name\": \"Content-Digest\", \"value\": "
            "\"sha-256=:AAAA:\"}]}",
            "/headers/0", "one value for every encoding");
    rejects("{\"headers\": [{\"match\": \"*\", \"name\": \"age\", \"value\": \"0\"}]}",
            "/headers/0", "one value for every encoding");
    /* each value problem is named, at the value's JSON pointer */
    rejects("{\"headers\": [{\"match\": \"*\", \"name\": \"X-A\", \"value\": \"a\\r\\nX-B: b\"}]}",
            "/headers/0/value", "line break");
    rejects("{\"headers\": [{\"match\": \"*\", \"name\": \"X-A\", \"value\": \"a\\nb\"}]}",
            "/headers/0/value", "line break");
    rejects("{\"headers\": [{\"match\": \"*\", \"name\": \"X-A\", \"value\": \"a\\u0001b\"}]}",
            "/headers/0/value", "control character");
    rejects("{\"headers\": [{\"match\": \"*\", \"name\": \"X-A\", \"value\": \" padded\"}]}",
            "/headers/0/value", "whitespace");
    rejects("{\"headers\": [{\"match\": \"*\", \"name\": \"X-A\", \"value\": \"\"}]}",
            "/headers/0/value", "is empty");
    /* NUL: jansson refuses \u0000 in strings; the message says so in plain words. */
    rejects("{\"headers\": [{\"match\": \"*\", \"name\": \"X-A\", \"value\": \"a\\u0000b\"}]}",
            "NUL", "not allowed");
    rejects("\xef\xbb\xbf{}", "byte order mark", NULL);
    rejects("{\"cache_control\": [{\"match\": \"*\", \"value\": \"max-age=1\\r\\nX: y\"}]}",
            "/cache_control/0/value", "line break");
    rejects("{\"mime\": [{\"match\": \"*\", \"type\": \"text\"}]}", "/mime/0", "media type");
    rejects("{\"mime\": [{\"match\": \"*\", \"type\": \"text/plain; foo\"}]}", "/mime/0/type",
            "a parameter without \"=value\" (foo)");
    rejects("{\"mime\": [{\"match\": \"*\", \"type\": \"text/*\"}]}", "/mime/0/type",
            "media range");
    rejects("{\"mime\": [{\"match\": \"*\", \"type\": \"text/html\\r\\nX: y\"}]}", "/mime/0",
            "media type");
}

/* Loads json, then asks for the headers of key: refused, naming the rules
 * file and each needle. */
static void path_refused(const char *json, const char *key, const char *n1, const char *n2)
{
    const char *path = write_rules("paths.json", json);
    pk_rules *r = NULL;
    char err[1024] = "";
    if (pk_rules_load(path, &r, err, sizeof err) != 0)
        t__fail(__FILE__, __LINE__, "refused at load: %s", err);
    pk_header h[64];
    size_t n = 99;
    ASSERT(pk_rules_nheaders(r) <= 64);
    if (pk_rules_headers(r, key, strlen(key), h, &n, err, sizeof err) == 0)
        t__fail(__FILE__, __LINE__, "%s: headers accepted: %s", key, json);
    ASSERT_EQ(n, 0);
    if (!strstr(err, path) || !strstr(err, key) || !strstr(err, n1) || (n2 && !strstr(err, n2)))
        t__fail(__FILE__, __LINE__, "message \"%s\" lacks the file, %s, \"%s\" or \"%s\"", err, key,
                n1, n2 ? n2 : "");
    pk_rules_free(r);
}

TEST(rules_singleton_fields_once_per_path)
{
    static const char two_acao[] =
        "{\"headers\": [{\"match\": \"**\", \"name\": \"Access-Control-Allow-Origin\", "
        "\"value\": \"*\"},\n"
        "  {\"match\": \"*.js\", \"name\": \"X-A\", \"value\": \"1\"},\n"
        "  {\"match\": \"*.html\", \"name\": \"access-control-allow-origin\", "
        "\"value\": \"https://a.example\"}]}";
    path_refused(two_acao, "/docs/a.html", "/headers/0 and /headers/2",
                 "access-control-allow-origin");
    /* a path only one of them matches is fine */
    const char *path = write_rules("ok.json", two_acao);
    pk_rules *r = NULL;
    char err[1024] = "";
    if (pk_rules_load(path, &r, err, sizeof err) != 0)
        t__fail(__FILE__, __LINE__, "%s", err);
    pk_header h[3];
    size_t n;
    ASSERT_EQ(pk_rules_headers(r, "/a.js", 5, h, &n, err, sizeof err), 0);
    ASSERT_EQ(n, 2);
    pk_rules_free(r);
    /* the same value twice (a site-wide rule and a narrower one agreeing): sent once */
    path = write_rules("same.json",
                       "{\"headers\": [{\"match\": \"**\", \"name\": \"X-Content-Type-Options\", "
                       "\"value\": \"nosniff\"},\n"
                       "  {\"match\": \"*.html\", \"name\": \"x-content-type-options\", "
                       "\"value\": \"nosniff\"}]}");
    if (pk_rules_load(path, &r, err, sizeof err) != 0)
        t__fail(__FILE__, __LINE__, "%s", err);
    ASSERT_EQ(pk_rules_headers(r, "/a.html", 7, h, &n, err, sizeof err), 0);
    ASSERT_EQ(n, 1);
    ASSERT_STR_EQ(h[0].name, "X-Content-Type-Options");
    pk_rules_free(r);
    /* list fields may come from several rules (Link, CSP, custom fields) */
    path = write_rules("lists.json",
                       "{\"headers\": [{\"match\": \"**\", \"name\": \"Link\", \"value\": "
                       "\"</a.css>; rel=preload\"},\n"
                       "  {\"match\": \"**\", \"name\": \"link\", \"value\": \"</b.js>; "
                       "rel=preload\"},\n"
                       "  {\"match\": \"**\", \"name\": \"X-Robots-Tag\", \"value\": "
                       "\"noindex\"},\n"
                       "  {\"match\": \"**\", \"name\": \"X-Robots-Tag\", \"value\": "
                       "\"nofollow\"}]}");
    if (pk_rules_load(path, &r, err, sizeof err) != 0)
        t__fail(__FILE__, __LINE__, "%s", err);
    pk_header h4[4];
    ASSERT_EQ(pk_rules_headers(r, "/i.html", 7, h4, &n, err, sizeof err), 0);
    ASSERT_EQ(n, 4);
    pk_rules_free(r);
}

/* Four "X-Pad-i: <4000 v>" lines on every path (4 x 4011 bytes with CRLF)
 * and a fifth of last value bytes on *.html: 16055 + last bytes in all. */
static void pad_rules(char *json, size_t cap, size_t last)
{
    static char v[4001];
    memset(v, 'v', 4000);
    int o = snprintf(json, cap, "{\"headers\": [");
    for (int i = 0; i < 5; i++) {
        v[i < 4 ? 4000 : last] = '\0';
        o += snprintf(json + o, cap - (size_t)o,
                      "%s{\"match\": \"%s\", \"name\": \"X-Pad-%d\", \"value\": \"%s\"}",
                      i ? ", " : "", i < 4 ? "**" : "*.html", i, v);
        v[i < 4 ? 4000 : last] = 'v';
    }
    snprintf(json + o, cap - (size_t)o, "]}");
}

/* Loads json: @return 0 when accepted, else -1 with err. */
static int loads(const char *json, char *err, size_t errlen)
{
    pk_rules *r = NULL;
    int rc = pk_rules_load(write_rules("try.json", json), &r, err, errlen);
    pk_rules_free(r);
    return rc;
}

TEST(rules_header_lines_per_path_are_bounded)
{
    static char json[32768];
    char err[1024];
    /* exactly PK_HEADERS_PATH_MAX bytes of lines: accepted; one more: refused */
    pad_rules(json, sizeof json, 16384 - 16055);
    const char *path = write_rules("pad.json", json);
    pk_rules *r = NULL;
    if (pk_rules_load(path, &r, err, sizeof err) != 0)
        t__fail(__FILE__, __LINE__, "%s", err);
    pk_header h[5];
    size_t n;
    if (pk_rules_headers(r, "/index.html", 11, h, &n, err, sizeof err) != 0)
        t__fail(__FILE__, __LINE__, "16384 bytes refused: %s", err);
    ASSERT_EQ(n, 5);
    pk_rules_free(r);
    pad_rules(json, sizeof json, 16384 - 16055 + 1);
    path_refused(json, "/index.html", "more than 16384 bytes", "/headers/4");
    /* names: 256 bytes at most; values: 4096 */
    char name[300], value[4100];
    memset(name, 'N', sizeof name);
    memset(value, 'v', sizeof value);
    for (int len = 256; len <= 257; len++) {
        snprintf(json, sizeof json,
                 "{\"headers\": [{\"match\": \"*\", \"name\": \"%.*s\", \"value\": \"v\"}]}", len,
                 name);
        ASSERT_EQ(loads(json, err, sizeof err), len == 256 ? 0 : -1);
    }
    ASSERT(strstr(err, "/headers/0") && strstr(err, "longer than 256 bytes"));
    for (int len = 4096; len <= 4097; len++) {
        snprintf(json, sizeof json,
                 "{\"headers\": [{\"match\": \"*\", \"name\": \"X-V\", \"value\": \"%.*s\"}]}", len,
                 value);
        ASSERT_EQ(loads(json, err, sizeof err), len == 4096 ? 0 : -1);
    }
    ASSERT(strstr(err, "/headers/0/value") && strstr(err, "longer than 4096 bytes"));
}

TEST(rules_file_size_and_mime_parameters)
{
    /* a file over PK_RULES_MAX_BYTES is not read */
    static char big[PK_RULES_MAX_BYTES + 2];
    memset(big, ' ', sizeof big - 1);
    big[0] = '{';
    big[sizeof big - 2] = '}';
    rejects(big, "larger than 1048576 bytes", NULL);
    /* a media type's parameters are a header value: no control characters */
    rejects("{\"mime\": [{\"match\": \"*\", \"type\": \"text/plain; a=\\u0001\"}]}", "/mime/0",
            "media type");
}

TEST(rules_header_values_recipients_check)
{
#define ONE(name, value)                                                                           \
    "{\"headers\": [{\"match\": \"*\", \"name\": \"" name "\", \"value\": \"" value "\"}]}"
    rejects(ONE("Expires", "tomorrow, maybe"), "/headers/0/value", "not an HTTP date");
    rejects(ONE("Expires", "0"), "/headers/0/value", "not an HTTP date");
    rejects(ONE("expires", "Sun, 06 Nov 1994 08:49:37 UTC"), "/headers/0/value", "HTTP date");
    rejects(ONE("Expires", "Sunday, 06-Nov-94 08:49:37 GMT"), "/headers/0/value", "HTTP date");
    rejects(ONE("Expires", "Sun, 36 Nov 1994 08:49:37 GMT"), "/headers/0/value", "HTTP date");
    rejects(ONE("Access-Control-Allow-Origin", "https://a.example/"), "/headers/0/value",
            "no trailing slash");
    rejects(ONE("Access-Control-Allow-Origin", "https://a.example, https://b.example"),
            "/headers/0/value", "one origin");
    rejects(ONE("Access-Control-Allow-Origin", "a.example"), "/headers/0/value", "one origin");
    rejects(ONE("Access-Control-Allow-Origin", "https://App.example"), "/headers/0/value",
            "lower case");
    rejects(ONE("Access-Control-Allow-Origin", "HTTPS://app.example"), "/headers/0/value",
            "one origin");
    rejects(ONE("Access-Control-Allow-Origin", "https://app.example:443"), "/headers/0/value",
            "default port");
    rejects(ONE("Access-Control-Allow-Origin", "http://app.example:80"), "/headers/0/value",
            "default port");
    rejects(ONE("Access-Control-Allow-Origin", "https://app.example:8x"), "/headers/0/value",
            "port");
    rejects(ONE("Access-Control-Allow-Origin", "https://"), "/headers/0/value", "no host");
    rejects(ONE("Access-Control-Allow-Origin", "https://a.example x"), "/headers/0/value",
            "one origin");
    rejects(ONE("Access-Control-Allow-Credentials", "false"), "/headers/0/value", "true");
    rejects(ONE("Access-Control-Max-Age", "1h"), "/headers/0/value", "seconds");
    rejects(ONE("Access-Control-Max-Age", "-5"), "/headers/0/value", "seconds");
    rejects(ONE("Access-Control-Max-Age", "-0"), "/headers/0/value", "seconds");
    rejects(ONE("Access-Control-Max-Age", "-"), "/headers/0/value", "seconds");
    rejects(ONE("X-Content-Type-Options", "no-sniff"), "/headers/0/value", "nosniff");
    rejects(ONE("Strict-Transport-Security", "max-age=banana"), "/headers/0/value", "max-age");
    rejects(ONE("Strict-Transport-Security", "includeSubDomains"), "/headers/0/value",
            "has no max-age");
    rejects(ONE("Strict-Transport-Security", "max-age=1; max-age=2"), "/headers/0/value",
            "second max-age");
    rejects(ONE("X-A", "caf\\u00e9\\u0085"), "/headers/0/value", "U+0080");
    rejects(ONE("X-A", "a\\u2028b"), "/headers/0/value", "U+2028");
    rejects(ONE("X-A", "a\\u009fb"), "/headers/0/value", "U+009F");
    rejects(ONE("X-A", "trailing "), "/headers/0/value", "whitespace");
    rejects(ONE("Expires", "Thu, 01 Jan 2037 24:00:00 GMT"), "/headers/0/value", "HTTP date");
    rejects(ONE("Expires", "onT, 01 Jan 2037 00:00:00 GMT"), "/headers/0/value", "HTTP date");
    rejects(ONE("Access-Control-Allow-Credentials", "True"), "/headers/0/value", "true");
    /* RFC 5322 §3.3: the day name is the date's, and the day exists */
    /* the whole explanation, its advice at the end too */
    rejects(ONE("Expires", "Fri, 01 Jan 2037 00:00:00 GMT"), "day's name",
            "for \"already expired\" use cache_control \"no-cache\")");
    rejects(ONE("Expires", "Fri, 31 Apr 2037 00:00:00 GMT"), "/headers/0/value", "exists");
    rejects(ONE("Expires", "Sun, 29 Feb 2037 00:00:00 GMT"), "/headers/0/value", "HTTP date");
    rejects(ONE("Access-Control-Allow-Origin", "https://a:1:2"), "/headers/0/value", "second ':'");
    rejects(ONE("Access-Control-Allow-Origin", "https://a.example:08443"), "/headers/0/value",
            "leading zero");
    rejects(ONE("Access-Control-Allow-Origin", "https://a.example:65536"), "/headers/0/value",
            "65535");
    rejects(ONE("Access-Control-Allow-Origin", "https://a.example:100000"), "/headers/0/value",
            "65535");
    /* and the good forms load */
    static const char *const good[] = {
        ONE("Expires", "Thu, 01 Jan 2037 00:00:00 GMT"),
        ONE("Expires", "Wed, 31 Dec 2036 23:59:60 GMT"), /* a leap second */
        ONE("Access-Control-Allow-Origin", "*"),
        ONE("Access-Control-Allow-Origin", "null"),
        ONE("Access-Control-Allow-Origin", "https://a.example:8443"),
        ONE("Access-Control-Allow-Origin", "http://[::1]:8080"),
        ONE("Access-Control-Allow-Origin", "http://a.example:443"),
        ONE("Access-Control-Allow-Origin", "http://a.example:65535"),
        ONE("Access-Control-Allow-Origin", "http://a.example:0"),
        ONE("Access-Control-Allow-Origin", "http://[::1]"),
        ONE("Expires", "Fri, 29 Feb 2036 00:00:00 GMT"),
        ONE("Access-Control-Max-Age", "-1"),
        ONE("Strict-Transport-Security", "max-age = 31536000"),
        ONE("Strict-Transport-Security", "Max-Age=31536000"), /* names ignore case */
        ONE("Strict-Transport-Security", "includeSubDomains; max-age= 600;"),
        ONE("Access-Control-Allow-Credentials", "true"),
        ONE("Access-Control-Max-Age", "600"),
        ONE("X-Content-Type-Options", "nosniff"),
        ONE("Strict-Transport-Security", "max-age=63072000; includeSubDomains; preload"),
        ONE("Strict-Transport-Security", "max-age=\\\"600\\\""),
        ONE("Content-Disposition", "attachment; filename=\\\"caf\\u00e9.pdf\\\""),
    };
#undef ONE
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        const char *path = write_rules("good.json", good[i]);
        pk_rules *r = NULL;
        char err[1024] = "";
        if (pk_rules_load(path, &r, err, sizeof err) != 0)
            t__fail(__FILE__, __LINE__, "%s: %s", good[i], err);
        pk_rules_free(r);
    }
}

TEST(rules_reject_bad_cache_control)
{
#define CC(v) "{\"cache_control\": [{\"match\": \"*\", \"value\": \"" v "\"}]}"
    rejects(CC("max-age=abc"), "/cache_control/0/value", "number of seconds in max-age=N");
    rejects(CC("public, s-maxage=-1"), "/cache_control/0/value", "s-maxage=N");
    rejects(CC("max-age"), "/cache_control/0/value", "max-age=N");
    rejects(CC("max-age=\\\"60\\\""), "/cache_control/0/value", "max-age=N");
    rejects(CC("no-store=1"), "/cache_control/0/value", "takes none");
    rejects(CC("Immutable=yes, max-age=60"), "/cache_control/0/value", "takes none");
    rejects(CC("max-age=60, MAX-AGE=120"), "/cache_control/0/value", "twice");
    /* found after any number of other directives, quoted values among them */
    char many[2048], json[2400];
    size_t o = 0;
    for (int i = 0; i < 70; i++) {                   /* the check once remembered only 64 */
        const char *v = i % 2 ? "1" : "\\\"a,b\\\""; /* JSON of the quoted string "a,b" */
        o += (size_t)snprintf(many + o, sizeof many - o, "x%d=%s, ", i, v);
    }
    snprintf(many + o, sizeof many - o, "max-age=60, max-age=0");
    snprintf(json, sizeof json, CC("%s"), many);
    rejects(json, "/cache_control/0/value", "names max-age twice");
    snprintf(many + o, sizeof many - o, "x69=2");
    snprintf(json, sizeof json, CC("%s"), many);
    rejects(json, "/cache_control/0/value", "names x69 twice");
    /* a 150-byte directive name quoted in the explanation, and its end still there
     * (the buffer was 160 bytes) */
    char name[151];
    memset(name, 'n', 150);
    name[150] = '\0';
    snprintf(json, sizeof json, CC("max-age=5, %s>=1 junk"), name);
    rejects(json, "'>' after nnnn", "where ',' or the end should be");
    rejects(CC("max-age=60; public"), "/cache_control/0/value", "';' after max-age");
    rejects(CC("public max-age=60"), "/cache_control/0/value", "after public");
    rejects(CC("caf\\u00e9"), "/cache_control/0/value", "byte 0xC3 after caf");
    rejects(CC("=60"), "/cache_control/0/value", "'=' where a directive name should start");
    rejects(CC(", ,"), "/cache_control/0/value", "no directive");
    rejects(CC("private=\\\"Set-Cookie"), "/cache_control/0/value", "unterminated");
    rejects(CC("max-age="), "/cache_control/0/value", "without a value");
#undef CC
    /* comments and $schema are free text, but text */
    rejects("{\"comment\": 5}", ": /comment: ", "must be a string");
    rejects("{\"$schema\": {}}", ": /$schema: ", "must be a string");
    rejects("{\"cache_control\": [{\"match\": \"*\", \"value\": \"no-cache\", \"comment\": 5}]}",
            "/cache_control/0/comment: ", "must be a string");
}

TEST(rules_binary_file_is_named)
{
    const char *path = write_rules("bin.json", "");
    FILE *f = fopen(path, "wb");
    ASSERT(f != NULL);
    static const char bytes[] = {'{', ' ', 0, 0, 0, '}'};
    fwrite(bytes, 1, sizeof bytes, f);
    fclose(f);
    pk_rules *r = NULL;
    char err[1024] = "";
    ASSERT(pk_rules_load(path, &r, err, sizeof err) != 0);
    if (!strstr(err, "not a JSON text file (a NUL byte at offset 2)"))
        t__fail(__FILE__, __LINE__, "message: %s", err);
}

TEST(rules_validators)
{
    char why[160];
    static const char *const good_cc[] = {
        "no-cache",
        "public, max-age=31536000, immutable",
        "max-age=0, must-revalidate",
        "private=\"Set-Cookie, X-A\", max-age=60",
        "no-cache=\"Set-Cookie\"",
        "public,max-age=60 , stale-while-revalidate=30,stale-if-error=86400",
        "s-maxage=600, x-ext=\"a \\\" b\", x-token=abc",
    };
    for (size_t i = 0; i < sizeof good_cc / sizeof good_cc[0]; i++)
        if (pk_cache_control_problem(good_cc[i], why, sizeof why))
            t__fail(__FILE__, __LINE__, "%s: %s", good_cc[i], why);
    ASSERT_EQ(pk_header_name_ok("X-Frame-Options"), 1);
    ASSERT_EQ(pk_header_name_ok("x_y!#$%&'*+-.^`|~1"), 1);
    ASSERT_EQ(pk_header_name_ok("a b"), 0);
    ASSERT_EQ(pk_header_name_ok("a(b)"), 0);
    ASSERT_EQ(pk_header_name_ok("caf\xc3\xa9"), 0);
    ASSERT_EQ(pk_header_name_reserved("etag"), 1);
    ASSERT_EQ(pk_header_name_reserved("Date"), 1);
    ASSERT_EQ(pk_header_name_reserved("Link"), 0);
    ASSERT_EQ(pk_header_name_reserved("repr-digest"), 2);
    ASSERT_EQ(pk_header_name_reserved("Content-MD5"), 2);
    ASSERT_EQ(pk_header_value_ok("a\tb"), 1);
    ASSERT_EQ(pk_header_value_ok("a\x7f"), 0);
    ASSERT_EQ(pk_mime_type_ok("text/html"), 1);
    ASSERT_EQ(pk_mime_type_ok("text/html; charset=utf-8"), 1);
    ASSERT_EQ(pk_mime_type_ok("text/"), 0);
    ASSERT_EQ(pk_mime_type_ok("/html"), 0);
    ASSERT_EQ(pk_mime_type_ok("text/html extra"), 0);
    /* RFC 9110 §8.3.1: parameters are name=value, the value a token or a
     * quoted-string; OWS around ';'; an empty parameter is allowed */
    ASSERT_EQ(pk_mime_type_ok("text/html;charset=utf-8"), 1);
    ASSERT_EQ(pk_mime_type_ok("text/html ; charset=utf-8;  a=b"), 1);
    ASSERT_EQ(pk_mime_type_ok("text/html; charset=\"utf-8\""), 1);
    ASSERT_EQ(pk_mime_type_ok("multipart/x; boundary=\"a;b \\\" c\""), 1);
    ASSERT_EQ(pk_mime_type_ok("text/plain;"), 1);
    ASSERT_EQ(pk_mime_type_ok("text/plain;;a=b"), 1);
    ASSERT_EQ(pk_mime_type_ok("text/plain; "), 0);    /* trailing whitespace */
    ASSERT_EQ(pk_mime_type_ok("text/plain; foo"), 0); /* no '=' */
    ASSERT_EQ(pk_mime_type_ok("text/plain; a="), 0);
    ASSERT_EQ(pk_mime_type_ok("text/plain; a=b c"), 0);
    ASSERT_EQ(pk_mime_type_ok("text/plain; =b"), 0);
    ASSERT_EQ(pk_mime_type_ok("text/plain; a=\"b"), 0);
    ASSERT_EQ(pk_mime_type_ok("text/plain; a=\"b\"c"), 0);
    ASSERT_EQ(pk_mime_type_ok("text/plain, text/html"), 0);
    ASSERT_EQ(pk_mime_type_ok("text/*"), 0); /* media ranges */
    ASSERT_EQ(pk_mime_type_ok("*/*"), 0);
    ASSERT_EQ(pk_mime_type_ok("*/html"), 0);
    ASSERT_EQ(pk_mime_type_ok("text/*x"), 1); /* a token that holds '*' */
    ASSERT_EQ(pk_mime_type_ok("text/a/b"), 0);
}
