/* The default number of threads (sf/cpus.h): the CPUs the process
 * may run on, as nproc(1) counts them, not every online CPU; and the
 * memory it may take. */
#include "sf/cpus.h"
#include "runner.h"

#include <sched.h>
#include <sys/sysinfo.h>

TEST(cpus_follow_the_affinity)
{
    cpu_set_t all, one;
    ASSERT_EQ(sched_getaffinity(0, sizeof all, &all), 0);
    unsigned n = sf_cpu_count(1024);
    ASSERT(n >= 1 && n <= (unsigned)CPU_COUNT(&all));
    int first = 0;
    while (!CPU_ISSET(first, &all))
        first++;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0); /* taskset -c FIRST */
    ASSERT_EQ(sf_cpu_count(1024), 1);
    ASSERT_EQ(sched_setaffinity(0, sizeof all, &all), 0);
    ASSERT_EQ(sf_cpu_count(1024), n);
    ASSERT_EQ(sf_cpu_count(1), 1); /* at most max */
}

TEST(cpus_of_a_cgroup_quota)
{
    ASSERT_EQ(sf_cpu_max_cpus("200000 100000\n"), 2);
    ASSERT_EQ(sf_cpu_max_cpus("150000 100000"), 2); /* 1.5 CPUs: 2 threads */
    ASSERT_EQ(sf_cpu_max_cpus("50000 100000\n"), 1);
    ASSERT_EQ(sf_cpu_max_cpus("max 100000\n"), 0);
    ASSERT_EQ(sf_cpu_max_cpus(""), 0);
    ASSERT_EQ(sf_cpu_max_cpus("100000 0\n"), 0);
    ASSERT_EQ(sf_cpu_max_cpus("0 100000\n"), 0);
}

TEST(memory_of_a_cgroup_limit)
{
    ASSERT_EQ(sf_memory_max_bytes("1073741824\n"), 1073741824ull);
    ASSERT_EQ(sf_memory_max_bytes("536870912"), 536870912ull);
    ASSERT_EQ(sf_memory_max_bytes("max\n"), 0);                 /* v2: none */
    ASSERT_EQ(sf_memory_max_bytes("9223372036854771712\n"), 0); /* v1: none */
    ASSERT_EQ(sf_memory_max_bytes(""), 0);
    ASSERT_EQ(sf_memory_max_bytes("-1\n"), 0);
    ASSERT_EQ(sf_memory_max_bytes("12k\n"), 0);
}

TEST(memory_available_is_at_most_the_machine)
{
    struct sysinfo si;
    ASSERT_EQ(sysinfo(&si), 0);
    unsigned long long total = (unsigned long long)si.totalram * si.mem_unit;
    unsigned long long n = sf_memory_available();
    ASSERT(n > 0); /* Linux has /proc/meminfo's MemAvailable */
    ASSERT(n <= total);
}
