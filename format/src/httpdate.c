/* httpdate.c - HTTP-dates, formatted and parsed (see sf/httpdate.h).
 * Integer arithmetic and fixed name tables only: no strftime (locale), no
 * gmtime or timegm (time zone state, not needed for UTC). */
#include "sf/httpdate.h"

#include <string.h>
#include <time.h>

static const char *const day_short[7] = {"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"};
static const char *const day_long[7] = {"Monday", "Tuesday",  "Wednesday", "Thursday",
                                        "Friday", "Saturday", "Sunday"};
static const char month_name[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                       "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

/* Days since 1970-01-01 of a civil date, and back (proleptic Gregorian; H.
 * Hinnant's algorithms, exact for every date these are given). */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    unsigned yoe = (unsigned)(y - era * 400);
    unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (int64_t)doe - 719468;
}

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

/* The Unix seconds of years 0 to 9999, those a date can have. */
#define MIN_T (-62167219200LL) /* 0000-01-01T00:00:00Z */
#define MAX_T 253402300799LL   /* 9999-12-31T23:59:59Z */

/* Unix second t (years 0 to 9999) as a civil date and second of the day.
 * @return its day since 1970-01-01. */
static int64_t civil_of(int64_t t, int64_t *y, unsigned *m, unsigned *d, int64_t *secs)
{
    int64_t days = t >= 0 ? t / 86400 : -((-t + 86399) / 86400);
    civil_from_days(days, y, m, d);
    *secs = t - days * 86400;
    return days;
}

/* Writes v as exactly k decimal digits (v < 10^k). */
static void put_digits(char *p, unsigned v, int k)
{
    for (int i = k - 1; i >= 0; i--, v /= 10)
        p[i] = (char)('0' + v % 10);
}

int sf_http_date_format(int64_t t, char out[SF_HTTP_DATE_LEN + 1])
{
    int clamped = t < MIN_T || t > MAX_T;
    if (t < MIN_T)
        t = MIN_T;
    if (t > MAX_T)
        t = MAX_T;
    int64_t y, secs;
    unsigned m, d;
    int64_t days = civil_of(t, &y, &m, &d, &secs);
    int64_t wd = (days % 7 + 7 + 3) % 7; /* 1970-01-01 was a Thursday, day_short[3] */
    char *o = out;
    memcpy(o, day_short[wd], 3);
    o[3] = ',';
    o[4] = ' ';
    put_digits(o + 5, d, 2);
    o[7] = ' ';
    memcpy(o + 8, month_name[m - 1], 3);
    o[11] = ' ';
    put_digits(o + 12, (unsigned)y, 4);
    o[16] = ' ';
    put_digits(o + 17, (unsigned)(secs / 3600), 2);
    o[19] = ':';
    put_digits(o + 20, (unsigned)(secs / 60 % 60), 2);
    o[22] = ':';
    put_digits(o + 23, (unsigned)(secs % 60), 2);
    memcpy(o + 25, " GMT", 5); /* with the NUL */
    return clamped ? -1 : 0;
}

/* A cursor over the date string; every reader checks the bounds. */
typedef struct {
    const char *s;
    size_t n, i;
} cur;

static int lit(cur *c, const char *w)
{
    size_t l = strlen(w);
    if (c->n - c->i < l || memcmp(c->s + c->i, w, l) != 0)
        return 0;
    c->i += l;
    return 1;
}

/* Exactly k digits. */
static int digits(cur *c, int k, int *out)
{
    int v = 0;
    if (c->n - c->i < (size_t)k)
        return 0;
    for (int j = 0; j < k; j++) {
        char ch = c->s[c->i + j];
        if (ch < '0' || ch > '9')
            return 0;
        v = v * 10 + (ch - '0');
    }
    c->i += (size_t)k;
    *out = v;
    return 1;
}

static int month_of(cur *c, int *m)
{
    for (int j = 0; j < 12; j++)
        if (lit(c, month_name[j])) {
            *m = j + 1;
            return 1;
        }
    return 0;
}

static int day_name(cur *c, const char *const *names)
{
    for (int j = 0; j < 7; j++)
        if (lit(c, names[j]))
            return 1;
    return 0;
}

/* time-of-day = hour ":" minute ":" second (second 60 = a leap second). */
static int time_of_day(cur *c, int *h, int *mi, int *s)
{
    return digits(c, 2, h) && lit(c, ":") && digits(c, 2, mi) && lit(c, ":") && digits(c, 2, s) &&
           *h <= 23 && *mi <= 59 && *s <= 60;
}

static int valid_day(int y, int m, int d)
{
    static const int mdays[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return d >= 1 && d <= mdays[m - 1] + (m == 2 && leap);
}

int sf_http_rfc850_year(int yy, int now)
{
    int y = now - now % 100 + yy;
    if (y > now + 50)
        y -= 100;
    else if (y <= now - 50)
        y += 100;
    return y;
}

/* The parse; now: the current time, or NULL to read the clock (only an
 * rfc850-date needs it). */
static int parse(const char *s, size_t n, const int64_t *now, int64_t *t)
{
    cur c = {s, n, 0};
    int y, m, d, h, mi, sec, rfc850 = 0;

    if (day_name(&c, day_short) && lit(&c, ", ")) {
        /* IMF-fixdate */
        if (!(digits(&c, 2, &d) && lit(&c, " ") && month_of(&c, &m) && lit(&c, " ") &&
              digits(&c, 4, &y) && lit(&c, " ") && time_of_day(&c, &h, &mi, &sec) &&
              lit(&c, " GMT")))
            return -1;
    } else if ((c.i = 0, day_name(&c, day_long)) && lit(&c, ", ")) {
        /* rfc850-date */
        if (!(digits(&c, 2, &d) && lit(&c, "-") && month_of(&c, &m) && lit(&c, "-") &&
              digits(&c, 2, &y) && lit(&c, " ") && time_of_day(&c, &h, &mi, &sec) &&
              lit(&c, " GMT")))
            return -1;
        rfc850 = 1;
    } else if ((c.i = 0, day_name(&c, day_short)) && lit(&c, " ")) {
        /* asctime-date: day = 2DIGIT / ( SP DIGIT ) */
        if (!(month_of(&c, &m) && lit(&c, " ")))
            return -1;
        if (lit(&c, " ")) {
            if (!digits(&c, 1, &d))
                return -1;
        } else if (!digits(&c, 2, &d)) {
            return -1;
        }
        if (!(lit(&c, " ") && time_of_day(&c, &h, &mi, &sec) && lit(&c, " ") && digits(&c, 4, &y)))
            return -1;
    } else {
        return -1;
    }
    int64_t ny = 1970, nsecs = 0;
    unsigned nm = 1, nd = 1;
    if (rfc850) {
        /* (checked before civil_of, whose negation overflows near
         * INT64_MIN) */
        const int64_t at = now ? *now : (int64_t)time(NULL);
        if (at < MIN_T || at > MAX_T)
            return -1;
        civil_of(at, &ny, &nm, &nd, &nsecs);
        y = sf_http_rfc850_year(y, (int)ny);
    }
    if (c.i != c.n)
        return -1;
    const int64_t tod = h * 3600 + mi * 60 + sec;
    /* RFC 9110 §5.6.7: "a timestamp that appears to be more than 50 years
     * in the future" is the most recent past year with its digits. The year
     * alone cannot tell that in the 50th year ahead: 31-Dec-76, read in
     * December 2026, is more than 50 years ahead as 2076. Compared before
     * the day is checked, so that 29-Feb-00 read in 2050 is 2000-02-29, not
     * a 2100-02-29 that does not exist. (A 29 February of the 50th year
     * ahead of a leap day counts as 1 March.) */
    if (rfc850 && days_from_civil(y, (unsigned)m, (unsigned)d) * 86400 + tod >
                      days_from_civil(ny + 50, nm, nd) * 86400 + nsecs)
        y -= 100;
    /* (an rfc850-date read in the years 0-49 or 9950-9999 can name a year
     * outside 0-9999, which no other form can) */
    if (y < 0 || y > 9999 || !valid_day(y, m, d))
        return -1;
    *t = days_from_civil(y, (unsigned)m, (unsigned)d) * 86400 + tod;
    return 0;
}

int sf_http_date_parse(const char *s, size_t n, int64_t *t)
{
    return parse(s, n, NULL, t);
}

int sf_http_date_parse_at(const char *s, size_t n, int64_t now, int64_t *t)
{
    return parse(s, n, &now, t);
}

int sf_http_date_sendable(const char *s, size_t n)
{
    int64_t t;
    char again[SF_HTTP_DATE_LEN + 1];
    if (n != SF_HTTP_DATE_LEN || s[3] != ',' || sf_http_date_parse(s, n, &t) != 0)
        return 0;
    /* The formatter writes the day name of the date; compare the date part
     * (a leap second, :60, counts as the next second: step back one). */
    sf_http_date_format(t - (memcmp(s + 23, "60", 2) == 0), again);
    return memcmp(s, again, 16) == 0;
}
