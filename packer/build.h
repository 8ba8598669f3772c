/*
 * build.h - servd-pack build: web root -> pack file (+ manifest).
 *
 * Phases: walk (sorted keys) -> read + hash every file (parallel) -> decide
 * type, Cache-Control and headers (main thread; libmagic is not thread-safe)
 * -> compress each (file, encoding) or reuse from --base (parallel) -> write
 * every record in key order with one LMDB transaction (main thread) ->
 * manifest -> commit (fsync + rename). Any failure removes every temporary
 * file, so the output either appears complete or not at all.
 */
#ifndef PK_BUILD_H
#define PK_BUILD_H

#include <stdint.h>

typedef struct pk_build_opts {
    const char *root;
    const char *output;
    const char *rules;    /* NULL: defaults only */
    const char *manifest; /* NULL: none */
    const char *base;     /* NULL: compress everything */
    unsigned jobs;        /* worker threads (>= 1) */
    int quiet;
    int have_epoch; /* SOURCE_DATE_EPOCH was set */
    int64_t epoch;
} pk_build_opts;

/* Runs a build. Messages go to stderr. @return the exit status (0 or 1). */
int pk_build(const pk_build_opts *o);

/* The key of the site's error page and the special entry made from it. */
#define PK_404_KEY     "/404.html"
#define PK_404_SPECIAL "status:404"

#endif
