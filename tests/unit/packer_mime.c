/* MIME: the extension table, text/charset decisions, classes, libmagic fallback. */
#include "charset.h"
#include "mime.h"
#include "runner.h"
#include "sf/mime.h"
#include "sf/store.h"

#include <stdlib.h>

static const char *ext(const char *name)
{
    return sf_mime_by_ext(name, strlen(name));
}

TEST(mime_table_web_types)
{
    ASSERT_STR_EQ(ext("/a.js"), "text/javascript");
    ASSERT_STR_EQ(ext("/a.mjs"), "text/javascript");
    ASSERT_STR_EQ(ext("/a.css"), "text/css");
    ASSERT_STR_EQ(ext("/a.html"), "text/html");
    ASSERT_STR_EQ(ext("/a.htm"), "text/html");
    ASSERT_STR_EQ(ext("/a.svg"), "image/svg+xml");
    ASSERT_STR_EQ(ext("/a.json"), "application/json");
    ASSERT_STR_EQ(ext("/a.map"), "application/json");
    ASSERT_STR_EQ(ext("/site.webmanifest"), "application/manifest+json");
    ASSERT_STR_EQ(ext("/a.wasm"), "application/wasm");
    ASSERT_STR_EQ(ext("/a.woff2"), "font/woff2");
    ASSERT_STR_EQ(ext("/a.woff"), "font/woff");
    ASSERT_STR_EQ(ext("/a.ttf"), "font/ttf");
    ASSERT_STR_EQ(ext("/a.otf"), "font/otf");
    ASSERT_STR_EQ(ext("/a.eot"), "application/vnd.ms-fontobject");
    ASSERT_STR_EQ(ext("/a.avif"), "image/avif");
    ASSERT_STR_EQ(ext("/a.webp"), "image/webp");
    ASSERT_STR_EQ(ext("/a.png"), "image/png");
    ASSERT_STR_EQ(ext("/a.jpg"), "image/jpeg");
    ASSERT_STR_EQ(ext("/a.jpeg"), "image/jpeg");
    ASSERT_STR_EQ(ext("/a.gif"), "image/gif");
    ASSERT_STR_EQ(ext("/a.ico"), "image/x-icon");
    ASSERT_STR_EQ(ext("/a.txt"), "text/plain");
    ASSERT_STR_EQ(ext("/a.xml"), "application/xml");
    ASSERT_STR_EQ(ext("/a.pdf"), "application/pdf");
    ASSERT_STR_EQ(ext("/a.mp4"), "video/mp4");
    ASSERT_STR_EQ(ext("/a.webm"), "video/webm");
    ASSERT_STR_EQ(ext("/a.mp3"), "audio/mpeg");
    ASSERT_STR_EQ(ext("/a.ogg"), "audio/ogg");
    ASSERT_STR_EQ(ext("/a.zip"), "application/zip");
    ASSERT_STR_EQ(ext("/a.gz"), "application/gzip");
    ASSERT_STR_EQ(ext("/a.zst"), "application/zstd");
    ASSERT_STR_EQ(ext("/a.csv"), "text/csv");
    ASSERT_STR_EQ(ext("/a.md"), "text/markdown");
    ASSERT_STR_EQ(ext("/a.markdown"), "text/markdown");
    ASSERT_STR_EQ(ext("/a.eml"), "message/rfc822");
    ASSERT_STR_EQ(ext("/a.pbm"), "image/x-portable-bitmap");
    ASSERT_STR_EQ(ext("/a.ppm"), "image/x-portable-pixmap");
    /* zip-based formats a platform opens only under their own type (libmagic
     * says application/zip unless the entries come in the order it expects) */
    ASSERT_STR_EQ(ext("/card.pkpass"), "application/vnd.apple.pkpass");
    ASSERT_STR_EQ(ext("/chair.usdz"), "model/vnd.usdz+zip");
    ASSERT_STR_EQ(ext("/app.apk"), "application/vnd.android.package-archive");
    ASSERT_STR_EQ(ext("/lib.jar"), "application/java-archive");
    ASSERT_STR_EQ(ext("/map.kmz"), "application/vnd.google-earth.kmz");
    ASSERT_STR_EQ(ext("/map.kml"), "application/vnd.google-earth.kml+xml");
    ASSERT_STR_EQ(ext("/ca.crt"), "application/x-x509-ca-cert");
    ASSERT_EQ(pk_mime_class("application/vnd.apple.pkpass"), PK_CLASS_NONE);
    ASSERT_EQ(pk_mime_class("application/vnd.google-earth.kml+xml"), PK_CLASS_TEXT);
    ASSERT_STR_EQ(ext("/feed.rss"), "application/rss+xml");
    ASSERT_STR_EQ(ext("/feed.atom"), "application/atom+xml");
    /* IANA's types, as Debian's mime.types (Apache's) and Caddy give them;
     * libmagic calls these text/plain and text/xml */
    ASSERT_STR_EQ(ext("/data/counts.tsv"), "text/tab-separated-values");
    ASSERT_STR_EQ(ext("/feed.xsl"), "application/xslt+xml");
    ASSERT_STR_EQ(ext("/feed.xslt"), "application/xslt+xml");
    /* Streaming, 3D and newer web types. */
    ASSERT_STR_EQ(ext("/live/index.m3u8"), "application/vnd.apple.mpegurl");
    ASSERT_STR_EQ(ext("/live/seg001.ts"), "video/mp2t");
    ASSERT_STR_EQ(ext("/dash/manifest.mpd"), "application/dash+xml");
    ASSERT_STR_EQ(ext("/dash/seg-1.m4s"), "video/iso.segment");
    ASSERT_STR_EQ(ext("/models/chair.glb"), "model/gltf-binary");
    ASSERT_STR_EQ(ext("/models/chair.gltf"), "model/gltf+json");
    ASSERT_STR_EQ(ext("/src/App.jsx"), "text/javascript");
    ASSERT_STR_EQ(ext("/map.geojson"), "application/geo+json");
    ASSERT_STR_EQ(ext("/tex.ktx2"), "image/ktx2");
    ASSERT_STR_EQ(ext("/logo.svgz"), "image/svg+xml"); /* stored decompressed */
    ASSERT_STR_EQ(ext("/LOGO.SVGZ"), "image/svg+xml");
    ASSERT_EQ(pk_svgz_key("/logo.svgz", 10), 1);
    ASSERT_EQ(pk_svgz_key("/logo.SVGZ", 10), 1);
    ASSERT_EQ(pk_svgz_key("/logo.svg", 9), 0);
    ASSERT_EQ(pk_svgz_key("/a/.svgz", 8), 0);
}

TEST(mime_encoded_suffix)
{
    int enc = -1;
    ASSERT_EQ(pk_encoded_suffix("/b/g.wasm.br", 12, &enc), 3);
    ASSERT_EQ(enc, SF_ENC_BR);
    ASSERT_EQ(pk_encoded_suffix("/b/g.JS.GZ", 10, &enc), 3);
    ASSERT_EQ(enc, SF_ENC_GZIP);
    ASSERT_EQ(pk_encoded_suffix("/b/c.json.zst", 13, &enc), 4);
    ASSERT_EQ(enc, SF_ENC_ZSTD);
    ASSERT_EQ(pk_encoded_suffix("/b/.br", 6, &enc), 0); /* no name before it */
    ASSERT_EQ(pk_encoded_suffix("/br", 3, &enc), 0);
    ASSERT_EQ(pk_encoded_suffix("/b/g.wasm", 9, &enc), 0);
    ASSERT_EQ(pk_encoded_suffix("/b/g.tgz", 8, &enc), 0);
}

TEST(mime_table_edge_names)
{
    ASSERT_STR_EQ(ext("/A.JS"), "text/javascript");      /* case-insensitive */
    ASSERT_STR_EQ(ext("/x.tar.gz"), "application/gzip"); /* last extension */
    ASSERT_STR_EQ(ext("/dir.css/file.js"), "text/javascript");
    ASSERT(ext("/dir.css/file") == NULL); /* a dot in a directory only */
    ASSERT(ext("/README") == NULL);
    ASSERT(ext("/a.") == NULL);
    ASSERT(ext("/.html") == NULL); /* a dotfile, not an extension */
    ASSERT(ext("/a.unknownext") == NULL);
    ASSERT(ext("/a.averyveryverylongextension") == NULL);
    ASSERT_STR_EQ(ext("index.html"), "text/html"); /* a bare name */
    /* an extension at all, known or not (servd-pack's libmagic fallback) */
    static const char *const with[] = {"/a.unknownext", "/a.averyveryverylongextension",
                                       "/x.tar.gz", "/d/AUTHORS.md"};
    static const char *const without[] = {"/README", "/dir.css/file", "/a.", "/.env", ""};
    for (size_t i = 0; i < sizeof with / sizeof with[0]; i++)
        ASSERT_EQ(sf_ext_present(with[i], strlen(with[i])), 1);
    for (size_t i = 0; i < sizeof without / sizeof without[0]; i++)
        ASSERT_EQ(sf_ext_present(without[i], strlen(without[i])), 0);
}

TEST(mime_table_is_sorted_and_complete)
{
    /* bsearch needs a sorted table: every entry must be found by its own
     * extension. Spot-check the first, middle and last ones by name. */
    ASSERT_STR_EQ(ext("/a.7z"), "application/x-7z-compressed");
    ASSERT_STR_EQ(ext("/a.mov"), "video/quicktime");
    ASSERT_STR_EQ(ext("/a.zst"), "application/zstd");
    ASSERT_STR_EQ(ext("/a.yml"), "application/yaml");
    ASSERT_STR_EQ(ext("/a.cjs"), "text/javascript");
}

TEST(mime_text_types)
{
    ASSERT_EQ(pk_mime_is_text("text/html"), 1);
    ASSERT_EQ(pk_mime_is_text("text/css; charset=utf-8"), 1);
    ASSERT_EQ(pk_mime_is_text("text/javascript"), 1);
    ASSERT_EQ(pk_mime_is_text("application/json"), 1);
    ASSERT_EQ(pk_mime_is_text("application/manifest+json"), 1);
    ASSERT_EQ(pk_mime_is_text("image/svg+xml"), 1);
    ASSERT_EQ(pk_mime_is_text("application/xml"), 1);
    ASSERT_EQ(pk_mime_is_text("application/rss+xml"), 1);
    ASSERT_EQ(pk_mime_is_text("Application/JSON"), 1);
    ASSERT_EQ(pk_mime_is_text("image/png"), 0);
    ASSERT_EQ(pk_mime_is_text("application/wasm"), 0);
    ASSERT_EQ(pk_mime_is_text("application/octet-stream"), 0);
    ASSERT_EQ(pk_mime_is_text("font/woff2"), 0);
}

TEST(mime_compression_classes)
{
    ASSERT_EQ(pk_mime_class("text/html; charset=utf-8"), PK_CLASS_TEXT);
    ASSERT_EQ(pk_mime_class("text/javascript"), PK_CLASS_TEXT);
    ASSERT_EQ(pk_mime_class("image/svg+xml"), PK_CLASS_TEXT);
    ASSERT_EQ(pk_mime_class("font/ttf"), PK_CLASS_FONT);
    ASSERT_EQ(pk_mime_class("font/otf"), PK_CLASS_FONT);
    ASSERT_EQ(pk_mime_class("application/vnd.ms-fontobject"), PK_CLASS_FONT);
    ASSERT_EQ(pk_mime_class("application/wasm"), PK_CLASS_BINARY);
    ASSERT_EQ(pk_mime_class("image/x-icon"), PK_CLASS_BINARY);
    ASSERT_EQ(pk_mime_class("image/bmp"), PK_CLASS_BINARY);
    ASSERT_EQ(pk_mime_class("model/gltf-binary"), PK_CLASS_BINARY);
    ASSERT_EQ(pk_mime_class("model/gltf+json; charset=utf-8"), PK_CLASS_TEXT);
    ASSERT_EQ(pk_mime_class("application/vnd.apple.mpegurl"), PK_CLASS_TEXT);
    ASSERT_EQ(pk_mime_class("application/dash+xml"), PK_CLASS_TEXT);
    /* text that libmagic names under application/ */
    ASSERT_EQ(pk_mime_class("application/x-subrip"), PK_CLASS_TEXT);
    ASSERT_EQ(pk_mime_class("application/pgp-keys"), PK_CLASS_TEXT);
    ASSERT_EQ(pk_mime_class("application/postscript"), PK_CLASS_TEXT);
    ASSERT_EQ(pk_mime_is_text("application/x-subrip"), 0); /* no charset parameter */
    ASSERT_EQ(pk_mime_class("application/rtf"), PK_CLASS_TEXT);
    /* Already compressed: never recompressed. */
    static const char *const none[] = {"image/png",
                                       "image/jpeg",
                                       "image/gif",
                                       "image/webp",
                                       "image/avif",
                                       "font/woff",
                                       "font/woff2",
                                       "application/zip",
                                       "application/gzip",
                                       "application/zstd",
                                       "video/mp4",
                                       "audio/mpeg",
                                       "application/octet-stream",
                                       "application/pdf",
                                       "video/mp2t",
                                       "video/iso.segment",
                                       "image/ktx2"};
    for (size_t i = 0; i < sizeof none / sizeof none[0]; i++)
        if (pk_mime_class(none[i]) != PK_CLASS_NONE)
            t__fail(__FILE__, __LINE__, "%s: class %d, want none", none[i], pk_mime_class(none[i]));
}

TEST(mime_utf8_validation)
{
    ASSERT_EQ(pk_utf8_valid("plain", 5), 1);
    ASSERT_EQ(pk_utf8_valid("caf\xc3\xa9", 5), 1);
    ASSERT_EQ(pk_utf8_valid("\xf0\x9f\x98\x80", 4), 1);
    ASSERT_EQ(pk_utf8_valid("caf\xe9", 4), 0);          /* Latin-1 */
    ASSERT_EQ(pk_utf8_valid("\xc0\xaf", 2), 0);         /* overlong */
    ASSERT_EQ(pk_utf8_valid("\xed\xa0\x80", 3), 0);     /* surrogate */
    ASSERT_EQ(pk_utf8_valid("\xf4\x90\x80\x80", 4), 0); /* > U+10FFFF */
    ASSERT_EQ(pk_utf8_valid("\xc3", 1), 0);             /* truncated */
}

static char *decide(const char *key, const char *rule, const void *data, size_t n)
{
    pk_magic *m = NULL;
    char err[256];
    char *t = pk_mime_decide(key, strlen(key), rule, data, n, &m, err, sizeof err);
    if (!t)
        t__fail(__FILE__, __LINE__, "%s: %s", key, err);
    pk_magic_close(m);
    return t;
}

TEST(mime_decide_charset_and_sources)
{
    char *t = decide("/a.html", NULL, "<p>x</p>", 8);
    ASSERT_STR_EQ(t, "text/html; charset=utf-8");
    free(t);
    t = decide("/a.png", NULL, "", 0);
    ASSERT_STR_EQ(t, "image/png");
    free(t);
    /* A rule is taken verbatim, whatever the extension says. */
    t = decide("/a.html", "text/plain", "x", 1);
    ASSERT_STR_EQ(t, "text/plain");
    free(t);
}

TEST(mime_decide_ts_of_text)
{
    /* .ts is an MPEG transport stream: binary packets that start 0x47 */
    unsigned char seg[376] = {0};
    seg[0] = seg[188] = 0x47;
    seg[1] = 0x40;
    char *t = decide("/live/seg001.ts", NULL, seg, sizeof seg);
    ASSERT_STR_EQ(t, "video/mp2t");
    free(t);
    /* ... but TypeScript under .ts, .mts or .cts, or a .d.ts, is text to show
     * and compress (libmagic 5.44 calls it application/javascript) */
    const char *src = "import { a } from \"./b\";\nexport function f(x: number): number;\n";
    const char *names[] = {"/types/index.d.ts", "/src/app.mts", "/src/app.CTS"};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        t = decide(names[k], NULL, src, strlen(src));
        ASSERT_STR_EQ(t, "text/plain; charset=utf-8");
        free(t);
    }
}

TEST(mime_decide_charset_by_type)
{
    /* An HLS playlist is compressed as text but sent without a charset. */
    char *t = decide("/a.m3u8", NULL, "#EXTM3U\n", 8);
    ASSERT_STR_EQ(t, "application/vnd.apple.mpegurl");
    free(t);
    /* JSON, YAML and TOML types define no charset parameter (RFC 8259 §11,
     * RFC 9512, IANA's application/toml). */
    static const struct {
        const char *key, *want;
    } json[] = {
        {"/a.gltf", "model/gltf+json"},       {"/a.json", "application/json"},
        {"/a.js.map", "application/json"},    {"/site.webmanifest", "application/manifest+json"},
        {"/a.jsonld", "application/ld+json"}, {"/a.geojson", "application/geo+json"},
        {"/a.yaml", "application/yaml"},      {"/a.yml", "application/yaml"},
        {"/a.toml", "application/toml"},
    };
    for (size_t i = 0; i < sizeof json / sizeof json[0]; i++) {
        t = decide(json[i].key, NULL, "{}", 2);
        if (strcmp(t, json[i].want) != 0)
            t__fail(__FILE__, __LINE__, "%s: %s, want %s", json[i].key, t, json[i].want);
        free(t);
    }
    /* RTF defines no charset parameter: it names its code page itself. */
    t = decide("/a.rtf", NULL, "{\\rtf1\\ansi\\ansicpg1252 x}", 26);
    ASSERT_STR_EQ(t, "application/rtf");
    free(t);
    /* ... but libmagic's JSON still compresses as text. */
    ASSERT_EQ(pk_mime_class("application/json"), PK_CLASS_TEXT);
    t = decide("/a.jsx", NULL, "x", 1);
    ASSERT_STR_EQ(t, "text/javascript; charset=utf-8");
    free(t);
    /* A page in another encoding keeps its own declaration: a charset in
     * the header would override <meta charset> and @charset. ASCII bytes
     * are UTF-8, but a page that names another encoding keeps it too: it
     * decides how the page's scripts are decoded and how forms submit. */
    static const struct {
        const char *key, *body, *want;
    } declared[] = {
        {"/latin.html", "<meta charset=\"iso-8859-1\"><p>caf\xe9</p>", "text/html"},
        {"/latin.css", "@charset \"iso-8859-1\"; p::before { content: \"\xe9\" }", "text/css"},
        {"/a.html", "<!doctype html><meta charset=\"shift_jis\"><p>x</p>", "text/html"},
        {"/b.html",
         "<html><head><META HTTP-EQUIV=\"Content-Type\" "
         "CONTENT=\"text/html; charset=windows-1252\"></head></html>",
         "text/html"},
        {"/c.html", "<meta name=viewport content=x><meta charset=iso-8859-1>", "text/html"},
        {"/d.css", "@charset \"iso-8859-1\"; p { color: red }", "text/css"},
        {"/e.svg", "<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?><svg/>", "image/svg+xml"},
        {"/f.xml", "<?xml version='1.0' encoding='windows-1252'?><a/>", "application/xml"},
        {"/g.html", "<meta charset=\"UTF-8\"><p>x</p>", "text/html; charset=utf-8"},
        {"/h.html", "<meta http-equiv=content-type content=\"text/html; charset=utf8\">",
         "text/html; charset=utf-8"},
        {"/i.css", "@charset \"utf-8\"; p { color: red }", "text/css; charset=utf-8"},
        {"/j.svg", "<?xml version=\"1.0\" encoding=\"UTF-8\"?><svg/>",
         "image/svg+xml; charset=utf-8"},
        {"/k.html", "<p>no declaration</p>", "text/html; charset=utf-8"},
        /* read as browsers prescan: attributes, not words anywhere in a tag */
        {"/l.html", "<meta name=\"description\" content=\"tables in charset=koi8-r\"><p>x</p>",
         "text/html; charset=utf-8"},
        {"/m.html", "<meta content=\"text/html; charset=koi8-r\"><p>x</p>",
         "text/html; charset=utf-8"},
        {"/n.html", "<meta property=\"og:charset=x\" content=y><p>x</p>",
         "text/html; charset=utf-8"},
        {"/o.html", "<!-- <meta charset=iso-8859-1> --><p>x</p>", "text/html; charset=utf-8"},
        {"/p.html", "<a title=\"<meta charset=iso-8859-1>\">x</a>", "text/html; charset=utf-8"},
        {"/q.html", "<meta http-equiv=\"Content-Type\" content='text/html;charset=\"iso-8859-2\"'>",
         "text/html"},
        {"/r.html", "<meta charset = 'windows-1251' ><p>x</p>", "text/html"},
        {"/s.html", "<meta/charset=iso-8859-1><p>x</p>", "text/html"},
        {"/t.html", "<meta http-equiv=refresh content=\"5; charset=koi8-r\"><p>x</p>",
         "text/html; charset=utf-8"},
        /* no encoding's label: ignored, as browsers do; the scan goes on */
        {"/u.html", "<meta charset=utf-8/><p>caf\xc3\xa9</p>", "text/html; charset=utf-8"},
        {"/v.html", "<meta charset=bogus><meta charset=koi8-r>", "text/html"},
        {"/w.html", "<meta http-equiv=content-type content=\"text/html; charset=bogus\">",
         "text/html; charset=utf-8"},
        {"/x.html", "<meta charset=\" Unicode20UTF8 \">", "text/html; charset=utf-8"},
        {"/y.html", "<meta charset=utf-16le>", "text/html; charset=utf-8"}, /* read as UTF-8 */
        {"/z.html", "<meta charset=x-user-defined>", "text/html"},
        /* a '<' alone is one byte; another tag's name ends only at a space or '>' */
        {"/aa.html", "<<meta charset=koi8-r>", "text/html"},
        {"/ab.html", "<br/x='><meta charset=koi8-r>'>", "text/html"},
        /* a tag cut off by the end of the file names nothing */
        {"/ac.html", "<meta charset=koi8-r ", "text/html; charset=utf-8"},
        /* attribute order: a charset attribute after a content one wins */
        {"/ad.html", "<meta http-equiv=content-type content=\"x; charset=koi8-r\" charset=utf-8>",
         "text/html; charset=utf-8"},
        {"/ae.html", "<meta charset=koi8-r http-equiv=content-type content=\"x; charset=utf-8\">",
         "text/html"},
        /* the content attribute's charset= as the HTML standard extracts
         * it: spaces around '=', a quoted name, a "charset" without '=' that
         * a later one follows; an unmatched quote or no name: nothing */
        {"/af.html", "<meta http-equiv=content-type content=\"text/html; charset = koi8-r\">",
         "text/html"},
        {"/ag.html", "<meta http-equiv=content-type content=\"text/html; charset='koi8-r'\">",
         "text/html"},
        {"/ah.html", "<meta http-equiv=content-type content=\"charset; charset=koi8-r\">",
         "text/html"},
        {"/ai.html", "<meta http-equiv=content-type content='text/html; charset=\"koi8-r'>",
         "text/html; charset=utf-8"},
        {"/aj.html", "<meta http-equiv=content-type content=\"text/html; charset=\">",
         "text/html; charset=utf-8"},
        {"/utf8.html", "<p>caf\xc3\xa9</p>", "text/html; charset=utf-8"},
    };
    for (size_t i = 0; i < sizeof declared / sizeof declared[0]; i++) {
        t = decide(declared[i].key, NULL, declared[i].body, strlen(declared[i].body));
        if (strcmp(t, declared[i].want) != 0)
            t__fail(__FILE__, __LINE__, "%s: %s, want %s", declared[i].key, t, declared[i].want);
        free(t);
    }
}

/* Labels from across the Encoding Standard's table (charset.c looks them
 * up by bsearch: one out of order would be missed), in any case and with
 * whitespace around, as browsers read them. */
TEST(charset_labels_across_the_table)
{
    static const struct {
        const char *label;
        int want;
    } cases[] = {
        {"866", PK_DECLARED_OTHER},
        {"cp1253", PK_DECLARED_OTHER},
        {"csibm866", PK_DECLARED_OTHER},
        {"csisolatin5", PK_DECLARED_OTHER},
        {"cyrillic", PK_DECLARED_OTHER},
        {"greek", PK_DECLARED_OTHER},
        {"iso-8859-10", PK_DECLARED_OTHER},
        {"iso-8859-6-i", PK_DECLARED_OTHER},
        {"iso-ir-138", PK_DECLARED_OTHER},
        {"iso8859-2", PK_DECLARED_OTHER},
        {"iso885914", PK_DECLARED_OTHER},
        {"iso_8859-1:1987", PK_DECLARED_OTHER},
        {"ks_c_5601-1987", PK_DECLARED_OTHER},
        {"latin2", PK_DECLARED_OTHER},
        {"SJIS", PK_DECLARED_OTHER},
        {"utf-16be", PK_DECLARED_UTF8},
        {" UTF-8\t", PK_DECLARED_UTF8},
        {"unicode-1-1-utf-8", PK_DECLARED_UTF8},
        {"windows-1257", PK_DECLARED_OTHER},
        {"x-cp1257", PK_DECLARED_OTHER},
        {"x-x-big5", PK_DECLARED_OTHER},
        {"utf8x", PK_DECLARED_NONE},
        {"latin-1", PK_DECLARED_NONE},
        {"", PK_DECLARED_NONE},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char page[96];
        snprintf(page, sizeof page, "<meta charset=\"%s\"><p>x</p>", cases[i].label);
        int got = pk_declared_encoding("text/html", page, strlen(page));
        if (got != cases[i].want)
            t__fail(__FILE__, __LINE__, "label \"%s\": %d, want %d", cases[i].label, got,
                    cases[i].want);
    }
    ASSERT_EQ(pk_declared_encoding("text/css", "@charset \"koi8-r\";", 18), PK_DECLARED_OTHER);
    ASSERT_EQ(pk_declared_encoding("image/svg+xml", "<?xml version='1.0' encoding='Big5'?>", 37),
              PK_DECLARED_OTHER);
    ASSERT_EQ(pk_declared_encoding("text/plain", "<meta charset=koi8-r>", 21), PK_DECLARED_NONE);
}

TEST(mime_decide_libmagic_fallback)
{
    static const unsigned char png[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0,   0, 0, 13,
                                        'I',  'H', 'D', 'R', 0,    0,    0,    1,    0,   0, 0, 1,
                                        8,    6,   0,   0,   0,    0x1f, 0x15, 0xc4, 0x89};
    char *t = decide("/logo", NULL, png, sizeof png);
    ASSERT_STR_EQ(t, "image/png");
    free(t);
    const char *txt = "just some plain text without an extension\n";
    t = decide("/LICENSE", NULL, txt, strlen(txt));
    ASSERT_STR_EQ(t, "text/plain; charset=utf-8");
    free(t);
    const char *latin1 = "caf\xe9 cr\xe8me br\xfbl\xe9"
                         "e, a plain text in Latin-1\n";
    t = decide("/MENU", NULL, latin1, strlen(latin1));
    ASSERT_EQ(strstr(t, "charset=utf-8") == NULL, 1); /* not claimed when it is not */
    free(t);
    t = decide("/empty", NULL, "", 0);
    ASSERT_STR_EQ(t, "application/octet-stream");
    free(t);
    /* libmagic 5.44 calls this README application/vnd.hp-HPGL, which a
     * browser downloads: plain UTF-8 text of a type servd-pack does not
     * know is text/plain; a plotter file with a control byte is left alone */
    const char *readme = "PAM for Debian\n--------------\n\nSome notes on the package.\n";
    t = decide("/README.Debian", NULL, readme, strlen(readme));
    ASSERT_STR_EQ(t, "text/plain; charset=utf-8");
    free(t);
    const char *plot = "IN;SP1;PA10,10;\x03\n";
    t = decide("/plot", NULL, plot, strlen(plot));
    ASSERT_EQ(strncmp(t, "text/", 5) != 0, 1);
    free(t);
    /* a text format libmagic knows outside application/ keeps its type */
    const char *pbm = "P1\n# a bitmap\n4 2\n0 1 1 0\n1 0 0 1\n";
    t = decide("/glyph", NULL, pbm, strlen(pbm));
    ASSERT_STR_EQ(t, "image/x-portable-bitmap");
    free(t);
    const char *vcard = "BEGIN:VCARD\r\nVERSION:3.0\r\nFN:Jane Doe\r\nEND:VCARD\r\n";
    t = decide("/jane", NULL, vcard, strlen(vcard));
    ASSERT_STR_EQ(t, "text/vcard; charset=utf-8");
    free(t);
    /* but text libmagic only guesses a format of, which a browser would
     * download (libmagic 5.44: text/csv, message/rfc822,
     * image/x-portable-bitmap), is text/plain */
    const char *guessed[] = {
        "Jane Doe <jane@example.com>, Acme\nJohn Roe <john@example.com>, Foo\nMax, Bar\n",
        "From: the design team\nTo: everyone\nThe plan for the next release.\n",
        "P1 is the first milestone\nP2 follows it\n",
    };
    for (size_t k = 0; k < sizeof guessed / sizeof guessed[0]; k++) {
        t = decide("/AUTHORS", NULL, guessed[k], strlen(guessed[k]));
        ASSERT_STR_EQ(t, "text/plain; charset=utf-8");
        free(t);
    }
    /* with an extension the table lacks, the file is what libmagic says:
     * the name claims a format */
    t = decide("/export.dat", NULL, guessed[0], strlen(guessed[0]));
    ASSERT_STR_EQ(t, "text/csv; charset=utf-8");
    free(t);
    t = decide("/mail/sample.msg", NULL, guessed[1], strlen(guessed[1]));
    ASSERT_EQ(strncmp(t, "message/", 8), 0);
    free(t);
    /* a PAM (P7) image keeps libmagic's type, its header being no P1-P6 one */
    const char *pam = "P7\nWIDTH 2\nHEIGHT 1\nDEPTH 1\nMAXVAL 255\nTUPLTYPE GRAYSCALE\nENDHDR\nAB";
    t = decide("/tile", NULL, pam, strlen(pam));
    ASSERT_STR_EQ(t, "image/x-portable-arbitrarymap");
    free(t);
    /* an OpenType font is font/otf (RFC 8081), libmagic's name aside */
    static const unsigned char otf[64] = "OTTO\0\x09\0\x80\0\x03\0\x10"
                                         "CFF ";
    t = decide("/font", NULL, otf, sizeof otf);
    ASSERT_STR_EQ(t, "font/otf");
    free(t);
    /* libmagic 5.44 calls this page text/csv (one comma on each line), and a
     * browser would download it: a page's first tag decides first */
    const char *page = "<!doctype html><title>Prices, 2026</title>\n<p>One, two</p>\n"
                       "<p>Three, four</p>\n<p>Five, six</p>\n<p>Seven, eight</p>\n";
    t = decide("/prices", NULL, page, strlen(page));
    ASSERT_STR_EQ(t, "text/html; charset=utf-8");
    free(t);
    const char *upper = "\xef\xbb\xbf\r\n  <HTML lang=en><p>a, b\n<p>c, d\n<p>e, f\n";
    t = decide("/UPPER", NULL, upper, strlen(upper));
    ASSERT_STR_EQ(t, "text/html; charset=utf-8");
    free(t);
    /* a fragment opens with any of WHATWG's HTML patterns (<div, <p, <!--...) */
    const char *frags[] = {"<div>a, b\n<div>c, d\n<div>e, f\n<div>g, h\n",
                           "<P>a, b\n<P>c, d\n<P>e, f\n<P>g, h\n",
                           "<!-- menu -->\n<b>a, b</b>\nc, d\ne, f\ng, h\n"};
    for (size_t k = 0; k < sizeof frags / sizeof frags[0]; k++) {
        t = decide("/fragment", NULL, frags[k], strlen(frags[k]));
        ASSERT_STR_EQ(t, "text/html; charset=utf-8");
        free(t);
    }
    /* libmagic 5.44 calls text/html any text with a tag near its start: a
     * browser would render these and run the script. Not opening with a
     * tag, they are text; an XHTML page opens with one and stays a page */
    const char *prose[] = {"Release notes\n=============\n\nTo embed the widget, add:\n\n"
                           "  <script src=\"/widget.js\"></script>\n\nThanks.\n",
                           "Changes\n\n<html> tags are now escaped\n"};
    for (size_t k = 0; k < sizeof prose / sizeof prose[0]; k++) {
        t = decide("/NOTES", NULL, prose[k], strlen(prose[k]));
        ASSERT_STR_EQ(t, "text/plain; charset=utf-8");
        free(t);
    }
    /* UTF-16 (libmagic 5.44: text/html) the same */
    static const char utf16[] = "\xff\xfeN\0o\0t\0e\0:\0 \0<\0s\0c\0r\0i\0p\0t\0>\0\n\0";
    t = decide("/NOTES16", NULL, utf16, sizeof utf16 - 1);
    ASSERT_STR_EQ(t, "text/plain");
    free(t);
    /* a fragment that opens with a tag WHATWG's patterns lack stays a page */
    const char *section = "<section>\n<h2>x</h2>\n<script src=\"/a.js\"></script>\n</section>\n";
    t = decide("/partial", NULL, section, strlen(section));
    ASSERT_STR_EQ(t, "text/html; charset=utf-8");
    free(t);
    /* JavaScript is text/javascript (RFC 9239), whatever libmagic calls it */
    const char *js = "import { a } from \"./b.js\";\nexport function f(x) { return a(x) + 1; }\n";
    t = decide("/bundle", NULL, js, strlen(js));
    ASSERT_STR_EQ(t, "text/javascript; charset=utf-8");
    free(t);
    /* a tag name only when it ends there: <htmlx> and prose are not pages */
    const char *csvs[] = {"<htmlx>,1\nb,2\nc,3\nd,4\n", "<abbr>,1\nb,2\nc,3\nd,4\n",
                          "<pre>,1\nb,2\nc,3\nd,4\n"};
    for (size_t k = 0; k < sizeof csvs / sizeof csvs[0]; k++) {
        t = decide("/table", NULL, csvs[k], strlen(csvs[k]));
        ASSERT_EQ(strncmp(t, "text/html", 9) != 0, 1);
        free(t);
    }
}

TEST(mime_decide_large_json)
{
    /* libmagic's JSON test needs the whole document, and libmagic sees
     * 64 KiB of a file: a larger apple-app-site-association (Apple allows
     * 128 KB and fetches it as application/json) or TopoJSON map (which an
     * import with type: "json" refuses as text) is still JSON */
    size_t n = 0, cap = 200000;
    char *doc = malloc(cap);
    ASSERT(doc != NULL);
    n += (size_t)snprintf(doc + n, cap - n, "\n{\"applinks\": {\"details\": [");
    for (int i = 0; n + 100 < cap - 100; i++)
        n += (size_t)snprintf(doc + n, cap - n, "%s{\"appID\": \"ABCDE12345.com.example.%d\"}",
                              i ? ", " : "", i);
    n += (size_t)snprintf(doc + n, cap - n, "]}}\n");
    ASSERT(n > 150000);
    const char *names[] = {"/.well-known/apple-app-site-association", "/world.topojson"};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        char *t = decide(names[k], NULL, doc, n);
        ASSERT_STR_EQ(t, "application/json");
        free(t);
    }
    /* text that only opens like JSON stays text, and so does JSON cut short */
    char *t = decide("/notes", NULL, doc, n - 3);
    ASSERT_STR_EQ(t, "text/plain; charset=utf-8");
    free(t);
    memcpy(doc, "[section]\n", 10);
    t = decide("/settings", NULL, doc, n);
    ASSERT_STR_EQ(t, "text/plain; charset=utf-8");
    free(t);
    free(doc);
}

TEST(mime_probe_for_files_of_no_known_type)
{
    /* a glTF-like buffer of floats: compressed; random bytes: not */
    static float floats[20000];
    for (size_t i = 0; i < sizeof floats / sizeof floats[0]; i++)
        floats[i] = (float)(i % 97) * 0.25f;
    ASSERT_EQ(pk_probe_compressible(floats, sizeof floats), 1);
    static unsigned char noise[100000];
    uint64_t x = 88172645463325252ULL;
    for (size_t i = 0; i < sizeof noise; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17; /* xorshift64 */
        noise[i] = (unsigned char)x;
    }
    ASSERT_EQ(pk_probe_compressible(noise, sizeof noise), 0);
    /* only the first PK_PROBE_BYTES are sampled */
    memset(noise + PK_PROBE_BYTES, 0, sizeof noise - PK_PROBE_BYTES);
    ASSERT_EQ(pk_probe_compressible(noise, sizeof noise), 0);
    ASSERT_EQ(pk_probe_compressible(noise, 0), 0);
}
