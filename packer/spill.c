/*
 * spill.c - the temporary file of a build's compressed variants (spill.h).
 */
#include "spill.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct pk_spill {
    int fd;
    _Atomic uint64_t end; /* the bytes given out so far */
    char dir[PATH_MAX];   /* for messages */
};

int pk_spill_open(const char *dir, pk_spill **out, char *err, size_t errlen)
{
    pk_spill *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    snprintf(s->dir, sizeof s->dir, "%s", dir);
    s->fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (s->fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)) {
        /* no O_TMPFILE on this file system: a name, removed at once */
        char name[PATH_MAX];
        if (snprintf(name, sizeof name, "%s/.servd-pack-spill-XXXXXX", dir) >= (int)sizeof name)
            errno = ENAMETOOLONG;
        else if ((s->fd = mkostemp(name, O_CLOEXEC)) >= 0)
            unlink(name);
    }
    if (s->fd < 0) {
        snprintf(err, errlen, "cannot create a temporary file in %.1024s: %s", dir,
                 strerror(errno));
        free(s);
        return -1;
    }
    atomic_init(&s->end, 0);
    *out = s;
    return 0;
}

int pk_spill_put(pk_spill *s, const void *p, size_t n, uint64_t *off, char *err, size_t errlen)
{
    uint64_t at = atomic_fetch_add_explicit(&s->end, n, memory_order_relaxed);
    for (size_t done = 0; done < n;) {
        ssize_t w = pwrite(s->fd, (const char *)p + done, n - done, (off_t)(at + done));
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            snprintf(err, errlen,
                     "cannot write the compressed variants to a temporary file in %.1024s: %s",
                     s->dir, strerror(w < 0 ? errno : ENOSPC));
            return -1;
        }
        done += (size_t)w;
    }
    *off = at;
    return 0;
}

int pk_spill_get(pk_spill *s, uint64_t off, void *out, size_t n, char *err, size_t errlen)
{
    for (size_t done = 0; done < n;) {
        ssize_t r = pread(s->fd, (char *)out + done, n - done, (off_t)(off + done));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            snprintf(err, errlen,
                     "cannot read the compressed variants back from their temporary file in "
                     "%.1024s: %s",
                     s->dir, r < 0 ? strerror(errno) : "it ended early");
            return -1;
        }
        done += (size_t)r;
    }
    return 0;
}

uint64_t pk_spill_size(const pk_spill *s)
{
    return s ? atomic_load_explicit(&s->end, memory_order_relaxed) : 0;
}

void pk_spill_close(pk_spill *s)
{
    if (!s)
        return;
    close(s->fd);
    free(s);
}
