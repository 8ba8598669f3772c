/*
 * pathcache.c - the per-reader table from raw request paths to file entries
 * (see pathcache.h for why and for the lifetimes).
 */
#include "pathcache.h"

#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

typedef struct slot {
    uint64_t hash;
    uint32_t len; /* 0: empty */
    char path[SV_PATHCACHE_KEY];
    sv_cached c;
} slot;

typedef struct table {
    slot slots[SV_PATHCACHE_SLOTS];
} table;

/* The table is mapped rather than malloc'd: only the pages of slots in use
 * become resident, and unmapping it when the reader ends gives the memory
 * back at once (a sanitizer's allocator would hold it in quarantine, and
 * swaps would look like a leak). */
static table *table_new(void)
{
    void *p = mmap(NULL, sizeof(table), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static void table_free(void *t)
{
    munmap(t, sizeof(table));
}

/* Eight bytes per multiply (a splitmix64-style mix), then the tail: about a
 * third of FNV-1a's instructions on the usual 10-40 byte path, whose
 * per-byte multiplies also had to wait for each other. The hash only picks
 * a slot: a hit is confirmed by comparing the path, so a collision costs a
 * lookup in the pack, never a wrong answer. */
static uint64_t hash(const char *p, size_t n)
{
    uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
    for (; n >= 8; p += 8, n -= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
        h ^= h >> 31;
    }
    uint64_t w = 0;
    for (size_t i = 0; i < n; i++)
        w |= (uint64_t)(unsigned char)p[i] << (8 * i);
    h = (h ^ w) * 0x94d049bb133111ebull;
    return h ^ (h >> 29);
}

const sv_cached *sv_pathcache_get(sf_reader *rd, const char *p, size_t n)
{
    table *t = sf_reader_user(rd);
    if (!t || n == 0 || n > SV_PATHCACHE_KEY)
        return NULL;
    uint64_t h = hash(p, n);
    slot *s = &t->slots[h & (SV_PATHCACHE_SLOTS - 1)];
    if (s->len != n || s->hash != h || memcmp(s->path, p, n) != 0)
        return NULL;
    return &s->c;
}

const sv_cached *sv_pathcache_put(sf_reader *rd, const char *p, size_t n, const sf_entry *e)
{
    if (n == 0 || n > SV_PATHCACHE_KEY || e->kind != SF_KIND_FILE || e->nvariants > SF_ENC_COUNT)
        return NULL;
    table *t = sf_reader_user(rd);
    if (!t) {
        t = table_new(); /* zero-filled; pages become resident as slots are used */
        if (!t)
            return NULL;
        sf_reader_set_user(rd, t, table_free);
    }
    uint64_t h = hash(p, n);
    slot *s = &t->slots[h & (SV_PATHCACHE_SLOTS - 1)];
    s->len = 0; /* empty until complete */
    s->c.e = *e;
    for (unsigned i = 0; i < e->nvariants; i++)
        if (sf_body(rd, &e->variants[i], &s->c.body[i]) != 0)
            return NULL;
    s->hash = h;
    memcpy(s->path, p, n);
    s->len = (uint32_t)n;
    return &s->c;
}
