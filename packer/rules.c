/*
 * rules.c - loading, validating and applying the rules file (rules.h).
 */
#include "rules.h"

#include "msg.h"

#include "glob.h"
#include "sf/httpdate.h"
#include "sf/store.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

typedef struct rule {
    pk_glob *glob;
    char *a; /* cache_control: value; mime: type; headers: name; exclude: the glob */
    char *b; /* headers: value */
} rule;

typedef struct rule_list {
    rule *v;
    size_t n;
} rule_list;

struct pk_rules {
    rule_list cc, headers, exclude, mime;
    char *path; /* the rules file, for messages */
    /* Per exclude, set by the walk: 1 it skipped something; 2 it skipped
     * nothing so far but names a directory the walk saw ("/drafts" for
     * "/drafts/ **"), the mistake pk_rules_warn_unused points out. */
    unsigned char *exclude_seen;
};

/* Message helper: "FILE: POINTER: cause". */
#define STR_(x) #x
#define STR(x)  STR_(x)

#define RULE_ERR(path, ptr, ...)                                                                   \
    do {                                                                                           \
        int o_ = snprintf(err, errlen, "%s: %s: ", path, ptr);                                     \
        if (o_ >= 0 && (size_t)o_ < errlen)                                                        \
            snprintf(err + o_, errlen - (size_t)o_, __VA_ARGS__);                                  \
    } while (0)

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static int is_lower(char c)
{
    return c >= 'a' && c <= 'z';
}

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
    if (!is_lower(*p))
        return "is not \"*\", \"null\" or one origin (scheme://host[:port])";
    while (is_lower(*p) || is_digit(*p) || *p == '+' || *p == '-' || *p == '.')
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
    else if (strcasecmp(name, "Access-Control-Max-Age") == 0 &&
             !all_digits(v + (v[0] == '-'), n - (v[0] == '-')))
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

int pk_mime_type_ok(const char *s)
{
    const char *p = s;
    size_t n = 0;
    while (is_tchar((unsigned char)*p))
        p++, n++;
    if (n == 0 || *p != '/')
        return 0;
    p++;
    n = 0;
    while (is_tchar((unsigned char)*p))
        p++, n++;
    if (n == 0)
        return 0;
    if (*p == '\0')
        return 1;
    /* Parameters: ";" then anything header-safe, e.g. "; charset=utf-8". */
    while (*p == ' ' || *p == '\t')
        p++;
    return *p == ';' && pk_header_value_ok(s);
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

const char *pk_cache_control_problem(const char *s, char *why, size_t cap)
{
    char b[16];
    const char *names[64]; /* the directives seen, for "twice"; a real value has a handful */
    size_t lens[64], count = 0;
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
                for (p++; *p && *p != '"'; p++)
                    if (*p == '\\' && p[1])
                        p++;
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
        for (size_t i = 0; i < count; i++)
            if (lens[i] == n && strncasecmp(names[i], name, n) == 0) {
                snprintf(why, cap, "names %.*s twice", (int)n, name);
                return why;
            }
        if (count < sizeof names / sizeof names[0]) {
            names[count] = name;
            lens[count++] = n;
        }
    }
    if (count == 0) {
        snprintf(why, cap, "has no directive");
        return why;
    }
    return NULL;
}

static void free_list(rule_list *l)
{
    for (size_t i = 0; i < l->n; i++) {
        pk_glob_free(l->v[i].glob);
        free(l->v[i].a);
        free(l->v[i].b);
    }
    free(l->v);
}

void pk_rules_free(pk_rules *r)
{
    if (!r)
        return;
    free_list(&r->cc);
    free_list(&r->headers);
    free_list(&r->exclude);
    free_list(&r->mime);
    free(r->path);
    free(r->exclude_seen);
    free(r);
}

static int compile(const char *path, const char *ptr, const char *pattern, pk_glob **out, char *err,
                   size_t errlen)
{
    char why[256];
    if (pk_glob_compile(pattern, out, why, sizeof why) != 0) {
        RULE_ERR(path, ptr, "bad glob \"%s\": %s", pattern, why);
        return -1;
    }
    return 0;
}

/* Fetches a required string member of a rule object. */
static const char *member(const char *path, const char *ptr, json_t *obj, const char *name,
                          char *err, size_t errlen)
{
    json_t *v = json_object_get(obj, name);
    if (!v) {
        RULE_ERR(path, ptr, "missing \"%s\"", name);
        return NULL;
    }
    if (!json_is_string(v)) {
        RULE_ERR(path, ptr, "\"%s\" must be a string", name);
        return NULL;
    }
    return json_string_value(v);
}

/* Rejects members other than the allowed ones: a typo must not be ignored. */
static int only(const char *path, const char *ptr, json_t *obj, const char *const *allowed,
                char *err, size_t errlen)
{
    const char *k;
    json_t *v;
    json_object_foreach(obj, k, v)
    {
        int ok = 0;
        for (size_t i = 0; allowed[i]; i++)
            ok |= strcmp(k, allowed[i]) == 0;
        if (!ok) {
            RULE_ERR(path, ptr, "unknown member \"%s\"", k);
            return -1;
        }
        /* free text, but text: the schema says so, and a number here is
         * more likely a misplaced value than a comment */
        if ((strcmp(k, "comment") == 0 || strcmp(k, "$schema") == 0) && !json_is_string(v)) {
            RULE_ERR(path, ptr, "\"%s\" must be a string", k);
            return -1;
        }
    }
    return 0;
}

enum section { S_CC, S_HEADERS, S_EXCLUDE, S_MIME };

static int parse_section(const char *path, json_t *arr, const char *sname, enum section s,
                         rule_list *out, char *err, size_t errlen)
{
    char ptr[96];
    if (!json_is_array(arr)) {
        snprintf(ptr, sizeof ptr, "/%s", sname);
        RULE_ERR(path, ptr, "must be an array");
        return -1;
    }
    size_t n = json_array_size(arr);
    out->v = calloc(n ? n : 1, sizeof *out->v);
    if (!out->v) {
        snprintf(err, errlen, "%s: out of memory", path);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *el = json_array_get(arr, i);
        rule *r = &out->v[out->n];
        snprintf(ptr, sizeof ptr, "/%s/%zu", sname, i);
        if (s == S_EXCLUDE) {
            if (!json_is_string(el)) {
                RULE_ERR(path, ptr, "must be a glob string");
                return -1;
            }
            if (compile(path, ptr, json_string_value(el), &r->glob, err, errlen) != 0)
                return -1;
            out->n++;
            if (!(r->a = strdup(json_string_value(el)))) {
                snprintf(err, errlen, "%s: out of memory", path);
                return -1;
            }
            continue;
        }
        if (!json_is_object(el)) {
            RULE_ERR(path, ptr, "must be an object");
            return -1;
        }
        static const char *const cc_keys[] = {"match", "value", "comment", NULL};
        static const char *const hd_keys[] = {"match", "name", "value", "comment", NULL};
        static const char *const mi_keys[] = {"match", "type", "comment", NULL};
        if (only(path, ptr, el,
                 s == S_CC        ? cc_keys
                 : s == S_HEADERS ? hd_keys
                                  : mi_keys,
                 err, errlen) != 0)
            return -1;
        const char *match = member(path, ptr, el, "match", err, errlen);
        if (!match)
            return -1;
        const char *a = member(path, ptr, el,
                               s == S_MIME      ? "type"
                               : s == S_HEADERS ? "name"
                                                : "value",
                               err, errlen);
        if (!a)
            return -1;
        const char *b = NULL;
        if (s == S_HEADERS && !(b = member(path, ptr, el, "value", err, errlen)))
            return -1;
        const char *why;
        char vptr[sizeof ptr + 8]; /* the JSON pointer of the value */
        snprintf(vptr, sizeof vptr, "%s/value", ptr);
        char ccwhy[160];
        if (s == S_CC && ((why = pk_header_value_problem(a)) != NULL ||
                          (why = pk_cache_control_problem(a, ccwhy, sizeof ccwhy)) != NULL)) {
            RULE_ERR(path, vptr, "the Cache-Control value \"%s\" %s", a, why);
            return -1;
        }
        if (s == S_MIME && !pk_mime_type_ok(a)) {
            RULE_ERR(path, ptr, "\"%s\" is not a media type (type/subtype[; parameters])", a);
            return -1;
        }
        if (s == S_HEADERS) {
            if (strlen(a) > PK_HEADER_NAME_MAX) {
                RULE_ERR(path, ptr, "the header name is longer than %d bytes", PK_HEADER_NAME_MAX);
                return -1;
            }
            if (!pk_header_name_ok(a)) {
                RULE_ERR(path, ptr, "\"%s\" is not a valid header name (RFC 9110 token)", a);
                return -1;
            }
            int reserved_as = pk_header_name_reserved(a);
            if (reserved_as == 1) {
                RULE_ERR(path, ptr,
                         "header %s is set by servd-pack or servd (use cache_control / mime "
                         "rules where they apply)",
                         a);
                return -1;
            }
            if (reserved_as == 2) {
                RULE_ERR(path, ptr,
                         "header %s cannot have one value for every encoding, range and 304 "
                         "of a path",
                         a);
                return -1;
            }
            if ((why = pk_header_value_problem(b)) != NULL ||
                (why = pk_header_syntax_problem(a, b, ccwhy, sizeof ccwhy)) != NULL) {
                RULE_ERR(path, vptr, "the value of %s %s", a, why);
                return -1;
            }
        }
        if (compile(path, ptr, match, &r->glob, err, errlen) != 0)
            return -1;
        out->n++; /* from here the rule owns its glob */
        if (!(r->a = strdup(a)) || (b && !(r->b = strdup(b)))) {
            snprintf(err, errlen, "%s: out of memory", path);
            return -1;
        }
    }
    return 0;
}

/* The offset of the first NUL byte in the file (at most
 * PK_RULES_MAX_BYTES, checked by the caller), or -1: a NUL is never in JSON
 * text, and a binary file (a pack passed as --rules) has them early. */
static long first_nul(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    long off = 0, at = -1;
    char buf[4096];
    size_t n;
    while (at < 0 && (n = fread(buf, 1, sizeof buf, f)) > 0) {
        const char *z = memchr(buf, 0, n);
        if (z)
            at = off + (long)(z - buf);
        off += (long)n;
    }
    fclose(f);
    return at;
}

/* Whether the file starts with a UTF-8 byte order mark (RFC 8259 §8.1:
 * JSON text must not). */
static int has_bom(const char *path)
{
    unsigned char b[3] = {0};
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    size_t n = fread(b, 1, sizeof b, f);
    fclose(f);
    return n == 3 && b[0] == 0xef && b[1] == 0xbb && b[2] == 0xbf;
}

int pk_rules_load(const char *path, pk_rules **out, char *err, size_t errlen)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s: not a regular file", path);
        return -1;
    }
    if (st.st_size > PK_RULES_MAX_BYTES) {
        snprintf(err, errlen, "%s: larger than %d bytes; is this a rules file?", path,
                 PK_RULES_MAX_BYTES);
        return -1;
    }
    json_error_t je;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        /* jansson's words for two mistakes people make, in theirs */
        const char *text = je.text;
        if (je.line <= 1 && has_bom(path))
            text = "starts with a UTF-8 byte order mark (EF BB BF); save it without one";
        else if (strstr(je.text, "JSON_ALLOW_NUL"))
            text = "\\u0000 (NUL) is not allowed in a string";
        long nul = first_nul(path);
        if (nul >= 0) {
            /* jansson stops at a NUL byte and calls it the end of the file */
            snprintf(err, errlen, "%s: not a JSON text file (a NUL byte at offset %ld)", path, nul);
            return -1;
        }
        if (je.line > 0)
            snprintf(err, errlen, "%s:%d:%d: %s", path, je.line, je.column, text);
        else
            snprintf(err, errlen, "%s: %s", path, text);
        return -1;
    }
    pk_rules *r = calloc(1, sizeof *r);
    if (!r) {
        snprintf(err, errlen, "%s: out of memory", path);
        goto out_json;
    }
    if (!json_is_object(root)) {
        snprintf(err, errlen, "%s: the top level must be a JSON object", path);
        goto out_rules;
    }
    static const char *const top[] = {"$schema", "comment", "cache_control", "headers", "exclude",
                                      "mime",    NULL};
    if (only(path, "/", root, top, err, errlen) != 0)
        goto out_rules;
    struct {
        const char *name;
        enum section s;
        rule_list *l;
    } sections[] = {{"cache_control", S_CC, &r->cc},
                    {"headers", S_HEADERS, &r->headers},
                    {"exclude", S_EXCLUDE, &r->exclude},
                    {"mime", S_MIME, &r->mime}};
    for (size_t i = 0; i < sizeof sections / sizeof sections[0]; i++) {
        json_t *arr = json_object_get(root, sections[i].name);
        if (arr &&
            parse_section(path, arr, sections[i].name, sections[i].s, sections[i].l, err, errlen))
            goto out_rules;
    }
    r->path = strdup(path);
    r->exclude_seen = calloc(r->exclude.n ? r->exclude.n : 1, 1);
    if (!r->path || !r->exclude_seen) {
        snprintf(err, errlen, "%s: out of memory", path);
        goto out_rules;
    }
    json_decref(root);
    *out = r;
    return 0;

out_rules:
    pk_rules_free(r);
out_json:
    json_decref(root);
    return -1;
}

static const rule *first(const rule_list *l, const char *key, size_t len)
{
    for (size_t i = 0; i < l->n; i++)
        if (pk_glob_match(l->v[i].glob, key, len))
            return &l->v[i];
    return NULL;
}

/* exclude_seen is not part of the rules' value: the walk marks through it
 * what each exclude did (one thread; see pk_rules_warn_unused). */
int pk_rules_excluded(const pk_rules *r, const char *key, size_t len)
{
    const rule *m = r ? first(&r->exclude, key, len) : NULL;
    if (m)
        r->exclude_seen[m - r->exclude.v] = 1;
    return m != NULL;
}

int pk_rules_excluded_dir(const pk_rules *r, const char *dirkey, size_t len)
{
    for (size_t i = 0; r && i < r->exclude.n; i++)
        if (pk_glob_covers(r->exclude.v[i].glob, dirkey, len)) {
            r->exclude_seen[i] = 1;
            return 1;
        }
    /* Not skipped: note the excludes that name this directory itself, with
     * or without a trailing '/', for the warning. */
    char k[SF_PATH_MAX + 2];
    if (!r || len + 1 >= sizeof k)
        return 0;
    memcpy(k, dirkey, len);
    k[len] = '/';
    for (size_t i = 0; i < r->exclude.n; i++)
        if (r->exclude_seen[i] == 0 && (pk_glob_match(r->exclude.v[i].glob, k, len) ||
                                        pk_glob_match(r->exclude.v[i].glob, k, len + 1)))
            r->exclude_seen[i] = 2;
    return 0;
}

void pk_rules_warn_unused(const pk_rules *r)
{
    for (size_t i = 0; r && i < r->exclude.n; i++) {
        if (r->exclude_seen[i] != 2)
            continue;
        const char *g = r->exclude.v[i].a;
        size_t n = strlen(g);
        if (n > 0 && g[n - 1] == '/')
            n--;
        pk_err("warning: %s: /exclude/%zu \"%s\" names a directory but skips nothing in it; "
               "to exclude the directory and all it holds, write \"%.*s/**\"",
               r->path, i, g, (int)n, g);
    }
}

const char *pk_rules_mime(const pk_rules *r, const char *key, size_t len)
{
    const rule *m = r ? first(&r->mime, key, len) : NULL;
    return m ? m->a : NULL;
}

static int is_html(const char *mime)
{
    size_t n = strcspn(mime, "; \t");
    return (n == 9 && strncasecmp(mime, "text/html", 9) == 0) ||
           (n == 21 && strncasecmp(mime, "application/xhtml+xml", 21) == 0);
}

const char *pk_rules_cache_control(const pk_rules *r, const char *key, size_t len, const char *mime)
{
    const rule *m = r ? first(&r->cc, key, len) : NULL;
    if (m)
        return m->a;
    if (is_html(mime))
        return PK_CC_HTML;
    if (pk_hashed_name(key, len))
        return PK_CC_IMMUTABLE;
    return PK_CC_DEFAULT;
}

size_t pk_rules_nheaders(const pk_rules *r)
{
    return r ? r->headers.n : 0;
}

int pk_rules_headers(const pk_rules *r, const char *key, size_t len, pk_header *out, size_t *n,
                     char *err, size_t errlen)
{
    size_t k = 0, bytes = 0;
    *n = 0;
    for (size_t i = 0; r && i < r->headers.n; i++) {
        const rule *h = &r->headers.v[i];
        if (!pk_glob_match(h->glob, key, len))
            continue;
        int again = 0; /* the same field and value from an earlier rule: sent once */
        for (size_t j = 0; j < k && pk_header_singleton(h->a) && !again; j++)
            if (strcasecmp(out[j].name, h->a) == 0 && strcmp(out[j].value, h->b) == 0)
                again = 1;
            else if (strcasecmp(out[j].name, h->a) == 0) {
                size_t first = 0; /* the rule out[j] came from */
                while (r->headers.v[first].a != out[j].name)
                    first++;
                snprintf(err, errlen,
                         "%s: /headers/%zu and /headers/%zu give %.*s two values of %s, a field "
                         "a response may carry only once: make their globs disjoint",
                         r->path, first, i, (int)len, key, h->a);
                return -1;
            }
        if (again)
            continue;
        bytes += strlen(h->a) + 2 + strlen(h->b) + 2;
        if (bytes > PK_HEADERS_PATH_MAX) {
            snprintf(err, errlen,
                     "%s: the header rules that match %.*s give it more than %d bytes of header "
                     "lines (at /headers/%zu); proxies and CDNs refuse such responses",
                     r->path, (int)len, key, PK_HEADERS_PATH_MAX, i);
            return -1;
        }
        out[k++] = (pk_header){h->a, h->b};
    }
    *n = k;
    return 0;
}

static int is_letter(char c)
{
    return is_lower(c) || (c >= 'A' && c <= 'Z');
}

/* A run of four or more digits that starts with 19 or 20: a year, or a
 * date (2024, 20231201). A random hex string holds one about once in a
 * hundred, so refusing them costs little. */
static int has_year(const char *s, size_t n)
{
    for (size_t i = 0; i + 4 <= n; i++)
        if ((i == 0 || !is_digit(s[i - 1])) && is_digit(s[i + 2]) && is_digit(s[i + 3]) &&
            ((s[i] == '1' && s[i + 1] == '9') || (s[i] == '2' && s[i + 1] == '0')))
            return 1;
    return 0;
}

/* Lowercase hex: PK_HASH_MIN_CHARS or more, with a digit and a letter, and
 * no year in it ("cafe2024", "20231201a" are names). */
static int hex_hash(const char *s, size_t n)
{
    int digit = 0, letter = 0;
    if (n < PK_HASH_MIN_CHARS)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (is_digit(c))
            digit = 1;
        else if (c >= 'a' && c <= 'f')
            letter = 1;
        else
            return 0;
    }
    return digit && letter && !has_year(s, n);
}

/* base64url (Vite, Rollup: "BkR2x9aQ", "CpZ3tG_-"): PK_HASH_MIN_CHARS or
 * more of [A-Za-z0-9_-] with a digit, a lowercase and an uppercase letter,
 * that cannot be words and numbers written in camel case: no run of three
 * digits (Summer2024, Win10Pro... have one), no letter followed by three
 * lowercase ones (Issue12Final, SemiBold2), and at most one letter followed
 * by two lowercase ones (Top10Web, arm64Mac). About 6 in 10 of Rollup's
 * 8-character hashes qualify (the rest get the default policy, which is
 * safe); none of the camel-case names in tests/unit/packer_rules.c do. */
static int b64_hash(const char *s, size_t n)
{
    int digit = 0, lower = 0, upper = 0, words = 0;
    if (n < PK_HASH_MIN_CHARS)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (is_digit(c))
            digit = 1;
        else if (is_lower(c))
            lower = 1;
        else if (c >= 'A' && c <= 'Z')
            upper = 1;
        else if (c != '_' && c != '-')
            return 0;
        if (i + 3 <= n && is_digit(c) && is_digit(s[i + 1]) && is_digit(s[i + 2]))
            return 0;
        if (i + 3 <= n && is_letter(c) && is_lower(s[i + 1]) && is_lower(s[i + 2])) {
            if (++words > 1 || (i + 4 <= n && is_lower(s[i + 3])))
                return 0;
        }
    }
    return digit && lower && upper;
}

/* esbuild's base32 ("5X7JQ2ZL"): exactly PK_HASH_MIN_CHARS of [A-Z2-7] with
 * a digit before a letter. 0, 1, 8 and 9 are not base32 digits, so dates and
 * camera numbers (IMG20230101) do not qualify, and a word followed by its
 * number (RELEASE2, WINTER22) does not either. */
static int b32_hash(const char *s, size_t n)
{
    int digit = 0, digit_then_letter = 0;
    if (n != PK_HASH_MIN_CHARS)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c >= '2' && c <= '7')
            digit = 1;
        else if (c >= 'A' && c <= 'Z')
            digit_then_letter |= digit;
        else
            return 0;
    }
    return digit_then_letter;
}

int pk_hashed_name(const char *key, size_t len)
{
    size_t start = len;
    while (start > 0 && key[start - 1] != '/')
        start--;
    size_t end = len;
    while (end > start && key[end - 1] != '.')
        end--;
    if (end <= start + 1) /* no extension: the whole name is the stem */
        end = len;
    else
        end--; /* drop ".ext" */
    /* The hash follows a '.' or '-' after a non-empty stem: the first
     * segment of a name is never the hash (IMG_20230101.jpg, Report2023Q4). */
    for (size_t p = start + 1; p < end; p++) {
        if (key[p] != '.' && key[p] != '-')
            continue;
        size_t h = p + 1, dot = h, seg = h;
        while (dot < end && key[dot] != '.')
            dot++;
        while (seg < end && key[seg] != '.' && key[seg] != '-')
            seg++;
        if (hex_hash(key + h, seg - h) || b32_hash(key + h, seg - h) || b64_hash(key + h, dot - h))
            return 1;
    }
    return 0;
}
