/*
 * rules.c - loading, validating and applying the rules file (rules.h).
 */
#include "rules.h"

#include "msg.h"

#include "glob.h"
#include "sf/store.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct rule {
    pk_glob *glob;
    char *pattern; /* the glob as written, for messages */
    char *a;       /* cache_control: value; mime: type; headers: name */
    char *b;       /* headers: value */
} rule;

/* What a rule did in this build, for pk_rules_warn: bits of rule_list.seen,
 * set by the queries (the reads ask for mime rules on any thread). */
enum {
    SEEN_USED = 1,     /* it applied to a file (an exclude: skipped one) */
    SEEN_MATCHED = 2,  /* its glob matched a file (the lists asked through first()) */
    SEEN_NAMES_DIR = 4 /* an exclude that skipped nothing but names a
                        * directory the walk saw ("/drafts" for "/drafts/ **") */
};

typedef struct rule_list {
    rule *v;
    size_t n;
    atomic_uchar *seen; /* n of SEEN_* bits */
} rule_list;

struct pk_rules {
    rule_list cc, headers, exclude, mime, encoded;
    char *path; /* the rules file, for messages */
};

/* Message helper: "FILE: POINTER: cause". */
#define RULE_ERR(path, ptr, ...)                                                                   \
    do {                                                                                           \
        int o_ = snprintf(err, errlen, "%s: %s: ", path, ptr);                                     \
        if (o_ >= 0 && (size_t)o_ < errlen)                                                        \
            snprintf(err + o_, errlen - (size_t)o_, __VA_ARGS__);                                  \
    } while (0)

static void free_list(rule_list *l)
{
    for (size_t i = 0; i < l->n; i++) {
        pk_glob_free(l->v[i].glob);
        free(l->v[i].pattern);
        free(l->v[i].a);
        free(l->v[i].b);
    }
    free(l->v);
    free(l->seen);
}

void pk_rules_free(pk_rules *r)
{
    if (!r)
        return;
    free_list(&r->cc);
    free_list(&r->headers);
    free_list(&r->exclude);
    free_list(&r->mime);
    free_list(&r->encoded);
    free(r->path);
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

/* The JSON pointer of member name of the value at ptr (RFC 6901: "~" and
 * "/" in a name are written "~0" and "~1"). */
static void member_pointer(char *out, size_t cap, const char *ptr, const char *name)
{
    int n = snprintf(out, cap, "%s/", ptr);
    size_t o = n > 0 && (size_t)n < cap ? (size_t)n : 0;
    for (const char *c = name; *c && o + 3 < cap; c++) {
        if (*c == '~' || *c == '/') {
            out[o++] = '~';
            out[o++] = *c == '~' ? '0' : '1';
        } else {
            out[o++] = *c;
        }
    }
    out[o] = '\0';
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
        char mptr[160]; /* the member's own pointer */
        member_pointer(mptr, sizeof mptr, ptr, name);
        RULE_ERR(path, mptr, "must be a string");
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
        char mptr[160]; /* the member's own pointer ("" is the root) */
        member_pointer(mptr, sizeof mptr, ptr, k);
        if (!ok) {
            RULE_ERR(path, mptr, "unknown member \"%s\"", k);
            return -1;
        }
        /* free text, but text: the schema says so, and a number here is
         * more likely a misplaced value than a comment */
        if ((strcmp(k, "comment") == 0 || strcmp(k, "$schema") == 0) && !json_is_string(v)) {
            RULE_ERR(path, mptr, "must be a string");
            return -1;
        }
    }
    return 0;
}

enum section { S_CC, S_HEADERS, S_EXCLUDE, S_MIME, S_ENCODED };

/* What to do instead of a headers rule for a header servd-pack or servd
 * sets (fields.c's reserved list), as the end of the refusal. */
static const char *reserved_hint(const char *name)
{
    if (strcasecmp(name, "Cache-Control") == 0)
        return " (use a cache_control rule)";
    if (strcasecmp(name, "Content-Type") == 0)
        return " (use a mime rule)";
    if (strcasecmp(name, "Vary") == 0)
        return " (Vary: Accept-Encoding goes out with every response that has encodings "
               "to choose from; a path's headers are the same for every request, so nothing "
               "else varies)";
    return "";
}

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
    out->seen = calloc(n ? n : 1, sizeof *out->seen);
    if (!out->v || !out->seen) {
        snprintf(err, errlen, "%s: out of memory", path);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *el = json_array_get(arr, i);
        rule *r = &out->v[out->n];
        snprintf(ptr, sizeof ptr, "/%s/%zu", sname, i);
        if (s == S_EXCLUDE || s == S_ENCODED) { /* a list of globs */
            if (!json_is_string(el)) {
                RULE_ERR(path, ptr, "must be a glob string");
                return -1;
            }
            if (compile(path, ptr, json_string_value(el), &r->glob, err, errlen) != 0)
                return -1;
            out->n++;
            if (!(r->pattern = strdup(json_string_value(el)))) {
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
        snprintf(vptr, sizeof vptr, "%s/%s", ptr, s == S_MIME ? "type" : "value");
        char why_buf[1024]; /* the explanation of a bad value; it may quote a part of it */
        if (s == S_CC && ((why = pk_header_value_problem(a)) != NULL ||
                          (why = pk_cache_control_problem(a, why_buf, sizeof why_buf)) != NULL)) {
            RULE_ERR(path, vptr, "the Cache-Control value \"%s\" %s", a, why);
            return -1;
        }
        if (s == S_MIME && (why = pk_mime_type_problem(a, why_buf, sizeof why_buf)) != NULL) {
            RULE_ERR(path, vptr,
                     "\"%s\" is not a media type (type/subtype[; name=value]...): it %s", a, why);
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
                RULE_ERR(path, ptr, "header %s is set by servd-pack or servd%s", a,
                         reserved_hint(a));
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
                (why = pk_header_syntax_problem(a, b, why_buf, sizeof why_buf)) != NULL) {
                RULE_ERR(path, vptr, "the value of %s %s", a, why);
                return -1;
            }
        }
        if (compile(path, ptr, match, &r->glob, err, errlen) != 0)
            return -1;
        out->n++; /* from here the rule owns its glob */
        if (!(r->pattern = strdup(match)) || !(r->a = strdup(a)) || (b && !(r->b = strdup(b)))) {
            snprintf(err, errlen, "%s: out of memory", path);
            return -1;
        }
    }
    return 0;
}

/* Reads the rules file whole into *buf (malloc'd, *len bytes): a regular
 * file, or a pipe (`--rules <(jq ... )`), read once, so that what is
 * checked is what is parsed. @return 0, or -1 with err, which names the
 * option (a parse error names the file, line and column instead). */
static int read_rules(const char *path, char **buf, size_t *len, char *err, size_t errlen)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        snprintf(err, errlen, "--rules %s: %s", path, strerror(errno));
        return -1;
    }
    /* looked at before it is opened: opening a device can do things */
    if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode)) {
        snprintf(err, errlen, "--rules %s: not a regular file or a pipe", path);
        return -1;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        snprintf(err, errlen, "--rules %s: %s", path, strerror(errno));
        return -1;
    }
    size_t cap = PK_RULES_MAX_BYTES + 1, n = 0; /* one more: a larger file shows */
    char *p = malloc(cap);
    if (!p) {
        snprintf(err, errlen, "--rules %s: out of memory", path);
        close(fd);
        return -1;
    }
    for (;;) {
        ssize_t r = read(fd, p + n, cap - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            snprintf(err, errlen, "--rules %s: %s", path, strerror(errno));
            goto out_fail;
        }
        if (r == 0)
            break;
        n += (size_t)r;
        if (n == cap) {
            snprintf(err, errlen, "--rules %s: larger than %d bytes; is this a rules file?", path,
                     PK_RULES_MAX_BYTES);
            goto out_fail;
        }
    }
    close(fd);
    *buf = p;
    *len = n;
    return 0;

out_fail:
    close(fd);
    free(p);
    return -1;
}

int pk_rules_load(const char *path, pk_rules **out, char *err, size_t errlen)
{
    char *text;
    size_t len;
    if (read_rules(path, &text, &len, err, errlen) != 0)
        return -1;
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        /* jansson's words for two mistakes people make, in theirs */
        const char *msg = je.text;
        const char *nul = memchr(text, 0, len);
        /* RFC 8259 §8.1: JSON text must not start with a byte order mark */
        if (je.line <= 1 && len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0)
            msg = "starts with a UTF-8 byte order mark (EF BB BF); save it without one";
        else if (strstr(je.text, "JSON_ALLOW_NUL"))
            msg = "\\u0000 (NUL) is not allowed in a string";
        if (nul) {
            /* a NUL is never in JSON text, and a binary file (a pack passed
             * as --rules) has them early */
            snprintf(err, errlen, "%s: not a JSON text file (a NUL byte at offset %ld)", path,
                     (long)(nul - text));
        } else if (je.line > 0) {
            snprintf(err, errlen, "%s:%d:%d: %s", path, je.line, je.column, msg);
        } else {
            snprintf(err, errlen, "%s: %s", path, msg);
        }
        free(text);
        return -1;
    }
    free(text);
    pk_rules *r = calloc(1, sizeof *r);
    if (!r) {
        snprintf(err, errlen, "%s: out of memory", path);
        goto out_json;
    }
    if (!json_is_object(root)) {
        snprintf(err, errlen, "%s: the top level must be a JSON object", path);
        goto out_rules;
    }
    static const char *const top[] = {"$schema", "comment", "cache_control", "headers",
                                      "exclude", "mime",    "encoded",       NULL};
    if (only(path, "", root, top, err, errlen) != 0)
        goto out_rules;
    struct {
        const char *name;
        enum section s;
        rule_list *l;
    } sections[] = {{"cache_control", S_CC, &r->cc},
                    {"headers", S_HEADERS, &r->headers},
                    {"exclude", S_EXCLUDE, &r->exclude},
                    {"mime", S_MIME, &r->mime},
                    {"encoded", S_ENCODED, &r->encoded}};
    for (size_t i = 0; i < sizeof sections / sizeof sections[0]; i++) {
        json_t *arr = json_object_get(root, sections[i].name);
        if (arr &&
            parse_section(path, arr, sections[i].name, sections[i].s, sections[i].l, err, errlen))
            goto out_rules;
    }
    if (!(r->path = strdup(path))) {
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

static void mark(const rule_list *l, size_t i, unsigned bits)
{
    /* looked at first: after the first few files there is nothing to set,
     * and the reads' threads then only share the line, not write it */
    if ((atomic_load_explicit(&l->seen[i], memory_order_relaxed) & bits) != bits)
        atomic_fetch_or_explicit(&l->seen[i], (unsigned char)bits, memory_order_relaxed);
}

/* The first rule of l whose glob matches key, marked used. The later rules
 * that match it too are marked matched, until each is: a rule that matches
 * files but is used for none lies behind earlier ones (pk_rules_warn). */
static const rule *first(const rule_list *l, const char *key, size_t len)
{
    size_t i = 0;
    while (i < l->n && !pk_glob_match(l->v[i].glob, key, len))
        i++;
    if (i == l->n)
        return NULL;
    mark(l, i, SEEN_USED | SEEN_MATCHED);
    for (size_t j = i + 1; j < l->n; j++)
        if (!(atomic_load_explicit(&l->seen[j], memory_order_relaxed) & SEEN_MATCHED) &&
            pk_glob_match(l->v[j].glob, key, len))
            mark(l, j, SEEN_MATCHED);
    return &l->v[i];
}

int pk_rules_excluded(const pk_rules *r, const char *key, size_t len)
{
    return r && first(&r->exclude, key, len) != NULL;
}

/* Whether another exclude than the one that skips the directory dirkey
 * would have matched something in it: it covers the directory too, or it
 * is an anchored glob that starts with the directory's path and a '/'
 * ("/drafts/old.txt" beside an exclude of all of /drafts). Such a rule is marked
 * matched, as one behind another at file level (pk_rules_warn): the walk
 * enters no skipped directory, so no rule is asked about what it holds. */
static int behind_in_dir(const rule *x, const char *dirkey, size_t len)
{
    return pk_glob_covers(x->glob, dirkey, len) ||
           (strncmp(x->pattern, dirkey, len) == 0 && x->pattern[len] == '/');
}

int pk_rules_excluded_dir(const pk_rules *r, const char *dirkey, size_t len)
{
    for (size_t i = 0; r && i < r->exclude.n; i++)
        if (pk_glob_covers(r->exclude.v[i].glob, dirkey, len)) {
            mark(&r->exclude, i, SEEN_USED);
            for (size_t j = 0; j < r->exclude.n; j++)
                if (j != i &&
                    !(atomic_load_explicit(&r->exclude.seen[j], memory_order_relaxed) &
                      SEEN_MATCHED) &&
                    behind_in_dir(&r->exclude.v[j], dirkey, len))
                    mark(&r->exclude, j, SEEN_MATCHED);
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
        if (pk_glob_match(r->exclude.v[i].glob, k, len) ||
            pk_glob_match(r->exclude.v[i].glob, k, len + 1))
            mark(&r->exclude, i, SEEN_NAMES_DIR);
    return 0;
}

int pk_rules_encoded(const pk_rules *r, const char *key, size_t len)
{
    return r && first(&r->encoded, key, len) != NULL;
}

/* " (a glob starting with / is ...)" after a glob that matched nothing */
static const char *anchored_hint(const char *glob)
{
    return glob[0] == '/' ? " (a glob starting with / is anchored at the root of the site)" : "";
}

/* Whether a glob names a path under a segment starting with '.' (but
 * .well-known): one the walk skips before it asks the excludes. */
static int names_hidden(const char *g)
{
    for (const char *p = g; p; p = strchr(p, '/')) {
        p += *p == '/';
        if (*p == '.' && strncmp(p, ".well-known", 11) != 0)
            return 1;
    }
    return 0;
}

/* Unused rules warned about one by one; the rest are counted (a rules file
 * shared by many sites may hold thousands that one site does not use). */
#define RULE_WARNINGS_SHOWN 10

/* One warning about an unused rule, or none past the first few; *count
 * counts them all. */
static void warn_rule(unsigned long *count, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void warn_rule(unsigned long *count, const char *fmt, ...)
{
    if ((*count)++ >= RULE_WARNINGS_SHOWN)
        return;
    va_list ap;
    va_start(ap, fmt);
    pk_vwarn(fmt, ap);
    va_end(ap);
}

/* The exclude warnings: see pk_rules_warn. */
static void warn_exclude(const pk_rules *r, unsigned long *count)
{
    for (size_t i = 0; i < r->exclude.n; i++) {
        unsigned seen = atomic_load_explicit(&r->exclude.seen[i], memory_order_relaxed);
        const char *g = r->exclude.v[i].pattern;
        size_t n = strlen(g);
        /* one that matched only what an earlier exclude took is harmless */
        if (seen & (SEEN_USED | SEEN_MATCHED))
            continue;
        if (seen & SEEN_NAMES_DIR) {
            if (n > 0 && g[n - 1] == '/')
                n--;
            warn_rule(count,
                      "%s: /exclude/%zu \"%s\" names a directory but skips nothing in "
                      "it; to exclude the directory and all it holds, write \"%.*s/**\"",
                      r->path, i, g, (int)n, g);
        } else if (g[0] == '/' && !names_hidden(g)) {
            warn_rule(count, "%s: /exclude/%zu \"%s\" matched no path the walk reached", r->path, i,
                      g);
        }
    }
}

void pk_rules_warn(const pk_rules *r, unsigned sections)
{
    if (!r)
        return;
    unsigned long count = 0;
    if (sections & PK_RULES_EXCLUDE)
        warn_exclude(r, &count);
    const struct {
        unsigned bit;
        const char *name;
        const rule_list *l;
        int first_wins; /* a rule behind earlier ones changes nothing: say so */
    } lists[] = {{PK_RULES_ENCODED, "encoded", &r->encoded, 0},
                 {PK_RULES_MIME, "mime", &r->mime, 1},
                 {PK_RULES_CACHE_CONTROL, "cache_control", &r->cc, 1},
                 {PK_RULES_HEADERS, "headers", &r->headers, 0}};
    for (size_t k = 0; k < sizeof lists / sizeof lists[0]; k++) {
        if (!(sections & lists[k].bit))
            continue;
        const rule_list *l = lists[k].l;
        for (size_t i = 0; i < l->n; i++) {
            unsigned seen = atomic_load_explicit(&l->seen[i], memory_order_relaxed);
            const char *g = l->v[i].pattern;
            if (seen & (lists[k].first_wins ? SEEN_USED : SEEN_USED | SEEN_MATCHED))
                continue;
            if (seen & SEEN_MATCHED)
                warn_rule(&count,
                          "%s: /%s/%zu \"%s\" is used for no file: every file it "
                          "matches is taken by an earlier rule (the first rule that matches wins)",
                          r->path, lists[k].name, i, g);
            else
                warn_rule(&count, "%s: /%s/%zu \"%s\" matched no file%s", r->path, lists[k].name, i,
                          g, lists[k].bit == PK_RULES_ENCODED ? anchored_hint(g) : "");
        }
    }
    if (count > RULE_WARNINGS_SHOWN)
        pk_warn("%s: and %lu more rules like those above", r->path, count - RULE_WARNINGS_SHOWN);
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
        mark(&r->headers, i, SEEN_USED);
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
    return pk_is_lower(c) || (c >= 'A' && c <= 'Z');
}

/* A run of four or more digits that starts with 19 or 20: a year, or a
 * date (2024, 20231201). A random hex string holds one about once in a
 * hundred, so refusing them costs little. */
static int has_year(const char *s, size_t n)
{
    for (size_t i = 0; i + 4 <= n; i++)
        if ((i == 0 || !pk_is_digit(s[i - 1])) && pk_is_digit(s[i + 2]) && pk_is_digit(s[i + 3]) &&
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
        if (pk_is_digit(c))
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
        if (pk_is_digit(c))
            digit = 1;
        else if (pk_is_lower(c))
            lower = 1;
        else if (c >= 'A' && c <= 'Z')
            upper = 1;
        else if (c != '_' && c != '-')
            return 0;
        if (i + 3 <= n && pk_is_digit(c) && pk_is_digit(s[i + 1]) && pk_is_digit(s[i + 2]))
            return 0;
        if (i + 3 <= n && is_letter(c) && pk_is_lower(s[i + 1]) && pk_is_lower(s[i + 2])) {
            if (++words > 1 || (i + 4 <= n && pk_is_lower(s[i + 3])))
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
