/*
 * redirect.c - servd's 301s: a directory named without its '/', a raw
 * UTF-8 target to its percent-encoded form, and the redirect entries of a
 * pack. Each Location is built from a normalised key, and each redirect is
 * cached like the page it leads to.
 */
#include "respond_int.h"

#include "sf/path.h"

#include <ctype.h>
#include <string.h>

/* Appends the query q (from '?' on, or empty) to s, percent-encoding what
 * a URI cannot hold (RFC 3986 §2; a Location is a URI-reference, RFC 9110
 * §10.2.2): bytes above 0x7E, which only a raw UTF-8 target has
 * (respond.c's redirect_encoded), the ASCII the parser lets through into
 * a target (" < > \ ^ ` { | }, and [ ] outside a host, RFC 3986 §3.4), and
 * a '%' that starts no escape. SP, CTLs and '#' never reach here.
 * @return 0, or -1 when it does not fit (s unchanged then). */
static int add_query(sv_scratch *s, sf_view q)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t used = s->used;
    for (size_t i = 0; i < q.len; i++) {
        unsigned char b = (unsigned char)q.ptr[i];
        if (sizeof s->buf - used < 3)
            return -1;
        int bad_pct = b == '%' && (i + 2 >= q.len || !isxdigit((unsigned char)q.ptr[i + 1]) ||
                                   !isxdigit((unsigned char)q.ptr[i + 2]));
        if (b > 0x7e || memchr("\"<>\\^`{|}[]", b, 11) || bad_pct) {
            s->buf[used++] = '%';
            s->buf[used++] = hex[b >> 4];
            s->buf[used++] = hex[b & 15];
        } else {
            s->buf[used++] = (char)b;
        }
    }
    s->used = used;
    return 0;
}

/* 301 to a normalised key (+ "/" when add_slash) followed by the raw query.
 * The Location is built from the key (sf_path_to_url) rather than from
 * the raw target: the raw "//evil.example" normalises to the key
 * "/evil.example" and must not become a protocol-relative redirect. A key
 * never starts with "//", so neither does the Location. A Location that
 * does not fit in the scratch buffer -> 414.
 *
 * Browsers keep a 301 without Cache-Control for as long as they like
 * (Chromium: until the cache evicts it), so a deploy that turns /docs
 * from a directory into a file would never reach them. The redirect is
 * cached like the page it leads to: it carries page's Cache-Control, or
 * no-cache when there is no page (a redirect entry). It also carries the
 * page's Access-Control-* lines: a browser checks CORS on each response of
 * a redirect chain, so without them a cross-origin fetch of "/docs" would
 * fail where one of "/docs/" succeeds. */
int sv__redirect(sv__resp *c, const char *key, size_t klen, int add_slash, const sf_entry *page)
{
    static const char cc[] = "\r\nCache-Control: ";
    sf_view policy = {"no-cache", 8};
    if (page && page->nvariants > 0) {
        const sf_view rep = page->variants[0].rep;
        const char *l = memmem(rep.ptr, rep.len, cc, sizeof cc - 1);
        if (l) {
            const char *v = l + sizeof cc - 1, *end = rep.ptr + rep.len;
            const char *e = memchr(v, '\r', (size_t)(end - v));
            if (e)
                policy = (sf_view){v, (size_t)(e - v)};
        }
    }
    sv_scratch *s = c->scratch;
    size_t start = s->used, n;
    if (!sv__sfmt(s, &n, "HTTP/1.1 301 Moved Permanently\r\nLocation: "))
        return sv__fail(c, 414);
    size_t room = sizeof s->buf - s->used;
    size_t url = sf_path_to_url(key, klen, s->buf + s->used, room);
    if (url > room)
        goto out_too_long;
    s->used += url;
    if ((add_slash && !sv__sfmt(s, &n, "/")) || add_query(s, c->req->query) != 0 ||
        !sv__sfmt(s, &n, "\r\nCache-Control: "))
        goto out_too_long;
    /* the policy goes out from where it lies (the map, or a literal), so a
     * long one costs no scratch room */
    static const char tail[] = "\r\nContent-Length: 0\r\n";
    c->plan->status = 301;
    sv__add(c->plan, s->buf + start, s->used - start);
    sv__add(c->plan, policy.ptr, policy.len);
    sv__add(c->plan, tail, 2); /* the policy's CRLF */
    if (page && page->nvariants > 0 && sv__add_cors(c, page->variants[0].h200, 2) != 0)
        return sv__fail(c, 500);
    sv__add(c->plan, tail + 2, sizeof tail - 3);
    sv__add(c->plan, c->date, c->date_len);
    return 0;

out_too_long:
    s->used = start;
    return sv__fail(c, 414);
}

/* A redirect entry stored in the pack: its target must be a key. */
int sv__stored_redirect(sv__resp *c, const sf_entry *e)
{
    if (sf_path_check(e->target.ptr, e->target.len) != 0)
        return sv__fail(c, 500);
    return sv__redirect(c, e->target.ptr, e->target.len, 0, NULL);
}
