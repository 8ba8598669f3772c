/*
 * embedded.c - serving the built-in sample site (see embedded.h).
 *
 * LMDB opens packs by path, so the bytes linked into the binary are first
 * copied into a memory file: memfd_create gives an anonymous tmpfs file
 * without touching the file system, sealing makes it immutable like any
 * pack, and /proc/self/fd/N is a path to it that LMDB can open (packs are
 * opened with MDB_NOSUBDIR | MDB_NOLOCK, so LMDB opens exactly that path and
 * creates no lock file beside it). Once LMDB holds its own descriptor and
 * map, ours is closed; the memory goes away with the snapshot.
 *
 * The copy costs the pack's size in RAM once (about 110 KiB for www/), and
 * the same validation as any pack runs on it.
 */
#include "embedded.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Defined by the file servd/embedded.cmake generates from
 * servd/embedded_site.c.in (the .incbin of the pack built from www/). */
extern const unsigned char sv__embedded_site[];
extern const uint64_t sv__embedded_site_size;

size_t sv_embedded_size(void)
{
    return (size_t)sv__embedded_site_size;
}

int sv_embedded_open(int nreaders, sv_snapshot **out, char *err, size_t errlen)
{
    size_t size = sv_embedded_size();
    char path[64];
    int rc;

    if (size == 0) {
        snprintf(err, errlen,
                 "this servd was built without the built-in site (servd-pack was not "
                 "built); give a pack with --pack");
        return SF_ENOTFOUND;
    }
    int fd = memfd_create("servd-builtin-site", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) {
        snprintf(err, errlen, "%s: memfd_create: %s", SV_EMBEDDED_NAME, strerror(errno));
        return SF_EIO;
    }
    for (size_t done = 0; done < size;) {
        ssize_t n = write(fd, sv__embedded_site + done, size - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            snprintf(err, errlen, "%s: writing the memory file: %s", SV_EMBEDDED_NAME,
                     n < 0 ? strerror(errno) : "no progress");
            rc = SF_EIO;
            goto out_close;
        }
        done += (size_t)n;
    }
    /* Immutable from here on, like a pack on disk that is only ever
     * replaced, never written. */
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) != 0) {
        snprintf(err, errlen, "%s: sealing the memory file: %s", SV_EMBEDDED_NAME, strerror(errno));
        rc = SF_EIO;
        goto out_close;
    }
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    rc = sv_snapshot_open(path, nreaders, out, NULL, err, errlen);

out_close:
    close(fd);
    return rc;
}
