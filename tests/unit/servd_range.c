/* Range parsing (servd/range.c): RFC 9110 §14.1-§14.2. */
#include "runner.h"
#include "http.h"

static sv_range r[SV_MAX_RANGES];

/* Appends s to the NUL-terminated buf of cap bytes (truncating). */
static void app(char *buf, size_t cap, const char *s)
{
    size_t n = strlen(buf);
    snprintf(buf + n, cap - n, "%s", s);
}

static int parse(const char *s, uint64_t len)
{
    sf_view v = {s, strlen(s)};
    memset(r, 0xee, sizeof r);
    return sv_range_parse(v, len, r, SV_MAX_RANGES);
}

#define RANGE_IS(i, a, b)                                                                          \
    do {                                                                                           \
        ASSERT_EQ(r[i].first, (a));                                                                \
        ASSERT_EQ(r[i].last, (b));                                                                 \
    } while (0)

TEST(range_single_forms)
{
    ASSERT_EQ(parse("bytes=0-99", 1000), 1);
    RANGE_IS(0, 0, 99);
    ASSERT_EQ(parse("bytes=100-", 1000), 1);
    RANGE_IS(0, 100, 999);
    ASSERT_EQ(parse("bytes=-100", 1000), 1);
    RANGE_IS(0, 900, 999);
    ASSERT_EQ(parse("bytes=0-1000", 1000), 1); /* last-pos one past the end: clamped */
    RANGE_IS(0, 0, 999);
    ASSERT_EQ(parse("bytes=10-99999999999999999999999999", 1000), 1); /* saturates */
    RANGE_IS(0, 10, 999);
    ASSERT_EQ(parse("bytes=18446744073709551616-", 1000), -416); /* 2^64: not 0 */
    ASSERT_EQ(parse("bytes=5-5", 10), 1);
    RANGE_IS(0, 5, 5);
    ASSERT_EQ(parse("BYTES=0-0", 10), 1); /* unit is case-insensitive */
    RANGE_IS(0, 0, 0);
}

TEST(range_clamps_to_the_representation)
{
    ASSERT_EQ(parse("bytes=0-99999", 1000), 1);
    RANGE_IS(0, 0, 999);
    ASSERT_EQ(parse("bytes=-5000", 1000), 1);
    RANGE_IS(0, 0, 999);
    ASSERT_EQ(parse("bytes=999-", 1000), 1);
    RANGE_IS(0, 999, 999);
}

TEST(range_huge_numbers)
{
    ASSERT_EQ(parse("bytes=0-99999999999999999999999999999", 1000), 1);
    RANGE_IS(0, 0, 999);
    ASSERT_EQ(parse("bytes=99999999999999999999999999999-", 1000), -416);
    ASSERT_EQ(parse("bytes=-99999999999999999999999999999", 1000), 1);
    RANGE_IS(0, 0, 999);
    ASSERT_EQ(parse("bytes=18446744073709551615-18446744073709551615", 1000), -416);
}

TEST(range_unsatisfiable)
{
    ASSERT_EQ(parse("bytes=1000-", 1000), -416);
    ASSERT_EQ(parse("bytes=1000-2000", 1000), -416);
    ASSERT_EQ(parse("bytes=-0", 1000), -416);
    ASSERT_EQ(parse("bytes=1000-, -0", 1000), -416);
    ASSERT_EQ(parse("bytes=1-1", 1), -416);
    /* one satisfiable spec is enough */
    ASSERT_EQ(parse("bytes=2000-3000, 0-1", 1000), 1);
    RANGE_IS(0, 0, 1);
}

TEST(range_empty_representation)
{
    /* ignored, whatever the set: the empty 200 (slice caches ask 0-N) */
    const char *sets[] = {"bytes=-5", "bytes=0-", "bytes=0-65535", "bytes=-0", "bytes=5-9,-3"};
    for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++)
        ASSERT_EQ(parse(sets[i], 0), 0);
    ASSERT_EQ(parse("bytes=0-", 1), 1); /* one byte: satisfiable */
    ASSERT_EQ(parse("bytes=1-", 1), -416);
}

TEST(range_malformed_is_ignored)
{
    const char *bad[] = {
        "",          "bytes",      "bytes=",     "bytes=,",       "bytes =0-1",    "bytes= 0-1x",
        "items=0-1", "bytes=1-0",  "bytes=a-b",  "bytes=0-1;2-3", "bytes=--1",     "bytes=0--1",
        "bytes=-",   "bytes=0 -1", "bytes=0- 1", "bytes=-1-2",    "bytes=0-1 2-3", "bytes=-0 5-6",
        "byte=0-1",  "bytesx=0-1", "bytes=+1-2", "bytes=0x10-"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int n = parse(bad[i], 1000);
        if (n != 0)
            t__fail(__FILE__, __LINE__, "\"%s\" gave %d, wanted 0 (ignored)", bad[i], n);
    }
}

TEST(range_whitespace_and_empty_elements)
{
    ASSERT_EQ(parse("  bytes=0-1 ,  , 5-6  ", 10), 2);
    RANGE_IS(0, 0, 1);
    RANGE_IS(1, 5, 6);
    ASSERT_EQ(parse("bytes=,0-1,", 10), 1);
}

TEST(range_merges_overlaps_and_neighbours)
{
    ASSERT_EQ(parse("bytes=0-4,5-9", 100), 1);
    RANGE_IS(0, 0, 9);
    ASSERT_EQ(parse("bytes=0-10,5-20", 100), 1);
    RANGE_IS(0, 0, 20);
    ASSERT_EQ(parse("bytes=50-60,0-9,20-30", 100), 3); /* request order, §15.3.7.2 */
    RANGE_IS(0, 50, 60);
    RANGE_IS(1, 0, 9);
    RANGE_IS(2, 20, 30);
    ASSERT_EQ(parse("bytes=50-60,0-9,20-30,5-55", 100), 1);
    RANGE_IS(0, 0, 60);
    ASSERT_EQ(parse("bytes=-10,0-5,80-", 100), 2);
    RANGE_IS(0, 80, 99);
    RANGE_IS(1, 0, 5);
    ASSERT_EQ(parse("bytes=0-0,2-2,1-1", 100), 1);
    RANGE_IS(0, 0, 2);
}

/* A range that bridges several kept ranges replaces them with one, and the
 * ranges after them move down: the set stays sorted and disjoint, nothing
 * stale is left at its end. */
TEST(range_merge_of_several_moves_the_rest_down)
{
    ASSERT_EQ(parse("bytes=0-1,4-5,8-9,2-6", 100), 2);
    RANGE_IS(0, 0, 6);
    RANGE_IS(1, 8, 9);
    ASSERT_EQ(parse("bytes=0-1,3-4,6-7,10-11,13-14,2-6", 100), 3);
    RANGE_IS(0, 0, 7);
    RANGE_IS(1, 10, 11);
    RANGE_IS(2, 13, 14);
    /* and a later range still merges with the moved ones */
    ASSERT_EQ(parse("bytes=0-1,3-4,6-7,10-11,13-14,2-6,12-12", 100), 2);
    RANGE_IS(0, 0, 7);
    RANGE_IS(1, 10, 14);
}

TEST(range_count_limit)
{
    char buf[4096] = "bytes=";
    /* exactly SV_MAX_RANGES disjoint ranges */
    for (int i = 0; i < SV_MAX_RANGES; i++) {
        char one[32];
        snprintf(one, sizeof one, "%s%d-%d", i ? "," : "", i * 10, i * 10 + 1);
        app(buf, sizeof buf, one);
    }
    ASSERT_EQ(parse(buf, 100000), SV_MAX_RANGES);
    for (int i = 0; i < SV_MAX_RANGES; i++)
        RANGE_IS(i, (uint64_t)i * 10, (uint64_t)i * 10 + 1);
    app(buf, sizeof buf, ",5000-5001");
    ASSERT_EQ(parse(buf, 100000), 0);
}

TEST(range_thousands_of_overlapping_specs)
{
    static char buf[16384];
    snprintf(buf, sizeof buf, "%s", "bytes=0-");
    for (int i = 0; i < 2000; i++)
        app(buf, sizeof buf, ",1-2");
    ASSERT_EQ(parse(buf, 1000), 1);
    RANGE_IS(0, 0, 999);
    /* the Apache-killer shape: many small overlapping ranges merge to few */
    snprintf(buf, sizeof buf, "%s", "bytes=0-");
    for (int i = 0; i < 1300; i++) {
        char one[16];
        snprintf(one, sizeof one, ",5-%d", i);
        app(buf, sizeof buf, i >= 5 ? one : ",0-1");
    }
    ASSERT_EQ(parse(buf, 100000), 1);
    RANGE_IS(0, 0, 99999);
}

TEST(range_max_argument)
{
    sf_view v = {"bytes=0-1,5-6", 13};
    sv_range one[1];
    ASSERT_EQ(sv_range_parse(v, 100, one, 1), 0);
    ASSERT_EQ(sv_range_parse(v, 100, one, 0), 0);
    sf_view w = {"bytes=0-1,2-6", 13};
    ASSERT_EQ(sv_range_parse(w, 100, one, 1), 1);
    ASSERT_EQ(one[0].last, 6);
}

/* Numbers exact up to UINT64_MAX and saturating past it, at each digit
 * that may overflow (a representation of UINT64_MAX bytes keeps them from
 * being clamped). */
TEST(range_numbers_near_the_limit)
{
    const uint64_t max = UINT64_MAX;
    ASSERT_EQ(parse("bytes=18446744073709551609-18446744073709551610", max), 1);
    RANGE_IS(0, 18446744073709551609ull, 18446744073709551610ull);
    ASSERT_EQ(parse("bytes=1844674407370955161-18446744073709551614", max), 1);
    RANGE_IS(0, 1844674407370955161ull, 18446744073709551614ull);
    ASSERT_EQ(parse("bytes=18446744073709551613-18446744073709551615", max), 1);
    RANGE_IS(0, 18446744073709551613ull, 18446744073709551614ull); /* clamped */
    ASSERT_EQ(parse("bytes=18446744073709551615-", max), -416);    /* at len */
    ASSERT_EQ(parse("bytes=18446744073709551616-", max), -416);    /* saturated */
    ASSERT_EQ(parse("bytes=18446744073709551620-", max), -416);
    ASSERT_EQ(parse("bytes=0-18446744073709551616, 5-6", max), 1); /* to the end */
    RANGE_IS(0, 0, 18446744073709551614ull);
    ASSERT_EQ(parse("bytes=-18446744073709551614", max), 1);
    RANGE_IS(0, 1, 18446744073709551614ull);
    ASSERT_EQ(parse("bytes=00000000000000000000018446744073709551613-"
                    "18446744073709551613",
                    max),
              1);
    RANGE_IS(0, 18446744073709551613ull, 18446744073709551613ull);
}
