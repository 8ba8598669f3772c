/*
 * delay.c - a diagnostic, not part of servd: an LD_PRELOAD library that
 * makes an event-loop server slower on purpose. Before each epoll_wait that
 * may block and follows one that returned events, it sleeps DELAY_US
 * microseconds (default 1000). Requests then queue in the server instead of
 * responses queueing in the load generator.
 *
 * bench/RESULTS.md uses it to show that with one wrk thread at c >= 1000, a
 * server that answers more slowly gets more req/s: the client's cost per
 * request depends on where the queue is.
 *
 *   cc -O2 -shared -fPIC -o /tmp/delay.so bench/http/delay.c -ldl
 *   LD_PRELOAD=/tmp/delay.so DELAY_US=1000 taskset -c 1 servd --pack ... --workers 1
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <time.h>

int epoll_wait(int epfd, struct epoll_event *events, int maxevents, int timeout)
{
    static int (*real)(int, struct epoll_event *, int, int);
    static long delay_ns;
    static __thread int last;
    if (!real) { /* a race here sets the same values twice */
        const char *s = getenv("DELAY_US");
        delay_ns = (s ? atol(s) : 1000) * 1000;
        real = (int (*)(int, struct epoll_event *, int, int))dlsym(RTLD_NEXT, "epoll_wait");
        if (!real)
            abort();
    }
    if (timeout != 0 && last > 0 && delay_ns > 0) {
        prctl(PR_SET_TIMERSLACK, 1000UL);
        struct timespec ts = {delay_ns / 1000000000, delay_ns % 1000000000};
        nanosleep(&ts, NULL);
    }
    last = real(epfd, events, maxevents, timeout);
    return last;
}
