/*
 * realip.h - the client's address behind a trusted proxy, for the access
 * log (--real-ip-header NAME, --real-ip-from CIDR).
 *
 * Behind a CDN every connection comes from the CDN, and the access log's
 * first field names the CDN. The CDN passes on the address it was reached
 * from in a header: X-Forwarded-For (CloudFront, Fastly, Akamai, nginx,
 * Varnish), CF-Connecting-IP (Cloudflare), True-Client-IP, Fastly-Client-IP,
 * X-Real-IP. Anyone can send such a header, so servd takes it only on a
 * connection from one of the --real-ip-from networks.
 *
 * The field is read as one list of addresses (its lines in order, split at
 * commas) from the right: addresses of trusted networks are proxies that
 * appended to it and are passed over; the first other one is the client
 * (nginx's real_ip_recursive). When every address is trusted, the leftmost
 * is taken. Each element is an IPv4 or IPv6 address, optionally with a port
 * ("192.0.2.1:4711", "[2001:db8::1]:4711", as Azure's proxies write it),
 * between optional spaces. Anything else ("unknown", an obfuscated name, an
 * empty element) ends the walk without an answer, and the log names the
 * peer: what a trusted proxy would not have written is not believed.
 *
 * RFC 7239's Forwarded header is not read (no CDN sends it by default).
 */
#ifndef SV_REALIP_H
#define SV_REALIP_H

#include "http.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* Most --real-ip-from networks: Cloudflare publishes 22, CloudFront's
 * origin-facing list about 50. */
#define SV_REALIP_MAX_NETS 256
/* Longest --real-ip-header name. */
#define SV_REALIP_NAME_MAX 64

typedef struct sv_net {
    int family; /* AF_INET or AF_INET6 */
    unsigned prefix;
    uint8_t addr[16]; /* network byte order; 4 bytes for AF_INET */
} sv_net;

typedef struct sv_realip {
    char header[SV_REALIP_NAME_MAX + 1]; /* "" when not configured */
    size_t header_len;
    sv_net nets[SV_REALIP_MAX_NETS];
    size_t nnets;
} sv_realip;

/* Sets the header to read (an RFC 9110 token; not Forwarded).
 * @return 0, or -1 with a sentence in err. */
int sv_realip_header(sv_realip *r, const char *name, char *err, size_t errlen);

/* Adds trusted networks: a comma-separated list of "ADDR" (one address)
 * or "ADDR/PREFIX", IPv4 or IPv6, with no bits set after the prefix
 * ("10.0.0.1/8" is refused: write 10.0.0.0/8 or 10.0.0.1/32); an
 * IPv4-mapped network is the IPv4 one. @return 0, or -1 with a sentence in
 * err. */
int sv_realip_from(sv_realip *r, const char *list, char *err, size_t errlen);

/* 1 when a network is the whole address space (0.0.0.0/0, ::/0): every
 * client is then believed, which main.c warns about. */
int sv_realip_trusts_all(const sv_realip *r);

/* The address to log for req, which came from peer: 1 with *out set when
 * peer is trusted and the header names a client, else 0 (log the peer). */
int sv_realip_client(const sv_realip *r, const struct sockaddr *peer, const sv_request *req,
                     struct sockaddr_storage *out);

/* Parses one list element (s[0, n), spaces around it allowed) into *out:
 * 1, or 0 when it is not an address (with an optional port). */
int sv_realip_parse_element(const char *s, size_t n, struct sockaddr_storage *out);

#endif
