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
 * same manifest. It is written to a temporary file and renamed into place
 * just before the pack; if the pack then fails to appear, the previous
 * manifest is restored, so a failed build changes neither.
 */
#ifndef PK_MANIFEST_H
#define PK_MANIFEST_H

#include "site.h"

/* Writes the manifest to "<path>.tmp-<pid>". @return 0 or -1 with err. */
int pk_manifest_write_tmp(const char *path, const pk_site *site, const sf_meta *meta, int has_404,
                          char *err, size_t errlen);
/* Renames the temporary file into place, first hard-linking a previous
 * manifest at path to "<path>.old-<pid>" so that pk_manifest_rollback can
 * put it back. Done before the pack is renamed into place (a manifest never
 * describes a pack that is not there once the build succeeded).
 * @return 0 or -1 with err (nothing changed at path). */
int pk_manifest_commit(const char *path, char *err, size_t errlen);
/* The pack is in place too: drops the copy of the previous manifest and
 * syncs the manifest's directory. @return 0; 1 with a warning's text in err when
 * the copy cannot be removed; -1 with err when the directory cannot be
 * synced (the manifest is in place all the same). */
int pk_manifest_finish(char *err, size_t errlen);
/* The pack could not be put in place: restores the previous manifest, or
 * removes the new one if there was none. When the previous one cannot be
 * renamed back, the new one is removed all the same (it describes a pack
 * that is not there) and the previous one stays at "<path>.old-<pid>":
 * that is appended to note, unless note is NULL. Async-signal-safe with a
 * NULL note; a no-op unless pk_manifest_commit succeeded and nothing
 * followed it. */
void pk_manifest_rollback(char *note, size_t notelen);
/* Removes the temporary file (after a failure before the commit). */
void pk_manifest_abort(const char *path);
/* Writes the manifest straight into path, which is not a regular file (a
 * pipe, a terminal, /dev/null), or into descriptor fd when fd >= 0 (path
 * was /dev/stdout or the like; then it goes where the shell sent it): no
 * temporary file, nothing to roll back. Called once the pack is in place.
 * @return 0 or -1 with err. */
int pk_manifest_stream(const char *path, int fd, const pk_site *site, const sf_meta *meta,
                       int has_404, char *err, size_t errlen);
/* The temporary name, for the signal handler. */
void pk_manifest_tmp_name(const char *path, char *out, size_t cap);

#endif
