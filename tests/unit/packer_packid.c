/* The packer and the readers share one pack id (sf_pack_id_*): the id that
 * pk_build writes into meta is the one sf_pack_id_compute recomputes over the
 * pack it wrote, and the load check accepts that pack. */
#include "build.h"
#include "runner.h"
#include "sf/isolate.h"
#include "sf/store.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static void put_file(const char *dir, const char *name, const char *text)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    ASSERT(f != NULL);
    ASSERT_EQ(fwrite(text, 1, strlen(text), f), strlen(text));
    ASSERT_EQ(fclose(f), 0);
}

TEST(build_meta_pack_id_is_recomputed)
{
    char root[2048], sub[4096], out[4096];
    snprintf(root, sizeof root, "%s/site", t_tmpdir());
    snprintf(sub, sizeof sub, "%s/docs", root);
    snprintf(out, sizeof out, "%s/site.lmdb", t_tmpdir());
    ASSERT_EQ(mkdir(root, 0755), 0);
    ASSERT_EQ(mkdir(sub, 0755), 0);
    put_file(root, "index.html", "<!doctype html><title>t</title><p>index</p>\n");
    put_file(root, "404.html", "<!doctype html><title>404</title><p>missing</p>\n");
    put_file(sub, "index.html", "<!doctype html><title>docs</title><p>docs</p>\n");
    char big[8192];
    for (size_t i = 0; i + 1 < sizeof big; i++)
        big[i] = "compressible text, "[i % 19];
    big[sizeof big - 1] = '\0';
    put_file(root, "big.txt", big); /* compressed variants too */

    pk_build_opts o;
    memset(&o, 0, sizeof o);
    o.root = root;
    o.output = out;
    o.jobs = 1;
    o.quiet = 1;
    o.have_epoch = 1;
    o.epoch = 1700000000;
    ASSERT_EQ(pk_build(&o), 0);

    sf_pack *p;
    sf_reader *r;
    char err[1024];
    ASSERT_EQ(sf_pack_open(out, &p, err, sizeof err), SF_OK);
    ASSERT_EQ(sf_reader_begin(p, &r), SF_OK);
    uint8_t id[SF_PACK_ID_LEN];
    ASSERT_EQ(sf_pack_id_compute(r, id), SF_OK);
    ASSERT_MEM_EQ(id, SF_PACK_ID_LEN, sf_pack_meta(p)->pack_id, SF_PACK_ID_LEN);
    ASSERT(sf_pack_meta(p)->n_paths >= 4);
    sf_reader_end(r);
    sf_pack_close(p);

    ASSERT_EQ(sf_pack_check_structure(NULL, out, err, sizeof err), SF_OK);
}
