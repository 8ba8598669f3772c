/* Validators (servd/cond.c, servd/date.c): entity-tag lists, HTTP-dates,
 * If-Range. RFC 9110 §8.8, §13.1, §5.6.7. */
#include "runner.h"
#include "http.h"

#include <time.h>

static sf_view V(const char *s)
{
    sf_view v = {s, strlen(s)};
    return v;
}

#define ETAG "\"abc123\""

TEST(cond_etag_strong)
{
    ASSERT_EQ(sv_etag_match(V(ETAG), V(ETAG), 0), 1);
    ASSERT_EQ(sv_etag_match(V("W/" ETAG), V(ETAG), 0), 0);
    ASSERT_EQ(sv_etag_match(V("\"abc12\""), V(ETAG), 0), 0);
    ASSERT_EQ(sv_etag_match(V("\"x\", " ETAG), V(ETAG), 0), 1);
    ASSERT_EQ(sv_etag_match(V("*"), V(ETAG), 0), 1);
    ASSERT_EQ(sv_etag_match(V(" * "), V(ETAG), 0), 1);
    /* a weak tag of ours never matches strongly */
    ASSERT_EQ(sv_etag_match(V("W/" ETAG), V("W/" ETAG), 0), 0);
    ASSERT_EQ(sv_etag_match(V(ETAG), V("W/" ETAG), 0), 0);
}

TEST(cond_etag_weak)
{
    ASSERT_EQ(sv_etag_match(V(ETAG), V(ETAG), 1), 1);
    ASSERT_EQ(sv_etag_match(V("W/" ETAG), V(ETAG), 1), 1);
    ASSERT_EQ(sv_etag_match(V("\"a\",W/" ETAG), V(ETAG), 1), 1);
    ASSERT_EQ(sv_etag_match(V("\"a\" ,\t, W/\"b\" , " ETAG " "), V(ETAG), 1), 1);
    ASSERT_EQ(sv_etag_match(V("\"a\", \"b\""), V(ETAG), 1), 0);
    ASSERT_EQ(sv_etag_match(V("*"), V(ETAG), 1), 1);
}

TEST(cond_etag_malformed)
{
    ASSERT_EQ(sv_etag_match(V("abc123"), V(ETAG), 1), -1);   /* unquoted */
    ASSERT_EQ(sv_etag_match(V("\"abc123"), V(ETAG), 1), -1); /* unterminated */
    ASSERT_EQ(sv_etag_match(V("w/" ETAG), V(ETAG), 1), -1);  /* W is case-sensitive */
    ASSERT_EQ(sv_etag_match(V("\"a\" " ETAG), V(ETAG), 1), -1);
    ASSERT_EQ(sv_etag_match(V("\"a b\", " ETAG), V(ETAG), 1), -1);
    ASSERT_EQ(sv_etag_match(V("*, " ETAG), V(ETAG), 1), -1);
    ASSERT_EQ(sv_etag_match(V(""), V(ETAG), 1), 0);
    /* a value that is not a list of tags is reported (-1: it matches
     * nothing), even where one of its tags would match */
    ASSERT_EQ(sv_etag_match(V(ETAG ", junk"), V(ETAG), 1), -1);
    ASSERT_EQ(sv_etag_match(V(ETAG "x"), V(ETAG), 1), -1);
    ASSERT_EQ(sv_etag_match(V(ETAG ", *"), V(ETAG), 1), -1);
    ASSERT_EQ(sv_etag_match(V(ETAG ", \"a"), V(ETAG), 1), -1);
    /* a substring is not a match */
    ASSERT_EQ(sv_etag_match(V("\"xabc123\""), V(ETAG), 1), 0);
    ASSERT_EQ(sv_etag_match(V("\"abc1234\""), V(ETAG), 1), 0);
}

/* Days from 1970-01-01 to y-m-d (timegm, which glibc has). */
static int64_t days_from(int y, int m, int d)
{
    struct tm tm = {.tm_year = y - 1900, .tm_mon = m - 1, .tm_mday = d};
    return (int64_t)timegm(&tm) / 86400;
}

static int this_year(void)
{
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    return tm.tm_year + 1900;
}

static int64_t date(const char *s)
{
    int64_t t = 0;
    if (sv_http_date_parse(V(s), &t) != 0)
        t__fail(__FILE__, __LINE__, "\"%s\" refused", s);
    return t;
}

static void bad_date(const char *s)
{
    int64_t t;
    if (sv_http_date_parse(V(s), &t) == 0)
        t__fail(__FILE__, __LINE__, "\"%s\" accepted as %lld", s, (long long)t);
}

TEST(cond_date_three_forms)
{
    /* RFC 9110 §5.6.7's example, 784111777 */
    ASSERT_EQ(date("Sun, 06 Nov 1994 08:49:37 GMT"), 784111777);
    ASSERT_EQ(date("Sunday, 06-Nov-94 08:49:37 GMT"),
              784111777 + (days_from(sv_http_rfc850_year(94, this_year()), 11, 6) -
                           days_from(1994, 11, 6)) *
                              86400);
    ASSERT_EQ(date("Sun Nov  6 08:49:37 1994"), 784111777);
    ASSERT_EQ(date("Sun Nov 16 08:49:37 1994"), 784111777 + 10 * 86400);
    ASSERT_EQ(date("Thu, 01 Jan 1970 00:00:00 GMT"), 0);
    ASSERT_EQ(date("Wed, 31 Dec 1969 23:59:59 GMT"), -1);
    ASSERT_EQ(date("Tue, 29 Feb 2000 12:00:00 GMT"), 951825600);
    ASSERT_EQ(date("Fri, 31 Dec 9999 23:59:59 GMT"), 253402300799LL);
    ASSERT_EQ(date("Thursday, 01-Jan-70 00:00:00 GMT"),
              (int64_t)days_from(sv_http_rfc850_year(70, this_year()), 1, 1) * 86400);
    ASSERT_EQ(date("Saturday, 01-Jan-00 00:00:00 GMT"),
              days_from(sv_http_rfc850_year(0, this_year()), 1, 1) * 86400);
    ASSERT_EQ(date("Sun, 06 Nov 1994 08:49:60 GMT"), 784111777 + 23); /* leap second */
}

TEST(cond_date_rfc850_two_digit_years)
{
    /* RFC 9110 §5.6.7: a year more than 50 years in the future is the most
     * recent past year with those digits. */
    ASSERT_EQ(sv_http_rfc850_year(70, 2026), 2070);
    ASSERT_EQ(sv_http_rfc850_year(76, 2026), 2076);
    ASSERT_EQ(sv_http_rfc850_year(77, 2026), 1977);
    ASSERT_EQ(sv_http_rfc850_year(94, 2026), 1994);
    ASSERT_EQ(sv_http_rfc850_year(0, 2026), 2000);
    ASSERT_EQ(sv_http_rfc850_year(26, 2026), 2026);
    ASSERT_EQ(sv_http_rfc850_year(99, 2048), 1999); /* 51 years ahead */
    ASSERT_EQ(sv_http_rfc850_year(99, 2049), 2099); /* 50: not more than 50 */
    ASSERT_EQ(sv_http_rfc850_year(10, 2080), 2110);
    ASSERT_EQ(sv_http_rfc850_year(31, 2080), 2031);
    ASSERT_EQ(sv_http_rfc850_year(30, 2080), 2130);
}

TEST(cond_date_invalid)
{
    bad_date("");
    bad_date("Sun, 06 Nov 1994 08:49:37");
    bad_date("Sun, 06 Nov 1994 08:49:37 UTC");
    bad_date("Sun, 06 Nov 1994 08:49:37 gmt");
    bad_date("sun, 06 Nov 1994 08:49:37 GMT");
    bad_date("Sun, 06 nov 1994 08:49:37 GMT");
    bad_date("Sun,  6 Nov 1994 08:49:37 GMT");
    bad_date("Sun, 6 Nov 1994 08:49:37 GMT");
    bad_date("Sun, 06 Nov 94 08:49:37 GMT");
    bad_date("Sun, 06 Nov 1994 8:49:37 GMT");
    bad_date("Sun, 06 Nov 1994 24:00:00 GMT");
    bad_date("Sun, 06 Nov 1994 08:60:00 GMT");
    bad_date("Sun, 06 Nov 1994 08:49:61 GMT");
    bad_date("Sun, 31 Nov 1994 08:49:37 GMT");
    bad_date("Sun, 29 Feb 1900 08:49:37 GMT");
    bad_date("Sun, 00 Nov 1994 08:49:37 GMT");
    bad_date("Sun, 06 Nov 1994 08:49:37 GMT ");
    bad_date("Sun, 06 Nov 1994 08:49:37 GMTX");
    bad_date("Sunday, 06 Nov 1994 08:49:37 GMT");
    bad_date("Sun, 06-Nov-94 08:49:37 GMT");
    bad_date("Sun Nov 6 08:49:37 1994");
    bad_date("Sun Nov  6 08:49:37 94");
    bad_date("1994-11-06T08:49:37Z");
    bad_date("784111777");
    bad_date("Xyz, 06 Nov 1994 08:49:37 GMT");
}

TEST(cond_date_format)
{
    char b[SV_HTTP_DATE_LEN + 1];
    sv_http_date_format(784111777, b);
    ASSERT_STR_EQ(b, "Sun, 06 Nov 1994 08:49:37 GMT");
    sv_http_date_format(0, b);
    ASSERT_STR_EQ(b, "Thu, 01 Jan 1970 00:00:00 GMT");
    sv_http_date_format(951825600, b);
    ASSERT_STR_EQ(b, "Tue, 29 Feb 2000 12:00:00 GMT");
    sv_http_date_format(-1, b);
    ASSERT_STR_EQ(b, "Wed, 31 Dec 1969 23:59:59 GMT");
    sv_http_date_format(4102444800LL, b);
    ASSERT_STR_EQ(b, "Fri, 01 Jan 2100 00:00:00 GMT");
    sv_http_date_format(INT64_MAX, b);
    ASSERT_STR_EQ(b, "Fri, 31 Dec 9999 23:59:59 GMT");
    /* the formatter and the parser agree over many days */
    for (int64_t t = -86400LL * 400; t < 86400LL * 365 * 200; t += 86400 * 7 + 3671) {
        sv_http_date_format(t, b);
        ASSERT_EQ(date(b), t);
    }
}

TEST(cond_date_lines)
{
    sv_date d;
    sv_date_update(&d, 784111777);
    ASSERT_EQ(d.now, 784111777);
    ASSERT_MEM_EQ(d.keep, d.keep_len, "Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n\r\n", 39);
    ASSERT_MEM_EQ(d.close, d.close_len,
                  "Date: Sun, 06 Nov 1994 08:49:37 GMT\r\nConnection: close\r\n\r\n", 58);
    ASSERT_MEM_EQ(d.keep_alive, d.keep_alive_len,
                  "Date: Sun, 06 Nov 1994 08:49:37 GMT\r\nConnection: keep-alive\r\n\r\n", 63);
}

TEST(cond_if_range)
{
    int64_t lm = 784111777;
    ASSERT_EQ(sv_if_range(V(ETAG), V(ETAG), lm), 1);
    ASSERT_EQ(sv_if_range(V(" " ETAG " "), V(ETAG), lm), 1);
    ASSERT_EQ(sv_if_range(V("W/" ETAG), V(ETAG), lm), 0); /* weak never matches */
    ASSERT_EQ(sv_if_range(V("\"other\""), V(ETAG), lm), 0);
    ASSERT_EQ(sv_if_range(V(ETAG ", " ETAG), V(ETAG), lm), 0); /* not a list */
    ASSERT_EQ(sv_if_range(V("*"), V(ETAG), lm), 0);
    ASSERT_EQ(sv_if_range(V("Sun, 06 Nov 1994 08:49:37 GMT"), V(ETAG), lm), 1);
    ASSERT_EQ(sv_if_range(V("Sun, 06 Nov 1994 08:49:38 GMT"), V(ETAG), lm), 0);
    /* no date is a strong validator: only the entity-tag can match */
    ASSERT_EQ(sv_if_range(V("Sun, 06 Nov 1994 08:49:37 GMT"), V(ETAG), SV_NO_DATE), 0);
    ASSERT_EQ(sv_if_range(V(ETAG), V(ETAG), SV_NO_DATE), 1);
    ASSERT_EQ(sv_if_range(V("Sun, 06 Nov 1994 08:49:36 GMT"), V(ETAG), lm), 0);
    ASSERT_EQ(sv_if_range(V("Wed, 09 Nov 1994 08:49:37 GMT"), V(ETAG), lm + 3 * 86400), 1);
    ASSERT_EQ(sv_if_range(V("garbage"), V(ETAG), lm), 0);
    ASSERT_EQ(sv_if_range(V(""), V(ETAG), lm), 0);
}
