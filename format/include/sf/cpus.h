/*
 * sf/cpus.h - the CPUs a program may use: the default of servd's --workers
 * and servd-pack's --jobs. In the format library because it is the one
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

#ifdef __cplusplus
}
#endif

#endif
