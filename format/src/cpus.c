/*
 * cpus.c - how many threads a program should run by default, and how much
 * memory it may take (sf/cpus.h).
 */
#include "sf/cpus.h"

#include <errno.h>
#include <sched.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
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

unsigned long long sf_memory_max_bytes(const char *text)
{
    unsigned long long n;
    char tail;
    int k = sscanf(text, "%llu%c", &n, &tail);
    if (k < 1 || (k == 2 && tail != '\n') || text[0] < '0' || text[0] > '9')
        return 0;                     /* "max": no limit */
    return n >= (1ull << 62) ? 0 : n; /* v1's "no limit" is a page-rounded 2^63 - 1 */
}

/* Whether the /proc/self/cgroup line (without its number) "CONTROLLERS:PATH"
 * is the hierarchy of controller (v1: "memory:/a", "cpu,cpuacct:/a"), or
 * for controller NULL the unified one (v2: ":/a"). */
static int is_hierarchy(const char *rest, const char *controller)
{
    size_t n = strcspn(rest, ":");
    if (!controller)
        return n == 0;
    for (const char *p = rest; p < rest + n;) {
        size_t k = strcspn(p, ",:");
        if (k == strlen(controller) && strncmp(p, controller, k) == 0)
            return 1;
        p += k + 1;
    }
    return 0;
}

/* A limit in a file's text, or 0 for none; and the limit that a cgroup's
 * directory sets through file, parsed by parse. */
typedef unsigned long long parse_fn(const char *text);
typedef unsigned long long limit_fn(const char *dir, const char *file, parse_fn *parse);

/* Room for a directory of cgroup_limit() (PATH_MAX + 64), a slash and a
 * file name: a shorter buffer could cut the name off. */
#define LIMIT_PATH_MAX (PATH_MAX + 128)

/* The limit that file in dir sets, or 0 for none. */
static unsigned long long file_limit(const char *dir, const char *file, parse_fn *parse)
{
    char path[LIMIT_PATH_MAX], text[128];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    return slurp(path, text, sizeof text) == 0 ? parse(text) : 0;
}

/* The CPUs one v1 cgroup's quota allows: cpu.cfs_quota_us (-1 for none)
 * over cpu.cfs_period_us, or 0 for none. (A limit_fn: file and parse are
 * not used.) */
static unsigned long long v1_cpus(const char *dir, const char *file, parse_fn *parse)
{
    char path[LIMIT_PATH_MAX], text[128];
    long long quota;
    unsigned long long period;
    (void)file;
    (void)parse;
    snprintf(path, sizeof path, "%s/cpu.cfs_quota_us", dir);
    if (slurp(path, text, sizeof text) != 0 || sscanf(text, "%lld", &quota) != 1 || quota <= 0)
        return 0;
    snprintf(path, sizeof path, "%s/cpu.cfs_period_us", dir);
    if (slurp(path, text, sizeof text) != 0 || sscanf(text, "%llu", &period) != 1 || period == 0)
        return 0;
    return ((unsigned long long)quota + period - 1) / period;
}

/* The smallest limit that limit(dir, file, parse) finds in the cgroup of
 * this process or in any parent up to the root (a systemd slice's
 * CPUQuota= or MemoryMax= is on a parent), or 0 for none: in the cgroup v2
 * hierarchy (controller NULL), or in the v1 hierarchy of controller,
 * mounted at /sys/fs/cgroup/CONTROLLER. A container limited on a 64-CPU
 * host sees 64 online CPUs and all the host's memory, and its own cgroup
 * at the root of the mount, the end of the walk. */
static unsigned long long cgroup_limit(const char *controller, limit_fn *limit, const char *file,
                                       parse_fn *parse)
{
    char dir[PATH_MAX] = "", *line = NULL;
    size_t cap = 0;
    FILE *f = fopen("/proc/self/cgroup", "re");
    if (f) {
        while (getline(&line, &cap, f) > 0) { /* a path may be long */
            char *rest = strchr(line, ':'), *path = rest ? strchr(rest + 1, ':') : NULL;
            if (!path || !is_hierarchy(rest + 1, controller))
                continue;
            path++;
            path[strcspn(path, "\n")] = '\0';
            if (strlen(path) < sizeof dir)
                snprintf(dir, sizeof dir, "%s", strcmp(path, "/") ? path : "");
        }
        free(line);
        fclose(f);
    }
    unsigned long long best = 0;
    for (;;) { /* from the process's cgroup up to the root */
        char path[sizeof dir + 64];
        snprintf(path, sizeof path, "/sys/fs/cgroup%s%s%s", controller ? "/" : "",
                 controller ? controller : "", dir);
        unsigned long long c = limit(path, file, parse);
        if (c && (!best || c < best))
            best = c;
        char *slash = strrchr(dir, '/');
        if (!slash)
            break;
        *slash = '\0';
    }
    return best;
}

/* The CPUs the cgroup quotas of this process allow, or 0 for none: v2's
 * cpu.max, else v1's cpu.cfs_quota_us over cpu.cfs_period_us. */
static unsigned long long cgroup_cpus(void)
{
    unsigned long long best = cgroup_limit(NULL, file_limit, "cpu.max", sf_cpu_max_cpus);
    return best ? best : cgroup_limit("cpu", v1_cpus, NULL, NULL);
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

unsigned long long sf_memory_available(void)
{
    /* the host's: what it can give without swapping, page cache included */
    char line[256];
    unsigned long long best = 0, kb;
    FILE *f = fopen("/proc/meminfo", "re");
    if (f) {
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1 && kb < UINT64_MAX / 1024)
                best = kb * 1024;
        fclose(f);
    }
    /* the cgroup's: v2's memory.max (the OOM killer's line) and memory.high
     * (where the kernel starts throttling), else v1's limit */
    unsigned long long c = cgroup_limit(NULL, file_limit, "memory.max", sf_memory_max_bytes),
                       h = cgroup_limit(NULL, file_limit, "memory.high", sf_memory_max_bytes);
    if (h && (!c || h < c))
        c = h;
    if (!c)
        c = cgroup_limit("memory", file_limit, "memory.limit_in_bytes", sf_memory_max_bytes);
    if (c && (!best || c < best))
        best = c;
    return best;
}

const char *sf_spawn_strerror(int err)
{
    if (err == EAGAIN)
        return "out of memory, or at a limit on processes (ulimit -u, a cgroup's pids.max)";
    return strerror(err);
}
