/*
 * packid.c - the pack id (docs/format.md, meta field pack_id): the first
 * SF_PACK_ID_LEN bytes of SHA-256 over, for every path in key order, the key,
 * one NUL byte and its entry record as stored.
 *
 * One definition for everyone: servd-pack build feeds the records it writes,
 * servd-pack verify and the load check (sf_pack_check_structure, run by servd
 * at startup and at every swap) recompute it over the paths database of an
 * open pack. A record changed after packing - a flipped byte inside a
 * pre-rendered header block, which no structure check can tell from a real
 * header - gives another id.
 *
 * The status:404 entry lives in meta, outside the paths; format minor 1 adds
 * its own id to meta (id_404) rather than changing what pack_id covers, so
 * that readers of minor 0, which check pack_id, still load minor 1 packs.
 */
#include "sf/store.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <string.h>

int sf_sha256_ready(void)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len;
    if (OPENSSL_init_crypto(0, NULL) != 1 || EVP_Digest("", 0, md, &len, EVP_sha256(), NULL) != 1)
        return SF_ENOMEM;
    return SF_OK;
}

/* An sf_pack_id * is OpenSSL's EVP_MD_CTX *: the incomplete type only keeps
 * OpenSSL out of store.h. It is never defined, so never dereferenced here. */

int sf_pack_id_begin(sf_pack_id **out)
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (!ctx)
        return SF_ENOMEM;
    if (EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) {
        EVP_MD_CTX_free(ctx);
        return SF_ENOMEM;
    }
    *out = (sf_pack_id *)ctx;
    return SF_OK;
}

int sf_pack_id_add(sf_pack_id *id, const char *path, size_t len, const void *rec, size_t n)
{
    EVP_MD_CTX *ctx = (EVP_MD_CTX *)id;
    if (EVP_DigestUpdate(ctx, path, len) != 1 || EVP_DigestUpdate(ctx, "", 1) != 1 ||
        EVP_DigestUpdate(ctx, rec, n) != 1)
        return SF_ENOMEM;
    return SF_OK;
}

int sf_pack_id_end(sf_pack_id *id, uint8_t out[SF_PACK_ID_LEN])
{
    EVP_MD_CTX *ctx = (EVP_MD_CTX *)id;
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned len = 0;
    int ok = EVP_DigestFinal_ex(ctx, md, &len) == 1 && len == SF_KEY_LEN;
    EVP_MD_CTX_free(ctx);
    if (!ok)
        return SF_ENOMEM;
    memcpy(out, md, SF_PACK_ID_LEN);
    return SF_OK;
}

void sf_pack_id_free(sf_pack_id *id)
{
    EVP_MD_CTX_free((EVP_MD_CTX *)id);
}

static int add_record(void *arg, sf_view path, sf_view rec)
{
    return sf_pack_id_add(arg, path.ptr, path.len, rec.ptr, rec.len);
}

int sf_pack_id_compute(sf_reader *r, uint8_t out[SF_PACK_ID_LEN])
{
    sf_pack_id *id;
    int rc = sf_pack_id_begin(&id);
    if (rc != 0)
        return rc;
    if ((rc = sf_foreach_record(r, add_record, id)) != 0) {
        sf_pack_id_free(id);
        return rc;
    }
    return sf_pack_id_end(id, out);
}

int sf_record_id(const void *rec, size_t n, uint8_t out[SF_PACK_ID_LEN])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned len = 0;
    if (EVP_Digest(rec, n, md, &len, EVP_sha256(), NULL) != 1 || len != SF_KEY_LEN)
        return SF_ENOMEM;
    memcpy(out, md, SF_PACK_ID_LEN);
    return SF_OK;
}

int sf_pack_id_404(sf_reader *r, uint8_t out[SF_PACK_ID_LEN])
{
    sf_view rec;
    int rc = sf_special_record(r, SF_SPECIAL_404, &rec);
    if (rc == SF_ENOTFOUND) {
        memset(out, 0, SF_PACK_ID_LEN);
        return SF_OK;
    }
    return rc ? rc : sf_record_id(rec.ptr, rec.len, out);
}

int sf_meta_has_id_404(const sf_meta *m)
{
    static const uint8_t zero[SF_PACK_ID_LEN];
    return m->minor >= 1 || memcmp(m->id_404, zero, SF_PACK_ID_LEN) != 0;
}

void sf_hex(const uint8_t *p, size_t n, char *out)
{
    static const char hx[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = hx[p[i] >> 4];
        out[2 * i + 1] = hx[p[i] & 15];
    }
    out[2 * n] = '\0';
}

void sf_pack_id_hex(const uint8_t id[SF_PACK_ID_LEN], char out[2 * SF_PACK_ID_LEN + 1])
{
    sf_hex(id, SF_PACK_ID_LEN, out);
}
