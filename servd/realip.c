/*
 * realip.c - the client's address behind a trusted proxy (realip.h).
 */
#include "realip.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int sv_realip_header(sv_realip *r, const char *name, char *err, size_t errlen)
{
    size_t n = strlen(name);
    if (n == 0 || n > SV_REALIP_NAME_MAX) {
        snprintf(err, errlen, "'%s': a header name of 1 to %d characters", name,
                 SV_REALIP_NAME_MAX);
        return -1;
    }
    if (!sv_is_token(name, n)) {
        snprintf(err, errlen, "'%s' is not a header name (RFC 9110 token)", name);
        return -1;
    }
    if (strcasecmp(name, "forwarded") == 0) {
        snprintf(err, errlen,
                 "'%s': RFC 7239's Forwarded is not read; use X-Forwarded-For or the CDN's "
                 "own header",
                 name);
        return -1;
    }
    memcpy(r->header, name, n + 1);
    r->header_len = n;
    return 0;
}

/* Whether the low bits of addr after prefix are all zero. */
static int host_bits_clear(const uint8_t *addr, unsigned bytes, unsigned prefix)
{
    for (unsigned i = 0; i < bytes; i++) {
        unsigned keep = prefix >= 8 * (i + 1) ? 8 : prefix > 8 * i ? prefix - 8 * i : 0;
        uint8_t mask = keep ? (uint8_t)(0xffu << (8 - keep)) : 0;
        if (addr[i] & (uint8_t)~mask)
            return 0;
    }
    return 1;
}

/* Adds one network, cidr (NUL-terminated, no comma). */
static int add_net(sv_realip *r, const char *cidr, char *err, size_t errlen)
{
    if (r->nnets == SV_REALIP_MAX_NETS) {
        snprintf(err, errlen, "more than %d networks", SV_REALIP_MAX_NETS);
        return -1;
    }
    char host[INET6_ADDRSTRLEN];
    const char *slash = strchr(cidr, '/');
    size_t hl = slash ? (size_t)(slash - cidr) : strlen(cidr);
    sv_net *net = &r->nets[r->nnets];
    if (hl == 0 || hl >= sizeof host)
        goto bad;
    memcpy(host, cidr, hl);
    host[hl] = '\0';
    if (inet_pton(AF_INET, host, net->addr) == 1)
        net->family = AF_INET;
    else if (inet_pton(AF_INET6, host, net->addr) == 1)
        net->family = AF_INET6;
    else
        goto bad;
    unsigned bits = net->family == AF_INET ? 32 : 128;
    net->prefix = bits;
    if (slash) {
        const char *p = slash + 1;
        size_t digits = strspn(p, "0123456789");
        if (digits == 0 || digits > 3 || p[digits] || (digits > 1 && p[0] == '0'))
            goto bad;
        net->prefix = (unsigned)atoi(p);
        if (net->prefix > bits)
            goto bad;
    }
    /* an IPv4-mapped network (::ffff:10.0.0.0/104) is the IPv4 one: peers
     * and header addresses are compared as IPv4 (net_form) */
    if (net->family == AF_INET6 && net->prefix >= 96 &&
        IN6_IS_ADDR_V4MAPPED((const struct in6_addr *)net->addr)) {
        memmove(net->addr, net->addr + 12, 4);
        memset(net->addr + 4, 0, 12);
        net->family = AF_INET;
        net->prefix -= 96;
        bits = 32;
    }
    if (!host_bits_clear(net->addr, bits / 8, net->prefix)) {
        snprintf(err, errlen,
                 "'%s' has bits set after its /%u: write the network's first address, or "
                 "/%u for this address alone",
                 cidr, net->prefix, bits);
        return -1;
    }
    r->nnets++;
    return 0;
bad:
    snprintf(err, errlen, "'%s': expected an IPv4 or IPv6 address, optionally /PREFIX", cidr);
    return -1;
}

int sv_realip_from(sv_realip *r, const char *list, char *err, size_t errlen)
{
    char one[INET6_ADDRSTRLEN + 8];
    for (const char *p = list;; p++) {
        size_t n = strcspn(p, ",");
        if (n >= sizeof one) {
            snprintf(err, errlen, "'%.*s': expected an IPv4 or IPv6 address, optionally /PREFIX",
                     (int)n, p);
            return -1;
        }
        memcpy(one, p, n);
        one[n] = '\0';
        if (add_net(r, one, err, errlen) != 0)
            return -1;
        p += n;
        if (!*p)
            return 0;
    }
}

int sv_realip_trusts_all(const sv_realip *r)
{
    for (size_t i = 0; i < r->nnets; i++)
        if (r->nets[i].prefix == 0)
            return 1;
    return 0;
}

/* An address as a family and bytes, IPv4-mapped IPv6 as IPv4 (a socket
 * bound to [::] sees IPv4 clients so). @return 0, or -1 for another family. */
static int net_form(const struct sockaddr *sa, int *family, const uint8_t **addr)
{
    if (sa->sa_family == AF_INET) {
        *family = AF_INET;
        *addr = (const uint8_t *)&((const struct sockaddr_in *)sa)->sin_addr;
        return 0;
    }
    if (sa->sa_family == AF_INET6) {
        const struct in6_addr *a6 = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        *family = IN6_IS_ADDR_V4MAPPED(a6) ? AF_INET : AF_INET6;
        *addr = *family == AF_INET ? a6->s6_addr + 12 : a6->s6_addr;
        return 0;
    }
    return -1;
}

static int trusted(const sv_realip *r, const struct sockaddr *sa)
{
    int family;
    const uint8_t *a;
    if (net_form(sa, &family, &a) != 0)
        return 0;
    for (size_t i = 0; i < r->nnets; i++) {
        const sv_net *n = &r->nets[i];
        if (n->family != family)
            continue;
        unsigned whole = n->prefix / 8, rest = n->prefix % 8;
        if (memcmp(a, n->addr, whole) != 0)
            continue;
        if (rest && ((a[whole] ^ n->addr[whole]) & (uint8_t)(0xffu << (8 - rest))))
            continue;
        return 1;
    }
    return 0;
}

/* Whether s[0, n) is a port: 1 to 5 digits, at most 65535. */
static int is_port(const char *s, size_t n)
{
    if (n < 1 || n > 5)
        return 0;
    unsigned v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return 0;
        v = v * 10 + (unsigned)(s[i] - '0');
    }
    return v <= 65535;
}

int sv_realip_parse_element(const char *s, size_t n, struct sockaddr_storage *out)
{
    while (n && sv_is_ows(*s))
        s++, n--;
    while (n && sv_is_ows(s[n - 1]))
        n--;
    char host[INET6_ADDRSTRLEN];
    const char *h = s;
    size_t hl = n;
    int v6only = 0;
    if (n && s[0] == '[') { /* [v6] or [v6]:port */
        const char *close = memchr(s, ']', n);
        if (!close)
            return 0;
        h = s + 1;
        hl = (size_t)(close - h);
        size_t after = n - (size_t)(close + 1 - s);
        if (after && (close[1] != ':' || !is_port(close + 2, after - 1)))
            return 0;
        v6only = 1;
    } else {
        const char *colon = memchr(s, ':', n);
        /* one colon after a dotted address: v4:port */
        if (colon && memchr(colon + 1, ':', n - (size_t)(colon + 1 - s)) == NULL) {
            if (!is_port(colon + 1, n - (size_t)(colon + 1 - s)))
                return 0;
            hl = (size_t)(colon - s);
        }
    }
    if (hl == 0 || hl >= sizeof host)
        return 0;
    memcpy(host, h, hl);
    host[hl] = '\0';
    memset(out, 0, sizeof *out);
    struct sockaddr_in *a4 = (struct sockaddr_in *)out;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)out;
    if (!v6only && inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        return 1;
    }
    struct in6_addr v6;
    if (inet_pton(AF_INET6, host, &v6) != 1)
        return 0;
    if (IN6_IS_ADDR_V4MAPPED(&v6)) { /* ::ffff:a.b.c.d is logged as a.b.c.d */
        a4->sin_family = AF_INET;
        memcpy(&a4->sin_addr, v6.s6_addr + 12, 4);
    } else {
        a6->sin6_family = AF_INET6;
        a6->sin6_addr = v6;
    }
    return 1;
}

int sv_realip_client(const sv_realip *r, const struct sockaddr *peer, const sv_request *req,
                     struct sockaddr_storage *out)
{
    if (!r->header_len || !peer || !trusted(r, peer))
        return 0;
    int found = 0;
    /* the lines from the last, each from its last element */
    for (size_t i = req->nheaders; i-- > 0;) {
        const sv_header *h = &req->headers[i];
        if (h->name.len != r->header_len || strncasecmp(h->name.ptr, r->header, r->header_len))
            continue;
        const char *v = h->value.ptr;
        size_t end = h->value.len;
        for (;;) {
            size_t start = end;
            while (start > 0 && v[start - 1] != ',')
                start--;
            struct sockaddr_storage a;
            if (!sv_realip_parse_element(v + start, end - start, &a))
                return 0;
            *out = a;
            found = 1;
            if (!trusted(r, (const struct sockaddr *)&a))
                return 1;
            if (start == 0)
                break;
            end = start - 1;
        }
    }
    return found;
}
