/*
 * fuzz_lmdb_walk - random bytes as a pack file, walked page by page as
 * sf_pack_open() does before liblmdb reads a page (sf__lmdb_walk,
 * format/src/lmdb_walk.c).
 *
 * fuzz_pack and fuzz_pack_readers reach the walk only through their forked
 * check, whose crashes count as refusals: a read outside the file in the
 * walk itself would pass there as a refused pack. Here it runs in-process,
 * on the meta page at offset 0 and, when the input has one, on the one at
 * its page size (LMDB uses the newer; either must be safe). Whatever the
 * bytes: no read outside the map or the input (ASan), no leak, no hang
 * (every page is reached at most once), and a refusal says
 * "corrupt pack (...)". Then the walk's promise: a file sf_pack_open()
 * accepts (the walk, then liblmdb's open) is read in-process, with no
 * child to contain a crash, by every reader a command or servd uses: each
 * path and body with a cursor, and lookups by key, which liblmdb must
 * answer without crashing, failing an assertion or looping. The seeds are
 * fuzz_pack's (real small packs).
 */
#include "../../format/src/lmdb_layout.h"
#include "fuzz_child.h"
#include "sf/store.h"

#include <string.h>

static void fail(const char *what, int rc, const char *why)
{
    char msg[512];
    snprintf(msg, sizeof msg, "fuzz_lmdb_walk: %s: %d (%s)", what, rc, why);
    __sanitizer_report_error_summary(msg);
    abort();
}

static void walk(int fd, const uint8_t *meta, uint32_t psize)
{
    char why[160] = "";
    int rc = sf__lmdb_walk(fd, meta, psize, why, sizeof why);
    if (rc == SF_ECORRUPT && strncmp(why, "corrupt pack (", 14) != 0)
        fail("a refusal that does not say corrupt pack", rc, why);
    if (rc != 0 && rc != SF_ECORRUPT && rc != SF_EIO && rc != SF_ENOMEM)
        fail("not a documented result", rc, why);
}

static int each_path(void *arg, sf_view key, const sf_entry *e)
{
    (void)arg, (void)key, (void)e;
    return 0;
}

static int each_body(void *arg, const uint8_t key[SF_KEY_LEN], sf_view bytes)
{
    (void)arg, (void)key, (void)bytes;
    return 0;
}

/* Every reader of a pack, on one that opened. */
static void read_all(const char *path)
{
    sf_pack *p;
    sf_reader *r;
    char err[1024];
    if (sf_pack_open(path, &p, err, sizeof err) != 0)
        return;
    if (sf_reader_begin(p, &r) == 0) {
        (void)sf_foreach_path(r, each_path, NULL, err, sizeof err);
        (void)sf_foreach_body(r, each_body, NULL);
        static const char *const keys[] = {"/", "/index.html", "/zzzz", "/a"};
        sf_entry e;
        for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
            (void)sf_lookup(r, keys[i], strlen(keys[i]), &e);
        (void)sf_lookup_special(r, "status:404", &e);
        uint8_t k[SF_KEY_LEN] = {0};
        sf_view v;
        (void)sf_body_by_key(r, k, &v);
        sf_reader_end(r);
    }
    sf_pack_close(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < LMDB_META_LEN)
        return 0;
    const char *path = fuzz_pack_file(data, size);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        abort();
    uint32_t psize = (uint32_t)data[40] | (uint32_t)data[41] << 8 | (uint32_t)data[42] << 16 |
                     (uint32_t)data[43] << 24;
    walk(fd, data, psize);
    if (psize >= LMDB_META_LEN && size >= (size_t)psize + LMDB_META_LEN)
        walk(fd, data + psize, psize);
    close(fd);
    read_all(path);
    return 0;
}
