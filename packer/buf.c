/* buf.c - see buf.h. */
#include "buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* First allocation; doubling from here keeps appends amortised O(1). */
#define BUF_MIN_CAP 256

static int grow(pk_buf *b, size_t extra)
{
    if (b->failed)
        return -1;
    if (extra >= SIZE_MAX / 2 - b->len) {
        b->failed = 1;
        return -1;
    }
    size_t need = b->len + extra + 1;
    if (need <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : BUF_MIN_CAP;
    while (cap < need)
        cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
        b->failed = 1;
        return -1;
    }
    b->p = p;
    b->cap = cap;
    return 0;
}

void pk_buf_add(pk_buf *b, const void *p, size_t n)
{
    if (grow(b, n) != 0)
        return;
    if (n)
        memcpy(b->p + b->len, p, n);
    b->len += n;
    b->p[b->len] = '\0';
}

void pk_buf_adds(pk_buf *b, const char *s)
{
    pk_buf_add(b, s, strlen(s));
}

void pk_buf_addf(pk_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->failed = 1;
        return;
    }
    if (grow(b, (size_t)n) != 0)
        return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void pk_buf_reset(pk_buf *b)
{
    b->len = 0;
    if (b->p)
        b->p[0] = '\0';
}

void pk_buf_free(pk_buf *b)
{
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
    b->failed = 0;
}

int pk_buf_failed(const pk_buf *b)
{
    return b->failed ? -1 : 0;
}
