/*
 * store_write.c - building a pack so that it appears atomically.
 *
 * The pack is built in "<final>.tmp-<pid>" beside the target (same file
 * system, so rename(2) is atomic), in LMDB write transactions with
 * MDB_NOSYNC; at seal the last one is committed and the file synced; at
 * commit it is renamed over the final name and the directory is synced. A
 * reader therefore sees either no file, the old file, or the complete new
 * one - never a half-written pack.
 *
 * Memory: LMDB keeps every page a transaction writes in the heap until the
 * commit, so one transaction for the whole pack held a second copy of the
 * site. The transaction is committed (without a sync: nobody reads the
 * temporary file) whenever the pages its puts took reach SF_WRITER_BATCH
 * bytes (page_bytes), and a new one begun. Keys put in ascending order are
 * appended (MDB_APPEND): the pages fill up instead of splitting in half,
 * and a commit copies only the rightmost path of each tree, so the batches
 * cost almost no space (a review found 9 free pages in a pack written in
 * several).
 */
#include "lmdb_layout.h"
#include "sf/store.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Bytes of pages put between two commits of the write transaction: what
 * LMDB holds in the heap is about this much (more when one value is
 * larger). Big enough that the pages a commit copies are few against what
 * it writes, small against the memory of any machine that builds a site.
 * Halving it from 64 MiB cost no measurable time (bench/RESULTS.md, "Pack:
 * memory"). */
#define SF_WRITER_BATCH (32u << 20)

/* The greatest key put so far into one database: a greater one is appended. */
typedef struct last_key {
    uint8_t *p;
    size_t len, cap;  /* len 0: none yet (LMDB keys are never empty) */
    size_t leaf_room; /* bytes left in the leaf page appends go to (page_bytes) */
} last_key;

struct sf_writer {
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi meta_db, paths_db, bodies_db;
    last_key last_path, last_body;
    uint64_t batch; /* bytes of pages put since the last commit (page_bytes) */
    size_t psize;   /* LMDB's page size */
    int failed;     /* LMDB's code for a batch commit that failed: every later call fails */
    int commit_due; /* the batch is full, but a reserved body is being filled: the next
                     * put commits first */
    char *tmp;
    char *final;
    uint8_t id_404[SF_PACK_ID_LEN]; /* of the status:404 record stored; zeros without one */
    int sealed;                     /* sf_writer_seal succeeded: only the rename is left */
};

static void say(char *err, size_t errlen, const char *path, const char *why)
{
    if (errlen)
        snprintf(err, errlen, "%s: %s", path, why);
}

/* Room added to a path for ".tmp-<pid>": a pid has at most 19 digits. */
#define TMP_SUFFIX_MAX 32

int sf_tmp_name(const char *final_path, char *out, size_t cap)
{
    int n = snprintf(out, cap, "%s.tmp-%ld", final_path, (long)getpid());
    return n < 0 || (size_t)n >= cap ? SF_ETOOLONG : SF_OK;
}

long sf_tmp_name_pid(const char *name, size_t *final_len)
{
    return sf_name_pid(name, ".tmp-", final_len);
}

long sf_name_pid(const char *name, const char *tag, size_t *final_len)
{
    const char *t = NULL;
    for (const char *q = name; (q = strstr(q, tag)) != NULL; q++)
        t = q; /* the last one */
    if (!t || t == name || t[-1] == '/')
        return 0;
    const char *digits = t + strlen(tag);
    char *end;
    errno = 0;
    long pid = digits[0] >= '1' && digits[0] <= '9' ? strtol(digits, &end, 10) : 0;
    if (pid <= 0 || *end || errno || (long)(pid_t)pid != pid)
        return 0;
    if (final_len)
        *final_len = (size_t)(t - name);
    return pid;
}

/* The process's umask, read without changing it (umask(2) sets it, and a
 * thread creating a file meanwhile would get the wrong one): from
 * /proc/self/status, else the usual 022. */
static mode_t current_umask(void)
{
    FILE *f = fopen("/proc/self/status", "re");
    char line[128];
    unsigned m = 022;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "Umask: %o", &m) == 1)
            break;
    if (f)
        fclose(f);
    return (mode_t)(m & 0777);
}

void sf_keep_attributes(const char *tmp, const char *final_path, mode_t fresh)
{
    struct stat old, now;
    mode_t mode = fresh & ~current_umask();
    /* an empty file is a placeholder (mktemp's is 0600): a new file */
    if (stat(final_path, &old) == 0 && S_ISREG(old.st_mode) && old.st_size > 0) {
        /* root can give both; another user only a group it is in */
        if (chown(tmp, old.st_uid, old.st_gid) != 0) {
            /* a result kept and dropped: a (void) cast does not silence
             * gcc's warn_unused_result, which _FORTIFY_SOURCE puts on chown */
            int r = chown(tmp, (uid_t)-1, old.st_gid);
            (void)r;
        }
        if (stat(tmp, &now) == 0 && now.st_uid == old.st_uid && now.st_gid == old.st_gid)
            mode = old.st_mode & 0777;
    }
    (void)chmod(tmp, mode);
}

/* Says what an LMDB failure rc of the writer was: out of memory is the
 * program's, said with the pack's name; anything else befell the temporary
 * file, and names it. */
static void say_lmdb(const sf_writer *w, char *err, size_t errlen, int rc)
{
    if (rc == ENOMEM)
        say(err, errlen, w->final, "out of memory");
    else
        say(err, errlen, w->tmp, mdb_strerror(rc));
}

/* Whether n bytes of address space can be reserved now: LMDB's ENOMEM is
 * its map's mmap or any of its allocations, and only the first is a lack of
 * address space (a limit such as ulimit -v). */
static int address_space_for(uint64_t n)
{
    void *p = mmap(NULL, (size_t)n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return 0;
    munmap(p, (size_t)n);
    return 1;
}

int sf_writer_open(const char *final_path, uint64_t capacity, sf_writer **out, char *err,
                   size_t errlen)
{
    sf_writer *w = calloc(1, sizeof *w);
    size_t n = strlen(final_path) + TMP_SUFFIX_MAX;
    if (!w || !(w->tmp = malloc(n)) || !(w->final = strdup(final_path))) {
        say(err, errlen, final_path, "out of memory");
        goto out_free;
    }
    sf_tmp_name(final_path, w->tmp, n);
    unlink(w->tmp);

    /* Room for every byte plus B-tree and overflow-page overhead. The map is
     * address space only: the file grows as pages are written. */
    uint64_t map = capacity + capacity / 2 + (64u << 20);
    uint64_t ps = sf_store_page_size();
    map = (map + ps - 1) / ps * ps;

    int rc;
    if ((rc = mdb_env_create(&w->env)) != 0)
        goto out_lmdb;
    mdb_env_set_maxdbs(w->env, 3);
    if ((rc = mdb_env_set_mapsize(w->env, (size_t)map)) != 0)
        goto out_lmdb;
    /* 0600 while it is written: a pack made 0600 or 0640 on purpose must not
     * be open to every user of a build host meanwhile (one could keep the
     * descriptor); sf_keep_attributes() gives the final bits. */
    rc = mdb_env_open(w->env, w->tmp, MDB_NOSUBDIR | MDB_NOLOCK | MDB_NOSYNC, 0600);
    if (rc == ENOMEM && !address_space_for(map)) {
        char why[160];
        snprintf(why, sizeof why,
                 "cannot map %llu MiB of address space for the new pack (is it limited, as "
                 "by ulimit -v?)",
                 (unsigned long long)(map >> 20));
        say(err, errlen, final_path, why);
        sf_writer_abort(w);
        return SF_ENOMEM;
    }
    if (rc != 0)
        goto out_lmdb;
    if ((rc = mdb_txn_begin(w->env, NULL, 0, &w->txn)) != 0)
        goto out_lmdb;
    if ((rc = mdb_dbi_open(w->txn, "meta", MDB_CREATE, &w->meta_db)) != 0 ||
        (rc = mdb_dbi_open(w->txn, "paths", MDB_CREATE, &w->paths_db)) != 0 ||
        (rc = mdb_dbi_open(w->txn, "bodies", MDB_CREATE, &w->bodies_db)) != 0)
        goto out_lmdb;
    MDB_stat st;
    if ((rc = mdb_env_stat(w->env, &st)) != 0)
        goto out_lmdb;
    w->psize = st.ms_psize;
    *out = w;
    return SF_OK;

out_lmdb:
    say_lmdb(w, err, errlen, rc);
    sf_writer_abort(w);
    if (rc == ENOMEM)
        return SF_ENOMEM;
    return rc == ENOENT || rc == EACCES || rc == ENOSPC ? SF_EIO : SF_ELMDB;
out_free:
    if (w) {
        free(w->tmp);
        free(w->final);
    }
    free(w);
    return SF_ENOMEM;
}

static void writer_free(sf_writer *w)
{
    free(w->last_path.p);
    free(w->last_body.p);
    free(w->tmp);
    free(w->final);
    free(w);
}

void sf_writer_abort(sf_writer *w)
{
    if (!w)
        return;
    if (w->txn)
        mdb_txn_abort(w->txn);
    if (w->env)
        mdb_env_close(w->env);
    if (w->tmp)
        unlink(w->tmp);
    writer_free(w);
}

const char *sf_writer_cause(const sf_writer *w)
{
    return w->failed ? mdb_strerror(w->failed) : NULL;
}

/* LMDB's default order (mdb_cmp_memn): bytes, then the shorter first. */
static int key_after(const last_key *last, const void *k, size_t kl)
{
    if (last->len == 0)
        return 1;
    size_t n = kl < last->len ? kl : last->len;
    int c = memcmp(k, last->p, n);
    return c > 0 || (c == 0 && kl > last->len);
}

/* Room for a key of kl bytes in last, made before the key is put: once
 * in the database, it must be remembered. */
static int reserve(last_key *last, size_t kl)
{
    if (kl > last->cap) {
        uint8_t *p = realloc(last->p, kl);
        if (!p)
            return SF_ENOMEM;
        last->p = p;
        last->cap = kl;
    }
    return SF_OK;
}

static void remember(last_key *last, const void *k, size_t kl)
{
    memcpy(last->p, k, kl);
    last->len = kl;
}

/* LMDB's code as one of ours: an errno is about the system (the disk, a
 * limit, a permission), anything else about LMDB. */
static int lmdb_error(int rc)
{
    if (rc == MDB_MAP_FULL)
        return SF_EFULL;
    if (rc == ENOMEM)
        return SF_ENOMEM;
    return rc > 0 ? SF_EIO : SF_ELMDB;
}

/* Commits what the transaction holds and begins the next one, so that its
 * dirty pages leave the heap. On a failure the writer has no transaction
 * left: everything after fails, and sf_writer_abort removes the file. */
static int next_batch(sf_writer *w)
{
    int rc = mdb_txn_commit(w->txn);
    w->txn = NULL;
    if (rc == 0)
        rc = mdb_txn_begin(w->env, NULL, 0, &w->txn);
    if (rc != 0) {
        w->txn = NULL;
        w->failed = rc;
        return lmdb_error(rc);
    }
    w->batch = 0;
    /* the next append copies the last leaf of its tree: a page again */
    w->last_path.leaf_room = w->last_body.leaf_room = 0;
    return SF_OK;
}

/* LMDB's page layout (lmdb_layout.h): the writer's batch (page_bytes) and
 * the packer's map size (sf_store_cost) both count with it. */

/* The largest node a leaf page of psize bytes holds (me_nodemax: 2,038
 * bytes with 4 KiB pages); a larger one puts its value in overflow pages. */
static size_t node_max(size_t psize)
{
    return (((psize - LMDB_PAGE_HDR) / 2) & ~(size_t)1) - LMDB_SLOT;
}

/* The bytes of the overflow pages a vl-byte value takes (OVPAGES). */
static uint64_t overflow_bytes(size_t psize, uint64_t vl)
{
    return ((vl + LMDB_PAGE_HDR - 1) / psize + 1) * psize;
}

/* The bytes a node of a kl-byte key takes in its leaf page, index slot
 * included, with the value inline or (overflow) as a page number. */
static size_t leaf_bytes(size_t kl, uint64_t vl, int overflow)
{
    size_t node = LMDB_NODE_HDR + kl + (overflow ? LMDB_PGNO : (size_t)vl);
    return ((node + 1) & ~(size_t)1) + LMDB_SLOT;
}

size_t sf_store_page_size(void)
{
    long ps = sysconf(_SC_PAGESIZE); /* what LMDB gives a new file */
    return ps <= 0 ? 4096 : ps > LMDB_MAX_PAGE ? LMDB_MAX_PAGE : (size_t)ps;
}

uint64_t sf_store_cost(size_t kl, uint64_t vl)
{
    size_t psize = sf_store_page_size();
    int overflow = LMDB_NODE_HDR + kl + vl > node_max(psize);
    /* Leaf pages that split are left half full: count each node twice. */
    return (overflow ? overflow_bytes(psize, vl) : 0) + 2 * (uint64_t)leaf_bytes(kl, vl, overflow);
}

/* The heap a put of a kl-byte key and a vl-byte value makes LMDB hold
 * until the commit. A node larger than node_max() puts its value in
 * overflow pages of its own: a value of 2.1 KB takes a 4 KiB page, and
 * counting only its bytes let a batch of such values hold twice
 * SF_WRITER_BATCH. The node itself goes to a leaf page; appended keys fill
 * the last leaf of their database until the next node does not fit, so
 * each new leaf is counted whole when it is begun (last->leaf_room). A
 * put out of order (last NULL, or a key inside the tree) counts its node. */
static uint64_t page_bytes(const sf_writer *w, last_key *last, int append, size_t kl, size_t vl)
{
    int overflow = LMDB_NODE_HDR + kl + vl > node_max(w->psize);
    uint64_t bytes = overflow ? overflow_bytes(w->psize, vl) : 0;
    size_t need = leaf_bytes(kl, vl, overflow);
    if (!last || !append)
        return bytes + need;
    if (need > last->leaf_room) { /* a new leaf page */
        bytes += w->psize;
        last->leaf_room = w->psize - LMDB_PAGE_HDR;
    }
    last->leaf_room -= need;
    return bytes;
}

/* Puts a value, or with room non-NULL reserves vl bytes for it there
 * (NULL when the key is stored already), which the caller fills before
 * the next call. */
static int put(sf_writer *w, MDB_dbi db, last_key *last, const void *k, size_t kl, const void *v,
               size_t vl, int dup_ok, void **room)
{
    if (room)
        *room = NULL;
    if (w->failed)
        return lmdb_error(w->failed);
    if (!w->txn || w->sealed)
        return SF_EINVAL; /* after the seal */
    if (w->commit_due) {
        w->commit_due = 0;
        int rc = next_batch(w);
        if (rc != SF_OK)
            return rc;
    }
    MDB_val key = {kl, (void *)k}, val = {vl, (void *)v};
    int append = last && key_after(last, k, kl);
    if (append && reserve(last, kl) != SF_OK)
        return SF_ENOMEM;
    unsigned flags = (append ? MDB_APPEND : MDB_NOOVERWRITE) | (room ? MDB_RESERVE : 0);
    int rc = mdb_put(w->txn, db, &key, &val, flags);
    if (rc == MDB_KEYEXIST) /* an append never meets an equal key: that would be our bug */
        return append ? SF_ELMDB : dup_ok ? SF_OK : SF_EINVAL;
    if (rc == MDB_BAD_VALSIZE)
        return SF_ETOOLONG;
    if (rc != 0)
        return lmdb_error(rc);
    if (append)
        remember(last, k, kl);
    if (room)
        *room = val.mv_data;
    w->batch += page_bytes(w, last, append, kl, vl);
    if (w->batch < SF_WRITER_BATCH)
        return SF_OK;
    if (room) {
        w->commit_due = 1; /* not before the room is filled */
        return SF_OK;
    }
    return next_batch(w);
}

int sf_writer_put_body(sf_writer *w, const uint8_t key[SF_KEY_LEN], const void *p, size_t n)
{
    return put(w, w->bodies_db, &w->last_body, key, SF_KEY_LEN, p, n, 1, NULL);
}

int sf_writer_reserve_body(sf_writer *w, const uint8_t key[SF_KEY_LEN], size_t n, void **room)
{
    return put(w, w->bodies_db, &w->last_body, key, SF_KEY_LEN, NULL, n, 1, room);
}

int sf_writer_put_path(sf_writer *w, const char *path, size_t len, const void *rec, size_t n)
{
    return put(w, w->paths_db, &w->last_path, path, len, rec, n, 0, NULL);
}

int sf_writer_put_special(sf_writer *w, const char *name, const void *rec, size_t n)
{
    int rc = put(w, w->meta_db, NULL, name, strlen(name), rec, n, 0, NULL);
    if (rc == 0 && strcmp(name, SF_SPECIAL_404) == 0)
        rc = sf_record_id(rec, n, w->id_404);
    return rc;
}

static int fsync_path(const char *path, int dir)
{
    int fd = open(path, (dir ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = fsync(fd), e = errno;
    close(fd);
    errno = e;
    return rc;
}

int sf_sync_dir_of(const char *path)
{
    char *d = strdup(path);
    int e = 0;
    if (!d)
        e = ENOMEM;
    else if (fsync_path(dirname(d), 1) != 0 && errno != EINVAL)
        e = errno; /* EINVAL: the file system cannot sync a directory; as durable as it gets */
    free(d);
    return e;
}

int sf_writer_seal(sf_writer *w, const sf_meta *meta, char *err, size_t errlen)
{
    if (w->failed) {
        say_lmdb(w, err, errlen, w->failed);
        return lmdb_error(w->failed);
    }
    if (w->sealed || !w->txn) { /* sealed, or a seal that failed */
        say(err, errlen, w->tmp, "the pack is already sealed");
        return SF_EINVAL;
    }
    uint8_t rec[SF_META_RECORD_LEN];
    sf_meta m = *meta;
    memcpy(m.id_404, w->id_404, sizeof m.id_404); /* the writer's, whatever the caller says */
    sf_meta_encode(&m, rec);
    int rc = put(w, w->meta_db, NULL, "meta", 4, rec, sizeof rec, 0, NULL);
    if (rc != SF_OK) { /* a batch commit that failed says why */
        if (w->failed || rc == SF_ENOMEM)
            say_lmdb(w, err, errlen, w->failed ? w->failed : ENOMEM);
        else
            say(err, errlen, w->tmp, "cannot store the meta record");
        return rc;
    }
    rc = mdb_txn_commit(w->txn);
    w->txn = NULL;
    if (rc == 0)
        rc = mdb_env_sync(w->env, 1);
    if (rc != 0) {
        say_lmdb(w, err, errlen, rc);
        return lmdb_error(rc);
    }
    mdb_env_close(w->env);
    w->env = NULL;
    sf_keep_attributes(w->tmp, w->final, 0644); /* before the sync, which makes it durable too */
    if (fsync_path(w->tmp, 0) != 0) {
        say(err, errlen, w->tmp, strerror(errno));
        return SF_EIO;
    }
    w->sealed = 1;
    return SF_OK;
}

int sf_writer_commit(sf_writer *w, const sf_meta *meta, char *err, size_t errlen)
{
    int rc = w->sealed ? SF_OK : sf_writer_seal(w, meta, err, errlen);
    if (rc != SF_OK)
        goto out_abort;
    if (rename(w->tmp, w->final) != 0) {
        if (errlen)
            snprintf(err, errlen, "%s: cannot put the new pack in place (renaming %s over it): %s",
                     w->final, w->tmp, strerror(errno));
        rc = SF_EIO;
        goto out_abort;
    }
    /* Make the rename itself durable. The pack is in place either way, so a
     * failure here is reported but the file is not removed. */
    int e = sf_sync_dir_of(w->final);
    rc = e ? SF_EIO : SF_OK;
    if (e) {
        char why[128];
        snprintf(why, sizeof why, "renamed into place, but syncing its directory failed: %s",
                 strerror(e));
        say(err, errlen, w->final, why);
    }
    writer_free(w);
    return rc;

out_abort:
    sf_writer_abort(w);
    return rc;
}
