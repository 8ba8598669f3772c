/* Validators (servd/cond.c, servd/date.c): entity-tag lists, the Date
 * lines, If-Range. RFC 9110 §8.8, §13.1, §6.6.1. The HTTP-date parser and
 * formatter are tested in format_httpdate.c. */
#include "runner.h"
#include "http.h"

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
    ASSERT_EQ(sv_etag_match(V("*"), V(ETAG), 0), 2);
    ASSERT_EQ(sv_etag_match(V(" * "), V(ETAG), 0), 2);
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
    ASSERT_EQ(sv_etag_match(V("*"), V(ETAG), 1), 2);
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
    /* an exact match of the Last-Modified line (§13.1.5), not the same
     * second in another form, with another day name or in another case */
    ASSERT_EQ(sv_if_range(V(" Sun, 06 Nov 1994 08:49:37 GMT "), V(ETAG), lm), 1);
    ASSERT_EQ(sv_if_range(V("Mon, 06 Nov 1994 08:49:37 GMT"), V(ETAG), lm), 0);
    ASSERT_EQ(sv_if_range(V("Sunday, 06-Nov-94 08:49:37 GMT"), V(ETAG), lm), 0);
    ASSERT_EQ(sv_if_range(V("Sun Nov  6 08:49:37 1994"), V(ETAG), lm), 0);
    ASSERT_EQ(sv_if_range(V("Sun, 06 Nov 1994 08:49:37 gmt"), V(ETAG), lm), 0);
    ASSERT_EQ(sv_if_range(V("Sun, 06 Nov 1994 08:49:37 GMT x"), V(ETAG), lm), 0);
    ASSERT_EQ(sv_if_range(V(""), V(ETAG), lm), 0);
}
