/*
 * The per-reader path cache (servd/pathcache.c): what it returns is what the
 * pack holds, it never answers for another path, and it lives and dies with
 * its reader (a new reader, as after a swap, starts empty).
 */
#include "runner.h"
#include "pathcache.h"
#include "sf/store.h"

/* Stores a file of one or two variants (identity, gzip) under path. */
static void put(sf_writer *w, const char *path, const char *id, const char *gz)
{
    sf_entry_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.kind = SF_KIND_FILE;
    spec.mime.ptr = "text/plain";
    spec.mime.len = 10;
    spec.nvariants = gz ? 2 : 1;
    spec.flags = gz ? SF_ENTRY_NEGOTIABLE : 0;
    const char *bodies[2] = {id, gz};
    static const char h200[] = "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n";
    static const char h304[] = "HTTP/1.1 304 Not Modified\r\n";
    for (unsigned i = 0; i < spec.nvariants; i++) {
        sf_variant_spec *v = &spec.variants[i];
        v->encoding = i ? SF_ENC_GZIP : SF_ENC_IDENTITY;
        v->body_len = strlen(bodies[i]);
        memset(v->body_key, 0, SF_KEY_LEN);
        memcpy(v->body_key, bodies[i], v->body_len < SF_KEY_LEN ? v->body_len : SF_KEY_LEN);
        v->etag.ptr = "\"e\"";
        v->etag.len = 3;
        v->h200.ptr = h200;
        v->h200.len = sizeof h200 - 1;
        v->rep_off = v->h200.len;
        v->h304.ptr = h304;
        v->h304.len = sizeof h304 - 1;
        ASSERT_EQ(sf_writer_put_body(w, v->body_key, bodies[i], v->body_len), 0);
    }
    uint8_t *rec;
    size_t n;
    ASSERT_EQ(sf_entry_encode(&spec, &rec, &n), 0);
    ASSERT_EQ(sf_writer_put_path(w, path, strlen(path), rec, n), 0);
    free(rec);
}

static sf_pack *open_pack(void)
{
    char path[4200], err[512];
    snprintf(path, sizeof path, "%s/cache.lmdb", t_tmpdir());
    sf_writer *w;
    if (sf_writer_open(path, 1 << 20, &w, err, sizeof err) != 0)
        t__fail(__FILE__, __LINE__, "writer: %s", err);
    put(w, "/a.txt", "identity of a", "gzip of a");
    put(w, "/b.txt", "identity of b", NULL);
    sf_meta meta;
    memset(&meta, 0, sizeof meta);
    if (sf_writer_commit(w, &meta, err, sizeof err) != 0)
        t__fail(__FILE__, __LINE__, "commit: %s", err);
    sf_pack *p;
    if (sf_pack_open(path, &p, err, sizeof err) != 0)
        t__fail(__FILE__, __LINE__, "open: %s", err);
    return p;
}

TEST(pathcache_hit_is_the_packed_entry)
{
    sf_pack *p = open_pack();
    sf_reader *rd;
    ASSERT_EQ(sf_reader_begin(p, &rd), 0);
    ASSERT(sv_pathcache_get(rd, "/a.txt", 6) == NULL); /* nothing cached yet */

    sf_entry e;
    ASSERT_EQ(sf_lookup(rd, "/a.txt", 6, &e), 0);
    const sv_cached *c = sv_pathcache_put(rd, "/a.txt", 6, &e);
    ASSERT(c != NULL);
    ASSERT(sv_pathcache_get(rd, "/a.txt", 6) == c);
    ASSERT_EQ(c->e.nvariants, 2);
    for (unsigned i = 0; i < 2; i++) {
        sf_view want;
        ASSERT_EQ(sf_body(rd, &c->e.variants[i], &want), 0);
        ASSERT_EQ(c->body[i].len, want.len);
        ASSERT(c->body[i].ptr == want.ptr); /* the same bytes of the map */
    }
    ASSERT_MEM_EQ(c->body[1].ptr, c->body[1].len, "gzip of a", 9);

    /* other paths, prefixes and raw spellings are not this entry */
    ASSERT(sv_pathcache_get(rd, "/b.txt", 6) == NULL);
    ASSERT(sv_pathcache_get(rd, "/a.tx", 5) == NULL);
    ASSERT(sv_pathcache_get(rd, "/a%2etxt", 8) == NULL);
    ASSERT(sv_pathcache_get(rd, "", 0) == NULL);
    sf_reader_end(rd);
    sf_pack_close(p);
}

TEST(pathcache_limits)
{
    sf_pack *p = open_pack();
    sf_reader *rd;
    ASSERT_EQ(sf_reader_begin(p, &rd), 0);
    sf_entry e;
    ASSERT_EQ(sf_lookup(rd, "/b.txt", 6, &e), 0);
    char longpath[SV_PATHCACHE_KEY + 2];
    memset(longpath, 'x', sizeof longpath);
    longpath[0] = '/';
    /* a raw path longer than SV_PATHCACHE_KEY is not cached */
    ASSERT(sv_pathcache_put(rd, longpath, SV_PATHCACHE_KEY + 1, &e) == NULL);
    ASSERT(sv_pathcache_get(rd, longpath, SV_PATHCACHE_KEY + 1) == NULL);
    /* exactly SV_PATHCACHE_KEY is */
    ASSERT(sv_pathcache_put(rd, longpath, SV_PATHCACHE_KEY, &e) != NULL);
    ASSERT(sv_pathcache_get(rd, longpath, SV_PATHCACHE_KEY) != NULL);
    /* redirects are never cached */
    sf_entry r = e;
    r.kind = SF_KIND_REDIRECT;
    ASSERT(sv_pathcache_put(rd, "/r", 2, &r) == NULL);
    sf_reader_end(rd);
    sf_pack_close(p);
}

TEST(pathcache_dies_with_its_reader)
{
    sf_pack *p = open_pack();
    sf_reader *rd;
    ASSERT_EQ(sf_reader_begin(p, &rd), 0);
    sf_entry e;
    ASSERT_EQ(sf_lookup(rd, "/b.txt", 6, &e), 0);
    ASSERT(sv_pathcache_put(rd, "/b.txt", 6, &e) != NULL);
    ASSERT(sf_reader_user(rd) != NULL);
    sf_reader_end(rd); /* unmaps the table (a leak would show under ASan/valgrind) */

    sf_reader *rd2; /* as after a swap: a new reader starts empty */
    ASSERT_EQ(sf_reader_begin(p, &rd2), 0);
    ASSERT(sf_reader_user(rd2) == NULL);
    ASSERT(sv_pathcache_get(rd2, "/b.txt", 6) == NULL);
    sf_reader_end(rd2);
    sf_pack_close(p);
}

TEST(pathcache_many_paths_never_mix)
{
    sf_pack *p = open_pack();
    sf_reader *rd;
    ASSERT_EQ(sf_reader_begin(p, &rd), 0);
    sf_entry a, b;
    ASSERT_EQ(sf_lookup(rd, "/a.txt", 6, &a), 0);
    ASSERT_EQ(sf_lookup(rd, "/b.txt", 6, &b), 0);
    /* far more raw paths than slots: every hit must be for its own path */
    char path[32];
    for (int i = 0; i < 4 * SV_PATHCACHE_SLOTS; i++) {
        int n = snprintf(path, sizeof path, "/p%d", i);
        ASSERT(sv_pathcache_put(rd, path, (size_t)n, i % 2 ? &a : &b) != NULL);
    }
    int hits = 0;
    for (int i = 0; i < 4 * SV_PATHCACHE_SLOTS; i++) {
        int n = snprintf(path, sizeof path, "/p%d", i);
        const sv_cached *c = sv_pathcache_get(rd, path, (size_t)n);
        if (!c)
            continue;
        hits++;
        ASSERT_EQ(c->e.nvariants, i % 2 ? 2u : 1u);
    }
    ASSERT(hits > 0 && hits <= SV_PATHCACHE_SLOTS);
    sf_reader_end(rd);
    sf_pack_close(p);
}
