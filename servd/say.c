/*
 * say.c - see say.h.
 */
#include "say.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Room a line needs beyond its text: "<N>", "servd: " and the newline. */
#define SV_SAY_PREFIX 16

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

void sv_say(int prio, const char *fmt, ...)
{
    int saved = errno;
    char msg[SV_SAY_MAX], out[SV_SAY_MAX + 4 * SV_SAY_PREFIX];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (n < 0) {
        errno = saved;
        return;
    }
    size_t mlen = (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1;
    /* "<N>" before each line under the journal, "servd: " before the
     * first; a message of many short lines is cut rather than overrun */
    size_t len = (size_t)snprintf(out, sizeof out, journal ? "<%d>servd: " : "servd: ", prio);
    for (size_t i = 0; i < mlen && len + SV_SAY_PREFIX < sizeof out; i++) {
        out[len++] = msg[i];
        if (msg[i] == '\n' && journal)
            len += (size_t)snprintf(out + len, sizeof out - len, "<%d>", prio);
    }
    out[len++] = '\n';
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
