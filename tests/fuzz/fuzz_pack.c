/*
 * fuzz_pack - random bytes as a whole pack file.
 *
 * LMDB trusts its page structure, so servd never walks a new pack in its own
 * process before a forked child has walked it unharmed (sf/isolate.h). The
 * property checked here is the one that design rests on: whatever the bytes,
 * sf_check_isolated() either refuses the file, or accepts it and the same
 * walk then returns in this process without crashing and with the same
 * verdict. (The child's own coverage is not seen by libFuzzer; the seeds are
 * real packs, so mutations stay close to valid structure.) Both walks skip
 * the body hashes and the pack id (SF_CHECK_NO_HASH): those refuse nearly
 * every mutated record or body before LMDB's cursor reaches the bytes this
 * property is about, and they read nothing a hash could crash on.
 *
 * A second property: in an accepted file, every view the readers hand out
 * (record, body, path key) lies inside the file. LMDB takes a value's length
 * from its node unchecked, so a view could run past the end; its first and
 * last bytes are read here, which faults (or ASan reports) if it does.
 */
#include "fuzz_child.h"
#include "sf/isolate.h"
#include "sf/store.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* A walk of a fuzzed file that takes longer than this is a hang. */
#define FUZZ_CHECK_TIMEOUT_MS 5000

static const char *path; /* the input's memory file */
static volatile uint8_t sink;

static void touch(sf_view v)
{
    if (v.len)
        sink ^= ((const volatile uint8_t *)v.ptr)[0] ^ ((const volatile uint8_t *)v.ptr)[v.len - 1];
}

static int touch_record(void *arg, sf_view path, sf_view rec)
{
    touch(path);
    touch(rec);
    return 0;
}

static int touch_body(void *arg, const uint8_t key[SF_KEY_LEN], sf_view bytes)
{
    touch(bytes);
    return 0;
}

static int touch_path(void *arg, sf_view path, const sf_entry *e)
{
    touch(e->mime);
    touch(e->target);
    for (unsigned i = 0; i < e->nvariants; i++) {
        sf_view body;
        if (sf_body(arg, &e->variants[i], &body) == 0)
            touch(body);
    }
    return 0;
}

/* Reads the ends of every view of an accepted file. */
static void touch_views(void)
{
    sf_pack *p;
    sf_reader *r;
    char err[512];
    if (sf_pack_open(path, &p, err, sizeof err) != 0)
        return;
    if (sf_reader_begin(p, &r) == 0) {
        (void)sf_foreach_record(r, touch_record, NULL);
        (void)sf_foreach_body(r, touch_body, NULL);
        (void)sf_foreach_path(r, touch_path, r, err, sizeof err);
        sf_reader_end(r);
    }
    sf_pack_close(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    path = fuzz_pack_file(data, size);
    char err[1024];
    if (sf_check_isolated(sf_pack_check_structure, SF_CHECK_NO_HASH, path, FUZZ_CHECK_TIMEOUT_MS,
                          err, sizeof err) != 0)
        return 0;
    if (sf_pack_check_structure(SF_CHECK_NO_HASH, path, err, sizeof err) != 0) {
        fprintf(stderr, "fuzz_pack: the child accepted the file, this process refused it: %s\n",
                err);
        abort();
    }
    touch_views();
    return 0;
}
