/*
 * respond.c - from a parsed request and the pack to the bytes to write.
 *
 * sv_respond() decides, in this order (each step a test in
 * tests/unit/servd_respond.c):
 *   1. method: SV_M_OTHER (any but GET, HEAD and OPTIONS) -> 405 with
 *      "Allow: GET, HEAD, OPTIONS";
 *   1a. an https URI in absolute-form (req->target_https) -> 421: it did not
 *      come over TLS, which servd does not speak (RFC 9110 §7.4: an origin
 *      MUST reject it);
 *   1b. a target with raw bytes above 0x7E (req->target_8bit): the path
 *      normalised as in 2 (and answered as there when that fails), then a
 *      301 to its key percent-encoded (to "/dir/" for a directory named
 *      without its '/', as in 3), the query's raw bytes encoded too;
 *   2. path: sf_path_from_target() (the one normalisation shared with the
 *      packer): SF_EPATH -> 400; SF_ETOOLONG (a decoded path longer than any
 *      key can be) -> 404: the request line was within SV_MAX_REQUEST_LINE,
 *      the one limit answered 414, and such a path names nothing;
 *   3. lookup: "/dir/" serves "/dir/index.html"; "/dir" without its own key
 *      but with "/dir/index.html" -> 301 to "/dir/" keeping the query; SPA
 *      fallback (site->spa, unless the last segment's extension names a
 *      file other than a page: sf_ext_names_file, or the path is under
 *      /.well-known/) -> "/index.html"
 *      as a 200; otherwise the site's 404 page (negotiated like any file, sent with
 *      status 404, no conditionals, no ranges, identity when nothing else is
 *      acceptable) or a built-in text 404;
 *   4. variant: sv_negotiate_list(); nothing acceptable -> 406 with
 *      "Vary: Accept-Encoding" (RFC 9110 §12.5.3 allows 406 or identity;
 *      406 keeps "identity;q=0" honest and a cache keyed on Vary correct),
 *      whose body lists the file's codings (not_acceptable()).
 *      A file stored in one representation is not negotiated (§12.1: the
 *      resource is treated as not subject to negotiation): it is sent as
 *      it is, like its 200 without Vary, which a cache gives every client;
 *   5. conditionals, RFC 9110 §13.2.2, all against the SELECTED variant:
 *      If-Match (strong, "*" matches; fail -> 412) -> If-Unmodified-Since
 *      (only without If-Match; invalid date ignored; LM > date -> 412) ->
 *      If-None-Match (weak, lists, "*"; match -> 304) -> If-Modified-Since
 *      (only without If-None-Match; invalid date ignored; LM <= date ->
 *      304). Both dates are ignored when LM is a normalised one (before
 *      2000-01-02, SF_DATE_NORMALISED), which every version of the file
 *      has: the file has no modification date to compare (§13.1.3-4);
 *   6. Range (GET only; HEAD ignores it) guarded by If-Range (strong
 *      entity-tag or exact Last-Modified date; false -> 200): one range ->
 *      206, several -> 206 multipart/byteranges, none satisfiable -> 416,
 *      malformed or too many -> ignored (200).
 *   OPTIONS (after 1b): "*" -> 200 with Allow; a path is resolved as in 2
 *      and 3 (400, 404, 301 alike) and answered 200 with Allow and the
 *      Access-Control-* lines of its stored 200 block, so that a CORS
 *      preflight gets the CORS headers a rules file gave the path.
 * Every response of a negotiable entry (200, 206, 304, 406, 412, 416, HEAD)
 * carries exactly one "Vary: Accept-Encoding": the pre-rendered blocks have
 * it, and the formatted ones add it. The 406, 412 and 416 of a file also
 * carry the Access-Control-* lines of its stored 200 block (sv__add_cors), and
 * a 301 to a page (a directory's, or a raw UTF-8 path's) those of the page.
 *
 * Nothing is allocated per request (the path cache aside, once per reader:
 * sv_pathcache_put): the plan points into the pack map (header blocks,
 * bodies), the sv_date, the caller's scratch (formatted lines) or static
 * strings here. The only formatting per request is for 206, 301, 406 (its
 * body) and 416.
 *
 * The answers to ranges (206, multipart 206, 416) are partial.c's, the
 * 301s redirect.c's; respond_int.h is what the three share.
 */
#include "http.h"
#include "pathcache.h"
#include "respond_int.h"
#include "sf/mime.h"
#include "sf/path.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static const char allow_line[] = "Allow: GET, HEAD, OPTIONS\r\n";
static const char vary_line[] = SV__VARY_LINE;
/* On every 503 (a worker at --max-conns, a pack cut under servd): both
 * last a moment, and a client or proxy that retries may as well wait one
 * second (RFC 9110 §10.2.3). */
static const char retry_line[] = "Retry-After: 1\r\n";

/* ---- status texts ---- */

typedef struct err_text {
    int status;
    const char *reason;
    const char *head; /* status line, Content-Type, Content-Length */
    size_t head_len;
    size_t digits_at, digits_len; /* where in head the Content-Length's digits are */
    const char *body;
    size_t body_len;
} err_text;

/* Cache-Control: 404, 405, 414 and 501 are cacheable by default (RFC 9110
 * §15.1): without it a cache in front keeps a built-in 404 after a deploy
 * adds the path. */
#define ERR_UPTO_DIGITS(code, reason)                                                              \
    "HTTP/1.1 " #code " " reason "\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: "
#define ERR_HEAD(code, reason, len)                                                                \
    ERR_UPTO_DIGITS(code, reason) #len "\r\nCache-Control: no-cache\r\n"
#define ERR_BODY(code, reason, more) #code " " reason "\n" more
/* The body length is written by hand in the Content-Length line; the array
 * size below refuses to compile when it differs from the body. more: lines
 * of text after the status's own (ERR: none). */
#define ERR_MORE(code, reason, len, more)                                                          \
    {                                                                                              \
        code, reason, ERR_HEAD(code, reason, len), sizeof(ERR_HEAD(code, reason, len)) - 1,        \
            sizeof(ERR_UPTO_DIGITS(code, reason)) - 1, sizeof(#len) - 1,                           \
            ERR_BODY(code, reason, more),                                                          \
            sizeof(ERR_BODY(code, reason, more)) - 1 +                                             \
                0 * sizeof(char[sizeof(ERR_BODY(code, reason, more)) - 1 == len ? 1 : -1])         \
    }
#define ERR(code, reason, len) ERR_MORE(code, reason, len, "")

/* clang-format off */
static const err_text errors[] = {
    ERR(400, "Bad Request", 16),
    ERR(404, "Not Found", 14),
    ERR(405, "Method Not Allowed", 23),
    ERR(406, "Not Acceptable", 19),
    ERR(408, "Request Timeout", 20),
    ERR(412, "Precondition Failed", 24),
    ERR(413, "Content Too Large", 22),
    ERR(414, "URI Too Long", 17),
    ERR(421, "Misdirected Request", 24),
    ERR(431, "Request Header Fields Too Large", 36),
    ERR(500, "Internal Server Error", 26),
    ERR(501, "Not Implemented", 20),
    ERR(503, "Service Unavailable", 24),
    /* RFC 9110 §15.6.6: its representation SHOULD say "what other
     * protocols are supported by that server" */
    ERR_MORE(505, "HTTP Version Not Supported", 67, "servd speaks HTTP/1.1 and HTTP/1.0.\n"),
};
/* clang-format on */

static const err_text *find_error(int status)
{
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
        if (errors[i].status == status)
            return &errors[i];
    return NULL;
}

const char *sv_status_reason(int status)
{
    switch (status) {
    case 200:
        return "OK";
    case 206:
        return "Partial Content";
    case 301:
        return "Moved Permanently";
    case 304:
        return "Not Modified";
    case 416:
        return "Range Not Satisfiable";
    }
    const err_text *t = find_error(status);
    return t ? t->reason : "Unknown";
}

/* ---- plan building ---- */

/* Adds a stored header block. A stored Last-Modified later than now (the
 * pack was built on a machine whose clock runs ahead) is replaced by the
 * Date, as RFC 9110 §8.8.2.1 requires: the block goes out in two pieces
 * around the Date line's own date (only a date of its length is replaced:
 * the block is the pack's, and a line of another length is left alone).
 * Rare; otherwise one piece, as stored. */
void sv__add_block(sv__resp *c, const char *p, size_t n)
{
    static const char lm[] = "Last-Modified: ";
    const size_t ll = sizeof lm - 1;
    if (c->lm_future) {
        const char *l = n >= ll && memcmp(p, lm, ll) == 0 ? p : NULL;
        if (!l && (l = memmem(p, n, "\r\nLast-Modified: ", ll + 2)) != NULL)
            l += 2;
        if (l && (size_t)(p + n - l) >= ll + SF_HTTP_DATE_LEN + 2 &&
            memcmp(l + ll + SF_HTTP_DATE_LEN, "\r\n", 2) == 0) {
            const char *d = l + ll, *after = d + SF_HTTP_DATE_LEN;
            sv__add(c->plan, p, (size_t)(d - p));
            sv__add(c->plan, c->date + sizeof "Date: " - 1, SF_HTTP_DATE_LEN); /* (date.c) */
            n -= (size_t)(after - p);
            p = after;
        }
    }
    sv__add(c->plan, p, n);
}

/* A text error in two steps, so that lines can go between: error_start()
 * drops what the plan held (a response cut short: 500) and adds the head
 * block and an optional extra static line, error_end() the Date and the
 * body. A body formatted for this response (the 406's list) is passed to
 * error_end(), and the digits of its length to error_start(), whose
 * Content-Length they replace; NULL for the status's own body. */
static const err_text *error_start(sv_plan *plan, int status, const char *extra, size_t extra_len,
                                   const sf_view *length)
{
    const err_text *t = find_error(status);
    if (!t)
        t = find_error(500);
    sv__plan_reset(plan, plan->close);
    plan->status = t->status;
    if (length) {
        const size_t after = t->digits_at + t->digits_len;
        sv__add(plan, t->head, t->digits_at);
        sv__add(plan, length->ptr, length->len);
        sv__add(plan, t->head + after, t->head_len - after);
    } else {
        sv__add(plan, t->head, t->head_len);
    }
    if (extra)
        sv__add(plan, extra, extra_len);
    return t;
}

static void error_end(sv_plan *plan, const err_text *t, const sf_view *body, const char *date,
                      size_t date_len, int head)
{
    sf_view b = body ? *body : (sf_view){t->body, t->body_len};
    sv__add(plan, date, date_len);
    if (!head) {
        sv__add(plan, b.ptr, b.len);
        plan->body_bytes = b.len;
    }
}

/* A text error, with the one line its status carries: Allow on a 405,
 * Retry-After on a 503. */
static void error_plan(sv_plan *plan, int status, const char *date, size_t date_len, int head)
{
    const char *extra = status == 405 ? allow_line : status == 503 ? retry_line : NULL;
    error_end(plan, error_start(plan, status, extra, extra ? strlen(extra) : 0, NULL), NULL, date,
              date_len, head);
}

void sv_respond_error_method(int status, int close, int method, const sv_date *date, sv_plan *plan)
{
    sv__plan_reset(plan, close);
    error_plan(plan, status, close ? date->close : date->keep,
               close ? date->close_len : date->keep_len, method == SV_M_HEAD);
}

void sv_respond_error(int status, int close, const sv_date *date, sv_plan *plan)
{
    sv_respond_error_method(status, close, 0, date, plan);
}

int sv__fail(sv__resp *c, int status)
{
    error_plan(c->plan, status, c->date, c->date_len, c->head);
    return 0;
}

/* The next Access-Control-* line of a header block at or after *p, before
 * end (its length, CRLF included, in *n), or NULL; *p moves past it. */
static const char *cors_line(const char **p, const char *end, size_t *n)
{
    static const char ac[] = "access-control-";
    while (*p < end) {
        const char *l = *p, *eol = memchr(l, '\n', (size_t)(end - l));
        *n = eol ? (size_t)(eol - l) + 1 : (size_t)(end - l);
        *p = l + *n;
        if (*n > sizeof ac - 1 && strncasecmp(l, ac, sizeof ac - 1) == 0)
            return l;
    }
    return NULL;
}

/* Adds the Access-Control-* lines of a stored 200 block h (those a rules
 * file gave the path) to the plan, from the map: adjacent lines as one
 * piece, and rules lines are stored together, so nearly always one. keep:
 * iovecs the caller still needs after them. @return 0, or -1 when the lines
 * lie in more separate runs than the plan has room for (a crafted pack). */
int sv__add_cors(sv__resp *c, sf_view h, int keep)
{
    sv_plan *plan = c->plan;
    struct iovec *run = NULL;
    const char *p = h.ptr, *l;
    size_t n;
    if (h.len == 0) /* OPTIONS *: no block (h.ptr NULL) */
        return 0;
    while ((l = cors_line(&p, h.ptr + h.len, &n)) != NULL) {
        if (run && (const char *)run->iov_base + run->iov_len == l) {
            run->iov_len += n;
        } else {
            if (plan->iovcnt + keep >= SV_PLAN_IOV)
                return -1;
            sv__add(plan, l, n);
            run = &plan->iov[plan->iovcnt - 1];
        }
    }
    return 0;
}

/* 1 if the header block h has an Access-Control-* line. */
static int has_cors(sf_view h)
{
    const char *p = h.ptr;
    size_t n;
    return h.len > 0 && cors_line(&p, h.ptr + h.len, &n) != NULL;
}

/* An error about a file (406, 412): carries Vary when it is negotiable, and
 * the Access-Control-* lines of h, the selected variant's 200 block. A
 * browser checks CORS on every status: without them a cross-origin script
 * that sent If-Match would see a network error rather than the 412. body
 * and length: a formatted body and its length's digits (error_start()),
 * or NULL for the status's own. */
static int fail_file(sv__resp *c, int status, int vary, sf_view h, const sf_view *body,
                     const sf_view *length)
{
    const err_text *t =
        error_start(c->plan, status, vary ? vary_line : NULL, sizeof vary_line - 1, length);
    if (sv__add_cors(c, h, 2) != 0)
        return sv__fail(c, 500);
    error_end(c->plan, t, body, c->date, c->date_len, c->head);
    return 0;
}

/* The 406 of a negotiable file: nothing the client accepts. Its body lists
 * the codings the file has (RFC 9110 §15.5.7: a list of the available
 * representations' characteristics), so a client or a person that refused
 * them all sees what to accept:
 *   406 Not Acceptable
 *   Available encodings: identity, gzip, br
 * The body and its length vary with the list: formatted in the scratch
 * buffer, the rest of the head is the static 406's. */
static int not_acceptable(sv__resp *c, const sf_entry *e)
{
    char list[SF_ENC_COUNT * sizeof "identity, "] = ""; /* the longest name, each */
    size_t n = 0;
    for (unsigned i = 0; i < e->nvariants && i < SF_ENC_COUNT; i++) {
        const char *name = sf_encoding_name(e->variants[i].encoding); /* checked at load */
        n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", i ? ", " : "", name ? name : "?");
    }
    sf_view body, length;
    body.ptr =
        sv__sfmt(c->scratch, &body.len, "406 Not Acceptable\nAvailable encodings: %s\n", list);
    length.ptr = body.ptr ? sv__sfmt(c->scratch, &length.len, "%zu", body.len) : NULL;
    if (!length.ptr) /* no room: not seen, the 406 is the plan's first use of the scratch */
        return fail_file(c, 406, 1, e->variants[0].h200, NULL, NULL);
    return fail_file(c, 406, 1, e->variants[0].h200, &body, &length);
}

/* Appends formatted text to the scratch buffer. @return its start, or
 * NULL when it does not fit (nothing is appended then). */
char *sv__sfmt(sv_scratch *s, size_t *len, const char *fmt, ...)
{
    size_t room = sizeof s->buf - s->used;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(s->buf + s->used, room, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= room)
        return NULL;
    char *p = s->buf + s->used;
    s->used += (size_t)n;
    *len = (size_t)n;
    return p;
}

/* Does the If-Match / If-None-Match field, its nlines lines, match etag?
 * Lines of a list field form one list (RFC 9110 §5.3), so one malformed line
 * makes the whole field match nothing, and so does a "*" line among others:
 * "*, \"x\"" is neither "*" nor an entity-tag list (§13.1.1, §13.1.2). */
static int any_etag_match(const sv_request *req, const char *name, unsigned nlines, sf_view etag,
                          int weak)
{
    int found = 0;
    for (size_t i = 0; i < req->nheaders; i++) {
        if (!sv_ieq(req->headers[i].name.ptr, req->headers[i].name.len, name))
            continue;
        int r = sv_etag_match(req->headers[i].value, etag, weak);
        if (r < 0 || (r == 2 && nlines > 1))
            return 0;
        found |= r != 0;
    }
    return found;
}

static int negotiate(const sv_request *req, const sf_entry *e)
{
    if (req->n_accept_encoding <= 1)
        return sv_negotiate(e, req->accept_encoding, req->n_accept_encoding == 0);
    sf_view vals[SV_MAX_HEADERS];
    size_t n = 0;
    for (size_t i = 0; i < req->nheaders && n < SV_MAX_HEADERS; i++)
        if (sv_ieq(req->headers[i].name.ptr, req->headers[i].name.len, "accept-encoding"))
            vals[n++] = req->headers[i].value;
    return sv_negotiate_list(e, vals, n);
}

/* ---- files ---- */

static int send_304(sv__resp *c, const sf_variant *v)
{
    c->plan->status = 304;
    sv__add_block(c, v->h304.ptr, v->h304.len);
    sv__add(c->plan, c->date, c->date_len);
    return 0;
}

/* Conditionals of a GET or HEAD (RFC 9110 §13.2.2 steps 1-4), dates
 * compared with c->lm unless it is a normalised date. No other method
 * evaluates them: the others get a 405, and OPTIONS ignores them
 * (§13.2.1). @return 1 when a response (304 or 412) was planned, 0 to go
 * on. Inlined: sv__serve's request without a condition then costs a few
 * compares, where a call cost it 31 instructions. */
static inline __attribute__((always_inline)) int preconditions(sv__resp *c, const sf_variant *v,
                                                               int vary)
{
    const sv_request *req = c->req;
    int64_t t;
    if (req->n_if_match) {
        if (!any_etag_match(req, "if-match", req->n_if_match, v->etag, 0))
            return fail_file(c, 412, vary, v->h200, NULL, NULL), 1;
    } else if (req->n_if_unmodified_since == 1 && c->lm >= SF_DATE_NORMALISED &&
               sf_http_date_parse_at(req->if_unmodified_since.ptr, req->if_unmodified_since.len,
                                     c->now, &t) == 0 &&
               c->lm > t) {
        return fail_file(c, 412, vary, v->h200, NULL, NULL), 1;
    }
    if (req->n_if_none_match) {
        if (any_etag_match(req, "if-none-match", req->n_if_none_match, v->etag, 1))
            return send_304(c, v), 1;
    } else if (req->n_if_modified_since == 1 && c->lm >= SF_DATE_NORMALISED &&
               sf_http_date_parse_at(req->if_modified_since.ptr, req->if_modified_since.len, c->now,
                                     &t) == 0 &&
               c->lm <= t) {
        return send_304(c, v), 1;
    }
    return 0;
}

/* The Last-Modified e is served with: its own, or the Date when that is
 * ahead of the clock. */
static void set_last_modified(sv__resp *c, const sf_entry *e)
{
    c->lm = e->last_modified;
    c->lm_future = c->lm > c->now;
    if (c->lm_future)
        c->lm = c->now;
}

/* The date an If-Range may name for v (RFC 9110 §13.1.5, §8.8.2.2), when
 * it is a strong validator. Only the identity representation's: it is the
 * file, whose Last-Modified moves when its bytes do. A compressed one can
 * change under the same Last-Modified (another encoder or level at the
 * next pack, with --base keeping the date of unchanged sources), so a date
 * is no strong validator for it and a resumed download could splice two
 * encodings; its ETag is one. And only a Last-Modified at least a second
 * before the Date (as Apache rules too): a file packed and served in the
 * second it was written may change again within that second, and a stored
 * date ahead of the clock is sent as the Date itself (c->lm). And not a
 * date servd-pack marked weak: not the file's own mtime (SOURCE_DATE_EPOCH
 * gives two versions of a file one date), a normalised one, or one --base
 * left to a changed file no later than the base's date. Any other is
 * taken as strong, as by every server: a file rewritten under its old
 * mtime (touch -d) is told apart by its ETag, by no date. */
static int64_t if_range_date(const sv__resp *c, const sf_entry *e, const sf_variant *v)
{
    return v->encoding == SF_ENC_IDENTITY && c->lm < c->now && !(e->flags & SF_ENTRY_DATE_WEAK)
               ? c->lm
               : SV_NO_DATE;
}

/* Serves a file entry: status 200, or 404 for the site's 404 page.
 * bodies: the variants' bodies when the caller has them (the path cache),
 * else NULL and the selected one is looked up. */
int sv__serve(sv__resp *c, const sf_entry *e, int is404, const sf_view *bodies)
{
    const sv_request *req = c->req;
    int vary = (e->flags & SF_ENTRY_NEGOTIABLE) != 0;
    int idx = negotiate(req, e);
    if (idx < 0) {
        if (vary && !is404)
            return not_acceptable(c, e);
        idx = 0; /* one representation, or an error page: sent rather than refused */
    }
    const sf_variant *v = &e->variants[idx];
    set_last_modified(c, e);

    if (!is404 && preconditions(c, v, vary))
        return 0;

    sf_view body = {NULL, 0};
    if (bodies)
        body = bodies[idx];
    else if (!c->head && sf_body(c->rd, v, &body) != 0)
        return sv__fail(c, 500);

    if (!is404 && req->method == SV_M_GET && req->n_range == 1 &&
        (req->n_if_range == 0 ||
         (req->n_if_range == 1 && sv_if_range(req->if_range, v->etag, if_range_date(c, e, v))))) {
        sv_range r[SV_MAX_RANGES];
        int nr = sv_range_parse(req->range, v->body_len, r, SV_MAX_RANGES);
        /* 416 of a compressed representation too, with its length
         * (HTTP.md, RFC 9110 §15.5.17), as h2o 2.2 answers: a client
         * that resumes a file it saved decoded (curl --compressed -C -)
         * mistakes the encoded bytes for its own either way. */
        if (nr == -416)
            return sv__send_416(c, v, vary);
        if (nr == 1)
            return sv__send_206(c, v, body, &r[0]);
        if (nr > 1 && sv__send_multipart(c, e, v, body, r, nr) == 0)
            return 0;
    }

    c->plan->status = is404 ? 404 : 200;
    c->plan->encoding = v->encoding;
    sv__add_block(c, v->h200.ptr, v->h200.len);
    sv__add(c->plan, c->date, c->date_len);
    if (!c->head) {
        sv__add(c->plan, body.ptr, body.len);
        c->plan->body_bytes = body.len;
    }
    return 0;
}

static int not_found(sv__resp *c)
{
    sf_entry e;
    if (sf_lookup_special(c->rd, "status:404", &e) == 0 && e.kind == SF_KIND_FILE)
        return sv__serve(c, &e, 1, NULL);
    return sv__fail(c, 404);
}

static int entry(sv__resp *c, const sf_entry *e)
{
    if (e->kind == SF_KIND_FILE)
        return sv__serve(c, e, 0, NULL);
    if (e->kind == SF_KIND_REDIRECT)
        return sv__stored_redirect(c, e);
    return sv__fail(c, 500);
}

/* What resolve() found. */
enum resolved {
    R_DONE,    /* the plan is set: 400, 500 */
    R_DIR,     /* a directory named without its '/': e is its index, the
                  caller redirects (sv__redirect(c, key, klen, 1, &e)) */
    R_FOUND,   /* the entry of the path, or of its directory index */
    R_SPA,     /* the SPA fallback's /index.html */
    R_MISSING, /* nothing: the caller answers 404 */
};

/* Room for a key plus "/index.html". */
#define KEY_ROOM (SF_PATH_MAX + 16)

/* The entry the request's path names (steps 2 and 3 of the head comment);
 * key (KEY_ROOM bytes) gets the normalised path, *klen its length (0 when
 * it is longer than any path can be). */
static enum resolved resolve(sv__resp *c, sf_entry *e, char *key, size_t *klenp)
{
    const sv_request *req = c->req;
    size_t klen = 0;
    *klenp = 0;
    int rc = sf_path_from_target(req->path.ptr, req->path.len, key, SF_PATH_MAX, &klen);
    if (rc == SF_ETOOLONG)
        return R_MISSING;
    *klenp = klen;
    if (rc != 0) {
        sv__fail(c, 400);
        return R_DONE;
    }
    if (key[klen - 1] == '/') {
        memcpy(key + klen, "index.html", 10);
        rc = sf_lookup(c->rd, key, klen + 10, e);
    } else {
        rc = sf_lookup(c->rd, key, klen, e);
        if (rc == SF_ENOTFOUND) {
            memcpy(key + klen, "/index.html", 11);
            int rc2 = sf_lookup(c->rd, key, klen + 11, e);
            if (rc2 == 0)
                return R_DIR;
            if (rc2 != SF_ENOTFOUND) {
                sv__fail(c, 500);
                return R_DONE;
            }
        }
    }
    if (rc == 0)
        return R_FOUND;
    if (rc != SF_ENOTFOUND) {
        sv__fail(c, 500);
        return R_DONE;
    }
    if (c->site && c->site->spa) {
        /* A route of the application, unless its last segment's extension
         * names a file other than a page: a script, style sheet, image or
         * build output that is missing must not get HTML, but
         * /user/jane.doe and /docs/v1.2 are routes (klen: the key before
         * any index.html). Nor is anything under /.well-known/ (RFC 8615):
         * those names are registered documents that clients read as such
         * (apple-app-site-association, openid-configuration, ACME
         * challenges), never the application's routes. */
        static const char wk[] = "/.well-known";
        size_t n = sizeof wk - 1;
        int well_known = klen >= n && memcmp(key, wk, n) == 0 && (klen == n || key[n] == '/');
        if (!well_known && !sf_ext_names_file(key, klen)) {
            rc = sf_lookup(c->rd, "/index.html", 11, e);
            if (rc == 0)
                return R_SPA;
            if (rc != SF_ENOTFOUND) {
                sv__fail(c, 500);
                return R_DONE;
            }
        }
    }
    return R_MISSING;
}

/* A target with raw bytes above 0x7E (c->req->target_8bit): a 301 to the
 * URL it meant, so that a client that sent raw UTF-8 is led to its
 * percent-encoded form (RFC 9112 §3.2 offers this or a 400). The path is
 * resolved as for any request, so a directory named without its '/' goes
 * to "/dir/" at once and a redirect to a page is cached like the page. Like
 * every redirect of servd's, the Location is built from the normalised
 * key: a raw path such as "//evil.example/\xc3\xa9" must not come back as
 * a protocol-relative URL that leads to another host. A path that is not
 * UTF-8 (or that normalisation refuses) gets the 400, one longer than any
 * key the 404, as in sv_respond. */
static int redirect_encoded(sv__resp *c)
{
    char key[KEY_ROOM];
    size_t klen;
    sf_entry e;
    switch (resolve(c, &e, key, &klen)) {
    case R_DONE:
        return 0;
    case R_DIR:
        return sv__redirect(c, key, klen, 1, &e);
    case R_FOUND:
        if (e.kind == SF_KIND_REDIRECT)
            return sv__stored_redirect(c, &e);
        return sv__redirect(c, key, klen, 0, &e);
    case R_SPA:
    case R_MISSING:
        break;
    }
    if (klen == 0 || klen > SF_KEY_MAX)
        return not_found(c); /* longer than any key: it names nothing */
    return sv__redirect(c, key, klen, 0, NULL);
}

/* OPTIONS (RFC 9110 §9.3.7): 200 with Allow and Content-Length: 0. For a
 * path, also the Access-Control-* lines a rules file stored in its 200
 * block, which is what a browser's CORS preflight looks for: without them a
 * cross-origin request with a custom header could never be made, however
 * the rules set up CORS. Nothing is added that the rules did not give the
 * path. More separate runs of them than the plan has room for -> 500.
 * A preflight must get a 2xx, never a redirect (Fetch §4.8), so a directory
 * named without its '/' gets the 200 with its index page's lines (the GET
 * then gets the 301, which carries them too), and a missing path the 200
 * with the lines of the site's 404 page when it has any (the GET gets that
 * page, with them): else a cross-origin script that sends a custom header
 * saw a network error where it would see the 301's page or the 404.
 * Conditional header fields are ignored: OPTIONS selects no representation
 * (RFC 9110 §13.2.1: a server MUST ignore them with "a request method that
 * does not involve the selection or modification of a selected
 * representation, such as CONNECT, OPTIONS, or TRACE"). */
__attribute__((noinline)) static int options(sv__resp *c)
{
    static const char head[] = "HTTP/1.1 200 OK\r\n";
    static const char tail[] = "Content-Length: 0\r\n";
    sf_entry e;
    sf_view h = {NULL, 0};
    if (c->req->target_form != SV_TF_ASTERISK) {
        char key[KEY_ROOM];
        size_t klen;
        switch (resolve(c, &e, key, &klen)) {
        case R_DONE:
            return 0;
        case R_MISSING:
            if (sf_lookup_special(c->rd, "status:404", &e) != 0 || e.kind != SF_KIND_FILE ||
                e.nvariants == 0 || !has_cors(e.variants[0].h200))
                return sv__fail(c, 404);
            break;
        case R_DIR:
        case R_FOUND:
        case R_SPA:
            break;
        }
        if (e.kind == SF_KIND_REDIRECT)
            return sv__stored_redirect(c, &e);
        if (e.kind != SF_KIND_FILE || e.nvariants == 0)
            return sv__fail(c, 500);
        h = e.variants[0].h200;
    }
    c->plan->status = 200;
    sv__add(c->plan, head, sizeof head - 1);
    sv__add(c->plan, allow_line, sizeof allow_line - 1);
    if (sv__add_cors(c, h, 2) != 0)
        return sv__fail(c, 500);
    sv__add(c->plan, tail, sizeof tail - 1);
    sv__add(c->plan, c->date, c->date_len);
    return 0;
}

int sv_respond(const sv_request *req, sf_reader *rd, const sv_site *site, const sv_date *date,
               sv_scratch *scratch, sv_plan *plan)
{
    sv__resp c;
    sv__resp_begin(&c, req, rd, site, date, scratch, plan);

    if (req->method == SV_M_OTHER)
        return sv__fail(&c, 405);
    if (req->target_https)
        return sv__fail(&c, 421);
    if (req->target_8bit)
        return redirect_encoded(&c);
    if (req->method == SV_M_OPTIONS)
        return options(&c);

    /* A path answered before from this reader: no normalisation, no LMDB. */
    const sv_cached *hit = sv_pathcache_get(rd, req->path.ptr, req->path.len);
    if (hit)
        return sv__serve(&c, &hit->e, 0, hit->body);

    char key[KEY_ROOM];
    size_t klen;
    sf_entry e;
    switch (resolve(&c, &e, key, &klen)) {
    case R_DONE:
        return 0;
    case R_DIR:
        return sv__redirect(&c, key, klen, 1, &e);
    case R_MISSING:
        return not_found(&c);
    case R_SPA:
        return entry(&c, &e);
    case R_FOUND:
        break;
    }
    /* the file (or directory index) of this raw path: remember it */
    if (e.kind == SF_KIND_FILE &&
        (hit = sv_pathcache_put(rd, req->path.ptr, req->path.len, &e)) != NULL)
        return sv__serve(&c, &hit->e, 0, hit->body);
    return entry(&c, &e);
}
