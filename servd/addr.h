/*
 * addr.h - listening addresses: "HOST:PORT" as given on the command line,
 * resolved once at startup, and the sockets bound to them.
 */
#ifndef SV_ADDR_H
#define SV_ADDR_H

#include <stddef.h>
#include <sys/socket.h>

/* listen() backlog: the kernel clamps it to net.core.somaxconn (4096 on
 * current kernels); a burst of 1500 new connections must not be dropped. */
#define SV_LISTEN_BACKLOG 4096

/* A listening address as given and as resolved. */
typedef struct sv_addr {
    struct sockaddr_storage ss;
    socklen_t len;
    char text[96]; /* "127.0.0.1:8080", "[::1]:8080" */
} sv_addr;

/* Parses "HOST:PORT", "[V6]:PORT" or "*:PORT" (all addresses).
 * A host that is not an IP address is looked up (getaddrinfo).
 * @return 0; -1 with a sentence in err if s is malformed; -2 if its host
 *         name cannot be resolved (a fault of the moment or of the
 *         resolver, not of the command line). */
int sv_addr_parse(const char *s, sv_addr *out, char *err, size_t errlen);

/* a's port, in host byte order (0: the kernel picks one at bind). */
unsigned sv_addr_port(const sv_addr *a);

/* Writes a's numeric form with its actual port ("[::1]:8080"). */
void sv_addr_format(const sv_addr *a, char *buf, size_t cap);

/* Whether a and b are one address, which a second bind would share
 * (SO_REUSEPORT lets it succeed). Port 0 asks for a new port each time, so
 * it never repeats. */
int sv_addr_same(const sv_addr *a, const sv_addr *b);

/* Whether a and b cannot both be bound without SO_REUSEPORT: the same port
 * in one family, with the same address or a wildcard on either side. Port
 * 0 asks for a new port each time, so it never clashes. */
int sv_addr_clash(const sv_addr *a, const sv_addr *b);

/* A bound, listening, non-blocking socket for a (SO_REUSEPORT when shared
 * by workers). @return the fd, or -1 with a sentence in err. */
int sv_addr_listen(const sv_addr *a, int reuseport, char *err, size_t errlen);

/* Whether another process already listens on a: a trial bind without
 * SO_REUSEPORT fails then. The workers' own bind would not, when that
 * process is a second servd of the same user, and the two would silently
 * share the connections (one of them perhaps with an old pack). Other
 * failures are left to sv_addr_listen to report. @return 1 (with a
 * sentence in err) or 0. */
int sv_addr_taken(const sv_addr *a, char *err, size_t errlen);

#endif
