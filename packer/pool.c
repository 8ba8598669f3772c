/*
 * pool.c - a fixed pool of pthreads pulling jobs from a shared index (pool.h).
 */
#include "pool.h"
#include "sf/cpus.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Room for one failure message. */
#define POOL_ERR_LEN 1024

typedef struct pool {
    size_t n;
    const size_t *order;
    const uint64_t *weight;
    pk_job_fn fn;
    void *arg;
    atomic_size_t next;
    atomic_uint_fast64_t done_weight;
    atomic_int failed;
    pthread_mutex_t lock; /* guards err, running and the condition */
    pthread_cond_t cond;
    unsigned running;
    char err[POOL_ERR_LEN];
} pool;

typedef struct worker {
    pool *p;
    unsigned id;
} worker;

static void *work(void *a)
{
    worker *w = a;
    pool *p = w->p;
    char err[POOL_ERR_LEN];
    while (!atomic_load(&p->failed)) {
        size_t i = atomic_fetch_add(&p->next, 1);
        if (i >= p->n)
            break;
        size_t job = p->order ? p->order[i] : i;
        err[0] = '\0';
        if (p->fn(p->arg, job, w->id, err, sizeof err) != 0) {
            pthread_mutex_lock(&p->lock);
            if (!atomic_exchange(&p->failed, 1))
                snprintf(p->err, sizeof p->err, "%s", err[0] ? err : "job failed");
            pthread_mutex_unlock(&p->lock);
            break;
        }
        atomic_fetch_add(&p->done_weight, p->weight ? p->weight[job] : 1);
    }
    pthread_mutex_lock(&p->lock);
    p->running--;
    pthread_cond_signal(&p->cond);
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

int pk_pool_run(size_t n, const size_t *order, const uint64_t *weight, unsigned nthreads,
                pk_job_fn fn, void *arg, pk_tick_fn tick, void *tick_arg, char *err, size_t errlen)
{
    if (n == 0)
        return 0;
    if (nthreads == 0)
        nthreads = 1;
    if (nthreads > PK_POOL_MAX_THREADS)
        nthreads = PK_POOL_MAX_THREADS;
    if (nthreads > n)
        nthreads = (unsigned)n;
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += weight ? weight[i] : 1;

    pool p = {.n = n, .order = order, .weight = weight, .fn = fn, .arg = arg};
    atomic_init(&p.next, 0);
    atomic_init(&p.done_weight, 0);
    atomic_init(&p.failed, 0);
    pthread_mutex_init(&p.lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&p.cond, &ca);
    pthread_condattr_destroy(&ca);

    pthread_t *tids = calloc(nthreads, sizeof *tids);
    worker *ws = calloc(nthreads, sizeof *ws);
    int rc = 0;
    if (!tids || !ws) {
        snprintf(err, errlen, "out of memory starting %u threads", nthreads);
        rc = -1;
        goto out_free;
    }
    unsigned started = 0;
    for (; started < nthreads; started++) {
        ws[started] = (worker){&p, started};
        pthread_mutex_lock(&p.lock);
        p.running++;
        pthread_mutex_unlock(&p.lock);
        int e = pthread_create(&tids[started], NULL, work, &ws[started]);
        if (e != 0) {
            pthread_mutex_lock(&p.lock);
            p.running--;
            pthread_mutex_unlock(&p.lock);
            if (started == 0) {
                snprintf(err, errlen, "cannot start a thread: %s", sf_spawn_strerror(e));
                rc = -1;
                goto out_free;
            }
            break; /* fewer threads than asked: slower, still correct */
        }
    }

    pthread_mutex_lock(&p.lock);
    while (p.running > 0) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += PK_POOL_TICK_MS * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&p.cond, &p.lock, &ts);
        if (tick && p.running > 0) {
            pthread_mutex_unlock(&p.lock);
            tick(tick_arg, atomic_load(&p.done_weight), total);
            pthread_mutex_lock(&p.lock);
        }
    }
    pthread_mutex_unlock(&p.lock);
    for (unsigned i = 0; i < started; i++)
        pthread_join(tids[i], NULL);
    if (atomic_load(&p.failed)) {
        snprintf(err, errlen, "%s", p.err);
        rc = -1;
    } else if (tick) {
        tick(tick_arg, total, total);
    }

out_free:
    free(tids);
    free(ws);
    pthread_cond_destroy(&p.cond);
    pthread_mutex_destroy(&p.lock);
    return rc;
}
