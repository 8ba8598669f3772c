/*
 * Findings of the RFC 9110 / 9112 review of servd's HTTP layer: each test
 * pins one rule the parser (http1.c), range parser (range.c) or responder
 * (respond.c) got wrong before, citing the section it follows.
 */
#include "runner.h"
#include "http.h"

static sv_request req;

static int parse(const char *s)
{
    return sv_http1_parse(s, strlen(s), &req);
}

/* RFC 9112 §3.2.3: authority-form is the request-target of CONNECT. servd
 * does not tunnel, so a well-formed CONNECT is a known method it does not
 * allow (405 with Allow, RFC 9110 §15.5.6), not a malformed request (400). */
TEST(review_connect_authority_form_is_405)
{
    const char *r = "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n";
    ASSERT_EQ(parse(r), (int)strlen(r));
    ASSERT_EQ(req.method, SV_M_OTHER);
    ASSERT_EQ(req.target_form, SV_TF_AUTHORITY);
    ASSERT_EQ(req.path.len, 0);
    ASSERT_EQ(req.keep_alive, 1);
    r = "CONNECT [::1]:8443 HTTP/1.1\r\nHost: [::1]:8443\r\n\r\n";
    ASSERT_EQ(parse(r), (int)strlen(r));
    ASSERT_EQ(req.target_form, SV_TF_AUTHORITY);

    sv_date date;
    sv_date_update(&date, 1800000000);
    sv_scratch scratch;
    sv_plan plan;
    r = "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n";
    ASSERT(parse(r) > 0);
    ASSERT_EQ(sv_respond(&req, NULL, NULL, &date, &scratch, &plan), 0);
    ASSERT_EQ(plan.status, 405);
    int allow = 0;
    for (int i = 0; i < plan.iovcnt; i++)
        if (memmem(plan.iov[i].iov_base, plan.iov[i].iov_len, "Allow: GET, HEAD, OPTIONS\r\n", 27))
            allow = 1;
    ASSERT_EQ(allow, 1);

    /* authority-form only with CONNECT, and only host ":" port */
    ASSERT_EQ(parse("GET example.com:443 HTTP/1.1\r\nHost: a\r\n\r\n"), -400);
    ASSERT_EQ(parse("OPTIONS example.com:443 HTTP/1.1\r\nHost: a\r\n\r\n"), -400);
    ASSERT_EQ(parse("CONNECT example.com HTTP/1.1\r\nHost: a\r\n\r\n"), -400);
    ASSERT_EQ(parse("CONNECT example.com: HTTP/1.1\r\nHost: a\r\n\r\n"), -400);
    ASSERT_EQ(parse("CONNECT :443 HTTP/1.1\r\nHost: a\r\n\r\n"), -400);
    ASSERT_EQ(parse("CONNECT u@example.com:443 HTTP/1.1\r\nHost: a\r\n\r\n"), -400);
    ASSERT_EQ(parse("CONNECT example.com:443/x HTTP/1.1\r\nHost: a\r\n\r\n"), -400);
}

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

/* RFC 9110 §9.3.2, RFC 9112 §6.3: a response to HEAD carries no content,
 * also when the request failed to parse (the parser reports the method it
 * saw). sv_respond_error() does not know the method and always sends the
 * text body; sv_respond_error_method() leaves it out for HEAD. */
TEST(review_head_parse_error_has_no_body)
{
    const char *r = "HEAD /x HTTP/1.1\r\n\r\n"; /* no Host: 400 */
    ASSERT_EQ(sv_http1_parse(r, strlen(r), &req), -400);
    ASSERT_EQ(req.method, SV_M_HEAD);
    sv_date date;
    sv_date_update(&date, 1800000000);
    sv_plan plan;
    sv_respond_error_method(400, 1, req.method, &date, &plan);
    ASSERT_EQ(plan.status, 400);
    ASSERT_EQ(plan.body_bytes, 0);
    size_t total = 0;
    for (int i = 0; i < plan.iovcnt; i++)
        total += plan.iov[i].iov_len;
    const char *last = plan.iov[plan.iovcnt - 1].iov_base;
    size_t ll = plan.iov[plan.iovcnt - 1].iov_len;
    ASSERT(ll >= 4 && memcmp(last + ll - 4, "\r\n\r\n", 4) == 0); /* ends with the head */
    /* GET (and an unparsed method) still get the body */
    sv_plan get;
    sv_respond_error_method(400, 1, SV_M_GET, &date, &get);
    ASSERT_EQ(get.body_bytes, 16);
    size_t gtotal = 0;
    for (int i = 0; i < get.iovcnt; i++)
        gtotal += get.iov[i].iov_len;
    ASSERT_EQ(gtotal, total + 16);
    sv_respond_error(400, 1, &date, &get);
    ASSERT_EQ(get.body_bytes, 16);
}
