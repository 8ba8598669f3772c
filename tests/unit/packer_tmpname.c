/* Temporary names come from one formula (sf_tmp_name): the pack writer, the
 * signal handler and the manifest all use it. */
#include "manifest.h"
#include "runner.h"
#include "sf/store.h"

#include <stdio.h>
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
