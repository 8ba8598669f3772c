/*
 * diff.c - servd-pack diff OLD NEW: the URLs a CDN must purge.
 *
 * A path is "changed" when anything a client could see differs: the type,
 * the set of encodings, any variant's ETag, or any byte of its 200 / 304
 * header blocks (so a new Cache-Control or Last-Modified counts too). With
 * --content, header blocks that differ only in their Last-Modified line do
 * not count (for packs not built with --base, where every mtime moved).
 *
 * Every path is printed as the URL that names it (sf_path_to_url: a space is
 * %20, '%' is %25, '?' is %3F), which is what a CDN keys its cache on. A
 * browser writes '[', ']' and '|' in a path as they are (WHATWG URL: they
 * are not in its path percent-encode set; '^' was until 2025, and older
 * browsers and raw HTTP tools still send it so), and a cache that keys on
 * the request target as received (Varnish's req.url, nginx's $request_uri)
 * holds that spelling: a URL with them is listed in both spellings, the
 * browser's as a derived line "via" the path; with '^' and one of the
 * others, in the browsers' of both times (three lines). A key never used costs a
 * purge nothing; a missed one leaves a stale page.
 *
 * Besides the paths of the packs, servd answers URLs derived from them, and
 * caches hold those too: "/d/" serves "/d/index.html" ("/" serves
 * "/index.html"), and "/d" is a 301 to "/d/" while "/d/index.html" exists.
 * So a change of an index also lists "/d/", and adding or removing one also
 * lists "/d", as does a change of the lines of its 200 block that the 301
 * carries (Cache-Control, Access-Control-*). Output, sorted by URL:
 *   "+ /added", "~ /changed", "- /removed"             paths of the packs
 *   "~ /docs/<TAB>via /docs/index.html"                 derived: the index URL
 *   "+ /docs<TAB>via /docs/index.html (301)"            derived: the redirect
 * or with --json {"added": [...], "changed": [...], "removed": [...] (paths),
 * "derived": [{"url", "via", "change", "status"}], "urls": [every URL to
 * purge, sorted, once], "not_found": null or "added", "changed", "removed"}.
 * Exit 0 either way; a failure to read a pack is 1.
 *
 * The status:404 entry answers every URL that is not a path: when it
 * differs (its bodies, type or header lines; or one pack has none, and
 * servd answers with its own), every 404 a cache stored is stale, under
 * URLs no list can name. It is said, not listed: "not_found" in the JSON,
 * and in text one line on stderr, "servd-pack: diff: status:404 CHANGE:
 * ...", since the text lines on stdout are URLs only.
 */
#include "commands.h"
#include "msg.h"

#include "digest.h"
#include "sf/path.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct item {
    char *path;
    size_t len;
    uint8_t fp[PK_DIGEST_LEN];      /* fingerprint of everything visible */
    uint8_t content[PK_DIGEST_LEN]; /* the same without Last-Modified lines */
    uint8_t redir[PK_DIGEST_LEN];   /* what a 301 to it carries (see fp_redirect) */
} item;

typedef struct list {
    item *v;
    size_t n, cap;
    int failed;
    int bad_keys;                  /* keys no request reaches (not sf_path_check's) */
    int has_404;                   /* the pack has a status:404 entry */
    uint8_t fp_404[PK_DIGEST_LEN]; /* its fingerprint (see fp_404) */
} list;

static void fp_view(pk_sha *s, sf_view v)
{
    uint64_t n = v.len;
    pk_sha_update(s, &n, sizeof n); /* length-prefixed: no ambiguity */
    pk_sha_update(s, v.ptr, v.len);
}

/* The start of the line after the one at q in a header block ending at end. */
static const char *line_after(const char *q, const char *end)
{
    const char *eol = memchr(q, '\n', (size_t)(end - q));
    return eol ? eol + 1 : end;
}

/* Whether the line [q, next) starts with prefix, in any case. */
#define LINE_IS(q, next, prefix)                                                                   \
    ((size_t)((next) - (q)) >= sizeof(prefix) - 1 &&                                               \
     strncasecmp(q, prefix, sizeof(prefix) - 1) == 0)

/* Adds a header block to the content fingerprint without its Last-Modified
 * line: what --content compares. */
static void fp_block_content(pk_sha *s, sf_view v)
{
    const char *end = v.ptr + v.len, *next;
    uint64_t n = 0;
    for (const char *q = v.ptr; q < end; q = next) {
        next = line_after(q, end);
        if (!LINE_IS(q, next, "Last-Modified:"))
            n += (uint64_t)(next - q);
    }
    pk_sha_update(s, &n, sizeof n); /* length-prefixed: no ambiguity */
    for (const char *q = v.ptr; q < end; q = next) {
        next = line_after(q, end);
        if (!LINE_IS(q, next, "Last-Modified:"))
            pk_sha_update(s, q, (size_t)(next - q));
    }
}

/* The lines of a page's 200 block that servd's 301 to it carries
 * (servd/redirect.c): Cache-Control and the Access-Control-* lines. */
static void fp_redirect(pk_sha *s, sf_view v)
{
    const char *end = v.ptr + v.len, *next;
    for (const char *q = v.ptr; q < end; q = next) {
        next = line_after(q, end);
        if (LINE_IS(q, next, "Cache-Control:") || LINE_IS(q, next, "Access-Control-"))
            fp_view(s, (sf_view){q, (size_t)(next - q)});
    }
}

/* Adds what a client sees of e to s, and the same without Last-Modified
 * lines to c (when not NULL). */
static void fp_entry(pk_sha *s, pk_sha *c, const sf_entry *e)
{
    /* only the flags a client sees: SF_ENTRY_NEGOTIABLE (Vary); a weak
     * date (SF_ENTRY_DATE_WEAK) changes no byte sent, and a re-pack that
     * only marks it is no change to purge */
    uint32_t head[3] = {(uint32_t)e->kind, e->flags & SF_ENTRY_NEGOTIABLE, e->nvariants};
    pk_sha_update(s, head, sizeof head);
    fp_view(s, e->mime);
    fp_view(s, e->target);
    if (c) {
        pk_sha_update(c, head, sizeof head);
        fp_view(c, e->mime);
        fp_view(c, e->target);
    }
    for (unsigned i = 0; i < e->nvariants; i++) {
        const sf_variant *v = &e->variants[i];
        uint32_t enc = (uint32_t)v->encoding;
        pk_sha_update(s, &enc, sizeof enc);
        fp_view(s, v->etag);
        fp_view(s, v->h200);
        fp_view(s, v->h304);
        if (c) {
            pk_sha_update(c, &enc, sizeof enc);
            fp_view(c, v->etag);
            fp_block_content(c, v->h200);
            fp_block_content(c, v->h304);
        }
    }
}

/* The fingerprint of the status:404 entry: what a client sees of it and,
 * since it has no ETag to stand for them, its bodies. It has no
 * Last-Modified line, so --content compares the same. @return 0, or
 * SF_ENOMEM. */
static int fp_404(const sf_entry *e, uint8_t fp[PK_DIGEST_LEN])
{
    pk_sha *s = pk_sha_new();
    if (!s)
        return SF_ENOMEM;
    fp_entry(s, NULL, e);
    for (unsigned i = 0; i < e->nvariants; i++)
        pk_sha_update(s, e->variants[i].body_key, SF_KEY_LEN);
    return pk_sha_final(s, fp) == 0 ? 0 : SF_ENOMEM;
}

static int collect(void *arg, sf_view path, const sf_entry *e)
{
    list *l = arg;
    /* A key that is no normalised path ("/../etc/passwd", "index.html")
     * is a damaged or hand-made pack, which servd refuses: no purge list
     * from it (verify names the keys). */
    if (sf_path_check(path.ptr, path.len) != 0) {
        l->bad_keys++;
        return SF_ECORRUPT;
    }
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 256;
        item *nv = realloc(l->v, cap * sizeof *nv);
        if (!nv)
            goto out_nomem;
        l->v = nv;
        l->cap = cap;
    }
    item *it = &l->v[l->n];
    pk_sha *s = pk_sha_new(), *c = pk_sha_new(), *r = pk_sha_new();
    if (!s || !c || !r || !(it->path = strndup(path.ptr, path.len))) {
        pk_sha_free(s);
        pk_sha_free(c);
        pk_sha_free(r);
        goto out_nomem;
    }
    it->len = path.len;
    fp_entry(s, c, e);
    if (e->nvariants > 0)
        fp_redirect(r, e->variants[0].h200);
    int rs = pk_sha_final(s, it->fp), rc = pk_sha_final(c, it->content);
    int rr = pk_sha_final(r, it->redir);
    if (rs != 0 || rc != 0 || rr != 0) {
        free(it->path);
        goto out_nomem;
    }
    l->n++;
    return 0;
out_nomem:
    l->failed = 1;
    return SF_ENOMEM;
}

static int load(const char *site, list *l)
{
    sf_pack *pack;
    sf_reader *r;
    if (pk_open_pack(site, &pack, &r) != 0)
        return -1;
    char err[512] = "";
    int rc = sf_foreach_path(r, collect, l, err, sizeof err);
    if (rc == 0) {
        /* the answer to every URL that is not a path (format.md §6.4) */
        sf_entry e;
        rc = sf_lookup_special(r, SF_SPECIAL_404, &e);
        if (rc == 0 && (rc = fp_404(&e, l->fp_404)) == 0)
            l->has_404 = 1;
        else if (rc == SF_ENOTFOUND)
            rc = 0;
        else
            snprintf(err, sizeof err, "%s: %s", SF_SPECIAL_404, sf_strerror(rc));
    }
    pk_close_pack(pack, r);
    if (l->bad_keys) {
        pk_err("%s: corrupt pack: a path key that is not a normalised URL path (servd-pack "
               "verify names it)",
               site);
        return -1;
    }
    if (rc != 0) {
        pk_err("%s: %s", site, err[0] ? err : sf_strerror(rc));
        return -1;
    }
    return 0;
}

static void free_list(list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i].path);
    free(l->v);
}

/* Byte order, as LMDB sorts keys: memcmp, then the shorter first. */
static int cmp_bytes(const char *a, size_t al, const char *b, size_t bl)
{
    size_t n = al < bl ? al : bl;
    int c = memcmp(a, b, n);
    return c ? c : (al > bl) - (al < bl);
}

/* One line of the output: a path of the packs or a URL derived from one. */
typedef struct change {
    char sign;       /* '+', '~' or '-' */
    char *url;       /* owned: the URL, percent-encoded (sf_path_to_url) */
    size_t len;      /* of url */
    char *path;      /* owned: what the URL names, as a path (decoded) */
    const char *via; /* NULL, or the index path this URL is derived from */
    int status;      /* derived URLs: 200 (the index) or 301 (the redirect) */
    int browser;     /* url is the browser's spelling of another line's URL */
} change;

typedef struct changes {
    change *v;
    size_t n, cap;
} changes;

/* The URL that names a path, with the bytes in raw left as they are,
 * NUL-terminated and owned; NULL when out of memory. */
static char *url_of(const char *path, size_t len, const char *raw, size_t *urllen)
{
    size_t cap = 3 * len + 1;
    char *u = malloc(cap);
    if (!u)
        return NULL;
    size_t n = sf_path_to_url_keeping(path, len, raw, u, cap);
    u[n] = '\0';
    if (urllen)
        *urllen = n;
    return u;
}

/* The characters browsers leave raw in a path that sf_path_to_url escapes
 * (see the top): older browsers' and raw tools', and today's. */
static const char browser_raw[] = "[]^|", browser_raw_now[] = "[]|";

static int push_one(changes *c, change ch)
{
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 64;
        change *nv = realloc(c->v, cap * sizeof *nv);
        if (!nv)
            return -1;
        c->v = nv;
        c->cap = cap;
    }
    c->v[c->n++] = ch;
    return 0;
}

/* Adds the browser's spelling of path[0, len) with the characters raw
 * kept as they are, when that differs from its URL (ulen bytes long);
 * via: the index it derives from, or the path itself (p). */
static int push_browser(changes *c, char sign, const char *path, size_t len, const char *raw,
                        size_t ulen, const char *via, int status)
{
    size_t blen;
    char *b = url_of(path, len, raw, &blen);
    if (b && blen == ulen) { /* each byte kept raw saves two: none here */
        free(b);
        return 0;
    }
    char *bp = strndup(path, len);
    if (!b || !bp || push_one(c, (change){sign, b, blen, bp, via, status ? status : 200, 1}) != 0) {
        free(b);
        free(bp);
        return -1;
    }
    return 0;
}

/* Adds the URL of path[0, len), and its browsers' spellings when they
 * differ; via names the index path it derives from. */
static int push(changes *c, char sign, const char *path, size_t len, const char *via, int status)
{
    size_t ulen;
    char *u = url_of(path, len, "", &ulen), *p = strndup(path, len);
    if (!u || !p || push_one(c, (change){sign, u, ulen, p, via, status, 0}) != 0) {
        free(u);
        free(p);
        return -1;
    }
    /* via: p is owned by the line above and freed with it, after these are
     * printed; today's browsers escape '^' (a third line only with '^' and
     * another character kept raw) */
    if (push_browser(c, sign, path, len, browser_raw, ulen, via ? via : p, status) != 0)
        return -1;
    int other = 0;
    for (const char *r = browser_raw_now; *r && !other; r++)
        other = memchr(path, *r, len) != NULL;
    if (other && memchr(path, '^', len))
        return push_browser(c, sign, path, len, browser_raw_now, ulen, via ? via : p, status);
    return 0;
}

/* Adds a changed path and the URLs servd derives from it (see the top);
 * redirect: a changed index's 301 changed too. */
static int add_change(changes *c, char sign, const item *it, int redirect)
{
    static const char index[] = "/index.html";
    const size_t il = sizeof index - 1;
    if (push(c, sign, it->path, it->len, NULL, 0) != 0)
        return -1;
    if (it->len < il || memcmp(it->path + it->len - il, index, il) != 0)
        return 0;
    size_t dir = it->len - il + 1; /* "/docs/" or "/" */
    if (push(c, sign, it->path, dir, it->path, 200) != 0)
        return -1;
    if ((sign != '~' || redirect) && dir > 1 &&
        push(c, sign, it->path, dir - 1, it->path, 301) != 0)
        return -1;
    return 0;
}

static int cmp_change(const void *a, const void *b)
{
    const change *x = a, *y = b;
    int c = cmp_bytes(x->url, x->len, y->url, y->len);
    if (c)
        return c;
    if ((x->via != NULL) != (y->via != NULL)) /* a path of the pack first */
        return x->via ? 1 : -1;
    return (x->sign > y->sign) - (x->sign < y->sign);
}

static const char *change_name(char sign)
{
    return sign == '+' ? "added" : sign == '-' ? "removed" : "changed";
}

static void free_changes(changes *c)
{
    for (size_t i = 0; i < c->n; i++) {
        free(c->v[i].url);
        free(c->v[i].path);
    }
    free(c->v);
}

static int print_text(const changes *c)
{
    for (size_t i = 0; i < c->n; i++) {
        const change *ch = &c->v[i];
        if (!ch->via)
            printf("%c %s\n", ch->sign, ch->url);
        else {
            printf("%c %s\tvia ", ch->sign, ch->url);
            pk_esc_fputs(ch->via, stdout); /* a key: escaped, as in ls */
            printf("%s\n", ch->status == 301
                               ? (ch->browser ? " (301, as browsers write it)" : " (301)")
                           : ch->browser ? " (as browsers write it)"
                                         : "");
        }
    }
    return 0;
}

/* not_found: NULL, or how the status:404 entry changed (see pk_cmd_diff). */
static int print_json(const changes *c, const char *not_found)
{
    json_t *doc = json_object(), *lists[3] = {json_array(), json_array(), json_array()};
    json_t *derived = json_array(), *urls = json_array();
    int rc = -1;
    if (!doc || !lists[0] || !lists[1] || !lists[2] || !derived || !urls)
        goto out_free_json;
    for (size_t i = 0; i < c->n; i++) {
        const change *ch = &c->v[i];
        if (i == 0 || cmp_bytes(ch->url, ch->len, c->v[i - 1].url, c->v[i - 1].len) != 0)
            if (json_array_append_new(urls, json_stringn_nocheck(ch->url, ch->len)) != 0)
                goto out_free_json;
        if (!ch->via) {
            json_t *l = lists[ch->sign == '+' ? 0 : ch->sign == '~' ? 1 : 2];
            if (json_array_append_new(l, json_string_nocheck(ch->path)) != 0)
                goto out_free_json;
        } else {
            json_t *d = json_pack("{s:s%, s:s, s:s, s:i}", "url", ch->url, ch->len, "via", ch->via,
                                  "change", change_name(ch->sign), "status", ch->status);
            if (d && ch->browser && json_object_set_new(d, "browser", json_true()) != 0) {
                json_decref(d);
                d = NULL;
            }
            if (json_array_append_new(derived, d) != 0)
                goto out_free_json;
        }
    }
    if (json_object_set(doc, "added", lists[0]) != 0 ||
        json_object_set(doc, "changed", lists[1]) != 0 ||
        json_object_set(doc, "removed", lists[2]) != 0 ||
        json_object_set(doc, "derived", derived) != 0 || json_object_set(doc, "urls", urls) != 0 ||
        json_object_set_new(doc, "not_found", not_found ? json_string(not_found) : json_null()) !=
            0)
        goto out_free_json;
    if (json_dumpf(doc, stdout, JSON_INDENT(2) | JSON_ENSURE_ASCII | JSON_PRESERVE_ORDER) != 0)
        goto out_free_json;
    putchar('\n');
    rc = 0;
out_free_json:
    json_decref(doc);
    for (int i = 0; i < 3; i++)
        json_decref(lists[i]);
    json_decref(derived);
    json_decref(urls);
    return rc;
}

int pk_cmd_diff(const char *old_site, const char *new_site, int json, int content)
{
    list a = {0}, b = {0};
    changes c = {0};
    int status = PK_EXIT_FAIL;
    if (load(old_site, &a) != 0 || load(new_site, &b) != 0)
        goto out_free_lists;
    size_t i = 0, j = 0;
    int rc = 0;
    while ((i < a.n || j < b.n) && rc == 0) {
        int d = i == a.n   ? 1
                : j == b.n ? -1
                           : cmp_bytes(a.v[i].path, a.v[i].len, b.v[j].path, b.v[j].len);
        if (d < 0) {
            rc = add_change(&c, '-', &a.v[i++], 1);
        } else if (d > 0) {
            rc = add_change(&c, '+', &b.v[j++], 1);
        } else {
            const uint8_t *x = content ? a.v[i].content : a.v[i].fp;
            const uint8_t *y = content ? b.v[j].content : b.v[j].fp;
            if (memcmp(x, y, PK_DIGEST_LEN) != 0)
                rc = add_change(&c, '~', &b.v[j],
                                memcmp(a.v[i].redir, b.v[j].redir, PK_DIGEST_LEN) != 0);
            i++;
            j++;
        }
    }
    if (rc != 0) {
        pk_err("out of memory");
        goto out_free_lists;
    }
    if (c.n)
        qsort(c.v, c.n, sizeof *c.v, cmp_change);
    /* The 404 response (status:404, or servd's own without it) answers
     * every URL that is not a path: no list can name the URLs a cache
     * holds it under, so it is said, not listed. */
    const char *not_found = a.has_404 != b.has_404 ? (b.has_404 ? "added" : "removed")
                            : a.has_404 && memcmp(a.fp_404, b.fp_404, PK_DIGEST_LEN) != 0
                                ? "changed"
                                : NULL;
    errno = 0;
    if ((json ? print_json(&c, not_found) : print_text(&c)) != 0 || fflush(stdout) != 0 ||
        ferror(stdout)) {
        pk_err("writing the diff: %s", errno ? strerror(errno) : "failed");
        goto out_free_lists;
    }
    /* the text lines stay URLs only (cut -c3- makes the purge list of
     * them): a script reads this line on stderr, or "not_found" in JSON */
    if (not_found && !json)
        pk_err("diff: status:404 %s: the 404 response, sent for every URL that is not a path of "
               "the new pack, differs; caches that store 404 responses hold the old one under URLs "
               "no purge list can name (purge them by tag, or the whole site)",
               not_found);
    status = PK_EXIT_OK;
out_free_lists:
    free_changes(&c);
    free_list(&a);
    free_list(&b);
    return status;
}
