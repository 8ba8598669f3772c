/*
 * http.h - servd's HTTP/1.1 protocol layer: no I/O, no state between
 * requests that changes an answer (the parser remembers, per thread, the
 * last Host value that passed its check, to compare instead of check).
 *
 *   sv_http1_parse()   request head bytes  -> sv_request (views into the buffer)
 *   sv_respond()       sv_request + pack   -> sv_plan (iovecs ready for writev)
 *
 * The runtime (worker.c, conn.c) reads into its worker's read buffer (or a
 * connection's held input), calls the parser, calls sv_respond() and writes
 * the plan. Nothing here allocates per request: views point into the read
 * buffer, the pack map, the loop's Date line or a scratch buffer of the
 * worker's batch (a reader's path cache is allocated once, pathcache.h).
 */
#ifndef SV_HTTP_H
#define SV_HTTP_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>

#include "sf/httpdate.h"
#include "sf/store.h"

/* ---- Limits (each is a named constant; see docs/servd.1) ---- */

/* Longest request line (method SP target SP version CRLF): longer -> 414.
 * 8 KiB is what nginx and most CDNs allow for URLs. */
#define SV_MAX_REQUEST_LINE 8192
/* Largest request head (request line + header fields + blank line): -> 431.
 * 32 KiB: nginx's default total (4 x 8 KiB large_client_header_buffers) and
 * the header total a CDN such as Cloudflare forwards; large cookies reach
 * past 16 KiB. Heads up to SV_HEAD_BUF (server.h) are held in a buffer of
 * that size, longer ones move to one of this size (conn.c). */
#define SV_MAX_HEAD 32768
/* Most header fields in one request: more -> 431. Apache's default
 * (LimitRequestFields) and h2o's; a browser behind a CDN sends 20-40. */
#define SV_MAX_HEADERS 100
/* Largest request body (Content-Length) drained on a keep-alive connection,
 * and only one that came whole with its head (conn.c answer(): so at most
 * the read buffer or the input buffer, SV_MAX_HEAD, less the head in
 * practice); any other is answered and the connection closed. */
#define SV_MAX_DRAIN 65536
/* Most disjoint ranges honoured in one Range header, merged as they are
 * read (range.c): more at any point -> the Range is ignored and the whole
 * representation sent (RFC 9110 §14.2 allows it). */
#define SV_MAX_RANGES 16
/* Scratch for formatted lines (206, 416, 301, multipart boundaries, a 406):
 * a batch of responses has SV_BATCH_SCRATCH of them (server.h). A 301's
 * Location holds the request's query: room for any target a request line
 * can carry (a link to /docs with a 4 KB OAuth state got a 414 where nginx
 * and h2o redirect), unless raw UTF-8 in it triples when encoded. Pages
 * of it never used are never touched. */
#define SV_SCRATCH (SV_MAX_REQUEST_LINE + 4096)
/* iovecs one plan may need, at most (multipart 206): its status block, the
 * representation block (3 pieces when a Last-Modified ahead of the clock is
 * replaced: respond.c, sv__add_block), Date, 2 per range, the closing boundary;
 * and 2 to spare. */
#define SV_PLAN_IOV (1 + 3 + 1 + 2 * SV_MAX_RANGES + 1 + 2)
/* Empty lines (CRLF) skipped before a request line (RFC 9112 §2.2 asks to
 * ignore "at least one", sent by old clients after a POST body). More -> 400:
 * a stream of empty lines is not a request. */
#define SV_MAX_LEADING_CRLF 16

/* ---- Requests ---- */

enum sv_method {
    SV_M_GET = 1,
    SV_M_HEAD,
    SV_M_OTHER,   /* any other token (POST, PROPFIND, get): 405 */
    SV_M_OPTIONS, /* the methods and CORS headers of a path, or of "*" */
};

/* Optional whitespace, OWS (RFC 9110 §5.6.3). */
static inline int sv_is_ows(char c)
{
    return c == ' ' || c == '\t';
}

/* Whether a[0, n) equals the lower-case literal lower, ignoring ASCII case
 * (field names, tokens and codings are case-insensitive). */
static inline int sv_ieq(const char *a, size_t n, const char *lower)
{
    size_t l = strlen(lower);
    if (n != l)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = a[i];
        if (c >= 'A' && c <= 'Z')
            c = (char)(c - 'A' + 'a');
        if (c != lower[i])
            return 0;
    }
    return 1;
}

typedef struct sv_header {
    sf_view name;
    sf_view value; /* leading and trailing whitespace removed */
} sv_header;

typedef struct sv_request {
    int method; /* enum sv_method */
    sf_view method_tok;
    sf_view target;    /* the raw request-target */
    sf_view path;      /* origin-form: target up to '?'; absolute-form: the path part
                          (a static "/" when the URI has none); asterisk-form: empty */
    sf_view query;     /* from '?' on, including it; empty when there is none */
    int minor;         /* 0 for HTTP/1.0, 1 for HTTP/1.1 (and HTTP/1.2..1.9) */
    sf_view version;   /* "HTTP/1.1" as sent ("HTTP/2.0" of a 505 too); empty until
                          the request line has been read whole */
    int keep_alive;    /* after the version default and Connection tokens */
    size_t head_len;   /* bytes of the head, including the blank line */
    uint64_t body_len; /* Content-Length (0 when absent) */
    int chunked;       /* Transfer-Encoding ends in chunked: the body's length is
                          sv_http1_chunked_length() of the bytes after the head */
    size_t nheaders;
    sv_header headers[SV_MAX_HEADERS];
    /* fields the responder needs, found while parsing (empty when absent) */
    sf_view host, accept_encoding, range, if_match, if_none_match, if_modified_since,
        if_unmodified_since, if_range;
    unsigned n_if_none_match, n_if_match; /* lines seen; lists are combined by the responder */
    /* Lines seen of the other fields above (the view is the first line).
     * Accept-Encoding lines form one list; two Range / If-Range /
     * If-(Un)Modified-Since lines make that field invalid. */
    unsigned n_accept_encoding, n_range, n_if_range, n_if_modified_since, n_if_unmodified_since;
    unsigned target_form; /* enum sv_target_form */
    /* The target holds bytes above 0x7E (raw UTF-8, as curl sends a URL
     * typed with it): not request-target syntax, so it is answered with a
     * 301 to the same target percent-encoded (RFC 9112 §3.2). */
    int target_8bit;
    /* absolute-form with the https scheme: servd has no TLS, so the
     * request did not arrive the way its URI requires (RFC 9110 §7.4) */
    int target_https;
} sv_request;

/* RFC 9112 §3.2 request-target forms the parser accepts (anything else,
 * and authority-form with a method other than CONNECT -> 400). */
enum sv_target_form {
    SV_TF_ORIGIN = 1,    /* "/path?q" */
    SV_TF_ABSOLUTE = 2,  /* "http://host[:port]/path?q": host is the URI's authority */
    SV_TF_ASTERISK = 3,  /* "*": OPTIONS only (any other method -> 400) */
    SV_TF_AUTHORITY = 4, /* "host:port": only for CONNECT (§3.2.3), answered 405; path
                            and query are empty, host is the target */
};

/* Parse results other than a head length. */
#define SV_PARSE_INCOMPLETE 0

/* Parses one request head at buf[0, len) (RFC 9112 §2-§7). Reads no byte
 * at or after buf + len. The views in *req point into buf.
 * @return  > 0 : the head is complete and that many bytes long; *req is set.
 *          0   : incomplete; call again with more bytes (only when
 *                len < SV_MAX_HEAD and the request line so far is short).
 *          < 0 : the negated status to answer before closing the connection:
 *                -400, -414 (request line), -431 (head), -501 (transfer coding
 *                not implemented), -505 (HTTP version). Errors are reported
 *                as soon as the bytes so far prove them (a bad request line
 *                is refused before its CRLF arrives), and judged on the bytes
 *                servd would hold (a head on its first SV_MAX_HEAD, a request
 *                line on its first SV_MAX_REQUEST_LINE - 1), so that a head
 *                arriving whole and in pieces gets the same answer. On
 *                error req->minor (1 until parsed) and req->method (0 until
 *                parsed) are set, and, when the request line was read whole
 *                and split (the error lies in its target or after it, or
 *                is its version's 505), method_tok, target and version. */
int sv_http1_parse(const char *buf, size_t len, sv_request *req);

/* What sv_http1_partial() found the unended last line of an incomplete
 * head to be: a state in which only some bytes can follow without the
 * parser's answer changing from incomplete. */
enum sv_partial {
    SV_PARTIAL_NONE = 0, /* anything else: the next bytes must be parsed */
    SV_PARTIAL_TARGET,   /* the request line, within its target */
    SV_PARTIAL_NAME,     /* a field line, within its name (no colon yet) or not begun */
    SV_PARTIAL_VALUE,    /* a field line, within its value (not ending in CR) */
};

/* The unended last line of buf[0, len), a head sv_http1_parse() found
 * incomplete: its state (enum sv_partial) and, in *at, where it starts.
 * The connection keeps both, so that more bytes of that line can be
 * judged alone by sv_http1_still_incomplete() instead of the whole head
 * being parsed again at each read (a head sent a byte at a time cost a
 * parse of all it held so far per byte: quadratic in its length). */
int sv_http1_partial(const char *buf, size_t len, size_t *at);

/* Whether buf[0, len) is certainly still incomplete, given that
 * sv_http1_parse() found its first old bytes (old < len) incomplete with
 * sv_http1_partial() giving state and at: the bytes from old on neither
 * end the line nor could make it invalid, and no limit is reached. Reads
 * only buf[old, len), once. @return 1: sv_http1_parse() of buf[0, len)
 * would return SV_PARSE_INCOMPLETE; 0: it must be called. */
int sv_http1_still_incomplete(int state, size_t at, const char *buf, size_t old, size_t len);

/* Length of the run of empty lines (CRLF pairs) that buf[0, len) starts
 * with. The parser skips up to SV_MAX_LEADING_CRLF of them before a request
 * line; the connection drops them before it calls the parser and counts
 * them since its last head, so that the limit holds however they arrive. */
size_t sv_http1_empty_lines(const char *buf, size_t len);

/* Measures the chunked body (RFC 9112 §7.1) that buf[0, len) starts with,
 * the bytes after a head that said "Transfer-Encoding: chunked". Reads no
 * byte at or after buf + len. servd decodes no body; it skips one that has
 * arrived whole, so the request after it can be read (conn.c).
 *   chunked-body = *chunk last-chunk trailer-section CRLF, strictly:
 *   chunk-size is 1*HEXDIG (leading zeros allowed, nothing else: no sign,
 *   no "0x", no whitespace before it or before the CRLF; BWS only before
 *   a ";"); chunk extensions are BWS ";" BWS token [BWS "=" BWS (token /
 *   quoted-string)] and ignored;
 *   every line ends in CRLF (a bare CR or LF is an error, as in a head);
 *   chunk-data is followed by CRLF; trailer fields are field lines as in a
 *   head, parsed and ignored (§7.1.2).
 * @return  > 0 : the body is complete and that many bytes long, trailer
 *                section and final CRLF included (at most SV_MAX_DRAIN).
 *          0   : SV_PARSE_INCOMPLETE: not all of it has arrived, or it is
 *                longer than SV_MAX_DRAIN (a chunk-size above it is known
 *                at once); a prefix of a body that measures > 0 gives 0.
 *          -400: it is malformed (a line is checked once its LF is here,
 *                the CRLF after a chunk's data once both bytes are). */
int sv_http1_chunked_length(const char *buf, size_t len);

/* 1 if s[0, n) is a token (RFC 9110 §5.6.2: a field name, a method), by the
 * parser's own character classes; else 0 (an empty s too). */
int sv_is_token(const char *s, size_t n);

/* ---- Negotiation, conditionals, ranges (negotiate.c, range.c) ---- */

/* Picks the variant of e for an Accept-Encoding value (RFC 9110 §12.5.3):
 * the acceptable variant with the highest q, ties broken by the smallest
 * body. absent = no header at all (identity).
 * @return the index in e->variants, or -1 when nothing is acceptable. */
int sv_negotiate(const sf_entry *e, sf_view accept_encoding, int absent);

/* The same for a field sent on n lines (RFC 9110 §5.3: the lines form one
 * list); n == 0 means the header is absent. */
int sv_negotiate_list(const sf_entry *e, const sf_view *values, size_t n);

/* The weight (0..1000) a parsed Accept-Encoding gives encoding enc
 * (enum sf_encoding); 0 = not acceptable. n == 0: absent. For tests and logs. */
int sv_accept_weight(const sf_view *values, size_t n, int enc);

typedef struct sv_range {
    uint64_t first, last; /* inclusive */
    unsigned seq;         /* index of the first range-spec this range covers */
} sv_range;

/* Parses a Range value against a representation of len bytes (RFC 9110
 * §14.1.2), merging overlapping and adjacent ranges.
 * @return n > 0 disjoint ranges in *out, in the order of the range-specs
 *         (RFC 9110 §15.3.7.2; a merged range where the first spec it
 *         absorbed was), 0 when the header must be ignored
 *         (malformed, not "bytes", or more than SV_MAX_RANGES ranges), -416
 *         when it is well-formed but no range is satisfiable. */
int sv_range_parse(sf_view value, uint64_t len, sv_range *out, int max);

/* Compares an entity-tag list (If-Match / If-None-Match) with etag.
 * @param weak  1 for the weak comparison (If-None-Match), 0 for strong.
 * @return 1 on a match, 2 when list is "*" (which matches any current
 * representation, but only as the field's whole value), 0 otherwise, -1 when
 * list is not an entity-tag list (which matches nothing; the caller treats
 * the whole field, all its lines, as matching nothing). */
int sv_etag_match(sf_view list, sf_view etag, int weak);

/* A last_modified for sv_if_range when no date is a strong validator of
 * the representation: no HTTP-date parses to it. */
#define SV_NO_DATE INT64_MIN

/* Evaluates an If-Range value (RFC 9110 §13.1.5) against the selected
 * representation: an entity-tag must equal etag by the strong comparison (a
 * weak tag never matches); an HTTP-date must be the IMF-fixdate of
 * last_modified byte for byte, as servd sends it in Last-Modified
 * (never, with SV_NO_DATE: §13.1.5 step 2, a date that is not a strong
 * validator makes the condition false).
 * @return 1 when the condition is true (send the ranges), 0 otherwise. */
int sv_if_range(sf_view value, sf_view etag, int64_t last_modified);

/* ---- Responses (respond.c) ---- */

/* The Date header line of the current second, with its CRLF, plus the
 * blank line: "Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n\r\n", and the same
 * with "Connection: close\r\n" before the blank line. Owned by the loop;
 * updated at most once a second. keep_alive adds "Connection: keep-alive\r\n"
 * for HTTP/1.0 clients that asked to keep the connection (RFC 9112 §9.3). */
typedef struct sv_date {
    int64_t now;
    char keep[64];
    size_t keep_len;
    char close[96];
    size_t close_len;
    char keep_alive[96];
    size_t keep_alive_len;
} sv_date;

/* Options of the site that change responses (from the command line). */
typedef struct sv_site {
    int spa; /* serve /index.html for missing extension-less paths */
} sv_site;

/* What to write for one request: iov[0, iovcnt) in order. Pointers go into
 * the pack map (valid while the snapshot is pinned), the sv_date, the
 * scratch buffer or static storage. */
typedef struct sv_plan {
    int status;
    int encoding;        /* enum sf_encoding of the body sent, -1 when none */
    int close;           /* close the connection after this response */
    uint64_t body_bytes; /* body bytes in the plan (0 for HEAD / 304) */
    int iovcnt;
    int overflow; /* a piece found iov full: the caller answers 500 instead */
    struct iovec iov[SV_PLAN_IOV];
} sv_plan;

typedef struct sv_scratch {
    size_t used;
    char buf[SV_SCRATCH];
} sv_scratch;

/* Decides the response to a parsed request, in this order (respond.c has
 * the details): method (405), an https absolute-form target (421),
 * OPTIONS (200 with Allow), a target with raw bytes above 0x7E
 * (301 to its encoded form, or 400), path normalisation (400), lookup
 * (directory index, trailing-slash 301 keeping the query, SPA fallback, the
 * site's 404 page or a built-in 404), variant choice (406 when nothing is
 * acceptable), conditionals in RFC 9110 §13.2.2 order (412 / 304), ranges
 * (206 / multipart 206 / 416). Does not allocate per request: the first
 * file answered through a reader allocates that reader's path cache
 * (pathcache.h), which remembers raw path -> entry for later requests.
 * plan->close is set when the request asked for it (!keep_alive) or its
 * body is larger than SV_MAX_DRAIN; the Date block then carries
 * "Connection: close". An HTTP/1.0 keep-alive request gets
 * "Connection: keep-alive". A failing pack read gives 500. A plan with more
 * pieces than SV_PLAN_IOV (none today) is marked plan->overflow: the
 * caller must answer 500 instead (sv_respond_error_method).
 * @param rd       the worker's reader on the current pack snapshot
 * @param site     may be NULL (no SPA fallback)
 * @param scratch  reset by the call; holds any formatted lines
 * @return 0 (the plan is set). */
int sv_respond(const sv_request *req, sf_reader *rd, const sv_site *site, const sv_date *date,
               sv_scratch *scratch, sv_plan *plan);

/* Plans an error response that does not depend on the pack (400, 414, 431,
 * 501, 505, 503 ...): a short text body, Connection: close when close is set.
 * Every pointer in the plan is static or into date. A status without a text
 * of its own is answered as 500. */
void sv_respond_error(int status, int close, const sv_date *date, sv_plan *plan);

/* The same for a request whose method is known (req->method after a parse
 * error, 0 when the request line was not parsed): a HEAD request gets the
 * head without the body (RFC 9110 §9.3.2, RFC 9112 §6.3: a response to HEAD
 * has no content, whatever its status). */
void sv_respond_error_method(int status, int close, int method, const sv_date *date, sv_plan *plan);

/* The reason phrase of a status servd sends ("Not Found"), or "Unknown". */
const char *sv_status_reason(int status);

/* Formats the Date lines for Unix second now (date.c). */
void sv_date_update(sv_date *d, int64_t now);

#endif
