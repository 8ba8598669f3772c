/*
 * budget.c - the memory the compression of a build may hold (budget.h).
 */
#include "budget.h"

void pk_budget_init(pk_budget *b, uint64_t limit)
{
    *b = (pk_budget){.limit = limit};
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->cv, NULL);
}

void pk_budget_destroy(pk_budget *b)
{
    pthread_mutex_destroy(&b->mu);
    pthread_cond_destroy(&b->cv);
}

/* Whether bytes more fit now (a lone job may hold more than the limit). */
static int room(const pk_budget *b, uint64_t bytes)
{
    return !b->running || (b->held <= b->limit && bytes <= b->limit - b->held);
}

void pk_budget_take(pk_budget *b, uint64_t bytes)
{
    if (!b->limit)
        return;
    pthread_mutex_lock(&b->mu);
    uint64_t ticket = b->next++;
    int waited = 0;
    while (ticket != b->turn || !room(b, bytes)) {
        waited |= ticket == b->turn; /* its turn, but no room */
        pthread_cond_wait(&b->cv, &b->mu);
    }
    b->waited += (uint64_t)waited;
    b->held += bytes;
    b->running++;
    b->turn++;
    pthread_cond_broadcast(&b->cv); /* the next ticket may fit too */
    pthread_mutex_unlock(&b->mu);
}

void pk_budget_keep(pk_budget *b, uint64_t bytes)
{
    if (!b->limit)
        return;
    pthread_mutex_lock(&b->mu);
    b->held += bytes;
    pthread_mutex_unlock(&b->mu);
}

void pk_budget_give(pk_budget *b, uint64_t bytes)
{
    if (!b->limit)
        return;
    pthread_mutex_lock(&b->mu);
    b->held -= bytes;
    b->running--;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
}
