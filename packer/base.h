/*
 * base.h - --base OLD.lmdb: reusing the compressed bodies of an older pack.
 *
 * The compressed variants of a file are a pure function of (identity bytes,
 * compression class, profile). So when the old pack was made with the same
 * profile, every old entry whose identity body has the same SHA-256 and whose
 * type has the same class carries exactly the variants a fresh run would
 * produce: copying them gives the bodies of a full pack, minus the
 * compression time (and so its ETags, which build derives afterwards from
 * the bodies, the type and the rule headers). With a different profile no body is reused.
 *
 * Unlike a full pack, a path whose identity bytes are unchanged keeps the old
 * entry's Last-Modified (pk_base_last_modified), whatever its mtime, whatever
 * SOURCE_DATE_EPOCH and whatever the old profile: validators of unchanged
 * files survive a fresh checkout and diff lists only real changes.
 */
#ifndef PK_BASE_H
#define PK_BASE_H

#include "digest.h"
#include "sf/store.h"

typedef struct pk_base_entry {
    uint8_t digest[PK_DIGEST_LEN]; /* SHA-256 of the identity bytes */
    int cls;                       /* enum pk_class of the old entry's type */
    unsigned nvar;                 /* compressed variants (identity excluded) */
    struct {
        int encoding;
        sf_view bytes; /* into the old pack's map */
        uint8_t key[SF_KEY_LEN];
    } v[SF_ENC_COUNT - 1];
} pk_base_entry;

typedef struct pk_base pk_base;

/* Opens the old pack and indexes it. *usable is set to 0 (and nothing is
 * indexed) when its profile differs from profile.
 * @return 0, or -1 with "FILE: cause" in err (missing, corrupt, not a pack). */
int pk_base_open(const char *path, const char *profile, pk_base **out, int *usable, char *err,
                 size_t errlen);

/* The old variants for identity digest and class, or NULL. */
const pk_base_entry *pk_base_find(const pk_base *b, const uint8_t digest[PK_DIGEST_LEN], int cls);

/* Last-Modified of the old pack's file at key, and whether its
 * representation is unchanged: the same SHA-256 of the identity bytes, the
 * same type (mime) and the same extra header lines (extras, as rendered),
 * which the ETag covers too (digest.h). A re-pack keeps the validators of
 * unchanged files, so `diff` lists only real changes, and gives a changed
 * one a later date, so a client that revalidates with If-Modified-Since
 * alone never gets a 304 for a new representation. Works whatever the
 * profile. @return 1 (unchanged) or 0 (changed) and *lm, with *weak set
 * when the old entry's date was marked weak (SF_ENTRY_DATE_WEAK), or -1
 * (the old pack has no file at key). */
int pk_base_last_modified(const pk_base *b, const char *key, size_t len,
                          const uint8_t digest[PK_DIGEST_LEN], const char *mime, const char *extras,
                          size_t extras_len, int64_t *lm, int *weak);

/* Whether date is the old pack's time of packing in a pack that marks no
 * weak date (SF_ENTRY_DATE_WEAK is format minor 3's; every older writer
 * set the meta record's created to its time of packing, and gave that date
 * to a file whose mtime was in the future). */
int pk_base_unmarked_packing_time(const pk_base *b, int64_t date);

/* The profile of the old pack (valid until pk_base_close). */
const char *pk_base_profile(const pk_base *b);

/* Closes the old pack: every view from it becomes invalid. */
void pk_base_close(pk_base *b);

#endif
