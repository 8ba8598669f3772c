/*
 * fuzz_realip - sv_realip_client() on arbitrary X-Forwarded-For lines (the
 * input split at '\n', each line in a buffer of its own exact size, so a
 * read past a value is caught), from a trusted peer. An answer must be an
 * IPv4 or IPv6 address that sv_realip_parse_element() reads back from its
 * own text; each line is also parsed whole as one element.
 */
#include "realip.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

static sv_realip r;

static void setup(void)
{
    char err[128];
    if (sv_realip_header(&r, "X-Forwarded-For", err, sizeof err) != 0 ||
        sv_realip_from(&r, "10.0.0.0/8", err, sizeof err) != 0 ||
        sv_realip_from(&r, "192.0.2.0/24", err, sizeof err) != 0 ||
        sv_realip_from(&r, "2001:db8::/32", err, sizeof err) != 0)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!r.header_len)
        setup();
    static sv_request req;
    char *bufs[8];
    size_t nb = 0, start = 0;
    memset(&req, 0, sizeof req);
    for (size_t i = 0; i <= size && nb < 8; i++) {
        if (i < size && data[i] != '\n')
            continue;
        size_t n = i - start;
        bufs[nb] = malloc(n ? n : 1);
        if (!bufs[nb])
            abort();
        memcpy(bufs[nb], data + start, n);
        /* every other line under another name, in either case */
        static const char xff[] = "x-forwarded-FOR", other[] = "X-Real-IP";
        int mine = (nb % 3) != 1;
        req.headers[nb].name =
            (sf_view){mine ? xff : other, mine ? sizeof xff - 1 : sizeof other - 1};
        req.headers[nb].value = (sf_view){bufs[nb], n};
        struct sockaddr_storage one;
        (void)sv_realip_parse_element(bufs[nb], n, &one);
        nb++;
        start = i + 1;
    }
    req.nheaders = nb;
    struct sockaddr_in peer = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x0a000001)};
    struct sockaddr_storage out;
    if (sv_realip_client(&r, (const struct sockaddr *)&peer, &req, &out)) {
        char text[INET6_ADDRSTRLEN];
        const void *a = out.ss_family == AF_INET
                            ? (const void *)&((const struct sockaddr_in *)&out)->sin_addr
                            : (const void *)&((const struct sockaddr_in6 *)&out)->sin6_addr;
        if ((out.ss_family != AF_INET && out.ss_family != AF_INET6) ||
            !inet_ntop(out.ss_family, a, text, sizeof text))
            abort();
        struct sockaddr_storage back;
        if (!sv_realip_parse_element(text, strlen(text), &back) || back.ss_family != out.ss_family)
            abort();
    }
    for (size_t i = 0; i < nb; i++)
        free(bufs[i]);
    return 0;
}
