/*
 * cond.c - the validators of conditional requests (RFC 9110 §8.8, §13.1):
 * entity-tag lists (If-Match, If-None-Match, If-Range) and HTTP-dates
 * (If-Modified-Since, If-Unmodified-Since, If-Range).
 *
 * The responder (respond.c) decides the order of evaluation (§13.2.2);
 * these functions only answer "does this field value match".
 */
#include "http.h"

#include <string.h>
#include <time.h>

static int is_ows(char c)
{
    return c == ' ' || c == '\t';
}

/* An entity-tag (RFC 9110 §8.8.3):
 *   entity-tag = [ weak ] opaque-tag      weak = %s"W/"
 *   opaque-tag = DQUOTE *etagc DQUOTE     etagc = %x21 / %x23-7E / obs-text
 * Parses one at s[*i, n); on success sets *weak, the opaque-tag view
 * (quotes included) and advances *i. @return 0, or -1 when malformed. */
static int parse_etag(const char *s, size_t n, size_t *i, int *weak, sf_view *opaque)
{
    size_t p = *i;
    *weak = 0;
    if (n - p >= 2 && s[p] == 'W' && s[p + 1] == '/') {
        *weak = 1;
        p += 2;
    }
    if (p >= n || s[p] != '"')
        return -1;
    size_t start = p++;
    for (;;) {
        if (p >= n)
            return -1;
        unsigned char c = (unsigned char)s[p];
        if (c == '"')
            break;
        if (c < 0x21 || c == 0x7f)
            return -1;
        p++;
    }
    p++;
    opaque->ptr = s + start;
    opaque->len = p - start;
    *i = p;
    return 0;
}

/* Compares against an If-Match / If-None-Match value:
 *   If-Match = "*" / #entity-tag       (RFC 9110 §13.1.1, §13.1.2)
 * List elements are separated by commas with optional whitespace; empty
 * elements are skipped (§5.6.1.2). A value that is not such a list (a
 * malformed tag anywhere, "*" among tags, two tags without a comma) is
 * reported as -1 and matches nothing: If-None-Match then gets the 200 and
 * If-Match a 412, the answers that cannot hand out bytes the client did not
 * name. The strong comparison needs both tags strong and equal; the weak
 * one ignores the W/ prefixes. */
int sv_etag_match(sf_view list, sf_view etag, int weak)
{
    const char *s = list.ptr;
    size_t n = list.len;
    size_t i = 0;

    /* Trim, then "*" alone matches any current representation. */
    while (n > 0 && is_ows(s[n - 1]))
        n--;
    while (i < n && is_ows(s[i]))
        i++;
    if (n - i == 1 && s[i] == '*')
        return 1;

    int our_weak;
    sf_view ours;
    size_t j = 0;
    if (parse_etag(etag.ptr, etag.len, &j, &our_weak, &ours) != 0 || j != etag.len)
        return 0;

    int found = 0;
    while (i < n) {
        if (s[i] == ',' || is_ows(s[i])) {
            i++;
            continue;
        }
        int w;
        sf_view tag;
        if (parse_etag(s, n, &i, &w, &tag) != 0)
            return -1;
        if (tag.len == ours.len && memcmp(tag.ptr, ours.ptr, tag.len) == 0 &&
            (weak || (!w && !our_weak)))
            found = 1;
        while (i < n && is_ows(s[i]))
            i++;
        if (i < n && s[i] != ',')
            return -1; /* two tags without a comma, or bytes after a tag */
    }
    return found;
}

/* ---- HTTP-date (RFC 9110 §5.6.7) ---- */

static const char *const day_short[7] = {"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"};
static const char *const day_long[7] = {"Monday", "Tuesday",  "Wednesday", "Thursday",
                                        "Friday", "Saturday", "Sunday"};
static const char month_name[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                       "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

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

/* Days since 1970-01-01 of a civil date (H. Hinnant's algorithm). */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    unsigned yoe = (unsigned)(y - era * 400);
    unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (int64_t)doe - 719468;
}

static int valid_day(int y, int m, int d)
{
    static const int mdays[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return d >= 1 && d <= mdays[m - 1] + (m == 2 && leap);
}

int sv_http_rfc850_year(int yy, int now)
{
    int y = now - now % 100 + yy;
    if (y > now + 50)
        y -= 100;
    else if (y <= now - 50)
        y += 100;
    return y;
}

/* The current year, for rfc850-dates only (rare: no cache). */
static int this_year(void)
{
    time_t now = time(NULL);
    struct tm tm;
    return gmtime_r(&now, &tm) ? tm.tm_year + 1900 : 1970;
}

/* Accepts exactly the three forms of RFC 9110 §5.6.7 (case-sensitive, as
 * the grammar's %s strings are):
 *   IMF-fixdate  "Sun, 06 Nov 1994 08:49:37 GMT"
 *   rfc850-date  "Sunday, 06-Nov-94 08:49:37 GMT"
 *   asctime-date "Sun Nov  6 08:49:37 1994"
 * The day name is checked for syntax, not against the date (the RFC asks
 * recipients to be lenient only there). Two-digit rfc850 years are read
 * as at most 50 years ahead of the current year (sv_http_rfc850_year). */
int sv_http_date_parse(sf_view v, int64_t *t)
{
    cur c = {v.ptr, v.len, 0};
    int y, m, d, h, mi, s;

    if (day_name(&c, day_short) && lit(&c, ", ")) {
        /* IMF-fixdate */
        if (!(digits(&c, 2, &d) && lit(&c, " ") && month_of(&c, &m) && lit(&c, " ") &&
              digits(&c, 4, &y) && lit(&c, " ") && time_of_day(&c, &h, &mi, &s) && lit(&c, " GMT")))
            return -1;
    } else if ((c.i = 0, day_name(&c, day_long)) && lit(&c, ", ")) {
        /* rfc850-date */
        if (!(digits(&c, 2, &d) && lit(&c, "-") && month_of(&c, &m) && lit(&c, "-") &&
              digits(&c, 2, &y) && lit(&c, " ") && time_of_day(&c, &h, &mi, &s) && lit(&c, " GMT")))
            return -1;
        y = sv_http_rfc850_year(y, this_year());
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
        if (!(lit(&c, " ") && time_of_day(&c, &h, &mi, &s) && lit(&c, " ") && digits(&c, 4, &y)))
            return -1;
    } else {
        return -1;
    }
    if (c.i != c.n || !valid_day(y, m, d))
        return -1;
    *t = days_from_civil(y, (unsigned)m, (unsigned)d) * 86400 + h * 3600 + mi * 60 + s;
    return 0;
}

/* If-Range = entity-tag / HTTP-date (RFC 9110 §13.1.5). */
int sv_if_range(sf_view value, sf_view etag, int64_t last_modified)
{
    const char *s = value.ptr;
    size_t n = value.len, i = 0;
    while (n > 0 && is_ows(s[n - 1]))
        n--;
    while (i < n && is_ows(s[i]))
        i++;
    if (i < n && (s[i] == '"' || (n - i >= 2 && s[i] == 'W' && s[i + 1] == '/'))) {
        int w, ew;
        sf_view tag, ours;
        size_t j = 0;
        if (parse_etag(s, n, &i, &w, &tag) != 0 || i != n || w)
            return 0;
        if (parse_etag(etag.ptr, etag.len, &j, &ew, &ours) != 0 || j != etag.len || ew)
            return 0;
        return tag.len == ours.len && memcmp(tag.ptr, ours.ptr, tag.len) == 0;
    }
    sf_view d = {s + i, n - i};
    int64_t t;
    return last_modified != SV_NO_DATE && sv_http_date_parse(d, &t) == 0 && t == last_modified;
}
