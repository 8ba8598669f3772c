/*
 * mime.c - the text and compression classification and the libmagic
 * fallback (see mime.h; the extension table is the format library's,
 * sf/mime.h).
 */
#include "mime.h"

#include "digest.h"
#include "sf/mime.h"  /* sf_mime_by_ext */
#include "sf/path.h"  /* sf_utf8_char */
#include "sf/store.h" /* sf_hex */

#include <ctype.h>
#include <magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>

/* Bytes libmagic looks at: its own default read limit (1 MiB) would make
 * huge files slow for no better answer; 64 KiB covers every magic test
 * that matters for web content. */
#define MAGIC_SNIFF_BYTES (64 * 1024)

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
    "application/rtf",
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
    "application/wasm",  "image/x-icon", "image/vnd.microsoft.icon", "image/bmp", "image/x-ms-bmp",
    "application/x-tar", "image/tiff",   "model/gltf-binary",
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

void pk_mime_class_digest(char out[PK_CLASS_DIGEST_SIZE])
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
        memset(d, 0, sizeof d); /* "00000000": never matches a real digest's profile */
    }
    sf_hex(d, (PK_CLASS_DIGEST_SIZE - 1) / 2, out);
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

int pk_svgz_key(const char *key, size_t len)
{
    return len > 5 && strncasecmp(key + len - 5, ".svgz", 5) == 0 && key[len - 6] != '/';
}

size_t pk_encoded_suffix(const char *key, size_t len, int *enc)
{
    static const struct {
        const char *ext;
        int enc;
    } sfx[] = {{".gz", SF_ENC_GZIP}, {".br", SF_ENC_BR}, {".zst", SF_ENC_ZSTD}};
    for (size_t i = 0; i < sizeof sfx / sizeof sfx[0]; i++) {
        size_t n = strlen(sfx[i].ext);
        if (len > n + 1 && strncasecmp(key + len - n, sfx[i].ext, n) == 0 &&
            key[len - n - 1] != '/') {
            *enc = sfx[i].enc;
            return n;
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
    pm->m = magic_open(MAGIC_MIME_TYPE | MAGIC_NO_CHECK_COMPRESS | MAGIC_ERROR);
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
    size_t i = n >= 3 && memcmp(p, "\xef\xbb\xbf", 3) == 0 ? 3 : 0;
    while (i < n && (p[i] == ' ' || p[i] == '\t' || p[i] == '\n' || p[i] == '\r' || p[i] == '\f'))
        i++;
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
 * store an unknown type as it is. */
static const char *const magic_renamed[][2] = {
    {"application/vnd.ms-opentype", "font/otf"},
};

const char *pk_magic_type(pk_magic *m, const void *p, size_t n)
{
    if (n == 0)
        return "application/octet-stream";
    if (opens_as_html(p, n))
        return "text/html";
    const char *t = magic_buffer(m->m, p, n > MAGIC_SNIFF_BYTES ? MAGIC_SNIFF_BYTES : n);
    if (!t || strchr(t, '/') == NULL || strncmp(t, "inode/", 6) == 0 ||
        strcmp(t, "application/x-empty") == 0)
        return "application/octet-stream";
    for (size_t i = 0; i < sizeof magic_renamed / sizeof magic_renamed[0]; i++)
        if (strcmp(t, magic_renamed[i][0]) == 0)
            return magic_renamed[i][1];
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

/* How many bytes of an HTML file browsers prescan for <meta charset>
 * (HTML Living Standard, "prescan a byte stream"). */
#define META_PRESCAN 1024

/* Case-insensitive search for the ASCII word w in p[0, n). */
static const char *find_ci(const char *p, size_t n, const char *w)
{
    size_t l = strlen(w);
    for (size_t i = 0; i + l <= n; i++)
        if (strncasecmp(p + i, w, l) == 0)
            return p + i;
    return NULL;
}

/* The value after "charset" / "encoding" at p (within end): optional
 * spaces, '=', optional spaces and quote, then up to a quote, space, ';',
 * '?' or '>'. @return 1 with out filled (NUL-terminated). */
static int attr_value(const char *p, const char *end, char *out, size_t cap)
{
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    if (p >= end || *p != '=')
        return 0;
    p++;
    while (p < end && (*p == ' ' || *p == '\t' || *p == '"' || *p == '\''))
        p++;
    size_t n = 0;
    while (p < end && n + 1 < cap && !strchr("\"' \t;?>/\r\n", *p))
        out[n++] = *p++;
    out[n] = '\0';
    return n > 0;
}

/* HTML's ASCII whitespace. */
static int html_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r';
}

/* What an encoding label names (Encoding Standard, "get an encoding"). */
enum { ENC_UNKNOWN, ENC_UTF8, ENC_OTHER };

/* Every label of the Encoding Standard, sorted: UTF-8's, and UTF-16's,
 * which the HTML prescan reads as UTF-8 (a page cannot be UTF-16 and
 * declare it in ASCII); the rest name another encoding. */
static const struct label {
    const char *name;
    int kind;
} labels[] = {
    {"866", ENC_OTHER},
    {"ansi_x3.4-1968", ENC_OTHER},
    {"arabic", ENC_OTHER},
    {"ascii", ENC_OTHER},
    {"asmo-708", ENC_OTHER},
    {"big5", ENC_OTHER},
    {"big5-hkscs", ENC_OTHER},
    {"chinese", ENC_OTHER},
    {"cn-big5", ENC_OTHER},
    {"cp1250", ENC_OTHER},
    {"cp1251", ENC_OTHER},
    {"cp1252", ENC_OTHER},
    {"cp1253", ENC_OTHER},
    {"cp1254", ENC_OTHER},
    {"cp1255", ENC_OTHER},
    {"cp1256", ENC_OTHER},
    {"cp1257", ENC_OTHER},
    {"cp1258", ENC_OTHER},
    {"cp819", ENC_OTHER},
    {"cp866", ENC_OTHER},
    {"csbig5", ENC_OTHER},
    {"cseuckr", ENC_OTHER},
    {"cseucpkdfmtjapanese", ENC_OTHER},
    {"csgb2312", ENC_OTHER},
    {"csibm866", ENC_OTHER},
    {"csiso2022jp", ENC_OTHER},
    {"csiso2022kr", ENC_OTHER},
    {"csiso58gb231280", ENC_OTHER},
    {"csiso88596e", ENC_OTHER},
    {"csiso88596i", ENC_OTHER},
    {"csiso88598e", ENC_OTHER},
    {"csiso88598i", ENC_OTHER},
    {"csisolatin1", ENC_OTHER},
    {"csisolatin2", ENC_OTHER},
    {"csisolatin3", ENC_OTHER},
    {"csisolatin4", ENC_OTHER},
    {"csisolatin5", ENC_OTHER},
    {"csisolatin6", ENC_OTHER},
    {"csisolatin9", ENC_OTHER},
    {"csisolatinarabic", ENC_OTHER},
    {"csisolatincyrillic", ENC_OTHER},
    {"csisolatingreek", ENC_OTHER},
    {"csisolatinhebrew", ENC_OTHER},
    {"cskoi8r", ENC_OTHER},
    {"csksc56011987", ENC_OTHER},
    {"csmacintosh", ENC_OTHER},
    {"csshiftjis", ENC_OTHER},
    {"csunicode", ENC_UTF8},
    {"cyrillic", ENC_OTHER},
    {"dos-874", ENC_OTHER},
    {"ecma-114", ENC_OTHER},
    {"ecma-118", ENC_OTHER},
    {"elot_928", ENC_OTHER},
    {"euc-jp", ENC_OTHER},
    {"euc-kr", ENC_OTHER},
    {"gb18030", ENC_OTHER},
    {"gb2312", ENC_OTHER},
    {"gb_2312", ENC_OTHER},
    {"gb_2312-80", ENC_OTHER},
    {"gbk", ENC_OTHER},
    {"greek", ENC_OTHER},
    {"greek8", ENC_OTHER},
    {"hebrew", ENC_OTHER},
    {"hz-gb-2312", ENC_OTHER},
    {"ibm819", ENC_OTHER},
    {"ibm866", ENC_OTHER},
    {"iso-10646-ucs-2", ENC_UTF8},
    {"iso-2022-cn", ENC_OTHER},
    {"iso-2022-cn-ext", ENC_OTHER},
    {"iso-2022-jp", ENC_OTHER},
    {"iso-2022-kr", ENC_OTHER},
    {"iso-8859-1", ENC_OTHER},
    {"iso-8859-10", ENC_OTHER},
    {"iso-8859-11", ENC_OTHER},
    {"iso-8859-13", ENC_OTHER},
    {"iso-8859-14", ENC_OTHER},
    {"iso-8859-15", ENC_OTHER},
    {"iso-8859-16", ENC_OTHER},
    {"iso-8859-2", ENC_OTHER},
    {"iso-8859-3", ENC_OTHER},
    {"iso-8859-4", ENC_OTHER},
    {"iso-8859-5", ENC_OTHER},
    {"iso-8859-6", ENC_OTHER},
    {"iso-8859-6-e", ENC_OTHER},
    {"iso-8859-6-i", ENC_OTHER},
    {"iso-8859-7", ENC_OTHER},
    {"iso-8859-8", ENC_OTHER},
    {"iso-8859-8-e", ENC_OTHER},
    {"iso-8859-8-i", ENC_OTHER},
    {"iso-8859-9", ENC_OTHER},
    {"iso-ir-100", ENC_OTHER},
    {"iso-ir-101", ENC_OTHER},
    {"iso-ir-109", ENC_OTHER},
    {"iso-ir-110", ENC_OTHER},
    {"iso-ir-126", ENC_OTHER},
    {"iso-ir-127", ENC_OTHER},
    {"iso-ir-138", ENC_OTHER},
    {"iso-ir-144", ENC_OTHER},
    {"iso-ir-148", ENC_OTHER},
    {"iso-ir-149", ENC_OTHER},
    {"iso-ir-157", ENC_OTHER},
    {"iso-ir-58", ENC_OTHER},
    {"iso8859-1", ENC_OTHER},
    {"iso8859-10", ENC_OTHER},
    {"iso8859-11", ENC_OTHER},
    {"iso8859-13", ENC_OTHER},
    {"iso8859-14", ENC_OTHER},
    {"iso8859-15", ENC_OTHER},
    {"iso8859-2", ENC_OTHER},
    {"iso8859-3", ENC_OTHER},
    {"iso8859-4", ENC_OTHER},
    {"iso8859-5", ENC_OTHER},
    {"iso8859-6", ENC_OTHER},
    {"iso8859-7", ENC_OTHER},
    {"iso8859-8", ENC_OTHER},
    {"iso8859-9", ENC_OTHER},
    {"iso88591", ENC_OTHER},
    {"iso885910", ENC_OTHER},
    {"iso885911", ENC_OTHER},
    {"iso885913", ENC_OTHER},
    {"iso885914", ENC_OTHER},
    {"iso885915", ENC_OTHER},
    {"iso88592", ENC_OTHER},
    {"iso88593", ENC_OTHER},
    {"iso88594", ENC_OTHER},
    {"iso88595", ENC_OTHER},
    {"iso88596", ENC_OTHER},
    {"iso88597", ENC_OTHER},
    {"iso88598", ENC_OTHER},
    {"iso88599", ENC_OTHER},
    {"iso_8859-1", ENC_OTHER},
    {"iso_8859-15", ENC_OTHER},
    {"iso_8859-1:1987", ENC_OTHER},
    {"iso_8859-2", ENC_OTHER},
    {"iso_8859-2:1987", ENC_OTHER},
    {"iso_8859-3", ENC_OTHER},
    {"iso_8859-3:1988", ENC_OTHER},
    {"iso_8859-4", ENC_OTHER},
    {"iso_8859-4:1988", ENC_OTHER},
    {"iso_8859-5", ENC_OTHER},
    {"iso_8859-5:1988", ENC_OTHER},
    {"iso_8859-6", ENC_OTHER},
    {"iso_8859-6:1987", ENC_OTHER},
    {"iso_8859-7", ENC_OTHER},
    {"iso_8859-7:1987", ENC_OTHER},
    {"iso_8859-8", ENC_OTHER},
    {"iso_8859-8:1988", ENC_OTHER},
    {"iso_8859-9", ENC_OTHER},
    {"iso_8859-9:1989", ENC_OTHER},
    {"koi", ENC_OTHER},
    {"koi8", ENC_OTHER},
    {"koi8-r", ENC_OTHER},
    {"koi8-ru", ENC_OTHER},
    {"koi8-u", ENC_OTHER},
    {"koi8_r", ENC_OTHER},
    {"korean", ENC_OTHER},
    {"ks_c_5601-1987", ENC_OTHER},
    {"ks_c_5601-1989", ENC_OTHER},
    {"ksc5601", ENC_OTHER},
    {"ksc_5601", ENC_OTHER},
    {"l1", ENC_OTHER},
    {"l2", ENC_OTHER},
    {"l3", ENC_OTHER},
    {"l4", ENC_OTHER},
    {"l5", ENC_OTHER},
    {"l6", ENC_OTHER},
    {"l9", ENC_OTHER},
    {"latin1", ENC_OTHER},
    {"latin2", ENC_OTHER},
    {"latin3", ENC_OTHER},
    {"latin4", ENC_OTHER},
    {"latin5", ENC_OTHER},
    {"latin6", ENC_OTHER},
    {"logical", ENC_OTHER},
    {"mac", ENC_OTHER},
    {"macintosh", ENC_OTHER},
    {"ms932", ENC_OTHER},
    {"ms_kanji", ENC_OTHER},
    {"shift-jis", ENC_OTHER},
    {"shift_jis", ENC_OTHER},
    {"sjis", ENC_OTHER},
    {"sun_eu_greek", ENC_OTHER},
    {"tis-620", ENC_OTHER},
    {"ucs-2", ENC_UTF8},
    {"unicode", ENC_UTF8},
    {"unicode-1-1-utf-8", ENC_UTF8},
    {"unicode11utf8", ENC_UTF8},
    {"unicode20utf8", ENC_UTF8},
    {"unicodefeff", ENC_UTF8},
    {"unicodefffe", ENC_UTF8},
    {"us-ascii", ENC_OTHER},
    {"utf-16", ENC_UTF8},
    {"utf-16be", ENC_UTF8},
    {"utf-16le", ENC_UTF8},
    {"utf-8", ENC_UTF8},
    {"utf8", ENC_UTF8},
    {"visual", ENC_OTHER},
    {"windows-1250", ENC_OTHER},
    {"windows-1251", ENC_OTHER},
    {"windows-1252", ENC_OTHER},
    {"windows-1253", ENC_OTHER},
    {"windows-1254", ENC_OTHER},
    {"windows-1255", ENC_OTHER},
    {"windows-1256", ENC_OTHER},
    {"windows-1257", ENC_OTHER},
    {"windows-1258", ENC_OTHER},
    {"windows-31j", ENC_OTHER},
    {"windows-874", ENC_OTHER},
    {"windows-949", ENC_OTHER},
    {"x-cp1250", ENC_OTHER},
    {"x-cp1251", ENC_OTHER},
    {"x-cp1252", ENC_OTHER},
    {"x-cp1253", ENC_OTHER},
    {"x-cp1254", ENC_OTHER},
    {"x-cp1255", ENC_OTHER},
    {"x-cp1256", ENC_OTHER},
    {"x-cp1257", ENC_OTHER},
    {"x-cp1258", ENC_OTHER},
    {"x-euc-jp", ENC_OTHER},
    {"x-gbk", ENC_OTHER},
    {"x-mac-cyrillic", ENC_OTHER},
    {"x-mac-roman", ENC_OTHER},
    {"x-mac-ukrainian", ENC_OTHER},
    {"x-sjis", ENC_OTHER},
    {"x-unicode20utf8", ENC_UTF8},
    {"x-user-defined", ENC_OTHER},
    {"x-x-big5", ENC_OTHER},
};

static int cmp_label(const void *k, const void *e)
{
    return strcmp(k, ((const struct label *)e)->name);
}

/* What the label s[0, n) names: ASCII whitespace around it ignored, case
 * too; ENC_UNKNOWN when it is no label (browsers then ignore it). */
static int encoding_kind(const char *s, size_t n)
{
    char low[32];
    while (n > 0 && html_space(s[0]))
        s++, n--;
    while (n > 0 && html_space(s[n - 1]))
        n--;
    if (n == 0 || n >= sizeof low)
        return ENC_UNKNOWN;
    for (size_t i = 0; i < n; i++)
        low[i] = (char)tolower((unsigned char)s[i]);
    low[n] = '\0';
    const struct label *l =
        bsearch(low, labels, sizeof labels / sizeof labels[0], sizeof labels[0], cmp_label);
    return l ? l->kind : ENC_UNKNOWN;
}

/* One attribute of a tag, read at *pp (before end) as the HTML prescan
 * reads it ("get an attribute"): a name, and a value quoted, unquoted or
 * empty. *pp moves past it. @return 0 at the end of the tag. */
static int next_attr(const char **pp, const char *end, const char **name, size_t *nl,
                     const char **val, size_t *vl)
{
    const char *p = *pp;
    while (p < end && (html_space(*p) || *p == '/'))
        p++;
    *pp = p;
    if (p >= end || *p == '>')
        return 0;
    *name = p;
    do
        p++;
    while (p < end && *p != '=' && *p != '>' && *p != '/' && !html_space(*p));
    *nl = (size_t)(p - *name);
    *val = p;
    *vl = 0;
    const char *q = p;
    while (q < end && html_space(*q))
        q++;
    if (q < end && *q == '=') {
        q++;
        while (q < end && html_space(*q))
            q++;
        if (q < end && (*q == '"' || *q == '\'')) {
            const char *close = memchr(q + 1, *q, (size_t)(end - q - 1));
            *val = q + 1;
            *vl = close ? (size_t)(close - q - 1) : (size_t)(end - q - 1);
            p = close ? close + 1 : end;
        } else {
            *val = q;
            while (q < end && *q != '>' && !html_space(*q))
                q++;
            *vl = (size_t)(q - *val);
            p = q;
        }
    }
    *pp = p;
    return 1;
}

static int name_is(const char *n, size_t l, const char *w)
{
    return l == strlen(w) && strncasecmp(n, w, l) == 0;
}

/* The encoding a meta element's content value names ("extracting a
 * character encoding from a meta element"): after "charset", optional
 * spaces, '=' and spaces, a quoted or bare name. */
static int content_charset(const char *v, size_t n, char *out, size_t cap)
{
    for (const char *p = v, *end = v + n; (p = find_ci(p, (size_t)(end - p), "charset"));) {
        p += 7;
        const char *q = p;
        while (q < end && html_space(*q))
            q++;
        if (q >= end || *q != '=')
            continue;
        q++;
        while (q < end && html_space(*q))
            q++;
        char quote = q < end && (*q == '"' || *q == '\'') ? *q++ : 0;
        size_t l = 0;
        while (q + l < end && (quote ? q[l] != quote : !html_space(q[l]) && q[l] != ';'))
            l++;
        if (l == 0 || l >= cap || (quote && q + l >= end))
            return 0;
        memcpy(out, q, l);
        out[l] = '\0';
        return 1;
    }
    return 0;
}

/* The encoding an HTML file's first META_PRESCAN bytes name, read as
 * browsers prescan them (HTML Living Standard, "prescan a byte stream"):
 * comments skipped, each tag's attributes read as attributes, and of a
 * <meta>, its charset attribute, or the charset of its content attribute
 * when it also has http-equiv="content-type"; a name that is no label of
 * the Encoding Standard is ignored and the scan goes on. A "charset=" in
 * the content of <meta name="description"> names nothing. */
static int html_charset(const char *data, size_t n, char *out, size_t cap)
{
    const char *p = data, *end = data + (n < META_PRESCAN ? n : META_PRESCAN);
    while (p < end) {
        if (*p != '<') {
            p++;
            continue;
        }
        size_t left = (size_t)(end - p);
        if (left >= 4 && memcmp(p, "<!--", 4) == 0) {
            const char *c = memmem(p + 2, left - 2, "-->", 3);
            if (!c)
                return 0;
            p = c + 3;
            continue;
        }
        int meta = left > 6 && strncasecmp(p, "<meta", 5) == 0 && (html_space(p[5]) || p[5] == '/');
        int letter = left > 1 &&
                     (((p[1] | 0x20) >= 'a' && (p[1] | 0x20) <= 'z') ||
                      (p[1] == '/' && left > 2 && ((p[2] | 0x20) >= 'a' && (p[2] | 0x20) <= 'z')));
        if (!meta && !letter) {
            /* <!doctype>, <?...>, </ of no tag: to the next '>'; a '<'
             * alone is one byte */
            if (left > 1 && (p[1] == '!' || p[1] == '/' || p[1] == '?')) {
                const char *gt = memchr(p, '>', left);
                p = gt ? gt + 1 : end;
            } else {
                p++;
            }
            continue;
        }
        /* past "<meta", at the space or '/' after it; past another tag's
         * name, which only a space or '>' ends */
        p += meta ? 5 : 1;
        while (!meta && p < end && !html_space(*p) && *p != '>')
            p++;
        const char *name, *val;
        size_t nl, vl;
        /* the prescan's state: charset null (0), failure (-1) or found (1);
         * need pragma null (-1), no (0) or yes (1) */
        int pragma = 0, need = -1, cs = 0, seen_cs = 0, seen_ct = 0, seen_he = 0;
        char found[64];
        while (next_attr(&p, end, &name, &nl, &val, &vl)) {
            if (!meta)
                continue;
            if (name_is(name, nl, "http-equiv") && !seen_he++) {
                pragma = name_is(val, vl, "content-type");
            } else if (name_is(name, nl, "content") && !seen_ct++) {
                if (cs == 0 && content_charset(val, vl, found, sizeof found) &&
                    encoding_kind(found, strlen(found)) != ENC_UNKNOWN) {
                    cs = 1;
                    need = 1;
                }
            } else if (name_is(name, nl, "charset") && !seen_cs++) {
                cs = vl < sizeof found && encoding_kind(val, vl) != ENC_UNKNOWN ? 1 : -1;
                if (cs == 1) {
                    memcpy(found, val, vl);
                    found[vl] = '\0';
                }
                need = 0;
            }
        }
        if (p >= end)
            return 0; /* the tag runs past what is scanned */
        p++;          /* the '>' */
        if (need == -1 || (need == 1 && !pragma) || cs != 1 || strlen(found) >= cap)
            continue;
        memcpy(out, found, strlen(found) + 1);
        return 1;
    }
    return 0;
}

/* The encoding a text file names for itself, if it names one: an HTML
 * <meta charset> or http-equiv content in the first META_PRESCAN bytes, a
 * CSS @charset rule at its start, an XML declaration's encoding. Writes it
 * into out. @return 1 if one is named. */
static int declared_charset(const char *base, const char *data, size_t n, char *out, size_t cap)
{
    int xml = ends_with(base, "+xml") || strcmp(base, "application/xml") == 0 ||
              strcmp(base, "text/xml") == 0;
    if (strcmp(base, "text/css") == 0) {
        static const char rule[] = "@charset \"";
        if (n > sizeof rule - 1 && memcmp(data, rule, sizeof rule - 1) == 0) {
            const char *v = data + sizeof rule - 1, *q = memchr(v, '"', n - (sizeof rule - 1));
            size_t l = q ? (size_t)(q - v) : 0;
            if (l > 0 && l < cap) {
                memcpy(out, v, l);
                out[l] = '\0';
                return 1;
            }
        }
        return 0;
    }
    if (xml && n >= 5 && memcmp(data, "<?xml", 5) == 0) {
        const char *end = memchr(data, '>', n);
        const char *e = end ? find_ci(data, (size_t)(end - data), "encoding") : NULL;
        if (e && attr_value(e + 8, end, out, cap))
            return 1;
    }
    if (strcmp(base, "text/html") != 0 && strcmp(base, "application/xhtml+xml") != 0)
        return 0;
    return html_charset(data, n, out, cap);
}

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

/* Whether libmagic's type for p[0, n), of a file with no known extension,
 * is a guess from text that looks like a format: plain UTF-8 text
 * (plain_text) that libmagic names by an application/ type servd-pack
 * does not know (a README that starts "PAM for Debian" is
 * application/vnd.hp-HPGL), as CSV (an AUTHORS whose lines hold a comma),
 * as a message (a note that starts "From:") or as a Netpbm image whose
 * header is no image's ("P1 is the first step"). Browsers download those
 * types; as text/plain the file is shown and compressed. A true image or
 * calendar keeps its type. */
static int text_misnamed(const char *type, const void *data, size_t n)
{
    if (!plain_text(data, n))
        return 0;
    if (strncmp(type, "application/", 12) == 0)
        return pk_mime_class(type) == PK_CLASS_NONE;
    if (strncmp(type, "image/x-portable-", 17) == 0)
        return !pnm_header(data, n);
    return strcmp(type, "text/csv") == 0 || strncmp(type, "message/", 8) == 0;
}

char *pk_mime_decide(const char *key, size_t keylen, const char *rule_type, const void *data,
                     size_t n, pk_magic **magic, char *err, size_t errlen)
{
    const char *type = rule_type;
    int add_charset = 0;
    if (!type) {
        type = sf_mime_by_ext(key, keylen);
        if (!type) {
            if (!*magic && pk_magic_open(magic, err, errlen) != 0)
                return NULL;
            type = pk_magic_type(*magic, data, n);
            if (text_misnamed(type, data, n))
                type = "text/plain";
        }
        /* Claim UTF-8 only when the bytes are UTF-8: the charset of the
         * header overrides the file's own <meta charset>, CSS @charset and
         * XML declaration, so a Latin-1 page labelled utf-8 would show
         * U+FFFD for every accented letter. Without it browsers use the
         * file's declaration or sniff. */
        char base[TYPE_MAX], named[64];
        base_type(type, base, sizeof base);
        add_charset = pk_mime_is_text(type) && strchr(type, ';') == NULL &&
                      !no_charset_parameter(base) && pk_utf8_valid(data, n);
        /* An ASCII page can still name another encoding (<meta
         * charset=shift_jis>): it decides how its scripts are decoded and
         * how its forms submit, so the header must not overrule it. A name
         * that is no encoding's label (charset=utf-8/) names nothing. */
        if (add_charset && declared_charset(base, data, n, named, sizeof named) &&
            encoding_kind(named, strlen(named)) == ENC_OTHER)
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
