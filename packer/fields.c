/*
 * fields.c - checks of header field names and values (fields.h): what a
 * rules file may put on the wire, RFC 9110 §5 and the fields whose syntax
 * browsers and caches check.
 */
#include "fields.h"

#include "sf/httpdate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* A limit's value, in a message. */
#define STR_(x) #x
#define STR(x)  STR_(x)

static int is_tchar(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

int pk_header_name_ok(const char *s)
{
    if (!*s)
        return 0;
    for (; *s; s++)
        if (!is_tchar((unsigned char)*s))
            return 0;
    return 1;
}

/* Headers servd-pack renders itself, framing and hop-by-hop headers, and the
 * Date line servd adds: a rule setting one would break the contract. */
static const char *const reserved[] = {
    "Accept-Ranges",
    "Cache-Control",
    "Connection",
    "Content-Encoding",
    "Content-Length",
    "Content-Range",
    "Content-Type",
    "Date",
    "ETag",
    "Keep-Alive",
    "Last-Modified",
    "Proxy-Connection",
    "TE",
    "Trailer",
    "Transfer-Encoding",
    "Upgrade",
    "Vary",
};

/* Headers one fixed value cannot be right for on every response of a path:
 * digests differ per encoding and per range (RFC 9530; Content-MD5 and
 * Digest are their predecessors), and Age is a cache's, not an origin's
 * (RFC 9111 §5.1). */
static const char *const per_response[] = {
    "Age", "Content-Digest", "Content-MD5", "Digest", "Repr-Digest",
};

int pk_header_name_reserved(const char *s)
{
    for (size_t i = 0; i < sizeof reserved / sizeof reserved[0]; i++)
        if (strcasecmp(s, reserved[i]) == 0)
            return 1;
    for (size_t i = 0; i < sizeof per_response / sizeof per_response[0]; i++)
        if (strcasecmp(s, per_response[i]) == 0)
            return 2;
    return 0;
}

const char *pk_header_value_problem(const char *s)
{
    size_t n = strlen(s);
    if (n == 0)
        return "is empty";
    if (n > PK_HEADER_VALUE_MAX)
        return "is longer than " STR(PK_HEADER_VALUE_MAX) " bytes";
    if (s[0] == ' ' || s[0] == '\t' || s[n - 1] == ' ' || s[n - 1] == '\t')
        return "starts or ends with whitespace";
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c < 0x20 && c != '\t') || c == 0x7f)
            return c == '\r' || c == '\n' ? "has a line break (CR or LF)"
                                          : "has a control character";
        /* UTF-8 of U+0080..U+009F (C1 controls; U+0085 is a line break to
         * some readers) and of U+2028, U+2029 (line and paragraph breaks) */
        unsigned char d = i + 1 < n ? (unsigned char)s[i + 1] : 0;
        unsigned char e = i + 2 < n ? (unsigned char)s[i + 2] : 0;
        if ((c == 0xc2 && d >= 0x80 && d <= 0x9f) || (c == 0xe2 && d == 0x80 && (e | 1) == 0xa9))
            return "has a Unicode control character or line separator (U+0080 to U+009F, "
                   "U+2028, U+2029)";
    }
    return NULL;
}

/* Fields a response may carry once: each is defined as one value, not a
 * list (RFC 9110 section 5.3: no second line may be generated), and
 * recipients differ on two. Browsers fail a CORS check on two
 * Access-Control-Allow-Origin lines and ignore two X-Frame-Options; HSTS
 * and caches take the first. */
static const char *const singletons[] = {
    "Access-Control-Allow-Credentials",
    "Access-Control-Allow-Origin",
    "Access-Control-Max-Age",
    "Content-Disposition",
    "Content-Location",
    "Cross-Origin-Embedder-Policy",
    "Cross-Origin-Opener-Policy",
    "Cross-Origin-Resource-Policy",
    "Expires",
    "Location",
    "Origin-Agent-Cluster",
    "Retry-After",
    "Strict-Transport-Security",
    "X-Content-Type-Options",
    "X-Frame-Options",
    "X-XSS-Protection",
};

int pk_header_singleton(const char *s)
{
    for (size_t i = 0; i < sizeof singletons / sizeof singletons[0]; i++)
        if (strcasecmp(s, singletons[i]) == 0)
            return 1;
    return 0;
}

static int all_digits(const char *s, size_t n)
{
    if (n == 0)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return 0;
    return 1;
}

/* NULL when v can be an Access-Control-Allow-Origin value: "*", "null" or
 * one serialised origin. Browsers compare the field byte for byte with the
 * page's origin, which they serialise in lower case and without a default
 * port: "https://App.example/" or "https://app.example:443" never match. */
static const char *origin_problem(const char *v)
{
    if (strcmp(v, "*") == 0 || strcmp(v, "null") == 0)
        return NULL;
    const char *p = v;
    if (!pk_is_lower(*p))
        return "is not \"*\", \"null\" or one origin (scheme://host[:port])";
    while (pk_is_lower(*p) || pk_is_digit(*p) || *p == '+' || *p == '-' || *p == '.')
        p++;
    size_t scheme = (size_t)(p - v);
    if (strncmp(p, "://", 3) != 0)
        return "is not \"*\", \"null\" or one origin (scheme://host[:port])";
    const char *host = p + 3, *port = NULL;
    for (p = host; *p; p++) {
        if (*p >= 'A' && *p <= 'Z')
            return "has capitals: browsers send the origin in lower case, and compare it byte "
                   "for byte";
        if (*p == '/' || *p == ' ' || *p == ',' || *p == '?' || *p == '#')
            return "is not one origin: no path, no trailing slash, no list (browsers compare it "
                   "byte for byte with the page's origin)";
        if (*p == ':' && host[0] != '[') {
            if (port)
                return "is not one origin (scheme://host[:port]): a second ':'";
            port = p + 1;
        } else if (*p == ']')
            port = p[1] == ':' ? p + 2 : NULL;
    }
    if (p == host || (port && port - 1 == host))
        return "has no host";
    if (port && ((scheme == 4 && strncmp(v, "http", 4) == 0 && strcmp(port, "80") == 0) ||
                 (scheme == 5 && strncmp(v, "https", 5) == 0 && strcmp(port, "443") == 0)))
        return "names the default port: browsers send the origin without it";
    if (port && (!*port || strspn(port, "0123456789") != strlen(port)))
        return "has a port that is not a number";
    /* browsers serialise the port as a number: no leading zero, at most 65535 */
    if (port && ((port[0] == '0' && port[1]) || strlen(port) > 5 || atol(port) > 65535))
        return "has a port browsers would write differently or not at all (a leading zero, "
               "or above 65535)";
    return NULL;
}

/* One directive of Strict-Transport-Security, s[0, k): 1 when it is a
 * valid max-age, 2 an invalid one, 0 another directive. RFC 6797 section
 * 6.1: directive-name [ "=" directive-value ], whitespace allowed around
 * "=", the value a token or a quoted-string. */
static int hsts_max_age(const char *s, size_t k)
{
    while (k > 0 && (*s == ' ' || *s == '\t'))
        s++, k--;
    while (k > 0 && (s[k - 1] == ' ' || s[k - 1] == '\t'))
        k--;
    if (k < 7 || strncasecmp(s, "max-age", 7) != 0 || (k > 7 && is_tchar((unsigned char)s[7])))
        return 0;
    s += 7, k -= 7;
    while (k > 0 && (*s == ' ' || *s == '\t'))
        s++, k--;
    if (k == 0 || *s != '=')
        return 2;
    s++, k--;
    while (k > 0 && (*s == ' ' || *s == '\t'))
        s++, k--;
    if (k >= 2 && s[0] == '"' && s[k - 1] == '"')
        s++, k -= 2;
    return all_digits(s, k) ? 1 : 2;
}

const char *pk_header_syntax_problem(const char *name, const char *v, char *why, size_t cap)
{
    size_t n = strlen(v);
    const char *bad;
    if (strcasecmp(name, "Expires") == 0 && !sf_http_date_sendable(v, n))
        snprintf(why, cap,
                 "is not an HTTP date like \"Sun, 06 Nov 1994 08:49:37 GMT\" of a day that "
                 "exists, with that day's name (RFC 9110 section 5.6.7; for \"already "
                 "expired\" use cache_control \"no-cache\")");
    else if (strcasecmp(name, "Access-Control-Allow-Origin") == 0 && (bad = origin_problem(v)))
        snprintf(why, cap, "%s", bad);
    else if (strcasecmp(name, "Access-Control-Allow-Credentials") == 0 && strcmp(v, "true") != 0)
        snprintf(why, cap, "is not \"true\", its only value (leave the field out for false)");
    else if (strcasecmp(name, "Access-Control-Max-Age") == 0 && !all_digits(v, n) &&
             strcmp(v, "-1") != 0)
        snprintf(why, cap, "is not a number of seconds (-1 turns the cache off)");
    else if (strcasecmp(name, "X-Content-Type-Options") == 0 && strcasecmp(v, "nosniff") != 0)
        snprintf(why, cap, "is not \"nosniff\", its only value");
    else if (strcasecmp(name, "Strict-Transport-Security") == 0) {
        /* RFC 6797 section 6.1: directives split by ';', max-age required */
        const char *p = v;
        int max_age = 0;
        while (*p) {
            size_t k = strcspn(p, ";");
            max_age += hsts_max_age(p, k); /* 2 for a bad one */
            p += k + (p[k] == ';');
        }
        if (max_age != 1)
            snprintf(why, cap, "%s (RFC 6797 section 6.1: one max-age=SECONDS is required)",
                     max_age ? "has a bad or second max-age" : "has no max-age");
        else
            return NULL;
    } else
        return NULL;
    return why;
}

int pk_header_value_ok(const char *s)
{
    return pk_header_value_problem(s) == NULL;
}

/* Response directives of RFC 9111 §5.2.2 and RFC 8246 / RFC 5861. */
static const char *const cc_seconds[] = {"max-age", "s-maxage", "stale-while-revalidate",
                                         "stale-if-error", NULL};
static const char *const cc_bare[] = {
    "must-revalidate",  "must-understand", "no-store",  "no-transform",
    "proxy-revalidate", "public",          "immutable", NULL};

static int in_list(const char *const *l, const char *s, size_t n)
{
    for (; *l; l++)
        if (strlen(*l) == n && strncasecmp(*l, s, n) == 0)
            return 1;
    return 0;
}

/* A byte for a message: 'c' when printable ASCII, else its value. */
static const char *show_byte(char c, char *buf, size_t cap)
{
    unsigned char u = (unsigned char)c;
    if (u > 0x20 && u < 0x7f)
        snprintf(buf, cap, "'%c'", c);
    else
        snprintf(buf, cap, "byte 0x%02X", u);
    return buf;
}

/* The closing quote of the quoted-string that opens at p (RFC 9110 §5.6.4:
 * a backslash quotes the next byte), or the NUL where it is missing. */
static const char *quoted_end(const char *p)
{
    for (p++; *p && *p != '"'; p++)
        if (*p == '\\' && p[1])
            p++;
    return p;
}

/* The end of the token at p. */
static const char *token_end(const char *p)
{
    while (is_tchar((unsigned char)*p))
        p++;
    return p;
}

const char *pk_mime_type_problem(const char *s, char *why, size_t cap)
{
    char b[16];
    const char *bad = pk_header_value_problem(s);
    if (bad) {
        snprintf(why, cap, "%s", bad);
        return why;
    }
    /* type "/" subtype: tokens, and not "*", which makes a media range
     * (an Accept value), not the type of a representation */
    const char *slash = token_end(s);
    const char *p = *slash == '/' ? token_end(slash + 1) : slash;
    if (slash == s || *slash != '/' || p == slash + 1) {
        snprintf(why, cap, "is not type/subtype (two RFC 9110 tokens)");
        return why;
    }
    if ((slash - s == 1 && *s == '*') || (p - slash == 2 && slash[1] == '*')) {
        snprintf(why, cap, "is a media range (with '*'), not a media type");
        return why;
    }
    /* parameters = *( OWS ";" OWS [ name "=" ( token / quoted-string ) ] ) */
    while (*p) {
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p != ';') {
            snprintf(why, cap, "has %s where ';' and a parameter should follow",
                     show_byte(*p, b, sizeof b));
            return why;
        }
        for (p++; *p == ' ' || *p == '\t'; p++)
            ;
        if (*p == ';' || !*p)
            continue; /* an empty parameter: allowed */
        const char *name = p;
        p = token_end(p);
        if (p == name) {
            snprintf(why, cap, "has %s where a parameter name should start",
                     show_byte(*p, b, sizeof b));
            return why;
        }
        if (*p != '=') {
            snprintf(why, cap, "has a parameter without \"=value\" (%.*s)", (int)(p - name), name);
            return why;
        }
        const char *v = ++p;
        if (*p == '"') {
            p = quoted_end(p);
            if (!*p++) {
                snprintf(why, cap, "has a quoted string without its closing '\"'");
                return why;
            }
        } else if ((p = token_end(p)) == v) {
            snprintf(why, cap, "has a parameter without a value (%s after '=')",
                     *p ? show_byte(*p, b, sizeof b) : "nothing");
            return why;
        }
    }
    return NULL;
}

int pk_mime_type_ok(const char *s)
{
    char why[128];
    return pk_mime_type_problem(s, why, sizeof why) == NULL;
}

/* Whether the directive name [name, name + n) of the Cache-Control value s
 * appears earlier in s, whose directives before it are well formed. */
static int named_before(const char *s, const char *name, size_t n)
{
    for (const char *p = s; p < name;) {
        while (*p == ' ' || *p == '\t' || *p == ',')
            p++;
        const char *d = p;
        while (is_tchar((unsigned char)*p))
            p++;
        if (d < name && (size_t)(p - d) == n && strncasecmp(d, name, n) == 0)
            return 1;
        if (*p == '=')
            p = p[1] == '"' ? quoted_end(p + 1) + 1 : token_end(p + 1);
        else if (p == d)
            break; /* not reached: the directives before name are well formed */
    }
    return 0;
}

const char *pk_cache_control_problem(const char *s, char *why, size_t cap)
{
    char b[16];
    int any = 0;
    const char *p = s;
    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == ',')
            p++;
        if (!*p)
            break;
        const char *name = p;
        while (is_tchar((unsigned char)*p))
            p++;
        size_t n = (size_t)(p - name);
        if (n == 0) {
            snprintf(why, cap, "has %s where a directive name should start",
                     show_byte(*p, b, sizeof b));
            return why;
        }
        const char *arg = NULL;
        size_t alen = 0;
        int quoted = 0;
        if (*p == '=') {
            arg = ++p;
            if (*p == '"') {
                quoted = 1;
                p = quoted_end(p);
                if (*p != '"') {
                    snprintf(why, cap, "has an unterminated quoted string");
                    return why;
                }
                p++;
            } else {
                while (is_tchar((unsigned char)*p))
                    p++;
            }
            alen = (size_t)(p - arg);
            if (alen == 0) {
                snprintf(why, cap, "has %.*s= without a value", (int)n, name);
                return why;
            }
        }
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p && *p != ',') {
            snprintf(why, cap, "has %s after %.*s where ',' or the end should be",
                     show_byte(*p, b, sizeof b), (int)n, name);
            return why;
        }
        if (in_list(cc_seconds, name, n) && (!arg || quoted || strspn(arg, "0123456789") != alen)) {
            snprintf(why, cap, "needs a number of seconds in %.*s=N", (int)n, name);
            return why;
        }
        if (in_list(cc_bare, name, n) && arg) {
            snprintf(why, cap, "gives %.*s a value; it takes none", (int)n, name);
            return why;
        }
        if (named_before(s, name, n)) {
            snprintf(why, cap, "names %.*s twice", (int)n, name);
            return why;
        }
        any = 1;
    }
    if (!any) {
        snprintf(why, cap, "has no directive");
        return why;
    }
    return NULL;
}

int pk_cache_control_has(const char *s, const char *name)
{
    size_t want = strlen(name);
    const char *p = s;
    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == ',')
            p++;
        if (!*p)
            return 0;
        const char *d = p;
        while (is_tchar((unsigned char)*p))
            p++;
        if ((size_t)(p - d) == want && strncasecmp(d, name, want) == 0)
            return 1;
        if (*p == '=' && p[1] == '"') { /* a quoted argument may hold ',' */
            p = quoted_end(p + 1);
            if (*p)
                p++;
        }
        while (*p && *p != ',')
            p++;
    }
}
