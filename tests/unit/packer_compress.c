/* The encoders: every variant decodes to the input, headers are reproducible,
 * zstd frames respect the 8 MiB window cap and carry no checksum, and what
 * an encoder holds stays within pk_compress_memory's bound. */
#include "compress.h"
#include "mime.h"
#include "runner.h"
#include "sf/store.h"

#define ZSTD_STATIC_LINKING_ONLY /* ZSTD_getFrameHeader */
#include <brotli/decode.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

static uint8_t *text(size_t n)
{
    static const char *const words[] = {"static ",  "origin ", "servd ", "pack ", "<div>",
                                        "</div>\n", "cache ",  "vary ",  "etag ", "gzip "};
    uint8_t *p = malloc(n);
    ASSERT(p != NULL);
    uint32_t x = 12345;
    for (size_t i = 0; i < n;) {
        x = x * 1103515245u + 12345u;
        const char *w = words[(x >> 16) % 10];
        for (; *w && i < n; w++)
            p[i++] = (uint8_t)*w;
    }
    return p;
}

static uint8_t *decode(int enc, const uint8_t *in, size_t n, size_t want)
{
    uint8_t *out = malloc(want + 1);
    ASSERT(out != NULL);
    if (enc == SF_ENC_GZIP) {
        z_stream z = {0};
        ASSERT_EQ(inflateInit2(&z, 16 + MAX_WBITS), Z_OK);
        z.next_in = (Bytef *)in;
        z.avail_in = (uInt)n;
        z.next_out = out;
        z.avail_out = (uInt)want + 1;
        ASSERT_EQ(inflate(&z, Z_FINISH), Z_STREAM_END);
        ASSERT_EQ(z.total_out, want);
        inflateEnd(&z);
    } else if (enc == SF_ENC_BR) {
        size_t got = want + 1;
        ASSERT_EQ(BrotliDecoderDecompress(n, in, &got, out), BROTLI_DECODER_RESULT_SUCCESS);
        ASSERT_EQ(got, want);
    } else {
        size_t got = ZSTD_decompress(out, want + 1, in, n);
        ASSERT_EQ(ZSTD_isError(got), 0);
        ASSERT_EQ(got, want);
    }
    return out;
}

static void round_trip(int cls, const uint8_t *in, size_t n)
{
    pk_compressor *c = pk_compressor_new();
    ASSERT(c != NULL);
    for (int enc = SF_ENC_GZIP; enc < SF_ENC_COUNT; enc++) {
        uint8_t *out, *out2;
        size_t outn, outn2;
        char err[256];
        ASSERT_EQ(pk_compress(c, enc, cls, in, n, &out, &outn, err, sizeof err), 0);
        uint8_t *back = decode(enc, out, outn, n);
        ASSERT_MEM_EQ(back, n, in, n);
        /* Same input, same bytes: the basis of reproducible ETags. */
        ASSERT_EQ(pk_compress(c, enc, cls, in, n, &out2, &outn2, err, sizeof err), 0);
        ASSERT_MEM_EQ(out, outn, out2, outn2);
        free(back);
        free(out);
        free(out2);
    }
    pk_compressor_free(c);
}

TEST(compress_round_trip_text)
{
    uint8_t *p = text(100000);
    round_trip(PK_CLASS_TEXT, p, 100000);
    free(p);
}

TEST(compress_round_trip_small_and_empty)
{
    round_trip(PK_CLASS_TEXT, (const uint8_t *)"x", 1);
    round_trip(PK_CLASS_BINARY, (const uint8_t *)"", 0);
    uint8_t *p = text(5000);
    round_trip(PK_CLASS_FONT, p, 5000);
    free(p);
}

TEST(compress_gzip_header_is_reproducible)
{
    pk_compressor *c = pk_compressor_new();
    uint8_t *p = text(1000), *out;
    size_t n;
    char err[256];
    ASSERT_EQ(pk_compress(c, SF_ENC_GZIP, PK_CLASS_TEXT, p, 1000, &out, &n, err, sizeof err), 0);
    ASSERT_EQ(out[0], 0x1f);
    ASSERT_EQ(out[1], 0x8b);
    ASSERT_EQ(out[3], 0);                            /* FLG: no name, no comment */
    ASSERT_EQ(out[4] | out[5] | out[6] | out[7], 0); /* MTIME 0 */
    free(out);
    free(p);
    pk_compressor_free(c);
}

TEST(compress_zstd_frame_window_and_checksum)
{
    /* 9 MiB: larger than the 8 MiB window, so an uncapped encoder could ask
     * for more than Chromium accepts. Runs of equal bytes keep level 19 fast
     * (text this size takes it about 20 seconds). */
    size_t n = 9u << 20;
    uint8_t *p = malloc(n), *out;
    ASSERT(p != NULL);
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(i / 8192 * 37);
    size_t outn;
    char err[256];
    pk_compressor *c = pk_compressor_new();
    ASSERT_EQ(pk_compress(c, SF_ENC_ZSTD, PK_CLASS_TEXT, p, n, &out, &outn, err, sizeof err), 0);
    ZSTD_frameHeader h;
    ASSERT_EQ(ZSTD_getFrameHeader(&h, out, outn), 0);
    ASSERT(h.windowSize <= (1ull << PK_ZSTD_WINDOW_LOG));
    ASSERT_EQ(h.checksumFlag, 0);
    ASSERT_EQ(h.frameContentSize, n);
    uint8_t *back = decode(SF_ENC_ZSTD, out, outn, n);
    ASSERT_EQ(memcmp(back, p, n), 0);
    free(back);
    free(out);
    free(p);
    pk_compressor_free(c);
}

TEST(compress_profile_names_settings)
{
    char prof[PK_PROFILE_SIZE];
    ASSERT_EQ(pk_profile(prof), 0);
    ASSERT(strstr(prof, "gzip=libdeflate-") != NULL);
    ASSERT(strstr(prof, "/11/w24") != NULL);
    ASSERT(strstr(prof, "/19/w23") != NULL);
    ASSERT(strstr(prof, "keep=5%/64B") != NULL);
    ASSERT(strlen(prof) < 128); /* fits the meta record */
    /* The class tables are part of it: "r1 cls=" + 8 hex digits + " ". */
    char cls[PK_CLASS_DIGEST_SIZE];
    ASSERT_EQ(pk_mime_class_digest(cls), 0);
    ASSERT_EQ(strlen(cls), 8);
    ASSERT_EQ(strspn(cls, "0123456789abcdef"), 8);
    ASSERT(strcmp(cls, "00000000") != 0);
    char want[32];
    snprintf(want, sizeof want, " cls=%s ", cls);
    ASSERT(strstr(prof, want) != NULL);
}

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif

/* A field of /proc/self/status in KiB (VmRSS, VmHWM), or -1. */
static long status_kib(const char *field)
{
    FILE *f = fopen("/proc/self/status", "re");
    char line[256];
    long v = -1;
    size_t n = strlen(field);
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, field, n) == 0 && line[n] == ':')
            v = strtol(line + n + 1, NULL, 10);
    if (f)
        fclose(f);
    return v;
}

static uint8_t *noise(size_t n)
{
    uint8_t *p = malloc(n);
    ASSERT(p != NULL);
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        p[i] = (uint8_t)(x >> 32);
    }
    return p;
}

enum data { NOISE, TEXT, FONTS };
#define FONT_DIR "/usr/share/fonts/truetype/dejavu"

/* n bytes of the DejaVu TrueType files one after another (brotli holds more
 * for fonts than for text of the same size), or NULL without n of them. */
static uint8_t *fonts(size_t n)
{
    static const char *const names[] = {"DejaVuSans.ttf", "DejaVuSans-Bold.ttf",
                                        "DejaVuSansMono.ttf", "DejaVuSerif.ttf",
                                        "DejaVuSans-Oblique.ttf"};
    uint8_t *p = malloc(n);
    size_t got = 0;
    for (size_t i = 0; p && got < n && i < sizeof names / sizeof names[0]; i++) {
        char path[256];
        snprintf(path, sizeof path, "%s/%s", FONT_DIR, names[i]);
        FILE *f = fopen(path, "re");
        if (f) {
            got += fread(p + got, 1, n - got, f);
            fclose(f);
        }
    }
    if (p && got < n) {
        free(p);
        p = NULL;
    }
    return p;
}

/* In a child: the peak of resident memory compressing n bytes of data with
 * enc holds over what was resident before, after a first compression has
 * brought in the library's code and the thread's state. Exits 0 if within
 * pk_compress_memory, 77 for fonts not installed, else 1 (saying both). */
static void held_in_child(int enc, size_t n, enum data data)
{
    pk_compressor *c = pk_compressor_new();
    size_t w = enc == SF_ENC_GZIP ? 4u << 20 : 4096; /* libdeflate's state, made whole */
    uint8_t *warm = noise(w), *out;
    size_t outn;
    char err[256];
    if (!c || pk_compress(c, enc, PK_CLASS_TEXT, warm, w, &out, &outn, err, sizeof err))
        _exit(2);
    free(out);
    free(warm);
    uint8_t *in = data == TEXT ? text(n) : data == FONTS ? fonts(n) : noise(n);
    if (!in)
        _exit(77);
    FILE *f = fopen("/proc/self/clear_refs", "we");
    if (!f || fputs("5", f) < 0 || fclose(f) != 0) /* VmHWM = VmRSS */
        _exit(3);
    long before = status_kib("VmRSS");
    clock_t t0 = clock();
    if (pk_compress(c, enc, PK_CLASS_TEXT, in, n, &out, &outn, err, sizeof err) != 0)
        _exit(2);
    long peak = status_kib("VmHWM");
    uint64_t held = (uint64_t)(peak - before) * 1024, bound = pk_compress_memory(enc, n);
    printf("  MEASURE %s of %zu bytes of %s: held %.1f MiB, bound %.1f MiB, %.1f s\n",
           sf_encoding_name(enc), n,
           data == TEXT    ? "text"
           : data == FONTS ? "fonts"
                           : "noise",
           held / 1048576.0, bound / 1048576.0, (double)(clock() - t0) / CLOCKS_PER_SEC);
    fflush(stdout);
    _exit(before > 0 && peak > 0 && held <= bound ? 0 : 1);
}

TEST(compress_memory_bounds_what_the_encoders_hold)
{
#ifdef UNDER_ASAN
    t_skip("AddressSanitizer's allocator keeps freed memory and adds its own");
#endif
    FILE *f = fopen("/proc/self/clear_refs", "we");
    if (!f)
        t_skip("no /proc/self/clear_refs to reset the peak of resident memory");
    fclose(f);
    static const struct {
        int enc;
        size_t n;
        enum data data;
    } cases[] = {
        {SF_ENC_BR, 200000, TEXT},      {SF_ENC_BR, 1500000, TEXT},
        {SF_ENC_BR, 1500000, NOISE},    {SF_ENC_BR, 2300000, FONTS},
        {SF_ENC_ZSTD, 65536, TEXT},     {SF_ENC_ZSTD, 3000000, TEXT},
        {SF_ENC_ZSTD, 9u << 20, NOISE}, {SF_ENC_GZIP, 4u << 20, NOISE},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fflush(stdout);
        pid_t pid = fork();
        ASSERT(pid >= 0);
        if (pid == 0)
            held_in_child(cases[i].enc, cases[i].n, cases[i].data);
        int status;
        ASSERT_EQ(waitpid(pid, &status, 0), pid);
        ASSERT(WIFEXITED(status));
        if (WEXITSTATUS(status) == 77) {
            printf("  (no %zu bytes of fonts in %s: that case not run)\n", cases[i].n, FONT_DIR);
            continue;
        }
        ASSERT_EQ(WEXITSTATUS(status), 0);
    }
    /* the bound grows with the file, as the tables do */
    ASSERT(pk_compress_memory(SF_ENC_BR, 1u << 20) < pk_compress_memory(SF_ENC_BR, 8u << 20));
    ASSERT(pk_compress_memory(SF_ENC_ZSTD, 1u << 20) < pk_compress_memory(SF_ENC_ZSTD, 8u << 20));
}
