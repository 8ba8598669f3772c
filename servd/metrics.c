/*
 * metrics.c - sums the per-worker counters and renders them in the
 * Prometheus text exposition format 0.0.4 (one "# HELP", one "# TYPE", then
 * samples; label values escaped; counters end in _total).
 *
 * Runs on the admin thread only; allocation is fine here.
 */
#include "metrics.h"

#include "mapguard.h"
#include "snapshot.h"

#include "sf/path.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int sv_metrics_init(sv_metrics *m, int nworkers)
{
    memset(m, 0, sizeof *m);
    size_t sz = (size_t)nworkers * sizeof(sv_counters);
    m->ctr = aligned_alloc(64, sz);
    if (!m->ctr)
        return -1;
    memset(m->ctr, 0, sz);
    m->nworkers = nworkers;
    m->started_at = (int64_t)time(NULL);
    pthread_mutex_init(&m->lock, NULL);
    return 0;
}

void sv_metrics_free(sv_metrics *m)
{
    free(m->ctr);
    m->ctr = NULL;
    pthread_mutex_destroy(&m->lock);
}

void sv_metrics_set_pack(sv_metrics *m, const char *id_hex, const char *path, int64_t loaded_at,
                         uint64_t paths, const atomic_int *cut)
{
    pthread_mutex_lock(&m->lock);
    snprintf(m->pack_id, sizeof m->pack_id, "%s", id_hex);
    snprintf(m->pack_path, sizeof m->pack_path, "%s", path);
    m->pack_loaded_at = loaded_at;
    m->pack_paths = paths;
    pthread_mutex_unlock(&m->lock);
    atomic_store(&m->pack_cut, cut);
}

int sv_metrics_pack_cut(sv_metrics *m)
{
    const atomic_int *cut = atomic_load(&m->pack_cut);
    return cut && atomic_load_explicit(cut, memory_order_relaxed);
}

void sv_metrics_pack_id(sv_metrics *m, char out[33])
{
    pthread_mutex_lock(&m->lock);
    memcpy(out, m->pack_id, 33);
    pthread_mutex_unlock(&m->lock);
}

/* A growing output buffer; a failed allocation sticks in oom. */
struct out {
    char *p;
    size_t len, cap;
    int oom;
};

static void put(struct out *o, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        size_t room = o->cap - o->len;
        int n = o->p ? vsnprintf(o->p + o->len, room, fmt, ap) : -1;
        va_end(ap);
        if (n >= 0 && (size_t)n < room) {
            o->len += (size_t)n;
            return;
        }
        if (o->oom)
            return;
        size_t cap = o->cap ? o->cap * 2 : 8192;
        while (n >= 0 && cap - o->len <= (size_t)n)
            cap *= 2;
        char *p = realloc(o->p, cap);
        if (!p) {
            o->oom = 1;
            return;
        }
        o->p = p;
        o->cap = cap;
    }
}

/* Writes a label value with \\, \" and \n escaped (format 0.0.4). Label
 * values must be UTF-8, and Prometheus drops the whole scrape over one that
 * is not: a byte that is not part of a UTF-8 character (a pack path is any
 * bytes) is written as U+FFFD. */
static void put_label(struct out *o, const char *s)
{
    for (const char *end = s + strlen(s); s < end;) {
        size_t n = sf_utf8_char(s, (size_t)(end - s), NULL);
        if (n == 0) {
            put(o, "\xef\xbf\xbd");
            s++;
        } else if (*s == '\\' || *s == '"') {
            put(o, "\\%c", *s++);
        } else if (*s == '\n') {
            put(o, "\\n");
            s++;
        } else {
            put(o, "%.*s", (int)n, s);
            s += n;
        }
    }
}

static void head(struct out *o, const char *name, const char *type, const char *help)
{
    put(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* Sum over all workers of one counter, named by its address in worker 0's
 * counters (relaxed loads: each value is exact, the set is not a snapshot). */
static uint64_t sum(const sv_metrics *m, const _Atomic uint64_t *field0)
{
    size_t off = (size_t)((const char *)field0 - (const char *)&m->ctr[0]);
    uint64_t s = 0;
    for (int i = 0; i < m->nworkers; i++) {
        const _Atomic uint64_t *f = (const _Atomic uint64_t *)((const char *)&m->ctr[i] + off);
        s += atomic_load_explicit(f, memory_order_relaxed);
    }
    return s;
}

int sv_metrics_render(sv_metrics *m, char **out, size_t *len)
{
    struct out o = {0};
    static const char *const classes[] = {"", "1xx", "2xx", "3xx", "4xx", "5xx"};
    static const char *const timeouts[] = {"header", "idle", "send"};
    static const char *const errors[] = {"parse", "read", "write", "accept", "emfile", "nomem"};

    head(&o, "servd_requests_total", "counter", "Responses sent, by status class.");
    for (int c = 1; c <= 5; c++)
        put(&o, "servd_requests_total{code=\"%s\"} %llu\n", classes[c],
            (unsigned long long)sum(m, &m->ctr[0].status[c]));

    head(&o, "servd_responses_by_encoding_total", "counter",
         "Responses carrying a stored representation (200, 206, the site's 404 page; HEAD "
         "too), by its content coding.");
    for (int e = 0; e < SF_ENC_COUNT; e++)
        put(&o, "servd_responses_by_encoding_total{encoding=\"%s\"} %llu\n", sf_encoding_name(e),
            (unsigned long long)sum(m, &m->ctr[0].encoding[e]));

    head(&o, "servd_bytes_sent_total", "counter", "Response bytes written to sockets.");
    put(&o, "servd_bytes_sent_total %llu\n", (unsigned long long)sum(m, &m->ctr[0].bytes_sent));

    uint64_t acc = sum(m, &m->ctr[0].conns_accepted), closed = sum(m, &m->ctr[0].conns_closed);
    head(&o, "servd_connections_open", "gauge", "Client connections open now.");
    put(&o, "servd_connections_open %llu\n",
        (unsigned long long)(acc >= closed ? acc - closed : 0));
    head(&o, "servd_connections_accepted_total", "counter", "Client connections accepted.");
    put(&o, "servd_connections_accepted_total %llu\n", (unsigned long long)acc);
    head(&o, "servd_connections_rejected_total", "counter",
         "Connections refused with 503 because a worker was at --max-conns.");
    put(&o, "servd_connections_rejected_total %llu\n",
        (unsigned long long)sum(m, &m->ctr[0].conns_rejected));

    head(&o, "servd_timeouts_total", "counter", "Connections closed by a timeout, by kind.");
    for (int t = 0; t < SV_TO_COUNT; t++)
        put(&o, "servd_timeouts_total{kind=\"%s\"} %llu\n", timeouts[t],
            (unsigned long long)sum(m, &m->ctr[0].timeouts[t]));

    head(&o, "servd_errors_total", "counter", "Errors, by kind.");
    for (int e = 0; e < SV_ERR_COUNT; e++)
        put(&o, "servd_errors_total{kind=\"%s\"} %llu\n", errors[e],
            (unsigned long long)sum(m, &m->ctr[0].errors[e]));

    head(&o, "servd_access_log_lines_total", "counter",
         "Access-log lines made, one per response and one per 408 of a head cut by the "
         "header timeout, including those dropped.");
    put(&o, "servd_access_log_lines_total %llu\n",
        (unsigned long long)sum(m, &m->ctr[0].log_lines));
    head(&o, "servd_access_log_dropped_total", "counter",
         "Access-log lines lost: the writer could not keep up, or a write failed.");
    put(&o, "servd_access_log_dropped_total %llu\n",
        (unsigned long long)(sum(m, &m->ctr[0].log_dropped) + atomic_load(&m->log_write_lost)));

    char id[33], path[512];
    int64_t loaded;
    uint64_t paths;
    pthread_mutex_lock(&m->lock);
    memcpy(id, m->pack_id, sizeof id);
    memcpy(path, m->pack_path, sizeof path);
    loaded = m->pack_loaded_at;
    paths = m->pack_paths;
    pthread_mutex_unlock(&m->lock);

    head(&o, "servd_pack_info", "gauge", "The pack being served (always 1).");
    put(&o, "servd_pack_info{pack_id=\"");
    put_label(&o, id);
    put(&o, "\",path=\"");
    put_label(&o, path);
    put(&o, "\"} 1\n");
    head(&o, "servd_pack_paths", "gauge", "Paths in the pack being served.");
    put(&o, "servd_pack_paths %llu\n", (unsigned long long)paths);
    head(&o, "servd_pack_loaded_timestamp_seconds", "gauge",
         "When the pack being served was loaded (Unix time).");
    put(&o, "servd_pack_loaded_timestamp_seconds %lld\n", (long long)loaded);
    head(&o, "servd_pack_swaps_total", "counter",
         "Packs swapped in (on SIGHUP or a change of the pack path).");
    put(&o, "servd_pack_swaps_total %llu\n",
        (unsigned long long)atomic_load_explicit(&m->swaps, memory_order_relaxed));
    head(&o, "servd_pack_swap_failures_total", "counter",
         "Replacement packs refused (the previous pack kept serving).");
    put(&o, "servd_pack_swap_failures_total %llu\n",
        (unsigned long long)atomic_load_explicit(&m->swap_failures, memory_order_relaxed));
    head(&o, "servd_pack_cut_pages_total", "counter",
         "Pages of a pack in use found cut from its file (written in place) and read as zeros.");
    put(&o, "servd_pack_cut_pages_total %lu\n", sv_mapguard_faults());
    head(&o, "servd_packs_mapped", "gauge",
         "Packs mapped now: the one served, and old ones held by connections still sending "
         "from them (a slow reader keeps its pack, and a deleted pack file's space, as long "
         "as it reads).");
    put(&o, "servd_packs_mapped %ld\n", sv_snapshot_live());
    head(&o, "servd_pack_cut", "gauge",
         "1 while the pack being served was written in place: servd answers 503 from it.");
    put(&o, "servd_pack_cut %d\n", sv_metrics_pack_cut(m));
    head(&o, "servd_workers", "gauge", "Worker threads (one event loop each).");
    put(&o, "servd_workers %d\n", m->nworkers);
    head(&o, "process_start_time_seconds", "gauge", "Start time of the process (Unix time).");
    put(&o, "process_start_time_seconds %lld\n", (long long)m->started_at);

    if (o.oom) {
        free(o.p);
        return -1;
    }
    *out = o.p;
    *len = o.len;
    return 0;
}
