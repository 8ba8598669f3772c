/*
 * lmdb_walk.c - every page of a pack checked before liblmdb follows it.
 *
 * liblmdb trusts the pages of its file. Found by fuzz_pack_readers: a leaf
 * whose lower bound (mp_lower) lies inside its page header gives
 * NUMKEYS() 2^31 keys, and mdb_node_search's binary search over them
 * overflows and never ends. Other damage makes it read outside the map,
 * walk a cycle of branch pages, or fail an assertion (leaves at different
 * depths: a cursor stepping to the next page takes a branch for a leaf).
 * Such a pack was refused only by its check in a child: when it timed out
 * (60 s of a core spinning) or crashed. This walk refuses it at once and
 * names the page.
 *
 * The layout (liblmdb 0.9.24, 64-bit, little-endian):
 *   page:  0 pgno (8) | 8 pad (2) | 10 flags (2) | 12 lower (2), 14 upper (2)
 *          (an overflow page: 12 its number of pages (4)) | 16 node offsets
 *   node:  0 lo (2) | 2 hi (2) | 4 flags (2) | 6 key size (2) | 8 key, data
 *          data size lo | hi << 16 in a leaf; the child's page number
 *          lo | hi << 16 | flags << 32 in a branch
 *   MDB_db (48 bytes): 4 flags (2) | 40 root (8); in the meta page at 40
 *          (the free list's) and 88 (the main database's); mm_last_pg at 136.
 */
#include "lmdb_layout.h"
#include "sf/store.h"

#include <errno.h>
#include <inttypes.h>
#include <lmdb.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

enum {
    P_BRANCH = 0x01,
    P_LEAF = 0x02,
    P_OVERFLOW = 0x04,
    P_TYPES = 0x6f, /* branch, leaf, overflow, meta, leaf2, sub-page */
    F_BIGDATA = 0x01,
    F_SUBDATA = 0x02,
    DB_LEN = 48,
    MAX_KEY = 511,  /* MDB_MAXKEYSIZE */
    MAX_DEPTH = 32, /* CURSOR_STACK: a deeper tree is one LMDB cannot read */
    META_MAIN = 88,
    META_LAST_PG = 136,
};

/* The flags a database may carry: servd's have none; the comparators and
 * duplicate sorting the others select read keys and values otherwise. */
#define DB_FLAGS                                                                                   \
    (MDB_REVERSEKEY | MDB_DUPSORT | MDB_INTEGERKEY | MDB_DUPFIXED | MDB_INTEGERDUP | MDB_REVERSEDUP)

#define NO_PAGE UINT64_MAX /* P_INVALID: an empty database's root */

/* Pages are read with pread, not mapped: a file cut short during the walk
 * is then a short read, not a SIGBUS in a running servd (whose guard only
 * knows LMDB's own map). One buffer per level of recursion (a named
 * database's tree is walked while the main database's leaf that names it
 * is still in use), in one anonymous map, as the bitmap of pages seen: the
 * kernel touches only the levels used and takes all of it back at the
 * end, where the heap would keep it, or a checker's quarantine hold it. */
#define MAX_LEVELS (2 * MAX_DEPTH)

struct walk {
    int fd;
    unsigned char *bufs; /* MAX_LEVELS pages */
    int level;           /* of the page being read */
    uint64_t npages;     /* mm_last_pg + 1 */
    size_t psize;
    unsigned char *seen; /* a bit per page */
    char *why;
    size_t whylen;
};

static int bad(struct walk *w, uint64_t pgno, const char *what)
{
    snprintf(w->why, w->whylen, "corrupt pack (LMDB page %" PRIu64 " %s)", pgno, what);
    return SF_ECORRUPT;
}

/* Reads len bytes of page pgno into the buffer of the current level. */
static int read_page(struct walk *w, uint64_t pgno, size_t len, const unsigned char **out)
{
    unsigned char *b = w->bufs + (size_t)w->level * w->psize;
    size_t got = 0;
    while (got < len) {
        ssize_t n = pread(w->fd, b + got, len - got, (off_t)(pgno * w->psize + got));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            snprintf(w->why, w->whylen, "%s", strerror(errno));
            return SF_EIO;
        }
        if (n == 0) {
            snprintf(w->why, w->whylen, "truncated pack (page %" PRIu64 " is missing)", pgno);
            return SF_ECORRUPT;
        }
        got += (size_t)n;
    }
    *out = b;
    return 0;
}

/* Pages first .. first + n - 1, which page from points to: inside the file
 * (after the two meta pages), and not reached before. */
static int claim(struct walk *w, uint64_t from, uint64_t first, uint64_t n)
{
    if (n == 0)
        return 0;
    if (first < 2 || first >= w->npages || n > w->npages - first)
        return bad(w, from, "points to a page outside the file");
    for (uint64_t p = first; p < first + n; p++) {
        if (w->seen[p / 8] & 1u << (p % 8))
            return bad(w, from, "points to a page reached before (a cycle or a shared page)");
        w->seen[p / 8] |= (unsigned char)(1u << (p % 8));
    }
    return 0;
}

/* The overflow pages of a value, from page ov. Their count is the first
 * page's: the value's length is the readers' to check against the map
 * (sf_lookup, sf_body), which name the path whose record or body it is. */
static int overflow(struct walk *w, uint64_t from, uint64_t ov)
{
    int rc = claim(w, from, ov, 1);
    if (rc)
        return rc;
    const unsigned char *pg;
    if ((rc = read_page(w, ov, LMDB_PAGE_HDR, &pg)) != 0)
        return rc;
    uint32_t pages = lmdb_ld32(pg + 12);
    if (lmdb_ld64(pg) != ov || (lmdb_ld16(pg + 10) & P_TYPES) != P_OVERFLOW || pages == 0)
        return bad(w, ov, "is not the overflow page a value points to");
    return claim(w, ov, ov + 1, pages - 1);
}

static int tree(struct walk *w, uint64_t pgno, int depth, int main_db, int *leaves);
static int tree_nodes(struct walk *w, uint64_t pgno, const unsigned char *pg, int depth,
                      int main_db, int *leaves);

/* A named database's MDB_db record, in a node of the main database. */
static int named(struct walk *w, uint64_t pgno, const unsigned char *db)
{
    if (lmdb_ld16(db + 4) & DB_FLAGS)
        return bad(w, pgno, "names a database with flags a pack does not use");
    uint64_t root = lmdb_ld64(db + 40);
    if (root == NO_PAGE)
        return 0;
    int rc = claim(w, pgno, root, 1), leaves = -1;
    return rc ? rc : tree(w, root, 0, 0, &leaves); /* a cursor of its own */
}

/* One node of a leaf page: a large value's first overflow page and, in
 * the main database, a named database's record. An inline value's length
 * is the readers' to check, as an overflow value's is. */
static int leaf_node(struct walk *w, uint64_t pgno, const unsigned char *node, size_t room,
                     int main_db)
{
    uint64_t size = lmdb_ld16(node) | (uint64_t)lmdb_ld16(node + 2) << 16;
    unsigned flags = lmdb_ld16(node + 4);
    size_t key = lmdb_ld16(node + 6), at = LMDB_NODE_HDR + key;
    if (flags & ~(unsigned)(F_BIGDATA | F_SUBDATA))
        return bad(w, pgno, "has a node with flags a pack does not use");
    if (flags & F_BIGDATA) {
        if (flags & F_SUBDATA || at + LMDB_PGNO > room)
            return bad(w, pgno, "has a node that does not fit in it");
        return overflow(w, pgno, lmdb_ld64(node + at));
    }
    if (flags & F_SUBDATA) {
        if (!main_db || size != DB_LEN || at + DB_LEN > room)
            return bad(w, pgno, "has a database record out of place");
        return named(w, pgno, node + at);
    }
    return 0;
}

/* A branch or leaf page and, depth first, every page under it. */
static int tree(struct walk *w, uint64_t pgno, int depth, int main_db, int *leaves)
{
    const unsigned char *pg;
    if (w->level + 1 >= MAX_LEVELS)
        return bad(w, pgno, "is in a tree deeper than LMDB reads");
    int rc = read_page(w, pgno, w->psize, &pg);
    if (rc)
        return rc;
    w->level++; /* pg stays this level's while the pages under it are read */
    rc = tree_nodes(w, pgno, pg, depth, main_db, leaves);
    w->level--;
    return rc;
}

/* The nodes of page pgno (its bytes at pg) and the pages under them. */
static int tree_nodes(struct walk *w, uint64_t pgno, const unsigned char *pg, int depth,
                      int main_db, int *leaves)
{
    unsigned type = lmdb_ld16(pg + 10) & P_TYPES;
    size_t lower = lmdb_ld16(pg + 12), upper = lmdb_ld16(pg + 14);
    if (lmdb_ld64(pg) != pgno)
        return bad(w, pgno, "does not hold its own number");
    if (type != P_BRANCH && type != P_LEAF)
        return bad(w, pgno, "is neither a branch nor a leaf page");
    if (lower < LMDB_PAGE_HDR || (lower - LMDB_PAGE_HDR) % LMDB_SLOT || lower > upper ||
        upper > w->psize)
        return bad(w, pgno, "has a damaged header");
    size_t n = (lower - LMDB_PAGE_HDR) / LMDB_SLOT;
    if (n < (type == P_BRANCH ? 2u : 1u))
        return bad(w, pgno, "has too few nodes");
    /* mdb_cursor_sibling steps to the next page at the same height: all
     * leaves of a tree must be at one depth, or MDB_NEXT takes a branch for
     * a leaf (or a leaf for a branch) */
    if (type == P_LEAF) {
        if (*leaves < 0)
            *leaves = depth;
        else if (*leaves != depth)
            return bad(w, pgno, "is a leaf at another depth than its tree's other leaves");
    }
    for (size_t i = 0; i < n; i++) {
        size_t off = lmdb_ld16(pg + LMDB_PAGE_HDR + i * LMDB_SLOT);
        if (off < upper || off % 2 || off > w->psize - LMDB_NODE_HDR)
            return bad(w, pgno, "has a node outside its page");
        const unsigned char *node = pg + off;
        size_t room = w->psize - off, key = lmdb_ld16(node + 6);
        if (key > MAX_KEY || key > room - LMDB_NODE_HDR)
            return bad(w, pgno, "has a key that does not fit in it");
        int rc;
        if (type == P_LEAF) {
            rc = leaf_node(w, pgno, node, room, main_db);
        } else {
            uint64_t child = lmdb_ld16(node) | (uint64_t)lmdb_ld16(node + 2) << 16 |
                             (uint64_t)lmdb_ld16(node + 4) << 32;
            if (depth + 1 >= MAX_DEPTH)
                return bad(w, pgno, "is in a tree deeper than LMDB reads");
            rc = claim(w, pgno, child, 1);
            if (rc == 0)
                rc = tree(w, child, depth + 1, main_db, leaves);
        }
        if (rc)
            return rc;
    }
    return 0;
}

int sf__lmdb_walk(int fd, const unsigned char *meta, uint32_t psize, char *why, size_t whylen)
{
    /* sf_pack_open has checked these; checked again, the walk stands alone
     * (fuzz_lmdb_walk calls it on any bytes) */
    struct stat st;
    if (fstat(fd, &st) != 0) {
        snprintf(why, whylen, "%s", strerror(errno));
        return SF_EIO;
    }
    uint64_t last = lmdb_ld64(meta + META_LAST_PG);
    if (psize < 512 || psize > 65536 || (psize & (psize - 1)) != 0 ||
        last >= (uint64_t)st.st_size / psize) {
        snprintf(why, whylen, "corrupt pack (LMDB's meta page does not fit the file)");
        return SF_ECORRUPT;
    }
    struct walk w = {.fd = fd, .npages = last + 1, .psize = psize, .why = why, .whylen = whylen};
    const unsigned char *db = meta + META_MAIN;
    if (lmdb_ld16(db + 4) & DB_FLAGS) {
        snprintf(why, whylen, "corrupt pack (LMDB's main database has flags a pack does not use)");
        return SF_ECORRUPT;
    }
    uint64_t root = lmdb_ld64(db + 40);
    if (root == NO_PAGE)
        return 0; /* empty: LMDB finds nothing, and says so */
    if (root < 2 || root >= w.npages) {
        snprintf(why, whylen, "corrupt pack (LMDB's main database has its root outside the file)");
        return SF_ECORRUPT;
    }
    size_t seen_len = (size_t)(w.npages / 8 + 1), bufs_len = (size_t)MAX_LEVELS * psize;
    void *seen = mmap(NULL, seen_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    void *bufs = mmap(NULL, bufs_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    w.seen = seen == MAP_FAILED ? NULL : seen;
    w.bufs = bufs == MAP_FAILED ? NULL : bufs;
    int rc;
    if (!w.seen || !w.bufs) {
        snprintf(why, whylen, "out of memory");
        rc = SF_ENOMEM;
    } else if ((rc = claim(&w, 0, root, 1)) == 0) {
        int leaves = -1;
        rc = tree(&w, root, 0, 1, &leaves);
    }
    if (w.seen)
        munmap(w.seen, seen_len);
    if (w.bufs)
        munmap(w.bufs, bufs_len);
    return rc;
}
