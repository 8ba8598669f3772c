/*
 * walk.c - the deterministic walk of a web root (rules in walk.h).
 */
#include "walk.h"

#include "mime.h"
#include "msg.h"
#include "sf/path.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utf8proc.h>

/* Files over PK_FILE_MAX named in the message; the rest are counted. */
#define OVERSIZE_NAMES 3

/* Problems of the tree (a broken link, a FIFO, a bad name, ...) printed in
 * full when there are several; the rest are counted. */
#define PROBLEMS_SHOWN 10

typedef struct walk {
    const pk_rules *rules;
    pk_site *site;
    char *err;
    size_t errlen;
    size_t rootlen;
    struct {
        dev_t dev;
        ino_t ino;
    } stack[PK_WALK_MAX_DEPTH + 1]; /* directories being walked: loop detection */
    /* Files over PK_FILE_MAX: all are counted before the walk fails, so that
     * one run names the problem whole (the first few by name). */
    uint64_t oversize;
    uint64_t linked; /* entries walked whose real location is elsewhere */
    /* How many paths reached each directory: an open-addressing table of
     * (dev, ino), sized a power of two, at most half full. */
    struct dir_count {
        dev_t dev;
        ino_t ino;
        unsigned n; /* 0: an empty slot */
    } * dirs;
    size_t ndirs, dircap;
    /* Problems of entries: the walk goes on past them, so that one run
     * names every one (the first PROBLEMS_SHOWN in full), then fails. */
    uint64_t problems;
    char *problem[PROBLEMS_SHOWN];
    char oversize_names[OVERSIZE_NAMES][PATH_MAX];
    long long oversize_first;
    /* Files whose mode lets no one read them, and directories no one may
     * read or search (chmod 000), which only root reads: counted, the first
     * by name (warn_no_read). */
    uint64_t no_read;
    char no_read_first[PATH_MAX];
} walk;

/* Counts one more path to the directory (dev, ino). @return how many have
 * reached it now, or 0 when out of memory. */
static unsigned dir_reached(walk *w, dev_t dev, ino_t ino)
{
    if (2 * (w->ndirs + 1) > w->dircap) {
        size_t cap = w->dircap ? 2 * w->dircap : 1024;
        struct dir_count *t = calloc(cap, sizeof *t);
        if (!t)
            return 0;
        for (size_t i = 0; i < w->dircap; i++) {
            if (!w->dirs[i].n)
                continue;
            size_t h = ((uint64_t)w->dirs[i].ino * 0x9e3779b97f4a7c15u) & (cap - 1);
            while (t[h].n)
                h = (h + 1) & (cap - 1);
            t[h] = w->dirs[i];
        }
        free(w->dirs);
        w->dirs = t;
        w->dircap = cap;
    }
    size_t h = ((uint64_t)ino * 0x9e3779b97f4a7c15u) & (w->dircap - 1);
    while (w->dirs[h].n && !(w->dirs[h].dev == dev && w->dirs[h].ino == ino))
        h = (h + 1) & (w->dircap - 1);
    if (!w->dirs[h].n) {
        w->dirs[h] = (struct dir_count){dev, ino, 0};
        w->ndirs++;
    }
    return ++w->dirs[h].n;
}

/* Notes the problem w->err describes and goes on: 0, or -1 (out of memory). */
static int problem(walk *w)
{
    if (w->problems < PROBLEMS_SHOWN && !(w->problem[w->problems] = strdup(w->err))) {
        snprintf(w->err, w->errlen, "out of memory");
        return -1;
    }
    w->problems++;
    return 0;
}

void pk_site_free(pk_site *s)
{
    for (size_t i = 0; i < s->ndot_names; i++)
        free(s->dot_names[i]);
    for (size_t i = 0; i < s->n; i++) {
        pk_file *f = &s->files[i];
        free(f->key);
        free(f->src);
        free(f->mime);
        free(f->extra);
        for (int e = 0; e < SF_ENC_COUNT; e++)
            if (f->var[e].owned)
                free((void *)f->var[e].bytes);
    }
    free(s->files);
    free(s->root);
    memset(s, 0, sizeof *s);
}

unsigned pk_file_nvariants(const pk_file *f)
{
    unsigned n = 0;
    for (int e = 0; e < SF_ENC_COUNT; e++)
        n += f->var[e].present != 0;
    return n;
}

const char *pk_key_problem(const char *name, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)name[i];
        if (c == '\\')
            return "contains a backslash, which cannot be part of a URL path";
        /* C0 and DEL, and the C1 controls U+0080-U+009F (UTF-8 C2 80-9F:
         * NEL is a line break to some terminals and log readers) */
        if (c < 0x20 || c == 0x7f ||
            (c == 0xc2 && i + 1 < len && (unsigned char)name[i + 1] >= 0x80 &&
             (unsigned char)name[i + 1] <= 0x9f))
            return "contains a control character, which cannot be part of a URL path";
    }
    if (!pk_utf8_valid(name, len))
        return "is not valid UTF-8, so it has no URL path";
    return NULL;
}

const char *pk_kind_name(mode_t m)
{
    return S_ISFIFO(m)   ? "a FIFO"
           : S_ISSOCK(m) ? "a socket"
           : S_ISCHR(m)  ? "a character device"
           : S_ISBLK(m)  ? "a block device"
                         : "not a regular file";
}

static int add_file(walk *w, const char *src, const char *key, const struct stat *st)
{
    pk_site *s = w->site;
    if ((uint64_t)st->st_size > PK_FILE_MAX) {
        if (w->oversize < OVERSIZE_NAMES)
            snprintf(w->oversize_names[w->oversize], PATH_MAX, "%s", src);
        if (w->oversize++ == 0)
            w->oversize_first = (long long)st->st_size;
        return 0;
    }
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 256;
        pk_file *f = realloc(s->files, cap * sizeof *f);
        if (!f)
            goto out_nomem;
        s->files = f;
        s->cap = cap;
    }
    pk_file *f = &s->files[s->n];
    memset(f, 0, sizeof *f);
    f->key = strdup(key);
    f->src = strdup(src);
    if (!f->key || !f->src) {
        free(f->key);
        free(f->src);
        goto out_nomem;
    }
    f->key_len = strlen(key);
    f->size = (uint64_t)st->st_size;
    f->mtime = (int64_t)st->st_mtim.tv_sec;
    f->dev = (uint64_t)st->st_dev;
    f->ino = (uint64_t)st->st_ino;
    s->n++;
    return 0;
out_nomem:
    snprintf(w->err, w->errlen, "%s: out of memory", src);
    return -1;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Reads the names of a directory, sorted (so errors come in a stable order).
 * @return 0; -1, a problem of the directory (in w->err); -2, out of memory. */
static int read_names(walk *w, const char *dir, char ***out, size_t *nout)
{
    int rc = -1;
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(w->err, w->errlen, "%s: cannot open directory: %s", dir, strerror(errno));
        return -1;
    }
    char **v = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    errno = 0;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 32;
            char **nv = realloc(v, cap * sizeof *nv);
            if (!nv)
                goto out_nomem;
            v = nv;
        }
        if (!(v[n] = strdup(de->d_name)))
            goto out_nomem;
        n++;
        errno = 0;
    }
    if (errno) {
        snprintf(w->err, w->errlen, "%s: cannot read directory: %s", dir, strerror(errno));
        goto out_free;
    }
    closedir(d);
    if (n)
        qsort(v, n, sizeof *v, cmp_str);
    *out = v;
    *nout = n;
    return 0;
out_nomem:
    snprintf(w->err, w->errlen, "%s: out of memory", dir);
    rc = -2;
out_free:
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
    closedir(d);
    return rc;
}

static void free_names(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

/* 1 if the resolved path lies inside the root. */
static int inside_root(const walk *w, const char *real)
{
    const char *root = w->site->root;
    if (w->rootlen == 1) /* root is "/" */
        return 1;
    return strncmp(real, root, w->rootlen) == 0 &&
           (real[w->rootlen] == '\0' || real[w->rootlen] == '/');
}

/* The key the resolved path real (inside the root) would have: "" for the
 * root itself, else "/" + its path relative to the root. */
static const char *real_key(const walk *w, const char *real)
{
    return w->rootlen == 1 ? (real[1] ? real : "") : real + w->rootlen;
}

/* 1 if a key has a segment the walk never packs: a name starting with '.',
 * except a top-level ".well-known". */
static int hidden_key(const char *key)
{
    for (const char *p = key; (p = strchr(p, '/')) != NULL;) {
        p++;
        if (*p == '.' && !(p == key + 1 && strncmp(p, ".well-known", 11) == 0 &&
                           (p[11] == '/' || p[11] == '\0')))
            return 1;
    }
    return 0;
}

int pk_walk_skips(const pk_rules *rules, const char *key)
{
    return hidden_key(key) || pk_rules_excluded(rules, key, strlen(key));
}

/* 1 if what lives at realkey would be skipped by the rules at that place. */
static int real_excluded(const walk *w, const char *realkey, int is_dir)
{
    size_t n = strlen(realkey);
    return is_dir ? pk_rules_excluded_dir(w->rules, realkey, n)
                  : pk_rules_excluded(w->rules, realkey, n);
}

static int walk_dir(walk *w, const char *dir, const char *dirkey, const char *dirreal, int depth);

/* 1 if the entry at src (lstat in *st) is excluded by the rules: a file,
 * special file or symbolic link by its own key; a directory (or a link to
 * one) when an exclude covers every path under it. Decided before any other
 * check, so that an exclude can rescue a tree with a bad name, a broken link
 * or a loop in it (walk.h). */
static int entry_excluded(const walk *w, const char *src, const struct stat *st, const char *key,
                          size_t klen)
{
    if (!w->rules)
        return 0;
    struct stat target;
    int is_dir = S_ISDIR(st->st_mode);
    if (S_ISLNK(st->st_mode)) {
        if (pk_rules_excluded(w->rules, key, klen))
            return 1;
        is_dir = stat(src, &target) == 0 && S_ISDIR(target.st_mode);
    }
    return is_dir ? pk_rules_excluded_dir(w->rules, key, klen)
                  : pk_rules_excluded(w->rules, key, klen);
}

void pk_names_list(char *out, size_t cap, const char *const *names, size_t n, uint64_t total)
{
    size_t o = 0;
    out[0] = '\0';
    if (n == 0) /* none kept (out of memory): the count alone says it */
        return;
    for (size_t i = 0; i < n && o < cap; i++) {
        size_t len = strlen(names[i]), show = len;
        if (len > PK_NAME_SHOWN) /* cut at a character's start */
            for (show = PK_NAME_SHOWN; show > 0 && ((unsigned char)names[i][show] & 0xC0) == 0x80;)
                show--;
        int k = snprintf(out + o, cap - o, "%s%.*s%s", i ? ", " : "", (int)show, names[i],
                         show < len ? "..." : "");
        o += k > 0 ? (size_t)k : 0;
    }
    if (total > n && o < cap)
        snprintf(out + o, cap - o, " and %llu more", (unsigned long long)(total - n));
}

/* Keeps dirkey/name, a skipped dotfile, among the PK_DOT_NAMES smallest
 * for the summary. Out of memory, a name is left out: the count stays. */
static void note_dot(pk_site *s, const char *dirkey, const char *name)
{
    char key[PATH_MAX];
    int n = snprintf(key, sizeof key, "%s/%s", dirkey, name);
    if (n < 0 || (size_t)n >= sizeof key)
        return;
    size_t i = s->ndot_names;
    if (i == PK_DOT_NAMES && strcmp(key, s->dot_names[i - 1]) >= 0)
        return;
    char *copy = strdup(key);
    if (!copy)
        return;
    if (i == PK_DOT_NAMES) {
        free(s->dot_names[--i]);
        s->ndot_names--;
    }
    for (; i > 0 && strcmp(copy, s->dot_names[i - 1]) < 0; i--)
        s->dot_names[i] = s->dot_names[i - 1];
    s->dot_names[i] = copy;
    s->ndot_names++;
}

/* Handles one directory entry: dir/name with key dirkey/name. dirreal is
 * the key of the directory's real location (differs from dirkey below a
 * symbolic link to a directory). */
static int walk_entry(walk *w, const char *dir, const char *dirkey, const char *dirreal,
                      const char *name, int depth)
{
    char src[PATH_MAX], key[PATH_MAX], realkey[PATH_MAX];
    if (name[0] == '.' && !(depth == 0 && strcmp(name, ".well-known") == 0)) {
        w->site->skipped_dot++;
        note_dot(w->site, dirkey, name);
        return 0;
    }
    int sn = snprintf(src, sizeof src, "%s/%s", dir, name);
    if (sn < 0 || (size_t)sn >= sizeof src) {
        snprintf(w->err, w->errlen, "%s/%s: path too long", dir, name);
        return problem(w);
    }
    int kn = snprintf(key, sizeof key, "%s/%s", dirkey, name);
    if (kn < 0 || (size_t)kn >= sizeof key) {
        snprintf(w->err, w->errlen, "%s: path too long", src);
        return problem(w);
    }
    size_t klen = (size_t)kn;
    int rn = snprintf(realkey, sizeof realkey, "%s/%s", dirreal, name);
    if (rn < 0 || (size_t)rn >= sizeof realkey) {
        snprintf(w->err, w->errlen, "%s: path too long", src);
        return problem(w);
    }
    struct stat st;
    if (lstat(src, &st) != 0) {
        snprintf(w->err, w->errlen, "%s: cannot look it up: %s", src, strerror(errno));
        return problem(w);
    }
    if (entry_excluded(w, src, &st, key, klen)) {
        w->site->skipped_excluded++;
        return 0;
    }

    const char *why = pk_key_problem(name, strlen(name));
    if (why) {
        snprintf(w->err, w->errlen, "%s: the name %s", src, why);
        return problem(w);
    }
    if (klen > SF_KEY_MAX) {
        snprintf(w->err, w->errlen, "%s: its URL path is longer than %d bytes", src, SF_KEY_MAX);
        return problem(w);
    }
    if (sf_path_check(key, klen) != 0) {
        snprintf(w->err, w->errlen, "%s: the name cannot be a URL path (%s)", src, key);
        return problem(w);
    }
    if (S_ISLNK(st.st_mode)) {
        char real[PATH_MAX];
        if (!realpath(src, real)) {
            snprintf(w->err, w->errlen, "%s: broken symbolic link (%s)", src, strerror(errno));
            return problem(w);
        }
        if (!inside_root(w, real)) {
            snprintf(w->err, w->errlen,
                     "%s: symbolic link leads outside the root (to %s); only links inside the "
                     "root are followed (pack a copy of the tree with its links resolved, as "
                     "cp -rL or rsync -L make, or exclude it with a rules \"exclude\" glob)",
                     src, real);
            return problem(w);
        }
        if (stat(real, &st) != 0) {
            snprintf(w->err, w->errlen, "%s: cannot look up where the link leads (%s): %s", src,
                     real, strerror(errno));
            return problem(w);
        }
        /* A link must not publish what the walk would skip where it really
         * lives: "ln -s .env env.txt" or a link into an excluded directory. */
        snprintf(realkey, sizeof realkey, "%s", real_key(w, real));
        const char *skipped = hidden_key(realkey) ? "a hidden path (a name starting with '.')"
                              : real_excluded(w, realkey, S_ISDIR(st.st_mode))
                                  ? "excluded by the rules"
                                  : NULL;
        if (skipped) {
            snprintf(w->err, w->errlen,
                     "%s: symbolic link leads to %s, which is %s and never packed; exclude the "
                     "link with a rules \"exclude\" glob, or change the rule",
                     src, realkey, skipped);
            return problem(w);
        }
    } else if (strcmp(realkey, key) != 0 && real_excluded(w, realkey, S_ISDIR(st.st_mode))) {
        /* Below a linked directory: the rules see the real location too. */
        snprintf(w->err, w->errlen,
                 "%s: reached through a symbolic link, this is %s, which is excluded by the "
                 "rules and never packed; exclude %s too, or change the rule",
                 src, realkey, key);
        return problem(w);
    }
    if (strcmp(realkey, key) != 0 && ++w->linked > PK_WALK_MAX_LINKED) {
        snprintf(w->err, w->errlen,
                 "%s: more than %u paths are reached through symbolic links (do links to "
                 "directories lead to each other? each such link multiplies the paths below "
                 "it); exclude some with rules \"exclude\" globs",
                 src, PK_WALK_MAX_LINKED);
        return -1; /* not a problem of one entry: the walk itself must stop */
    }
    if ((st.st_mode & (S_ISDIR(st.st_mode) ? 0555 : 0444)) == 0 && w->no_read++ == 0)
        snprintf(w->no_read_first, sizeof w->no_read_first, "%s", src);
    if (S_ISDIR(st.st_mode)) {
        for (int i = 0; i <= depth; i++) {
            if (w->stack[i].dev == st.st_dev && w->stack[i].ino == st.st_ino) {
                snprintf(w->err, w->errlen,
                         "%s: directory loop (a symbolic link leads back to a parent)", src);
                return problem(w);
            }
        }
        if (depth + 1 >= PK_WALK_MAX_DEPTH) {
            snprintf(w->err, w->errlen,
                     "%s: a directory %d levels below the root (the limit is %d levels)", src,
                     depth + 1, PK_WALK_MAX_DEPTH - 1);
            return problem(w);
        }
        unsigned paths = dir_reached(w, st.st_dev, st.st_ino);
        if (paths == 0) {
            snprintf(w->err, w->errlen, "%s: out of memory", src);
            return -1;
        }
        if (paths > PK_WALK_MAX_ALIASES) {
            snprintf(w->err, w->errlen,
                     "%s: more than %u paths reach this directory (%s) through symbolic links "
                     "(do links to directories lead to each other? each such link multiplies "
                     "the paths below it); exclude some with rules \"exclude\" globs",
                     src, PK_WALK_MAX_ALIASES, realkey[0] ? realkey : "/");
            return -1; /* not a problem of one entry: the walk itself must stop */
        }
        w->stack[depth + 1].dev = st.st_dev;
        w->stack[depth + 1].ino = st.st_ino;
        return walk_dir(w, src, key, realkey, depth + 1);
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(w->err, w->errlen, "%s: is %s; only regular files can be packed", src,
                 pk_kind_name(st.st_mode));
        return problem(w);
    }
    /* The read would fail later and stop there; here it is one problem
     * among the others of the tree, so that one run names them all. */
    if (faccessat(AT_FDCWD, src, R_OK, AT_EACCESS) != 0) {
        snprintf(w->err, w->errlen, "%s: cannot open: %s", src, strerror(errno));
        return problem(w);
    }
    return add_file(w, src, key, &st);
}

static int walk_dir(walk *w, const char *dir, const char *dirkey, const char *dirreal, int depth)
{
    char **names;
    size_t n;
    int rc = read_names(w, *dir ? dir : "/", &names, &n);
    if (rc != 0)
        return rc == -1 ? problem(w) : -1;
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = walk_entry(w, dir, dirkey, dirreal, names[i], depth);
    free_names(names, n);
    return rc;
}

static int cmp_file(const void *a, const void *b)
{
    return strcmp(((const pk_file *)a)->key, ((const pk_file *)b)->key);
}

const pk_file *pk_site_find(const pk_site *site, const char *key)
{
    pk_file probe = {.key = (char *)key};
    return bsearch(&probe, site->files, site->n, sizeof *site->files, cmp_file);
}

/* How many files of the site pred holds for; *first the first of them. */
static size_t count_files(const pk_site *site, int (*pred)(const pk_site *, const pk_file *),
                          const pk_file **first)
{
    size_t n = 0;
    *first = NULL;
    for (size_t i = 0; i < site->n; i++)
        if (pred(site, &site->files[i]) && n++ == 0)
            *first = &site->files[i];
    return n;
}

/* Whether f is an index page servd never answers with (index.htm,
 * Index.html) in a directory without an index.html. */
static int stray_index(const pk_site *site, const pk_file *f)
{
    const char *base = strrchr(f->key, '/') + 1;
    int index_page = strcasecmp(base, "index.htm") == 0 || strcasecmp(base, "index.html") == 0;
    if (!index_page || strcmp(base, "index.html") == 0)
        return 0; /* not an index page, or the one servd answers with */
    char html[PATH_MAX];
    snprintf(html, sizeof html, "%.*sindex.html", (int)(base - f->key), f->key);
    return pk_site_find(site, html) == NULL;
}

/* A site moved from a server that also took index.htm for a directory, or
 * from a file system that ignores letter case (IIS, Windows: Index.html),
 * loses that directory's URL here without a word: servd answers "/dir/"
 * with index.html only. Says so (the files are packed all the same, under
 * their own paths). site->files is sorted. */
static void warn_index_htm(const pk_site *site)
{
    const pk_file *first;
    size_t n = count_files(site, stray_index, &first);
    if (n == 1) {
        const char *base = strrchr(first->key, '/') + 1;
        pk_warn("%s: servd answers %.*s with the directory's index.html, never an %s (rename "
                "it to index.html)",
                first->src, (int)(base - first->key), first->key, base);
    } else if (n > 1) {
        pk_warn("%zu files name an index page otherwise than index.html (index.htm, "
                "Index.html) in a directory without one, the first %s: servd answers a "
                "directory with its index.html only (rename them)",
                n, first->src);
    }
}

/* Whether key, UTF-8, is not in Unicode's composed form (NFC): an accent
 * written apart from a letter it has a composed form with, as in NFD. A
 * mark that composes with nothing (Yoruba's U+1EB9 U+0301, "n" U+0308) is
 * NFC as it is. ASCII is always NFC; utf8proc decides the rest. */
static int not_nfc(const char *key, size_t len)
{
    size_t i = 0;
    while (i < len && (unsigned char)key[i] < 0x80)
        i++;
    if (i == len)
        return 0;
    utf8proc_uint8_t *nfc = NULL;
    utf8proc_ssize_t n = utf8proc_map((const utf8proc_uint8_t *)key, (utf8proc_ssize_t)len, &nfc,
                                      UTF8PROC_STABLE | UTF8PROC_COMPOSE);
    int differs = n >= 0 && ((size_t)n != len || memcmp(nfc, key, len) != 0);
    free(nfc);
    return differs;
}

static int decomposed(const pk_site *site, const pk_file *f)
{
    (void)site;
    return not_nfc(f->key, f->key_len);
}

/* File names copied from macOS (HFS+), or unpacked by some zip tools, are
 * decomposed (NFD: "e" then U+0301), while editors, browsers and link
 * checkers write the composed form (NFC: U+00E9). servd matches paths byte
 * for byte, as every origin does, so such a page is a 404 to every link
 * typed or generated in the usual form. Says so once, with the first such
 * path; the files are packed all the same. */
static void warn_decomposed(const pk_site *site)
{
    const pk_file *first;
    size_t n = count_files(site, decomposed, &first);
    if (n == 1)
        pk_warn("%s is in the decomposed form (NFD, as macOS writes names): a link in the "
                "usual composed form (NFC) does not reach it; rename it to NFC (convmv -f utf8 "
                "-t utf8 --nfc -r --notest DIR)",
                first->src);
    else if (n > 1)
        pk_warn("%zu paths are in the decomposed form (NFD, as macOS writes names), the first "
                "%s: links in the usual composed form (NFC) do not reach them; rename them to "
                "NFC (convmv -f utf8 -t utf8 --nfc -r --notest DIR)",
                n, first->src);
}

static int link_breaking(const pk_site *site, const pk_file *f)
{
    (void)site;
    return strcspn(f->key, "?#%") < f->key_len;
}

/* A '?' or '#' in a name ends the path of a link that writes the name as it
 * is (the rest is its query or fragment), and a '%' starts an escape
 * (WHATWG URL leaves a stray one, which servd then refuses with 400): a
 * "100%.html", a page saved as "page.php?id=3". Such a file is reached only
 * by a link that escapes them (%3F, %23, %25), as wget -k writes a
 * mirror's. Says so once, with the first such path and the URL that
 * reaches it, as a note --strict does not count (a mirror's links are
 * right); the files are packed all the same. */
static void warn_link_breaking(const pk_site *site)
{
    const pk_file *first;
    size_t n = count_files(site, link_breaking, &first);
    if (n == 0)
        return;
    char url[3 * SF_KEY_MAX];
    size_t ulen = sf_path_to_url(first->key, first->key_len, url, sizeof url);
    int shown = (int)(ulen < sizeof url ? ulen : sizeof url);
    if (n == 1)
        pk_err("warning: %s has a '?', '#' or '%%' in its path: only a link that escapes them "
               "reaches it, %.*s (one that writes it as it is asks for another path, or is "
               "refused); rename it unless the site's links escape them",
               first->src, shown, url);
    else
        pk_err("warning: %zu paths have a '?', '#' or '%%' in them, the first %s: only a link "
               "that escapes them reaches one, %.*s (one that writes it as it is asks for "
               "another path, or is refused); rename them unless the site's links escape them",
               n, first->src, shown, url);
}

/* A file or a directory whose mode lets no one read it (chmod 000) was
 * most likely meant to stay private, and a build run as any user but root
 * fails on it; root reads it all the same, so a build in a container would
 * publish it without a word. Says so; packed all the same. */
static void warn_no_read(const walk *w)
{
    if (w->no_read == 1)
        pk_warn("%s: its mode lets no one read it, yet it is packed (a directory: what it "
                "holds): servd-pack runs as root, which reads it anyway, where a build as another "
                "user fails on it (make it readable, or exclude it)",
                w->no_read_first);
    else if (w->no_read > 1)
        pk_warn("%llu files and directories have modes that let no one read them, the first %s; "
                "they are packed (a directory: what it holds): servd-pack runs as root, which "
                "reads them anyway, where a build as another user fails on them (make them "
                "readable, or exclude them)",
                (unsigned long long)w->no_read, w->no_read_first);
}

/* A site moved from Netlify or Cloudflare Pages may still hold their
 * configuration at its root: _headers (which can carry Basic-Auth
 * credentials) and _redirects, and Cloudflare Pages' _worker.js (server
 * code, perhaps with secrets; a file or a directory) and _routes.json. Those hosts read them and
 * never serve them; servd-pack reads none, so it would publish them as
 * pages. Says so (they are packed all the same: files servd-pack is given
 * are packed). */
static void warn_host_config(const pk_site *site)
{
    static const struct {
        const char *key, *whose, *what, *how;
    } files[] = {
        {"/_headers", "Netlify's and Cloudflare Pages'", " (Basic-Auth lines included)",
         "give what it says in --rules and exclude it there"},
        {"/_redirects", "Netlify's and Cloudflare Pages'", "",
         "give what it says in --rules and exclude it there"},
        {"/_worker.js", "Cloudflare Pages'", " (server code, and what secrets it holds)",
         "exclude it in --rules"},
        {"/_routes.json", "Cloudflare Pages'", "", "exclude it in --rules"},
    };
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        const pk_file *f = pk_site_find(site, files[i].key);
        if (f)
            pk_warn("%s: %s %s file, which servd-pack does not read, is packed as %s, "
                    "a page anyone can fetch%s; %s (\"exclude\": [\"%s\"])",
                    f->src, files[i].whose, files[i].key + 1, files[i].key, files[i].what,
                    files[i].how, files[i].key);
    }
    /* _worker.js may also be a directory of modules */
    static const char dir[] = "/_worker.js/";
    for (size_t i = 0; i < site->n; i++) {
        const pk_file *f = &site->files[i];
        if (f->key_len >= sizeof dir - 1 && memcmp(f->key, dir, sizeof dir - 1) == 0) {
            pk_warn("%s: Cloudflare Pages' _worker.js directory (server code, and "
                    "what secrets it holds), which servd-pack does not read, is packed under "
                    "/_worker.js/, pages anyone can fetch; exclude it in --rules "
                    "(\"exclude\": [\"/_worker.js/**\"])",
                    f->src);
            break;
        }
    }
}

int pk_walk(const char *root, const pk_rules *rules, pk_site *site, char *err, size_t errlen)
{
    walk w = {.rules = rules, .site = site, .err = err, .errlen = errlen};
    char real[PATH_MAX];
    struct stat st;
    if (!realpath(root, real) || stat(real, &st) != 0) {
        snprintf(err, errlen, "%s: %s", root, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "%s: not a directory", root);
        return -1;
    }
    if (!(site->root = strdup(real))) {
        snprintf(err, errlen, "%s: out of memory", root);
        return -1;
    }
    w.rootlen = strlen(real);
    w.stack[0].dev = st.st_dev;
    w.stack[0].ino = st.st_ino;
    /* Walk the path as given, so messages name files the way the user does. */
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", root);
    size_t dl = strlen(dir);
    while (dl > 1 && dir[dl - 1] == '/')
        dir[--dl] = '\0';
    if (strcmp(dir, "/") == 0)
        dir[0] = '\0'; /* "/" + "/name" would double the slash */
    int rc = walk_dir(&w, dir[0] ? dir : "", "", "", 0);
    if (rc == 0 && w.oversize) {
        int n = snprintf(err, errlen,
                         "%.400s: %lld bytes is larger than the limit of %llu bytes (1 GiB: "
                         "servd-pack holds a file whole in memory)",
                         w.oversize_names[0], w.oversize_first, (unsigned long long)PK_FILE_MAX);
        for (uint64_t i = 1; i < w.oversize && i < OVERSIZE_NAMES && n >= 0 && (size_t)n < errlen;
             i++)
            n += snprintf(err + n, errlen - (size_t)n, "%s%.400s",
                          i > 1             ? ", "
                          : w.oversize == 2 ? "; so is "
                                            : "; so are ",
                          w.oversize_names[i]);
        if (w.oversize > OVERSIZE_NAMES && n >= 0 && (size_t)n < errlen)
            snprintf(err + n, errlen - (size_t)n, " and %llu more",
                     (unsigned long long)(w.oversize - OVERSIZE_NAMES));
        rc = problem(&w);
    }
    /* Stopped (out of memory, the bounds on links) or several problems:
     * each found is named on its own line, then err says what stopped or
     * counts them, so that fixing a tree takes one run. One problem is err. */
    if (rc != 0 || w.problems > 1)
        for (unsigned i = 0; i < w.problems && i < PROBLEMS_SHOWN; i++)
            pk_err("%s", w.problem[i]);
    if (rc == 0 && w.problems == 1) {
        snprintf(err, errlen, "%s", w.problem[0]);
        rc = -1;
    } else if (rc == 0 && w.problems > 1) {
        if (w.problems <= PROBLEMS_SHOWN)
            snprintf(err, errlen, "%s: %llu problems in the tree (above); nothing was packed", root,
                     (unsigned long long)w.problems);
        else
            snprintf(err, errlen,
                     "%s: %llu problems in the tree (the first %u above); nothing was packed", root,
                     (unsigned long long)w.problems, PROBLEMS_SHOWN);
        rc = -1;
    }
    for (unsigned i = 0; i < w.problems && i < PROBLEMS_SHOWN; i++)
        free(w.problem[i]);
    free(w.dirs);
    if (rc != 0)
        return -1;
    if (site->n) {
        qsort(site->files, site->n, sizeof *site->files, cmp_file);
        warn_index_htm(site);
        warn_decomposed(site);
        warn_link_breaking(site);
        warn_no_read(&w);
        warn_host_config(site);
    }
    return 0;
}
