/*
 * rules.h - the rules file (--rules FILE.json; schema in
 * manifests/rules.schema.json) and the default Cache-Control policy.
 *
 *   {"cache_control": [{"match": GLOB, "value": "..."}],   first match wins
 *    "headers":       [{"match": GLOB, "name": "..", "value": ".."}],  all apply
 *    "exclude":       [GLOB],
 *    "mime":          [{"match": GLOB, "type": ".."}],     first match wins
 *    "encoded":       [GLOB]}    files shipped compressed (X.wasm.br): stored
 *                                 as what they contain, served negotiated
 *
 * Globs are matched against the pack key ("/docs/index.html"; syntax in
 * glob.h). Every string is validated at load time and a bad one is refused
 * with "FILE: /json/pointer: cause", so nothing malformed can reach a header.
 *
 * Defaults, used when no cache_control rule matches:
 *   text/html, application/xhtml+xml   "no-cache" (revalidate with the ETag)
 *   hashed asset names                 "public, max-age=31536000, immutable"
 *   everything else                    "public, max-age=3600"
 * HTML is checked first: a page URL is user-facing and never immutable, even
 * if its name happens to look hashed.
 */
#ifndef PK_RULES_H
#define PK_RULES_H

#include "fields.h"

#include "headers.h"

#include <stddef.h>

#define PK_CC_HTML      "no-cache"
#define PK_CC_IMMUTABLE "public, max-age=31536000, immutable"
#define PK_CC_DEFAULT   "public, max-age=3600"

/* Largest rules file read: rules are a few dozen lines; a megabyte means a
 * wrong file was passed. */
#define PK_RULES_MAX_BYTES (1024 * 1024)

/* Most bytes of rule header lines ("Name: value" CRLF) one path may get.
 * They go on every response of the path, and the hops before a client cap
 * a response head: Varnish at 32 KiB (http_resp_size), nginx proxying at
 * its proxy_buffer_size (4 or 8 KiB by default: servd-pack(1) says so). */
#define PK_HEADERS_PATH_MAX 16384

/* Shortest run of hash characters taken as a content hash: 8 is what Vite,
 * Rollup, esbuild and Parcel emit at least (webpack emits 20). */
#define PK_HASH_MIN_CHARS 8

typedef struct pk_rules pk_rules;

/* Loads and validates a rules file. @return 0, or -1 with
 * "FILE: /pointer: cause" (or "FILE:LINE:COL: cause" for bad JSON) in err. */
int pk_rules_load(const char *path, pk_rules **out, char *err, size_t errlen);
void pk_rules_free(pk_rules *r);

/* All queries accept r == NULL (no rules file: defaults only). */
int pk_rules_excluded(const pk_rules *r, const char *key, size_t len);
/* 1 if an exclude glob matches every path under the directory dirkey
 * (e.g. "/drafts/ **" without the space, or "**"): the walk then skips the
 * directory without reading it. */
int pk_rules_excluded_dir(const pk_rules *r, const char *dirkey, size_t len);
/* 1 if an encoded rule matches the key: the file is X.gz, X.br or X.zst as
 * a build tool shipped it (a Unity WebGL build's game.wasm.br,
 * fetched by that name and expected with Content-Encoding), and is stored
 * as the X it contains, under its own key (read.c). */
int pk_rules_encoded(const pk_rules *r, const char *key, size_t len);
/* The MIME override for a key, or NULL. */
const char *pk_rules_mime(const pk_rules *r, const char *key, size_t len);
/* The Cache-Control value for a key of type mime (never NULL). */
const char *pk_rules_cache_control(const pk_rules *r, const char *key, size_t len,
                                   const char *mime);
/* Number of header rules: an upper bound of pk_rules_headers()'s result. */
size_t pk_rules_nheaders(const pk_rules *r);
/* Fills out (pk_rules_nheaders() slots) with the headers whose glob matches,
 * in file order, and *n with their count. The strings live as long as r.
 * Refused, with "RULES: cause" naming the rules and the path in err: two
 * matching rules giving one path a field that may appear only once in a
 * response (pk_header_singleton), or more than PK_HEADERS_PATH_MAX bytes
 * of header lines. @return 0 or -1. */
int pk_rules_headers(const pk_rules *r, const char *key, size_t len, pk_header *out, size_t *n,
                     char *err, size_t errlen);

/* 1 if the file name of key carries a content hash. The hash follows a '.'
 * or '-' after a non-empty stem (stem.HASH.ext, stem-HASH.ext; the first
 * segment of the name never counts) and, extension excluded, is one of:
 *   hex        PK_HASH_MIN_CHARS+ lowercase hex, a digit and a letter, no
 *              year (webpack, Parcel: "app.3f9a1c2e.js");
 *   base64url  PK_HASH_MIN_CHARS+ of [A-Za-z0-9_-] up to the next '.', with
 *              a digit, a lowercase and an uppercase letter, and not words
 *              and numbers in camel case (Vite, Rollup: "main-BkR2x9aQ.js",
 *              "index-CpZ3tG_-.js"; not "banner-Summer2024.jpg");
 *   base32     exactly PK_HASH_MIN_CHARS of [A-Z2-7], a digit before a
 *              letter (esbuild: "chunk-5X7JQ2ZL.js").
 * Dates, versions, camera and report names do not count (IMG_20230101.jpg,
 * DSC01234.JPG, Report2023Q4.pdf, photo-IMG20230101.png): a false positive
 * would pin a changing file in caches for a year, so the tests lean towards
 * missing a hash, which only costs a revalidation an hour. */
int pk_hashed_name(const char *key, size_t len);

/* Sections for pk_rules_warn. */
#define PK_RULES_EXCLUDE       1u
#define PK_RULES_ENCODED       2u
#define PK_RULES_MIME          4u
#define PK_RULES_CACHE_CONTROL 8u
#define PK_RULES_HEADERS       16u

/* Warns (stderr, "warning: RULES: /section/N "glob" ...") about the rules
 * of the given sections that did nothing in this build, once the queries of
 * those sections have been asked for every file (the walk: exclude; the
 * reads: encoded, mime; the decisions: cache_control, headers):
 *   - a cache_control, headers, mime or encoded rule whose glob matched no
 *     file ("/asset/ **" for "/assets/ **"; an encoded game in a
 *     subdirectory that a glob anchored at the root misses would be served
 *     as application/x-brotli: that warning says the glob is anchored);
 *   - a cache_control or mime rule that matched files but applies to none,
 *     each taken by an earlier rule (first match wins);
 *   - an exclude that skipped nothing but names a directory the walk saw
 *     ("/drafts" written for "/drafts/ **" publishes the drafts), or that
 *     is anchored at the root ('/') and matched no path the walk reached
 *     (but one naming a hidden path, which the walk skips before asking).
 *     An unanchored exclude that finds nothing ("*.map") is normal in a
 *     rules file shared by sites, and is not mentioned; nor is an exclude
 *     or encoded glob that matched only what earlier ones took.
 * The first ten of a call are printed, then a count of the rest. */
void pk_rules_warn(const pk_rules *r, unsigned sections);

#endif
