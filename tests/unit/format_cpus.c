/* The default number of threads (sf/cpus.h): the CPUs the process
 * may run on, as nproc(1) counts them, not every online CPU. */
#include "sf/cpus.h"
#include "runner.h"

#include <sched.h>

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
