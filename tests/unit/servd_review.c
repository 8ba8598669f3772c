/*
 * Findings of the RFC 9110 / 9112 review of servd's HTTP layer: each test
 * pins one rule the parser (http1.c), range parser (range.c) or responder
 * (respond.c) got wrong before, citing the section it follows.
 */
#include "runner.h"
#include "http.h"

static sv_range rr[SV_MAX_RANGES];

static int ranges(const char *s, uint64_t len)
{
    sf_view v = {s, strlen(s)};
    memset(rr, 0xee, sizeof rr);
    return sv_range_parse(v, len, rr, SV_MAX_RANGES);
}

#define RR_IS(i, a, b)                                                                             \
    do {                                                                                           \
        ASSERT_EQ(rr[i].first, (a));                                                               \
        ASSERT_EQ(rr[i].last, (b));                                                                \
    } while (0)

/* RFC 9110 §15.3.7.2: the parts of a multipart/byteranges response SHOULD
 * come in the order of the range-specs, "excluding those ranges that were
 * deemed unsatisfiable or that were coalesced into other ranges". A merged
 * range takes the place of the first spec it absorbed. */
TEST(review_ranges_keep_request_order)
{
    ASSERT_EQ(ranges("bytes=50-59,0-9", 100), 2);
    RR_IS(0, 50, 59);
    RR_IS(1, 0, 9);
    ASSERT_EQ(ranges("bytes=50-60,0-9,20-30", 100), 3);
    RR_IS(0, 50, 60);
    RR_IS(1, 0, 9);
    RR_IS(2, 20, 30);
    /* -10 and 80- merge into 80-99, which stays first */
    ASSERT_EQ(ranges("bytes=-10,0-5,80-", 100), 2);
    RR_IS(0, 80, 99);
    RR_IS(1, 0, 5);
    /* a later spec that bridges two earlier ones: the merge sits where the
     * earliest of them was */
    ASSERT_EQ(ranges("bytes=70-79,40-49,0-9,45-75", 100), 2);
    RR_IS(0, 40, 79);
    RR_IS(1, 0, 9);
    /* unsatisfiable specs are skipped */
    ASSERT_EQ(ranges("bytes=500-,30-39,-0,10-19", 100), 2);
    RR_IS(0, 30, 39);
    RR_IS(1, 10, 19);
}
