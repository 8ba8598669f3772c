/*
 * cpus.c - how many threads a program should run by default (sf/cpus.h).
 */
#include "sf/cpus.h"

#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

unsigned long long sf_cpu_max_cpus(const char *text)
{
    unsigned long long quota, period;
    char tail;
    if (sscanf(text, "%llu %llu%c", &quota, &period, &tail) < 2 || quota == 0 || period == 0)
        return 0; /* "max 100000": no quota */
    return (quota + period - 1) / period;
}

/* Reads a small file whole into buf. @return 0, or -1. */
static int slurp(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, cap - 1, f);
    fclose(f);
    buf[n] = '\0';
    return 0;
}

/* The CPUs the cgroup quotas of this process allow, or 0 for none: v2's
 * cpu.max of its cgroup and of every parent up to the root (a systemd
 * slice's CPUQuota= is on a parent), the smallest; else v1's
 * cpu.cfs_quota_us over cpu.cfs_period_us. A container limited to 2 CPUs
 * on a 64-CPU host sees 64 online CPUs, and its own cgroup at
 * /sys/fs/cgroup. */
static unsigned long long cgroup_cpus(void)
{
    char line[512], dir[sizeof line + 32] = "", text[128];
    FILE *f = fopen("/proc/self/cgroup", "re");
    if (f) {
        while (fgets(line, sizeof line, f))
            if (strncmp(line, "0::", 3) == 0) {
                line[strcspn(line, "\n")] = '\0';
                snprintf(dir, sizeof dir, "%s", strcmp(line + 3, "/") ? line + 3 : "");
            }
        fclose(f);
    }
    unsigned long long best = 0;
    for (;;) { /* from the process's cgroup up to the root */
        char path[sizeof dir + 64];
        snprintf(path, sizeof path, "/sys/fs/cgroup%s/cpu.max", dir);
        unsigned long long c = slurp(path, text, sizeof text) == 0 ? sf_cpu_max_cpus(text) : 0;
        if (c && (!best || c < best))
            best = c;
        char *slash = strrchr(dir, '/');
        if (!slash)
            break;
        *slash = '\0';
    }
    if (best)
        return best;
    long long quota;
    unsigned long long period;
    if (slurp("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", text, sizeof text) != 0 ||
        sscanf(text, "%lld", &quota) != 1 || quota <= 0 || /* -1: no quota */
        slurp("/sys/fs/cgroup/cpu/cpu.cfs_period_us", text, sizeof text) != 0 ||
        sscanf(text, "%llu", &period) != 1 || period == 0)
        return 0;
    return ((unsigned long long)quota + period - 1) / period;
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
