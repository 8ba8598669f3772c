/*
 * sidecar.h - dropping precompressed sidecars (X.gz, X.br, X.zst beside X).
 *
 * A root prepared for nginx's gzip_static has X.gz next to X: servd-pack
 * makes its own, usually smaller, variants of X and keeps them consistent
 * with it, so such a sidecar is skipped and counted. Only a true sidecar is:
 * X.gz is skipped when X is of a type servd-pack compresses and X.gz
 * decompresses to exactly X's bytes (decompression bounded by X's size);
 * any other X.gz (an archive of an older X, unrelated data, a corrupt file,
 * a download beside an image or a disk image that no variant replaces, a
 * sidecar of a skipped sidecar) is an ordinary file, served as it is.
 */
#ifndef PK_SIDECAR_H
#define PK_SIDECAR_H

#include "site.h"

/* Marks keep_bytes on every file that could be a sidecar (X.gz, X.br or X.zst
 * of a file X of s) and on each such X: pk_sidecars_drop compares their bytes
 * after all the reads. s is sorted by key. */
void pk_sidecars_mark(pk_site *s);

/* Removes the true sidecars from s (sorted, identity bytes read), counting
 * them in s->skipped_sidecar and keeping the first PK_SIDECAR_NAMES keys in
 * s->sidecar_names for the summary. @return 0, or -1 (out of memory) with
 * err filled. */
int pk_sidecars_drop(pk_site *s, char *err, size_t errlen);

#endif
