/*
 * range.c - parsing a Range field against one representation
 * (RFC 9110 §14.1.1, §14.1.2, §14.2).
 *
 *   Range       = ranges-specifier
 *   ranges-specifier = range-unit "=" range-set     (unit compared
 *   range-set   = 1#range-spec                        case-insensitively)
 *   range-spec  = int-range / suffix-range / other-range
 *   int-range   = first-pos "-" [ last-pos ]
 *   suffix-range = "-" suffix-length
 *
 * Decisions (pinned by tests/unit/servd_range.c):
 *   - anything that is not a well-formed "bytes" range set (another unit,
 *     a last-pos below its first-pos, stray characters) is ignored (§14.2:
 *     "a server MAY ignore the Range header field");
 *   - numbers too large for 64 bits saturate: a huge last-pos means "to
 *     the end", a huge first-pos is simply not satisfiable;
 *   - satisfiable ranges are clamped to the representation, then merged
 *     when they overlap or touch (§15.3.7.2 allows coalescing regardless of
 *     order), so the result is disjoint. Merging as we go keeps the work
 *     bounded by the field's length times max, whatever the count of
 *     range-specs ("thousands of ranges" abuse costs nothing);
 *   - the result is then put in the order of the range-specs (§15.3.7.2:
 *     parts SHOULD follow it, "excluding those ranges that were deemed
 *     unsatisfiable or that were coalesced into other ranges"): a merged
 *     range sits where the first spec it absorbed was;
 *   - more than max disjoint ranges at any point of the merging, left to
 *     right: ignored (whole body);
 *   - a representation of length 0 has no byte to send: every range set
 *     is ignored and the empty 200 sent. §14.1.1 would make all but a
 *     non-zero suffix-range unsatisfiable, but a 416 breaks caches that
 *     fetch in slices (nginx's slice module asks "bytes=0-1048575" for a
 *     plain GET and hands the 416 to the client); nginx's own files, Go's
 *     ServeContent and Rack answer 200 too.
 */
#include "http.h"

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* 1*DIGIT at s[*i, n), saturating at UINT64_MAX. @return 0, or -1 if none.
 * Inlined, with a division only once a value nears the limit: a Range of
 * 30,000 bytes of short specs cost 1.72 million instructions a parse,
 * as a call with a division per digit (bench/RESULTS.md). */
static inline __attribute__((always_inline)) int number(const char *s, size_t n, size_t *i,
                                                        uint64_t *out)
{
    size_t p = *i;
    uint64_t v = 0;
    if (p >= n || !is_digit(s[p]))
        return -1;
    for (; p < n && is_digit(s[p]); p++) {
        unsigned d = (unsigned)(s[p] - '0');
        if (v < UINT64_MAX / 10)
            v = v * 10 + d; /* at most UINT64_MAX / 10 * 10 - 1 + 9: no overflow */
        else
            v = v > (UINT64_MAX - d) / 10 ? UINT64_MAX : v * 10 + d;
    }
    *i = p;
    *out = v;
    return 0;
}

/* Inserts [a, b] (from range-spec number seq) into the sorted, disjoint,
 * non-adjacent set out[0, *cnt), merging what it overlaps or touches; a
 * merged range keeps the smallest seq. @return 0, or -1 when that would make
 * more than max ranges. */
static int add_range(sv_range *out, int *cnt, int max, uint64_t a, uint64_t b, unsigned seq)
{
    int n = *cnt, i = 0;
    /* skip ranges that end before a - 1 (strictly left and not touching) */
    while (i < n && out[i].last + 1 < a)
        i++;
    int j = i;
    /* absorb every range that overlaps or touches [a, b] */
    while (j < n && (b == UINT64_MAX || out[j].first <= b + 1)) {
        if (out[j].first < a)
            a = out[j].first;
        if (out[j].last > b)
            b = out[j].last;
        if (out[j].seq < seq)
            seq = out[j].seq;
        j++;
    }
    int merged = j - i; /* ranges replaced by the one new range */
    if (merged == 0 && n >= max)
        return -1;
    int shift = 1 - merged;
    if (shift > 0)
        for (int k = n - 1; k >= j; k--)
            out[k + shift] = out[k];
    else if (shift < 0)
        for (int k = j; k < n; k++)
            out[k + shift] = out[k];
    out[i].first = a;
    out[i].last = b;
    out[i].seq = seq;
    *cnt = n + shift;
    return 0;
}

/* Sorts out[0, n) by seq (insertion sort: n <= max, a small bound). */
static void request_order(sv_range *out, int n)
{
    for (int i = 1; i < n; i++) {
        sv_range x = out[i];
        int j = i;
        for (; j > 0 && out[j - 1].seq > x.seq; j--)
            out[j] = out[j - 1];
        out[j] = x;
    }
}

int sv_range_parse(sf_view value, uint64_t len, sv_range *out, int max)
{
    const char *s = value.ptr;
    size_t n = value.len, i = 0;
    if (max <= 0)
        return 0;
    while (n > 0 && sv_is_ows(s[n - 1]))
        n--;
    while (i < n && sv_is_ows(s[i]))
        i++;
    /* range-unit "bytes", case-insensitive, then "=" (no whitespace) */
    static const char unit[] = "bytes";
    for (int k = 0; k < 5; k++, i++)
        if (i >= n || (s[i] | 0x20) != unit[k])
            return 0;
    if (i >= n || s[i] != '=')
        return 0;
    i++;

    int cnt = 0, specs = 0, overflow = 0;
    for (;;) {
        while (i < n && (sv_is_ows(s[i]) || s[i] == ','))
            i++; /* separators and empty list elements */
        if (i >= n)
            break;
        uint64_t a, b;
        int satisfiable = 1;
        if (s[i] == '-') {
            i++;
            uint64_t suffix;
            if (number(s, n, &i, &suffix) != 0)
                return 0;
            if (suffix == 0 || len == 0)
                satisfiable = 0;
            a = suffix >= len ? 0 : len - suffix;
            b = len - 1;
        } else {
            if (number(s, n, &i, &a) != 0 || i >= n || s[i] != '-')
                return 0;
            i++;
            b = UINT64_MAX;
            if (i < n && is_digit(s[i])) {
                number(s, n, &i, &b);
                if (b < a)
                    return 0; /* invalid range-spec: ignore the field */
            }
            if (a >= len)
                satisfiable = 0;
            else if (b >= len)
                b = len - 1;
        }
        if (satisfiable && !overflow && add_range(out, &cnt, max, a, b, (unsigned)specs) != 0)
            overflow = 1; /* keep parsing: a later syntax error still wins */
        specs++;
        /* after a range-spec: the end, or OWS "," */
        while (i < n && sv_is_ows(s[i]))
            i++;
        if (i < n && s[i] != ',')
            return 0;
    }
    if (specs == 0 || overflow || len == 0)
        return 0;
    if (cnt > 0) {
        request_order(out, cnt);
        return cnt;
    }
    return -416;
}
