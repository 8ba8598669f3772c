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
#include <sys/stat.h>
#include <unistd.h>

struct pk_spill {
    int fd;
    _Atomic uint64_t end; /* the bytes given out so far */
    char dir[PATH_MAX];   /* for messages */
    /* pk_spill_drop's count of the bytes dropped in each block of the file,
     * made at its first call; a block wholly dropped is punched out */
    uint32_t *dropped;
    uint64_t block; /* the file system's block size */
    int no_punch;   /* the file system cannot punch holes, or no memory for the count */
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
    struct stat st;
    s->block = fstat(s->fd, &st) == 0 && st.st_blksize > 0 ? (uint64_t)st.st_blksize : 4096;
    /* whether holes can be punched (the empty file has nothing to lose) */
    s->no_punch =
        fallocate(s->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, (off_t)s->block) != 0;
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

void pk_spill_drop(pk_spill *s, uint64_t off, size_t n)
{
    uint64_t end = pk_spill_size(s);
    if (!s->dropped && !s->no_punch) {
        uint64_t blocks = (end + s->block - 1) / s->block;
        s->dropped = calloc(blocks ? blocks : 1, sizeof *s->dropped);
        s->no_punch = !s->dropped;
    }
    while (n > 0 && !s->no_punch) {
        uint64_t b = off / s->block, start = b * s->block;
        uint64_t in = s->block - (off - start) < n ? s->block - (off - start) : n;
        uint64_t whole = end - start < s->block ? end - start : s->block;
        s->dropped[b] += (uint32_t)in;
        if (s->dropped[b] == whole && fallocate(s->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                                                (off_t)start, (off_t)whole) != 0)
            s->no_punch = errno == EOPNOTSUPP || errno == ENOSYS;
        off += in;
        n -= (size_t)in;
    }
}

uint64_t pk_spill_room(const pk_spill *s)
{
    struct stat st;
    if (!s || s->no_punch || fstat(s->fd, &st) != 0)
        return 0;
    return (uint64_t)st.st_blocks * 512;
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
    free(s->dropped);
    free(s);
}
