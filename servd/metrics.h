/*
 * metrics.h - servd's counters and their Prometheus text rendering.
 *
 * Each worker owns one cache-line-aligned sv_counters and is the only
 * thread that writes it (relaxed loads and stores, no locked instruction, no
 * shared cache line between workers). The admin thread sums all of them with
 * relaxed loads when /metrics is scraped, so totals are exact per counter
 * but not a snapshot across counters - as with every Prometheus exporter.
 */
#ifndef SV_METRICS_H
#define SV_METRICS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "sf/store.h"

/* Timeouts, by kind. */
enum sv_timeout { SV_TO_HEADER, SV_TO_IDLE, SV_TO_SEND, SV_TO_COUNT };

/* Errors, by kind (servd_errors_total{kind=...}). */
enum sv_error {
    SV_ERR_PARSE,  /* malformed request answered with a 4xx/5xx and closed */
    SV_ERR_READ,   /* read failed (reset by peer ...) */
    SV_ERR_WRITE,  /* write failed */
    SV_ERR_ACCEPT, /* accept failed for another reason than those below */
    SV_ERR_EMFILE, /* accept paused: EMFILE, ENFILE, ENOBUFS or ENOMEM */
    SV_ERR_NOMEM,  /* allocation failed: connection closed */
    SV_ERR_COUNT
};

typedef struct sv_counters {
    _Alignas(64) _Atomic uint64_t status[6]; /* by status / 100; [0] unused */
    _Atomic uint64_t encoding[SF_ENC_COUNT]; /* responses by body encoding */
    _Atomic uint64_t bytes_sent;             /* bytes the kernel took */
    _Atomic uint64_t conns_accepted;
    _Atomic uint64_t conns_closed;
    _Atomic uint64_t conns_rejected; /* over --max-conns: 503 and closed */
    _Atomic uint64_t timeouts[SV_TO_COUNT];
    _Atomic uint64_t errors[SV_ERR_COUNT];
    _Atomic uint64_t log_lines;
    _Atomic uint64_t log_dropped; /* access-log lines dropped: the writer fell behind */
} sv_counters;

/* Process-wide state the admin endpoints report. */
typedef struct sv_metrics {
    int nworkers;
    sv_counters *ctr; /* nworkers entries, 64-byte aligned */
    int64_t started_at;
    pthread_mutex_t lock; /* guards the pack fields below (main and admin threads only) */
    char pack_id[33];
    char pack_path[512];
    int64_t pack_loaded_at;
    uint64_t pack_paths;
    _Atomic uint64_t swaps;
    _Atomic uint64_t swap_failures;
    _Atomic uint64_t log_write_lost; /* access-log lines lost to failed writes (log thread) */
    /* The cut flag of the pack being served (mapguard.h; the flags live for
     * the process), set by the main thread at every swap; NULL before. */
    _Atomic(const atomic_int *) pack_cut;
} sv_metrics;

/* @return 0 or -1 (out of memory). */
int sv_metrics_init(sv_metrics *m, int nworkers);
void sv_metrics_free(sv_metrics *m);

/* Records the pack now being served (main thread), with its cut flag. */
void sv_metrics_set_pack(sv_metrics *m, const char *id_hex, const char *path, int64_t loaded_at,
                         uint64_t paths, const atomic_int *cut);

/* Whether the pack being served was found written in place (mapguard.h). */
int sv_metrics_pack_cut(sv_metrics *m);

/* Copies the current pack id (33 bytes with the NUL) - for /healthz. */
void sv_metrics_pack_id(sv_metrics *m, char out[33]);

/* Renders every metric in Prometheus text format 0.0.4 into a new malloc'd
 * buffer (*out, *len); the caller frees. @return 0 or -1 (out of memory). */
int sv_metrics_render(sv_metrics *m, char **out, size_t *len);

#endif
