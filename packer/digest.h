/*
 * digest.h - SHA-256 (OpenSSL EVP) and the strong ETags derived from it.
 *
 * A variant's ETag is '"' + base64url (RFC 4648 §5, no padding) of the first
 * 16 bytes of SHA-256(variant bytes) + '"': 128 bits are plenty to tell
 * representations apart, and the alphabet needs no escaping anywhere (HTTP
 * entity-tag, JSON, shell). The body key is the full SHA-256.
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

/* SHA-256 of n bytes at p. Thread-safe. @return 0, or -1 if OpenSSL failed. */
int pk_sha256(const void *p, size_t n, uint8_t out[PK_DIGEST_LEN]);

/* Incremental SHA-256 (fingerprints in diff.c and mime.c; the pack id is
 * sf_pack_id_*, shared with servd). */
typedef struct pk_sha pk_sha;
pk_sha *pk_sha_new(void);
int pk_sha_update(pk_sha *s, const void *p, size_t n);
int pk_sha_final(pk_sha *s, uint8_t out[PK_DIGEST_LEN]); /* also frees s */
void pk_sha_free(pk_sha *s);

/* Writes the quoted ETag for a digest into out (NUL-terminated). */
void pk_etag(const uint8_t digest[PK_DIGEST_LEN], char out[PK_ETAG_SIZE]);

/* Lowercase hex of n bytes into out (2n + 1 bytes). */
void pk_hex(const uint8_t *p, size_t n, char *out);

#endif
