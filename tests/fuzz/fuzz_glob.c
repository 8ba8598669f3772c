/*
 * fuzz_glob - the rules file's path globs (packer/glob.c) against a second
 * matcher.
 *
 * Input: a pattern, a NUL byte, then keys separated by NUL bytes. Checked on
 * every input:
 * - pk_glob_compile() and pk_glob_match() read nothing past their inputs;
 * - for a glob in the subset glibc's fnmatch(3) shares with servd-pack
 *   (anchored at '/', ASCII, no "**", no character classes), a key matches
 *   exactly when fnmatch(FNM_PATHNAME) says it does;
 * - an unanchored glob matches a key exactly when its anchored form
 *   "/ ** /" + glob (without the spaces) does (glob.h);
 * - a glob that covers a directory matches every key below it
 *   (pk_glob_covers, which lets the walk skip the directory).
 */
#include "glob.h"

#include <fnmatch.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void die(const char *what, const char *pattern, const char *key)
{
    fprintf(stderr, "fuzz_glob: %s: pattern \"%s\", key \"%s\"\n", what, pattern, key);
    abort();
}

/* The subset of globs whose meaning fnmatch(FNM_PATHNAME) shares. Not an
 * escaped '/': glibc's '*' then looks past it ("/ *\/x" misses "/m/x"). */
static int fnmatch_comparable(const char *p)
{
    if (p[0] != '/' || strstr(p, "**") || strstr(p, "[:") || strstr(p, "[=") || strstr(p, "[.") ||
        strstr(p, "\\/"))
        return 0;
    for (const char *q = p; *q; q++)
        if ((unsigned char)*q > 0x7e || (unsigned char)*q < 0x20)
            return 0;
    return 1;
}

static int ascii_key(const char *k, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)k[i] > 0x7e || (unsigned char)k[i] < 0x20)
            return 0;
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *end = memchr(data, 0, size);
    if (!end || (size_t)(end - (const char *)data) > PK_GLOB_MAX)
        return 0;
    const char *pattern = (const char *)data;
    char err[256];
    pk_glob *g, *anchored = NULL;
    if (pk_glob_compile(pattern, &g, err, sizeof err) != 0)
        return 0;
    size_t pl = strlen(pattern);
    if (pattern[0] != '/' && pl + 4 <= PK_GLOB_MAX) {
        char *a = malloc(pl + 5);
        if (!a)
            abort();
        memcpy(a, "/**/", 4);
        memcpy(a + 4, pattern, pl + 1);
        if (pk_glob_compile(a, &anchored, err, sizeof err) != 0)
            die("an unanchored glob whose anchored form does not compile", pattern, a);
        free(a);
    }
    int comparable = fnmatch_comparable(pattern);
    const char *k = end + 1, *stop = (const char *)data + size;
    while (k < stop) {
        const char *ke = memchr(k, 0, (size_t)(stop - k));
        size_t kn = ke ? (size_t)(ke - k) : (size_t)(stop - k);
        /* the matcher gets the key in a buffer of its exact size (ASan sees
         * a read past it); fnmatch and the messages a NUL-terminated copy */
        char *exact = malloc(kn ? kn : 1), *key = malloc(kn + 1);
        if (!exact || !key)
            abort();
        memcpy(exact, k, kn);
        memcpy(key, k, kn);
        key[kn] = '\0';
        int m = pk_glob_match(g, exact, kn);
        if (m != 0 && m != 1)
            die("pk_glob_match returned neither 0 nor 1", pattern, key);
        if (anchored && key[0] == '/' && m != pk_glob_match(anchored, exact, kn))
            die("an unanchored glob and its /**/ form disagree", pattern, key);
        if (comparable && key[0] == '/' && ascii_key(key, kn) &&
            m != (fnmatch(pattern, key, FNM_PATHNAME) == 0))
            die("pk_glob_match and fnmatch(FNM_PATHNAME) disagree", pattern, key);
        if (kn > 1 && key[0] == '/' && key[kn - 1] != '/' && pk_glob_covers(g, exact, kn)) {
            char *below = malloc(kn + 3);
            if (!below)
                abort();
            memcpy(below, key, kn);
            memcpy(below + kn, "/x", 3);
            if (!pk_glob_match(g, below, kn + 2))
                die("a glob that covers a directory misses a key below it", pattern, below);
            free(below);
        }
        free(exact);
        free(key);
        k += kn + 1;
    }
    pk_glob_free(anchored);
    pk_glob_free(g);
    return 0;
}
