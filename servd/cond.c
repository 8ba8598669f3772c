/*
 * cond.c - the validators of conditional requests (RFC 9110 §8.8, §13.1):
 * entity-tag lists (If-Match, If-None-Match, If-Range) and HTTP-dates
 * (If-Modified-Since, If-Unmodified-Since, If-Range).
 *
 * The responder (respond.c) decides the order of evaluation (§13.2.2);
 * these functions only answer "does this field value match".
 */
#include "http.h"

#include <string.h>

/* An entity-tag (RFC 9110 §8.8.3):
 *   entity-tag = [ weak ] opaque-tag      weak = %s"W/"
 *   opaque-tag = DQUOTE *etagc DQUOTE     etagc = %x21 / %x23-7E / obs-text
 * Parses one at s[*i, n); on success sets *weak, the opaque-tag view
 * (quotes included) and advances *i. @return 0, or -1 when malformed. */
static int parse_etag(const char *s, size_t n, size_t *i, int *weak, sf_view *opaque)
{
    size_t p = *i;
    *weak = 0;
    if (n - p >= 2 && s[p] == 'W' && s[p + 1] == '/') {
        *weak = 1;
        p += 2;
    }
    if (p >= n || s[p] != '"')
        return -1;
    size_t start = p++;
    for (;;) {
        if (p >= n)
            return -1;
        unsigned char c = (unsigned char)s[p];
        if (c == '"')
            break;
        if (c < 0x21 || c == 0x7f)
            return -1;
        p++;
    }
    p++;
    opaque->ptr = s + start;
    opaque->len = p - start;
    *i = p;
    return 0;
}

/* Compares against an If-Match / If-None-Match value:
 *   If-Match = "*" / #entity-tag       (RFC 9110 §13.1.1, §13.1.2)
 * List elements are separated by commas with optional whitespace; empty
 * elements are skipped (§5.6.1.2). A value that is not such a list (a
 * malformed tag anywhere, "*" among tags, two tags without a comma) is
 * reported as -1 and matches nothing: If-None-Match then gets the 200 and
 * If-Match a 412, the answers that cannot hand out bytes the client did not
 * name. The strong comparison needs both tags strong and equal; the weak
 * one ignores the W/ prefixes. */
int sv_etag_match(sf_view list, sf_view etag, int weak)
{
    const char *s = list.ptr;
    size_t n = list.len;
    size_t i = 0;

    /* Trim, then "*" alone matches any current representation. */
    while (n > 0 && sv_is_ows(s[n - 1]))
        n--;
    while (i < n && sv_is_ows(s[i]))
        i++;
    if (n - i == 1 && s[i] == '*')
        return 2;

    int our_weak;
    sf_view ours;
    size_t j = 0;
    if (parse_etag(etag.ptr, etag.len, &j, &our_weak, &ours) != 0 || j != etag.len)
        return 0;

    int found = 0;
    while (i < n) {
        if (s[i] == ',' || sv_is_ows(s[i])) {
            i++;
            continue;
        }
        int w;
        sf_view tag;
        if (parse_etag(s, n, &i, &w, &tag) != 0)
            return -1;
        if (tag.len == ours.len && memcmp(tag.ptr, ours.ptr, tag.len) == 0 &&
            (weak || (!w && !our_weak)))
            found = 1;
        while (i < n && sv_is_ows(s[i]))
            i++;
        if (i < n && s[i] != ',')
            return -1; /* two tags without a comma, or bytes after a tag */
    }
    return found;
}

/* If-Range = entity-tag / HTTP-date (RFC 9110 §13.1.5). */
int sv_if_range(sf_view value, sf_view etag, int64_t last_modified)
{
    const char *s = value.ptr;
    size_t n = value.len, i = 0;
    while (n > 0 && sv_is_ows(s[n - 1]))
        n--;
    while (i < n && sv_is_ows(s[i]))
        i++;
    if (i < n && (s[i] == '"' || (n - i >= 2 && s[i] == 'W' && s[i + 1] == '/'))) {
        int w, ew;
        sf_view tag, ours;
        size_t j = 0;
        if (parse_etag(s, n, &i, &w, &tag) != 0 || i != n || w)
            return 0;
        if (parse_etag(etag.ptr, etag.len, &j, &ew, &ours) != 0 || j != etag.len || ew)
            return 0;
        return tag.len == ours.len && memcmp(tag.ptr, ours.ptr, tag.len) == 0;
    }
    /* "exactly matches the Last-Modified field value" (§13.1.5): the bytes
     * servd sends, not any date of the same second (an rfc850 or asctime
     * form, a wrong day name) */
    char lm[SF_HTTP_DATE_LEN + 1];
    return last_modified != SV_NO_DATE && n - i == SF_HTTP_DATE_LEN &&
           sf_http_date_format(last_modified, lm) == 0 && memcmp(s + i, lm, SF_HTTP_DATE_LEN) == 0;
}
