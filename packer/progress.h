/*
 * progress.h - what servd-pack build tells the person watching: a progress
 * bar on stderr when stderr is a terminal that can redraw a line, as wide
 * as the terminal allows; elsewhere (a log, a pipe, TERM=dumb) a line every
 * PK_PROGRESS_LINE_S seconds, so that a long build in a CI job is not
 * silent for minutes; and a summary table at the end (unless -q).
 */
#ifndef PK_PROGRESS_H
#define PK_PROGRESS_H

#include "sf/store.h"

#include <stdint.h>
#include <stdio.h>

/* Seconds between two progress lines where no bar can be drawn. */
#define PK_PROGRESS_LINE_S 10

typedef struct pk_progress {
    int enabled;       /* not -q: ticks are wanted */
    int lines;         /* no bar: a line now and then */
    double last_line;  /* when the last line (or the build) started, monotonic seconds */
    const char *phase; /* "reading", "compressing", ... */
    int drawn;         /* a bar is on screen and must be cleared */
} pk_progress;

/* CLOCK_MONOTONIC in seconds: the build's own timings. */
double pk_monotonic_seconds(void);

void pk_progress_init(pk_progress *p, int quiet);
void pk_progress_phase(pk_progress *p, const char *phase);
/* A pk_tick_fn (pool.h): arg is the pk_progress. */
void pk_progress_tick(void *arg, uint64_t done, uint64_t total);
/* Clears the bar so that the next line starts clean. */
void pk_progress_clear(pk_progress *p);

typedef struct pk_stats {
    uint64_t paths;
    uint64_t bodies;
    uint64_t stored_bytes;               /* distinct bodies */
    uint64_t pack_file_bytes;            /* size of the pack file */
    uint64_t enc_files[SF_ENC_COUNT];    /* paths that have the encoding */
    uint64_t enc_bytes[SF_ENC_COUNT];    /* bytes of those variants */
    uint64_t enc_identity[SF_ENC_COUNT]; /* identity bytes of those paths */
    uint64_t skipped_dot, skipped_excluded;
    const char *const *dot_names; /* the first of the skipped dotfiles (not owned) */
    size_t ndot_names;
    uint64_t sidecars;                /* X.gz beside an X compressed: packed (sidecar.h) */
    const char *const *sidecar_names; /* the first of them (not owned) */
    size_t nsidecar_names;
    uint64_t reused;       /* paths whose variants came from --base */
    uint64_t twins;        /* paths whose variants are an identical earlier file's */
    uint64_t decoded;      /* files stored as what they contain (an encoded rule, .svgz) */
    uint64_t memory;       /* --memory (0: none) */
    uint64_t memory_waits; /* compressions that waited for room in it */
    unsigned threads;      /* --jobs */
    unsigned comp_threads; /* the threads that compressed */
    double seconds;
} pk_stats;

/* Prints the summary table. */
void pk_summary_print(FILE *out, const pk_stats *s, const char *output);

/* "12.3 KiB" style size into out. */
void pk_human_bytes(uint64_t n, char *out, size_t cap);

#endif
