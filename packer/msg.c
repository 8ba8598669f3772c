/*
 * msg.c - escaped one-line messages (msg.h).
 */
#include "msg.h"

#include "mime.h" /* pk_utf8_valid */

/* Length of the well-formed UTF-8 character at p (2 to 4), or 0. */
static size_t utf8_len(const unsigned char *p)
{
    size_t n = p[0] >= 0xf0 ? 4 : p[0] >= 0xe0 ? 3 : p[0] >= 0xc0 ? 2 : 0;
    for (size_t i = 1; i < n; i++)
        if (p[i] == 0) /* the string ends inside the character */
            return 0;
    return n && pk_utf8_valid(p, n) ? n : 0;
}

/* Whether the character at p[0, n) controls the terminal, the lines or the
 * direction of the text: C1 controls (U+0080-U+009F), the line and
 * paragraph separators (U+2028, U+2029) and Unicode's Bidi_Control set
 * (U+061C, U+200E, U+200F, U+202A-U+202E, U+2066-U+2069), which could make
 * a name read as another. */
static unsigned control_point(const unsigned char *p, size_t n)
{
    unsigned cp = n == 2 ? (unsigned)(p[0] & 0x1f) << 6 | (p[1] & 0x3f)
                  : n == 3
                      ? (unsigned)(p[0] & 0x0f) << 12 | (unsigned)(p[1] & 0x3f) << 6 | (p[2] & 0x3f)
                      : 0;
    if ((cp >= 0x80 && cp <= 0x9f) || cp == 0x061c || cp == 0x200e || cp == 0x200f ||
        cp == 0x2028 || cp == 0x2029 || (cp >= 0x202a && cp <= 0x202e) ||
        (cp >= 0x2066 && cp <= 0x2069))
        return cp;
    return 0;
}

void pk_esc_fputs(const char *s, FILE *out)
{
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        if (*p < 0x80) {
            if (*p < 0x20 || *p == 0x7f)
                fprintf(out, "\\x%02x", *p);
            else
                fputc(*p, out);
            p++;
            continue;
        }
        size_t n = utf8_len(p);
        unsigned cp = n ? control_point(p, n) : 0;
        if (n == 0) {
            fprintf(out, "\\x%02x", *p++); /* not UTF-8: the byte */
        } else if (cp) {
            fprintf(out, "\\u%04x", cp);
            p += n;
        } else {
            fwrite(p, 1, n, out);
            p += n;
        }
    }
}

void pk_verr(const char *fmt, va_list ap)
{
    char buf[PK_MSG_MAX];
    vsnprintf(buf, sizeof buf, fmt, ap);
    fputs("servd-pack: ", stderr);
    pk_esc_fputs(buf, stderr);
    fputc('\n', stderr);
}

void pk_err(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pk_verr(fmt, ap);
    va_end(ap);
}
