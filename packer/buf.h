/*
 * buf.h - a growable byte buffer for rendering header blocks, table lines
 * and messages. An allocation failure is sticky: every later append is a
 * no-op and pk_buf_failed() reports it once at the end, so callers check
 * once instead of after every append.
 */
#ifndef PK_BUF_H
#define PK_BUF_H

#include <stddef.h>
#include <stdint.h>

typedef struct pk_buf {
    char *p; /* NUL-terminated whenever len > 0 or cap > 0 */
    size_t len;
    size_t cap;
    int failed; /* an allocation failed: contents are incomplete */
} pk_buf;

#define PK_BUF_INIT                                                                                \
    {                                                                                              \
        NULL, 0, 0, 0                                                                              \
    }

void pk_buf_add(pk_buf *b, const void *p, size_t n);
void pk_buf_adds(pk_buf *b, const char *s);
void pk_buf_addf(pk_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void pk_buf_reset(pk_buf *b);
void pk_buf_free(pk_buf *b);
/* @return 0, or -1 when an allocation failed at some point. */
int pk_buf_failed(const pk_buf *b);

#endif
