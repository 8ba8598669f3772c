/*
 * fuzz_decode - servd-pack's decompression (packer/decode.c) on arbitrary
 * bytes: what the "encoded" rule, an .svgz, --base and verify decode.
 *
 * Input: one byte choosing the encoding (gzip, br, zstd), one choosing the
 * bound (1 byte to 1 MiB), then the compressed bytes. Checked:
 * - pk_decompress() returns 0, PK_DECODE_TOO_BIG, PK_DECODE_NOMEM or -1
 *   with a message, and on 0 at most the bound;
 * - the bound is exact: data that decodes to k bytes decodes again, to the
 *   same bytes, under a bound of k, and is PK_DECODE_TOO_BIG under k - 1;
 * - pk_decompresses_to() agrees with it;
 * - a short input compressed by pk_compress() decodes back to itself (the
 *   round trip every --base reuse and every verify rests on).
 */
#include "compress.h"
#include "decode.h"
#include "mime.h"
#include "sf/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Inputs compressed for the round trip: brotli 11 and zstd 19 are slow,
 * so only short ones, which still reach every framing path. */
#define ROUND_TRIP_MAX 256

static pk_compressor *comp;

static void die(const char *what)
{
    fprintf(stderr, "fuzz_decode: %s\n", what);
    abort();
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    if (!(comp = pk_compressor_new()))
        die("pk_compressor_new");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const int encs[] = {SF_ENC_GZIP, SF_ENC_BR, SF_ENC_ZSTD};
    if (size < 2)
        return 0;
    int enc = encs[data[0] % 3];
    size_t max = (size_t)1 << (data[1] % 21);
    const uint8_t *in = data + 2;
    size_t n = size - 2;
    uint8_t *out = NULL;
    size_t outn = 0;
    char err[256] = "";
    int rc = pk_decompress(enc, in, n, max, &out, &outn, err, sizeof err);
    if (rc == 0) {
        if (outn > max)
            die("more than the bound");
        uint8_t *again = NULL;
        size_t againn = 0;
        if (pk_decompress(enc, in, n, outn, &again, &againn, err, sizeof err) != 0 ||
            againn != outn || (outn && memcmp(again, out, outn) != 0))
            die("not the same under a bound of its own size");
        free(again);
        if (outn > 0) {
            again = NULL;
            if (pk_decompress(enc, in, n, outn - 1, &again, &againn, err, sizeof err) !=
                PK_DECODE_TOO_BIG)
                die("not too big under a bound one byte short");
            free(again);
        }
        if (pk_decompresses_to(enc, in, n, out, outn) != 1)
            die("pk_decompresses_to disagrees");
        free(out);
    } else if (rc == -1) {
        if (!err[0])
            die("a refusal without a message");
    } else if (rc != PK_DECODE_TOO_BIG && rc != PK_DECODE_NOMEM) {
        die("unexpected result");
    }

    if (n <= ROUND_TRIP_MAX) {
        uint8_t *c = NULL, *d = NULL;
        size_t cn = 0, dn = 0;
        if (pk_compress(comp, enc, PK_CLASS_TEXT, in, n, &c, &cn, err, sizeof err) != 0)
            die("pk_compress");
        if (pk_decompress(enc, c, cn, n, &d, &dn, err, sizeof err) != 0 || dn != n ||
            (n && memcmp(d, in, n) != 0))
            die("the round trip does not give the input back");
        free(c);
        free(d);
    }
    return 0;
}
