/* path.c - request targets and file names to pack keys (see sf/path.h). */
#include "sf/path.h"
#include "sf/store.h"

#include <stdint.h>
#include <string.h>

static int hexval(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

size_t sf_utf8_char(const void *s, size_t n, uint32_t *cp)
{
    const unsigned char *p = s;
    if (n == 0)
        return 0;
    unsigned char c = p[0];
    size_t len;
    uint32_t v;
    if (c < 0x80) {
        len = 1, v = c;
    } else if (c >= 0xc2 && c <= 0xdf) {
        if (n < 2 || (p[1] & 0xc0) != 0x80)
            return 0;
        len = 2, v = (uint32_t)(c & 0x1f) << 6 | (p[1] & 0x3f);
    } else if (c >= 0xe0 && c <= 0xef) {
        if (n < 3 || (p[1] & 0xc0) != 0x80 || (p[2] & 0xc0) != 0x80)
            return 0;
        if (c == 0xe0 && p[1] < 0xa0)
            return 0; /* overlong */
        if (c == 0xed && p[1] > 0x9f)
            return 0; /* surrogate */
        len = 3, v = (uint32_t)(c & 0x0f) << 12 | (uint32_t)(p[1] & 0x3f) << 6 | (p[2] & 0x3f);
    } else if (c >= 0xf0 && c <= 0xf4) {
        if (n < 4 || (p[1] & 0xc0) != 0x80 || (p[2] & 0xc0) != 0x80 || (p[3] & 0xc0) != 0x80)
            return 0;
        if (c == 0xf0 && p[1] < 0x90)
            return 0; /* overlong */
        if (c == 0xf4 && p[1] > 0x8f)
            return 0; /* above U+10FFFF */
        len = 4, v = (uint32_t)(c & 0x07) << 18 | (uint32_t)(p[1] & 0x3f) << 12 |
                     (uint32_t)(p[2] & 0x3f) << 6 | (p[3] & 0x3f);
    } else {
        return 0; /* continuation byte, 0xc0, 0xc1 or 0xf5.. */
    }
    if (cp)
        *cp = v;
    return len;
}

/* Whether code point cp controls a terminal, the lines or the direction of
 * the text (see sf_escape). */
static int is_control_point(uint32_t cp)
{
    return (cp >= 0x80 && cp <= 0x9f) || cp == 0x061c || cp == 0x200e || cp == 0x200f ||
           cp == 0x2028 || cp == 0x2029 || (cp >= 0x202a && cp <= 0x202e) ||
           (cp >= 0x2066 && cp <= 0x2069);
}

size_t sf_escape(const void *s, size_t n, char *out, size_t cap)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = s;
    size_t i = 0, o = 0;
    while (i < n) {
        char t[SF_ESCAPE_CHAR_MAX];
        size_t tn, used;
        uint32_t cp = 0;
        size_t l = p[i] < 0x80 ? 1 : sf_utf8_char(p + i, n - i, &cp);
        if (l == 0 || (l == 1 && (p[i] < 0x20 || p[i] == 0x7f))) {
            t[0] = '\\', t[1] = 'x', t[2] = hex[p[i] >> 4], t[3] = hex[p[i] & 15];
            tn = 4, used = 1;
        } else if (l > 1 && is_control_point(cp)) {
            t[0] = '\\', t[1] = 'u';
            for (int k = 0; k < 4; k++)
                t[2 + k] = hex[(cp >> (12 - 4 * k)) & 15];
            tn = 6, used = l;
        } else {
            memcpy(t, p + i, l);
            tn = l, used = l;
        }
        if (o + tn >= cap)
            break;
        memcpy(out + o, t, tn);
        o += tn;
        i += used;
    }
    if (cap)
        out[o] = '\0';
    return i;
}

/* Validates a decoded segment's bytes: no NUL, no controls, no '\\', UTF-8. */
static int segment_ok(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        if (s[i] < 0x20 || s[i] == 0x7f || s[i] == '\\')
            return 0;
        size_t l = sf_utf8_char(s + i, n - i, NULL);
        if (l == 0)
            return 0;
        i += l;
    }
    return 1;
}

int sf_path_from_target(const char *in, size_t len, char *out, size_t cap, size_t *outlen)
{
    const unsigned char *p = (const unsigned char *)in;

    if (len == 0 || p[0] != '/')
        return SF_EPATH;
    if (cap < 2)
        return SF_ETOOLONG;

    /* Invariant: out[0..o) is a normalised directory prefix ending in '/'. */
    size_t o = 0;
    out[o++] = '/';
    size_t i = 1;
    for (;;) {
        size_t seg = o; /* the segment is decoded in place at out + seg */
        while (i < len && p[i] != '/') {
            unsigned char c = p[i++];
            if (c == '%') {
                if (len - i < 2)
                    return SF_EPATH;
                int a = hexval(p[i]), b = hexval(p[i + 1]);
                if (a < 0 || b < 0)
                    return SF_EPATH;
                c = (unsigned char)(a << 4 | b);
                if (c == '/' || c == '\\' || c == 0)
                    return SF_EPATH; /* encoded separators and NUL */
                i += 2;
            }
            if (o + 2 > cap) /* room for this byte and the NUL */
                return SF_ETOOLONG;
            out[o++] = (char)c;
        }
        size_t n = o - seg;
        int last = i >= len;
        if (!segment_ok((const unsigned char *)out + seg, n))
            return SF_EPATH;
        if (n == 1 && out[seg] == '.') {
            o = seg; /* "." */
        } else if (n == 2 && out[seg] == '.' && out[seg + 1] == '.') {
            if (seg == 1)
                return SF_EPATH; /* ".." above "/" */
            o = seg - 1;         /* drop the parent's trailing '/' ... */
            while (out[o - 1] != '/')
                o--; /* ... and the parent segment */
        } else if (n > 0 && !last) {
            if (o + 2 > cap)
                return SF_ETOOLONG;
            out[o++] = '/';
        }
        if (last)
            break;
        i++; /* the '/' */
    }
    out[o] = '\0';
    *outlen = o;
    return SF_OK;
}

int sf_path_check(const char *key, size_t len)
{
    const unsigned char *p = (const unsigned char *)key;
    if (len == 0 || p[0] != '/' || len >= SF_PATH_MAX)
        return SF_EPATH;
    size_t i = 1;
    while (i < len) {
        size_t s = i;
        while (i < len && p[i] != '/')
            i++;
        size_t n = i - s;
        if (n == 0)
            return SF_EPATH; /* "//" */
        if ((n == 1 && p[s] == '.') || (n == 2 && p[s] == '.' && p[s + 1] == '.'))
            return SF_EPATH;
        if (!segment_ok(p + s, n))
            return SF_EPATH;
        if (i < len)
            i++; /* '/' */
    }
    return SF_OK;
}

/* pchar (RFC 3986 §3.3) minus pct-encoded, plus '/': unreserved, sub-delims,
 * ':' and '@'. */
static int url_safe(unsigned char c)
{
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
        return 1;
    return c != 0 && strchr("-._~!$&'()*+,;=:@/", c) != NULL;
}

size_t sf_path_to_url(const char *key, size_t len, char *out, size_t cap)
{
    return sf_path_to_url_keeping(key, len, "", out, cap);
}

size_t sf_path_to_url_keeping(const char *key, size_t len, const char *raw, char *out, size_t cap)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)key[i];
        if (url_safe(c) || (c != 0 && strchr(raw, c))) {
            if (n < cap)
                out[n] = (char)c;
            n++;
        } else {
            if (n + 3 <= cap) {
                out[n] = '%';
                out[n + 1] = hex[c >> 4];
                out[n + 2] = hex[c & 15];
            }
            n += 3;
        }
    }
    return n;
}
