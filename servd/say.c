/*
 * say.c - see say.h.
 */
#include "say.h"

#include "sf/path.h" /* sf_escape */

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Room a line needs beyond its text: "<N>", "servd: " and the newline. */
#define SV_SAY_PREFIX 16
/* The longest second line, its newline included. */
#define SV_SAY_LINE2_MAX 64

static int journal;

void sv_say_init(void)
{
    const char *v = getenv("JOURNAL_STREAM");
    unsigned long long dev, ino;
    char end;
    struct stat st;
    journal = v && sscanf(v, "%llu:%llu%c", &dev, &ino, &end) == 2 &&
              fstat(STDERR_FILENO, &st) == 0 && (unsigned long long)st.st_dev == dev &&
              (unsigned long long)st.st_ino == ino;
}

int sv_say_journal(void)
{
    return journal;
}

/* The message, escaped (sf_escape: a path or name in it may hold a
 * newline or a terminal's escape), then line2, servd's own, if any. */
static void say_v(int prio, const char *line2, const char *fmt, va_list ap)
{
    int saved = errno;
    char msg[SV_SAY_MAX], esc[SV_SAY_MAX];
    char out[2 * SV_SAY_PREFIX + SV_SAY_MAX + SV_SAY_LINE2_MAX]; /* never cut */
    int n = vsnprintf(msg, sizeof msg, fmt, ap);
    if (n < 0) {
        errno = saved;
        return;
    }
    sf_escape(msg, (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1, esc, sizeof esc);
    /* "<N>" before each line under the journal, "servd: " before the first */
    size_t len = 0;
    if (journal)
        len += (size_t)snprintf(out + len, sizeof out - len, "<%d>", prio);
    len += (size_t)snprintf(out + len, sizeof out - len, "servd: %s\n", esc);
    if (line2) {
        if (journal)
            len += (size_t)snprintf(out + len, sizeof out - len, "<%d>", prio);
        len += (size_t)snprintf(out + len, sizeof out - len, "%.*s\n", SV_SAY_LINE2_MAX - 1, line2);
    }
    for (size_t off = 0; off < len;) {
        ssize_t w = write(STDERR_FILENO, out + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    errno = saved;
}

void sv_say(int prio, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    say_v(prio, NULL, fmt, ap);
    va_end(ap);
}

void sv_say_then(int prio, const char *line2, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    say_v(prio, line2, fmt, ap);
    va_end(ap);
}
