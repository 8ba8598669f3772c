/*
 * msg.c - escaped one-line messages (msg.h).
 */
#include "msg.h"

void pk_esc_fputs(const char *s, FILE *out)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p < 0x20 || *p == 0x7f)
            fprintf(out, "\\x%02x", *p);
        else
            fputc(*p, out);
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
