/*
 * commands.h - the subcommands of servd-pack, each returning the process
 * exit status (PK_EXIT_*). main.c only parses arguments and dispatches.
 */
#ifndef PK_COMMANDS_H
#define PK_COMMANDS_H

#include "sf/store.h"

/* Exit statuses (documented in --help and servd-pack(1)). */
#define PK_EXIT_OK    0
#define PK_EXIT_FAIL  1 /* input, output or pack problem: the message names the file */
#define PK_EXIT_USAGE 2 /* bad command line or environment */

/* Opens the pack at path after walking its LMDB structure in a child
 * process (sf_check_isolated, hashing nothing), so that a damaged file is
 * reported instead of crashing liblmdb in this one: every command that
 * opens a pack does this. The path is opened once, and the walk and the
 * open both read that file, so a pack renamed over the path meanwhile is
 * never opened unchecked. @return 0, or an SF_E* code with "PATH: cause"
 * in err. */
int pk_pack_open_checked(const char *path, sf_pack **pack, char *err, size_t errlen);

/* pk_pack_open_checked, then a reader, printing "servd-pack: FILE: cause"
 * on failure. @return 0 or an SF_E* code (SF_EIO and SF_ENOMEM: the file
 * could not be read or checked, no verdict on it). */
int pk_open_pack(const char *path, sf_pack **pack, sf_reader **reader);
/* Closes a pack of pk_pack_open_checked (NULL: nothing), and its guard. */
void pk_pack_close(sf_pack *pack);
void pk_close_pack(sf_pack *pack, sf_reader *reader);

int pk_cmd_ls(const char *site, int json);
int pk_cmd_cat(const char *site, const char *path, int encoding, int headers);
int pk_cmd_verify(const char *site, int quiet);
/* content: ignore header blocks that differ only in Last-Modified. */
int pk_cmd_diff(const char *old_site, const char *new_site, int json, int content);

#endif
