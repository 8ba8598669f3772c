/*
 * glob.c - compiling and matching rule globs (syntax in glob.h).
 *
 * A glob compiles to a token list; matching keeps one row of booleans
 * "tokens so far match key[0..j)" and advances it token by token.
 */
#include "glob.h"

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

typedef struct tok {
    unsigned char type;
    unsigned char c;
    uint8_t set[32]; /* T_SET: bit per byte value */
} tok;

struct pk_glob {
    size_t n;
    tok t[];
};

/* Parses a [...] set starting at p[i] == '['; returns the index after ']'. */
static long parse_set(const char *p, size_t i, tok *t)
{
    size_t j = i + 1;
    int negate = 0;
    if (p[j] == '!' || p[j] == '^') {
        negate = 1;
        j++;
    }
    memset(t->set, 0, sizeof t->set);
    int first = 1;
    for (;; first = 0) {
        unsigned char c = (unsigned char)p[j];
        if (c == '\0')
            return -1;
        if (c == ']' && !first)
            break;
        if (c == '\\' && p[j + 1]) {
            j++;
            c = (unsigned char)p[j];
        }
        unsigned char hi = c;
        if (p[j + 1] == '-' && p[j + 2] && p[j + 2] != ']') {
            hi = (unsigned char)p[j + 2];
            if (hi == '\\' && p[j + 3]) {
                hi = (unsigned char)p[j + 3];
                j++;
            }
            j += 2;
            if (hi < c)
                return -1;
        }
        for (unsigned v = c; v <= hi; v++)
            t->set[v >> 3] |= (uint8_t)(1u << (v & 7));
        j++;
    }
    if (negate)
        for (size_t k = 0; k < sizeof t->set; k++)
            t->set[k] = (uint8_t)~t->set[k];
    t->set['/' >> 3] &= (uint8_t) ~(1u << ('/' & 7)); /* a set never matches '/' */
    t->type = T_SET;
    return (long)j + 1;
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
            long next = parse_set(p, i, t);
            if (next < 0) {
                snprintf(err, errlen, "unterminated or reversed [...] set at offset %zu", i);
                free(g);
                return -1;
            }
            i = (size_t)next;
        } else if (p[i] == '\\') {
            if (p[i + 1] == '\0') {
                snprintf(err, errlen, "trailing backslash");
                free(g);
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
        case T_ANY:
        case T_SET:
            for (size_t j = 0; j < len; j++) {
                unsigned char c = (unsigned char)s[j];
                int ok = t->type == T_LIT   ? c == t->c
                         : t->type == T_ANY ? c != '/'
                                            : (t->set[c >> 3] >> (c & 7)) & 1;
                next[j + 1] = cur[j] && ok;
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
    free(g);
}
