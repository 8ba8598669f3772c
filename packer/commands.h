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

/* Walks the pack's LMDB structure in a child process (sf_check_isolated,
 * hashing nothing), so that a damaged file is reported instead of crashing
 * liblmdb in this one: every command that opens a pack does this first.
 * @return 0, or nonzero with err set. */
int pk_check_pack(const char *path, char *err, size_t errlen);

/* pk_check_pack, then opens the pack and a reader, printing
 * "servd-pack: FILE: cause" on failure. @return 0 or -1. */
int pk_open_pack(const char *path, sf_pack **pack, sf_reader **reader);
void pk_close_pack(sf_pack *pack, sf_reader *reader);

int pk_cmd_ls(const char *site, int json);
int pk_cmd_cat(const char *site, const char *path, int encoding, int headers);
int pk_cmd_verify(const char *site, int quiet);
/* content: ignore header blocks that differ only in Last-Modified. */
int pk_cmd_diff(const char *old_site, const char *new_site, int json, int content);

#endif
