/*
 * build.h - servd-pack build: web root -> pack file (+ manifest).
 *
 * Phases: walk (sorted keys) -> read + hash every file (parallel) -> decide
 * type, Cache-Control and headers (main thread; libmagic is not thread-safe)
 * -> compress each (file, encoding) or reuse from --base (parallel) -> write
 * every record in key order with one LMDB transaction (main thread) ->
 * manifest (written and renamed first) -> commit the pack (fsync + rename).
 * Any failure removes every temporary file and puts the previous manifest
 * back, so the output either appears complete or not at all; nothing is
 * removed after the pack has been renamed into place.
 */
#ifndef PK_BUILD_H
#define PK_BUILD_H

#include <stdint.h>

#include "sf/store.h"

typedef struct pk_build_opts {
    const char *root;
    const char *output;
    const char *rules;    /* NULL: defaults only */
    const char *manifest; /* NULL: none */
    const char *base;     /* NULL: compress everything */
    unsigned jobs;        /* worker threads (>= 1) */
    uint64_t memory;      /* the most the compression may hold at once (0: no limit) */
    int quiet;
    int strict;     /* a warning before the compression fails the build */
    int have_epoch; /* SOURCE_DATE_EPOCH was set */
    int64_t epoch;
} pk_build_opts;

/* Runs a build. Messages go to stderr. @return the exit status: 0, 1, or 2
 * for options that contradict each other (--manifest naming the output or
 * the base). */
int pk_build(const pk_build_opts *o);

/* 1 if paths a and b name the same directory entry (the realpath of their
 * directories plus the last component are equal), whether or not it exists:
 * "x.lmdb", "./x.lmdb" and "d/../x.lmdb" are one file. */
int pk_same_file_name(const char *a, const char *b);

/* The key of the site's error page and the special entry made from it. */
#define PK_404_KEY     "/404.html"
#define PK_404_SPECIAL SF_SPECIAL_404

#endif
