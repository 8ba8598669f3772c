/*
 * fuzz_rules - servd-pack's rules file (packer/rules.c) on arbitrary bytes.
 *
 * The input is written to a file and loaded as a rules file. Checked on
 * every input: pk_rules_load() accepts it or refuses it with a message,
 * and a loaded rules set answers every query (exclude, encoded, type,
 * Cache-Control, headers) for a handful of keys without failing the
 * contracts of rules.h: a Cache-Control is never NULL, headers fit their
 * slots, a refusal of headers has a message. ASan and UBSan watch the rest.
 */
#include "headers.h"
#include "rules.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char path[64];

static void die(const char *what)
{
    fprintf(stderr, "fuzz_rules: %s\n", what);
    abort();
}

static void cleanup(void)
{
    unlink(path);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    snprintf(path, sizeof path, "/tmp/fuzz_rules-%d.json", (int)getpid());
    atexit(cleanup);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const keys[] = {"/index.html",
                                       "/docs/a.html",
                                       "/js/app.3f9a1c2e.js",
                                       "/Build/game.wasm.br",
                                       "/drafts/x",
                                       "/img/logo.png",
                                       "/"};
    FILE *f = fopen(path, "wb");
    if (!f)
        die("cannot write the input file");
    if (size && fwrite(data, 1, size, f) != size)
        die("cannot write the input");
    fclose(f);
    pk_rules *r = NULL;
    char err[1024] = "";
    if (pk_rules_load(path, &r, err, sizeof err) != 0) {
        if (!err[0] || r)
            die("a refusal without a message, or with rules");
        return 0;
    }
    size_t slots = pk_rules_nheaders(r);
    pk_header *h = calloc(slots ? slots : 1, sizeof *h);
    if (!h)
        die("out of memory");
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const char *k = keys[i];
        size_t n = strlen(k);
        (void)pk_rules_excluded(r, k, n);
        (void)pk_rules_encoded(r, k, n);
        (void)pk_rules_mime(r, k, n);
        if (!pk_rules_cache_control(r, k, n, "text/html") ||
            !pk_rules_cache_control(r, k, n, "image/png"))
            die("no Cache-Control");
        size_t got = 0;
        err[0] = '\0';
        if (pk_rules_headers(r, k, n, h, &got, err, sizeof err) == 0) {
            if (got > slots)
                die("more headers than slots");
        } else if (!err[0]) {
            die("headers refused without a message");
        }
    }
    (void)pk_rules_excluded_dir(r, "/drafts", 7);
    free(h);
    pk_rules_free(r);
    return 0;
}
