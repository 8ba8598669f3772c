/*
 * privdrop.c - looking up the --user account at startup and switching to it
 * after the sockets are bound (see privdrop.h for why and in which order).
 *
 * The lookup happens first, before the pack is even opened, so that a typo
 * in the user name is a usage error at once rather than after setup.
 */
#include "privdrop.h"

#include <errno.h>
#include <grp.h>
#include <linux/capability.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Buffer for getpwnam_r/getpwuid_r when sysconf gives no hint: glibc's own
 * fallback size, plenty for one passwd line. */
#define SV_PWBUF_DEFAULT 16384
/* Largest buffer tried: a passwd entry longer than this is not an account. */
#define SV_PWBUF_MAX (1024 * 1024)

int sv_user_lookup(const char *name, sv_user *out, char *err, size_t errlen)
{
    struct passwd pw, *res = NULL;
    long hint = sysconf(_SC_GETPW_R_SIZE_MAX);
    size_t cap = hint > 0 ? (size_t)hint : SV_PWBUF_DEFAULT;
    char *buf = NULL;
    int rc;

    memset(out, 0, sizeof out[0]);
    if (!name[0] || strlen(name) >= sizeof out->name) {
        snprintf(err, errlen, "--user '%s': not a user name", name);
        return -1;
    }
    char *end;
    errno = 0;
    unsigned long num = strtoul(name, &end, 10);
    int numeric = *end == '\0' && name[0] >= '0' && name[0] <= '9';
    /* (uid_t)-1 means "unchanged" to setresuid; a larger number would wrap
     * (4294967296 is uid 0): neither names a user */
    if (numeric && (errno != 0 || num >= (unsigned long)(uid_t)-1)) {
        snprintf(err, errlen, "--user '%s': not a user id (0 to %lu)", name,
                 (unsigned long)(uid_t)-1 - 1);
        return -1;
    }
    for (;;) {
        char *nb = realloc(buf, cap);
        if (!nb) {
            free(buf);
            snprintf(err, errlen, "--user '%s': out of memory", name);
            return -2;
        }
        buf = nb;
        rc = numeric ? getpwuid_r((uid_t)num, &pw, buf, cap, &res)
                     : getpwnam_r(name, &pw, buf, cap, &res);
        if (rc != ERANGE || cap >= SV_PWBUF_MAX)
            break;
        cap *= 2;
    }
    /* getpwnam(3) lists these for a name not found with some sources */
    if (rc == ENOENT || rc == ESRCH || rc == EBADF || rc == EPERM)
        rc = 0;
    if (rc != 0 || !res) {
        /* a database that could not be read (LDAP or sssd down: EIO,
         * EAGAIN) is no usage error, and may answer at the next start */
        snprintf(err, errlen, "--user '%s': %s", name,
                 rc ? strerror(rc) : "no such user in the password database");
        free(buf);
        return rc ? -2 : -1;
    }
    snprintf(out->name, sizeof out->name, "%s", pw.pw_name);
    out->uid = pw.pw_uid;
    out->gid = pw.pw_gid;
    free(buf);

    if (geteuid() != 0 && (geteuid() != out->uid || getegid() != out->gid)) {
        snprintf(err, errlen,
                 "--user %s: servd runs as uid %u, not as root, so it cannot switch to uid %u",
                 out->name, (unsigned)geteuid(), (unsigned)out->uid);
        return -2;
    }
    return 0;
}

int sv_user_switch(const sv_user *u, char *err, size_t errlen)
{
    uid_t ruid, euid, suid;
    gid_t rgid, egid, sgid;

    if (getuid() == u->uid && geteuid() == u->uid && getgid() == u->gid && getegid() == u->gid &&
        u->uid != 0)
        return 0; /* started as that user already (e.g. by systemd's User=) */
    /* Groups first: without CAP_SETGID (gone after setuid) they could never
     * be dropped, and root's supplementary groups would stay. */
    if (initgroups(u->name, u->gid) != 0) {
        snprintf(err, errlen, "--user %s: cannot set its groups: %s", u->name, strerror(errno));
        return -1;
    }
    if (setresgid(u->gid, u->gid, u->gid) != 0) {
        snprintf(err, errlen, "--user %s: cannot switch to gid %u: %s", u->name, (unsigned)u->gid,
                 strerror(errno));
        return -1;
    }
    if (setresuid(u->uid, u->uid, u->uid) != 0) {
        snprintf(err, errlen, "--user %s: cannot switch to uid %u: %s", u->name, (unsigned)u->uid,
                 strerror(errno));
        return -1;
    }
    /* Trust nothing: every id must be the user's now, and root must not be
     * reachable again (a partial drop would leave a saved uid of 0). */
    if (getresuid(&ruid, &euid, &suid) != 0 || getresgid(&rgid, &egid, &sgid) != 0 ||
        ruid != u->uid || euid != u->uid || suid != u->uid || rgid != u->gid || egid != u->gid ||
        sgid != u->gid) {
        snprintf(err, errlen, "--user %s: the switch to uid %u gid %u did not take effect", u->name,
                 (unsigned)u->uid, (unsigned)u->gid);
        return -1;
    }
    if (u->uid != 0 && (setuid(0) == 0 || seteuid(0) == 0)) {
        snprintf(err, errlen, "--user %s: root could be regained after the switch; refusing to run",
                 u->name);
        return -1;
    }
    /* The switch emptied the permitted, effective and ambient sets, not the
     * inheritable one, which a launcher may have filled (setpriv
     * --inh-caps, a container runtime): no capability is left. */
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
    struct __user_cap_data_struct none[_LINUX_CAPABILITY_U32S_3];
    memset(none, 0, sizeof none);
    if (u->uid != 0 && syscall(SYS_capset, &h, none) != 0) {
        snprintf(err, errlen, "--user %s: cannot clear the inheritable capabilities: %s", u->name,
                 strerror(errno));
        return -1;
    }
    return 0;
}
