/*
 * date.c - the Date line of every response (RFC 9110 §6.6.1, §5.6.7).
 *
 * The runtime calls sv_date_update() at most once a second per loop; every
 * response of that second points at the same three pre-formatted lines.
 * Formatting uses fixed name tables and integer arithmetic only: no
 * strftime (locale), no gmtime (time zone state, not needed for UTC).
 */
#include "http.h"

#include <stdio.h>
#include <string.h>

static const char wkday[7][4] = {"Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"};
static const char month[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                  "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

/* Civil date of a day count since 1970-01-01 (proleptic Gregorian; H.
 * Hinnant's algorithm, exact for every int64 day this can be given). */
static void civil_from_days(int64_t z, int64_t *y, unsigned *m, unsigned *d)
{
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    unsigned doe = (unsigned)(z - era * 146097);
    unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    unsigned mp = (5 * doy + 2) / 153;
    *d = doy - (153 * mp + 2) / 5 + 1;
    *m = mp < 10 ? mp + 3 : mp - 9;
    *y = (int64_t)yoe + era * 400 + (*m <= 2);
}

/* Writes v as exactly k decimal digits (v < 10^k). */
static void put_digits(char *p, unsigned v, int k)
{
    for (int i = k - 1; i >= 0; i--, v /= 10)
        p[i] = (char)('0' + v % 10);
}

/* Formats t as IMF-fixdate. Years outside 0..9999 cannot be written in the
 * fixed four digits: they are clamped (a pack or clock that far off is
 * broken anyway, and the output keeps its length). */
void sv_http_date_format(int64_t t, char out[SV_HTTP_DATE_LEN + 1])
{
    const int64_t min_t = -62167219200LL; /* 0000-01-01T00:00:00Z */
    const int64_t max_t = 253402300799LL; /* 9999-12-31T23:59:59Z */
    if (t < min_t)
        t = min_t;
    if (t > max_t)
        t = max_t;
    int64_t days = t >= 0 ? t / 86400 : -((-t + 86399) / 86400);
    int64_t secs = t - days * 86400;
    int64_t y;
    unsigned m, d;
    civil_from_days(days, &y, &m, &d);
    int64_t wd = days % 7;
    if (wd < 0)
        wd += 7;
    /* "Sun, 06 Nov 1994 08:49:37 GMT" */
    char *o = out;
    memcpy(o, wkday[wd], 3);
    o[3] = ',';
    o[4] = ' ';
    put_digits(o + 5, d, 2);
    o[7] = ' ';
    memcpy(o + 8, month[m - 1], 3);
    o[11] = ' ';
    put_digits(o + 12, (unsigned)y, 4);
    o[16] = ' ';
    put_digits(o + 17, (unsigned)(secs / 3600), 2);
    o[19] = ':';
    put_digits(o + 20, (unsigned)(secs / 60 % 60), 2);
    o[22] = ':';
    put_digits(o + 23, (unsigned)(secs % 60), 2);
    memcpy(o + 25, " GMT", 5); /* with the NUL */
}

/* Writes "Date: <d>\r\n" + extra + "\r\n" into buf; returns the length. */
static size_t line(char *buf, size_t cap, const char *d, const char *extra)
{
    int n = snprintf(buf, cap, "Date: %s\r\n%s\r\n", d, extra);
    return n > 0 && (size_t)n < cap ? (size_t)n : 0;
}

void sv_date_update(sv_date *dt, int64_t now)
{
    char d[SV_HTTP_DATE_LEN + 1];
    sv_http_date_format(now, d);
    dt->now = now;
    dt->keep_len = line(dt->keep, sizeof dt->keep, d, "");
    dt->close_len = line(dt->close, sizeof dt->close, d, "Connection: close\r\n");
    dt->keep_alive_len =
        line(dt->keep_alive, sizeof dt->keep_alive, d, "Connection: keep-alive\r\n");
}
