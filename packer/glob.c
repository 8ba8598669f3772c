/*
 * glob.c - compiling and matching rule globs (syntax in glob.h).
 *
 * A glob compiles to a token list; matching keeps one row of booleans
 * "tokens so far match key[0..j)" and advances it token by token.
 */
#include "glob.h"

#include "sf/path.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum tok_type {
    T_LIT,         /* one given byte */
    T_ANY,         /* ? */
    T_SET,         /* [...] */
    T_STAR,        /* * */
    T_DSTAR,       /* ** not followed by '/' */
    T_DSTAR_SLASH, /* "**" + "/": empty, or anything ending in '/' */
};

/* A [...] set of characters (Unicode code points): a bit per ASCII
 * character, and ranges for the rest. */
typedef struct cset {
    uint8_t ascii[16];
    int negate;
    size_t nr;
    uint32_t (*r)[2]; /* [lo, hi] code point ranges, all >= 0x80 */
} cset;

typedef struct tok {
    unsigned char type;
    unsigned char c; /* T_LIT */
    cset *set;       /* T_SET: owned */
} tok;

struct pk_glob {
    size_t n;
    tok t[];
};

static int set_has(const cset *s, uint32_t cp)
{
    int in = 0;
    if (cp < 0x80)
        in = (s->ascii[cp >> 3] >> (cp & 7)) & 1;
    for (size_t i = 0; !in && i < s->nr; i++)
        in = cp >= s->r[i][0] && cp <= s->r[i][1];
    return cp != '/' && in != s->negate; /* a set never matches '/' */
}

static int set_add(cset *s, uint32_t lo, uint32_t hi)
{
    for (uint32_t v = lo; v <= hi && v < 0x80; v++)
        s->ascii[v >> 3] |= (uint8_t)(1u << (v & 7));
    if (hi < 0x80)
        return 0;
    void *r = realloc(s->r, (s->nr + 1) * sizeof *s->r);
    if (!r)
        return -1;
    s->r = r;
    s->r[s->nr][0] = lo < 0x80 ? 0x80 : lo;
    s->r[s->nr][1] = hi;
    s->nr++;
    return 0;
}

static void set_free(cset *s)
{
    if (s)
        free(s->r);
    free(s);
}

/* One character of a set at p[*j] (a backslash escapes it): its code
 * point, with *j moved past it. @return 0, or -1 at the end or on bytes
 * that are not UTF-8. */
static int set_char(const char *p, size_t *j, uint32_t *cp)
{
    if (p[*j] == '\\' && p[*j + 1])
        (*j)++;
    size_t l = sf_utf8_char(p + *j, strlen(p + *j), cp);
    if (l == 0)
        return -1;
    *j += l;
    return 0;
}

/* Parses a [...] set starting at p[i] == '['; returns the index after ']',
 * or -1 when it is unterminated, reversed, or not UTF-8 (*oom set when
 * memory ran out). */
static long parse_set(const char *p, size_t i, tok *t, int *oom)
{
    size_t j = i + 1;
    cset *s = calloc(1, sizeof *s);
    if (!s) {
        *oom = 1;
        return -1;
    }
    if (p[j] == '!' || p[j] == '^') {
        s->negate = 1;
        j++;
    }
    for (int first = 1;; first = 0) {
        if (p[j] == '\0' || (p[j] == ']' && !first))
            break;
        uint32_t lo, hi;
        if (set_char(p, &j, &lo) != 0)
            goto out_free_set;
        hi = lo;
        if (p[j] == '-' && p[j + 1] && p[j + 1] != ']') {
            j++;
            if (set_char(p, &j, &hi) != 0 || hi < lo)
                goto out_free_set;
        }
        if (set_add(s, lo, hi) != 0) {
            *oom = 1;
            goto out_free_set;
        }
    }
    if (p[j] != ']')
        goto out_free_set;
    t->type = T_SET;
    t->set = s;
    return (long)j + 1;
out_free_set:
    set_free(s);
    return -1;
}

int pk_glob_compile(const char *p, pk_glob **out, char *err, size_t errlen)
{
    size_t len = strlen(p);
    if (len == 0) {
        snprintf(err, errlen, "empty glob");
        return -1;
    }
    if (len > PK_GLOB_MAX) {
        snprintf(err, errlen, "glob longer than %d bytes", PK_GLOB_MAX);
        return -1;
    }
    /* At most one token per byte, plus the implicit "/" + "**" + "/" prefix. */
    pk_glob *g = calloc(1, sizeof *g + (len + 2) * sizeof(tok));
    if (!g) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (p[0] != '/') {
        g->t[g->n++] = (tok){.type = T_LIT, .c = '/'};
        g->t[g->n++] = (tok){.type = T_DSTAR_SLASH};
    }
    for (size_t i = 0; i < len;) {
        tok *t = &g->t[g->n];
        if (p[i] == '*' && p[i + 1] == '*') {
            i += 2;
            while (p[i] == '*')
                i++;
            if (p[i] == '/') {
                t->type = T_DSTAR_SLASH;
                i++;
            } else {
                t->type = T_DSTAR;
            }
        } else if (p[i] == '*') {
            t->type = T_STAR;
            i++;
        } else if (p[i] == '?') {
            t->type = T_ANY;
            i++;
        } else if (p[i] == '[') {
            int oom = 0;
            long next = parse_set(p, i, t, &oom);
            if (next < 0) {
                if (oom)
                    snprintf(err, errlen, "out of memory");
                else
                    snprintf(err, errlen, "unterminated or reversed [...] set at offset %zu", i);
                pk_glob_free(g);
                return -1;
            }
            i = (size_t)next;
        } else if (p[i] == '\\') {
            if (p[i + 1] == '\0') {
                snprintf(err, errlen, "trailing backslash");
                pk_glob_free(g);
                return -1;
            }
            t->type = T_LIT;
            t->c = (unsigned char)p[i + 1];
            i += 2;
        } else {
            t->type = T_LIT;
            t->c = (unsigned char)p[i];
            i++;
        }
        g->n++;
    }
    *out = g;
    return 0;
}

/* Key bytes handled per row on the stack; longer keys use the heap. */
#define ROW_STACK 1024

int pk_glob_match(const pk_glob *g, const char *s, size_t len)
{
    unsigned char stack_rows[2 * ROW_STACK];
    unsigned char *rows = stack_rows;
    if (len + 1 > ROW_STACK) {
        rows = malloc(2 * (len + 1));
        if (!rows)
            return 0;
    }
    unsigned char *cur = rows, *next = rows + (len + 1);
    memset(cur, 0, len + 1);
    cur[0] = 1;
    for (size_t i = 0; i < g->n; i++) {
        const tok *t = &g->t[i];
        int any = 0, prev_any = 0;
        next[0] = 0;
        switch (t->type) {
        case T_LIT:
            for (size_t j = 0; j < len; j++)
                next[j + 1] = cur[j] && (unsigned char)s[j] == t->c;
            break;
        case T_ANY:
        case T_SET:
            /* one character: its UTF-8 bytes move the row as one step */
            memset(next + 1, 0, len);
            for (size_t j = 0; j < len;) {
                uint32_t cp;
                size_t cl = sf_utf8_char(s + j, len - j, &cp);
                if (cl == 0) { /* not UTF-8: a byte that nothing matches */
                    j++;
                    continue;
                }
                if (cur[j])
                    next[j + cl] = t->type == T_ANY ? cp != '/' : set_has(t->set, cp);
                j += cl;
            }
            break;
        case T_STAR:
            next[0] = cur[0];
            for (size_t j = 1; j <= len; j++)
                next[j] = cur[j] || (next[j - 1] && s[j - 1] != '/');
            break;
        case T_DSTAR:
            next[0] = cur[0];
            for (size_t j = 1; j <= len; j++)
                next[j] = cur[j] || next[j - 1];
            break;
        case T_DSTAR_SLASH:
            /* prev_any: some cur[k] with k < j is set. */
            for (size_t j = 0; j <= len; j++) {
                next[j] = cur[j] || (j > 0 && s[j - 1] == '/' && prev_any);
                prev_any |= cur[j];
            }
            break;
        }
        for (size_t j = 0; j <= len; j++)
            any |= next[j];
        unsigned char *tmp = cur;
        cur = next;
        next = tmp;
        if (!any)
            break;
    }
    int m = cur[len];
    if (rows != stack_rows)
        free(rows);
    return m;
}

int pk_glob_covers(const pk_glob *g, const char *dirkey, size_t len)
{
    if (g->n == 0 || g->t[g->n - 1].type != T_DSTAR)
        return 0;
    char stack_key[ROW_STACK];
    char *k = len + 1 <= sizeof stack_key ? stack_key : malloc(len + 1);
    if (!k)
        return 0;
    memcpy(k, dirkey, len);
    k[len] = '/';
    int m = pk_glob_match(g, k, len + 1);
    if (k != stack_key)
        free(k);
    return m;
}

void pk_glob_free(pk_glob *g)
{
    for (size_t i = 0; g && i < g->n; i++)
        if (g->t[i].type == T_SET)
            set_free(g->t[i].set);
    free(g);
}
