/*
 * partial.c - the answers to a Range request (range.c parses the header) (RFC 9110 §14): one range
 * as a 206 with Content-Range, several as multipart/byteranges, none that can be satisfied as a
 * 416. respond.c decides which; the bodies are slices of the variant's body in the map.
 */
#include "respond_int.h"

#include <string.h>

/* None of the ranges can be sent: 416 with the representation's length
 * (RFC 9110 §14.4, §15.5.17) and a line of text that says so, as every
 * other 4xx of servd's has (§15.5: "the server SHOULD send a representation
 * containing an explanation of the error situation"). Range is GET's only,
 * so there is always a body. */
int sv__send_416(sv__resp *c, const sf_variant *v, int vary)
{
    static const char body[] = "416 Range Not Satisfiable\n";
    size_t n;
    char *h = sv__sfmt(c->scratch, &n,
                       "HTTP/1.1 416 Range Not Satisfiable\r\nContent-Range: bytes */%llu\r\n"
                       "Content-Type: text/plain; charset=utf-8\r\nContent-Length: %zu\r\n%s",
                       (unsigned long long)v->body_len, sizeof body - 1, vary ? SV__VARY_LINE : "");
    if (!h)
        return sv__fail(c, 500);
    c->plan->status = 416;
    sv__add(c->plan, h, n);
    if (sv__add_cors(c, v->h200, 2) != 0)
        return sv__fail(c, 500);
    sv__add(c->plan, c->date, c->date_len);
    sv__add(c->plan, body, sizeof body - 1);
    c->plan->body_bytes = sizeof body - 1;
    return 0;
}

/* One range: 206 with Content-Range, the representation headers, a slice. */
int sv__send_206(sv__resp *c, const sf_variant *v, sf_view body, const sv_range *r)
{
    uint64_t n = r->last - r->first + 1;
    size_t hl;
    char *h = sv__sfmt(c->scratch, &hl,
                       "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes %llu-%llu/%llu\r\n"
                       "Content-Length: %llu\r\n",
                       (unsigned long long)r->first, (unsigned long long)r->last,
                       (unsigned long long)v->body_len, (unsigned long long)n);
    if (!h)
        return sv__fail(c, 500);
    c->plan->status = 206;
    c->plan->encoding = v->encoding;
    sv__add(c->plan, h, hl);
    sv__add_block(c, v->rep.ptr, v->rep.len);
    sv__add(c->plan, c->date, c->date_len);
    sv__add(c->plan, body.ptr + r->first, (size_t)n);
    c->plan->body_bytes = n;
    return 0;
}

/* The boundary of a multipart/byteranges body (RFC 9110 §14.6): "servd-"
 * and the opaque part of the variant's ETag. The delimiter must not occur
 * in any part (RFC 2046 §5.1.1); a fixed string could be put in a file on
 * purpose, but the ETag is a hash of the very bytes the parts are cut from,
 * so a body that held it would hold its own hash. The ETag's characters
 * (base64url) are all bchars. @return its length, or 0 when the ETag is not
 * of that form (the caller then sends 200). */
enum {
    BOUNDARY_TAG_MIN = 16, /* opaque ETag characters: at least 96 bits of hash */
    BOUNDARY_TAG_MAX = 48, /* "servd-" + 48 < 70, RFC 2046's limit */
    BOUNDARY_MAX = 6 + BOUNDARY_TAG_MAX,
};

static size_t boundary(const sf_variant *v, char out[BOUNDARY_MAX])
{
    const sf_view t = v->etag;
    if (t.len < 2 + BOUNDARY_TAG_MIN || t.len > 2 + BOUNDARY_TAG_MAX || t.ptr[0] != '"' ||
        t.ptr[t.len - 1] != '"')
        return 0;
    memcpy(out, "servd-", 6);
    for (size_t i = 1; i + 1 < t.len; i++) {
        char ch = t.ptr[i];
        if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
              ch == '-' || ch == '_'))
            return 0;
        out[6 + i - 1] = ch;
    }
    return 6 + t.len - 2;
}

/* Several ranges: 206 multipart/byteranges (RFC 9110 §14.6). The top-level
 * Content-Type replaces the representation's first line (its Content-Type);
 * the rest of rep (ETag, ..., Vary) stays. Each part names the
 * representation's media type and its range. Identity variants only: the
 * header block of an encoded one says Content-Encoding, which would then
 * apply to the multipart envelope and no client could decode it (RFC 9110
 * §8.4). @return 1 when the ranges cannot be sent this way (the caller
 * sends 200 instead, which §14.2 allows for any Range). */
int sv__send_multipart(sv__resp *c, const sf_entry *e, const sf_variant *v, sf_view body,
                       const sv_range *r, int nr)
{
    sv_scratch *s = c->scratch;
    size_t mark = s->used;
    const char *eol = v->rep.len ? memchr(v->rep.ptr, '\n', v->rep.len) : NULL;
    /* (a type longer than the scratch buffer cannot fit a part header, and
     * a crafted one past INT_MAX would make the %.*s precision negative) */
    if (v->encoding != SF_ENC_IDENTITY || !eol || v->rep.len < 13 ||
        !sv_ieq(v->rep.ptr, 13, "content-type:") || e->mime.len > SV_SCRATCH)
        return 1;
    size_t skip = (size_t)(eol - v->rep.ptr) + 1;
    char b[BOUNDARY_MAX];
    int bl = (int)boundary(v, b);
    if (bl == 0)
        return 1;
    size_t endl;
    const char *end = sv__sfmt(s, &endl, "\r\n--%.*s--\r\n", bl, b);
    if (!end)
        goto out_no_room;

    struct {
        const char *p;
        size_t n;
    } part[SV_MAX_RANGES];
    uint64_t total = endl;
    for (int i = 0; i < nr; i++) {
        part[i].p = sv__sfmt(s, &part[i].n,
                             "\r\n--%.*s\r\nContent-Type: %.*s\r\n"
                             "Content-Range: bytes %llu-%llu/%llu\r\n\r\n",
                             bl, b, (int)e->mime.len, e->mime.ptr, (unsigned long long)r[i].first,
                             (unsigned long long)r[i].last, (unsigned long long)v->body_len);
        if (!part[i].p)
            goto out_no_room;
        total += part[i].n + (r[i].last - r[i].first + 1);
    }
    size_t hl;
    char *h = sv__sfmt(s, &hl,
                       "HTTP/1.1 206 Partial Content\r\nContent-Length: %llu\r\n"
                       "Content-Type: multipart/byteranges; boundary=%.*s\r\n",
                       (unsigned long long)total, bl, b);
    if (!h)
        goto out_no_room;
    c->plan->status = 206;
    c->plan->encoding = v->encoding;
    sv__add(c->plan, h, hl);
    sv__add_block(c, v->rep.ptr + skip, v->rep.len - skip);
    sv__add(c->plan, c->date, c->date_len);
    for (int i = 0; i < nr; i++) {
        sv__add(c->plan, part[i].p, part[i].n);
        sv__add(c->plan, body.ptr + r[i].first, (size_t)(r[i].last - r[i].first + 1));
    }
    sv__add(c->plan, end, endl);
    c->plan->body_bytes = total;
    return 0;

out_no_room:
    s->used = mark;
    return 1;
}
