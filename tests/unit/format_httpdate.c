/* HTTP-dates (format/src/httpdate.c): the three forms a recipient parses,
 * the IMF-fixdate servd and servd-pack write, and the check of the dates a
 * rules file may send. RFC 9110 §5.6.7, RFC 5322 §3.3. */
#include "runner.h"
#include "sf/httpdate.h"

#include <time.h>

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
    if (sf_http_date_parse(s, strlen(s), &t) != 0)
        t__fail(__FILE__, __LINE__, "\"%s\" refused", s);
    return t;
}

static void bad_date(const char *s)
{
    int64_t t;
    if (sf_http_date_parse(s, strlen(s), &t) == 0)
        t__fail(__FILE__, __LINE__, "\"%s\" accepted as %lld", s, (long long)t);
}

TEST(httpdate_three_forms)
{
    /* RFC 9110 §5.6.7's example, 784111777 */
    ASSERT_EQ(date("Sun, 06 Nov 1994 08:49:37 GMT"), 784111777);
    ASSERT_EQ(date("Sunday, 06-Nov-94 08:49:37 GMT"),
              784111777 + (days_from(sf_http_rfc850_year(94, this_year()), 11, 6) -
                           days_from(1994, 11, 6)) *
                              86400);
    ASSERT_EQ(date("Sun Nov  6 08:49:37 1994"), 784111777);
    ASSERT_EQ(date("Sun Nov 16 08:49:37 1994"), 784111777 + 10 * 86400);
    ASSERT_EQ(date("Thu, 01 Jan 1970 00:00:00 GMT"), 0);
    ASSERT_EQ(date("Wed, 31 Dec 1969 23:59:59 GMT"), -1);
    ASSERT_EQ(date("Tue, 29 Feb 2000 12:00:00 GMT"), 951825600);
    ASSERT_EQ(date("Fri, 31 Dec 9999 23:59:59 GMT"), 253402300799LL);
    ASSERT_EQ(date("Thursday, 01-Jan-70 00:00:00 GMT"),
              (int64_t)days_from(sf_http_rfc850_year(70, this_year()), 1, 1) * 86400);
    ASSERT_EQ(date("Saturday, 01-Jan-00 00:00:00 GMT"),
              days_from(sf_http_rfc850_year(0, this_year()), 1, 1) * 86400);
    ASSERT_EQ(date("Sun, 06 Nov 1994 08:49:60 GMT"), 784111777 + 23); /* leap second */
}

TEST(httpdate_rfc850_two_digit_years)
{
    /* RFC 9110 §5.6.7: a year more than 50 years in the future is the most
     * recent past year with those digits. */
    ASSERT_EQ(sf_http_rfc850_year(70, 2026), 2070);
    ASSERT_EQ(sf_http_rfc850_year(76, 2026), 2076);
    ASSERT_EQ(sf_http_rfc850_year(77, 2026), 1977);
    ASSERT_EQ(sf_http_rfc850_year(94, 2026), 1994);
    ASSERT_EQ(sf_http_rfc850_year(0, 2026), 2000);
    ASSERT_EQ(sf_http_rfc850_year(26, 2026), 2026);
    ASSERT_EQ(sf_http_rfc850_year(99, 2048), 1999); /* 51 years ahead */
    ASSERT_EQ(sf_http_rfc850_year(99, 2049), 2099); /* 50: not more than 50 */
    ASSERT_EQ(sf_http_rfc850_year(10, 2080), 2110);
    ASSERT_EQ(sf_http_rfc850_year(31, 2080), 2031);
    ASSERT_EQ(sf_http_rfc850_year(30, 2080), 2130);
}

/* In the 50th year ahead the year alone does not tell "more than 50 years
 * in the future" (RFC 9110 §5.6.7): the timestamp does. Read at
 * 2026-12-07 12:00:00, 31-Dec-76 is 2076-12-31, more than 50 years ahead,
 * so 1976; 07-Dec-76 11:59:59 is not, so 2076; 12:00:01 is, so 1976. */
TEST(httpdate_rfc850_fifty_years_by_date)
{
    const int64_t now = days_from(2026, 12, 7) * 86400 + 12 * 3600;
    int64_t t;
#define AT(s) (sf_http_date_parse_at(s, strlen(s), now, &t) == 0 ? t : INT64_MIN)
    ASSERT_EQ(AT("Friday, 31-Dec-76 23:59:59 GMT"), days_from(1976, 12, 31) * 86400 + 86399);
    ASSERT_EQ(AT("Monday, 07-Dec-76 11:59:59 GMT"), days_from(2076, 12, 7) * 86400 + 43199);
    ASSERT_EQ(AT("Monday, 07-Dec-76 12:00:00 GMT"), days_from(2076, 12, 7) * 86400 + 43200);
    ASSERT_EQ(AT("Monday, 07-Dec-76 12:00:01 GMT"), days_from(1976, 12, 7) * 86400 + 43201);
    ASSERT_EQ(AT("Friday, 01-Jan-76 00:00:00 GMT"), days_from(2076, 1, 1) * 86400);
    ASSERT_EQ(AT("Friday, 01-Jan-77 00:00:00 GMT"), days_from(1977, 1, 1) * 86400);
    ASSERT_EQ(AT("Monday, 07-Dec-26 12:00:00 GMT"), now);
    /* read in February 2050, 29-Feb-00 is more than 50 years ahead as
     * 2100-02-29, a day that does not exist: 2000-02-29 */
    const int64_t feb2050 = days_from(2050, 2, 1) * 86400;
    ASSERT_EQ(sf_http_date_parse_at("Tuesday, 29-Feb-00 12:00:00 GMT", 31, feb2050, &t), 0);
    ASSERT_EQ(t, days_from(2000, 2, 29) * 86400 + 43200);
    /* the other forms do not depend on now */
    ASSERT_EQ(AT("Thu, 31 Dec 2076 23:59:59 GMT"), days_from(2076, 12, 31) * 86400 + 86399);
#undef AT
}

/* An rfc850-date read at a time outside years 0 to 9999 is refused, however
 * far outside: at INT64_MIN the day count of now was a negation that
 * overflows (undefined behaviour, -fsanitize=undefined stops there). */
TEST(httpdate_rfc850_now_out_of_range)
{
    static const char d[] = "Friday, 31-Dec-76 23:59:59 GMT";
    const int64_t min_t = days_from(0, 1, 1) * 86400, max_t = days_from(10000, 1, 1) * 86400 - 1;
    const int64_t bad[] = {INT64_MIN, INT64_MIN + 1, INT64_MIN + 86399,
                           min_t - 1, max_t + 1,     INT64_MAX};
    int64_t t;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ASSERT_EQ(sf_http_date_parse_at(d, sizeof d - 1, bad[i], &t), -1);
    ASSERT_EQ(sf_http_date_parse_at(d, sizeof d - 1, max_t, &t), 0);
    ASSERT_EQ(t, days_from(9976, 12, 31) * 86400 + 86399);
    /* nor does it name a year outside 0-9999: 49 read at the end of 9999 is
     * 10049, 76 read in the year 0 is -24 */
    ASSERT_EQ(sf_http_date_parse_at("Friday, 31-Dec-49 00:00:00 GMT", 30, max_t, &t), -1);
    ASSERT_EQ(sf_http_date_parse_at(d, sizeof d - 1, min_t, &t), -1);
    ASSERT_EQ(sf_http_date_parse_at("Friday, 01-Jan-49 00:00:00 GMT", 30, min_t, &t), 0);
    ASSERT_EQ(t, days_from(49, 1, 1) * 86400);
    /* the other forms do not read now at all */
    ASSERT_EQ(sf_http_date_parse_at("Thu, 31 Dec 2076 23:59:59 GMT", 29, INT64_MIN, &t), 0);
}

TEST(httpdate_invalid)
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
    /* asctime-date: the month, then one SP, then 2DIGIT or SP DIGIT */
    bad_date("Sun Nvm  6 08:49:37 1994");
    bad_date("Sun Nov06 08:49:37 1994");
    bad_date("Sun Nov   6 08:49:37 1994");
    bad_date("Sun Nov  x 08:49:37 1994");
    bad_date("1994-11-06T08:49:37Z");
    bad_date("784111777");
    bad_date("Xyz, 06 Nov 1994 08:49:37 GMT");
}

TEST(httpdate_format)
{
    char b[SF_HTTP_DATE_LEN + 1];
    ASSERT_EQ(sf_http_date_format(784111777, b), 0);
    ASSERT_STR_EQ(b, "Sun, 06 Nov 1994 08:49:37 GMT");
    ASSERT_EQ(sf_http_date_format(0, b), 0);
    ASSERT_STR_EQ(b, "Thu, 01 Jan 1970 00:00:00 GMT");
    sf_http_date_format(951825600, b);
    ASSERT_STR_EQ(b, "Tue, 29 Feb 2000 12:00:00 GMT");
    sf_http_date_format(-1, b);
    ASSERT_STR_EQ(b, "Wed, 31 Dec 1969 23:59:59 GMT");
    sf_http_date_format(4102444800LL, b);
    ASSERT_STR_EQ(b, "Fri, 01 Jan 2100 00:00:00 GMT");
    ASSERT_EQ(sf_http_date_format(253402300799LL, b), 0);
    ASSERT_STR_EQ(b, "Fri, 31 Dec 9999 23:59:59 GMT");
    ASSERT_EQ(sf_http_date_format(-62167219200LL, b), 0);
    ASSERT_STR_EQ(b, "Sat, 01 Jan 0000 00:00:00 GMT");
    /* four digits cannot write the year: clamped, and reported */
    ASSERT_EQ(sf_http_date_format(253402300800LL, b), -1);
    ASSERT_STR_EQ(b, "Fri, 31 Dec 9999 23:59:59 GMT");
    ASSERT_EQ(sf_http_date_format(INT64_MAX, b), -1);
    ASSERT_STR_EQ(b, "Fri, 31 Dec 9999 23:59:59 GMT");
    ASSERT_EQ(sf_http_date_format(-62167219201LL, b), -1);
    ASSERT_STR_EQ(b, "Sat, 01 Jan 0000 00:00:00 GMT");
    ASSERT_EQ(sf_http_date_format(INT64_MIN, b), -1);
    ASSERT_STR_EQ(b, "Sat, 01 Jan 0000 00:00:00 GMT");
    /* the formatter and the parser agree over many days */
    for (int64_t t = -86400LL * 400; t < 86400LL * 365 * 200; t += 86400 * 7 + 3671) {
        sf_http_date_format(t, b);
        ASSERT_EQ(date(b), t);
    }
}

static int sendable(const char *s)
{
    return sf_http_date_sendable(s, strlen(s));
}

TEST(httpdate_sendable)
{
    ASSERT_EQ(sendable("Sun, 06 Nov 1994 08:49:37 GMT"), 1);
    ASSERT_EQ(sendable("Thu, 01 Jan 1970 00:00:00 GMT"), 1);
    ASSERT_EQ(sendable("Tue, 29 Feb 2000 12:00:00 GMT"), 1);
    ASSERT_EQ(sendable("Fri, 31 Dec 9999 23:59:59 GMT"), 1);
    ASSERT_EQ(sendable("Sat, 01 Jan 0000 00:00:00 GMT"), 1);
    /* a leap second belongs to the day it ends, also at midnight */
    ASSERT_EQ(sendable("Sat, 31 Dec 2016 23:59:60 GMT"), 1);
    ASSERT_EQ(sendable("Sun, 01 Jan 2017 00:00:60 GMT"), 1);
    ASSERT_EQ(sendable("Sun, 31 Dec 2016 23:59:60 GMT"), 0);
    /* RFC 5322 §3.3: the day name must be the date's */
    ASSERT_EQ(sendable("Mon, 06 Nov 1994 08:49:37 GMT"), 0);
    ASSERT_EQ(sendable("Sat, 06 Nov 1994 08:49:37 GMT"), 0);
    ASSERT_EQ(sendable("Wed, 01 Jan 1970 00:00:00 GMT"), 0);
    /* days that do not exist */
    ASSERT_EQ(sendable("Thu, 31 Apr 2026 08:00:00 GMT"), 0);
    ASSERT_EQ(sendable("Sun, 29 Feb 2026 08:00:00 GMT"), 0);
    ASSERT_EQ(sendable("Thu, 29 Feb 1900 08:00:00 GMT"), 0);
    ASSERT_EQ(sendable("Mon, 00 Nov 1994 08:49:37 GMT"), 0);
    /* only the IMF-fixdate form may be generated (RFC 9110 §5.6.7) */
    ASSERT_EQ(sendable("Sunday, 06-Nov-94 08:49:37 GMT"), 0);
    ASSERT_EQ(sendable("Sun Nov  6 08:49:37 1994"), 0);
    ASSERT_EQ(sendable("Sun, 06 Nov 1994 08:49:37 GMT "), 0);
    ASSERT_EQ(sendable("Sun, 06 Nov 1994 08:49:37"), 0);
    ASSERT_EQ(sendable("Sun, 06 Nov 1994 24:00:00 GMT"), 0);
    ASSERT_EQ(sendable(""), 0);
    /* every day of four centuries round-trips, and its neighbours' names do not */
    char b[SF_HTTP_DATE_LEN + 1];
    for (int64_t t = -86400LL * 365 * 100; t < 86400LL * 365 * 300; t += 86400 + 37) {
        sf_http_date_format(t, b);
        ASSERT_EQ(sendable(b), 1);
        static const char names[] = "MonTueWedThuFriSatSun";
        const char *at = strstr(names, (char[4]){b[0], b[1], b[2], 0});
        memcpy(b, names + ((at - names) / 3 + 1) % 7 * 3, 3);
        ASSERT_EQ(sendable(b), 0);
    }
}
