/*
 * build.c - servd-pack build (build.h): its phases in order (the reads,
 * read.c, and the compression run as jobs on the pool, jobs.c; the write,
 * write.c) and, between them, each file's caching, headers, Last-Modified
 * and ETags.
 */
#include "build_int.h"
#include "msg.h"

#include "base.h"
#include "commands.h"
#include "compress.h"
#include "mime.h"
#include "progress.h"
#include "rules.h"
#include "sidecar.h"
#include "walk.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- decide types, caching and headers ---- */

static int decide(build *b)
{
    size_t nh = pk_rules_nheaders(b->rules);
    int rc = 0;
    size_t future = 0;
    const pk_file *first_future = NULL;
    pk_buf extras = PK_BUF_INIT;
    for (size_t i = 0; i < b->site.n && rc == 0; i++) {
        pk_file *f = &b->site.files[i];
        const pk_variant *id = &f->var[SF_ENC_IDENTITY];
        f->cache_control = pk_rules_cache_control(b->rules, f->key, f->key_len, f->mime);
        if (nh) {
            f->extra = calloc(nh, sizeof *f->extra);
            if (!f->extra) {
                snprintf(b->err, sizeof b->err, "%s: out of memory", f->src);
                rc = -1;
                break;
            }
            if (pk_rules_headers(b->rules, f->key, f->key_len, f->extra, &f->nextra, b->err,
                                 sizeof b->err) != 0) {
                rc = -1;
                break;
            }
        }
        /* Last-Modified: never later than the pack (servd's Date); with
         * --base, an unchanged file keeps the one it had, and a changed one
         * gets a later one even when its mtime (a file rewritten with its
         * old mtime, a new type from the rules) or SOURCE_DATE_EPOCH did
         * not move, unless the clock has not passed the old one. */
        f->last_modified = b->o->have_epoch ? b->o->epoch : f->mtime > b->now ? b->now : f->mtime;
        /* A date other than the file's own mtime, or an mtime a build
         * normalised, tells no change apart: If-Range must not take it. */
        f->date_weak = b->o->have_epoch || f->mtime > b->now || f->mtime < SF_DATE_NORMALISED;
        int64_t old;
        int old_weak = 0;
        pk_rep r = {.extra = f->extra, .nextra = f->nextra};
        if (pk_render_extras(&extras, &r) != 0) {
            snprintf(b->err, sizeof b->err, "%s: out of memory", f->src);
            rc = -1;
            break;
        }
        int in_base = pk_base_last_modified(b->base, f->key, f->key_len, id->digest, f->mime,
                                            extras.p, extras.len, &old, &old_weak);
        if (in_base == 1 && old <= b->now) {
            /* weak as it was; a base older than format 1.3 marks nothing,
             * so a kept date that is SOURCE_DATE_EPOCH's, or normalised,
             * is weak whatever it says, and so is one such a base gave a
             * file whose mtime was in the future then: the time of that
             * base's packing, earlier than the file's mtime (whether or
             * not the clock has passed it since) */
            f->last_modified = old;
            f->date_weak = old_weak || (b->o->have_epoch && old == b->o->epoch) ||
                           old < SF_DATE_NORMALISED ||
                           (f->mtime > old && pk_base_unmarked_packing_time(b->base, old));
            continue;
        }
        /* a changed file's date no later than the base's: weak, even when
         * the clock has not passed the base's date to give it old + 1 (a
         * base packed this second), since the date then names two
         * versions and If-Range must match neither */
        if (in_base == 0 && f->last_modified <= old) {
            if (old < b->now)
                f->last_modified = old + 1;
            f->date_weak = 1;
        }
        if (!b->o->have_epoch && f->mtime > b->now && future++ == 0)
            first_future = f;
    }
    pk_buf_free(&extras);
    if (rc == 0 && future == 1)
        pk_warn("%s has a modification time in the future; its Last-Modified is the "
                "time of packing, so two builds of this tree differ (fix the clock or the mtime, "
                "or set SOURCE_DATE_EPOCH)",
                first_future->src);
    else if (rc == 0 && future > 1)
        pk_warn("%zu files have a modification time in the future, the first %s; their "
                "Last-Modified is the time of packing, so two builds of this tree differ (fix "
                "the clock or the mtimes, or set SOURCE_DATE_EPOCH)",
                future, first_future->src);
    return rc;
}

/* Gives every variant its ETag, once its bytes, its type and its rule
 * headers are all known: the ETag covers the three (digest.h). */
static int name_variants(build *b)
{
    pk_buf ex = PK_BUF_INIT;
    int rc = 0;
    for (size_t i = 0; i < b->site.n && rc == 0; i++) {
        pk_file *f = &b->site.files[i];
        pk_rep r = {.extra = f->extra, .nextra = f->nextra};
        if (pk_render_extras(&ex, &r) != 0) {
            snprintf(b->err, sizeof b->err, "%s: out of memory", f->src);
            rc = -1;
        }
        for (int e = 0; e < SF_ENC_COUNT && rc == 0; e++) {
            pk_variant *v = &f->var[e];
            if (v->present &&
                pk_etag_rep(v->digest, f->mime, strlen(f->mime), ex.p, ex.len, v->etag) != 0) {
                snprintf(b->err, sizeof b->err, "%s: out of memory computing an ETag", f->src);
                rc = -1;
            }
        }
    }
    pk_buf_free(&ex);
    return rc;
}

/* The per-thread helpers, freed as soon as their phase is over: a
 * compressor holds its encoders' working memory (libdeflate's alone is
 * 9 MB at level 12), a libmagic handle about 10 MB, per thread. */
static void free_compressors(build *b)
{
    for (unsigned i = 0; b->comp && i < b->comp_threads; i++)
        pk_compressor_free(b->comp[i]);
    free(b->comp);
    b->comp = NULL;
}

static void close_magic(build *b)
{
    for (unsigned i = 0; b->magic && i < b->nthreads; i++)
        pk_magic_close(b->magic[i]);
    free(b->magic);
    b->magic = NULL;
}

/* Puts opt before b's message ("--base old.lmdb: No such file or
 * directory"), so that a pipeline's log says which input failed. */
static void name_option(build *b, const char *opt)
{
    size_t k = strlen(opt) + 1, n = strlen(b->err);
    if (n > sizeof b->err - 1 - k) /* the end of a message that long goes */
        n = sizeof b->err - 1 - k;
    memmove(b->err + k, b->err, n);
    memcpy(b->err, opt, k - 1);
    b->err[k - 1] = ' ';
    b->err[k + n] = '\0';
}

/* Under --memory: the threads that compress, one for each
 * PK_COMPRESS_THREAD_SHARE of the limit, and what is left of the limit once
 * their state is counted for the jobs. */
static void plan_memory(build *b)
{
    uint64_t m = b->o->memory, shares = m / PK_COMPRESS_THREAD_SHARE;
    b->comp_threads = b->nthreads;
    if (m && shares < b->comp_threads)
        b->comp_threads = shares ? (unsigned)shares : 1;
    uint64_t states = (uint64_t)b->comp_threads * PK_COMPRESSOR_STATE_BYTES;
    /* a limit the threads' encoders take whole: every job alone */
    b->budget.limit = !m ? 0 : m > states ? m - states : 1;
}

static int start_compressors(build *b)
{
    char dir[PATH_MAX];
    pk__dir_of(b->o->output, dir, sizeof dir);
    char why[1200]; /* pk_spill_open's message: a directory cut at 1024 bytes */
    if (b->njobs && pk_spill_open(dir, &b->spill, why, sizeof why) != 0) {
        /* the output's directory, which may take no file at all (/proc
         * passes the access check for root) */
        snprintf(b->err, sizeof b->err, "%.800s: %s", b->o->output, why);
        return -1;
    }
    b->comp = calloc(b->comp_threads, sizeof *b->comp);
    if (!b->comp)
        goto out_nomem;
    for (unsigned i = 0; i < b->comp_threads; i++)
        if (!(b->comp[i] = pk_compressor_new()))
            goto out_nomem;
    return 0;
out_nomem:
    snprintf(b->err, sizeof b->err, "out of memory creating %u compressors", b->comp_threads);
    return -1;
}

/* Checks the output options and resolves them: b->output and b->manifest
 * name the files they lead to, and b->o points at b->opts, a copy of o
 * that names those. @return 0, PK_EXIT_USAGE (said), or -1 with b->err
 * set. */
static int resolve_outputs(build *b, const pk_build_opts *o)
{
    if (!o->output[0] || (o->manifest && !o->manifest[0])) {
        pk_err("%s: an empty file name", o->output[0] ? "--manifest" : "-o");
        return PK_EXIT_USAGE;
    }
    b->opts = *o;
    if (pk__resolve_output(b, "-o", o->output, b->output, sizeof b->output, NULL) != 0 ||
        (o->manifest && pk__resolve_output(b, "--manifest", o->manifest, b->manifest,
                                           sizeof b->manifest, &b->manifest_stream) != 0))
        return -1;
    /* --manifest may not be -o or --base, whatever the spelling or the links;
     * nor a stream (/dev/stdout) that is one of them (`> site.lmdb`) */
    if (o->manifest) {
        int is_out = b->manifest_stream ? pk__fd_is_file(b->manifest_fd, b->output)
                                        : pk__same_file(b->manifest, b->output);
        int is_base = o->base && (b->manifest_stream ? pk__fd_is_file(b->manifest_fd, o->base)
                                                     : pk__same_file(b->manifest, o->base));
        if (is_out || is_base) {
            pk_err("--manifest %s leads to the same file as %s %s", o->manifest,
                   is_out ? "-o" : "--base", is_out ? o->output : o->base);
            return PK_EXIT_USAGE;
        }
    }
    b->opts.output = b->output;
    b->opts.manifest = o->manifest ? b->manifest : NULL;
    b->o = &b->opts;
    return 0;
}

/* Sets b->err for a walk that found nothing to pack, saying where the
 * files went when it saw some. */
static void no_files(build *b)
{
    const pk_site *ws = &b->site;
    char dots[512]; /* the names are cut there */
    pk_names_list(dots, sizeof dots, (const char *const *)ws->dot_names, ws->ndot_names,
                  ws->skipped_dot);
    if (ws->skipped_dot + ws->skipped_excluded == 0)
        snprintf(b->err, sizeof b->err, "%s: no files to pack", b->o->root);
    else
        snprintf(b->err, sizeof b->err,
                 "%.1000s: no files to pack (skipped: %llu dotfiles%s%s%s, %llu excluded by "
                 "rules)",
                 b->o->root, (unsigned long long)ws->skipped_dot, dots[0] ? " (" : "", dots,
                 dots[0] ? ")" : "", (unsigned long long)ws->skipped_excluded);
}

/* Opens --base. One made with another compression profile is kept open
 * with nothing indexed (for pk_base_last_modified), and said unless -q.
 * @return 0, or -1 with b->err set. */
static int open_base(build *b)
{
    const pk_build_opts *o = b->o;
    char profile[PK_PROFILE_SIZE];
    int usable = 0;
    if (pk_profile(profile) != 0) {
        snprintf(b->err, sizeof b->err, "out of memory");
        return -1;
    }
    if (pk_base_open(o->base, profile, &b->base, &usable, b->err, sizeof b->err) != 0) {
        name_option(b, "--base");
        return -1;
    }
    if (!usable && !o->quiet)
        pk_err("%s: made with another compression profile (%s, now %s); compressing everything",
               o->base, pk_base_profile(b->base), profile);
    return 0;
}

/* Adds what the walk and the build saw to the summary's figures. */
static void add_site_stats(const build *b, pk_stats *st)
{
    const pk_site *s = &b->site;
    st->skipped_dot = s->skipped_dot;
    st->sidecars = s->sidecars;
    for (size_t i = 0; i < s->n; i++)
        st->decoded += (uint64_t)s->files[i].encoded;
    st->sidecar_names = (const char *const *)s->sidecar_names;
    st->nsidecar_names = s->nsidecar_names;
    st->dot_names = (const char *const *)s->dot_names;
    st->ndot_names = s->ndot_names;
    st->skipped_excluded = s->skipped_excluded;
    st->memory = b->o->memory;
    st->memory_waits = b->budget.waited;
    st->threads = b->nthreads;
    st->comp_threads = b->comp_threads;
}

int pk_build(const pk_build_opts *o)
{
    build b;
    memset(&b, 0, sizeof b);
    b.o = o;
    b.manifest_fd = -1;
    b.load_mu = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
    b.load_cv = (pthread_cond_t)PTHREAD_COND_INITIALIZER;
    b.lock_fd = -1;
    b.nthreads = o->jobs ? o->jobs : 1;
    pk_budget_init(&b.budget, o->memory); /* for the reads; the compression's: plan_memory */
    pk_progress_init(&b.prog, o->quiet);
    double t0 = pk_monotonic_seconds();
    pk_stats st;
    memset(&st, 0, sizeof st);
    int ok = 0, code = 1;

    int rc = resolve_outputs(&b, o);
    if (rc == PK_EXIT_USAGE)
        return rc;
    if (rc != 0)
        goto out_free;
    o = b.o; /* from here on it names the files the outputs lead to */
    pk__catch_signals(o);
    if (o->rules && pk_rules_load(o->rules, &b.rules, b.err, sizeof b.err) != 0)
        goto out_free;
    if (pk_walk(o->root, b.rules, &b.site, b.err, sizeof b.err) != 0)
        goto out_free;
    /* An output inside the root must be one the walk skips; an exclude
     * that skips it is used, even before it exists: checked before the
     * exclude warnings. */
    if (pk__check_not_input(&b, "-o", o->output) != 0 ||
        (o->manifest &&
         (b.manifest_stream ? pk__check_stream_not_input(&b, o->manifest)
                            : pk__check_not_input(&b, "--manifest", o->manifest)) != 0)) {
        code = PK_EXIT_USAGE;
        goto out_free;
    }
    pk_rules_warn(b.rules, PK_RULES_EXCLUDE);
    if (b.site.n == 0) {
        no_files(&b);
        goto out_free;
    }
    if (pk__replaceable(&b, "-o", o->output, 0) != 0 ||
        (o->manifest && !b.manifest_stream &&
         pk__replaceable(&b, "--manifest", o->manifest, 1) != 0))
        goto out_free;
    if (o->manifest && !b.manifest_stream)
        pk__open_commit_lock(&b);
    if (o->base && open_base(&b) != 0)
        goto out_free;

    /* Read and hash every file, and decide its type. */
    b.jobs = malloc(b.site.n * sizeof *b.jobs);
    b.magic = calloc(b.nthreads, sizeof *b.magic);
    if (!b.jobs || !b.magic) {
        snprintf(b.err, sizeof b.err, "out of memory");
        goto out_free;
    }
    for (size_t i = 0; i < b.site.n; i++)
        b.jobs[i] = (job){i, SF_ENC_IDENTITY};
    b.njobs = b.site.n;
    if (pk__run_jobs(&b, "reading", b.nthreads) != 0)
        goto out_free;
    pk_sidecars_note(&b.site);
    pk_rules_warn(b.rules, PK_RULES_ENCODED | PK_RULES_MIME);
    close_magic(&b);
    /* The time of packing is taken after the reads: a file written during
     * a long read phase is not "in the future" (nor clamped). */
    b.now = (int64_t)time(NULL);
    if (decide(&b) != 0 || pk__check_identity_space(&b) != 0)
        goto out_free;
    pk_rules_warn(b.rules, PK_RULES_CACHE_CONTROL | PK_RULES_HEADERS);
    /* Every warning about the options, the site and the rules is out by
     * now. Those about the machine (another build's turn, a file left by a
     * killed build) are not counted (msg.h), wherever they come. */
    if (o->strict && pk_warnings() > 0) {
        snprintf(b.err, sizeof b.err,
                 "--strict: %lu warning%s above about the options, the site or the rules; "
                 "nothing was built",
                 pk_warnings(), pk_warnings() == 1 ? "" : "s");
        goto out_free;
    }

    plan_memory(&b);
    if (pk__plan_compression(&b, &st) != 0 || start_compressors(&b) != 0)
        goto out_free;
    if (pk__run_jobs(&b, "compressing", b.comp_threads) != 0) {
        /* a full disk, or a file size limit, for the spill file (not a
         * failed read of a file of the site, whose disk is another) */
        if (atomic_load(&b.spill_failed))
            pk__note_space(&b, 0, pk_spill_size(b.spill), "the temporary file");
        goto out_free;
    }
    pk__share_twins(&b);
    if (name_variants(&b) != 0)
        goto out_free;
    free_compressors(&b);
    if (pk__write_pack(&b, &st) != 0)
        goto out_free;
    ok = 1;
    add_site_stats(&b, &st);
    st.seconds = pk_monotonic_seconds() - t0;
    if (!o->quiet)
        pk_summary_print(stderr, &st, o->output);

out_free:
    pk_progress_clear(&b.prog);
    if (!ok)
        pk_err("%s", b.err[0] ? b.err : "build failed");
    pk__end_turn(&b);
    free_compressors(&b);
    close_magic(&b);
    free(b.pending);
    free(b.load);
    free(b.jobs);
    pk_spill_close(b.spill);
    pk_site_free(&b.site); /* before the base: it may point into it */
    pk_base_close(b.base);
    pk_rules_free(b.rules);
    pk_budget_destroy(&b.budget);
    return ok ? 0 : code;
}
