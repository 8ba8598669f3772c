/*
 * http1.c - the HTTP/1.1 request-head parser (RFC 9112 §2-§7, RFC 9110 §5).
 *
 * One pass over buf[0, len) per call, never reading at or past buf + len
 * (tests run it against a PROT_NONE guard page); views into buf, a fixed
 * header array, no allocation. The caller re-parses from the start when
 * more bytes arrive that may change the answer. Bytes that only go on with
 * the last, unended line of a head (its target, a field's name or value)
 * are judged alone (sv_http1_partial(), sv_http1_still_incomplete()): a
 * parse of the whole head at each read made one sent a byte at a time cost
 * the square of its length: 578 million instructions for 30 KB, 26
 * million now (callgrind, bench/RESULTS.md).
 *
 * Every choice below is strict where framing or routing could be in doubt
 * (request smuggling: RFC 9112 §6.3, §11.2) and each one is a named test in
 * tests/unit/servd_http1.c:
 *   - up to SV_MAX_LEADING_CRLF empty lines before the request line are
 *     skipped (§2.2); every line must end in CRLF: a bare LF or bare CR
 *     anywhere -> 400;
 *   - request-line = method SP request-target SP HTTP-version, single SPs;
 *     method is a token (case-sensitive: GET, HEAD, OPTIONS; any other
 *     token, "get" too, -> SV_M_OTHER, answered 405 as HTTP.md asks, where
 *     RFC 9110 §15.6.2 allows 501 for a method servd does not know); the
 *     target holds no whitespace, control, DEL or
 *     '#'; bytes above 0x7E are not request-target syntax either, but
 *     clients send them (curl, given a URL with raw UTF-8): such a target
 *     is parsed, flagged (target_8bit) and answered with a 301 to its
 *     percent-encoded form, one of the two answers RFC 9112 §3.2 gives;
 *   - HTTP-version = "HTTP/" DIGIT "." DIGIT, case-sensitive: 1.0 and 1.1;
 *     1.2..1.9 are handled as 1.1 (RFC 9110 §2.5: the highest minor
 *     version we implement); another major -> 505; anything else -> 400;
 *   - a request line longer than SV_MAX_REQUEST_LINE -> 414, even before
 *     its end arrives, whatever its method;
 *     a head over SV_MAX_HEAD (judged on its first SV_MAX_HEAD bytes) or
 *     more than SV_MAX_HEADERS fields -> 431;
 *   - target forms (§3.2): origin-form; absolute-form with an http URI
 *     (the path is served, the URI's authority is the host, §3.2.2) or an
 *     https one (flagged target_https: answered 421, servd has no TLS);
 *     asterisk-form only for OPTIONS (served; any other method -> 400);
 *     authority-form, with a non-empty port, for CONNECT and only for it
 *     (refused with 405: servd does not tunnel; CONNECT with any other
 *     form -> 400, RFC 9110 §9.3.6); anything else -> 400;
 *   - field-name is a token followed directly by ':' (whitespace before
 *     the colon -> 400, §5.1); a line starting with SP/HTAB (obs-fold, or
 *     whitespace before the first field, §2.2, §5.2) -> 400; a line without
 *     a colon -> 400; field values hold only VCHAR, obs-text, SP and HTAB
 *     (NUL and other controls -> 400, RFC 9110 §5.5);
 *   - Host (§3.2): HTTP/1.1 without one -> 400; two Host lines -> 400; a
 *     value that is not uri-host [":" port] -> 400;
 *   - Content-Length (RFC 9110 §8.6): 1*DIGIT without sign or inner space,
 *     no overflow; a list or repeated lines only when every value is the
 *     same number; otherwise 400;
 *   - Transfer-Encoding (§6.1, §6.3): with Content-Length -> 400; in
 *     HTTP/1.0 -> 400; last coding not "chunked", chunked twice, or
 *     coding parameters -> 400; any coding before chunked ("gzip, chunked")
 *     -> 501 (§6.1: a coding we do not implement); "chunked" alone sets
 *     req->chunked, and sv_http1_chunked_length() measures the body;
 *   - Connection (§9.3, §9.6): comma-separated tokens, case-insensitive;
 *     "close" ends keep-alive; HTTP/1.0 keeps the connection only with
 *     "keep-alive".
 */
#include "http.h"

#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* Parse status of a (possibly incomplete) line. */
#define MORE 0 /* valid so far, its end has not arrived */

/* Character classes of every byte, one bit each. A table lookup replaces
 * the comparisons and switches per byte: the parser's share of a W1 request
 * fell from 1430 to 1010 instructions (callgrind, bench/RESULTS.md).
 *   C_TCHAR   token characters (RFC 9110 §5.6.2)
 *   C_FIELD   field-vchar / obs-text / SP / HTAB (RFC 9110 §5.5)
 *   C_TARGET  bytes a request-target may hold (see the head comment)
 *   C_HOST    unreserved / sub-delims (RFC 3986 §2.2, §2.3)
 *   C_HEX     HEXDIG
 * Generated from those definitions and checked byte for byte against the
 * comparisons it replaced. */
enum { C_TCHAR = 1, C_FIELD = 2, C_TARGET = 4, C_HOST = 8, C_HEX = 16 };
static const unsigned char cclass[256] = {
    0,  0,  0,  0,  0,  0,  0,  0,  0,  2,  0,  0,  0,  0,  0,  0,  /* 0x00 */
    0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  /* 0x10 */
    2,  15, 6,  3,  15, 7,  15, 15, 14, 14, 15, 15, 14, 15, 15, 6,  /* 0x20 */
    31, 31, 31, 31, 31, 31, 31, 31, 31, 31, 6,  14, 6,  14, 6,  6,  /* 0x30 */
    6,  31, 31, 31, 31, 31, 31, 15, 15, 15, 15, 15, 15, 15, 15, 15, /* 0x40 */
    15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 6,  6,  6,  7,  15, /* 0x50 */
    7,  31, 31, 31, 31, 31, 31, 15, 15, 15, 15, 15, 15, 15, 15, 15, /* 0x60 */
    15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 6,  7,  6,  15, 0,  /* 0x70 */
    2,  2,  2,  2,  2,  2,  2,  2,  2,  2,  2,  2,  2,  2,  2,  2,  /* 0x80 */
    2,  2,  2,  2,  2,  2,  2,  2,  2,  2,  2,  2,  2,  2,  2,  2,  /* 0x90 */
    2,  2,  2,  2,  2,  2,  2,  2,  2,  2,  2,  2,  2,  2,  2,  2,  /* 0xa0 */
    2,  2,  2,  2,  2,  2,  2,  2,  2,  2,  2,  2,  2,  2,  2,  2,  /* 0xb0 */
    2,  2,  2,  2,  2,  2,  2,  2,  2,  2,  2,  2,  2,  2,  2,  2,  /* 0xc0 */
    2,  2,  2,  2,  2,  2,  2,  2,  2,  2,  2,  2,  2,  2,  2,  2,  /* 0xd0 */
    2,  2,  2,  2,  2,  2,  2,  2,  2,  2,  2,  2,  2,  2,  2,  2,  /* 0xe0 */
    2,  2,  2,  2,  2,  2,  2,  2,  2,  2,  2,  2,  2,  2,  2,  2,  /* 0xf0 */
};

static int is_tchar(unsigned char c)
{
    return cclass[c] & C_TCHAR;
}

/* The spans below scan sixteen bytes per step with SSE2 (every x86-64),
 * then finish byte by byte with the class table, which is also what other
 * CPUs use. A lane classifier returns the lanes of x holding a byte that
 * ends the span; it and the table must agree on every byte (the unit tests
 * check all 256 at every position). Signed compares: bytes 0x80-0xff are
 * negative, below every bound used here. */
#if defined(__SSE2__)
static inline __m128i in_range(__m128i x, char lo, char hi)
{
    return _mm_and_si128(_mm_cmpgt_epi8(x, _mm_set1_epi8((char)(lo - 1))),
                         _mm_cmplt_epi8(x, _mm_set1_epi8((char)(hi + 1))));
}

static inline __m128i is_byte(__m128i x, char c)
{
    return _mm_cmpeq_epi8(x, _mm_set1_epi8(c));
}

/* not VCHAR (0x21-0x7e): controls, SP, DEL and 0x80-0xff */
static inline __m128i not_vchar(__m128i x)
{
    return _mm_or_si128(_mm_cmplt_epi8(x, _mm_set1_epi8(0x21)), is_byte(x, 0x7f));
}

/* not a token character: not a VCHAR, or one of the delimiters
 * DQUOTE (),/:;<=>?@[\]{} (RFC 9110 §5.6.2) - three ranges, five bytes */
static inline __m128i not_tchar(__m128i x)
{
    __m128i bad = _mm_or_si128(not_vchar(x), in_range(x, 0x28, 0x29));       /* ( ) */
    bad = _mm_or_si128(bad, in_range(x, 0x3a, 0x40));                        /* :;<=>?@ */
    bad = _mm_or_si128(bad, in_range(x, 0x5b, 0x5d));                        /* [ \ ] */
    bad = _mm_or_si128(bad, _mm_or_si128(is_byte(x, '"'), is_byte(x, ','))); /* " , */
    bad = _mm_or_si128(bad, _mm_or_si128(is_byte(x, '/'), is_byte(x, '{'))); /* / { */
    return _mm_or_si128(bad, is_byte(x, '}'));
}

/* not a request-target byte: not a VCHAR, or '#' */
static inline __m128i not_target(__m128i x)
{
    return _mm_or_si128(not_vchar(x), is_byte(x, '#'));
}

/* not field content: a control other than HTAB (0x00-0x08, 0x0a-0x1f:
 * below SP and not negative), or DEL; SP and obs-text are content */
static inline __m128i not_field(__m128i x)
{
    __m128i ctl = _mm_andnot_si128(_mm_cmplt_epi8(x, _mm_setzero_si128()),
                                   _mm_cmplt_epi8(x, _mm_set1_epi8(0x20)));
    return _mm_or_si128(_mm_andnot_si128(is_byte(x, '\t'), ctl), is_byte(x, 0x7f));
}
#endif

/* Scans p[0, n) sixteen bytes at a time for a byte that ends the span.
 * @return 1 with its index in *at, or 0 with *at where the last part,
 * shorter than sixteen bytes, starts (for the byte-by-byte scan). Never
 * reads at or past p + n. Inlined with a constant classifier. */
#if defined(__SSE2__)
static inline int wide_span(const char *p, size_t n, __m128i (*ends)(__m128i), size_t *at)
{
    size_t i = 0;
    for (; n - i >= 16; i += 16) {
        unsigned m = (unsigned)_mm_movemask_epi8(
            ends(_mm_loadu_si128((const __m128i *)(const void *)(p + i))));
        if (m) {
            *at = i + (size_t)__builtin_ctz(m);
            return 1;
        }
    }
    *at = i;
    return 0;
}
#define WIDE_SPAN(p, n, ends, at) wide_span((p), (n), (ends), (at))
#else
#define WIDE_SPAN(p, n, ends, at) (*(at) = 0, 0)
#endif

/* The byte-by-byte end of a span: from i, the first byte of p[0, n)
 * outside the class cls (a C_ bit), or n. */
static inline size_t table_span(const char *p, size_t n, size_t i, unsigned cls)
{
    while (i < n && (cclass[(unsigned char)p[i]] & cls))
        i++;
    return i;
}

/* Index of the first byte of p[0, n) that is not a token character, or n:
 * in a field line, the colon. */
static size_t tchar_span(const char *p, size_t n)
{
    size_t i;
    return WIDE_SPAN(p, n, not_tchar, &i) ? i : table_span(p, n, i, C_TCHAR);
}

/* Index of the first byte of p[0, n) that a request-target may not hold,
 * or n: in a request line, the SP before the version. */
static size_t target_span(const char *p, size_t n)
{
    size_t i;
    return WIDE_SPAN(p, n, not_target, &i) ? i : table_span(p, n, i, C_TARGET);
}

/* Whether the field name n[0, l) is lower, a lower-case literal of l
 * letters and '-', in any case. Or-ing 0x20 maps a letter's two cases to
 * the lower one, and no other token character (a field name holds only
 * those) maps to a letter or to '-': one operation per byte, no branch but
 * the comparison, unrolled since l is a constant at every call. */
static inline int name_is(const char *n, size_t l, const char *lower)
{
    for (size_t i = 0; i < l; i++)
        if ((n[i] | 0x20) != lower[i])
            return 0;
    return 1;
}

static int eq(const char *a, size_t n, const char *s)
{
    return n == strlen(s) && memcmp(a, s, n) == 0;
}

static int classify_method(const char *m, size_t n)
{
    if (eq(m, n, "GET"))
        return SV_M_GET;
    if (eq(m, n, "HEAD"))
        return SV_M_HEAD;
    if (eq(m, n, "OPTIONS"))
        return SV_M_OPTIONS;
    return SV_M_OTHER;
}

/* ---- host syntax (RFC 3986 §3.2.2, §3.2.3) ---- */

static int is_unreserved_or_sub(unsigned char c)
{
    return cclass[c] & C_HOST;
}

static int is_hex(unsigned char c)
{
    return cclass[c] & C_HEX;
}

/* Host = uri-host [ ":" port ] with uri-host = IP-literal / IPv4address /
 * reg-name (IPv4address is a reg-name syntactically). IP-literal is
 * "[" 1*( HEXDIG / ":" / "." / unreserved / sub-delims ) "]" - this covers
 * IPv6address and IPvFuture without resolving either. port = *DIGIT (at most
 * 5 digits: a longer one is not a port). @param need_host: the host part may
 * not be empty (an http URI's authority, RFC 9110 §4.2.1).
 * @return 0 when valid. */
static int host_check(const char *s, size_t n, int need_host)
{
    size_t i = 0;
    if (i < n && s[i] == '[') {
        i++;
        size_t start = i;
        while (i < n && s[i] != ']') {
            unsigned char c = (unsigned char)s[i];
            if (!(is_hex(c) || c == ':' || is_unreserved_or_sub(c)))
                return -1;
            i++;
        }
        if (i >= n || i == start)
            return -1;
        i++; /* ']' */
    } else {
        while (i < n && s[i] != ':') {
            /* the usual bytes first: a table test each (':' and '%' are
             * neither unreserved nor sub-delims, so the run stops at them) */
            while (i < n && is_unreserved_or_sub((unsigned char)s[i]))
                i++;
            if (i == n || s[i] == ':')
                break;
            if (s[i] != '%') /* any other byte ends the run: not a host byte */
                return -1;
            if (n - i < 3 || !is_hex((unsigned char)s[i + 1]) || !is_hex((unsigned char)s[i + 2]))
                return -1;
            i += 3;
        }
        if (i == 0 && need_host)
            return -1;
    }
    if (i == n)
        return 0;
    if (s[i] != ':')
        return -1;
    i++;
    if (n - i > 5)
        return -1;
    for (; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return -1;
    return 0;
}

/* The last Host value that passed host_check in this thread (each worker
 * parses on its own thread). Every request to an origin carries the same
 * one, and comparing it costs a fraction of checking it byte by byte. Only
 * a value that passed is kept, so a value equal to it passes too: this
 * changes no answer. */
static _Thread_local struct {
    size_t len; /* 0: nothing kept */
    char bytes[64];
} host_seen;

/* host_check() of a Host field's value (need_host 0), remembered. */
static int host_field_check(const char *s, size_t n)
{
    if (n != 0 && n == host_seen.len && memcmp(s, host_seen.bytes, n) == 0)
        return 0;
    if (host_check(s, n, 0) != 0)
        return -1;
    if (n <= sizeof host_seen.bytes) {
        memcpy(host_seen.bytes, s, n);
        host_seen.len = n;
    }
    return 0;
}

/* ---- request line ---- */

static int request_line(const char *p, size_t n, int complete, sv_request *req);

/* What the first n bytes of a request line prove when its end has not
 * been seen, or when it is over SV_MAX_REQUEST_LINE: MORE, or the negated
 * status (and the method, once its token has ended) that those bytes alone
 * give. A line over the limit is judged on its first SV_MAX_REQUEST_LINE - 1
 * bytes, the bytes that show it is: 400 or 505 when they prove that, else
 * 414, whatever the method (HTTP.md). So a line is refused with the same
 * status and method however it arrives, whole or a byte at a time: servd
 * answers the first refusal, and a HEAD's has no body. */
static int line_prefix(const char *p, size_t n, sv_request *req)
{
    int over = n + 2 > SV_MAX_REQUEST_LINE;
    if (over)
        n = SV_MAX_REQUEST_LINE - 1;
    int rc = request_line(p, n, 0, req);
    return rc < 0 || !over ? rc : -414;
}

/* Parses the request line p[0, n) (CRLF excluded). When complete is 0 the
 * bytes are only a prefix of the line: @return MORE when they could still
 * start a valid line, or the negated status that they already prove. */
static int request_line(const char *p, size_t n, int complete, sv_request *req)
{
    size_t i = 0;
    if (n >= 4 && memcmp(p, "GET ", 4) == 0) { /* nearly every request */
        i = 3;
        req->method = SV_M_GET;
    } else {
        while (i < n && is_tchar((unsigned char)p[i]))
            i++;
        if (i == n)
            return complete ? -400 : MORE;
        if (i == 0 || p[i] != ' ')
            return -400;
        req->method = classify_method(p, i);
    }
    req->method_tok.ptr = p;
    req->method_tok.len = i;
    size_t t = ++i;
    i += target_span(p + i, n - i);
    while (i < n && (unsigned char)p[i] > 0x7f) {
        req->target_8bit = 1; /* raw UTF-8: see the head comment */
        i++;
        i += target_span(p + i, n - i);
    }
    if (i == n)
        return complete ? -400 : MORE;
    if (i == t || p[i] != ' ')
        return -400; /* empty target, a second SP, '#', a control or DEL */
    req->target.ptr = p + t;
    req->target.len = i - t;
    i++;

    /* HTTP-version = HTTP-name "/" DIGIT "." DIGIT; HTTP/1.1 first */
    size_t vlen = n - i;
    if (complete && vlen == 8 && memcmp(p + i, "HTTP/1.1", 8) == 0) {
        req->minor = 1;
        req->version = (sf_view){p + i, 8};
        return 1;
    }
    static const char pat[] = "HTTP/9.9";
    for (size_t k = 0; k < vlen; k++) {
        char c = p[i + k];
        if (k >= 8)
            return -400;
        if (pat[k] == '9' ? (c < '0' || c > '9') : c != pat[k])
            return -400;
    }
    if (!complete)
        return MORE;
    if (vlen != 8)
        return -400;
    req->version = (sf_view){p + i, 8};
    if (p[i + 5] != '1')
        return -505;
    req->minor = p[i + 7] == '0' ? 0 : 1;
    return 1;
}

/* Splits the target into path and query and checks its form (§3.2). */
static int target_form(sv_request *req)
{
    const char *t = req->target.ptr;
    size_t n = req->target.len;
    if (req->method == SV_M_OTHER && eq(req->method_tok.ptr, req->method_tok.len, "CONNECT")) {
        /* CONNECT takes the authority-form and only it (RFC 9110 §9.3.6):
         * uri-host ":" port (§3.2.3), and CONNECT has no default port, so
         * at least one port digit */
        size_t d = n;
        while (d > 0 && t[d - 1] >= '0' && t[d - 1] <= '9')
            d--;
        if (d == n || d < 2 || t[d - 1] != ':' || host_check(t, n, 1) != 0)
            return -400;
        req->target_form = SV_TF_AUTHORITY;
        req->host = req->target;
        req->path.ptr = t + n;
        req->path.len = 0;
        req->query = req->path;
        return 0;
    }
    if (t[0] == '/') {
        req->target_form = SV_TF_ORIGIN;
        const char *q = memchr(t, '?', n);
        size_t plen = q ? (size_t)(q - t) : n;
        req->path.ptr = t;
        req->path.len = plen;
        req->query.ptr = t + plen;
        req->query.len = n - plen;
        return 0;
    }
    if (n == 1 && t[0] == '*') {
        /* only a server-wide OPTIONS takes the asterisk-form (§3.2.4) */
        if (req->method != SV_M_OPTIONS)
            return -400;
        req->target_form = SV_TF_ASTERISK;
        req->path.ptr = t + 1;
        req->path.len = 0;
        req->query = req->path;
        return 0;
    }
    size_t s;
    if (n >= 7 && sv_ieq(t, 7, "http://"))
        s = 7;
    else if (n >= 8 && sv_ieq(t, 8, "https://"))
        s = 8;
    else
        return -400; /* authority-form, relative references, other schemes */
    size_t a = s;
    while (a < n && t[a] != '/' && t[a] != '?')
        a++;
    if (memchr(t + s, '@', a - s) || host_check(t + s, a - s, 1) != 0)
        return -400; /* userinfo is refused (RFC 9110 §4.2.4) */
    req->target_form = SV_TF_ABSOLUTE;
    req->target_https = s == 8;
    req->host.ptr = t + s;
    req->host.len = a - s;
    const char *q = memchr(t + a, '?', n - a);
    size_t qoff = q ? (size_t)(q - t) : n;
    if (qoff == n && a == n && req->method == SV_M_OPTIONS) {
        req->target_form = SV_TF_ASTERISK; /* the server as a whole (§3.2.4) */
        req->path.ptr = t + n;
        req->path.len = 0;
    } else if (qoff == a) {
        req->path.ptr = "/"; /* empty path-abempty means "/" (§3.2.1) */
        req->path.len = 1;
    } else {
        req->path.ptr = t + a;
        req->path.len = qoff - a;
    }
    req->query.ptr = t + qoff;
    req->query.len = n - qoff;
    return 0;
}

/* ---- header fields ---- */

/* Index of the first byte of p[0, n) that may not be in a field value
 * (field-vchar, obs-text, SP, HTAB: RFC 9110 §5.5), or n. In a well-formed
 * line that byte is the CR of its CRLF, so one pass both checks the value
 * and finds the line's end. The wide scans, the length switch in field()
 * and the fast paths of request_line() are measured in bench/RESULTS.md
 * ("Changes kept"). */
static size_t value_span(const char *p, size_t n)
{
    size_t i;
    return WIDE_SPAN(p, n, not_field, &i) ? i : table_span(p, n, i, C_FIELD);
}

/* Parses the field line that starts at p, with n bytes available: sets
 * *name, *value (OWS trimmed) and *linelen (CRLF included). @return 1, MORE
 * when the line has not ended yet (valid so far; a CR as the last byte may
 * be the first half of its CRLF), or -400: no colon, empty name or
 * whitespace before the colon (obs-fold too), a byte not allowed in a value,
 * or a bare CR or LF. Inlined: called from the trailer section of a
 * chunked body too, it was left out of line, and the header loop took 44
 * more instructions per request (callgrind, bench/http/profile.py). */
static inline __attribute__((always_inline)) int field_line(const char *p, size_t n, sf_view *name,
                                                            sf_view *value, size_t *linelen)
{
    size_t i = tchar_span(p, n);
    if (i == n || (p[i] == '\r' && i + 1 == n))
        return MORE;
    if (i == 0 || p[i] != ':')
        return -400;
    name->ptr = p;
    name->len = i;
    i++;
    size_t e = i + value_span(p + i, n - i);
    if (e == n || (p[e] == '\r' && e + 1 == n))
        return MORE;
    if (p[e] != '\r' || p[e + 1] != '\n')
        return -400;
    *linelen = e + 2;
    while (i < e && sv_is_ows(p[i]))
        i++;
    while (e > i && sv_is_ows(p[e - 1]))
        e--;
    value->ptr = p + i;
    value->len = e - i;
    return 1;
}

/* Parse state across field lines. */
typedef struct fstate {
    int have_cl;
    unsigned n_host, n_te;
    int te_last_chunked, te_chunked_count, te_other, te_bad;
    int conn_close, conn_keep_alive;
} fstate;

/* Content-Length = 1*DIGIT, possibly as a list of identical values. */
static int content_length(sv_request *req, fstate *st, sf_view v)
{
    size_t i = 0;
    int elements = 0;
    while (i <= v.len) {
        while (i < v.len && sv_is_ows(v.ptr[i]))
            i++;
        size_t d = i;
        uint64_t x = 0;
        while (i < v.len && v.ptr[i] >= '0' && v.ptr[i] <= '9') {
            unsigned dig = (unsigned)(v.ptr[i] - '0');
            if (x > (UINT64_MAX - dig) / 10)
                return -400; /* overflow */
            x = x * 10 + dig;
            i++;
        }
        if (i == d)
            return -400; /* empty element, sign, or other byte */
        while (i < v.len && sv_is_ows(v.ptr[i]))
            i++;
        if (i < v.len && v.ptr[i] != ',')
            return -400;
        if (st->have_cl && x != req->body_len)
            return -400;
        st->have_cl = 1;
        req->body_len = x;
        elements++;
        i++; /* past ',' or the end */
    }
    return elements ? 0 : -400;
}

/* Transfer-Encoding = #transfer-coding; only the codings' names matter.
 * Lines of the field form one list, in order. */
static void transfer_encoding(fstate *st, sf_view v)
{
    size_t i = 0;
    st->n_te++;
    for (;;) {
        while (i < v.len && (sv_is_ows(v.ptr[i]) || v.ptr[i] == ','))
            i++;
        if (i >= v.len)
            return;
        size_t t = i;
        while (i < v.len && is_tchar((unsigned char)v.ptr[i]))
            i++;
        if (i == t) {
            st->te_bad = 1; /* parameters (';') or junk */
            return;
        }
        const char *c = v.ptr + t;
        size_t n = i - t;
        st->te_last_chunked = sv_ieq(c, n, "chunked");
        if (st->te_last_chunked)
            st->te_chunked_count++;
        else
            st->te_other = 1;
        while (i < v.len && sv_is_ows(v.ptr[i]))
            i++;
        if (i < v.len && v.ptr[i] != ',') {
            st->te_bad = 1;
            return;
        }
    }
}

/* Connection = #connection-option; elements that are not tokens are
 * ignored (they cannot name an option). */
static void connection(fstate *st, sf_view v)
{
    size_t i = 0;
    while (i < v.len) {
        while (i < v.len && (sv_is_ows(v.ptr[i]) || v.ptr[i] == ','))
            i++;
        size_t t = i;
        while (i < v.len && v.ptr[i] != ',')
            i++;
        size_t e = i;
        while (e > t && sv_is_ows(v.ptr[e - 1]))
            e--;
        if (sv_ieq(v.ptr + t, e - t, "close"))
            st->conn_close = 1;
        else if (sv_ieq(v.ptr + t, e - t, "keep-alive"))
            st->conn_keep_alive = 1;
    }
}

static void first(sf_view *slot, unsigned *count, sf_view v)
{
    if ((*count)++ == 0)
        *slot = v;
}

/* Interprets one field the server cares about. The switch on the name's
 * length leaves at most two comparisons per field (User-Agent, Accept and
 * the like compare against nothing). */
static int field(sv_request *req, fstate *st, sf_view name, sf_view v)
{
    const char *n = name.ptr;
    size_t l = name.len;
    switch (l) {
    case 4:
        if (name_is(n, l, "host")) {
            if (++st->n_host > 1 || host_field_check(v.ptr, v.len) != 0)
                return -400;
            if (req->host.len == 0) /* else the target's authority, which wins */
                req->host = v;
        }
        break;
    case 5:
        if (name_is(n, l, "range"))
            first(&req->range, &req->n_range, v);
        break;
    case 8:
        if (name_is(n, l, "if-match"))
            first(&req->if_match, &req->n_if_match, v);
        else if (name_is(n, l, "if-range"))
            first(&req->if_range, &req->n_if_range, v);
        break;
    case 10:
        if (name_is(n, l, "connection"))
            connection(st, v);
        break;
    case 13:
        if (name_is(n, l, "if-none-match"))
            first(&req->if_none_match, &req->n_if_none_match, v);
        break;
    case 14:
        if (name_is(n, l, "content-length"))
            return content_length(req, st, v);
        break;
    case 15:
        if (name_is(n, l, "accept-encoding"))
            first(&req->accept_encoding, &req->n_accept_encoding, v);
        break;
    case 17:
        if (name_is(n, l, "transfer-encoding"))
            transfer_encoding(st, v);
        else if (name_is(n, l, "if-modified-since"))
            first(&req->if_modified_since, &req->n_if_modified_since, v);
        break;
    case 19:
        if (name_is(n, l, "if-unmodified-since"))
            first(&req->if_unmodified_since, &req->n_if_unmodified_since, v);
        break;
    }
    return 0;
}

/* Checks framing and connection handling once every field is known. */
static int finish(sv_request *req, const fstate *st)
{
    if (st->n_te) {
        if (st->have_cl || req->minor == 0 || st->te_bad || !st->te_last_chunked ||
            st->te_chunked_count != 1)
            return -400;
        if (st->te_other)
            return -501;
        req->chunked = 1;
    }
    if (req->minor == 1 && st->n_host == 0)
        return -400;
    if (req->minor == 1)
        req->keep_alive = !st->conn_close;
    else
        req->keep_alive = st->conn_keep_alive && !st->conn_close;
    return 0;
}

static void reset(sv_request *req)
{
    sf_view none = {"", 0};
    req->method = 0;
    req->method_tok = req->target = req->path = req->query = req->version = none;
    req->minor = 1;
    req->keep_alive = 0;
    req->head_len = 0;
    req->body_len = 0;
    req->chunked = 0;
    req->nheaders = 0;
    req->host = req->accept_encoding = req->range = req->if_match = req->if_none_match = none;
    req->if_modified_since = req->if_unmodified_since = req->if_range = none;
    req->n_if_none_match = req->n_if_match = 0;
    req->n_accept_encoding = req->n_range = req->n_if_range = 0;
    req->n_if_modified_since = req->n_if_unmodified_since = 0;
    req->target_form = 0;
    req->target_8bit = 0;
    req->target_https = 0;
}

/* Finds the end of the line starting at pos: sets *eol to the index of its
 * LF. @return 1 when found, MORE when the line has not ended, -400 for a
 * bare LF (no CR before it). */
static int line_end(const char *buf, size_t len, size_t pos, size_t *eol)
{
    const char *lf = memchr(buf + pos, '\n', len - pos);
    if (!lf)
        return MORE;
    *eol = (size_t)(lf - buf);
    if (*eol == pos || buf[*eol - 1] != '\r')
        return -400;
    return 1;
}

/* Length of the partial line at [pos, len) without a trailing CR, which
 * may be the first half of its CRLF. */
static size_t partial_len(const char *buf, size_t len, size_t pos)
{
    size_t n = len - pos;
    return n > 0 && buf[len - 1] == '\r' ? n - 1 : n;
}

int sv_is_token(const char *s, size_t n)
{
    return n > 0 && tchar_span(s, n) == n;
}

size_t sv_http1_empty_lines(const char *buf, size_t len)
{
    size_t pos = 0;
    while (len - pos >= 2 && buf[pos] == '\r' && buf[pos + 1] == '\n')
        pos += 2;
    return pos;
}

/* ---- chunked request bodies (RFC 9112 §7.1) ---- */

static size_t ows_span(const char *p, size_t n)
{
    size_t i = 0;
    while (i < n && sv_is_ows(p[i]))
        i++;
    return i;
}

/* A quoted-string at p[0] == '"' (RFC 9110 §5.6.4): @return its length,
 * quotes included, or 0 if it does not close within p[0, n) or holds a
 * byte qdtext and quoted-pair do not allow (CR, LF and other controls). */
static size_t quoted_span(const char *p, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c == '"')
            return i + 1;
        if (c == '\\' && ++i == n)
            return 0;
        if (!(cclass[(unsigned char)p[i]] & C_FIELD))
            return 0;
    }
    return 0;
}

/* The chunk extensions after a chunk-size, p[0, n) being the rest of its
 * line: *( BWS ";" BWS chunk-ext-name [ BWS "=" BWS chunk-ext-val ] ),
 * name a token, value a token or a quoted-string (§7.1.1). Ignored once
 * they parse. @return 0, or -400. */
static int chunk_ext(const char *p, size_t n)
{
    size_t i = 0;
    while (i < n) {
        i += ows_span(p + i, n - i);
        if (i == n || p[i] != ';')
            return -400;
        i++;
        i += ows_span(p + i, n - i);
        size_t t = tchar_span(p + i, n - i);
        if (t == 0)
            return -400;
        i += t;
        size_t j = i + ows_span(p + i, n - i);
        if (j == n || p[j] != '=')
            continue; /* a name alone: whitespace is only allowed before ';' */
        i = j + 1;
        i += ows_span(p + i, n - i);
        t = i < n && p[i] == '"' ? quoted_span(p + i, n - i) : tchar_span(p + i, n - i);
        if (t == 0)
            return -400;
        i += t;
    }
    return 0;
}

int sv_http1_chunked_length(const char *buf, size_t len)
{
    size_t pos = 0, eol;
    for (;;) { /* chunk-size [ chunk-ext ] CRLF [ chunk-data CRLF ] */
        int rc = line_end(buf, len, pos, &eol);
        if (rc != 1)
            return rc;                 /* MORE or -400 (a bare LF) */
        size_t i = pos, end = eol - 1; /* the line without its CRLF */
        uint64_t size = 0;
        for (; i < end && is_hex((unsigned char)buf[i]); i++) {
            unsigned char c = (unsigned char)buf[i];
            unsigned d = c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
            if (size <= SV_MAX_DRAIN) /* larger is all the same: too long */
                size = size * 16 + d;
        }
        if (i == pos || chunk_ext(buf + i, end - i) != 0)
            return -400;
        pos = eol + 1;
        if (size == 0)
            break; /* the last chunk */
        if (size > SV_MAX_DRAIN)
            return MORE; /* never skipped, however much arrives */
        if (len - pos < size + 2)
            return MORE;
        pos += size;
        if (buf[pos] != '\r' || buf[pos + 1] != '\n')
            return -400; /* data longer than its size, or a bare LF */
        pos += 2;
    }
    for (;;) { /* trailer-section CRLF */
        if (len - pos >= 2 && buf[pos] == '\r' && buf[pos + 1] == '\n') {
            pos += 2;
            return pos <= SV_MAX_DRAIN ? (int)pos : MORE;
        }
        sf_view name, value;
        size_t n;
        int rc = field_line(buf + pos, len - pos, &name, &value, &n);
        if (rc != 1)
            return rc;
        pos += n;
    }
}

/* A request line at buf[pos] that has not arrived whole (rc MORE) or ends
 * in a bare LF at buf[eol] (rc negative): what the bytes before its end
 * prove first, as line_prefix() says, else incomplete or rc. Out of the
 * request path: a line arrives whole in nearly every read. */
__attribute__((noinline)) static int line_unended(const char *buf, size_t len, size_t pos,
                                                  size_t eol, int rc, sv_request *req)
{
    int r = line_prefix(buf + pos, partial_len(buf, rc == MORE ? len : eol, pos), req);
    if (r < 0)
        return r;
    if (rc == MORE)
        return len >= SV_MAX_HEAD ? -431 : SV_PARSE_INCOMPLETE;
    return rc;
}

static inline __attribute__((always_inline)) int parse_head(const char *buf, size_t len,
                                                            sv_request *req)
{
    reset(req);
    int rc;

    /* Empty lines before the request line (RFC 9112 §2.2). */
    size_t pos = sv_http1_empty_lines(buf, len);
    if (pos > 2 * SV_MAX_LEADING_CRLF || (pos < len && buf[pos] == '\n'))
        return -400;

    /* The request line. */
    size_t eol = 0, start = pos;
    rc = line_end(buf, len, pos, &eol);
    if (__builtin_expect(rc != 1, 0)) /* 1: the line has ended at eol */
        return line_unended(buf, len, pos, eol, rc, req);
    if (eol + 1 - start > SV_MAX_REQUEST_LINE)
        return line_prefix(buf + pos, eol - 1 - pos, req);
    rc = request_line(buf + pos, eol - 1 - pos, 1, req);
    if (rc < 0)
        return rc;
    if ((rc = target_form(req)) < 0)
        return rc;
    pos = eol + 1;

    /* Field lines up to the empty line. */
    fstate st;
    memset(&st, 0, sizeof st);
    for (;;) {
        if (pos > SV_MAX_HEAD)
            return -431;
        if (pos >= len)
            return len >= SV_MAX_HEAD ? -431 : SV_PARSE_INCOMPLETE;
        if (buf[pos] == '\r') {
            if (len - pos < 2)
                return len >= SV_MAX_HEAD ? -431 : SV_PARSE_INCOMPLETE;
            if (buf[pos + 1] != '\n')
                return -400; /* bare CR */
            pos += 2;
            break;
        }
        sf_view name, value;
        size_t linelen = 0;
        rc = field_line(buf + pos, len - pos, &name, &value, &linelen);
        if (rc < 0)
            return rc;
        if (rc == MORE)
            return len >= SV_MAX_HEAD ? -431 : SV_PARSE_INCOMPLETE;
        eol = pos + linelen - 1;
        if (eol + 1 > SV_MAX_HEAD)
            return -431;
        if (req->nheaders == SV_MAX_HEADERS)
            return -431;
        req->headers[req->nheaders].name = name;
        req->headers[req->nheaders].value = value;
        req->nheaders++;
        if ((rc = field(req, &st, name, value)) < 0)
            return rc;
        pos = eol + 1;
    }
    if (pos > SV_MAX_HEAD)
        return -431;
    if ((rc = finish(req, &st)) < 0)
        return rc;
    req->head_len = pos;
    return (int)pos;
}

int sv_http1_partial(const char *buf, size_t len, size_t *at)
{
    size_t start = sv_http1_empty_lines(buf, len);
    const char *lf = memrchr(buf + start, '\n', len - start);
    const char *p = lf ? lf + 1 : buf + start;
    size_t n = (size_t)(buf + len - p);
    *at = (size_t)(p - buf);
    if (lf && n == 0)
        return SV_PARTIAL_NAME; /* a field line or the blank line to come: a tchar starts a name */
    if (n == 0 || p[n - 1] == '\r')
        return SV_PARTIAL_NONE; /* the request line to come, or the CR of a CRLF */
    if (lf)                     /* a field line: all tchar, or a name, ':' and a value */
        return memchr(p, ':', n) ? SV_PARTIAL_VALUE : SV_PARTIAL_NAME;
    /* the request line: within the target once its one SP is there */
    const char *sp = memchr(p, ' ', n);
    if (sp && !memchr(sp + 1, ' ', (size_t)(buf + len - sp - 1)))
        return SV_PARTIAL_TARGET;
    return SV_PARTIAL_NONE;
}

int sv_http1_still_incomplete(int state, size_t at, const char *buf, size_t old, size_t len)
{
    if (old >= len || len >= SV_MAX_HEAD || at > old)
        return 0;
    const char *p = buf + old;
    size_t n = len - old;
    switch (state) {
    case SV_PARTIAL_TARGET:
        /* (at the limit, line_prefix() answers 414: the parser must see it) */
        return len - at + 2 <= SV_MAX_REQUEST_LINE && target_span(p, n) == n;
    case SV_PARTIAL_NAME:
        return tchar_span(p, n) == n;
    case SV_PARTIAL_VALUE:
        return value_span(p, n) == n; /* stops at a CR, LF or a byte refused */
    }
    return 0;
}

/* A refusal of more than SV_MAX_HEAD bytes is judged again on the first
 * SV_MAX_HEAD of them: a head arriving in reads is refused with 431 once
 * that many bytes hold no end of it, so a fault past them (a line without
 * a colon, a bad byte in a value, a bare CR) must not make a 400 of a
 * head that arrives whole; a fault within them is the same 400 either
 * way. Only a refusal pays for the test. */
int sv_http1_parse(const char *buf, size_t len, sv_request *req)
{
    int rc = parse_head(buf, len, req);
    if (__builtin_expect(rc < 0, 0) && len > SV_MAX_HEAD)
        return sv_http1_parse(buf, SV_MAX_HEAD, req);
    return rc;
}
