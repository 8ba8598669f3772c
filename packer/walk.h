/*
 * walk.h - turning a web root into a sorted list of files with keys.
 *
 * - Keys are "/" + the path relative to the root with '/' separators, sorted
 *   in byte order, so the result does not depend on readdir order.
 * - Names starting with '.' are skipped (files and whole directories) and
 *   counted, except the top-level ".well-known" directory (RFC 8615: ACME
 *   challenges, security.txt), which is packed like any other directory.
 * - Symbolic links are followed when their target (after realpath) lies
 *   inside the root; a link leading outside the root, a dangling link and a
 *   directory loop are errors (a silently missing file would be a broken
 *   deploy). So is a link whose target would be skipped where it really
 *   lives: a hidden path (a segment starting with '.', except a top-level
 *   .well-known) or a path the excludes match; below a linked directory each
 *   entry is also checked against the excludes at its real key. Exclude such
 *   a link with a rules "exclude" glob to pack anyway. A directory reached
 *   by more than PK_WALK_MAX_ALIASES paths, and more than PK_WALK_MAX_LINKED
 *   entries reached through links, are errors too.
 * - Special files (FIFO, socket, device) are errors, unless excluded.
 * - Excludes come first: a file, special file or link whose key matches an
 *   exclude glob, and a directory (or link to one) every path under which an
 *   exclude matches (pk_rules_excluded_dir), are skipped and counted once
 *   before the name, link and loop checks, so an exclude rescues a tree with
 *   a bad name, a broken link or a loop in it.
 * - A name that cannot be a key (invalid UTF-8, a control byte, a backslash)
 *   is an error naming the file.
 * - X.gz beside X is a file like any other (sidecar.h).
 * - The walk goes on past a problem of one entry (any error above, an
 *   unreadable directory, a file over PK_FILE_MAX) and fails at the end,
 *   naming each (the first ten on their own lines), so that one run finds
 *   every problem of a tree. Out of memory and the bounds on links stop it.
 */
#ifndef PK_WALK_H
#define PK_WALK_H

#include <sys/types.h>

#include "rules.h"
#include "site.h"

/* Directory depth limit: deeper trees are almost certainly a loop or a
 * mistake, and each level holds an open directory handle. */
#define PK_WALK_MAX_DEPTH 64

/* Links to directories that link to each other multiply the paths (two
 * links per level, twenty levels: a million copies), and the depth limit
 * alone would let such a walk run for hours. So one directory may be
 * reached by at most PK_WALK_MAX_ALIASES paths (a site's aliases, such as
 * "latest" -> "v5" or a "shared" directory linked from a few dozen
 * sections, need far fewer), and at most PK_WALK_MAX_LINKED entries may be
 * reached through links in all (a bound on the memory of many aliases). */
#define PK_WALK_MAX_ALIASES 64
#define PK_WALK_MAX_LINKED  (1u << 20)

/* Largest file packed: a file is held whole in memory while it is read,
 * compressed (the encoders take one contiguous buffer) and written (in the
 * pages LMDB reserves for it); its compressed variants are held too, and
 * twice while written (LMDB's copy of each). */
#define PK_FILE_MAX ((uint64_t)1 << 30)

/* Walks root into site (zeroed by the caller). @return 0, or -1 with
 * "FILE: cause" in err; when the tree has several problems, each has been
 * printed (pk_err) and err counts them. */
int pk_walk(const char *root, const pk_rules *rules, pk_site *site, char *err, size_t errlen);

/* The file of site whose key is key (NUL-terminated), or NULL: pk_walk
 * leaves site->files sorted by key. */
const pk_file *pk_site_find(const pk_site *site, const char *key);

/* 1 if the walk would skip a regular file at key (a hidden name or an
 * exclude), 0 if it would pack it; an exclude that skips it is marked used,
 * as the walk marks it (for a file not in the tree yet: an output). */
int pk_walk_skips(const pk_rules *rules, const char *key);

/* "a FIFO", "a socket", ...: what a file that is not regular is, for messages. */
const char *pk_kind_name(mode_t mode);

/* Why a file name cannot be a key (NULL if it can): used in messages. */
const char *pk_key_problem(const char *name, size_t len);

#endif
