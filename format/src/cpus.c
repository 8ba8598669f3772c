/*
 * cpus.c - how many threads a program should run by default (sf/cpus.h).
 */
#include "sf/cpus.h"

#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* The CPUs the cgroup quota of this process allows (v2 cpu.max "QUOTA
 * PERIOD", or v1 cpu.cfs_quota_us and cpu.cfs_period_us, rounded up), or 0
 * when it sets none or cannot be read. A container limited to 2 CPUs on a
 * 64-CPU host sees 64 online CPUs, and its own cgroup at /sys/fs/cgroup. */
static unsigned long long cgroup_cpus(void)
{
    char line[512], path[sizeof line + 32] = "/sys/fs/cgroup/cpu.max";
    FILE *f = fopen("/proc/self/cgroup", "re");
    if (f) {
        while (fgets(line, sizeof line, f))
            if (strncmp(line, "0::", 3) == 0) {
                line[strcspn(line, "\n")] = '\0';
                if (strcmp(line + 3, "/") != 0)
                    snprintf(path, sizeof path, "/sys/fs/cgroup%s/cpu.max", line + 3);
            }
        fclose(f);
    }
    unsigned long long quota = 0, period = 0;
    int n = 0;
    if ((f = fopen(path, "re")) || (f = fopen("/sys/fs/cgroup/cpu.max", "re"))) {
        n = fscanf(f, "%llu %llu", &quota, &period); /* "max 100000": no quota */
        fclose(f);
    } else if ((f = fopen("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "re"))) { /* cgroup v1 */
        long long q = -1;                                                  /* -1: no quota */
        n = fscanf(f, "%lld", &q);
        fclose(f);
        quota = q > 0 ? (unsigned long long)q : 0;
        if (n == 1 && (f = fopen("/sys/fs/cgroup/cpu/cpu.cfs_period_us", "re"))) {
            n += fscanf(f, "%llu", &period);
            fclose(f);
        }
    }
    if (n != 2 || period == 0 || quota == 0)
        return 0;
    return (quota + period - 1) / period;
}

unsigned sf_cpu_count(unsigned max)
{
    /* as nproc(1): the CPUs this process may run on (taskset, cpusets) */
    cpu_set_t set;
    long n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
    if (n <= 0)
        n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n <= 0)
        n = 1;
    unsigned long long q = cgroup_cpus();
    if (q && q < (unsigned long long)n)
        n = (long)q;
    return (unsigned long)n > max ? max : (unsigned)n;
}
