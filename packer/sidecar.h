/*
 * sidecar.h - precompressed copies (X.gz, X.br, X.zst beside X).
 *
 * A root prepared for nginx's gzip_static has X.gz next to X. servd-pack
 * makes its own variants of X and keeps them consistent with it, so X.gz is
 * never sent as X's gzip. But X.gz is a file of the site, and a URL that
 * names it (a download link, a sitemap.xml.gz named in robots.txt) keeps
 * working, as it does with nginx, Caddy and h2o: it is packed as any other
 * file, by its own type (application/gzip), stored as it is. Skipping it
 * broke such links silently. Copies beside a file servd-pack compresses are
 * counted, and the first few named in the summary, so that a user who
 * ships them only for gzip_static can exclude them with a rule.
 */
#ifndef PK_SIDECAR_H
#define PK_SIDECAR_H

#include "site.h"

/* Counts in s->sidecars the files X.gz, X.br and X.zst of s beside a file X
 * of a type servd-pack compresses (the types are decided: after the reads),
 * keeping the first PK_SIDECAR_NAMES keys (not owned) in s->sidecar_names.
 * s is sorted by key. */
void pk_sidecars_note(pk_site *s);

#endif
