/* sf_check_isolated: a check that crashes, hangs or fails in the child is a
 * refusal with a message; the parent survives all of them. */
#include "runner.h"
#include "sf/isolate.h"
#include "sf/store.h"

#include <signal.h>
#include <unistd.h>

static int passes(void *arg, const char *path, char *err, size_t errlen)
{
    return 0;
}

static int fails(void *arg, const char *path, char *err, size_t errlen)
{
    snprintf(err, errlen, "%s: corrupt pack: %s", path, (const char *)arg);
    return SF_ECORRUPT;
}

static int crashes(void *arg, const char *path, char *err, size_t errlen)
{
    raise(*(int *)arg); /* what a damaged LMDB page does to a reader */
    return 0;
}

static int hangs(void *arg, const char *path, char *err, size_t errlen)
{
    for (;;)
        pause();
    return 0;
}

TEST(isolated_check_passes)
{
    char err[256] = "";
    ASSERT_EQ(sf_check_isolated(passes, NULL, "site.lmdb", 5000, err, sizeof err), SF_OK);
}

TEST(isolated_check_failure_keeps_code_and_message)
{
    char err[256] = "";
    int rc = sf_check_isolated(fails, "bad record", "site.lmdb", 5000, err, sizeof err);
    ASSERT_EQ(rc, SF_ECORRUPT);
    ASSERT_STR_EQ(err, "site.lmdb: corrupt pack: bad record");
}

TEST(isolated_check_crash_is_a_refusal)
{
    static int sigs[] = {SIGSEGV, SIGBUS, SIGABRT, SIGFPE};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        char err[256] = "";
        /* the sanitizers' handlers would turn the signal into a report and an
         * exit status: both must be refusals */
        int rc = sf_check_isolated(crashes, &sigs[i], "site.lmdb", 5000, err, sizeof err);
        ASSERT_EQ(rc, SF_ECORRUPT);
        ASSERT(strstr(err, "site.lmdb: corrupt pack: reading it crashed") == err);
    }
}

TEST(isolated_check_hang_is_a_refusal)
{
    char err[256] = "";
    int rc = sf_check_isolated(hangs, NULL, "site.lmdb", 200, err, sizeof err);
    ASSERT_EQ(rc, SF_ECORRUPT);
    ASSERT(strstr(err, "did not finish in 200 ms") != NULL);
}

/* Bodies are content addressed: a body whose bytes do not hash to its key
 * (damage inside the body, which no structure check sees) is refused. */
TEST(structure_check_refuses_damaged_body)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/body.lmdb", t_tmpdir());
    sf_writer *w;
    char err[512];
    ASSERT_EQ(sf_writer_open(path, 1 << 20, &w, err, sizeof err), SF_OK);
    uint8_t key[SF_KEY_LEN] = {0}; /* not the SHA-256 of "hello" */
    ASSERT_EQ(sf_writer_put_body(w, key, "hello", 5), SF_OK);
    sf_meta m;
    memset(&m, 0, sizeof m);
    sf_pack_id *id; /* the right id (of no paths): only the body is wrong */
    ASSERT_EQ(sf_pack_id_begin(&id), SF_OK);
    ASSERT_EQ(sf_pack_id_end(id, m.pack_id), SF_OK);
    ASSERT_EQ(sf_writer_commit(w, &m, err, sizeof err), SF_OK);
    int rc = sf_check_isolated(sf_pack_check_structure, NULL, path, 5000, err, sizeof err);
    ASSERT_EQ(rc, SF_ECORRUPT);
    ASSERT(strstr(err, "does not match its SHA-256") != NULL);
}
