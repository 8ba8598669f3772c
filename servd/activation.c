/*
 * activation.c - taking the listening sockets a service manager passed in
 * (LISTEN_PID / LISTEN_FDS / LISTEN_FDNAMES; see activation.h).
 *
 * Why not libsystemd's sd_listen_fds(): the protocol is three environment
 * variables and a descriptor range, documented as a stable interface
 * (sd_listen_fds(3), systemd's "File Descriptor Passing"); reading it here
 * is a few dozen lines, while linking libsystemd would add a shared library
 * (and its own dependencies) to a daemon that otherwise needs none of it and
 * must also run under other managers that speak the same protocol, or none.
 *
 * How the workers share a passed socket: every worker accepts on its own
 * duplicate of the descriptor (server.c), from its own loop. Duplicates are
 * one socket with one accept queue, so the kernel no longer spreads
 * connections per worker as it does for servd's own SO_REUSEPORT sockets:
 * every worker polls the same queue and whichever accepts first takes the
 * connection (the others get EAGAIN). That costs a wake-up per idle worker
 * per burst; it is what lets another process (the next servd) accept from
 * the same queue, which SO_REUSEPORT sockets of a process that exits would
 * not allow - their queued connections would be reset.
 */
#include "activation.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

/* Longest LISTEN_FDNAMES entry looked at (systemd caps names at 255). */
#define SV_FDNAME_MAX 255

/* Parses a decimal number that must be all of s. @return 0 or -1. */
static int parse_num(const char *s, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s || *end || errno || v < 0)
        return -1;
    *out = v;
    return 0;
}

/* Copies the i-th colon-separated name of names into buf ("" if absent). */
static void fd_name(const char *names, int i, char *buf, size_t cap)
{
    buf[0] = '\0';
    if (!names)
        return;
    const char *p = names;
    for (int k = 0; k < i; k++) {
        p = strchr(p, ':');
        if (!p)
            return;
        p++;
    }
    size_t len = strcspn(p, ":");
    if (len >= cap)
        len = cap - 1;
    memcpy(buf, p, len);
    buf[len] = '\0';
}

/* Checks that fd is a listening TCP socket and prepares it for the loops.
 * @return 0, or -1 with a sentence in err. */
static int check_fd(int fd, char *err, size_t errlen)
{
    struct stat st;
    int type = 0, acc = 0;
    socklen_t len = sizeof type;
    struct sockaddr_storage ss;
    socklen_t slen = sizeof ss;

    if (fstat(fd, &st) != 0) {
        snprintf(err, errlen, "socket activation: descriptor %d: %s", fd, strerror(errno));
        return -1;
    }
    if (!S_ISSOCK(st.st_mode) || getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 ||
        type != SOCK_STREAM) {
        snprintf(err, errlen, "socket activation: descriptor %d is not a stream socket", fd);
        return -1;
    }
    len = sizeof acc;
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &len) != 0 || !acc) {
        snprintf(err, errlen,
                 "socket activation: socket %d is not listening (Accept=no and "
                 "ListenStream= are what servd expects)",
                 fd);
        return -1;
    }
    if (getsockname(fd, (struct sockaddr *)&ss, &slen) != 0 ||
        (ss.ss_family != AF_INET && ss.ss_family != AF_INET6)) {
        snprintf(err, errlen, "socket activation: socket %d is not a TCP socket (IPv4 or IPv6)",
                 fd);
        return -1;
    }
    /* Each worker polls the socket and accepts until EAGAIN: a blocking
     * socket would hang a worker whenever another took the connection. The
     * flag belongs to the socket (every duplicate and the manager share
     * it); systemd's own NonBlocking= sets the same. */
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0 || fcntl(fd, F_SETFD, FD_CLOEXEC) != 0) {
        snprintf(err, errlen, "socket activation: socket %d: %s", fd, strerror(errno));
        return -1;
    }
    return 0;
}

int sv_activation_take(sv_activation *out, char *err, size_t errlen)
{
    const char *spid = getenv("LISTEN_PID"), *sfds = getenv("LISTEN_FDS");
    const char *names = getenv("LISTEN_FDNAMES");
    long pid, nfds;
    int rc = 0;

    out->n = 0;
    out->admin_fd = -1;
    if (!sfds)
        return 0;
    if (!spid || parse_num(spid, &pid) != 0) {
        snprintf(err, errlen, "socket activation: LISTEN_FDS is set but LISTEN_PID is %s%s%s",
                 spid ? "'" : "", spid ? spid : "missing", spid ? "', not a process id" : "");
        rc = -1;
        goto out_unset;
    }
    if (pid != (long)getpid())
        goto out_unset; /* meant for a parent (a wrapper script): not ours */
    if (parse_num(sfds, &nfds) != 0) {
        snprintf(err, errlen, "socket activation: LISTEN_FDS='%s' is not a number", sfds);
        rc = -1;
        goto out_unset;
    }
    if (nfds > SV_ACTIVATION_MAX + 1) {
        snprintf(err, errlen,
                 "socket activation: %ld sockets passed; at most %d HTTP sockets "
                 "and one admin socket are served",
                 nfds, SV_ACTIVATION_MAX);
        rc = -1;
        goto out_unset;
    }
    for (int i = 0; i < (int)nfds; i++) {
        int fd = SV_LISTEN_FDS_START + i;
        char name[SV_FDNAME_MAX + 1];
        if (check_fd(fd, err, errlen) != 0) {
            rc = -1;
            goto out_unset;
        }
        fd_name(names, i, name, sizeof name);
        if (strcmp(name, "admin") == 0 && out->admin_fd >= 0) {
            snprintf(err, errlen,
                     "socket activation: descriptors %d and %d are both named admin; "
                     "one admin socket is served",
                     out->admin_fd, fd);
            rc = -1;
            goto out_unset;
        } else if (strcmp(name, "admin") == 0) {
            out->admin_fd = fd;
        } else if (out->n == SV_ACTIVATION_MAX) {
            snprintf(err, errlen, "socket activation: more than %d HTTP sockets passed",
                     SV_ACTIVATION_MAX);
            rc = -1;
            goto out_unset;
        } else {
            out->fds[out->n++] = fd;
        }
    }

out_unset:
    /* As sd_listen_fds(unset_environment=1): the variables describe this
     * process only and must not leak into anything it starts. */
    unsetenv("LISTEN_PID");
    unsetenv("LISTEN_FDS");
    unsetenv("LISTEN_FDNAMES");
    return rc;
}

void sv_activation_describe(int fd, char *buf, size_t cap)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    char host[INET6_ADDRSTRLEN] = "?";
    if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0) {
        snprintf(buf, cap, "fd %d", fd);
    } else if (ss.ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;
        inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
        snprintf(buf, cap, "%s:%u", host, ntohs(a->sin_port));
    } else if (ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ss;
        inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
        snprintf(buf, cap, "[%s]:%u", host, ntohs(a->sin6_port));
    } else {
        snprintf(buf, cap, "fd %d", fd);
    }
}
