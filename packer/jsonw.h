/*
 * jsonw.h - a JSON document written one member at a time.
 *
 * jansson builds a whole document before it writes it: a listing or a
 * manifest of 200,000 paths took 1.3 GB that way (3-4 KB a path). Here
 * each member is built as a small jansson value, written, and freed, in
 * the layout json_dumpf gives the whole document with JSON_INDENT(2) and
 * the flags pk_jsonw_init allows (the bytes are the same), so that the
 * memory needed is one member's.
 */
#ifndef PK_JSONW_H
#define PK_JSONW_H

#include <jansson.h>
#include <stddef.h>
#include <stdio.h>

/* The deepest nesting of open containers. */
#define PK_JSONW_DEPTH 8

typedef struct pk_jsonw {
    FILE *fp;
    size_t flags;                 /* json_dumps flags besides the indent */
    int depth;                    /* containers open */
    size_t count[PK_JSONW_DEPTH]; /* members written in each */
    char close[PK_JSONW_DEPTH];   /* how each ends: '}' or ']' */
    int failed;                   /* errno of the first failure (ENOMEM, EINVAL), or 0 */
} pk_jsonw;

/* Starts a document on fp; flags are json_dumps flags among
 * JSON_ENSURE_ASCII, JSON_PRESERVE_ORDER and JSON_ESCAPE_SLASH, to which
 * JSON_INDENT(2) is added (the levels written here are never sorted, nor
 * compact). */
void pk_jsonw_init(pk_jsonw *w, FILE *fp, size_t flags);

/* Opens an object (kind '{') or array ('[') as the next member of the
 * container open, named key in an object (NULL in an array, or for the
 * document itself). */
void pk_jsonw_open(pk_jsonw *w, const char *key, char kind);

/* Writes value as the next member (named key in an object), and releases
 * it (a NULL value, from a jansson constructor out of memory, fails the
 * document). */
void pk_jsonw_put(pk_jsonw *w, const char *key, json_t *value);

/* Closes the container opened last. */
void pk_jsonw_close(pk_jsonw *w);

/* @return 0 when everything was written, else -1 (errno set, EIO when the
 * cause is not known, ENOMEM when a value could not be built). */
int pk_jsonw_status(const pk_jsonw *w);

#endif
