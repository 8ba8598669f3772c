/*
 * digest.h - SHA-256 (OpenSSL EVP) and the strong ETags derived from it.
 *
 * The body key is the SHA-256 of a variant's bytes. Its ETag is '"' +
 * base64url (RFC 4648 §5, no padding) of the first 16 bytes of
 *   SHA-256(body key || Content-Type value || CRLF || extra header lines)
 * + '"' (docs/format.md §6.3): a new type or a new rule header is a new
 * representation, so it gets a new strong validator (RFC 9110 §8.8.1;
 * browsers do not take Content-Type from a 304). 128 bits are plenty to
 * tell representations apart, and the alphabet needs no escaping anywhere
 * (HTTP entity-tag, JSON, shell).
 */
#ifndef PK_DIGEST_H
#define PK_DIGEST_H

#include <stddef.h>
#include <stdint.h>

#define PK_DIGEST_LEN 32
/* Bytes of the digest that go into the ETag. */
#define PK_ETAG_DIGEST_BYTES 16
/* Quoted ETag length: 2 quotes + 22 base64url characters. */
#define PK_ETAG_LEN 24
/* A buffer for a NUL-terminated ETag. */
#define PK_ETAG_SIZE (PK_ETAG_LEN + 1)

/* SHA-256 of n bytes at p. Thread-safe. @return 0, or -1 if OpenSSL failed,
 * which for bytes in memory and the default provider means out of memory
 * (OpenSSL 3.0 then often records only "initialization error"). */
int pk_sha256(const void *p, size_t n, uint8_t out[PK_DIGEST_LEN]);

/* Incremental SHA-256 (fingerprints in diff.c and mime.c; the pack id is
 * sf_pack_id_*, shared with servd). */
typedef struct pk_sha pk_sha;
pk_sha *pk_sha_new(void);
int pk_sha_update(pk_sha *s, const void *p, size_t n);
int pk_sha_final(pk_sha *s, uint8_t out[PK_DIGEST_LEN]); /* also frees s */
void pk_sha_free(pk_sha *s);

/* Writes the quoted ETag for a digest into out (NUL-terminated): the
 * encoding step alone, used for packs of format minor 0 and 1, whose ETags
 * came from the body key only. */
void pk_etag(const uint8_t digest[PK_DIGEST_LEN], char out[PK_ETAG_SIZE]);

/* Writes the ETag of a variant with body key key, type mime (the whole
 * Content-Type value) and the extra header lines extras ("Name: value\r\n"
 * each, as rendered; may be empty) into out. @return 0, or -1 if OpenSSL
 * failed. */
int pk_etag_rep(const uint8_t key[PK_DIGEST_LEN], const char *mime, size_t mime_len,
                const char *extras, size_t extras_len, char out[PK_ETAG_SIZE]);

#endif
