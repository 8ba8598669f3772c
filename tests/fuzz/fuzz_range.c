/*
 * fuzz_range - sv_range_parse() on arbitrary Range values. The first 8
 * input bytes give the representation length (small lengths are common so
 * that ranges overlap it), the rest is the field value. Results: 0 (ignore),
 * -416, or n in 1..max ranges that are ascending, disjoint, not adjacent
 * (they would have been merged) and inside the representation.
 */
#include "http.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 8)
        return 0;
    uint64_t len = 0;
    for (int i = 0; i < 8; i++)
        len = len << 8 | data[i];
    if (data[0] < 0xf0)
        len %= 100000; /* mostly small representations */
    size_t n = size - 8;
    char *buf = malloc(n ? n : 1);
    if (!buf)
        return 0;
    memcpy(buf, data + 8, n);
    sf_view v = {buf, n};
    sv_range r[SV_MAX_RANGES];
    int max = 1 + data[1] % SV_MAX_RANGES;
    int got = sv_range_parse(v, len, r, max);
    if (got != 0 && got != -416 && (got < 1 || got > max))
        abort();
    /* In range-spec order (RFC 9110 §15.3.7.2), so not sorted by offset:
     * each range is within the representation, the order follows the
     * specs, and no two ranges overlap or touch (those are merged). */
    for (int i = 0; i < got; i++) {
        if (r[i].first > r[i].last || r[i].last >= len)
            abort();
        if (i > 0 && r[i - 1].seq >= r[i].seq)
            abort();
        for (int j = 0; j < i; j++)
            if (r[j].first <= r[i].last + 1 && r[i].first <= r[j].last + 1)
                abort();
    }
    free(buf);
    return 0;
}
