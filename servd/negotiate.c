/*
 * negotiate.c - choosing the variant of an entry from Accept-Encoding
 * (RFC 9110 §12.5.3, §12.4.2).
 *
 *   Accept-Encoding = #( codings [ weight ] )
 *   codings         = content-coding / "identity" / "*"
 *   weight          = OWS ";" OWS "q=" qvalue
 *   qvalue          = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] )
 *
 * Decisions (each pinned by tests/unit/servd_negotiate.c):
 *   - the field is parsed element by element, never searched for
 *     substrings: "gzip;q=0" is not gzip, and nor is "x-gzip" (HTTP.md
 *     names it a substring search's mistake; nginx and h2o answer it with
 *     identity, which every client decodes, where RFC 9110 §8.4.1.3 asks a
 *     recipient to take it for gzip);
 *   - an element with an invalid weight or a parameter other than q is
 *     ignored, the rest of the field still counts;
 *   - a coding listed twice gets the lower of its weights (a client that
 *     once said q=0 is not sent that coding);
 *   - "*" gives its weight to every coding not listed;
 *   - identity is acceptable unless "identity;q=0", or "*;q=0" without an
 *     identity element; when neither identity nor "*" is listed it gets
 *     the lowest non-zero weight (0.001), so any listed coding the client
 *     accepts is preferred over it;
 *   - no header: identity only (HTTP.md); an empty value: identity only.
 * Among the acceptable variants the highest weight wins, ties go to the
 * smallest body, then to the lower index (identity first).
 */
#include "http.h"

#include <string.h>

#define W_MAX         1000 /* q=1 in thousandths */
#define W_UNLISTED    -1   /* coding not named in the field */
#define W_IMPLICIT_ID 1    /* identity when neither it nor "*" is listed */

typedef struct prefs {
    int q[SF_ENC_COUNT]; /* W_UNLISTED or 0..W_MAX */
    int star;            /* W_UNLISTED or 0..W_MAX */
} prefs;

/* A token character (RFC 9110 §5.6.2): DIGIT, ALPHA, !#$%&'*+-.^_`|~ (one
 * bit per ASCII byte). A strchr() of the fifteen marks for each byte that
 * is not alphanumeric made a value of 30,000 of them cost 1.47 million
 * instructions, 0.96 million now (bench/RESULTS.md). */
static int is_tchar(unsigned char c)
{
    static const uint64_t lo = 0x03ff6cfa00000000ull, hi = 0x57ffffffc7fffffeull;
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
        return 1; /* the usual bytes first, as before */
    return c < 64 ? (int)(lo >> c) & 1 : c < 128 ? (int)(hi >> (c - 64)) & 1 : 0;
}

/* qvalue at s[0, n) exactly; @return 0..1000, or -1 when invalid. */
static int parse_qvalue(const char *s, size_t n)
{
    if (n == 0 || (s[0] != '0' && s[0] != '1'))
        return -1;
    int w = (s[0] - '0') * W_MAX;
    if (n == 1)
        return w;
    if (s[1] != '.' || n > 5)
        return -1;
    int scale = 100;
    for (size_t i = 2; i < n; i++, scale /= 10) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        w += (s[i] - '0') * scale;
    }
    return w > W_MAX ? -1 : w; /* "1.5" is not a qvalue */
}

static void set_weight(int *slot, int w)
{
    if (*slot == W_UNLISTED || w < *slot)
        *slot = w;
}

/* Applies one list element s[0, n) (commas already split off). */
static void element(prefs *p, const char *s, size_t n)
{
    size_t i = 0;
    while (i < n && sv_is_ows(s[i]))
        i++;
    while (n > i && sv_is_ows(s[n - 1]))
        n--;
    if (i == n)
        return; /* empty element (RFC 9110 §5.6.1.2) */
    size_t t = i;
    while (i < n && is_tchar((unsigned char)s[i]))
        i++;
    const char *tok = s + t;
    size_t tlen = i - t;
    if (tlen == 0)
        return;
    int w = W_MAX;
    while (i < n && sv_is_ows(s[i]))
        i++;
    if (i < n) {
        if (s[i] != ';')
            return;
        i++;
        while (i < n && sv_is_ows(s[i]))
            i++;
        if (n - i < 2 || (s[i] != 'q' && s[i] != 'Q') || s[i + 1] != '=')
            return;
        w = parse_qvalue(s + i + 2, n - i - 2);
        if (w < 0)
            return;
    }
    if (sv_ieq(tok, tlen, "*"))
        set_weight(&p->star, w);
    else if (sv_ieq(tok, tlen, "identity"))
        set_weight(&p->q[SF_ENC_IDENTITY], w);
    else if (sv_ieq(tok, tlen, "gzip"))
        set_weight(&p->q[SF_ENC_GZIP], w);
    else if (sv_ieq(tok, tlen, "br"))
        set_weight(&p->q[SF_ENC_BR], w);
    else if (sv_ieq(tok, tlen, "zstd"))
        set_weight(&p->q[SF_ENC_ZSTD], w);
    /* other codings (deflate, compress, x-gzip, ...) have no variants here */
}

static void parse_prefs(prefs *p, const sf_view *values, size_t n)
{
    for (int i = 0; i < SF_ENC_COUNT; i++)
        p->q[i] = W_UNLISTED;
    p->star = W_UNLISTED;
    for (size_t k = 0; k < n; k++) {
        const char *s = values[k].ptr;
        size_t len = values[k].len, start = 0;
        for (size_t i = 0; i <= len; i++) {
            if (i == len || s[i] == ',') {
                element(p, s + start, i - start);
                start = i + 1;
            }
        }
    }
}

static int weight_of(const prefs *p, int enc)
{
    if (p->q[enc] != W_UNLISTED)
        return p->q[enc];
    if (p->star != W_UNLISTED)
        return p->star;
    return enc == SF_ENC_IDENTITY ? W_IMPLICIT_ID : 0;
}

int sv_accept_weight(const sf_view *values, size_t n, int enc)
{
    if (enc < 0 || enc >= SF_ENC_COUNT)
        return 0;
    if (n == 0)
        return enc == SF_ENC_IDENTITY ? W_MAX : 0;
    prefs p;
    parse_prefs(&p, values, n);
    return weight_of(&p, enc);
}

int sv_negotiate_list(const sf_entry *e, const sf_view *values, size_t n)
{
    if (e->nvariants == 0)
        return -1;
    if (n == 0)
        return 0; /* no Accept-Encoding: identity, always variants[0] */
    prefs p;
    parse_prefs(&p, values, n);
    int best = -1, best_w = 0;
    for (unsigned i = 0; i < e->nvariants && i < SF_ENC_COUNT; i++) {
        const sf_variant *v = &e->variants[i];
        if (v->encoding < 0 || v->encoding >= SF_ENC_COUNT)
            continue;
        int w = weight_of(&p, v->encoding);
        if (w == 0)
            continue;
        if (best < 0 || w > best_w || (w == best_w && v->body_len < e->variants[best].body_len)) {
            best = (int)i;
            best_w = w;
        }
    }
    return best;
}

int sv_negotiate(const sf_entry *e, sf_view accept_encoding, int absent)
{
    return sv_negotiate_list(e, &accept_encoding, absent ? 0 : 1);
}
