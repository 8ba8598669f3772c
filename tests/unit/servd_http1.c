/*
 * The request parser (servd/http1.c), one test per RFC 9112 rule.
 *
 * Every input is parsed from the end of a page whose next page is
 * PROT_NONE (picohttpparser's trick), so a read past the last byte crashes
 * the test. Every proper prefix of every input is parsed too: a prefix of
 * a valid head must say "incomplete" (never an error, never complete), and
 * no prefix may read past its own end.
 */
#include "runner.h"
#include "http.h"

#include <sys/mman.h>
#include <unistd.h>

/* Copies s[0, n) so that it ends right before a PROT_NONE page. */
static const char *guarded(const char *s, size_t n)
{
    static char *base;
    static size_t pages;
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    size_t need = (n + pg - 1) / pg + 1;
    if (!base || pages < need + 1) {
        if (base)
            munmap(base, pages * pg);
        pages = need + 1;
        base = mmap(NULL, pages * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        ASSERT(base != MAP_FAILED);
        ASSERT_EQ(mprotect(base + (pages - 1) * pg, pg, PROT_NONE), 0);
    }
    char *p = base + (pages - 1) * pg - n;
    memcpy(p, s, n);
    return p;
}

static sv_request req;

/* Appends s to the NUL-terminated buf of cap bytes (truncating). */
static void app(char *buf, size_t cap, const char *s)
{
    size_t n = strlen(buf);
    snprintf(buf + n, cap - n, "%s", s);
}

/* Parses s (and every prefix of it) at a guard page; returns the result of
 * the whole. */
static int parse_n(const char *s, size_t n)
{
    int full = sv_http1_parse(guarded(s, n), n, &req);
    int state = SV_PARTIAL_NONE; /* of the last prefix found incomplete */
    size_t at = 0;
    for (size_t k = 0; k <= n; k++) {
        sv_request r2;
        const char *g = guarded(s, k);
        int rc = sv_http1_parse(g, k, &r2);
        if (full > 0 && rc != 0 && (size_t)full > k)
            t__fail(__FILE__, __LINE__, "prefix %zu of a valid head returned %d", k, rc);
        if (full < 0 && rc > 0)
            t__fail(__FILE__, __LINE__, "prefix %zu of a bad head returned %d", k, rc);
        /* the byte after an incomplete prefix is judged alone only when
         * the parser would find the longer prefix incomplete too */
        if (k > 0 && state != SV_PARTIAL_NONE && rc != 0 &&
            sv_http1_still_incomplete(state, at, g, k - 1, k))
            t__fail(__FILE__, __LINE__, "byte %zu judged alone: incomplete, parsed: %d", k - 1, rc);
        state = rc == 0 ? sv_http1_partial(g, k, &at) : SV_PARTIAL_NONE;
        if (state != SV_PARTIAL_NONE && k < n && full != 0 &&
            sv_http1_still_incomplete(state, at, guarded(s, n), k, n))
            t__fail(__FILE__, __LINE__, "the rest after prefix %zu judged incomplete", k);
    }
    /* leave req as the whole input's result */
    return sv_http1_parse(guarded(s, n), n, &req);
}

static int parse(const char *s)
{
    return parse_n(s, strlen(s));
}

static void view_is(sf_view v, const char *want, int line)
{
    if (v.len != strlen(want) || memcmp(v.ptr, want, v.len) != 0)
        t__fail(__FILE__, line, "view \"%.*s\" != \"%s\"", (int)v.len, v.ptr, want);
}
#define VIEW_IS(v, s) view_is((v), (s), __LINE__)

#define BAD(s, status) ASSERT_EQ(parse(s), -(status))
#define GOOD(s)        ASSERT_EQ(parse(s), (int)strlen(s))

TEST(http1_simple_get)
{
    const char *s = "GET /a/b.html?x=1&y HTTP/1.1\r\nHost: example.com\r\n"
                    "Accept-Encoding:  gzip, br \t\r\nX-Empty:\r\n\r\n";
    ASSERT_EQ(parse(s), (int)strlen(s));
    ASSERT_EQ(req.method, SV_M_GET);
    VIEW_IS(req.method_tok, "GET");
    VIEW_IS(req.target, "/a/b.html?x=1&y");
    VIEW_IS(req.path, "/a/b.html");
    VIEW_IS(req.query, "?x=1&y");
    ASSERT_EQ(req.target_form, SV_TF_ORIGIN);
    ASSERT_EQ(req.minor, 1);
    ASSERT_EQ(req.keep_alive, 1);
    ASSERT_EQ(req.head_len, strlen(s));
    ASSERT_EQ(req.body_len, 0);
    ASSERT_EQ(req.chunked, 0);
    ASSERT_EQ(req.nheaders, 3);
    VIEW_IS(req.headers[0].name, "Host");
    VIEW_IS(req.headers[0].value, "example.com");
    VIEW_IS(req.headers[1].value, "gzip, br");
    VIEW_IS(req.headers[2].name, "X-Empty");
    VIEW_IS(req.headers[2].value, "");
    VIEW_IS(req.host, "example.com");
    VIEW_IS(req.accept_encoding, "gzip, br");
    ASSERT_EQ(req.n_accept_encoding, 1);
}

TEST(http1_head_and_no_query)
{
    GOOD("HEAD / HTTP/1.1\r\nHost: h\r\n\r\n");
    ASSERT_EQ(req.method, SV_M_HEAD);
    VIEW_IS(req.path, "/");
    VIEW_IS(req.query, "");
    GOOD("GET /?a?b HTTP/1.1\r\nHost: h\r\n\r\n");
    VIEW_IS(req.path, "/");
    VIEW_IS(req.query, "?a?b");
}

/* Expect needs nothing of the parser: servd never sends a 100 (a request
 * whose body has not arrived is answered at once, and its connection
 * closes: conn.c), and an unknown expectation is ignored (417 is a MAY). */
TEST(http1_expect_is_ignored)
{
    GOOD("GET / HTTP/1.1\r\nHost: h\r\nExpect: 100-Continue\r\nContent-Length: 3\r\n\r\n");
    ASSERT_EQ(req.body_len, 3);
    GOOD("GET / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue, x\r\n\r\n");
    GOOD("GET / HTTP/1.0\r\nExpect: 100-continue\r\n\r\n");
}

TEST(http1_incomplete)
{
    ASSERT_EQ(sv_http1_parse(guarded("", 0), 0, &req), 0);
    ASSERT_EQ(parse("GET / HTTP/1.1\r\nHost: h\r\n"), 0);
    ASSERT_EQ(parse("GET / HTTP/1.1\r\nHost: h\r\n\r"), 0);
    ASSERT_EQ(parse("GET / HTTP/1.1\r"), 0);
    ASSERT_EQ(parse("GET /very/long"), 0);
    ASSERT_EQ(parse("\r\n"), 0);
}

TEST(http1_pipelined_heads)
{
    const char *s = "GET /1 HTTP/1.1\r\nHost: h\r\n\r\nGET /2 HTTP/1.1\r\nHost: h\r\n\r\n";
    int n = sv_http1_parse(guarded(s, strlen(s)), strlen(s), &req);
    ASSERT_EQ(n, (int)strlen(s) / 2);
    VIEW_IS(req.path, "/1");
    const char *g = guarded(s, strlen(s));
    ASSERT_EQ(sv_http1_parse(g + n, strlen(s) - (size_t)n, &req), n);
    VIEW_IS(req.path, "/2");
}

TEST(http1_leading_empty_lines)
{
    GOOD("\r\n\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n");
    VIEW_IS(req.path, "/");
    char buf[256] = "";
    for (int i = 0; i < SV_MAX_LEADING_CRLF; i++)
        app(buf, sizeof buf, "\r\n");
    app(buf, sizeof buf, "GET / HTTP/1.1\r\nHost: h\r\n\r\n");
    GOOD(buf);
    memmove(buf + 2, buf, strlen(buf) + 1);
    memcpy(buf, "\r\n", 2);
    BAD(buf, 400);
    BAD("\nGET / HTTP/1.1\r\nHost: h\r\n\r\n", 400);
    /* empty lines alone wait for a request line; the connection drops
     * them by their length */
    ASSERT_EQ(parse("\r\n\r\n"), SV_PARSE_INCOMPLETE);
    ASSERT_EQ(sv_http1_empty_lines(guarded("\r\n\r\n", 4), 4), 4);
    ASSERT_EQ(sv_http1_empty_lines(guarded("\r\n\r", 3), 3), 2);
    ASSERT_EQ(sv_http1_empty_lines(guarded("\r\nGE", 4), 4), 2);
    ASSERT_EQ(sv_http1_empty_lines(guarded("\n\r\n", 3), 3), 0);
    ASSERT_EQ(sv_http1_empty_lines(guarded("", 0), 0), 0);
}

TEST(http1_bare_lf_and_cr)
{
    BAD("GET / HTTP/1.1\nHost: h\r\n\r\n", 400);
    BAD("GET / HTTP/1.1\r\nHost: h\n\r\n", 400);
    BAD("GET / HTTP/1.1\r\nHost: h\r\n\n", 400);
    BAD("GET / HTTP/1.1\r\nHost: h\r\n\r\r\n", 400);
    BAD("GET / HTTP/1.1\rHost: h\r\n\r\n", 400);
    BAD("GET / HTTP/1.1\r\nHost: h\rX: y\r\n\r\n", 400);
    BAD("GET / HTTP/1.1\r\nX: a\rb\r\nHost: h\r\n\r\n", 400);
    BAD("GET /a\rb HTTP/1.1\r\nHost: h\r\n\r\n", 400);
    /* an error is reported before the head ends */
    ASSERT_EQ(parse("GET / HTTP/1.1\r\nHost: h\rX"), -400);
    ASSERT_EQ(parse("GET / HTTP/1.1\r\nX\n"), -400);
}

TEST(http1_methods)
{
    GOOD("POST / HTTP/1.1\r\nHost: h\r\n\r\n");
    ASSERT_EQ(req.method, SV_M_OTHER);
    const char *other[] = {"PUT", "DELETE", "PATCH", "TRACE"};
    for (size_t i = 0; i < 4; i++) {
        char b[128];
        snprintf(b, sizeof b, "%s /x HTTP/1.1\r\nHost: h\r\n\r\n", other[i]);
        GOOD(b);
        ASSERT_EQ(req.method, SV_M_OTHER);
    }
    GOOD("OPTIONS /x HTTP/1.1\r\nHost: h\r\n\r\n");
    ASSERT_EQ(req.method, SV_M_OPTIONS);
    /* methods are case-sensitive: any other token is one servd does not
     * serve, whether RFC 9110 defines it or not */
    const char *unknown[] = {"get", "FOO", "GETS", "PROPFIND", "M-SEARCH"};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        char b[128];
        snprintf(b, sizeof b, "%s / HTTP/1.1\r\nHost: h\r\n\r\n", unknown[i]);
        GOOD(b);
        ASSERT_EQ(req.method, SV_M_OTHER);
        VIEW_IS(req.method_tok, unknown[i]);
    }
    BAD("G@T / HTTP/1.1\r\nHost: h\r\n\r\n", 400);
    BAD(" GET / HTTP/1.1\r\nHost: h\r\n\r\n", 400);
}

TEST(http1_request_line_syntax)
{
    BAD("GET  / HTTP/1.1\r\nHost: h\r\n\r\n", 400);
    BAD("GET /  HTTP/1.1\r\nHost: h\r\n\r\n", 400);
    BAD("GET\t/ HTTP/1.1\r\nHost: h\r\n\r\n", 400);
    BAD("GET / HTTP/1.1 \r\nHost: h\r\n\r\n", 400);
    BAD("GET /\r\nHost: h\r\n\r\n", 400);
    BAD("GET / \r\nHost: h\r\n\r\n", 400);
    BAD("GET\r\n\r\n", 400);
    BAD("/ HTTP/1.1\r\n\r\n", 400);
    BAD("GET /a#frag HTTP/1.1\r\nHost: h\r\n\r\n", 400);
    BAD("GET /a\x01 HTTP/1.1\r\nHost: h\r\n\r\n", 400);
    BAD("GET /a\x7f HTTP/1.1\r\nHost: h\r\n\r\n", 400);
    ASSERT_EQ(parse_n("GET /a\0b HTTP/1.1\r\nHost: h\r\n\r\n", 29), -400);
}

TEST(http1_versions)
{
    GOOD("GET / HTTP/1.0\r\n\r\n");
    ASSERT_EQ(req.minor, 0);
    VIEW_IS(req.version, "HTTP/1.0");
    GOOD("GET / HTTP/1.2\r\nHost: h\r\n\r\n");
    ASSERT_EQ(req.minor, 1);
    VIEW_IS(req.version, "HTTP/1.2"); /* logged as sent */
    GOOD("GET / HTTP/1.9\r\nHost: h\r\n\r\n");
    ASSERT_EQ(req.minor, 1);
    BAD("GET / HTTP/2.0\r\nHost: h\r\n\r\n", 505);
    BAD("GET / HTTP/3.0\r\nHost: h\r\n\r\n", 505);
    BAD("GET / HTTP/0.9\r\nHost: h\r\n\r\n", 505);
    BAD("GET / http/1.1\r\nHost: h\r\n\r\n", 400);
    BAD("GET / HTTP/1\r\nHost: h\r\n\r\n", 400);
    BAD("GET / HTTP/1.\r\nHost: h\r\n\r\n", 400);
    BAD("GET / HTTP/11.1\r\nHost: h\r\n\r\n", 400);
    BAD("GET / HTTP/1.10\r\nHost: h\r\n\r\n", 400);
    BAD("GET / HTTP/1.x\r\nHost: h\r\n\r\n", 400);
    BAD("GET / HTTPS/1.1\r\nHost: h\r\n\r\n", 400);
    /* the method is known even when the version is refused */
    BAD("HEAD / HTTP/2.0\r\n\r\n", 505);
    ASSERT_EQ(req.method, SV_M_HEAD);
    /* the request line of a refusal, for the access log: read whole, it is
     * kept (a 505, an error after it); else there is none */
    VIEW_IS(req.target, "/");
    VIEW_IS(req.version, "HTTP/2.0");
    BAD("GET /x HTTP/1.1\r\nHost: h\r\nHost: i\r\n\r\n", 400);
    VIEW_IS(req.method_tok, "GET");
    VIEW_IS(req.target, "/x");
    VIEW_IS(req.version, "HTTP/1.1");
    BAD("GET / HTTP/1.10\r\nHost: h\r\n\r\n", 400);
    VIEW_IS(req.version, "");
}

/* A request line of exactly n bytes including its CRLF. */
static void long_line(char *buf, size_t n)
{
    memcpy(buf, "GET /", 5);
    size_t tail = strlen(" HTTP/1.1\r\n");
    memset(buf + 5, 'a', n - 5 - tail);
    memcpy(buf + n - tail, " HTTP/1.1\r\n", tail);
    buf[n] = '\0';
}

/* Parses start + n bytes of fill + tail from the guard page (at most
 * SV_MAX_HEAD * 2 bytes; the bytes stay in over_buf). */
static char over_buf[SV_MAX_HEAD * 2];
static int over_limit(const char *start, char fill, size_t n, const char *tail)
{
    memset(over_buf, 0, sizeof over_buf);
    size_t s = strlen(start);
    memcpy(over_buf, start, s);
    memset(over_buf + s, fill, n);
    app(over_buf, sizeof over_buf, tail);
    return sv_http1_parse(guarded(over_buf, strlen(over_buf)), strlen(over_buf), &req);
}

TEST(http1_request_line_limit)
{
    static char buf[SV_MAX_HEAD * 2];
    long_line(buf, SV_MAX_REQUEST_LINE);
    app(buf, sizeof buf, "Host: h\r\n\r\n");
    ASSERT_EQ(sv_http1_parse(guarded(buf, strlen(buf)), strlen(buf), &req), (int)strlen(buf));
    long_line(buf, SV_MAX_REQUEST_LINE + 1);
    app(buf, sizeof buf, "Host: h\r\n\r\n");
    ASSERT_EQ(sv_http1_parse(guarded(buf, strlen(buf)), strlen(buf), &req), -414);
    /* incomplete but already too long */
    ASSERT_EQ(over_limit("GET /", 'a', SV_MAX_REQUEST_LINE, ""), -414);
    ASSERT_EQ(
        sv_http1_parse(guarded(over_buf, SV_MAX_REQUEST_LINE - 3), SV_MAX_REQUEST_LINE - 3, &req),
        0);
    /* a long line is 414 whatever its method, even one whose token does
     * not end within the limit, whole or still arriving; bytes that cannot
     * start a request line are 400 */
    static const struct {
        const char *start;
        char fill;
        size_t n;
        const char *tail;
        int want;
    } cases[] = {
        {"", 'A', SV_MAX_REQUEST_LINE + 10, "", -414},
        {"", 'A', SV_MAX_REQUEST_LINE + 10, " / HTTP/1.1\r\nHost: h\r\n\r\n", -414},
        {"OPTIONS /", 'a', SV_MAX_REQUEST_LINE, "", -414},
        {"MKCOL /", 'a', SV_MAX_REQUEST_LINE, "", -414},
        {"PROPFINDX /", 'a', SV_MAX_REQUEST_LINE, "", -414},
        {"", 0x01, SV_MAX_REQUEST_LINE + 10, "", -400},
        {"", 0x01, SV_MAX_REQUEST_LINE + 10, "\r\n\r\n", -400},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        ASSERT_EQ(over_limit(cases[i].start, cases[i].fill, cases[i].n, cases[i].tail),
                  cases[i].want);
}

/* What servd answers buf[0, len) arriving step bytes at a time, as
 * conn.c's process() judges each read: more bytes of an unended line
 * alone when sv_http1_still_incomplete() can, else by parsing all that
 * has arrived. Each read's result is checked against a parse of all of
 * it. @return the first result that is not "incomplete" (0 if none);
 * *method: its request's method; *parses: the parser's calls. */
static int deliver(const char *buf, size_t len, size_t step, int *method, size_t *parses)
{
    int state = SV_PARTIAL_NONE;
    size_t at = 0, old = 0;
    *parses = 0;
    for (size_t n = step < len ? step : len;; n = n + step < len ? n + step : len) {
        const char *g = guarded(buf, n);
        int r = 0;
        if (!(state != SV_PARTIAL_NONE && sv_http1_still_incomplete(state, at, g, old, n))) {
            r = sv_http1_parse(g, n, &req);
            ++*parses;
            state = r == 0 ? sv_http1_partial(g, n, &at) : SV_PARTIAL_NONE;
        }
        sv_request whole;
        int want = sv_http1_parse(g, n, &whole);
        if (r != want)
            t__fail(__FILE__, __LINE__, "%zu bytes: %d arriving, %d whole", n, r, want);
        if (r != 0) {
            *method = req.method;
            return r;
        }
        if (n == len)
            return 0;
        old = n;
    }
}

/* The first refusal of bytes arriving one at a time; *method: its
 * request's method. */
static int first_refusal(const char *buf, size_t len, int *method)
{
    size_t parses;
    return deliver(buf, len, 1, method, &parses);
}

TEST(http1_refused_the_same_whole_or_a_byte_at_a_time)
{
    /* A bare LF ending a line after its method, or after its target; a
     * line over the limit whose bad version lies past the bytes that show
     * it too long; a bare LF after the limit. Each was refused differently
     * whole and arriving (400 without the method against a HEAD's 400, 400
     * against 414), and a HEAD's refusal has no body: the answer depended
     * on how the bytes were cut. */
    static char buf[SV_MAX_REQUEST_LINE * 3];
#define S(s) s, sizeof s - 1
    static const struct {
        const char *start;
        size_t start_len, fill;
        const char *tail;
        int want, method;
    } cases[] = {
        {S("HEAD /health HT\0\0TP/GET "), 0, "\n\r\n", -400, SV_M_HEAD},
        {S("GET /a"), 0, "\n", -400, SV_M_GET},
        {S("HEAD /"), SV_MAX_REQUEST_LINE * 2, " [::1]:8080 HTTP/1.1\r\nHost: h\r\n\r\n", -414,
         SV_M_HEAD},
        {S("GET /"), SV_MAX_REQUEST_LINE, " HTTP/1.1\nHost: h\r\n\r\n", -414, SV_M_GET},
    };
#undef S
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t n = cases[i].start_len;
        memcpy(buf, cases[i].start, n);
        memset(buf + n, 'a', cases[i].fill);
        n += cases[i].fill;
        memcpy(buf + n, cases[i].tail, strlen(cases[i].tail));
        n += strlen(cases[i].tail);
        int method = 0;
        ASSERT_EQ(sv_http1_parse(guarded(buf, n), n, &req), cases[i].want);
        ASSERT_EQ(req.method, cases[i].method);
        ASSERT_EQ(first_refusal(buf, n, &method), cases[i].want);
        ASSERT_EQ(method, cases[i].method);
    }
}

/* A head arriving a byte at a time is parsed again from its start only
 * when a byte may change the answer: a line's end, a CR, a colon, a byte
 * that a name or a target cannot hold (a 32 KB head cost 32768 parses of
 * up to 32 KB each). Its answer is the parser's on all of it (deliver()
 * checks each read), at every step size. */
TEST(http1_more_bytes_judged_alone)
{
    static char buf[SV_MAX_HEAD + 64];
    size_t n, parses;
    int method;
    /* one value of 30,000 bytes with a cookie's separators */
    n = (size_t)snprintf(buf, sizeof buf, "GET /index.html HTTP/1.1\r\nHost: h\r\nCookie: ");
    for (size_t i = 0; i < 6000; i++)
        memcpy(buf + n + 5 * i, "a=b; ", 5);
    n += 30000;
    memcpy(buf + n, "\r\n\r\n", 4);
    n += 4;
    for (size_t step = 1; step <= 7; step += 3) {
        ASSERT_EQ(deliver(buf, n, step, &method, &parses), (int)n);
        ASSERT(parses < 40); /* at line ends, colons, CRs, and the first bytes */
    }
    /* a control byte in that value: the same 400 at the same byte */
    buf[20000] = '\x01';
    ASSERT_EQ(deliver(buf, n, 1, &method, &parses), -400);
    ASSERT_EQ(sv_http1_parse(guarded(buf, 20001), 20001, &req), -400);
    buf[20000] = 'a';
    /* a value that reaches the limit: 431 */
    memset(buf + n - 4, 'v', sizeof buf - (n - 4));
    ASSERT_EQ(deliver(buf, SV_MAX_HEAD + 10, 1, &method, &parses), -431);
    /* a long target: 200, and 414 past the limit; a '#' in it: 400 */
    n = (size_t)snprintf(buf, sizeof buf, "GET /");
    memset(buf + n, 'a', 8000);
    n += 8000;
    n += (size_t)snprintf(buf + n, sizeof buf - n, " HTTP/1.1\r\nHost: h\r\n\r\n");
    ASSERT_EQ(deliver(buf, n, 1, &method, &parses), (int)n);
    ASSERT(parses < 40);
    buf[4000] = '#';
    ASSERT_EQ(deliver(buf, n, 1, &method, &parses), -400);
    buf[4000] = 'a';
    memset(buf + 5, 'a', SV_MAX_REQUEST_LINE);
    ASSERT_EQ(deliver(buf, SV_MAX_REQUEST_LINE + 5, 1, &method, &parses), -414);
    ASSERT_EQ(method, SV_M_GET);
    /* a long name, then a space before its colon: 400; with 100 lines
     * the 101st is a 431 */
    n = (size_t)snprintf(buf, sizeof buf, "GET / HTTP/1.1\r\nHost: h\r\nX-");
    memset(buf + n, 'n', 5000);
    n += 5000;
    n += (size_t)snprintf(buf + n, sizeof buf - n, " : v\r\n\r\n");
    ASSERT_EQ(deliver(buf, n, 1, &method, &parses), -400);
    n = (size_t)snprintf(buf, sizeof buf, "GET / HTTP/1.1\r\nHost: h\r\n");
    for (int i = 0; i < SV_MAX_HEADERS; i++)
        n += (size_t)snprintf(buf + n, sizeof buf - n, "X-%d: %0200d\r\n", i, i);
    n += (size_t)snprintf(buf + n, sizeof buf - n, "\r\n");
    ASSERT_EQ(deliver(buf, n, 1, &method, &parses), -431);
    ASSERT(parses < 4 * (SV_MAX_HEADERS + 2));
}

TEST(http1_head_limit)
{
    static char buf[SV_MAX_HEAD * 2];
    snprintf(buf, sizeof buf, "%s", "GET / HTTP/1.1\r\nHost: h\r\n");
    /* fill with a field so the head is exactly SV_MAX_HEAD bytes */
    size_t used = strlen(buf), line = SV_MAX_HEAD - used - 2;
    memcpy(buf + used, "X: ", 3);
    memset(buf + used + 3, 'v', line - 5);
    memcpy(buf + used + line - 2, "\r\n\r\n", 5);
    ASSERT_EQ(strlen(buf), SV_MAX_HEAD);
    ASSERT_EQ(sv_http1_parse(guarded(buf, SV_MAX_HEAD), SV_MAX_HEAD, &req), SV_MAX_HEAD);
    /* one byte more */
    memcpy(buf + used + line - 2, "v\r\n\r\n", 6);
    ASSERT_EQ(sv_http1_parse(guarded(buf, SV_MAX_HEAD + 1), SV_MAX_HEAD + 1, &req), -431);
    /* a full buffer without the end of the head */
    ASSERT_EQ(sv_http1_parse(guarded(buf, SV_MAX_HEAD), SV_MAX_HEAD, &req), -431);
    ASSERT_EQ(sv_http1_parse(guarded(buf, SV_MAX_HEAD - 1), SV_MAX_HEAD - 1, &req), 0);
}

TEST(http1_head_judged_on_what_fits)
{
    /* servd refuses a head with 431 once SV_MAX_HEAD bytes hold no end of
     * it: a fault that lies past them must not make a 400 of the same head
     * arriving whole (a colonless line, a control byte in a value, a bare
     * CR just past the limit were 400 whole, 431 in reads); one within
     * them is a 400 either way. */
    static char buf[SV_MAX_HEAD * 2];
    static const char start[] = "GET / HTTP/1.1\r\nHost: h\r\nX: ";
    static const struct {
        size_t at;       /* where the fault goes */
        const char *put; /* the fault, and the line's end after it */
        int want;
    } cases[] = {
        {SV_MAX_HEAD + 100, "\r\nno colon here\r\n\r\n", -431},
        {SV_MAX_HEAD + 100, "\001\r\n\r\n", -431},
        {SV_MAX_HEAD - 1, "\rx\r\n\r\n", -431},
        {SV_MAX_HEAD - 2, "\rx\r\n\r\n", -400},
        {SV_MAX_HEAD - 100, "\001\r\n\r\n", -400},
        {SV_MAX_HEAD + 100, "\r\n\r\n", -431},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t n = sizeof start - 1, put = strlen(cases[i].put);
        memcpy(buf, start, n);
        memset(buf + n, 'v', cases[i].at - n);
        memcpy(buf + cases[i].at, cases[i].put, put);
        n = cases[i].at + put;
        ASSERT_EQ(sv_http1_parse(guarded(buf, n), n, &req), cases[i].want);
        ASSERT_EQ(req.method, SV_M_GET);
        ASSERT_EQ(sv_http1_parse(guarded(buf, SV_MAX_HEAD), SV_MAX_HEAD, &req), cases[i].want);
    }
}

TEST(http1_header_count_limit)
{
    static char buf[SV_MAX_HEAD];
    snprintf(buf, sizeof buf, "%s", "GET / HTTP/1.1\r\nHost: h\r\n");
    for (int i = 1; i < SV_MAX_HEADERS; i++)
        app(buf, sizeof buf, "X: y\r\n");
    app(buf, sizeof buf, "\r\n");
    ASSERT_EQ(parse(buf), (int)strlen(buf));
    ASSERT_EQ(req.nheaders, SV_MAX_HEADERS);
    buf[strlen(buf) - 2] = '\0';
    app(buf, sizeof buf, "X: y\r\n\r\n");
    ASSERT_EQ(parse(buf), -431);
}

TEST(http1_field_syntax)
{
    BAD("GET / HTTP/1.1\r\nHost : h\r\n\r\n", 400);
    BAD("GET / HTTP/1.1\r\nHost\t: h\r\n\r\n", 400);
    BAD("GET / HTTP/1.1\r\nHost: h\r\nX: a\r\n b\r\n\r\n", 400);
    BAD("GET / HTTP/1.1\r\nHost: h\r\nX: a\r\n\tb\r\n\r\n", 400);
    BAD("GET / HTTP/1.1\r\n Host: h\r\n\r\n", 400);
    BAD("GET / HTTP/1.1\r\nHost: h\r\nNoColon\r\n\r\n", 400);
    BAD("GET / HTTP/1.1\r\nHost: h\r\n: empty-name\r\n\r\n", 400);
    BAD("GET / HTTP/1.1\r\nHost: h\r\nX(y): 1\r\n\r\n", 400);
    BAD("GET / HTTP/1.1\r\nHost: h\r\nX: a\x01\r\n\r\n", 400);
    BAD("GET / HTTP/1.1\r\nHost: h\r\nX: a\x7f\r\n\r\n", 400);
    BAD("GET / HTTP/1.1\r\nHost: h\r\nX: \x1b[31m\r\n\r\n", 400);
    ASSERT_EQ(parse_n("GET / HTTP/1.1\r\nHost: h\r\nX: a\0b\r\n\r\n", 35), -400);
    ASSERT_EQ(parse_n("GET / HTTP/1.1\r\nHost: h\r\nX\0: a\r\n\r\n", 34), -400);
    /* obs-text, HTAB and inner spaces are valid field content */
    GOOD("GET / HTTP/1.1\r\nHost: h\r\nX: caf\xc3\xa9 \t a\tb\r\n\r\n");
    VIEW_IS(req.headers[1].value, "caf\xc3\xa9 \t a\tb");
}

/* Writes pre, a value of vlen 'v' bytes with byte c at pos, and the end of the
 * head into buf. @return the length. */
static size_t value_with(char *buf, const char *pre, size_t vlen, size_t pos, char c)
{
    size_t plen = strlen(pre);
    memcpy(buf, pre, plen);
    memset(buf + plen, 'v', vlen);
    buf[plen + pos] = c;
    memcpy(buf + plen + vlen, "\r\n\r\n", 4);
    return plen + vlen + 4;
}

/* Field values are checked 16 bytes at a time where the CPU allows it, then
 * byte by byte: a forbidden byte must be found at every position of a long
 * value, inside the wide blocks and in the tail, and every allowed byte
 * class must pass there too. */
TEST(http1_field_value_every_position)
{
    static const char bad[] = {'\0', '\x01', '\x1f', '\x7f', '\n', '\r'};
    static const char good[] = {'\t', ' ', '~', '\x80', '\xff', 'a'};
    enum { VLEN = 40 };
    const char *pre = "GET / HTTP/1.1\r\nHost: h\r\nX: ";
    char buf[128];
    for (size_t pos = 1; pos < VLEN - 1; pos++) {
        for (size_t b = 0; b < sizeof bad; b++) {
            size_t n = value_with(buf, pre, VLEN, pos, bad[b]);
            /* a CR followed by 'v' is a bare CR: also 400 */
            if (sv_http1_parse(guarded(buf, n), n, &req) != -400)
                t__fail(__FILE__, __LINE__, "byte 0x%02x at value position %zu accepted",
                        (unsigned char)bad[b], pos);
        }
        for (size_t g = 0; g < sizeof good; g++) {
            size_t n = value_with(buf, pre, VLEN, pos, good[g]);
            if (sv_http1_parse(guarded(buf, n), n, &req) != (int)n)
                t__fail(__FILE__, __LINE__, "byte 0x%02x at value position %zu refused",
                        (unsigned char)good[g], pos);
            ASSERT_EQ(req.headers[1].value.len, (size_t)VLEN);
        }
    }
}

/* tchar (RFC 9110 §5.6.2), written out here rather than taken from the parser. */
static int rfc_tchar(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
           (c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* Field names and request targets are scanned 16 bytes at a time where the
 * CPU allows it, then byte by byte: every one of the 256 bytes, at every
 * position of a long name or target (inside the wide blocks and in the
 * tail), must be taken or refused as the RFC's grammar says. */
TEST(http1_field_name_every_byte)
{
    enum { NLEN = 40 };
    const char *pre = "GET / HTTP/1.1\r\nHost: h\r\n";
    size_t plen = strlen(pre);
    char buf[128];
    for (size_t pos = 0; pos < NLEN; pos++) {
        for (unsigned b = 0; b < 256; b++) {
            memcpy(buf, pre, plen);
            memset(buf + plen, 'n', NLEN);
            buf[plen + pos] = (char)b;
            static const char end[] = ": v\r\n\r\n";
            memcpy(buf + plen + NLEN, end, sizeof end - 1);
            size_t n = plen + NLEN + sizeof end - 1;
            int r = sv_http1_parse(guarded(buf, n), n, &req);
            /* a colon inside ends the name early, and the rest is a valid
             * value; a colon first leaves an empty name */
            int want = rfc_tchar((unsigned char)b) || (b == ':' && pos > 0) ? (int)n : -400;
            if (r != want)
                t__fail(__FILE__, __LINE__, "byte 0x%02x at name position %zu: got %d, want %d", b,
                        pos, r, want);
            if (r > 0)
                ASSERT_EQ(req.headers[1].name.len, b == ':' ? pos : (size_t)NLEN);
        }
    }
}

TEST(http1_target_every_byte)
{
    /* target_span scans the target and the " HTTP/1.1" after it: a 40-byte
     * target lies wholly in its 16-byte blocks, the last 6 bytes of a 38-byte
     * one in the byte-by-byte tail, and a 5-byte one wholly there. Position 0
     * is the '/' of the origin form. */
    static const size_t lens[] = {5, 38, 40};
    static const char end[] = " HTTP/1.1\r\nHost: h\r\n\r\n";
    char buf[128];
    for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
        size_t tlen = lens[k];
        for (size_t pos = 1; pos < tlen; pos++) {
            for (unsigned b = 0; b < 256; b++) {
                memset(buf, 't', sizeof buf);
                memcpy(buf, "GET /", 5);
                buf[4 + pos] = (char)b;
                memcpy(buf + 4 + tlen, end, sizeof end - 1);
                size_t n = 4 + tlen + sizeof end - 1;
                int r = sv_http1_parse(guarded(buf, n), n, &req);
                /* a VCHAR other than '#', or a byte above 0x7E (flagged); a SP
                 * inside ends the target early and leaves a bad version; a CR or
                 * LF breaks the line */
                int want = b > 0x20 && b != 0x7f && b != '#' ? (int)n : -400;
                if (r != want)
                    t__fail(__FILE__, __LINE__,
                            "byte 0x%02x at position %zu of a %zu-byte target: got %d, want %d", b,
                            pos, tlen, r, want);
                if (r > 0) {
                    ASSERT_EQ(req.target.len, tlen);
                    ASSERT_EQ(req.target_8bit, b > 0x7f);
                }
            }
        }
    }
}

/* The fields servd acts on are matched in any case, and only by their
 * whole name: a near miss is an unknown field. */
TEST(http1_field_names_any_case)
{
    GOOD("GET / HTTP/1.1\r\nhOsT: h\r\nACCEPT-encoding: gzip\r\nIf-None-MATCH: \"e\"\r\n\r\n");
    VIEW_IS(req.host, "h");
    VIEW_IS(req.accept_encoding, "gzip");
    VIEW_IS(req.if_none_match, "\"e\"");
    GOOD("GET / HTTP/1.1\r\nHost: h\r\nAccept_Encoding: gzip\r\nIf-None-Matc^: x\r\n\r\n");
    ASSERT_EQ(req.accept_encoding.len, 0);
    ASSERT_EQ(req.if_none_match.len, 0);
    /* '_' | 0x20 is DEL, never '-' */
    GOOD("GET / HTTP/1.1\r\nHost: h\r\nContent_Length: 5\r\n\r\n");
    ASSERT_EQ(req.body_len, 0);
    BAD("GET / HTTP/1.1\r\nHost: h\r\nCONTENT-LENGTH: x\r\n\r\n", 400);
}

TEST(http1_host)
{
    BAD("GET / HTTP/1.1\r\n\r\n", 400);
    BAD("GET / HTTP/1.1\r\nX: y\r\n\r\n", 400);
    BAD("GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n", 400);
    BAD("GET / HTTP/1.0\r\nHost: a\r\nhost: b\r\n\r\n", 400);
    BAD("GET / HTTP/1.1\r\nHost: a b\r\n\r\n", 400);
    BAD("GET / HTTP/1.1\r\nHost: user@a\r\n\r\n", 400);
    BAD("GET / HTTP/1.1\r\nHost: a:80x\r\n\r\n", 400);
    BAD("GET / HTTP/1.1\r\nHost: a:123456\r\n\r\n", 400);
    BAD("GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", 400);
    BAD("GET / HTTP/1.1\r\nHost: [::1\r\n\r\n", 400);
    BAD("GET / HTTP/1.1\r\nHost: []\r\n\r\n", 400);
    BAD("GET / HTTP/1.1\r\nHost: a%zz\r\n\r\n", 400);
    BAD("GET / HTTP/1.1\r\nHost: [::1/]\r\n\r\n", 400); /* not an IP-literal byte */
    BAD("GET / HTTP/1.1\r\nHost: [::1]x\r\n\r\n", 400); /* a literal, then not a port */
    BAD("GET http://[::1]x/ HTTP/1.1\r\nHost: h\r\n\r\n", 400);
    GOOD("GET / HTTP/1.0\r\n\r\n");
    GOOD("GET / HTTP/1.1\r\nHOST: Example.COM:8080\r\n\r\n");
    VIEW_IS(req.host, "Example.COM:8080");
    GOOD("GET / HTTP/1.1\r\nHost: [::1]:80\r\n\r\n");
    GOOD("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    GOOD("GET / HTTP/1.1\r\nHost: a:\r\n\r\n");
    GOOD("GET / HTTP/1.1\r\nHost:\r\n\r\n"); /* empty: RFC 9112 §3.2 */
    GOOD("GET / HTTP/1.1\r\nHost: xn--caf-dma.example\r\n\r\n");
    /* a reg-name may hold pct-encoded bytes (RFC 3986 §3.2.2) */
    GOOD("GET / HTTP/1.1\r\nHost: ex%41mple.com:8080\r\n\r\n");
    VIEW_IS(req.host, "ex%41mple.com:8080");
    GOOD("GET http://caf%C3%A9.example/a HTTP/1.1\r\nHost: h\r\n\r\n");
    VIEW_IS(req.host, "caf%C3%A9.example");
    /* a valid Host is remembered (http1.c, host_field_check): a value of the
     * same length that differs must still be checked */
    GOOD("GET / HTTP/1.1\r\nHost: a:80\r\n\r\n");
    GOOD("GET / HTTP/1.1\r\nHost: a:80\r\n\r\n");
    BAD("GET / HTTP/1.1\r\nHost: a:8x\r\n\r\n", 400);
    BAD("GET / HTTP/1.1\r\nHost: a/80\r\n\r\n", 400);
    GOOD("GET / HTTP/1.1\r\nHost: a:80\r\n\r\n");
}

TEST(http1_content_length)
{
    GOOD("GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 42\r\n\r\n");
    ASSERT_EQ(req.body_len, 42);
    ASSERT_EQ(req.keep_alive, 1);
    GOOD("GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 5,5 , 5\r\n\r\n");
    ASSERT_EQ(req.body_len, 5);
    GOOD("GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 7\r\ncontent-length: 7\r\n\r\n");
    ASSERT_EQ(req.body_len, 7);
    GOOD("GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 18446744073709551615\r\n\r\n");
    ASSERT_EQ(req.body_len == UINT64_MAX, 1);
    BAD("GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 18446744073709551616\r\n\r\n", 400);
    BAD("GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 99999999999999999999999\r\n\r\n", 400);
    BAD("GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 5, 6\r\n\r\n", 400);
    BAD("GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", 400);
    BAD("GET / HTTP/1.1\r\nHost: h\r\nContent-Length: +5\r\n\r\n", 400);
    BAD("GET / HTTP/1.1\r\nHost: h\r\nContent-Length: -5\r\n\r\n", 400);
    BAD("GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 5 5\r\n\r\n", 400);
    BAD("GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 0x10\r\n\r\n", 400);
    BAD("GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 5,\r\n\r\n", 400);
    BAD("GET / HTTP/1.1\r\nHost: h\r\nContent-Length: \r\n\r\n", 400);
    BAD("GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 1.0\r\n\r\n", 400);
}

TEST(http1_smuggling_te_and_cl)
{
    BAD("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
        400);
    BAD("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n",
        400);
    BAD("GET / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nContent-Length: 0\r\n\r\n",
        400);
}

TEST(http1_transfer_encoding)
{
    GOOD("GET / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n");
    ASSERT_EQ(req.chunked, 1);
    ASSERT_EQ(req.keep_alive, 1); /* conn.c decides, by the body */
    ASSERT_EQ(req.body_len, 0);
    GOOD("GET / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: Chunked\r\n\r\n");
    ASSERT_EQ(req.chunked, 1);
    GOOD("GET / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: "
         "\r\n\r\n");
    ASSERT_EQ(req.chunked, 1);
    /* codings before chunked are not implemented (RFC 9112 §6.1) */
    BAD("GET / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501);
    BAD("GET / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: "
        "chunked\r\n\r\n",
        501);
    BAD("GET / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", 400);
    BAD("GET / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\n\r\n", 400);
    BAD("GET / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: "
        "gzip\r\n\r\n",
        400);
    BAD("GET / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked, chunked\r\n\r\n", 400);
    BAD("GET / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked;ext=1\r\n\r\n", 400);
    BAD("GET / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked, ;x\r\n\r\n", 400);
    BAD("GET / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: \r\n\r\n", 400);
    BAD("GET / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: xchunked\r\n\r\n", 400);
    BAD("GET / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunkedx\r\n\r\n", 400);
    BAD("GET / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked, identity\r\n\r\n", 400);
    BAD("GET / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked x\r\n\r\n", 400);
    BAD("GET / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: foo, chunked\r\n\r\n", 501);
    BAD("GET / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400);
}

/* Measures s as a chunked body at a guard page, and every prefix of it: a
 * prefix of a body that measures > 0 is incomplete; a prefix of a
 * malformed one is incomplete or malformed, never complete. */
static int chunked_n(const char *s, size_t n)
{
    int full = sv_http1_chunked_length(guarded(s, n), n);
    for (size_t k = 0; k < n; k++) {
        int rc = sv_http1_chunked_length(guarded(s, k), k);
        if (full > 0 && (size_t)full > k && rc != 0)
            t__fail(__FILE__, __LINE__, "prefix %zu of a whole body returned %d", k, rc);
        if (full < 0 && rc > 0)
            t__fail(__FILE__, __LINE__, "prefix %zu of a bad body returned %d", k, rc);
    }
    return full;
}
#define CHUNKED(s) chunked_n(s, sizeof s - 1)

TEST(http1_chunked_body_length)
{
    /* whole bodies: their length, and bytes after them are not theirs */
    ASSERT_EQ(CHUNKED("0\r\n\r\n"), 5);
    ASSERT_EQ(CHUNKED("0\r\n\r\nGET / HTTP/1.1\r\n"), 5);
    ASSERT_EQ(CHUNKED("5\r\nhello\r\n0\r\n\r\n"), 15);
    ASSERT_EQ(CHUNKED("5\r\nhello\r\n6\r\n world\r\n0\r\n\r\nX"), 26);
    ASSERT_EQ(CHUNKED("A\r\n0123456789\r\na\r\n0123456789\r\n0\r\n\r\n"), 35);
    ASSERT_EQ(CHUNKED("0005\r\nhello\r\n000\r\n\r\n"), 20); /* 1*HEXDIG, 1*"0" */
    /* chunk data is opaque: CRLFs and a request inside it */
    ASSERT_EQ(CHUNKED("4\r\n\r\n\r\n\r\n0\r\n\r\n"), 14);
    /* extensions (§7.1.1), ignored */
    ASSERT_EQ(CHUNKED("5;a\r\nhello\r\n0;b=1\r\n\r\n"), 21);
    ASSERT_EQ(CHUNKED("5 ; a = 1 ;b=\"x;\\\"y\"\r\nhello\r\n0\r\n\r\n"), 34);
    ASSERT_EQ(CHUNKED("5\t;\ta\r\nhello\r\n0\r\n\r\n"), 19);
    ASSERT_EQ(CHUNKED("0;x=\"\"\r\n\r\n"), 10);
    /* trailer fields (§7.1.2), ignored */
    ASSERT_EQ(CHUNKED("0\r\nX-T: 1\r\n\r\n"), 13);
    ASSERT_EQ(CHUNKED("0\r\nA:\r\nB:  2 \r\n\r\n"), 17);

    /* not all here: incomplete */
    ASSERT_EQ(CHUNKED(""), 0);
    ASSERT_EQ(CHUNKED("5\r\nhel"), 0);
    ASSERT_EQ(CHUNKED("0\r\n"), 0);
    ASSERT_EQ(CHUNKED("0\r\nX-T: 1\r\n"), 0);
    ASSERT_EQ(CHUNKED("ffffffffffffffff\r\nx\r\n0\r\n\r\n"), 0); /* over SV_MAX_DRAIN */
    ASSERT_EQ(CHUNKED("10001\r\nx"), 0);
    ASSERT_EQ(CHUNKED("10000000000000000000000000000\r\nx\r\n0\r\n\r\n"), 0);
    ASSERT_EQ(CHUNKED("0000000000000000000000000000001\r\nx\r\n0\r\n\r\n"), 41);
    /* SV_MAX_DRAIN bounds the whole body, chunk lines and trailers included
     * (measured once: every prefix of 64 KiB would take long) */
    static char big[SV_MAX_DRAIN + 64];
    size_t n = (size_t)snprintf(big, sizeof big, "%x\r\n", SV_MAX_DRAIN - 12);
    memset(big + n, 'x', SV_MAX_DRAIN - 12);
    n += SV_MAX_DRAIN - 12;
    memcpy(big + n, "\r\n0\r\n\r\n", 7);
    ASSERT_EQ(n + 7, SV_MAX_DRAIN + 1); /* "fff4" CRLF, the data, CRLF, the last chunk */
    ASSERT_EQ(sv_http1_chunked_length(guarded(big, n + 7), n + 7), 0);
    memcpy(big, "fff3", 4); /* a byte less: the last 'x' is where its CRLF should be */
    ASSERT_EQ(sv_http1_chunked_length(guarded(big, n + 6), n + 6), -400);
    memcpy(big + n - 1, "\r\n0\r\n\r\n", 7); /* the data that size: exactly the cap */
    ASSERT_EQ(sv_http1_chunked_length(guarded(big, n + 6), n + 6), SV_MAX_DRAIN);
    ASSERT_EQ(CHUNKED("10001\r\n"), 0); /* a chunk over the cap: known at once */

    /* malformed */
    ASSERT_EQ(CHUNKED("\r\nhello\r\n0\r\n\r\n"), -400);     /* no size */
    ASSERT_EQ(CHUNKED("5\nhello\n0\n\n"), -400);            /* bare LF */
    ASSERT_EQ(CHUNKED("5\r\nhello\n0\r\n\r\n"), -400);      /* bare LF after data */
    ASSERT_EQ(CHUNKED("0\r\n\n"), -400);                    /* bare LF at the end */
    ASSERT_EQ(CHUNKED("5\rx\r\nhello\r\n0\r\n\r\n"), -400); /* bare CR */
    ASSERT_EQ(CHUNKED("-5\r\nhello\r\n0\r\n\r\n"), -400);
    ASSERT_EQ(CHUNKED("+5\r\nhello\r\n0\r\n\r\n"), -400);
    ASSERT_EQ(CHUNKED("0x5\r\nhello\r\n0\r\n\r\n"), -400);
    ASSERT_EQ(CHUNKED(" 5\r\nhello\r\n0\r\n\r\n"), -400);
    ASSERT_EQ(CHUNKED("5 \r\nhello\r\n0\r\n\r\n"), -400); /* BWS only before ';' */
    ASSERT_EQ(CHUNKED("5\x00\r\nhello\r\n0\r\n\r\n"), -400);
    ASSERT_EQ(CHUNKED("5\x0b\r\nhello\r\n0\r\n\r\n"), -400);
    ASSERT_EQ(CHUNKED("2\r\nhello\r\n0\r\n\r\n"), -400); /* data longer than its size */
    ASSERT_EQ(CHUNKED("9\r\nhi\r\n0\r\n\r\nGET"), -400); /* shorter: eats the last chunk */
    ASSERT_EQ(CHUNKED("5;\r\nhello\r\n0\r\n\r\n"), -400);
    ASSERT_EQ(CHUNKED("5;a \r\nhello\r\n0\r\n\r\n"), -400);
    ASSERT_EQ(CHUNKED("5;a=\r\nhello\r\n0\r\n\r\n"), -400);
    ASSERT_EQ(CHUNKED("5;a=b c\r\nhello\r\n0\r\n\r\n"), -400);
    ASSERT_EQ(CHUNKED("5;a=\"\r\n\"\r\nhello\r\n0\r\n\r\n"), -400); /* CRLF in quotes */
    ASSERT_EQ(CHUNKED("5;a=\"x\r\nhello\r\n0\r\n\r\n"), -400);      /* unclosed */
    ASSERT_EQ(CHUNKED("5;a=\"\\\x01\"\r\nhello\r\n0\r\n\r\n"), -400);
    ASSERT_EQ(CHUNKED("5,a\r\nhello\r\n0\r\n\r\n"), -400);
    ASSERT_EQ(CHUNKED("0\r\nX-T 1\r\n\r\n"), -400); /* a trailer line without a colon */
    ASSERT_EQ(CHUNKED("0\r\nX-T : 1\r\n\r\n"), -400);
    ASSERT_EQ(CHUNKED("0\r\nX-T: 1\r\n x\r\n\r\n"), -400); /* obs-fold */
    ASSERT_EQ(CHUNKED("0\r\nX-T: \x01\r\n\r\n"), -400);
    ASSERT_EQ(CHUNKED("0\r\n\rx"), -400);
}

TEST(http1_connection)
{
    GOOD("GET / HTTP/1.1\r\nHost: h\r\n\r\n");
    ASSERT_EQ(req.keep_alive, 1);
    GOOD("GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n");
    ASSERT_EQ(req.keep_alive, 0);
    GOOD("GET / HTTP/1.1\r\nHost: h\r\nConnection: foo, CLOSE\r\n\r\n");
    ASSERT_EQ(req.keep_alive, 0);
    GOOD("GET / HTTP/1.1\r\nHost: h\r\nConnection: closed\r\n\r\n");
    ASSERT_EQ(req.keep_alive, 1);
    GOOD("GET / HTTP/1.1\r\nHost: h\r\nConnection: keep-alive\r\nConnection: close\r\n\r\n");
    ASSERT_EQ(req.keep_alive, 0);
    GOOD("GET / HTTP/1.0\r\n\r\n");
    ASSERT_EQ(req.keep_alive, 0);
    GOOD("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n");
    ASSERT_EQ(req.keep_alive, 1);
    GOOD("GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n");
    ASSERT_EQ(req.keep_alive, 0);
}

TEST(http1_absolute_form)
{
    GOOD("GET http://example.com/a/b?c=d HTTP/1.1\r\nHost: other\r\n\r\n");
    ASSERT_EQ(req.target_form, SV_TF_ABSOLUTE);
    VIEW_IS(req.path, "/a/b");
    VIEW_IS(req.query, "?c=d");
    VIEW_IS(req.host, "example.com");
    ASSERT_EQ(req.target_https, 0);
    GOOD("GET HTTP://Example.com:8080 HTTP/1.1\r\nHost: h\r\n\r\n");
    VIEW_IS(req.path, "/");
    VIEW_IS(req.query, "");
    VIEW_IS(req.host, "Example.com:8080");
    GOOD("GET https://[::1]?q HTTP/1.1\r\nHost: h\r\n\r\n");
    VIEW_IS(req.path, "/");
    VIEW_IS(req.query, "?q");
    ASSERT_EQ(req.target_https, 1); /* answered 421 (servd_respond.c) */
    /* OPTIONS of an absolute URI without a path asks about the server (§3.2.4) */
    GOOD("OPTIONS http://example.com:8001 HTTP/1.1\r\nHost: h\r\n\r\n");
    ASSERT_EQ(req.target_form, SV_TF_ASTERISK);
    VIEW_IS(req.host, "example.com:8001"); /* the URI's authority still wins */
    GOOD("OPTIONS http://example.com/ HTTP/1.1\r\nHost: h\r\n\r\n");
    ASSERT_EQ(req.target_form, SV_TF_ABSOLUTE);
    GOOD("GET / HTTP/1.1\r\nHost: h\r\n\r\n");
    ASSERT_EQ(req.target_https, 0); /* reset for the next request */
    BAD("GET http:///a HTTP/1.1\r\nHost: h\r\n\r\n", 400);
    BAD("GET http://u:p@example.com/ HTTP/1.1\r\nHost: h\r\n\r\n", 400);
    BAD("GET ftp://example.com/ HTTP/1.1\r\nHost: h\r\n\r\n", 400);
    BAD("GET http:/example.com/ HTTP/1.1\r\nHost: h\r\n\r\n", 400);
    /* Host is still required in HTTP/1.1 */
    BAD("GET http://example.com/ HTTP/1.1\r\n\r\n", 400);
}

TEST(http1_other_target_forms)
{
    BAD("GET * HTTP/1.1\r\nHost: h\r\n\r\n", 400);
    BAD("HEAD * HTTP/1.1\r\nHost: h\r\n\r\n", 400);
    GOOD("OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n");
    ASSERT_EQ(req.target_form, SV_TF_ASTERISK);
    ASSERT_EQ(req.method, SV_M_OPTIONS);
    VIEW_IS(req.path, "");
    /* authority-form is CONNECT's (RFC 9112 §3.2.3); the responder says 405 */
    GOOD("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n");
    ASSERT_EQ(req.target_form, SV_TF_AUTHORITY);
    ASSERT_EQ(req.method, SV_M_OTHER);
    BAD("CONNECT :443 HTTP/1.1\r\nHost: h\r\n\r\n", 400); /* no host */
    /* CONNECT takes no other form (RFC 9110 §9.3.6), and only a server-wide
     * OPTIONS takes the asterisk-form (RFC 9112 §3.2.4) */
    BAD("CONNECT /x HTTP/1.1\r\nHost: h\r\n\r\n", 400);
    BAD("CONNECT http://h:80/ HTTP/1.1\r\nHost: h\r\n\r\n", 400);
    BAD("CONNECT * HTTP/1.1\r\nHost: h\r\n\r\n", 400);
    BAD("POST * HTTP/1.1\r\nHost: h\r\n\r\n", 400);
    BAD("DELETE * HTTP/1.1\r\nHost: h\r\n\r\n", 400);
    BAD("FOO * HTTP/1.1\r\nHost: h\r\n\r\n", 400);
    BAD("GET example.com:80 HTTP/1.1\r\nHost: h\r\n\r\n", 400);
    BAD("GET index.html HTTP/1.1\r\nHost: h\r\n\r\n", 400);
    BAD("GET ** HTTP/1.1\r\nHost: h\r\n\r\n", 400);
}

TEST(http1_fields_for_the_responder)
{
    GOOD("GET / HTTP/1.1\r\nHost: h\r\nIf-None-Match: \"a\"\r\nif-none-match: \"b\"\r\n"
         "If-Match: *\r\nIf-Modified-Since: x\r\nIf-Unmodified-Since: y\r\n"
         "Range: bytes=0-1\r\nIf-Range: \"z\"\r\nAccept-Encoding: gzip\r\n"
         "Accept-Encoding: br\r\nRange: bytes=2-3\r\n\r\n");
    ASSERT_EQ(req.n_if_none_match, 2);
    VIEW_IS(req.if_none_match, "\"a\"");
    ASSERT_EQ(req.n_if_match, 1);
    VIEW_IS(req.if_match, "*");
    VIEW_IS(req.if_modified_since, "x");
    ASSERT_EQ(req.n_if_modified_since, 1);
    VIEW_IS(req.if_unmodified_since, "y");
    ASSERT_EQ(req.n_if_unmodified_since, 1);
    VIEW_IS(req.range, "bytes=0-1");
    ASSERT_EQ(req.n_range, 2);
    VIEW_IS(req.if_range, "\"z\"");
    ASSERT_EQ(req.n_if_range, 1);
    VIEW_IS(req.accept_encoding, "gzip");
    ASSERT_EQ(req.n_accept_encoding, 2);
    ASSERT_EQ(req.nheaders, 11);
}

/* After an error the parser never reports a later request as parsed: the
 * caller closes, so a smuggled second request is never seen. */
TEST(http1_error_stops_at_the_first_request)
{
    const char *s = "GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n"
                    "GET /admin HTTP/1.1\r\nHost: h\r\n\r\n";
    ASSERT_EQ(parse(s), -400);
}

/* Raw bytes above 0x7E are not request-target syntax, but curl and scripts
 * send them: the target is parsed and flagged, for a 301 to its encoded
 * form (respond.c); controls and DEL around them still end the line. */
TEST(http1_raw_utf8_target_is_flagged)
{
    GOOD("GET /caf\xc3\xa9.txt?q=\xc3\xa9 HTTP/1.1\r\nHost: h\r\n\r\n");
    ASSERT_EQ(req.target_8bit, 1);
    VIEW_IS(req.path, "/caf\xc3\xa9.txt");
    VIEW_IS(req.query, "?q=\xc3\xa9");
    GOOD("GET /\xff HTTP/1.1\r\nHost: h\r\n\r\n");
    ASSERT_EQ(req.target_8bit, 1);
    VIEW_IS(req.path, "/\xff");
    GOOD("GET /cafe.txt HTTP/1.1\r\nHost: h\r\n\r\n");
    ASSERT_EQ(req.target_8bit, 0); /* reset by every parse */
    BAD("GET /caf\xc3\xa9\x7f HTTP/1.1\r\nHost: h\r\n\r\n", 400);
    BAD("GET /caf\xc3\xa9\x01 HTTP/1.1\r\nHost: h\r\n\r\n", 400);
    BAD("GET /caf\xc3\xa9#x HTTP/1.1\r\nHost: h\r\n\r\n", 400);
    BAD("GET http://h\xc3\xa9/ HTTP/1.1\r\nHost: h\r\n\r\n", 400); /* not a host */
}
