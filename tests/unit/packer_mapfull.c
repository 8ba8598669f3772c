/* A pack that outgrows its map says so: SF_EFULL, "pack map full" (not the
 * generic "LMDB error"), and build's message calls it a sizing bug. */
#include "runner.h"
#include "sf/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

TEST(writer_map_full_is_named)
{
    char path[2048];
    snprintf(path, sizeof path, "%s/full.lmdb", t_tmpdir());
    sf_writer *w;
    char err[512];
    /* Capacity 0: the map is only the writer's fixed slack (tens of MiB). */
    ASSERT_EQ(sf_writer_open(path, 0, &w, err, sizeof err), 0);
    size_t n = 1 << 20;
    uint8_t *body = calloc(1, n);
    ASSERT(body != NULL);
    int rc = 0;
    for (uint32_t i = 0; i < 1024 && rc == 0; i++) {
        uint8_t key[SF_KEY_LEN] = {0};
        memcpy(key, &i, sizeof i);
        body[0] = (uint8_t)i; /* distinct bodies: nothing is deduplicated */
        rc = sf_writer_put_body(w, key, body, n);
    }
    ASSERT_EQ(rc, SF_EFULL);
    ASSERT_STR_EQ(sf_strerror(rc), "pack map full");
    sf_writer_abort(w);
    struct stat st;
    ASSERT_NE(stat(path, &st), 0); /* nothing appeared */
    free(body);
}
