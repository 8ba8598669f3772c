/*
 * spill.h - an unnamed temporary file that the compressed variants of a
 * build are written to as they are made, and read back from, each straight
 * into the room LMDB reserves for it, by the write: a build holds the
 * files being compressed, not every variant of the site (their pages are
 * the page cache's, written back and dropped under pressure, where a
 * buffer of the build's own would be anonymous memory). The write gives
 * the file's blocks back as it goes, so the variants never take room twice
 * on the output's file system.
 *
 * The file has no name (O_TMPFILE, or a name removed at once where the
 * file system lacks it): a build that is killed leaves nothing behind.
 */
#ifndef PK_SPILL_H
#define PK_SPILL_H

#include <stddef.h>
#include <stdint.h>

typedef struct pk_spill pk_spill;

/* Creates the file in directory dir. @return 0, or -1 with err. */
int pk_spill_open(const char *dir, pk_spill **out, char *err, size_t errlen);

/* Appends the n bytes at p, at *off; safe to call from several threads at
 * once. @return 0, or -1 with err (naming the directory and the cause: a
 * full disk). */
int pk_spill_put(pk_spill *s, const void *p, size_t n, uint64_t *off, char *err, size_t errlen);

/* Reads the n bytes put at off into out. @return 0, or -1 with err. */
int pk_spill_get(pk_spill *s, uint64_t off, void *out, size_t n, char *err, size_t errlen);

/* Says that the n bytes put at off are no longer needed: a block of the
 * file whose bytes have all been dropped is given back to the file system
 * (a hole punched), so that the variants already written into the pack do
 * not take room twice. Each byte is dropped at most once, and nothing is
 * put after the first drop. */
void pk_spill_drop(pk_spill *s, uint64_t off, size_t n);

/* The room the file takes on its file system that pk_spill_drop gives
 * back as its bytes are dropped: 0 where holes cannot be punched (and for
 * NULL). */
uint64_t pk_spill_room(const pk_spill *s);

/* The bytes put so far, or asked to be (0 for NULL). */
uint64_t pk_spill_size(const pk_spill *s);

/* Closes (and so frees) the file; NULL is a no-op. */
void pk_spill_close(pk_spill *s);

#endif
