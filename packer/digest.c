/* digest.c - SHA-256 and ETags; see digest.h. */
#include "digest.h"

#include <openssl/evp.h>

int pk_sha256(const void *p, size_t n, uint8_t out[PK_DIGEST_LEN])
{
    unsigned len = 0;
    if (EVP_Digest(p, n, out, &len, EVP_sha256(), NULL) != 1 || len != PK_DIGEST_LEN)
        return -1;
    return 0;
}

/* A pk_sha is OpenSSL's EVP_MD_CTX itself (digest.h keeps it opaque). */
pk_sha *pk_sha_new(void)
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (!ctx)
        return NULL;
    if (EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) {
        EVP_MD_CTX_free(ctx);
        return NULL;
    }
    return (pk_sha *)ctx;
}

int pk_sha_update(pk_sha *s, const void *p, size_t n)
{
    return EVP_DigestUpdate((EVP_MD_CTX *)s, p, n) == 1 ? 0 : -1;
}

int pk_sha_final(pk_sha *s, uint8_t out[PK_DIGEST_LEN])
{
    unsigned len = 0;
    int rc = EVP_DigestFinal_ex((EVP_MD_CTX *)s, out, &len);
    EVP_MD_CTX_free((EVP_MD_CTX *)s);
    return rc == 1 && len == PK_DIGEST_LEN ? 0 : -1;
}

void pk_sha_free(pk_sha *s)
{
    EVP_MD_CTX_free((EVP_MD_CTX *)s);
}

static const char b64url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

void pk_etag(const uint8_t d[PK_DIGEST_LEN], char out[PK_ETAG_SIZE])
{
    size_t o = 0;
    out[o++] = '"';
    /* 16 bytes = 5 full 3-byte groups + 1 byte (2 characters, no padding). */
    int i = 0;
    for (; i + 3 <= PK_ETAG_DIGEST_BYTES; i += 3) {
        uint32_t v = (uint32_t)d[i] << 16 | (uint32_t)d[i + 1] << 8 | d[i + 2];
        out[o++] = b64url[v >> 18 & 63];
        out[o++] = b64url[v >> 12 & 63];
        out[o++] = b64url[v >> 6 & 63];
        out[o++] = b64url[v & 63];
    }
    uint32_t v = (uint32_t)d[i] << 16;
    out[o++] = b64url[v >> 18 & 63];
    out[o++] = b64url[v >> 12 & 63];
    out[o++] = '"';
    out[o] = '\0';
}

int pk_etag_rep(const uint8_t key[PK_DIGEST_LEN], const char *mime, size_t mime_len,
                const char *extras, size_t extras_len, char out[PK_ETAG_SIZE])
{
    uint8_t d[PK_DIGEST_LEN];
    pk_sha *s = pk_sha_new();
    if (!s)
        return -1;
    if (pk_sha_update(s, key, PK_DIGEST_LEN) != 0 || pk_sha_update(s, mime, mime_len) != 0 ||
        pk_sha_update(s, "\r\n", 2) != 0 || pk_sha_update(s, extras, extras_len) != 0) {
        pk_sha_free(s);
        return -1;
    }
    if (pk_sha_final(s, d) != 0)
        return -1;
    pk_etag(d, out);
    return 0;
}
