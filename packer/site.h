/*
 * site.h - the in-memory model of a site being packed: one pk_file per key,
 * sorted by key (byte order = LMDB's order = the order records are written).
 *
 * Ownership: the site owns every pk_file and everything a pk_file points to,
 * except the strings that live in the rules (cache_control, extra headers)
 * and variant bytes borrowed from a --base pack (pk_variant.owned == 0),
 * which live as long as that pack's reader.
 */
#ifndef PK_SITE_H
#define PK_SITE_H

#include "digest.h"
#include "headers.h"
#include "sf/store.h"

#include <stddef.h>
#include <stdint.h>
#include <time.h>

typedef struct pk_variant {
    int present;          /* this encoding is stored */
    const uint8_t *bytes; /* owned (owned == 1) or a view into the base pack; NULL when
                           * dropped (identity) or spilled */
    int owned;
    int spilled;        /* its bytes are in the build's spill file (spill.h) ... */
    uint64_t spill_off; /* ... at this offset */
    size_t len;
    uint8_t digest[PK_DIGEST_LEN];
    char etag[PK_ETAG_SIZE];
} pk_variant;

typedef struct pk_file {
    char *key; /* "/docs/index.html" */
    size_t key_len;
    char *src;                 /* path on disk as walked, for reading and messages */
    uint64_t size;             /* from stat at walk time */
    int64_t mtime;             /* seconds, from the file */
    uint64_t dev, ino;         /* the file itself (a link's target), so no output replaces it */
    int64_t last_modified;     /* what Last-Modified says (SOURCE_DATE_EPOCH or mtime) */
    char *mime;                /* full Content-Type value */
    const char *cache_control; /* from the rules or a default: not owned */
    pk_header *extra;          /* owned array; strings live in the rules */
    size_t nextra;
    int cls;       /* enum pk_class */
    int reused;    /* compressed variants came from --base */
    size_t twin;   /* 1 + the index of an earlier file with the same bytes and class, whose
                    * compressed variants this one shares (compressed once); 0: none */
    int encoded;   /* stored as what the file contains (an .svgz, an encoded rule's) */
    int date_weak; /* last_modified is not known to be when it changed (SF_ENTRY_DATE_WEAK) */
    int reread;    /* identity bytes dropped after the read or the compression: the
                    * compression and the write read the file again and check its
                    * SHA-256 (pk__reread, build_int.h) */
    pk_variant var[SF_ENC_COUNT]; /* indexed by sf_encoding; var[0] = identity */

    /* What the file was when it was read: it must not move until the pack
     * is committed (read.c, pk__tree_unchanged). */
    uint64_t read_size;
    struct timespec read_mtim, read_ctim;
} pk_file;

/* Names of precompressed copies kept for the summary: a few show what they
 * are, the rest are counted ("and N more"). */
#define PK_SIDECAR_NAMES 3
/* Names of skipped dotfiles kept for the summary and for "no files to
 * pack": the smallest keys (the walk meets them in directory order), the
 * rest counted. */
#define PK_DOT_NAMES 3

typedef struct pk_site {
    char *root; /* realpath of the web root */
    pk_file *files;
    size_t n, cap;
    uint64_t skipped_dot;          /* dotfiles and dot-directories (one each) */
    char *dot_names[PK_DOT_NAMES]; /* the smallest keys of them, sorted; owned */
    size_t ndot_names;
    uint64_t sidecars; /* X.gz / X.br / X.zst beside an X compressed (sidecar.h) */
    const char *sidecar_names[PK_SIDECAR_NAMES]; /* the first of them: keys, not owned */
    size_t nsidecar_names;
    uint64_t skipped_excluded; /* files matched by an exclude rule */
} pk_site;

void pk_site_free(pk_site *s);

/* Writes "/.a, /.b and N more" for n of total names to out (cap bytes), or
 * "" when n is 0: the skipped dotfiles and the precompressed copies of the
 * summary. A name is cut after PK_NAME_SHOWN bytes ("..."), so that three
 * of them fit in 512. */
#define PK_NAME_SHOWN 100
void pk_names_list(char *out, size_t cap, const char *const *names, size_t n, uint64_t total);

/* Number of stored variants of f (identity included). */
unsigned pk_file_nvariants(const pk_file *f);

#endif
