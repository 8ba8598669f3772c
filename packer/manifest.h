/*
 * manifest.h - --manifest OUT.json: what a pack holds, for pipelines
 * (schema: manifests/manifest.schema.json).
 *
 *   {"servd_manifest": 1, "pack_id": HEX, "packer": "...", "profile": "...",
 *    "not_found": "/404.html" | null,
 *    "totals": {"paths", "bodies", "identity_bytes", "stored_bytes"},
 *    "paths": {"/index.html": {"mime", "cache_control", "last_modified",
 *              "headers": [{"name", "value"}],
 *              "variants": [{"encoding", "size", "etag"}]}}}
 *
 * Nothing in it depends on the time of packing, so the same site gives the
 * same manifest. It is written to a temporary file before the pack is
 * committed and renamed after, so a failed build leaves neither behind.
 */
#ifndef PK_MANIFEST_H
#define PK_MANIFEST_H

#include "site.h"

/* Writes the manifest to "<path>.tmp-<pid>". @return 0 or -1 with err. */
int pk_manifest_write_tmp(const char *path, const pk_site *site, const sf_meta *meta, int has_404,
                          char *err, size_t errlen);
/* Renames the temporary file into place. @return 0 or -1 with err. */
int pk_manifest_commit(const char *path, char *err, size_t errlen);
/* Removes the temporary file (after a failure). */
void pk_manifest_abort(const char *path);
/* The temporary name, for the signal handler. */
void pk_manifest_tmp_name(const char *path, char *out, size_t cap);

#endif
