/* The memory budget of a build's jobs (budget.h): what the jobs let in hold
 * stays within the limit, a job larger than the limit runs alone, and jobs
 * are let in in the order they asked. */
#include "budget.h"
#include "runner.h"

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

typedef struct asker {
    pk_budget *b;
    uint64_t bytes;
    atomic_int in; /* let in */
    pthread_t t;
} asker;

static void *take(void *arg)
{
    asker *a = arg;
    pk_budget_take(a->b, a->bytes);
    atomic_store(&a->in, 1);
    return NULL;
}

static void nap(void)
{
    nanosleep(&(struct timespec){0, 2 * 1000 * 1000}, NULL);
}

/* Starts a job that asks for bytes, and waits until it has asked (it has
 * its ticket), for at most 10 s. */
static void ask(asker *a, pk_budget *b, uint64_t bytes)
{
    pthread_mutex_lock(&b->mu);
    uint64_t before = b->next;
    pthread_mutex_unlock(&b->mu);
    *a = (asker){.b = b, .bytes = bytes};
    ASSERT_EQ(pthread_create(&a->t, NULL, take, a), 0);
    for (int i = 0;; i++) {
        pthread_mutex_lock(&b->mu);
        int asked = b->next > before;
        pthread_mutex_unlock(&b->mu);
        if (asked)
            break;
        ASSERT(i < 5000);
        nap();
    }
}

/* Waits (at most 10 s) until job a is let in. */
static void wait_in(asker *a)
{
    for (int i = 0; !atomic_load(&a->in); i++) {
        ASSERT(i < 5000);
        nap();
    }
    ASSERT_EQ(pthread_join(a->t, NULL), 0);
}

/* A job that asks for bytes and is let in at once. */
static void enter(asker *a, pk_budget *b, uint64_t bytes)
{
    ask(a, b, bytes);
    wait_in(a);
}

/* That a is still waiting some 50 ms after it asked. */
static void still_out(asker *a)
{
    for (int i = 0; i < 25; i++)
        nap();
    ASSERT_EQ(atomic_load(&a->in), 0);
}

TEST(budget_lets_a_job_larger_than_the_limit_in_alone)
{
    pk_budget b;
    pk_budget_init(&b, 100);
    asker small, big, after;
    enter(&small, &b, 50);
    ask(&big, &b, 150);
    still_out(&big); /* 50 + 150 > 100 */
    pk_budget_give(&b, 50);
    wait_in(&big); /* alone, over the limit */
    ASSERT_EQ(b.held, 150);
    ask(&after, &b, 10);
    still_out(&after); /* nothing fits beside a job over the limit */
    pk_budget_give(&b, 150);
    wait_in(&after);
    pk_budget_give(&b, 10);
    ASSERT_EQ(b.held, 0);
    ASSERT_EQ(b.running, 0);
    ASSERT_EQ(b.waited, 2);
    pk_budget_destroy(&b);
}

TEST(budget_lets_jobs_in_in_the_order_they_asked)
{
    pk_budget b;
    pk_budget_init(&b, 100);
    asker first, large, small;
    enter(&first, &b, 80);
    ask(&large, &b, 50);
    still_out(&large);
    ask(&small, &b, 10); /* would fit beside the first, but asked after the large one */
    still_out(&small);
    pk_budget_give(&b, 80);
    wait_in(&large);
    wait_in(&small); /* 50 + 10 fit together */
    ASSERT_EQ(b.held, 60);
    ASSERT_EQ(b.waited, 1); /* the small one waited for its turn, not for room */
    pk_budget_give(&b, 50);
    pk_budget_give(&b, 10);
    pk_budget_destroy(&b);
}

TEST(budget_with_no_limit_lets_everything_in)
{
    pk_budget b;
    pk_budget_init(&b, 0);
    pk_budget_take(&b, UINT64_MAX / 2);
    pk_budget_take(&b, UINT64_MAX / 2); /* the same thread: would wait forever with a limit */
    pk_budget_give(&b, UINT64_MAX / 2);
    pk_budget_give(&b, UINT64_MAX / 2);
    ASSERT_EQ(b.waited, 0);
    pk_budget_destroy(&b);
}

#define WORKERS 8
#define ROUNDS  300
#define LIMIT   100

typedef struct worker {
    pk_budget *b;
    atomic_ullong *inside; /* what the jobs let in say they hold */
    atomic_ullong *most;
    unsigned seed;
    int over; /* saw more than LIMIT inside */
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    for (int i = 0; i < ROUNDS; i++) {
        w->seed = w->seed * 1103515245u + 12345u;
        uint64_t need = 10 + (w->seed >> 16) % 51; /* 10 to 60 */
        pk_budget_take(w->b, need);
        unsigned long long now = atomic_fetch_add(w->inside, need) + need;
        if (now > LIMIT)
            w->over = 1;
        unsigned long long m = atomic_load(w->most);
        while (now > m && !atomic_compare_exchange_weak(w->most, &m, now))
            ;
        if (i % 8 == 0)
            nanosleep(&(struct timespec){0, 100 * 1000}, NULL);
        atomic_fetch_sub(w->inside, need);
        pk_budget_give(w->b, need);
    }
    return NULL;
}

TEST(budget_holds_within_its_limit_under_many_threads)
{
    pk_budget b;
    pk_budget_init(&b, LIMIT);
    atomic_ullong inside = 0, most = 0;
    worker w[WORKERS];
    pthread_t t[WORKERS];
    for (int i = 0; i < WORKERS; i++) {
        w[i] = (worker){.b = &b, .inside = &inside, .most = &most, .seed = (unsigned)i * 7919u};
        ASSERT_EQ(pthread_create(&t[i], NULL, work, &w[i]), 0);
    }
    for (int i = 0; i < WORKERS; i++) {
        ASSERT_EQ(pthread_join(t[i], NULL), 0);
        ASSERT_EQ(w[i].over, 0);
    }
    ASSERT(atomic_load(&most) <= LIMIT);
    ASSERT_EQ(b.held, 0);
    ASSERT_EQ(b.running, 0);
    ASSERT_EQ(b.next, (uint64_t)WORKERS * ROUNDS);
    ASSERT_EQ(b.turn, b.next);
    pk_budget_destroy(&b);
}

TEST(budget_counts_what_a_job_keeps_until_the_end)
{
    pk_budget b;
    pk_budget_init(&b, 100);
    pk_budget_keep(&b, 70); /* an .svgz's contents, kept until the write */
    asker small, large;
    enter(&small, &b, 20); /* 70 + 20 fit */
    ask(&large, &b, 20);
    still_out(&large); /* 70 + 20 + 20 do not */
    pk_budget_give(&b, 20);
    wait_in(&large);
    pk_budget_give(&b, 20);
    pk_budget_keep(&b, 50); /* 120 kept: over the limit, a job runs alone */
    enter(&small, &b, 10);
    ask(&large, &b, 10);
    still_out(&large);
    pk_budget_give(&b, 10);
    wait_in(&large);
    pk_budget_give(&b, 10);
    ASSERT_EQ(b.held, 120);
    ASSERT_EQ(b.running, 0);
    pk_budget_destroy(&b);
}
