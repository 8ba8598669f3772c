/* Accept-Encoding (servd/negotiate.c): RFC 9110 §12.5.3 and HTTP.md. */
#include "runner.h"
#include "http.h"

/* An entry with the given encodings and body lengths (no pack needed:
 * negotiation only reads encoding and body_len). */
static sf_entry entry(int n, const int *enc, const uint64_t *len)
{
    sf_entry e;
    memset(&e, 0, sizeof e);
    e.kind = SF_KIND_FILE;
    e.nvariants = (unsigned)n;
    e.flags = n > 1 ? SF_ENTRY_NEGOTIABLE : 0;
    for (int i = 0; i < n; i++) {
        e.variants[i].encoding = enc[i];
        e.variants[i].body_len = len[i];
    }
    return e;
}

/* identity 1000 bytes, gzip 300, br 250, zstd 280 */
static sf_entry all4(void)
{
    static const int enc[] = {SF_ENC_IDENTITY, SF_ENC_GZIP, SF_ENC_BR, SF_ENC_ZSTD};
    static const uint64_t len[] = {1000, 300, 250, 280};
    return entry(4, enc, len);
}

/* Negotiates and returns the chosen encoding (or -1). */
static int pick(const sf_entry *e, const char *ae)
{
    sf_view v = {ae, ae ? strlen(ae) : 0};
    int i = sv_negotiate(e, v, ae == NULL);
    if (i < -1 || i >= (int)e->nvariants)
        t__fail(__FILE__, __LINE__, "index %d out of range", i);
    return i < 0 ? -1 : e->variants[i].encoding;
}

#define PICK(ae, want) ASSERT_EQ(pick(&e, (ae)), (want))

TEST(negotiate_absent_and_empty)
{
    sf_entry e = all4();
    PICK(NULL, SF_ENC_IDENTITY);
    PICK("", SF_ENC_IDENTITY);
    PICK(" , ,", SF_ENC_IDENTITY);
}

TEST(negotiate_smallest_among_equal_q)
{
    sf_entry e = all4();
    PICK("gzip, deflate, br, zstd", SF_ENC_BR);
    PICK("gzip, br", SF_ENC_BR);
    PICK("gzip, zstd", SF_ENC_ZSTD);
    PICK("gzip", SF_ENC_GZIP);
    PICK("deflate", SF_ENC_IDENTITY);
    PICK("*", SF_ENC_BR);
}

TEST(negotiate_q_values_win_over_size)
{
    sf_entry e = all4();
    PICK("br;q=0.5, gzip", SF_ENC_GZIP);
    PICK("br;q=0.5, gzip;q=0.501", SF_ENC_GZIP);
    PICK("br;q=0.999, gzip;q=1.000", SF_ENC_GZIP);
    PICK("br;q=1, gzip;q=1.0", SF_ENC_BR);
    PICK("gzip;q=0.5", SF_ENC_GZIP); /* over the implicit identity */
    PICK("gzip;q=0.5, identity", SF_ENC_IDENTITY);
    PICK("gzip;q=0.001", SF_ENC_GZIP);
    PICK("br, *;q=0.1", SF_ENC_BR);
    PICK("identity;q=0.2, *;q=0.1", SF_ENC_IDENTITY);
}

TEST(negotiate_q_zero_excludes)
{
    sf_entry e = all4();
    PICK("gzip;q=0", SF_ENC_IDENTITY);
    PICK("gzip;q=0.000, br;q=0", SF_ENC_IDENTITY);
    PICK("br;q=0, *", SF_ENC_ZSTD);
    PICK("identity;q=0", -1);
    PICK("*;q=0", -1);
    PICK("*;q=0, identity", SF_ENC_IDENTITY);
    PICK("*;q=0, gzip", SF_ENC_GZIP);
    PICK("identity;q=0, gzip", SF_ENC_GZIP);
    PICK("gzip, gzip;q=0", SF_ENC_IDENTITY); /* listed twice: the lower weight */
}

TEST(negotiate_case_and_whitespace)
{
    sf_entry e = all4();
    PICK("GZIP", SF_ENC_GZIP);
    PICK("  gzip  ;  Q=0.7 ,\tBr ; q=0.6 ", SF_ENC_GZIP);
    PICK("Identity;Q=0", -1);
}

TEST(negotiate_no_substring_matching)
{
    sf_entry e = all4();
    /* x-gzip is another token (HTTP.md), as nginx and h2o take it */
    PICK("x-gzip", SF_ENC_IDENTITY);
    PICK("X-GZIP;q=0.5", SF_ENC_IDENTITY);
    PICK("x-gzip;q=0, gzip", SF_ENC_GZIP);
    PICK("gzip;q=0, x-gzip", SF_ENC_IDENTITY);
    PICK("gzipx", SF_ENC_IDENTITY);
    PICK("xgzip, brotli, zstandard", SF_ENC_IDENTITY);
    PICK("gzip;q=0", SF_ENC_IDENTITY);
    PICK("br2", SF_ENC_IDENTITY);
}

TEST(negotiate_equal_sizes_keep_the_lower_index)
{
    static const int enc[] = {SF_ENC_IDENTITY, SF_ENC_GZIP, SF_ENC_BR};
    static const uint64_t len[] = {100, 60, 60};
    sf_entry e = entry(3, enc, len);
    PICK("gzip, br", SF_ENC_GZIP);
    PICK("br, gzip", SF_ENC_GZIP);
}

TEST(negotiate_invalid_weights_ignore_the_element)
{
    sf_entry e = all4();
    PICK("br;q=1.5, gzip", SF_ENC_GZIP);
    PICK("br;q=2, gzip;q=0.5", SF_ENC_GZIP);
    PICK("br=q=0.9, gzip;q=0.5", SF_ENC_GZIP);    /* no ';' before the weight */
    PICK("br;q=0.9000, gzip;q=0.5", SF_ENC_GZIP); /* at most three decimals */
    PICK("br;q0.9, gzip;q=0.5", SF_ENC_GZIP);
    PICK("br;q=0.0001, gzip;q=0.5", SF_ENC_GZIP);
    PICK("br;q=-1, gzip;q=0.5", SF_ENC_GZIP);
    PICK("br;q=, gzip;q=0.5", SF_ENC_GZIP);
    PICK("br;q = 0.9, gzip;q=0.5", SF_ENC_GZIP);
    PICK("br;level=9, gzip;q=0.5", SF_ENC_GZIP);
    PICK("br q=1, gzip;q=0.5", SF_ENC_GZIP);
    PICK("identity;q=2", SF_ENC_IDENTITY); /* ignored: identity stays acceptable */
    PICK("gzip;q=1.", SF_ENC_GZIP);
    PICK("gzip;q=0.", SF_ENC_IDENTITY);
}

TEST(negotiate_only_available_variants)
{
    static const int enc[] = {SF_ENC_IDENTITY, SF_ENC_GZIP};
    static const uint64_t len[] = {100, 60};
    sf_entry e = entry(2, enc, len);
    PICK("br, zstd", SF_ENC_IDENTITY);
    PICK("br, zstd, identity;q=0", -1);
    PICK("br;q=1, gzip;q=0.1", SF_ENC_GZIP);
    static const int enc1[] = {SF_ENC_IDENTITY};
    static const uint64_t len1[] = {100};
    sf_entry one = entry(1, enc1, len1);
    ASSERT_EQ(pick(&one, "gzip, br"), SF_ENC_IDENTITY);
    ASSERT_EQ(pick(&one, "gzip, identity;q=0"), -1);
}

TEST(negotiate_tie_keeps_smaller_body_even_when_compressed_is_larger)
{
    /* an incompressible file whose gzip variant is bigger */
    static const int enc[] = {SF_ENC_IDENTITY, SF_ENC_GZIP};
    static const uint64_t len[] = {100, 120};
    sf_entry e = entry(2, enc, len);
    PICK("gzip, identity", SF_ENC_IDENTITY);
    PICK("gzip", SF_ENC_GZIP); /* identity unlisted: lowest weight */
}

TEST(negotiate_lines_form_one_list)
{
    sf_entry e = all4();
    sf_view two[2] = {{"gzip", 4}, {"br;q=0.5", 8}};
    ASSERT_EQ(e.variants[sv_negotiate_list(&e, two, 2)].encoding, SF_ENC_GZIP);
    sf_view ex[2] = {{"gzip", 4}, {"gzip;q=0", 8}};
    ASSERT_EQ(e.variants[sv_negotiate_list(&e, ex, 2)].encoding, SF_ENC_IDENTITY);
    ASSERT_EQ(sv_negotiate_list(&e, NULL, 0), 0);
}

TEST(negotiate_weights)
{
    sf_view v = {"gzip;q=0.25, *;q=0.5", 20};
    ASSERT_EQ(sv_accept_weight(&v, 1, SF_ENC_GZIP), 250);
    ASSERT_EQ(sv_accept_weight(&v, 1, SF_ENC_BR), 500);
    ASSERT_EQ(sv_accept_weight(&v, 1, SF_ENC_IDENTITY), 500);
    ASSERT_EQ(sv_accept_weight(NULL, 0, SF_ENC_IDENTITY), 1000);
    ASSERT_EQ(sv_accept_weight(NULL, 0, SF_ENC_GZIP), 0);
    sf_view g = {"gzip", 4};
    ASSERT_EQ(sv_accept_weight(&g, 1, SF_ENC_IDENTITY), 1);
    ASSERT_EQ(sv_accept_weight(&g, 1, 99), 0);
}

/* Values as long as a head allows, of elements that name nothing servd
 * has: each is read and ignored, and the ones after them still count. */
TEST(negotiate_long_lists)
{
    static char v[32768];
    sf_entry e = all4();
    size_t n = 30000;
    memset(v, '~', n); /* one token of marks */
    snprintf(v + n, sizeof v - n, ",gzip");
    PICK(v, SF_ENC_GZIP);
    n = 0;
    for (int i = 0; i < 3000; i++)
        n += (size_t)snprintf(v + n, sizeof v - n, "x%d,", i);
    snprintf(v + n, sizeof v - n, " br;q=0.5, gzip;q=0.4");
    PICK(v, SF_ENC_BR);
    n = 0;
    for (int i = 0; i < 1500; i++)
        n += (size_t)snprintf(v + n, sizeof v - n, "gzip;q=0.5,(%d) ,", i);
    ASSERT(n < 30000);
    snprintf(v + n, sizeof v - n, "gzip;q=0");
    PICK(v, SF_ENC_IDENTITY); /* the lowest of gzip's weights */
    memset(v, ',', 30000);
    snprintf(v + 30000, sizeof v - 30000, "zstd");
    PICK(v, SF_ENC_ZSTD);
}
