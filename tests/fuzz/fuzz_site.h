/*
 * fuzz_site.h - what the fuzz targets that answer requests share: a small
 * pack's entries laid out as servd-pack lays them out, and the check that a
 * response plan is one well-formed HTTP/1.1 message.
 */
#ifndef FUZZ_SITE_H
#define FUZZ_SITE_H

#include "http.h"
#include "sf/store.h"

#include <string.h>

/* Prints what to stderr and aborts (a finding). */
__attribute__((noreturn)) void fz_die(const char *what);

/* A new pack in a new directory /tmp/<name>-XXXXXX: its writer. */
sf_writer *fz_pack_begin(const char *name);

/* Commits the pack of fz_pack_begin() and opens a reader of it, which the
 * pack and its directory outlive until the process exits. */
sf_reader *fz_pack_end(sf_writer *w);

/* The file of the pack of fz_pack_begin(). */
const char *fz_pack_path(void);

/* Drops the pack of fz_pack_begin() unfinished, and its directory. */
void fz_pack_abort(sf_writer *w);

/* A stand-in body key: not SHA-256, but fixed by the bytes; SHA-256 once
 * fz_sha256_keys is set (servd's load check of a whole pack hashes every
 * body; fuzz_entry's seeds hold the stand-in keys). */
extern int fz_sha256_keys;
void fz_key_of(const char *p, size_t n, uint8_t key[SF_KEY_LEN]);

/* A file entry as servd-pack renders it (docs/format.md §6): n variants of
 * encodings enc[] with bodies bodies[], a 404 entry's blocks when is404,
 * flags beyond SF_ENTRY_NEGOTIABLE, Last-Modified lm. The path /app.js gets
 * an Access-Control-Allow-Origin line, as a rules file gives one. The bodies
 * are stored with w when it is not NULL. The record goes to *rec (malloc'd,
 * *len bytes). */
void fz_entry(sf_writer *w, const char *path, const char *mime, int n, const int *enc,
              const char *const *bodies, int is404, unsigned flags, int64_t lm, uint8_t **rec,
              size_t *len);

/* Stores rec under the path key (klen bytes), and counts it into the pack
 * id fz_pack_end() writes. */
void fz_put_record(sf_writer *w, const char *key, size_t klen, const uint8_t *rec, size_t n);

/* What the request fuzzers' packs share: /index.html in identity, gzip
 * and br; /a.txt with a weak date; a 404 page in identity and gzip; /old,
 * a redirect to /docs/. */
void fz_put_basics(sf_writer *w);

/* fz_entry() stored in the pack under path (NULL: the status:404 entry). */
void fz_put(sf_writer *w, const char *path, const char *mime, int n, const int *enc,
            const char *const *bodies, int is404, unsigned flags, int64_t lm);

/* Checks that plan p, the answer to req, is one HTTP/1.1 message: it fits
 * SV_PLAN_IOV, has one status line, CRLF-only header lines and exactly one
 * Content-Length equal to the body bytes (none on a 304, no body on a
 * HEAD). packed: the stored blocks are servd-pack's (fz_entry), so the
 * fields servd adds are checked too: at most one Vary (none is added to a
 * block that has one), a Location only as an absolute path of printable
 * ASCII. Other blocks may carry any such field themselves. */
void fz_check_plan(const sv_request *req, const sv_plan *p, int packed);

/* The value of field name (lower case, no colon) in the response head
 * head[0, n), after the colon and any spaces, of its first line, or NULL;
 * *count is how many lines carry the field. The first line, the status
 * line, is not a field. */
static inline const char *fz_field(const char *head, size_t n, const char *name, int *count)
{
    const char *found = NULL, *end = head + n;
    *count = 0;
    for (const char *l = memchr(head, '\n', n); l && l + 1 < end;) {
        const char *line = l + 1;
        l = memchr(line, '\n', (size_t)(end - line));
        const char *eol = l ? l : end;
        const char *colon = memchr(line, ':', (size_t)(eol - line));
        if (!colon || !sv_ieq(line, (size_t)(colon - line), name))
            continue;
        if (++*count == 1)
            for (found = colon + 1; found < eol && (*found == ' ' || *found == '\t');)
                found++;
    }
    return found;
}

#endif
