/* Temporary names come from one formula (sf_tmp_name): the pack writer, the
 * signal handler and the manifest all use it. */
#include "manifest.h"
#include "runner.h"
#include "sf/store.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

TEST(tmp_names_from_one_place)
{
    char a[256], b[256], want[256];
    snprintf(want, sizeof want, "out/site.lmdb.tmp-%ld", (long)getpid());
    ASSERT_EQ(sf_tmp_name("out/site.lmdb", a, sizeof a), 0);
    ASSERT_STR_EQ(a, want);
    pk_manifest_tmp_name("out/site.lmdb", b, sizeof b);
    ASSERT_STR_EQ(b, a);
    char tiny[8];
    ASSERT_EQ(sf_tmp_name("out/site.lmdb", tiny, sizeof tiny), SF_ETOOLONG);
}

/* ... and are read back by one function (sf_tmp_name_pid): the leftover
 * warning and the refusal of a temporary file read as a pack. */
TEST(tmp_names_read_back)
{
    char a[256];
    size_t fl = 0;
    ASSERT_EQ(sf_tmp_name("out/site.lmdb", a, sizeof a), 0);
    ASSERT_EQ(sf_tmp_name_pid(a, &fl), (long)getpid());
    ASSERT_EQ(fl, strlen("out/site.lmdb"));
    ASSERT_EQ(sf_tmp_name_pid("site.lmdb.tmp-42", &fl), 42);
    ASSERT_EQ(fl, 9);
    ASSERT_EQ(sf_tmp_name_pid("a.tmp-1.tmp-7", &fl), 7); /* the last one */
    ASSERT_EQ(fl, 7);
    static const char *const not_tmp[] = {
        "site.lmdb",        "site.lmdb.tmp-",   "site.lmdb.tmp-0",
        "site.lmdb.tmp-01", "site.lmdb.tmp-1x", "site.lmdb.tmp-1/x",
        ".tmp-5",           "out/.tmp-5",       "site.tmp-99999999999999999999999"};
    for (size_t i = 0; i < sizeof not_tmp / sizeof not_tmp[0]; i++)
        if (sf_tmp_name_pid(not_tmp[i], NULL) != 0)
            t__fail(__FILE__, __LINE__, "%s taken for a temporary name", not_tmp[i]);
    /* the previous manifest a build keeps (pk_manifest_commit), by the same rules */
    ASSERT_EQ(sf_name_pid("site.json.old-4242", ".old-", &fl), 4242);
    ASSERT_EQ(fl, 9);
    ASSERT_EQ(sf_name_pid("site.json.tmp-4242", ".old-", NULL), 0);
    ASSERT_EQ(sf_name_pid("site.json.old-0", ".old-", NULL), 0);
}
