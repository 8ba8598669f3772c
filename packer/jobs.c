/*
 * jobs.c - the parallel work of servd-pack build: the compression (or reuse
 * from --base) planned, and the jobs of a phase (reads, compressions)
 * weighed, ordered in blocks of the largest files first and run on the pool
 * (pool.h).
 */
#include "build_int.h"

#include "decode.h"
#include "pool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int reuse(build *b, pk_file *f, char *err, size_t errlen)
{
    const pk_variant *id = &f->var[SF_ENC_IDENTITY];
    const pk_base_entry *be = pk_base_find(b->base, id->digest, f->cls);
    for (unsigned i = 0; be && i < be->nvar; i++) {
        pk_variant *v = &f->var[be->v[i].encoding];
        const char *enc = sf_encoding_name(be->v[i].encoding);
        v->bytes = (const uint8_t *)be->v[i].bytes.ptr;
        v->len = be->v[i].bytes.len;
        v->owned = 0;
        /* Re-hash: a corrupt base must not spread into the new pack. */
        if (pk_sha256(v->bytes, v->len, v->digest) != 0) {
            snprintf(err, errlen, "%s: out of memory computing the SHA-256 of the %s body of %s",
                     b->o->base, enc, f->key);
            return -1;
        }
        if (memcmp(v->digest, be->v[i].key, PK_DIGEST_LEN) != 0) {
            snprintf(err, errlen,
                     "%s: the %s body of %s is corrupt (SHA-256 mismatch); run servd-pack "
                     "verify on it",
                     b->o->base, enc, f->key);
            return -1;
        }
        /* And decode: an intact body that a damaged record names for the
         * wrong file (another file's gzip) must not be served as this one. */
        int same = pk_decompresses_to(be->v[i].encoding, v->bytes, v->len, id->bytes, id->len);
        if (same != 1) {
            snprintf(err, errlen,
                     same < 0 ? "%s: out of memory checking the %s body of %s"
                              : "%s: the %s body it gives %s does not decompress to that file; "
                                "run servd-pack verify on it",
                     b->o->base, enc, f->key);
            return -1;
        }
        v->present = 1;
    }
    pk__drop_identity(f); /* the variants come from the base */
    return 0;
}

/* A compressible file's bytes in the compression phase (build.load). */
enum load_state {
    LOAD_NONE, /* not read again yet */
    LOAD_BUSY, /* being read again by one of its jobs */
    LOAD_DONE, /* in memory until its last job ends */
    LOAD_FAILED
};

/* Gives the compression job of file i its bytes: the first of the file's
 * jobs to start reads it again (checking it is still the file that was
 * read, pk__reread) and the others wait for that read. @return 0, or -1
 * with err (for a job that waited, the words of the first of these reads
 * that failed, which is this file's unless two files failed at once). */
static int load_identity(build *b, size_t i, char *err, size_t errlen)
{
    pk_file *f = &b->site.files[i];
    pk_variant *id = &f->var[SF_ENC_IDENTITY];
    pthread_mutex_lock(&b->load_mu);
    while (b->load[i] == LOAD_BUSY)
        pthread_cond_wait(&b->load_cv, &b->load_mu);
    int state = b->load[i];
    if (state == LOAD_NONE && id->bytes)
        state = b->load[i] = LOAD_DONE; /* kept: stored as what it contains */
    if (state == LOAD_NONE)
        b->load[i] = LOAD_BUSY;
    pthread_mutex_unlock(&b->load_mu);
    if (state == LOAD_DONE)
        return 0;
    if (state == LOAD_FAILED) { /* the same words as the job that read it */
        pthread_mutex_lock(&b->load_mu);
        snprintf(err, errlen, "%s", b->load_err);
        pthread_mutex_unlock(&b->load_mu);
        return -1;
    }
    uint8_t *p = malloc(f->read_size ? f->read_size : 1);
    if (!p)
        snprintf(err, errlen, "%s: out of memory (%llu bytes)", f->src,
                 (unsigned long long)f->read_size);
    else if (pk__reread(f, b->site.root, p, err, errlen) != 0) {
        free(p);
        p = NULL;
    }
    pthread_mutex_lock(&b->load_mu);
    if (p) {
        id->bytes = p;
        id->owned = 1;
    } else if (!b->load_err[0]) {
        snprintf(b->load_err, sizeof b->load_err, "%s", err);
    }
    b->load[i] = p ? LOAD_DONE : LOAD_FAILED;
    pthread_cond_broadcast(&b->load_cv);
    pthread_mutex_unlock(&b->load_mu);
    return p ? 0 : -1;
}

static int compress_one(build *b, pk_file *f, int enc, unsigned thread, char *err, size_t errlen)
{
    const pk_variant *id = &f->var[SF_ENC_IDENTITY];
    uint8_t *out;
    size_t outn;
    char why[256];
    if (pk_compress(b->comp[thread], enc, f->cls, id->bytes, id->len, &out, &outn, why,
                    sizeof why) != 0) {
        snprintf(err, errlen, "%s: %s", f->src, why);
        return -1;
    }
    if (!pk_keep(id->len, outn)) {
        free(out);
        return 0;
    }
    pk_variant *v = &f->var[enc];
    v->len = outn;
    if (pk_sha256(out, outn, v->digest) != 0) {
        free(out);
        snprintf(err, errlen, "%s: out of memory computing a SHA-256", f->src);
        return -1;
    }
    /* to the spill file until the write: the build does not hold the site's
     * variants */
    int rc = pk_spill_put(b->spill, out, outn, &v->spill_off, err, errlen);
    free(out);
    if (rc != 0) {
        atomic_store(&b->spill_failed, 1);
        return -1;
    }
    v->spilled = 1;
    v->present = 1;
    return 0;
}

/* Whether a compressed variant of f could be worth keeping: files smaller
 * than the keep rule's byte minimum never give one. */
static int compressible(const pk_file *f)
{
    return f->cls != PK_CLASS_NONE && f->size > PK_KEEP_MIN_BYTES;
}

/* The job of the reading phase for file f. */
static int read_job(build *b, pk_file *f, unsigned thread, char *err, size_t errlen)
{
    if (pk__read_file(b, f, &b->magic[thread], err, errlen) != 0)
        return -1;
    if (f->encoded) /* what it contains, kept until the write */
        pk_budget_keep(&b->budget, f->size);
    /* Taken from --base at once, which drops the file's bytes: a re-pack
     * of an unchanged site does not hold it whole in memory until a reuse
     * phase. */
    if (!compressible(f))
        return 0;
    if (!pk_base_find(b->base, f->var[SF_ENC_IDENTITY].digest, f->cls)) {
        pk__drop_identity(f); /* its compression reads it again */
        return 0;
    }
    f->reused = 1;
    return reuse(b, f, err, errlen);
}

static int run_job(void *arg, size_t j, unsigned thread, char *err, size_t errlen)
{
    build *b = arg;
    const job *jb = &b->jobs[j];
    pk_file *f = &b->site.files[jb->file];
    if (jb->enc == SF_ENC_IDENTITY) {
        uint64_t need = f->size; /* the file, read whole (the read sets f->size to
                                  * what it contains: an .svgz's SVG) */
        pk_budget_take(&b->budget, need);
        int rc = read_job(b, f, thread, err, errlen);
        pk_budget_give(&b->budget, need);
        return rc;
    }
    /* the encoder's tables and output, and the file's bytes (counted for
     * each of its jobs, which may run at once) */
    uint64_t need = pk_compress_memory(jb->enc, f->size) + f->size;
    pk_budget_take(&b->budget, need);
    int rc = load_identity(b, jb->file, err, errlen);
    if (rc == 0)
        rc = compress_one(b, f, jb->enc, thread, err, errlen);
    pk_budget_give(&b->budget, need);
    if (rc != 0)
        return -1;
    /* the last of the file's jobs: the others are done with its bytes */
    if (atomic_fetch_sub_explicit(&b->pending[jb->file], 1, memory_order_acq_rel) == 1)
        pk__drop_identity(f);
    return 0;
}

static uint64_t job_weight(const build *b, const job *jb)
{
    uint64_t size = b->site.files[jb->file].size + 1;
    if (jb->enc == SF_ENC_IDENTITY)
        return size;
    return size * pk_compress_cost(jb->enc);
}

/* Files are taken in blocks of about this much input, largest files first;
 * within a block, the heaviest job first. A file's jobs thus end close
 * together, and its bytes are dropped early (pk__drop_identity), while one
 * encoder still runs over many files in a row (interleaving encoders job
 * by job cost 7-10% more CPU on a site of small files, in two pairs of
 * runs). */
#define JOB_BLOCK_BYTES (8u << 20)

/* A file or job in sort order. qsort has no context argument, so each
 * element carries its keys. */
typedef struct sort_key {
    size_t block;    /* lower blocks first */
    uint64_t weight; /* then the heavier first */
    size_t idx;      /* then in index order, the same on every platform */
} sort_key;

static int cmp_key(const void *a, const void *c)
{
    const sort_key *x = a, *y = c;
    if (x->block != y->block)
        return x->block > y->block ? 1 : -1;
    if (x->weight != y->weight)
        return x->weight < y->weight ? 1 : -1;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

/* order[0, njobs): the jobs by the block of their file (the files largest
 * first, JOB_BLOCK_BYTES of input to a block), and within a block by
 * their weight w, heaviest first. @return 0, or -1 out of memory. */
static int job_order(const build *b, const uint64_t *w, size_t *order)
{
    size_t n = b->site.n, most = n > b->njobs ? n : b->njobs;
    sort_key *k = malloc((most ? most : 1) * sizeof *k);
    size_t *fblock = malloc((n ? n : 1) * sizeof *fblock);
    if (!k || !fblock) {
        free(k);
        free(fblock);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        k[i] = (sort_key){0, b->site.files[i].size, i};
    qsort(k, n, sizeof *k, cmp_key);
    uint64_t sum = 0;
    for (size_t i = 0; i < n; i++) {
        fblock[k[i].idx] = (size_t)(sum / JOB_BLOCK_BYTES);
        sum += b->site.files[k[i].idx].size;
    }
    for (size_t j = 0; j < b->njobs; j++)
        k[j] = (sort_key){fblock[b->jobs[j].file], w[j], j};
    qsort(k, b->njobs, sizeof *k, cmp_key);
    for (size_t j = 0; j < b->njobs; j++)
        order[j] = k[j].idx;
    free(k);
    free(fblock);
    return 0;
}

int pk__run_jobs(build *b, const char *phase, unsigned nthreads)
{
    if (b->njobs == 0)
        return 0;
    uint64_t *w = malloc(b->njobs * sizeof *w);
    size_t *order = malloc(b->njobs * sizeof *order);
    for (size_t i = 0; w && i < b->njobs; i++)
        w[i] = job_weight(b, &b->jobs[i]);
    if (!w || !order || job_order(b, w, order) != 0) {
        snprintf(b->err, sizeof b->err, "out of memory scheduling %zu jobs", b->njobs);
        free(w);
        free(order);
        return -1;
    }
    pk_progress_phase(&b->prog, phase);
    int rc = pk_pool_run(b->njobs, order, w, nthreads, run_job, b, pk_progress_tick, &b->prog,
                         b->err, sizeof b->err);
    pk_progress_clear(&b->prog);
    free(w);
    free(order);
    return rc;
}

/* A file's identity digest and class, and its index, in sort order. */
typedef struct twin_key {
    uint8_t digest[PK_DIGEST_LEN];
    int cls;
    size_t idx;
} twin_key;

static int cmp_twin(const void *a, const void *c)
{
    const twin_key *x = a, *y = c;
    int d = memcmp(x->digest, y->digest, PK_DIGEST_LEN);
    if (d)
        return d;
    if (x->cls != y->cls)
        return x->cls < y->cls ? -1 : 1;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

/* Marks each file to be compressed that has the bytes and class of an
 * earlier one as its twin, and drops its bytes: identical files (copies of
 * the same page under several versions of a documentation site) are
 * compressed once, not once a copy, and the same output is stored once
 * anyway. @return the number marked, or -1 out of memory. */
static long mark_twins(build *b)
{
    size_t n = 0;
    for (size_t i = 0; i < b->site.n; i++)
        n += compressible(&b->site.files[i]) && !b->site.files[i].reused;
    twin_key *k = malloc((n ? n : 1) * sizeof *k);
    if (!k)
        return -1;
    n = 0;
    for (size_t i = 0; i < b->site.n; i++) {
        const pk_file *f = &b->site.files[i];
        if (compressible(f) && !f->reused) {
            memcpy(k[n].digest, f->var[SF_ENC_IDENTITY].digest, PK_DIGEST_LEN);
            k[n].cls = f->cls;
            k[n++].idx = i;
        }
    }
    qsort(k, n, sizeof *k, cmp_twin);
    long marked = 0;
    for (size_t i = 1, first = 0; i < n; i++) {
        if (memcmp(k[i].digest, k[first].digest, PK_DIGEST_LEN) != 0 || k[i].cls != k[first].cls) {
            first = i;
            continue;
        }
        pk_file *f = &b->site.files[k[i].idx];
        f->twin = k[first].idx + 1;
        pk__drop_identity(f);
        marked++;
    }
    free(k);
    return marked;
}

void pk__share_twins(build *b)
{
    for (size_t i = 0; i < b->site.n; i++) {
        pk_file *f = &b->site.files[i];
        if (!f->twin)
            continue;
        const pk_file *of = &b->site.files[f->twin - 1];
        for (int e = SF_ENC_GZIP; e < SF_ENC_COUNT; e++) {
            f->var[e] = of->var[e];
            f->var[e].owned = 0; /* a view of of's, written once as the same body */
        }
    }
}

/* Queues the compression work. */
int pk__plan_compression(build *b, pk_stats *st)
{
    size_t cap = b->site.n * (SF_ENC_COUNT - 1);
    free(b->jobs);
    b->jobs = malloc((cap ? cap : 1) * sizeof *b->jobs);
    b->njobs = 0;
    b->pending = calloc(b->site.n ? b->site.n : 1, sizeof *b->pending);
    b->load = calloc(b->site.n ? b->site.n : 1, sizeof *b->load);
    long twins = b->jobs && b->pending && b->load ? mark_twins(b) : -1;
    if (twins < 0) {
        snprintf(b->err, sizeof b->err, "out of memory planning compression");
        return -1;
    }
    st->twins = (uint64_t)twins;
    for (size_t i = 0; i < b->site.n; i++) {
        pk_file *f = &b->site.files[i];
        st->reused += (uint64_t)f->reused;
        if (!compressible(f) || f->reused || f->twin)
            continue;
        for (int e = SF_ENC_GZIP; e < SF_ENC_COUNT; e++)
            b->jobs[b->njobs++] = (job){i, e};
        atomic_init(&b->pending[i], SF_ENC_COUNT - 1);
    }
    return 0;
}
