/* Precompressed copies (X.gz beside X: packed, and noted) and bounded
 * decompression. */
#include "compress.h"
#include "decode.h"
#include "mime.h"
#include "runner.h"
#include "sf/mime.h"
#include "sidecar.h"

#include <stdlib.h>

static const char text_a[] = "console.log('a'); console.log('a'); console.log('a');\n";
static const char text_b[] = "body { margin: 0 } body { margin: 0 } body { margin: 0 }\n";

/* Compresses p with enc; the caller frees. */
static uint8_t *squeeze(int enc, const void *p, size_t n, size_t *outn)
{
    pk_compressor *c = pk_compressor_new();
    uint8_t *out;
    char err[128];
    if (!c || pk_compress(c, enc, PK_CLASS_TEXT, p, n, &out, outn, err, sizeof err) != 0)
        t__fail(__FILE__, __LINE__, "compress: %s", err);
    pk_compressor_free(c);
    return out;
}

/* Adds a file with the given identity bytes (copied) to s, of the class
 * its key's type has (as the read sets it). */
static void add(pk_site *s, const char *key, const void *p, size_t n)
{
    s->files = realloc(s->files, (s->n + 1) * sizeof *s->files);
    ASSERT(s->files != NULL);
    pk_file *f = &s->files[s->n++];
    memset(f, 0, sizeof *f);
    f->key = strdup(key);
    f->src = strdup(key);
    f->key_len = strlen(key);
    const char *type = sf_mime_by_ext(key, f->key_len);
    f->cls = type ? pk_mime_class(type) : PK_CLASS_NONE;
    uint8_t *b = malloc(n ? n : 1);
    memcpy(b, p, n);
    f->var[SF_ENC_IDENTITY] = (pk_variant){.present = 1, .bytes = b, .owned = 1, .len = n};
}

/* Precompressed copies are packed like any file (a link to X.gz keeps
 * working) and only counted, the first three by name: X.gz, X.br, X.zst
 * beside an X servd-pack compresses, whatever their bytes. */
TEST(sidecar_copies_kept_and_noted)
{
    pk_site s;
    memset(&s, 0, sizeof s);
    size_t gn, bn;
    uint8_t *gz = squeeze(SF_ENC_GZIP, text_a, strlen(text_a), &gn);
    uint8_t *br = squeeze(SF_ENC_BR, text_a, strlen(text_a), &bn);
    /* Sorted by key, as the walk leaves them. */
    add(&s, "/a.js", text_a, strlen(text_a));
    add(&s, "/a.js.br", br, bn); /* a copy */
    add(&s, "/a.js.gz", gz, gn); /* a copy */
    add(&s, "/b.css", text_b, strlen(text_b));
    add(&s, "/b.css.gz", "stale", 5); /* a copy by its name, whatever it holds */
    add(&s, "/c.txt", "c", 1);
    add(&s, "/c.txt.zst", "z", 1); /* a copy: named once the first three are */
    add(&s, "/d.bin.gz", gz, gn);  /* no d.bin */
    add(&s, "/photo.jpg", text_b, strlen(text_b));
    add(&s, "/photo.jpg.gz", gz, gn); /* beside an image: a download, no copy */
    ASSERT_EQ(s.files[8].cls, PK_CLASS_NONE);
    pk_sidecars_note(&s);
    ASSERT_EQ(s.n, 10); /* nothing dropped */
    ASSERT_EQ(s.sidecars, 4);
    ASSERT_EQ(s.nsidecar_names, 3);
    ASSERT_STR_EQ(s.sidecar_names[0], "/a.js.br");
    ASSERT_STR_EQ(s.sidecar_names[1], "/a.js.gz");
    ASSERT_STR_EQ(s.sidecar_names[2], "/b.css.gz");
    pk_site_free(&s);
    free(gz);
    free(br);
}

TEST(decode_bounds_and_errors)
{
    size_t n = 100000, cn;
    char *big = malloc(n);
    ASSERT(big != NULL);
    for (size_t i = 0; i < n; i++)
        big[i] = (char)('a' + i % 7);
    for (int enc = SF_ENC_GZIP; enc < SF_ENC_COUNT; enc++) {
        uint8_t *c = squeeze(enc, big, n, &cn);
        uint8_t *out;
        size_t outn;
        char err[128];
        ASSERT_EQ(pk_decompress(enc, c, cn, n, &out, &outn, err, sizeof err), 0);
        ASSERT_EQ(outn, n);
        ASSERT_MEM_EQ(out, n, big, n);
        free(out);
        ASSERT_EQ(pk_decompress(enc, c, cn, n - 1, &out, &outn, err, sizeof err),
                  PK_DECODE_TOO_BIG);
        ASSERT_EQ(pk_decompress(enc, c, cn / 2, n, &out, &outn, err, sizeof err), -1);
        ASSERT_EQ(pk_decompresses_to(enc, c, cn, (const uint8_t *)big, n), 1);
        ASSERT_EQ(pk_decompresses_to(enc, c, cn, (const uint8_t *)big, n - 1), 0);
        free(c);
    }
    /* Two gzip members are one valid gzip stream. */
    size_t g1, g2;
    uint8_t *a = squeeze(SF_ENC_GZIP, text_a, strlen(text_a), &g1);
    uint8_t *b = squeeze(SF_ENC_GZIP, text_b, strlen(text_b), &g2);
    uint8_t *both = malloc(g1 + g2);
    memcpy(both, a, g1);
    memcpy(both + g1, b, g2);
    char want[sizeof text_a + sizeof text_b];
    snprintf(want, sizeof want, "%s%s", text_a, text_b);
    ASSERT_EQ(pk_decompresses_to(SF_ENC_GZIP, both, g1 + g2, (const uint8_t *)want, strlen(want)),
              1);
    ASSERT_EQ(
        pk_decompresses_to(SF_ENC_GZIP, (const uint8_t *)"not gzip", 8, (const uint8_t *)"x", 1),
        0);
    free(a);
    free(b);
    free(both);
    free(big);
}

/* A body whose length is exactly the size of the decoder's buffer at some
 * step (64 KiB, then doubled) ends with the buffer full: that is the end of
 * the data, not a sign that more is coming. zstd's streaming decoder would
 * start on a next frame that is not there ("truncated"), and verify
 * refused every pack with such a file. Lengths around each step too. */
TEST(decode_bodies_that_fill_the_buffer_exactly)
{
    size_t sizes[] = {65535, 65536, 65537, 131072, 262144, 524288};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        size_t n = sizes[k], cn;
        char *text = malloc(n);
        ASSERT(text != NULL);
        for (size_t i = 0; i < n; i++)
            text[i] = "/* x */ var a = 1;\n"[i % 19];
        for (int enc = SF_ENC_GZIP; enc < SF_ENC_COUNT; enc++) {
            uint8_t *c = squeeze(enc, text, n, &cn);
            if (!pk_decompresses_to(enc, c, cn, (const uint8_t *)text, n))
                t__fail(__FILE__, __LINE__, "%s of %zu bytes does not decode to them",
                        sf_encoding_name(enc), n);
            free(c);
        }
        free(text);
    }
    /* Two zstd frames, the first ending exactly at the buffer's end. */
    size_t n = 65536, c1, c2;
    char *text = malloc(2 * n);
    ASSERT(text != NULL);
    for (size_t i = 0; i < 2 * n; i++)
        text[i] = (char)('a' + i % 7);
    uint8_t *a = squeeze(SF_ENC_ZSTD, text, n, &c1);
    uint8_t *b = squeeze(SF_ENC_ZSTD, text + n, n, &c2);
    uint8_t *both = malloc(c1 + c2);
    ASSERT(both != NULL);
    memcpy(both, a, c1);
    memcpy(both + c1, b, c2);
    ASSERT_EQ(pk_decompresses_to(SF_ENC_ZSTD, both, c1 + c2, (const uint8_t *)text, 2 * n), 1);
    ASSERT_EQ(pk_decompresses_to(SF_ENC_ZSTD, both, c1 + c2 - 1, (const uint8_t *)text, 2 * n), 0);
    free(a);
    free(b);
    free(both);
    free(text);
}
