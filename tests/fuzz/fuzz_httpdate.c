/*
 * fuzz_httpdate - sf_http_date_parse() (If-Modified-Since, If-Unmodified-
 * Since and If-Range dates from clients) and sf_http_date_sendable() (the
 * Expires values of rules) on arbitrary bytes, read from an exact-size heap
 * copy (ASan catches any read past the end). A date that parses must be
 * inside the years 0..9999 and its IMF-fixdate must parse back to the same
 * second (a leap second, :60, is the next second). A sendable date must
 * parse, and be exactly what sf_http_date_format writes for it. So must a
 * date sf_http_date_parse_at parses at any now, INT64_MIN and INT64_MAX
 * among them.
 */
#include "sf/httpdate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void die(const char *why, const uint8_t *s, size_t n)
{
    fprintf(stderr, "fuzz_httpdate: %s: \"%.*s\"\n", why, (int)n, (const char *)s);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *in = malloc(size ? size : 1);
    if (!in)
        return 0;
    memcpy(in, data, size);
    int64_t t, back;
    char out[SF_HTTP_DATE_LEN + 1];
    int parsed = sf_http_date_parse(in, size, &t) == 0;
    if (parsed) {
        /* 9999-12-31T23:59:60Z at most: a four-digit year and a leap second */
        if (t < -62167219200LL || t > 253402300800LL)
            die("outside the years 0..9999", data, size);
        if (sf_http_date_format(t, out) != 0 && t != 253402300800LL)
            die("the formatter refuses a parsed date", data, size);
        if (t != 253402300800LL &&
            (sf_http_date_parse(out, SF_HTTP_DATE_LEN, &back) != 0 || back != t))
            die("the formatted date does not parse back to the same second", data, size);
    }
    /* read at the ends of the years 0..9999 and far outside them (an
     * rfc850-date's century is judged against now): the same bounds */
    static const int64_t nows[] = {INT64_MIN, -62167219200LL, 0, 253402300799LL, INT64_MAX};
    for (size_t i = 0; i < sizeof nows / sizeof nows[0]; i++)
        if (sf_http_date_parse_at(in, size, nows[i], &back) == 0 &&
            (back < -62167219200LL || back > 253402300800LL))
            die("outside the years 0..9999 (parse_at)", data, size);
    if (sf_http_date_sendable(in, size)) {
        if (!parsed)
            die("sendable but not parsed", data, size);
        int leap = memcmp(in + 23, "60", 2) == 0;
        sf_http_date_format(t - leap, out);
        if (memcmp(out, in, 23) != 0 || (!leap && memcmp(out, in, SF_HTTP_DATE_LEN) != 0))
            die("sendable but not what the formatter writes", data, size);
    }
    free(in);
    return 0;
}
