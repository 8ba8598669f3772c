/*
 * addr.c - listening addresses: parsing HOST:PORT, printing them, and the
 * listening sockets servd binds (see addr.h).
 */
#include "addr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int sv_addr_parse(const char *s, sv_addr *out, char *err, size_t errlen)
{
    char host[256];
    const char *port;
    int bracket = 0;

    memset(out, 0, sizeof *out);
    if (s[0] == '[') {
        const char *end = strchr(s, ']');
        if (!end || end[1] != ':' || (size_t)(end - s - 1) >= sizeof host) {
            snprintf(err, errlen, "'%s': expected [IPV6]:PORT", s);
            return -1;
        }
        memcpy(host, s + 1, (size_t)(end - s - 1));
        host[end - s - 1] = '\0';
        port = end + 2;
        bracket = 1;
    } else {
        const char *colon = strrchr(s, ':');
        if (!colon && s[0] && strspn(s, "0123456789") == strlen(s)) {
            /* a port alone, as nginx's listen takes it */
            snprintf(err, errlen, "'%s': expected HOST:PORT (:%s for every IPv4 address)", s, s);
            return -1;
        }
        if (!colon || (size_t)(colon - s) >= sizeof host) {
            snprintf(err, errlen, "'%s': expected HOST:PORT", s);
            return -1;
        }
        memcpy(host, s, (size_t)(colon - s));
        host[colon - s] = '\0';
        if (strchr(host, ':')) {
            snprintf(err, errlen, "'%s': write IPv6 addresses in brackets: [::1]:8080", s);
            return -1;
        }
        port = colon + 1;
    }
    /* digits alone: strtol would take a sign and leading spaces */
    size_t digits = strspn(port, "0123456789");
    long p = digits && !port[digits] && digits <= 5 ? strtol(port, NULL, 10) : -1;
    if (p < 0 || p > 65535) {
        snprintf(err, errlen, "'%s': the port must be a number from 0 to 65535", s);
        return -1;
    }
    if (strcmp(host, "*") == 0 || host[0] == '\0')
        snprintf(host, sizeof host, "0.0.0.0");

    /* Digits and dots are an IPv4 address, never a name to look up. The
     * resolver also takes the old inet_aton() forms, a name or not (127.1,
     * 2130706433, 0x7f.0.0.1, and 010 read as octal: 10.0.0.010 is
     * 10.0.0.8): an address is written as four decimal numbers. */
    struct in_addr v4;
    if (!bracket && inet_aton(host, &v4) && inet_pton(AF_INET, host, &v4) != 1) {
        snprintf(err, errlen,
                 "'%s': '%s' is not an IPv4 address as four decimal numbers 0-255 without "
                 "leading zeros",
                 s, host);
        return -1;
    }
    int numeric = bracket || strspn(host, "0123456789.") == strlen(host);
    struct addrinfo hints = {0}, *res;
    hints.ai_family = bracket ? AF_INET6 : AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | (numeric ? AI_NUMERICHOST : 0);
    int rc = getaddrinfo(host, NULL, &hints, &res);
    if (rc != 0 && numeric) {
        snprintf(err, errlen, "'%s': '%s' is not an IP%s address", s, host, bracket ? "v6" : "v4");
        return -1;
    }
    if (rc != 0) {
        snprintf(err, errlen, "'%s': cannot resolve the host: %s", s,
                 rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
        return -2;
    }
    memcpy(&out->ss, res->ai_addr, res->ai_addrlen);
    out->len = res->ai_addrlen;
    freeaddrinfo(res);
    if (out->ss.ss_family == AF_INET)
        ((struct sockaddr_in *)&out->ss)->sin_port = htons((uint16_t)p);
    else
        ((struct sockaddr_in6 *)&out->ss)->sin6_port = htons((uint16_t)p);
    snprintf(out->text, sizeof out->text, "%s", s);
    return 0;
}

unsigned sv_addr_port(const sv_addr *a)
{
    return ntohs(a->ss.ss_family == AF_INET ? ((const struct sockaddr_in *)&a->ss)->sin_port
                                            : ((const struct sockaddr_in6 *)&a->ss)->sin6_port);
}

void sv_addr_format(const sv_addr *a, char *buf, size_t cap)
{
    char host[INET6_ADDRSTRLEN];
    if (a->ss.ss_family == AF_INET) {
        inet_ntop(AF_INET, &((const struct sockaddr_in *)&a->ss)->sin_addr, host, sizeof host);
        snprintf(buf, cap, "%s:%u", host, sv_addr_port(a));
    } else {
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)&a->ss)->sin6_addr, host, sizeof host);
        snprintf(buf, cap, "[%s]:%u", host, sv_addr_port(a));
    }
}

int sv_addr_listen(const sv_addr *a, int reuseport, char *err, size_t errlen)
{
    int one = 1;
    int fd = socket(a->ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        goto out_err;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0)
        goto out_close;
    if (reuseport && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0)
        goto out_close;
    if (a->ss.ss_family == AF_INET6 &&
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one) != 0)
        goto out_close;
    if (bind(fd, (const struct sockaddr *)&a->ss, a->len) != 0)
        goto out_close;
    if (listen(fd, SV_LISTEN_BACKLOG) != 0)
        goto out_close;
    return fd;

out_close:;
    int e = errno;
    close(fd);
    errno = e;
out_err:
    /* a port below 1024 without the right to bind it: say the ways to get it */
    snprintf(err, errlen, "cannot listen on %s: %s%s", a->text, strerror(errno),
             errno == EACCES ? " (a port below 1024 needs socket activation, "
                               "CAP_NET_BIND_SERVICE, or root with --user: servd(1), PRIVILEGES)"
                             : "");
    return -1;
}

int sv_addr_taken(const sv_addr *a, char *err, size_t errlen)
{
    int one = 1, taken = 0;
    int fd = socket(a->ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (a->ss.ss_family == AF_INET6)
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    if (bind(fd, (const struct sockaddr *)&a->ss, a->len) != 0 && errno == EADDRINUSE) {
        snprintf(err, errlen,
                 "cannot listen on %s: %s (another socket is bound to it: a server "
                 "listening there, with which a second servd would share its connections, "
                 "or a connection from that port)",
                 a->text, strerror(EADDRINUSE));
        taken = 1;
    }
    close(fd);
    return taken;
}

int sv_addr_same(const sv_addr *a, const sv_addr *b)
{
    return a->len == b->len && sv_addr_port(a) != 0 && memcmp(&a->ss, &b->ss, a->len) == 0;
}

static int is_wildcard(const sv_addr *a)
{
    if (a->ss.ss_family == AF_INET)
        return ((const struct sockaddr_in *)&a->ss)->sin_addr.s_addr == htonl(INADDR_ANY);
    return IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)&a->ss)->sin6_addr);
}

int sv_addr_clash(const sv_addr *a, const sv_addr *b)
{
    return a->ss.ss_family == b->ss.ss_family && sv_addr_port(a) != 0 &&
           sv_addr_port(a) == sv_addr_port(b) &&
           (sv_addr_same(a, b) || is_wildcard(a) || is_wildcard(b));
}
