/*
 * privdrop.h - --user NAME: give up root once the listening sockets are
 * bound, so that a flaw in the request path can never act with root's
 * rights.
 *
 * Binding a port below 1024 needs root or CAP_NET_BIND_SERVICE; nothing
 * servd does afterwards needs either. The drop is setgroups (the user's
 * supplementary groups, via initgroups), setgid, then setuid - in that
 * order, because after setuid the process may no longer change its groups.
 * Afterwards servd checks that root cannot be regained and refuses to run on
 * if any step failed.
 *
 * What the user must be able to read or write afterwards: the --pack path
 * and its directory (every swap opens the pack again), and the access log's
 * directory if the log is rotated (SIGUSR1 reopens it).
 */
#ifndef SV_PRIVDROP_H
#define SV_PRIVDROP_H

#include <stddef.h>
#include <sys/types.h>

typedef struct sv_user {
    char name[64];
    uid_t uid;
    gid_t gid;
} sv_user;

/* Looks the user up (a name, or a numeric uid) in the password database and
 * checks that this process can switch to it (it runs as root, or already as
 * that user).
 * @return 0; -1 with a sentence in err when there is no such user (or the
 * name is no user's); -2 when the password database could not be read, or
 * this process cannot switch to the user (not root). */
int sv_user_lookup(const char *name, sv_user *out, char *err, size_t errlen);

/* Switches the whole process (call it before starting threads) to u: the
 * user's groups, its gid, its uid. No-op when already running as u.
 * @return 0, or -1 with a sentence in err; the caller must then exit. */
int sv_user_switch(const sv_user *u, char *err, size_t errlen);

#endif
