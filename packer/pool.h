/*
 * pool.h - running independent jobs on N threads, with progress.
 *
 * Jobs are taken in the order given (callers put the most expensive first,
 * so that the last jobs to start are short and all threads finish together).
 * The calling thread does not run jobs: it wakes every PK_POOL_TICK_MS to
 * report progress. The first job that fails stops the others from starting;
 * its message is returned.
 */
#ifndef PK_POOL_H
#define PK_POOL_H

#include <stddef.h>
#include <stdint.h>

/* Progress refresh interval: smooth enough for a bar, rare enough to cost
 * nothing. */
#define PK_POOL_TICK_MS 100
/* Upper bound of --jobs: beyond this, threads only add memory (each holds
 * encoder state of tens of megabytes). */
#define PK_POOL_MAX_THREADS 256

/* Runs job `job` on thread number `thread` (0..nthreads-1).
 * @return 0, or -1 with the cause in err. */
typedef int (*pk_job_fn)(void *arg, size_t job, unsigned thread, char *err, size_t errlen);

/* Called on the calling thread with the weight done so far. */
typedef void (*pk_tick_fn)(void *arg, uint64_t done, uint64_t total);

/* Runs jobs order[0..n) (order == NULL: 0..n-1); weight[job] (NULL: 1 each)
 * feeds the progress callback. @return 0, or -1 with the first failure in err. */
int pk_pool_run(size_t n, const size_t *order, const uint64_t *weight, unsigned nthreads,
                pk_job_fn fn, void *arg, pk_tick_fn tick, void *tick_arg, char *err, size_t errlen);

#endif
