/*
 * msg.c - escaped one-line messages (msg.h).
 */
#include "msg.h"

#include "sf/path.h" /* sf_utf8_char */

#include <string.h>

/* Whether code point cp controls the terminal, the lines or the direction
 * of the text: C1 controls (U+0080-U+009F), the line and paragraph
 * separators (U+2028, U+2029) and Unicode's Bidi_Control set (U+061C,
 * U+200E, U+200F, U+202A-U+202E, U+2066-U+2069), which could make a name
 * read as another. */
static int is_control_point(uint32_t cp)
{
    return (cp >= 0x80 && cp <= 0x9f) || cp == 0x061c || cp == 0x200e || cp == 0x200f ||
           cp == 0x2028 || cp == 0x2029 || (cp >= 0x202a && cp <= 0x202e) ||
           (cp >= 0x2066 && cp <= 0x2069);
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
        uint32_t cp;
        size_t n = sf_utf8_char(p, strnlen((const char *)p, 4), &cp);
        if (n == 0) {
            fprintf(out, "\\x%02x", *p++); /* not UTF-8: the byte */
        } else if (is_control_point(cp)) {
            fprintf(out, "\\u%04x", (unsigned)cp);
            p += n;
        } else {
            fwrite(p, 1, n, out);
            p += n;
        }
    }
}

/* One line per message: main() makes stderr line-buffered, and the lock
 * keeps another thread's output out of the middle of the line. */
void pk_verr(const char *fmt, va_list ap)
{
    char buf[PK_MSG_MAX];
    vsnprintf(buf, sizeof buf, fmt, ap);
    flockfile(stderr);
    fputs("servd-pack: ", stderr);
    pk_esc_fputs(buf, stderr);
    fputc('\n', stderr);
    funlockfile(stderr);
}

void pk_err(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pk_verr(fmt, ap);
    va_end(ap);
}
