/*
 * budget.h - the memory the compression of a build may hold at once
 * (servd-pack build --memory). A job asks for what it will hold before it
 * starts and gives it back when it ends; jobs are let in in the order they
 * asked, each when what the jobs let in hold plus its own fits in the
 * limit. A job that asks while none holds anything is let in whatever it
 * needs: a file larger than the limit is still compressed, alone.
 *
 * The order is kept (a job waiting for room holds back the jobs that asked
 * after it) so that the largest files, which a build compresses first, are
 * not passed over by a stream of small ones until the end.
 */
#ifndef PK_BUDGET_H
#define PK_BUDGET_H

#include <pthread.h>
#include <stdint.h>

typedef struct pk_budget {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t limit;   /* 0: none (take and give do nothing) */
    uint64_t held;    /* by the jobs let in */
    unsigned running; /* jobs let in and not done */
    uint64_t next;    /* the ticket of the next job to ask */
    uint64_t turn;    /* the ticket let in next */
    uint64_t waited;  /* jobs that waited for room */
} pk_budget;

/* A budget of limit bytes (0: none). */
void pk_budget_init(pk_budget *b, uint64_t limit);
void pk_budget_destroy(pk_budget *b);

/* Waits for the turn of a job that will hold bytes, and for room for them. */
void pk_budget_take(pk_budget *b, uint64_t bytes);

/* The job that took bytes is done with them. */
void pk_budget_give(pk_budget *b, uint64_t bytes);

/* Counts bytes as held from now to the end of the build, without waiting:
 * what a job keeps after it ends (the contents of an .svgz, kept until the
 * write). Over the limit, the jobs that follow run alone. */
void pk_budget_keep(pk_budget *b, uint64_t bytes);

#endif
