/*
 * msg.c - escaped one-line messages (msg.h).
 */
#include "msg.h"

#include "sf/path.h" /* sf_escape */

#include <stdatomic.h>
#include <string.h>

void pk_esc_fwrite(const char *s, size_t n, FILE *out)
{
    char buf[512];
    while (n > 0) {
        size_t used = sf_escape(s, n, buf, sizeof buf);
        fputs(buf, out);
        s += used;
        n -= used;
    }
}

void pk_esc_fputs(const char *s, FILE *out)
{
    pk_esc_fwrite(s, strlen(s), out);
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

void pk_format_line(char *out, size_t cap, const char *fmt, ...)
{
    static const char prefix[] = "servd-pack: ";
    char buf[PK_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (cap < sizeof prefix + SF_ESCAPE_CHAR_MAX + 2) {
        if (cap)
            out[0] = '\0';
        return;
    }
    memcpy(out, prefix, sizeof prefix - 1);
    size_t at = sizeof prefix - 1;
    sf_escape(buf, strlen(buf), out + at, cap - at - 1); /* room for the newline */
    at += strlen(out + at);
    out[at] = '\n';
    out[at + 1] = '\0';
}

static atomic_ulong warnings;

void pk_vwarn(const char *fmt, va_list ap)
{
    char buf[PK_MSG_MAX];
    vsnprintf(buf, sizeof buf, fmt, ap);
    atomic_fetch_add_explicit(&warnings, 1, memory_order_relaxed);
    pk_err("warning: %s", buf);
}

void pk_warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pk_vwarn(fmt, ap);
    va_end(ap);
}

unsigned long pk_warnings(void)
{
    return atomic_load_explicit(&warnings, memory_order_relaxed);
}
