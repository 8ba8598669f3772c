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
