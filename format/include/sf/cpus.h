/*
 * sf/cpus.h - the CPUs a program may use: the default of servd's --workers
 * and servd-pack's --jobs; and the memory it may take: the default of
 * servd-pack's --memory. In the format library because it is the one
 * library both programs link.
 */
#ifndef SF_CPUS_H
#define SF_CPUS_H

#ifdef __cplusplus
extern "C" {
#endif

/* The CPUs this process may run on (its affinity, as nproc(1) counts:
 * taskset, cpusets), at most its cgroup's CPU quota (a container started
 * with --cpus 2 on a 64-CPU host: 2), at least 1 and at most max. */
unsigned sf_cpu_count(unsigned max);

/* The CPUs a cgroup v2 cpu.max text allows ("200000 100000\n": 2; a
 * partial CPU rounds up; "max 100000": 0, no quota). */
unsigned long long sf_cpu_max_cpus(const char *text);

/* The memory this process may take, in bytes, or 0 when unknown: the
 * host's MemAvailable, at most its cgroup's limit (v2's memory.max or
 * memory.high of its cgroup or a parent, the smallest; else v1's
 * memory.limit_in_bytes). A limit is not what is free under it: the
 * cgroup's other processes use some. */
unsigned long long sf_memory_available(void);

/* The bytes a cgroup memory.max (or memory.high, or v1
 * memory.limit_in_bytes) text allows ("1073741824\n"), or 0 for none
 * ("max\n"; v1's 9223372036854771712). */
unsigned long long sf_memory_max_bytes(const char *text);

/* Why a thread or a process could not be started, for a message: err is
 * the error of pthread_create(), fork() or posix_spawn() (EAGAIN: out of
 * memory, or at a limit on processes such as ulimit -u or a cgroup's
 * pids.max, which strerror calls "Resource temporarily unavailable"),
 * else strerror(err). */
const char *sf_spawn_strerror(int err);

#ifdef __cplusplus
}
#endif

#endif
