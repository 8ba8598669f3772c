/*
 * mime.c - the text and compression classification and the libmagic
 * fallback (see mime.h; the extension table is the format library's,
 * sf/mime.h).
 */
#include "mime.h"

#include "charset.h"
#include "digest.h"
#include "sf/mime.h"  /* sf_mime_by_ext */
#include "sf/path.h"  /* sf_utf8_char */
#include "sf/store.h" /* sf_hex */

#include <magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>

/* Bytes libmagic looks at: its own default read limit (1 MiB) would make
 * huge files slow for no better answer; 64 KiB covers every magic test
 * that matters for web content but JSON's, which needs the whole document
 * (json_document). */
#define MAGIC_SNIFF_BYTES (64 * 1024)

#define MAGIC_FLAGS (MAGIC_MIME_TYPE | MAGIC_NO_CHECK_COMPRESS | MAGIC_ERROR)

/* libmagic with its JSON test alone: no magic entries, no text tests. */
#define MAGIC_JSON_ONLY                                                                            \
    (MAGIC_MIME_TYPE | MAGIC_ERROR | MAGIC_NO_CHECK_COMPRESS | MAGIC_NO_CHECK_TAR |                \
     MAGIC_NO_CHECK_SOFT | MAGIC_NO_CHECK_APPTYPE | MAGIC_NO_CHECK_ELF | MAGIC_NO_CHECK_TEXT |     \
     MAGIC_NO_CHECK_CDF | MAGIC_NO_CHECK_CSV | MAGIC_NO_CHECK_TOKENS | MAGIC_NO_CHECK_ENCODING)

/* Copies the base type ("type/subtype", lowercased, without parameters). */
static void base_type(const char *type, char *out, size_t cap)
{
    size_t i = 0;
    for (; type[i] && type[i] != ';' && type[i] != ' ' && i + 1 < cap; i++) {
        char c = type[i];
        out[i] = c >= 'A' && c <= 'Z' ? (char)(c + 32) : c;
    }
    out[i] = '\0';
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && memcmp(s + n - m, suffix, m) == 0;
}

/* Text types outside text/ and the +json / +xml suffixes. */
static const char *const text_apps[] = {
    "application/javascript", "application/ecmascript", "application/x-javascript",
    "application/json",       "application/xml",        "application/yaml",
    "application/toml",       "application/x-ndjson",   "application/x-sh",
};

/* A buffer for a base type: real types are far shorter (RFC 6838 caps each
 * half at 127 characters). */
#define TYPE_MAX 256

int pk_mime_is_text(const char *type)
{
    char t[TYPE_MAX];
    base_type(type, t, sizeof t);
    if (strncmp(t, "text/", 5) == 0 || ends_with(t, "+json") || ends_with(t, "+xml"))
        return 1;
    for (size_t i = 0; i < sizeof text_apps / sizeof text_apps[0]; i++)
        if (strcmp(t, text_apps[i]) == 0)
            return 1;
    return 0;
}

/* Text compressed like text, but sent without a charset parameter: HLS
 * playlists are UTF-8 by definition (RFC 8216) and players compare the type. */
static const char *const text_nocharset[] = {
    "application/vnd.apple.mpegurl",
    "application/x-mpegurl",
    "audio/mpegurl",
    /* text formats libmagic names under application/: subtitles, armoured
     * OpenPGP, PostScript. They compress like text; their types carry no
     * charset parameter. */
    "application/x-subrip",
    "application/pgp-keys",
    "application/pgp-signature",
    "application/pgp-encrypted",
    "application/postscript",
    /* RTF names its own code page (\ansicpg); its registration defines no
     * parameter. */
    "application/rtf",
};

static const char *const font_types[] = {
    "font/ttf",
    "font/otf",
    "font/sfnt",
    "font/collection",
    "application/vnd.ms-fontobject",
    "application/x-font-ttf",
    "application/x-font-otf",
    "application/font-sfnt",
};

/* Binary formats that are not compressed internally and shrink well. */
static const char *const binary_types[] = {
    "application/wasm",
    "image/x-icon",
    "image/vnd.microsoft.icon",
    "image/bmp",
    "image/x-ms-bmp",
    "application/x-tar",
    "image/tiff",
    "model/gltf-binary",
    "image/x-portable-bitmap",
    "image/x-portable-graymap",
    "image/x-portable-pixmap",
    "image/x-portable-anymap",
};

int pk_probe_compressible(const void *p, size_t n)
{
    uLong m = n < PK_PROBE_BYTES ? (uLong)n : PK_PROBE_BYTES;
    uLongf cap = compressBound(m);
    Bytef *out = malloc(cap);
    if (!out || m == 0) {
        free(out);
        return 0;
    }
    int ok = compress2(out, &cap, p, m, 1) == Z_OK && cap * 100 <= m * PK_PROBE_KEEP;
    free(out);
    return ok;
}

int pk_mime_class_digest(char out[PK_CLASS_DIGEST_SIZE])
{
    /* Each list hashed as a tag byte and its NUL-terminated entries, so that
     * moving a type from one list to another changes the digest. */
    static const struct {
        char tag;
        const char *const *v;
        size_t n;
    } lists[] = {
        {'t', text_apps, sizeof text_apps / sizeof text_apps[0]},
        {'n', text_nocharset, sizeof text_nocharset / sizeof text_nocharset[0]},
        {'f', font_types, sizeof font_types / sizeof font_types[0]},
        {'b', binary_types, sizeof binary_types / sizeof binary_types[0]},
    };
    uint8_t d[PK_DIGEST_LEN];
    pk_sha *sha = pk_sha_new();
    int ok = sha != NULL;
    for (size_t l = 0; ok && l < sizeof lists / sizeof lists[0]; l++) {
        ok = pk_sha_update(sha, &lists[l].tag, 1) == 0;
        for (size_t i = 0; ok && i < lists[l].n; i++)
            ok = pk_sha_update(sha, lists[l].v[i], strlen(lists[l].v[i]) + 1) == 0;
    }
    if (!ok || pk_sha_final(sha, d) != 0) {
        if (!ok)
            pk_sha_free(sha);
        return -1;
    }
    sf_hex(d, (PK_CLASS_DIGEST_SIZE - 1) / 2, out);
    return 0;
}

int pk_mime_class(const char *type)
{
    char t[TYPE_MAX];
    base_type(type, t, sizeof t);
    if (pk_mime_is_text(t))
        return PK_CLASS_TEXT;
    for (size_t i = 0; i < sizeof text_nocharset / sizeof text_nocharset[0]; i++)
        if (strcmp(t, text_nocharset[i]) == 0)
            return PK_CLASS_TEXT;
    for (size_t i = 0; i < sizeof font_types / sizeof font_types[0]; i++)
        if (strcmp(t, font_types[i]) == 0)
            return PK_CLASS_FONT;
    for (size_t i = 0; i < sizeof binary_types / sizeof binary_types[0]; i++)
        if (strcmp(t, binary_types[i]) == 0)
            return PK_CLASS_BINARY;
    return PK_CLASS_NONE;
}

/* Whether the key key[0, len) ends in ext (".svgz"), in any case, after a
 * name (not a dotfile "/.svgz"). */
static int name_ends(const char *key, size_t len, const char *ext)
{
    size_t l = strlen(ext);
    return len > l && strncasecmp(key + len - l, ext, l) == 0 && key[len - l - 1] != '/';
}

int pk_svgz_key(const char *key, size_t len)
{
    return name_ends(key, len, ".svgz");
}

size_t pk_encoded_suffix(const char *key, size_t len, int *enc)
{
    static const struct {
        const char *ext;
        int enc;
    } sfx[] = {{".gz", SF_ENC_GZIP}, {".br", SF_ENC_BR}, {".zst", SF_ENC_ZSTD}};
    for (size_t i = 0; i < sizeof sfx / sizeof sfx[0]; i++) {
        if (name_ends(key, len, sfx[i].ext)) {
            *enc = sfx[i].enc;
            return strlen(sfx[i].ext);
        }
    }
    return 0;
}

int pk_utf8_valid(const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0, l; i < n; i += l) {
        if (p[i] < 0x80) {
            l = 1;
            continue;
        }
        if ((l = sf_utf8_char(p + i, n - i, NULL)) == 0)
            return 0;
    }
    return 1;
}

struct pk_magic {
    magic_t m;
};

int pk_magic_open(pk_magic **out, char *err, size_t errlen)
{
    pk_magic *pm = malloc(sizeof *pm);
    if (!pm) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    pm->m = magic_open(MAGIC_FLAGS);
    if (!pm->m) {
        snprintf(err, errlen, "libmagic: cannot start");
        free(pm);
        return -1;
    }
    if (magic_load(pm->m, NULL) != 0) {
        snprintf(err, errlen, "libmagic: cannot load its database: %s", magic_error(pm->m));
        magic_close(pm->m);
        free(pm);
        return -1;
    }
    *out = pm;
    return 0;
}

static int space(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f';
}

/* Where the text of p[0, n) starts: after a UTF-8 BOM and whitespace. */
static size_t text_start(const unsigned char *p, size_t n)
{
    size_t i = n >= 3 && memcmp(p, "\xef\xbb\xbf", 3) == 0 ? 3 : 0;
    while (i < n && space(p[i]))
        i++;
    return i;
}

int pk_opens_with_tag(const void *p, size_t n)
{
    const unsigned char *b = p;
    int le = n >= 2 && b[0] == 0xff && b[1] == 0xfe, be = n >= 2 && b[0] == 0xfe && b[1] == 0xff;
    if (!le && !be) {
        size_t at = text_start(b, n);
        return at < n && b[at] == '<';
    }
    /* UTF-16: the ASCII byte of each code unit, the other 0 */
    size_t i = 2;
    while (i + 1 < n && b[i + le] == 0 && space(b[i + be]))
        i += 2;
    return i + 1 < n && b[i + le] == 0 && b[i + be] == '<';
}

/* Whether p[0, n) opens as an HTML page: after a UTF-8 BOM and whitespace,
 * one of the patterns WHATWG MIME Sniffing (§7.1, "identifying a resource
 * with an unknown MIME type") gives for HTML, in any case, followed by a
 * space or '>' (or, here, other whitespace: "<html\n lang=en>"). Asked
 * before libmagic, which calls a page whose lines each hold one comma
 * text/csv, so that browsers download it. */
static int opens_as_html(const unsigned char *p, size_t n)
{
    static const char *const tags[] = {"<!doctype html",
                                       "<html",
                                       "<head",
                                       "<script",
                                       "<iframe",
                                       "<h1",
                                       "<div",
                                       "<font",
                                       "<table",
                                       "<a",
                                       "<style",
                                       "<title",
                                       "<b",
                                       "<body",
                                       "<br",
                                       "<p",
                                       "<!--"};
    size_t i = text_start(p, n);
    for (size_t k = 0; k < sizeof tags / sizeof tags[0]; k++) {
        size_t l = strlen(tags[k]);
        if (n - i > l && strncasecmp((const char *)p + i, tags[k], l) == 0 &&
            strchr(" \t\n\r\f>", p[i + l]) && p[i + l] != '\0')
            return 1;
    }
    return 0;
}

/* libmagic's names for types registered since under others: browsers
 * take a font of any type, but servd-pack compresses font/otf and would
 * store an unknown type as it is; RFC 9239 makes text/javascript the
 * type of JavaScript, the one the table gives .js, and its older names
 * obsolete. */
static const char *const magic_renamed[][2] = {
    {"application/vnd.ms-opentype", "font/otf"},
    {"application/javascript", "text/javascript"},
    {"application/x-javascript", "text/javascript"},
};

/* libmagic's JSON type for a document larger than MAGIC_SNIFF_BYTES that
 * opens with '{' or '[' after whitespace, or NULL: its first 64 KiB alone
 * are no JSON document, and libmagic would call them text/plain (a 100 KB
 * apple-app-site-association, which Apple fetches as application/json; a
 * TopoJSON map, which an import with type: "json" refuses as text). Only
 * libmagic's JSON test runs, over the whole file: a validator that stops
 * at the first byte that cannot be JSON, 40 ms for 27 MB. */
static const char *json_document(pk_magic *m, const unsigned char *p, size_t n)
{
    size_t i = 0;
    while (i < n && space(p[i]))
        i++;
    if (n <= MAGIC_SNIFF_BYTES || i == n || (p[i] != '{' && p[i] != '['))
        return NULL;
    if (magic_setflags(m->m, MAGIC_JSON_ONLY) != 0)
        return NULL;
    const char *t = magic_buffer(m->m, p, n);
    const char *json = !t                                       ? NULL
                       : strcmp(t, "application/json") == 0     ? "application/json"
                       : strcmp(t, "application/x-ndjson") == 0 ? "application/x-ndjson"
                                                                : NULL;
    magic_setflags(m->m, MAGIC_FLAGS);
    return json;
}

const char *pk_magic_type(pk_magic *m, const void *p, size_t n)
{
    if (n == 0)
        return "application/octet-stream";
    if (opens_as_html(p, n))
        return "text/html";
    const char *json = json_document(m, p, n);
    if (json)
        return json;
    const char *t = magic_buffer(m->m, p, n > MAGIC_SNIFF_BYTES ? MAGIC_SNIFF_BYTES : n);
    if (!t || strchr(t, '/') == NULL || strncmp(t, "inode/", 6) == 0 ||
        strcmp(t, "application/x-empty") == 0)
        return "application/octet-stream";
    for (size_t i = 0; i < sizeof magic_renamed / sizeof magic_renamed[0]; i++)
        if (strcmp(t, magic_renamed[i][0]) == 0)
            return magic_renamed[i][1];
    /* libmagic calls text/html any text with "<script" or "<html" near its
     * start (release notes that show a tag to paste, a Pascal source),
     * which a browser would then render, running the script: a page or a
     * fragment opens with a tag. */
    if (strcmp(t, "text/html") == 0 && !pk_opens_with_tag(p, n))
        return "text/plain";
    return t;
}

void pk_magic_close(pk_magic *m)
{
    if (!m)
        return;
    magic_close(m->m);
    free(m);
}

/* The charset parameter added to text types. */
#define CHARSET_UTF8 "; charset=utf-8"

/* Types that define no charset parameter: JSON, UTF-8 by definition
 * (RFC 8259 §11, RFC 6839 §3.1 for +json), YAML (RFC 9512: "Optional
 * parameters: N/A"; it finds its own encoding) and TOML (UTF-8 by
 * definition; IANA lists no parameters). */
static int no_charset_parameter(const char *base)
{
    return strcmp(base, "application/json") == 0 || ends_with(base, "+json") ||
           strcmp(base, "application/yaml") == 0 || ends_with(base, "+yaml") ||
           strcmp(base, "application/toml") == 0;
}

/* 1 if p[0, n) is UTF-8 text: not empty, valid, and no control byte but
 * tab, line feed, form feed and carriage return. */
static int plain_text(const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        if ((b[i] < 0x20 && b[i] != '\t' && b[i] != '\n' && b[i] != '\f' && b[i] != '\r') ||
            b[i] == 0x7f)
            return 0;
    return n > 0 && pk_utf8_valid(p, n);
}

/* 1 if p[0, n) opens as a portable anymap's header (Netpbm): P1 to P6, then
 * the width and the height, each after whitespace and comments. */
static int pnm_header(const unsigned char *p, size_t n)
{
    if (n < 2 || p[0] != 'P' || p[1] < '1' || p[1] > '6')
        return 0;
    size_t i = 2;
    for (int field = 0; field < 2; field++) {
        size_t spaces = i;
        for (;;) {
            while (i < n && strchr(" \t\n\v\f\r", p[i]) && p[i] != '\0')
                i++;
            if (i < n && p[i] == '#')
                while (i < n && p[i] != '\n' && p[i] != '\r')
                    i++;
            else
                break;
        }
        size_t digits = i;
        while (i < n && p[i] >= '0' && p[i] <= '9')
            i++;
        if (i == spaces || i == digits)
            return 0;
    }
    return 1;
}

/* Whether libmagic's type for data[0, n), a file whose extension the table
 * does not know, is a guess from text that looks like a format: plain
 * UTF-8 text (plain_text) that libmagic names by an application/ type
 * servd-pack does not know (a README that starts "PAM for Debian" is
 * application/vnd.hp-HPGL); and, when the name has no extension at all,
 * as CSV (an AUTHORS whose lines hold a comma), as a message (a note that
 * starts "From:") or as a Netpbm bitmap, graymap or pixmap whose header
 * is no image's ("P1 is the first step"). Browsers download those types;
 * as text/plain the file is shown and compressed. A true image, a
 * calendar, and "sample.eml" or "export.dat" (an extension, if one the
 * table lacks, says the file is what it is) keep their types. */
static int text_misnamed(const char *type, const char *key, size_t keylen, const void *data,
                         size_t n)
{
    if (!plain_text(data, n))
        return 0;
    if (strncmp(type, "application/", 12) == 0)
        return pk_mime_class(type) == PK_CLASS_NONE;
    if (sf_ext_present(key, keylen))
        return 0;
    if (strcmp(type, "image/x-portable-bitmap") == 0 ||
        strcmp(type, "image/x-portable-greymap") == 0 ||
        strcmp(type, "image/x-portable-graymap") == 0 ||
        strcmp(type, "image/x-portable-pixmap") == 0)
        return !pnm_header(data, n);
    return strcmp(type, "text/csv") == 0 || strncmp(type, "message/", 8) == 0;
}

/* Whether key ends in .ts, .mts or .cts (any case), after a name. */
static int typescript_name(const char *key, size_t len)
{
    return name_ends(key, len, ".ts") || name_ends(key, len, ".mts") || name_ends(key, len, ".cts");
}

char *pk_mime_decide(const char *key, size_t keylen, const char *rule_type, const void *data,
                     size_t n, pk_magic **magic, char *err, size_t errlen)
{
    const char *type = rule_type;
    int add_charset = 0;
    if (!type) {
        /* .ts is an MPEG transport stream (HLS), .mts one of AVCHD's, both
         * binary: 188-byte packets that each start 0x47 and hold control
         * bytes. UTF-8 text under those names or .cts is TypeScript (a
         * .d.ts), which no browser runs: shown and compressed. */
        type = typescript_name(key, keylen) && plain_text(data, n) ? "text/plain"
                                                                   : sf_mime_by_ext(key, keylen);
        if (!type) {
            if (!*magic && pk_magic_open(magic, err, errlen) != 0)
                return NULL;
            type = pk_magic_type(*magic, data, n);
            if (text_misnamed(type, key, keylen, data, n))
                type = "text/plain";
        }
        /* Claim UTF-8 only when the bytes are UTF-8: the charset of the
         * header overrides the file's own <meta charset>, CSS @charset and
         * XML declaration, so a Latin-1 page labelled utf-8 would show
         * U+FFFD for every accented letter. Without it browsers use the
         * file's declaration or sniff. */
        char base[TYPE_MAX];
        base_type(type, base, sizeof base);
        add_charset = pk_mime_is_text(type) && strchr(type, ';') == NULL &&
                      !no_charset_parameter(base) && pk_utf8_valid(data, n);
        /* An ASCII page can still name another encoding (<meta
         * charset=shift_jis>): it decides how its scripts are decoded and
         * how its forms submit, so the header must not overrule it. A name
         * that is no encoding's label (charset=utf-8/) names nothing. */
        if (add_charset && pk_declared_encoding(base, data, n) == PK_DECLARED_OTHER)
            add_charset = 0;
    }
    size_t len = strlen(type) + (add_charset ? strlen(CHARSET_UTF8) : 0) + 1;
    char *s = malloc(len);
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    snprintf(s, len, "%s%s", type, add_charset ? CHARSET_UTF8 : "");
    return s;
}
