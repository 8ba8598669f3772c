/*
 * charset.c - what a text file says of its own encoding: an HTML page's
 * <meta> as browsers prescan it, a CSS @charset rule, an XML declaration
 * (see charset.h). The labels are the Encoding Standard's.
 */
#include "charset.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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
    size_t bl = strlen(base);
    int xml = (bl > 4 && strcmp(base + bl - 4, "+xml") == 0) ||
              strcmp(base, "application/xml") == 0 || strcmp(base, "text/xml") == 0;
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

int pk_declared_encoding(const char *base, const void *data, size_t n)
{
    char named[64];
    if (!declared_charset(base, data, n, named, sizeof named))
        return PK_DECLARED_NONE;
    switch (encoding_kind(named, strlen(named))) {
    case ENC_UTF8:
        return PK_DECLARED_UTF8;
    case ENC_OTHER:
        return PK_DECLARED_OTHER;
    default:
        return PK_DECLARED_NONE;
    }
}
