/*
 * date.c - the Date line of every response (RFC 9110 §6.6.1, §5.6.7).
 *
 * The runtime calls sv_date_update() at most once a second per loop; every
 * response of that second points at the same three pre-formatted lines,
 * formatted by sf_http_date_format (format/src/httpdate.c).
 */
#include "http.h"

#include <stdio.h>
#include <string.h>

/* Writes "Date: <d>\r\n" + extra + "\r\n" into buf; returns the length. */
static size_t line(char *buf, size_t cap, const char *d, const char *extra)
{
    int n = snprintf(buf, cap, "Date: %s\r\n%s\r\n", d, extra);
    return n > 0 && (size_t)n < cap ? (size_t)n : 0;
}

void sv_date_update(sv_date *dt, int64_t now)
{
    char d[SF_HTTP_DATE_LEN + 1];
    sf_http_date_format(now, d);
    dt->now = now;
    dt->keep_len = line(dt->keep, sizeof dt->keep, d, "");
    dt->close_len = line(dt->close, sizeof dt->close, d, "Connection: close\r\n");
    dt->keep_alive_len =
        line(dt->keep_alive, sizeof dt->keep_alive, d, "Connection: keep-alive\r\n");
}
