/*
 * glob.h - the path globs of the rules file, matched against pack keys.
 *
 * Syntax (documented in servd-pack(1)):
 *   *        any run of characters except '/'
 *   **       any run of characters, '/' included; "**" followed by "/" may
 *            also match nothing, so /a/ ** /x (without the spaces) matches /a/x
 *   ?        one character except '/'
 *   [abc] [a-z] [!a-z] [^a-z]   one character (never '/') from a set
 * Characters are UTF-8 characters (keys are UTF-8): ? and a set consume all
 * the bytes of one, and set ranges are code point ranges. Matching is
 * case-sensitive; there are no braces.
 *   \c       the character c literally
 * A glob that starts with '/' is anchored at the site root; any other glob
 * may match at any directory level, as if "/ ** /" (without the spaces) were in front
 * ("*.html" matches "/index.html" and "/docs/a.html").
 * Matching is a dynamic programme over (glob position, key position), so it
 * is O(glob length x key length) whatever the pattern: no backtracking blow-up.
 */
#ifndef PK_GLOB_H
#define PK_GLOB_H

#include <stddef.h>

/* Longest glob accepted, in bytes: far beyond any real rule, small enough
 * that a compiled glob stays a few kilobytes. */
#define PK_GLOB_MAX 1024

typedef struct pk_glob pk_glob;

/* Compiles pattern. On failure writes the cause into err.
 * @return 0, or -1 (malformed pattern or out of memory). */
int pk_glob_compile(const char *pattern, pk_glob **out, char *err, size_t errlen);

/* @return 1 if key[0..len) matches, else 0. */
int pk_glob_match(const pk_glob *g, const char *key, size_t len);

/* @return 1 if g matches every key under the directory dirkey (given
 * without its trailing '/'): the glob ends in "**" and matches dirkey + "/".
 * Any match of such a glob on a string extends to every longer string with
 * that prefix (the final "**" absorbs the rest), so a directory it covers can
 * be skipped without looking inside. */
int pk_glob_covers(const pk_glob *g, const char *dirkey, size_t len);

void pk_glob_free(pk_glob *g);

#endif
