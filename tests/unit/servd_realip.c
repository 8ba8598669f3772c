/*
 * The client behind a trusted proxy (servd/realip.c): the networks and
 * header of the command line, the elements of the header's list, and the
 * walk from the right that skips the trusted proxies.
 */
#include "runner.h"
#include "realip.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

static sv_realip r;
static sv_request req;
static char err[256];

static const char *text(const struct sockaddr_storage *a)
{
    static char buf[INET6_ADDRSTRLEN];
    if (a->ss_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)a)->sin_addr, buf, sizeof buf);
    else
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)a)->sin6_addr, buf, sizeof buf);
    return buf;
}

static struct sockaddr_storage peer(const char *addr)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    if (inet_pton(AF_INET, addr, &((struct sockaddr_in *)&ss)->sin_addr) == 1) {
        ss.ss_family = AF_INET;
    } else {
        ASSERT_EQ(inet_pton(AF_INET6, addr, &((struct sockaddr_in6 *)&ss)->sin6_addr), 1);
        ss.ss_family = AF_INET6;
    }
    return ss;
}

/* The address logged for a request with the given header lines from peer
 * p, or "-" for the peer itself. */
static const char *client(const char *p, const char *lines)
{
    static char head[1024];
    snprintf(head, sizeof head, "GET / HTTP/1.1\r\nHost: x\r\n%s\r\n", lines);
    ASSERT(sv_http1_parse(head, strlen(head), &req) > 0);
    struct sockaddr_storage pa = peer(p), out;
    if (!sv_realip_client(&r, (const struct sockaddr *)&pa, &req, &out))
        return "-";
    return text(&out);
}

static void setup(void)
{
    memset(&r, 0, sizeof r);
    ASSERT_EQ(sv_realip_header(&r, "X-Forwarded-For", err, sizeof err), 0);
    ASSERT_EQ(sv_realip_from(&r, "10.0.0.0/8", err, sizeof err), 0);
    ASSERT_EQ(sv_realip_from(&r, "127.0.0.1", err, sizeof err), 0);
    ASSERT_EQ(sv_realip_from(&r, "2400:cb00::/32", err, sizeof err), 0);
}

TEST(realip_networks)
{
    memset(&r, 0, sizeof r);
    static const char *const good[] = {"10.0.0.0/8", "127.0.0.1",      "192.0.2.128/25",
                                       "0.0.0.0/0",  "2400:cb00::/32", "::/0",
                                       "::1",        "10.1.2.3/32",    "172.16.0.0/12"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        if (sv_realip_from(&r, good[i], err, sizeof err) != 0)
            t__fail(__FILE__, __LINE__, "%s refused: %s", good[i], err);
    static const char *const bad[] = {"10.0.0.1/8", "10.0.0.0/33", "10.0.0.0/",   "10.0.0.0/08",
                                      "foo",        "/8",          "10.0.0.0/8/", "::1/129",
                                      "",           "10.0.0/8",    "10.0.0.0/+8", "2400:cb00::1/32",
                                      "10.0.0.0 ",  "[::1]",       "10.0.0.0/-1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (sv_realip_from(&r, bad[i], err, sizeof err) == 0)
            t__fail(__FILE__, __LINE__, "'%s' accepted", bad[i]);
    ASSERT_EQ(sv_realip_from(&r, "10.0.0.1/8", err, sizeof err), -1);
    ASSERT(strstr(err, "10.0.0.1/8") && strstr(err, "/32"));
    /* a comma-separated list, as CDNs publish theirs */
    memset(&r, 0, sizeof r);
    ASSERT_EQ(sv_realip_from(&r, "173.245.48.0/20,2400:cb00::/32,127.0.0.1", err, sizeof err), 0);
    ASSERT_EQ(r.nnets, 3);
    ASSERT_EQ(sv_realip_trusts_all(&r), 0);
    ASSERT_EQ(sv_realip_from(&r, "10.0.0.0/8,", err, sizeof err), -1); /* an empty element */
    ASSERT_EQ(sv_realip_from(&r, "10.0.0.0/8,bad", err, sizeof err), -1);
    ASSERT(strstr(err, "'bad'"));
    ASSERT_EQ(sv_realip_from(&r, "0.0.0.0/0", err, sizeof err), 0);
    ASSERT_EQ(sv_realip_trusts_all(&r), 1);
    /* the list is bounded */
    memset(&r, 0, sizeof r);
    for (int i = 0; i < SV_REALIP_MAX_NETS; i++)
        ASSERT_EQ(sv_realip_from(&r, "10.0.0.0/8", err, sizeof err), 0);
    ASSERT_EQ(sv_realip_from(&r, "10.0.0.0/8", err, sizeof err), -1);
}

TEST(realip_header_names)
{
    memset(&r, 0, sizeof r);
    ASSERT_EQ(sv_realip_header(&r, "CF-Connecting-IP", err, sizeof err), 0);
    ASSERT_EQ(r.header_len, 16);
    ASSERT_EQ(sv_realip_header(&r, "X Forwarded", err, sizeof err), -1);
    ASSERT_EQ(sv_realip_header(&r, "X-Forwarded-For:", err, sizeof err), -1);
    ASSERT_EQ(sv_realip_header(&r, "", err, sizeof err), -1);
    ASSERT_EQ(sv_realip_header(&r, "forwarded", err, sizeof err), -1);
    ASSERT(strstr(err, "7239"));
    char longname[SV_REALIP_NAME_MAX + 2];
    memset(longname, 'x', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    ASSERT_EQ(sv_realip_header(&r, longname, err, sizeof err), -1);
}

static const char *element(const char *s)
{
    struct sockaddr_storage a;
    return sv_realip_parse_element(s, strlen(s), &a) ? text(&a) : "-";
}

TEST(realip_elements)
{
    ASSERT_STR_EQ(element("192.0.2.1"), "192.0.2.1");
    ASSERT_STR_EQ(element(" \t192.0.2.1 "), "192.0.2.1");
    ASSERT_STR_EQ(element("192.0.2.1:4711"), "192.0.2.1");
    ASSERT_STR_EQ(element("192.0.2.1:65535"), "192.0.2.1");
    ASSERT_STR_EQ(element("2001:db8::1"), "2001:db8::1");
    ASSERT_STR_EQ(element("[2001:db8::1]"), "2001:db8::1");
    ASSERT_STR_EQ(element("[2001:db8::1]:443"), "2001:db8::1");
    ASSERT_STR_EQ(element("::ffff:192.0.2.1"), "192.0.2.1"); /* logged as IPv4 */
    static const char *const bad[] = {"",
                                      "  ",
                                      "unknown",
                                      "_hidden",
                                      "192.0.2.1:",
                                      "192.0.2.1:123456",
                                      "192.0.2.1:99999",
                                      "192.0.2.1:65536",
                                      "[2001:db8::1]:65536",
                                      "192.0.2.1:x",
                                      "[::1]x",
                                      "[::1",
                                      "[192.0.2.1]",
                                      "192.0.2",
                                      "01.2.3.4",
                                      "192.0.2.1 192.0.2.2",
                                      "[::1]:",
                                      "fe80::1%eth0",
                                      "1.2.3.4.5"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (strcmp(element(bad[i]), "-") != 0)
            t__fail(__FILE__, __LINE__, "'%s' taken as %s", bad[i], element(bad[i]));
}

TEST(realip_walk_from_the_right)
{
    setup();
    ASSERT_STR_EQ(client("127.0.0.1", "X-Forwarded-For: 203.0.113.9\r\n"), "203.0.113.9");
    ASSERT_STR_EQ(client("127.0.0.1", "x-forwarded-for: 203.0.113.9\r\n"), "203.0.113.9");
    /* a client's own entry on the left is not believed over what the
     * trusted proxies appended */
    ASSERT_STR_EQ(client("10.9.9.9", "X-Forwarded-For: 198.51.100.1, 203.0.113.9, 10.1.1.1\r\n"),
                  "203.0.113.9");
    /* the lines form one list, in order */
    ASSERT_STR_EQ(client("10.9.9.9", "X-Forwarded-For: 198.51.100.1\r\n"
                                     "X-Forwarded-For: 10.0.0.2\r\n"),
                  "198.51.100.1");
    /* every address trusted: the leftmost */
    ASSERT_STR_EQ(client("10.9.9.9", "X-Forwarded-For: 10.0.0.1, 10.0.0.2\r\n"), "10.0.0.1");
    /* what a trusted proxy would not write is not believed */
    ASSERT_STR_EQ(client("10.9.9.9", "X-Forwarded-For: unknown, 10.0.0.2\r\n"), "-");
    ASSERT_STR_EQ(client("10.9.9.9", "X-Forwarded-For: 203.0.113.9, garbage\r\n"), "-");
    ASSERT_STR_EQ(client("10.9.9.9", "X-Forwarded-For: 203.0.113.9,\r\n"), "-");
    ASSERT_STR_EQ(client("10.9.9.9", "X-Forwarded-For:\r\n"), "-");
    /* no header; another header */
    ASSERT_STR_EQ(client("10.9.9.9", "X-Real-IP: 203.0.113.9\r\n"), "-");
    /* IPv6 clients and proxies; an IPv4 peer as a dual-stack socket sees it */
    ASSERT_STR_EQ(client("2400:cb00:1::5", "X-Forwarded-For: 2001:db8::7\r\n"), "2001:db8::7");
    ASSERT_STR_EQ(client("::ffff:127.0.0.1", "X-Forwarded-For: 203.0.113.9\r\n"), "203.0.113.9");
    ASSERT_STR_EQ(client("::ffff:10.1.2.3", "X-Forwarded-For: [2001:db8::7]:5000\r\n"),
                  "2001:db8::7");
}

TEST(realip_untrusted_peers)
{
    setup();
    ASSERT_STR_EQ(client("192.0.2.7", "X-Forwarded-For: 203.0.113.9\r\n"), "-");
    ASSERT_STR_EQ(client("11.0.0.1", "X-Forwarded-For: 203.0.113.9\r\n"), "-");
    ASSERT_STR_EQ(client("127.0.0.2", "X-Forwarded-For: 203.0.113.9\r\n"), "-");
    ASSERT_STR_EQ(client("2400:cb01::1", "X-Forwarded-For: 203.0.113.9\r\n"), "-");
    ASSERT_STR_EQ(client("::ffff:192.0.2.7", "X-Forwarded-For: 203.0.113.9\r\n"), "-");
    /* not configured: nothing is believed */
    memset(&r, 0, sizeof r);
    ASSERT_STR_EQ(client("127.0.0.1", "X-Forwarded-For: 203.0.113.9\r\n"), "-");
}

TEST(realip_v4_mapped_networks)
{
    memset(&r, 0, sizeof r);
    ASSERT_EQ(sv_realip_header(&r, "X-Forwarded-For", err, sizeof err), 0);
    ASSERT_EQ(sv_realip_from(&r, "::ffff:10.0.0.0/104", err, sizeof err), 0);
    ASSERT_EQ(r.nets[0].family, AF_INET);
    ASSERT_EQ(r.nets[0].prefix, 8);
    ASSERT_STR_EQ(client("10.2.3.4", "X-Forwarded-For: 203.0.113.9\r\n"), "203.0.113.9");
    ASSERT_STR_EQ(client("::ffff:10.2.3.4", "X-Forwarded-For: 203.0.113.9\r\n"), "203.0.113.9");
    ASSERT_STR_EQ(client("11.2.3.4", "X-Forwarded-For: 203.0.113.9\r\n"), "-");
    ASSERT_EQ(sv_realip_from(&r, "::ffff:10.0.0.1/104", err, sizeof err), -1); /* host bits */
}

TEST(realip_prefix_edges)
{
    memset(&r, 0, sizeof r);
    ASSERT_EQ(sv_realip_header(&r, "CF-Connecting-IP", err, sizeof err), 0);
    ASSERT_EQ(sv_realip_from(&r, "192.0.2.128/25", err, sizeof err), 0);
    ASSERT_STR_EQ(client("192.0.2.128", "CF-Connecting-IP: 203.0.113.9\r\n"), "203.0.113.9");
    ASSERT_STR_EQ(client("192.0.2.255", "CF-Connecting-IP: 203.0.113.9\r\n"), "203.0.113.9");
    ASSERT_STR_EQ(client("192.0.2.127", "CF-Connecting-IP: 203.0.113.9\r\n"), "-");
}
