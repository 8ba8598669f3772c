/*
 * activation.h - listening sockets passed in by a service manager (systemd
 * socket activation, the sd_listen_fds(3) protocol), so that servd can be
 * restarted or upgraded without a moment in which the port refuses
 * connections: the socket belongs to the manager and outlives every servd
 * process; connections that arrive between two processes wait in its
 * accept queue.
 *
 * The protocol: LISTEN_PID is the pid the sockets are meant for (the
 * variables are inherited by children, which must ignore them),
 * LISTEN_FDS the number of sockets, passed as descriptors 3, 4, ...;
 * LISTEN_FDNAMES optionally names them, colon-separated
 * (FileDescriptorName= in the .socket unit).
 *
 * servd serves HTTP on every passed socket, except one named "admin", which
 * becomes the --admin endpoint's socket. Only TCP sockets (IPv4, IPv6) are
 * accepted: the connection code is TCP's (TCP_NODELAY, peer addresses).
 */
#ifndef SV_ACTIVATION_H
#define SV_ACTIVATION_H

#include <stddef.h>

/* The first passed descriptor (SD_LISTEN_FDS_START in sd-daemon.h). */
#define SV_LISTEN_FDS_START 3
/* Most sockets taken: SV_MAX_LISTEN (server.h), which bounds the listening
 * sockets of a worker whether bound by servd or passed in. */
#define SV_ACTIVATION_MAX 16

typedef struct sv_activation {
    int fds[SV_ACTIVATION_MAX]; /* HTTP listening sockets, in the order passed */
    int n;
    int admin_fd; /* the socket named "admin", or -1 */
} sv_activation;

/* Takes the sockets passed to this process, if any: checks LISTEN_PID,
 * checks that each descriptor is a listening stream socket, makes it
 * non-blocking and close-on-exec, and unsets the three variables so that
 * they cannot be misread later. Not activated (no LISTEN_FDS, or LISTEN_PID
 * names another process): out->n == 0 and admin_fd == -1.
 * @return 0, or -1 with a sentence in err (a malformed variable, a
 * descriptor that is not a listening stream socket, too many sockets). */
int sv_activation_take(sv_activation *out, char *err, size_t errlen);

/* Writes the local address of listening socket fd ("127.0.0.1:8080",
 * "[::1]:80") into buf. */
void sv_activation_describe(int fd, char *buf, size_t cap);

#endif
