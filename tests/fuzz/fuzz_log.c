/*
 * fuzz_log - an access-log line (servd/log.c sv_log_format) from any
 * request fields.
 *
 * Input: a byte for the peer (none, IPv4, IPv6, IPv4-mapped IPv6), the
 * version (none: an unparsed request, 1.0, 1.1), two for the status, one
 * for the encoding, then the method, target, Referer and User-Agent, each
 * as a 2-byte length and its bytes (the method and target without spaces,
 * as the parser gives them). Checked on every input: the line is printable
 * ASCII ending in its only newline, with exactly six quotes (a client can
 * forge no field and no line); each quoted field unescapes (\xHH) to the
 * client's bytes, or to a prefix of them followed by "..." when their
 * escaped form is over its budget, and never exceeds it; an IPv4-mapped
 * peer is written as IPv4.
 */
#include "log.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void die(const char *what, const char *line, size_t n)
{
    fprintf(stderr, "fuzz_log: %s: %.*s\n", what, (int)n, line);
    abort();
}

/* The escaped length of v, as add_esc counts it. */
static size_t escaped_len(const uint8_t *v, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += v[i] == '"' || v[i] == '\\' || v[i] < 0x20 || v[i] >= 0x7f ? 4 : 1;
    return k;
}

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Checks field f[0, n) of line against the client's bytes v[0, vn). */
static void check_field(const char *f, size_t n, const uint8_t *v, size_t vn, size_t max,
                        const char *line, size_t ln)
{
    if (vn == 0) {
        if (n != 1 || f[0] != '-')
            die("an empty field is not \"-\"", line, ln);
        return;
    }
    if (n > max)
        die("a field over its budget", line, ln);
    int cut = escaped_len(v, vn) > max;
    if (cut && (n < 3 || memcmp(f + n - 3, "...", 3) != 0))
        die("a field over its budget does not end in ...", line, ln);
    size_t end = cut ? n - 3 : n, k = 0;
    for (size_t i = 0; i < end; i++) {
        int b = (unsigned char)f[i];
        if (f[i] == '\\') {
            if (i + 3 >= end || f[i + 1] != 'x' || hexval(f[i + 2]) < 0 || hexval(f[i + 3]) < 0)
                die("a backslash that starts no \\xHH", line, ln);
            b = hexval(f[i + 2]) * 16 + hexval(f[i + 3]);
            i += 3;
        }
        if (k >= vn || v[k] != b)
            die("a field that does not unescape to the client's bytes", line, ln);
        k++;
    }
    if (!cut && k != vn)
        die("a field shorter than the client's bytes, not cut", line, ln);
}

/* Reads a field: 2 bytes of length, then the bytes. */
static const uint8_t *field(const uint8_t **p, const uint8_t *end, size_t *n)
{
    if (end - *p < 2) {
        *n = 0;
        return *p;
    }
    size_t l = (size_t)(*p)[0] | (size_t)(*p)[1] << 8;
    *p += 2;
    if (l > (size_t)(end - *p))
        l = (size_t)(end - *p);
    const uint8_t *f = *p;
    *p += l;
    *n = l;
    return f;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 5)
        return 0;
    const uint8_t *p = data + 5, *end = data + size;
    size_t mn, tn, rn, un;
    const uint8_t *m = field(&p, end, &mn), *t = field(&p, end, &tn), *r = field(&p, end, &rn),
                  *u = field(&p, end, &un);
    /* the parser's method and target hold no space */
    uint8_t *mt = malloc(mn + tn + 1);
    if (!mt)
        return 0;
    for (size_t i = 0; i < mn + tn; i++) {
        uint8_t c = i < mn ? m[i] : t[i - mn];
        mt[i] = c == ' ' ? '_' : c;
    }
    struct sockaddr_in v4 = {.sin_family = AF_INET};
    struct sockaddr_in6 v6 = {.sin6_family = AF_INET6};
    memcpy(&v4.sin_addr, data + 1, 4);
    memcpy(&v6.sin6_addr, data, 5);
    int mapped = data[0] % 4 == 3;
    if (mapped) {
        memset(&v6.sin6_addr, 0, 10);
        memset((uint8_t *)&v6.sin6_addr + 10, 0xff, 2);
    }
    sv_log_entry e = {0};
    e.peer = data[0] % 4 == 0   ? NULL
             : data[0] % 4 == 1 ? (const struct sockaddr *)&v4
                                : (const struct sockaddr *)&v6;
    e.time = "[30/Nov/2026:14:55:01 +0000]";
    e.time_len = strlen(e.time);
    static const char *const versions[] = {"", "HTTP/1.0", "HTTP/1.1", "HTTP/2.0"};
    e.version = (sf_view){versions[data[1] % 4], strlen(versions[data[1] % 4])};
    e.status = 100 + (data[2] | data[3] << 8) % 900;
    e.encoding = (data[4] % 5) - 1;
    e.body_bytes = data[2];
    e.micros = data[3];
    e.method = (sf_view){(const char *)mt, mn};
    e.target = (sf_view){(const char *)mt + mn, tn};
    e.referer = (sf_view){(const char *)r, rn};
    e.user_agent = (sf_view){(const char *)u, un};
    static char line[SV_LOG_LINE_MAX];
    size_t n = sv_log_format(&e, line);
    if (n == 0 || n > SV_LOG_LINE_MAX || line[n - 1] != '\n')
        die("no newline at the end", line, n);
    const char *q[6];
    int nq = 0;
    for (size_t i = 0; i + 1 < n; i++) {
        if ((unsigned char)line[i] < 0x20 || (unsigned char)line[i] > 0x7e)
            die("a byte that is not printable ASCII", line, n);
        if (line[i] == '"') {
            if (nq == 6)
                die("more than six quotes", line, n);
            q[nq++] = line + i;
        }
    }
    if (nq != 6)
        die("not six quotes", line, n);
    if (mapped && memchr(line, ':', (size_t)(strchr(line, ' ') - line)))
        die("an IPv4-mapped peer not written as IPv4", line, n);
    const char *req = q[0] + 1;
    size_t reqn = (size_t)(q[1] - req);
    if (!e.version.len) {
        if (reqn != 1 || req[0] != '-')
            die("an unparsed request is not \"-\"", line, n);
    } else {
        if (reqn < 9 || req[reqn - 9] != ' ' || memcmp(req + reqn - 8, e.version.ptr, 8) != 0)
            die("the version is not at the end of the request", line, n);
        const char *sp = memchr(req, ' ', reqn - 9);
        if (!sp)
            die("no space between method and target", line, n);
        check_field(req, (size_t)(sp - req), mt, mn, SV_LOG_METHOD_MAX, line, n);
        check_field(sp + 1, (size_t)(req + reqn - 9 - sp - 1), mt + mn, tn, SV_LOG_TARGET_MAX, line,
                    n);
    }
    check_field(q[2] + 1, (size_t)(q[3] - q[2] - 1), r, rn, SV_LOG_HEADER_MAX, line, n);
    check_field(q[4] + 1, (size_t)(q[5] - q[4] - 1), u, un, SV_LOG_HEADER_MAX, line, n);
    free(mt);
    return 0;
}
