/*
 * lmdb_layout.h - what servd knows of LMDB's file format (liblmdb 0.9.24,
 * mdb.c), which the format fixes: the writer counts with the page layout
 * (store_write.c: its batches and the packer's map size) and the reader
 * checks every page against it before LMDB follows one (lmdb_walk.c).
 */
#ifndef SF_LMDB_LAYOUT_H
#define SF_LMDB_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

/* liblmdb lays its pages out in the host's word size and byte order; the
 * format fixes both (docs/format.md section 1, and CMakeLists.txt). */
_Static_assert(sizeof(void *) == 8 && sizeof(size_t) == 8,
               "a pack's LMDB layout is that of a 64-bit machine");
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "a pack's LMDB layout is that of a little-endian machine"
#endif

/* PAGEHDRSZ, NODESIZE, sizeof(indx_t), sizeof(pgno_t), MAX_PAGESIZE */
enum { LMDB_PAGE_HDR = 16, LMDB_NODE_HDR = 8, LMDB_SLOT = 2, LMDB_PGNO = 8 };
enum { LMDB_MAX_PAGE = 32768 };

/*
 * Walks every page a read-only LMDB reader of the file can reach, from the
 * main database's root in the meta page LMDB uses (meta: its first
 * LMDB_META_LEN bytes) through the named databases, and checks each the way
 * LMDB itself never does: the page holds its own number and a branch or leaf
 * header whose bounds fit the page; every node and key lies inside its
 * page; every page number lies in the file; overflow pages are marked so;
 * no page is reached twice, every leaf of a tree lies at one depth, and no
 * tree is deeper than LMDB's cursor stack. A value's length is not
 * checked: the readers bound every view by the map and name the path whose
 * record or body runs past it. A damaged page can make liblmdb read outside
 * the map, loop for ever (a page whose lower bound lies inside its header
 * gives it 2^31 keys to search) or fail an assertion (a cursor stepping to
 * a branch where a leaf should be); after this walk it can do none of it.
 * Pages are read with pread: a file cut short meanwhile is refused, where
 * a map would raise SIGBUS.
 * @return 0; SF_ECORRUPT with "corrupt pack (...)" or "truncated pack
 *         (...)" in why; SF_EIO (a read failed: why holds strerror) or
 *         SF_ENOMEM. */
int sf__lmdb_walk(int fd, const unsigned char *meta, uint32_t psize, char *why, size_t whylen);

/* LMDB's integers, little-endian on the machines servd runs on, read from
 * bytes of any alignment. */
static inline uint16_t lmdb_ld16(const unsigned char *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

static inline uint32_t lmdb_ld32(const unsigned char *p)
{
    return (uint32_t)lmdb_ld16(p) | (uint32_t)lmdb_ld16(p + 2) << 16;
}

static inline uint64_t lmdb_ld64(const unsigned char *p)
{
    return (uint64_t)lmdb_ld32(p) | (uint64_t)lmdb_ld32(p + 4) << 32;
}

/* The bytes of a meta page sf__lmdb_walk reads (through mm_txnid). */
#define LMDB_META_LEN 152

#endif
