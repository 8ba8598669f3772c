/*
 * store_read.c - opening a pack read-only and looking things up in it.
 *
 * The pack is opened with MDB_RDONLY | MDB_NOLOCK: a pack is never written
 * after it gets its final name, so no lock file and no reader table are
 * needed, and a read transaction is only a snapshot of the meta page.
 * Every view handed out points into LMDB's read-only map.
 */
#include "lmdb_layout.h"
#include "sf/path.h"
#include "sf/store.h"

#include <errno.h>
#include <fcntl.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct sf_pack {
    MDB_env *env;
    MDB_dbi meta_db, paths_db, bodies_db;
    sf_meta meta;
    uint64_t size;
    int fd;          /* LMDB's descriptor of the file (sf_pack_file) */
    const char *map; /* the start of LMDB's map: file offset 0 */
};

struct sf_reader {
    sf_pack *pack;
    MDB_txn *txn;
    void *user;                /* sf_reader_set_user: the caller's data */
    void (*user_free)(void *); /* called on it by sf_reader_end */
};

/*
 * LMDB trusts its own meta page. Before handing the file to it, check the
 * fields it would divide by or map with, so that a damaged or hostile file is
 * refused instead of crashing the process (a page size of 0 is a SIGFPE in
 * mdb_env_open). The first meta page is at offset 0 (LMDB 0.9, 64-bit):
 *   OFFSET SIZE DESCRIPTION
 *   0      16   page header (pgno, pad, flags, lower, upper)
 *   16     4    mm_magic, 0xBEEFC0DE
 *   20     4    mm_version, 1
 *   40     4    page size (mm_dbs[FREE_DBI].md_pad)
 *   136    8    mm_last_pg, the last page in use
 *   144    8    mm_txnid (LMDB uses the meta page with the larger one)
 * LMDB maps (mm_last_pg + 1) pages of the newer meta page whatever map size
 * it is given: a damaged mm_last_pg must be refused before it, or its mmap
 * fails with ENOMEM, which reads as a lack of memory rather than damage.
 */
#define LMDB_META_MAGIC 0xBEEFC0DEu

int sf_lmdb_magic(const void *page, size_t len)
{
    return len >= 20 && lmdb_ld32((const unsigned char *)page + 16) == LMDB_META_MAGIC;
}

size_t sf_lmdb_page_size(const void *page, size_t len)
{
    if (len < 44 || !sf_lmdb_magic(page, len))
        return 0;
    uint32_t psize = lmdb_ld32((const unsigned char *)page + 40);
    return psize >= 512 && psize <= 65536 && (psize & (psize - 1)) == 0 ? psize : 0;
}

/* Reads the two LMDB meta pages before LMDB does (it would trust them),
 * then walks every page it can reach from the newer (sf__lmdb_walk).
 * @return SF_OK; or SF_EMAGIC or SF_ECORRUPT with why saying what is wrong
 * with the file; or SF_EIO or SF_ENOMEM with why the error, which says
 * nothing about the file. */
static int lmdb_header_problem(const char *path, char *why, size_t whylen)
{
    unsigned char h[LMDB_META_LEN], h1[LMDB_META_LEN];
    struct stat st;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return SF_OK; /* mdb_env_open reports the errno */
    ssize_t n = pread(fd, h, sizeof h, 0);
    int e = errno, rc = SF_OK;
    const char *what = NULL;
    if (n < 0 || fstat(fd, &st) != 0) { /* the disk's problem, not the file's */
        snprintf(why, whylen, "%s", strerror(n < 0 ? e : errno));
        close(fd);
        return SF_EIO;
    }
    if (n != (ssize_t)sizeof h) {
        rc = SF_EMAGIC, what = "not a servd pack (too short for an LMDB header)";
        goto out;
    }
    if (!sf_lmdb_magic(h, sizeof h)) {
        rc = SF_EMAGIC, what = "not a servd pack (no LMDB magic)";
        goto out;
    }
    uint32_t psize = (uint32_t)sf_lmdb_page_size(h, sizeof h);
    if (psize == 0) {
        rc = SF_ECORRUPT, what = "corrupt pack (invalid LMDB page size)";
        goto out;
    }
    /* LMDB reads the second meta page (at offset psize) too, and uses the
     * newer of the two: both must be there and agree on the page size. */
    n = (uint64_t)st.st_size >= 2 * (uint64_t)psize ? pread(fd, h1, sizeof h1, psize) : 0;
    if (n < 0) {
        snprintf(why, whylen, "%s", strerror(errno));
        rc = SF_EIO;
        goto out;
    }
    if (n != (ssize_t)sizeof h1) {
        rc = SF_ECORRUPT, what = "corrupt pack (truncated: the second LMDB meta page is missing)";
        goto out;
    }
    if (!sf_lmdb_magic(h1, sizeof h1) || lmdb_ld32(h1 + 40) != psize) {
        rc = SF_ECORRUPT, what = "corrupt pack (the second LMDB meta page is damaged)";
        goto out;
    }
    const unsigned char *newer = lmdb_ld64(h1 + 144) > lmdb_ld64(h + 144) ? h1 : h;
    if (lmdb_ld64(newer + 136) >= (uint64_t)st.st_size / psize) {
        rc = SF_ECORRUPT, what = "truncated pack (pages missing at the end)";
        goto out;
    }
    rc = sf__lmdb_walk(fd, newer, psize, why, whylen);
out:
    if (what)
        snprintf(why, whylen, "%s", what);
    close(fd);
    return rc;
}

/*
 * The address of file offset 0 in LMDB's map, found from a pointer p into
 * it (LMDB does not export its map address: mdb_env_info's me_mapaddr is
 * only set for MDB_FIXEDMAP). The mapping of /proc/self/maps that holds p
 * gives its start and its file offset. NULL when it cannot be found: then
 * map_from_page tries.
 */
static const char *map_start(const void *p)
{
    FILE *f = fopen("/proc/self/maps", "re");
    if (!f)
        return NULL;
    char line[512];
    const char *base = NULL;
    uintptr_t a = (uintptr_t)p;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        unsigned long long off;
        char perms[8];
        if (sscanf(line, "%lx-%lx %7s %llx", &lo, &hi, perms, &off) == 4 && a >= lo && a < hi) {
            if (off <= lo)
                base = (const char *)(uintptr_t)(lo - off);
            break;
        }
    }
    fclose(f);
    return base;
}

/*
 * The same address without /proc (a chroot, a container without it), from
 * the LMDB page that holds p: a page starts with its own number (mp_pgno,
 * 8 bytes, LMDB 0.9), and page n lies n * psize bytes into the map. The map
 * is aligned to the system's page size, so pages of psize are aligned too
 * when psize divides it or is it. NULL when it cannot be found or is not
 * consistent with the file size.
 */
static const char *map_from_page(const void *p, size_t len, size_t psize, uint64_t size)
{
    long sys = sysconf(_SC_PAGESIZE);
    if (psize == 0 || sys <= 0 || (size_t)sys % psize != 0)
        return NULL;
    uintptr_t a = (uintptr_t)p, page = a & ~(uintptr_t)(psize - 1);
    uint64_t pgno;
    memcpy(&pgno, (const void *)page, sizeof pgno);
    if (pgno >= size / psize || a + len > page + psize)
        return NULL;
    return (const char *)(page - (uintptr_t)(pgno * psize));
}

static int fail(char *err, size_t errlen, int code, const char *fmt, const char *path,
                const char *why)
{
    if (errlen)
        snprintf(err, errlen, fmt, path, why);
    return code;
}

int sf_pack_open(const char *path, sf_pack **out, char *err, size_t errlen)
{
    return sf_pack_open_checked(path, NULL, out, err, errlen);
}

int sf_pack_open_checked(const char *path, int (*cut)(void), sf_pack **out, char *err,
                         size_t errlen)
{
    struct stat st;
    int rc;

    if (stat(path, &st) != 0)
        return fail(err, errlen, SF_EIO, "%s: %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return fail(err, errlen, SF_EIO, "%s: %s", path, "not a regular file");

    char problem[160];
    if ((rc = lmdb_header_problem(path, problem, sizeof problem)) == SF_EIO || rc == SF_ENOMEM)
        return fail(err, errlen, rc, "%s: cannot read it: %s", path, problem);
    if (rc != SF_OK)
        return fail(err, errlen, rc, "%s: %s", path, problem);

    sf_pack *p = calloc(1, sizeof *p);
    if (!p)
        return fail(err, errlen, SF_ENOMEM, "%s: %s", path, "out of memory");
    p->size = (uint64_t)st.st_size;

    if ((rc = mdb_env_create(&p->env)) != 0)
        goto out_lmdb;
    mdb_env_set_maxdbs(p->env, 3);
    /* Map exactly the file: LMDB raises this to the used size if needed,
     * which the truncation check below then catches. */
    if (st.st_size > 0)
        mdb_env_set_mapsize(p->env, (size_t)st.st_size);
    rc = mdb_env_open(p->env, path, MDB_RDONLY | MDB_NOLOCK | MDB_NOSUBDIR | MDB_NOTLS, 0);
    if (rc == MDB_INVALID || rc == MDB_VERSION_MISMATCH || rc == EINVAL) {
        fail(err, errlen, SF_EMAGIC, "%s: %s", path, "not a servd pack (no valid LMDB header)");
        rc = SF_EMAGIC;
        goto out_env;
    }
    if (rc != 0)
        goto out_lmdb;

    /* A file cut short would fault (SIGBUS) when a missing page is touched:
     * refuse it up front. */
    MDB_envinfo info;
    MDB_stat est;
    if ((rc = mdb_env_info(p->env, &info)) != 0 || (rc = mdb_env_stat(p->env, &est)) != 0)
        goto out_lmdb;
    mdb_filehandle_t fh;
    p->fd = mdb_env_get_fd(p->env, &fh) == 0 ? fh : -1;
    /* liblmdb 0.9 opens it without O_CLOEXEC: a program that spawns
     * (servd's check of the next pack) would hand every open pack to it */
    if (p->fd >= 0)
        fcntl(p->fd, F_SETFD, FD_CLOEXEC);
    if ((uint64_t)(info.me_last_pgno + 1) * est.ms_psize > p->size) {
        fail(err, errlen, SF_ECORRUPT, "%s: %s", path, "truncated pack (pages missing at the end)");
        rc = SF_ECORRUPT;
        goto out_env;
    }

    MDB_txn *txn;
    if ((rc = mdb_txn_begin(p->env, NULL, MDB_RDONLY, &txn)) != 0)
        goto out_lmdb;
    /* mdb_env_info, mdb_env_stat and mdb_txn_begin have read the meta pages
     * (the txn holds their roots): were they there? */
    if (cut && cut()) {
        mdb_txn_abort(txn);
        fail(err, errlen, SF_EIO, "%s: %s", path, "the file changed while it was being opened");
        rc = SF_EIO;
        goto out_env;
    }
    if ((rc = mdb_dbi_open(txn, "meta", 0, &p->meta_db)) != 0 ||
        (rc = mdb_dbi_open(txn, "paths", 0, &p->paths_db)) != 0 ||
        (rc = mdb_dbi_open(txn, "bodies", 0, &p->bodies_db)) != 0) {
        mdb_txn_abort(txn);
        if (rc == MDB_NOTFOUND || rc == MDB_INCOMPATIBLE) {
            fail(err, errlen, SF_EMAGIC, "%s: %s", path,
                 "not a servd pack (an LMDB file without the pack databases)");
            rc = SF_EMAGIC;
            goto out_env;
        }
        goto out_lmdb;
    }
    MDB_val k = {4, "meta"}, v;
    rc = mdb_get(txn, p->meta_db, &k, &v);
    int have_meta = rc == 0;
    if (rc == 0) {
        rc = sf_meta_decode(v.mv_data, v.mv_size, &p->meta);
        p->map = map_start(v.mv_data);
        if (!p->map)
            p->map = map_from_page(v.mv_data, v.mv_size, est.ms_psize, p->size);
    } else if (rc == MDB_NOTFOUND)
        rc = SF_EMAGIC;
    else
        rc = SF_ELMDB;
    mdb_txn_commit(txn); /* keeps the dbi handles */
    if (rc == SF_EVERSION) {
        char why[96];
        snprintf(why, sizeof why, "pack format version %u is not supported (this build reads %d)",
                 p->meta.major, SF_FORMAT_MAJOR);
        fail(err, errlen, rc, "%s: %s", path, why);
        goto out_env;
    }
    if (rc != 0) {
        fail(err, errlen, rc, "%s: %s", path,
             rc != SF_EMAGIC ? "corrupt meta record"
             : have_meta     ? "not a servd pack (the meta record lacks the SERVDPK1 magic)"
                             : "not a servd pack (no meta record)");
        goto out_env;
    }
    if (!p->map) { /* no view could be bounded by the file (in_file) */
        fail(err, errlen, SF_EIO, "%s: %s", path,
             "cannot find where the pack is mapped (/proc/self/maps is unreadable and the "
             "pack's page size does not divide the system's)");
        rc = SF_EIO;
        goto out_env;
    }
    *out = p;
    return SF_OK;

out_lmdb:
    fail(err, errlen, SF_ELMDB, "%s: %s", path, mdb_strerror(rc));
    /* an errno (the open or the map failed) is about the system, not the file */
    rc = rc == ENOMEM ? SF_ENOMEM : rc > 0 ? SF_EIO : SF_ELMDB;
out_env:
    if (p->env)
        mdb_env_close(p->env);
    free(p);
    return rc;
}

void sf_pack_close(sf_pack *p)
{
    if (!p)
        return;
    mdb_env_close(p->env);
    free(p);
}

const sf_meta *sf_pack_meta(const sf_pack *p)
{
    return &p->meta;
}

uint64_t sf_pack_size(const sf_pack *p)
{
    return p->size;
}

int sf_pack_file(const sf_pack *p, int *fd, const char **map)
{
    if (p->fd < 0 || !p->map)
        return SF_EIO;
    *fd = p->fd;
    *map = p->map;
    return SF_OK;
}

int sf_reader_begin(sf_pack *p, sf_reader **out)
{
    sf_reader *r = malloc(sizeof *r);
    if (!r)
        return SF_ENOMEM;
    r->pack = p;
    r->user = NULL;
    r->user_free = NULL;
    int rc = mdb_txn_begin(p->env, NULL, MDB_RDONLY, &r->txn);
    if (rc != 0) {
        free(r);
        return rc == ENOMEM ? SF_ENOMEM : SF_ELMDB; /* the first is no fault of the file */
    }
    *out = r;
    return SF_OK;
}

void sf_reader_end(sf_reader *r)
{
    if (!r)
        return;
    if (r->user_free)
        r->user_free(r->user);
    mdb_txn_abort(r->txn);
    free(r);
}

void sf_reader_set_user(sf_reader *r, void *user, void (*user_free)(void *))
{
    r->user = user;
    r->user_free = user_free;
}

void *sf_reader_user(const sf_reader *r)
{
    return r->user;
}

/* LMDB takes a value's length from its node and never bounds it by the
 * file: in a damaged pack it can run past the end, and reading the view
 * faults (SIGBUS or SIGSEGV) far from here. Every key and value handed out
 * must lie inside the file (sf_pack_open refuses a pack whose map it cannot
 * find). */
static int in_file(const sf_pack *p, const MDB_val *v)
{
    if (v->mv_size > p->size)
        return 0;
    const char *s = v->mv_data;
    return s >= p->map && (uint64_t)(s - p->map) <= p->size - v->mv_size;
}

static int get(sf_reader *r, MDB_dbi db, const void *key, size_t klen, MDB_val *v)
{
    if (klen == 0 || klen > SF_KEY_MAX)
        return SF_ENOTFOUND;
    MDB_val k = {klen, (void *)key};
    int rc = mdb_get(r->txn, db, &k, v);
    if (rc == MDB_NOTFOUND)
        return SF_ENOTFOUND;
    if (rc == 0 && !in_file(r->pack, v))
        return SF_ECORRUPT;
    return rc == 0                                          ? SF_OK
           : rc == MDB_CORRUPTED || rc == MDB_PAGE_NOTFOUND ? SF_ECORRUPT
           : rc == ENOMEM                                   ? SF_ENOMEM
                                                            : SF_ELMDB;
}

int sf_lookup(sf_reader *r, const char *path, size_t len, sf_entry *out)
{
    MDB_val v;
    int rc = get(r, r->pack->paths_db, path, len, &v);
    return rc ? rc : sf_entry_decode(v.mv_data, v.mv_size, out);
}

int sf_lookup_special(sf_reader *r, const char *name, sf_entry *out)
{
    MDB_val v;
    int rc = get(r, r->pack->meta_db, name, strlen(name), &v);
    return rc ? rc : sf_entry_decode(v.mv_data, v.mv_size, out);
}

int sf_special_record(sf_reader *r, const char *name, sf_view *out)
{
    MDB_val v;
    int rc = get(r, r->pack->meta_db, name, strlen(name), &v);
    if (rc)
        return rc;
    out->ptr = v.mv_data;
    out->len = v.mv_size;
    return SF_OK;
}

int sf_body_by_key(sf_reader *r, const uint8_t key[SF_KEY_LEN], sf_view *out)
{
    MDB_val v;
    int rc = get(r, r->pack->bodies_db, key, SF_KEY_LEN, &v);
    if (rc)
        return rc;
    out->ptr = v.mv_data;
    out->len = v.mv_size;
    return SF_OK;
}

int sf_body(sf_reader *r, const sf_variant *var, sf_view *out)
{
    int rc = sf_body_by_key(r, var->body_key, out);
    if (rc == 0 && out->len != var->body_len)
        return SF_ECORRUPT;
    return rc;
}

static int foreach (sf_reader *r, MDB_dbi db, int (*each)(void *, MDB_val *, MDB_val *), void *arg)
{
    MDB_cursor *c;
    MDB_val k, v;
    int rc = mdb_cursor_open(r->txn, db, &c);
    if (rc != 0) /* LMDB's malloc: no fault of the file */
        return rc == ENOMEM ? SF_ENOMEM : SF_ELMDB;
    int ret = 0;
    for (rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0;
         rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        if (!in_file(r->pack, &k))
            ret = SF_ECORRUPT;
        if (ret || (ret = each(arg, &k, &v)) != 0)
            break;
    }
    mdb_cursor_close(c);
    if (ret)
        return ret;
    return rc == MDB_NOTFOUND                               ? SF_OK
           : rc == MDB_CORRUPTED || rc == MDB_PAGE_NOTFOUND ? SF_ECORRUPT
           : rc == ENOMEM                                   ? SF_ENOMEM
                                                            : SF_ELMDB;
}

struct path_ctx {
    const sf_pack *pack;
    sf_path_fn fn;
    void *arg;
    char *err;
    size_t errlen;
};

static int each_path(void *arg, MDB_val *k, MDB_val *v)
{
    struct path_ctx *c = arg;
    sf_entry e;
    sf_view path = {k->mv_data, k->mv_size};
    if (!in_file(c->pack, v) || sf_entry_decode(v->mv_data, v->mv_size, &e) != 0) {
        if (c->errlen) {
            char show[256]; /* key bytes are untrusted */
            sf_escape(path.ptr, path.len, show, sizeof show);
            snprintf(c->err, c->errlen, "corrupt entry record for path %s", show);
        }
        return SF_ECORRUPT;
    }
    return c->fn(c->arg, path, &e);
}

int sf_foreach_path(sf_reader *r, sf_path_fn fn, void *arg, char *err, size_t errlen)
{
    struct path_ctx c = {r->pack, fn, arg, err, errlen};
    return foreach (r, r->pack->paths_db, each_path, &c);
}

struct record_ctx {
    const sf_pack *pack;
    sf_record_fn fn;
    void *arg;
};

static int each_record(void *arg, MDB_val *k, MDB_val *v)
{
    struct record_ctx *c = arg;
    if (!in_file(c->pack, v))
        return SF_ECORRUPT;
    sf_view path = {k->mv_data, k->mv_size};
    sf_view rec = {v->mv_data, v->mv_size};
    return c->fn(c->arg, path, rec);
}

int sf_foreach_record(sf_reader *r, sf_record_fn fn, void *arg)
{
    struct record_ctx c = {r->pack, fn, arg};
    return foreach (r, r->pack->paths_db, each_record, &c);
}

struct body_ctx {
    const sf_pack *pack;
    sf_body_fn fn;
    void *arg;
};

static int each_body(void *arg, MDB_val *k, MDB_val *v)
{
    struct body_ctx *c = arg;
    if (k->mv_size != SF_KEY_LEN || !in_file(c->pack, v))
        return SF_ECORRUPT;
    sf_view b = {v->mv_data, v->mv_size};
    return c->fn(c->arg, k->mv_data, b);
}

int sf_foreach_body(sf_reader *r, sf_body_fn fn, void *arg)
{
    struct body_ctx c = {r->pack, fn, arg};
    return foreach (r, r->pack->bodies_db, each_body, &c);
}
