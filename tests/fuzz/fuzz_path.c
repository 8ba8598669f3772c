/*
 * fuzz_path - sf_path_from_target(), the one path normalisation, on
 * arbitrary bytes. On success the key must pass sf_path_check() (which is
 * what servd-pack requires of every stored key), start with '/', and never
 * hold a "." or ".." segment, "//", NUL or '\\' - so no request can name
 * anything outside the set of keys. And the key's URL (sf_path_to_url, what
 * servd puts in a Location and servd-pack diff in a purge list) must
 * normalise back to the key.
 */
#include "sf/path.h"
#include "sf/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void die(const char *why, const char *key, size_t n)
{
    fprintf(stderr, "fuzz_path: %s: \"%.*s\"\n", why, (int)n, key);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char out[SF_PATH_MAX];
    char *in = malloc(size ? size : 1);
    if (!in)
        return 0;
    memcpy(in, data, size);
    size_t n = (size_t)-1;
    int rc = sf_path_from_target(in, size, out, sizeof out, &n);
    if (rc == 0) {
        if (n >= sizeof out || out[n] != '\0')
            die("length or NUL", out, 0);
        if (n == 0 || out[0] != '/')
            die("does not start with /", out, n);
        if (sf_path_check(out, n) != 0)
            die("sf_path_check refuses the output", out, n);
        if (memmem(out, n, "/../", 4) || memmem(out, n, "/./", 3) || memmem(out, n, "//", 2))
            die("dot segment or empty segment", out, n);
        if ((n >= 3 && memcmp(out + n - 3, "/..", 3) == 0) ||
            (n >= 2 && memcmp(out + n - 2, "/.", 2) == 0))
            die("trailing dot segment", out, n);
        if (memchr(out, '\0', n) || memchr(out, '\\', n))
            die("NUL or backslash", out, n);
        static char url[3 * SF_PATH_MAX], back[SF_PATH_MAX];
        size_t ul = sf_path_to_url(out, n, url, sizeof url), bl;
        if (ul > sizeof url || memchr(url, '?', ul) || memchr(url, '#', ul))
            die("URL too long, or with '?' or '#'", url, ul < sizeof url ? ul : 0);
        if (sf_path_from_target(url, ul, back, sizeof back, &bl) != 0 || bl != n ||
            memcmp(back, out, n) != 0)
            die("the URL does not normalise back to the key", url, ul);
    } else if (rc != SF_EPATH && rc != SF_ETOOLONG) {
        die("unexpected error code", in, size < 100 ? size : 100);
    }
    free(in);
    return 0;
}
