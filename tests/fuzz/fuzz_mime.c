/*
 * fuzz_mime - servd-pack's Content-Type decision on a site file's bytes
 * (packer/mime.c, charset.c): the HTML prescan for <meta charset>, CSS @charset, the
 * XML declaration, the UTF-8 check and, for a name without an extension,
 * libmagic and the plain-text fallback.
 *
 * Input: one byte choosing the file's name (.html, .xhtml, .css, .svg,
 * .xml, .txt, no extension), then the file. Checked on every input: the
 * decision reads nothing past the file (an exact-size copy), and its type
 * claims "charset=utf-8" only for bytes that are UTF-8.
 */
#include "mime.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pk_magic *magic;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const keys[] = {"/a.html", "/a.xhtml", "/a.css", "/a.svg",
                                       "/a.xml",  "/a.txt",   "/README"};
    if (size < 1)
        return 0;
    const char *key = keys[data[0] % (sizeof keys / sizeof keys[0])];
    size_t n = size - 1;
    char *file = malloc(n ? n : 1);
    if (!file)
        return 0;
    memcpy(file, data + 1, n);
    char err[256];
    char *t = pk_mime_decide(key, strlen(key), NULL, file, n, &magic, err, sizeof err);
    if (!t) {
        fprintf(stderr, "fuzz_mime: no type: %s\n", err);
        abort();
    }
    if (strstr(t, "charset=utf-8") && !pk_utf8_valid(file, n)) {
        fprintf(stderr, "fuzz_mime: %s claims UTF-8 for bytes that are not\n", t);
        abort();
    }
    free(t);
    free(file);
    return 0;
}
