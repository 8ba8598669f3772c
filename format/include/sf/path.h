/*
 * sf/path.h - the ONE path normalisation, shared by servd-pack (file names
 * become keys) and servd (request targets become keys). Keeping it in one
 * function is what guarantees that every packed file is reachable under
 * exactly one key and that nothing else is.
 *
 * A normalised path:
 *   - starts with '/', never contains NUL, '\\', C0 controls, DEL, an empty
 *     segment ("//"), a "." or a ".." segment;
 *   - is valid UTF-8 (no overlong forms, no surrogates, nothing above U+10FFFF);
 *   - ends with '/' when a request names a directory ("/", "/docs/"); a
 *     key in a pack never does (servd looks up index.html there).
 */
#ifndef SF_PATH_H
#define SF_PATH_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Turns the path part of an origin-form request target (everything before
 * '?', already split off by the caller) into a key: percent-decodes once
 * (RFC 3986 §2.1; "%2F" and "%5C" are refused so that a decoded '/' can never
 * create a segment and '\\' never reaches a key), removes "." segments,
 * resolves ".." segments (RFC 3986 §5.2.4) but refuses to climb above "/",
 * collapses repeated slashes, and validates UTF-8.
 * @param[in]  in, len   the raw path bytes
 * @param[out] out       at least cap bytes; receives the key (NUL-terminated)
 * @param[out] outlen    the key length without the NUL
 * @return 0, SF_EPATH (refused: the request is bad) or SF_ETOOLONG. */
int sf_path_from_target(const char *in, size_t len, char *out, size_t cap, size_t *outlen);

/* Checks that a decoded path (e.g. "/css/site.css" built from a file name)
 * is already a normalised key, i.e. that sf_path_from_target() of its
 * percent-encoded form gives it back unchanged.
 * @return 0 or SF_EPATH. */
int sf_path_check(const char *key, size_t len);

/* The UTF-8 character at s[0, n): @return its length (1-4), with its code
 * point in *cp (cp may be NULL), or 0 when the bytes there are not
 * well-formed UTF-8 (RFC 3629 §4: no overlong forms, no surrogates, nothing
 * above U+10FFFF) or n is 0. */
size_t sf_utf8_char(const void *s, size_t n, uint32_t *cp);

/* Writes the URL path that names a key: every byte but unreserved,
 * sub-delims, ':', '@' (pchar, RFC 3986 §3.3) and '/' becomes %XX
 * (upper-case hex), so that sf_path_from_target() of the result gives the
 * key back. A space is %20, '%' is %25, '?' is %3F, '#' is %23, and every
 * byte of a multi-byte UTF-8 character is escaped. Used for servd's
 * Location headers and servd-pack diff's purge list.
 * @param[in]  key, len  a normalised key (any bytes are encoded, though)
 * @param[out] out       receives at most cap bytes, no NUL
 * @param[in]  cap       the room in out
 * @return the length of the whole URL; more than cap means out holds only
 *         its start (3 * len is always enough). */
size_t sf_path_to_url(const char *key, size_t len, char *out, size_t cap);

/* sf_path_to_url, but the ASCII bytes in raw are written as they are: the
 * spelling of a client that does not escape them (browsers leave "[]|" in
 * a path raw), which caches keyed on the target as received hold. */
size_t sf_path_to_url_keeping(const char *key, size_t len, const char *raw, char *out, size_t cap);

/* The longest text sf_escape() writes for one character, NUL excluded. */
#define SF_ESCAPE_CHAR_MAX 6

/* Writes s[0, n) into out as text fit for a one-line message, since keys
 * and file names are untrusted: every byte below 0x20, 0x7f and every byte
 * that is not part of well-formed UTF-8 becomes \xNN, and the C1 controls
 * (U+0080-U+009F), the line and paragraph separators (U+2028, U+2029) and
 * the bidirectional controls (U+061C, U+200E, U+200F, U+202A-U+202E,
 * U+2066-U+2069) become \uNNNN, so that the text can neither forge a
 * second line, nor drive a terminal, nor read as another. Everything else,
 * '\\' included, is copied.
 * @param[out] out  cap bytes, cap > SF_ESCAPE_CHAR_MAX; always
 *                  NUL-terminated, and cut before the first character
 *                  whose text would not fit
 * @return the bytes of s written out (n when all of them fit). */
size_t sf_escape(const void *s, size_t n, char *out, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
