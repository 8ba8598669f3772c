/* The pack id (sf_pack_id_*, format/src/packid.c): it is the definition of
 * docs/format.md (SHA-256 over key, NUL, record as stored, in key order,
 * first 16 bytes), any changed record byte changes it, and the load check
 * (sf_pack_check_structure) refuses a pack whose meta disagrees. */
#include "runner.h"
#include "sf/isolate.h"
#include "sf/store.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define V(s) ((sf_view){(s), sizeof(s) - 1})

static const char BODY[] = "hello";
static const char H200[] = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Type: text/plain\r\n";
static const char H304[] = "HTTP/1.1 304 Not Modified\r\nETag: \"e\"\r\n";
#define REP_OFF 36 /* strlen("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n") */

/* The paths of the test pack, in key (byte) order. */
static const char *const PATHS[] = {"/a.txt", "/b/index.html", "/c.txt"};
#define NPATHS 3

/* The encoded record of one path: identity only, body "hello"; h200 is H200
 * with its byte at flip_at (if >= 0) replaced by 'X'. */
static void record(uint8_t **rec, size_t *n, int flip_at)
{
    static char h200[sizeof H200];
    memcpy(h200, H200, sizeof H200);
    if (flip_at >= 0)
        h200[flip_at] = 'X';
    sf_entry_spec s;
    memset(&s, 0, sizeof s);
    s.kind = SF_KIND_FILE;
    s.last_modified = 1700000000;
    s.mime = V("text/plain");
    s.nvariants = 1;
    sf_variant_spec *v = &s.variants[0];
    v->encoding = SF_ENC_IDENTITY;
    v->body_len = 5;
    unsigned len = 0;
    ASSERT_EQ(EVP_Digest(BODY, 5, v->body_key, &len, EVP_sha256(), NULL), 1);
    v->etag = V("\"e\"");
    v->h200 = (sf_view){h200, sizeof H200 - 1};
    v->rep_off = REP_OFF;
    v->h304 = V(H304);
    ASSERT_EQ(sf_entry_encode(&s, rec, n), SF_OK);
}

/* The id as docs/format.md defines it, computed here without packid.c. */
static void reference_id(int flip_path, int flip_at, uint8_t out[SF_PACK_ID_LEN])
{
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    ASSERT(c != NULL);
    ASSERT_EQ(EVP_DigestInit_ex(c, EVP_sha256(), NULL), 1);
    for (int i = 0; i < NPATHS; i++) {
        uint8_t *rec;
        size_t n;
        record(&rec, &n, i == flip_path ? flip_at : -1);
        EVP_DigestUpdate(c, PATHS[i], strlen(PATHS[i]));
        EVP_DigestUpdate(c, "", 1);
        EVP_DigestUpdate(c, rec, n);
        free(rec);
    }
    uint8_t md[EVP_MAX_MD_SIZE];
    unsigned len = 0;
    ASSERT_EQ(EVP_DigestFinal_ex(c, md, &len), 1);
    EVP_MD_CTX_free(c);
    memcpy(out, md, SF_PACK_ID_LEN);
}

/* Writes a pack of PATHS (the record of PATHS[flip_path] with its h200 byte
 * flip_at changed) whose meta says meta_id. */
static void write_pack(const char *path, int flip_path, int flip_at,
                       const uint8_t meta_id[SF_PACK_ID_LEN])
{
    sf_writer *w;
    char err[512];
    ASSERT_EQ(sf_writer_open(path, 1 << 20, &w, err, sizeof err), SF_OK);
    uint8_t key[SF_KEY_LEN];
    unsigned len = 0;
    ASSERT_EQ(EVP_Digest(BODY, 5, key, &len, EVP_sha256(), NULL), 1);
    ASSERT_EQ(sf_writer_put_body(w, key, BODY, 5), SF_OK);
    for (int i = 0; i < NPATHS; i++) {
        uint8_t *rec;
        size_t n;
        record(&rec, &n, i == flip_path ? flip_at : -1);
        ASSERT_EQ(sf_writer_put_path(w, PATHS[i], strlen(PATHS[i]), rec, n), SF_OK);
        free(rec);
    }
    sf_meta m;
    memset(&m, 0, sizeof m);
    m.n_paths = NPATHS;
    m.n_bodies = 1;
    memcpy(m.pack_id, meta_id, SF_PACK_ID_LEN);
    ASSERT_EQ(sf_writer_commit(w, &m, err, sizeof err), SF_OK);
}

static void compute(const char *path, uint8_t out[SF_PACK_ID_LEN])
{
    sf_pack *p;
    sf_reader *r;
    char err[512];
    ASSERT_EQ(sf_pack_open(path, &p, err, sizeof err), SF_OK);
    ASSERT_EQ(sf_reader_begin(p, &r), SF_OK);
    ASSERT_EQ(sf_pack_id_compute(r, out), SF_OK);
    sf_reader_end(r);
    sf_pack_close(p);
}

TEST(pack_id_incremental_matches_format_definition)
{
    uint8_t want[SF_PACK_ID_LEN], got[SF_PACK_ID_LEN];
    reference_id(-1, -1, want);
    sf_pack_id *id;
    ASSERT_EQ(sf_pack_id_begin(&id), SF_OK);
    for (int i = 0; i < NPATHS; i++) {
        uint8_t *rec;
        size_t n;
        record(&rec, &n, -1);
        ASSERT_EQ(sf_pack_id_add(id, PATHS[i], strlen(PATHS[i]), rec, n), SF_OK);
        free(rec);
    }
    ASSERT_EQ(sf_pack_id_end(id, got), SF_OK);
    ASSERT_MEM_EQ(got, SF_PACK_ID_LEN, want, SF_PACK_ID_LEN);
    char hex[2 * SF_PACK_ID_LEN + 1];
    sf_pack_id_hex(got, hex);
    ASSERT_EQ(strlen(hex), 2 * SF_PACK_ID_LEN);
    char first[3];
    snprintf(first, sizeof first, "%02x", got[0]);
    ASSERT_MEM_EQ(hex, 2, first, 2);
}

TEST(pack_id_compute_over_a_pack)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/good.lmdb", t_tmpdir());
    uint8_t want[SF_PACK_ID_LEN], got[SF_PACK_ID_LEN];
    reference_id(-1, -1, want);
    write_pack(path, -1, -1, want);
    compute(path, got);
    ASSERT_MEM_EQ(got, SF_PACK_ID_LEN, want, SF_PACK_ID_LEN);
}

/* One byte inside a header block (the 'p' of text/plain), in any record:
 * another id. The record still decodes: only the id tells. */
TEST(pack_id_changes_with_a_record_byte)
{
    int at = (int)(strstr(H200, "text/plain") - H200) + 5;
    uint8_t good[SF_PACK_ID_LEN];
    reference_id(-1, -1, good);
    for (int i = 0; i < NPATHS; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/flip%d.lmdb", t_tmpdir(), i);
        write_pack(path, i, at, good);
        uint8_t got[SF_PACK_ID_LEN], want[SF_PACK_ID_LEN];
        compute(path, got);
        reference_id(i, at, want);
        ASSERT_MEM_EQ(got, SF_PACK_ID_LEN, want, SF_PACK_ID_LEN);
        ASSERT(memcmp(got, good, SF_PACK_ID_LEN) != 0);
    }
}

TEST(structure_check_refuses_pack_id_mismatch)
{
    int at = (int)(strstr(H200, "text/plain") - H200) + 5;
    uint8_t good[SF_PACK_ID_LEN];
    reference_id(-1, -1, good);
    char path[4096], err[1024] = "";
    snprintf(path, sizeof path, "%s/ok.lmdb", t_tmpdir());
    write_pack(path, -1, -1, good);
    ASSERT_EQ(sf_pack_check_structure(NULL, path, err, sizeof err), SF_OK);

    /* the records the packer wrote, but meta changed */
    uint8_t other[SF_PACK_ID_LEN];
    memcpy(other, good, sizeof other);
    other[15] ^= 1;
    snprintf(path, sizeof path, "%s/meta.lmdb", t_tmpdir());
    write_pack(path, -1, -1, other);
    ASSERT_EQ(sf_pack_check_structure(NULL, path, err, sizeof err), SF_ECORRUPT);
    ASSERT(strstr(err, "pack id mismatch") != NULL);

    /* a record changed after packing: meta still has the packer's id */
    snprintf(path, sizeof path, "%s/rec.lmdb", t_tmpdir());
    write_pack(path, 1, at, good);
    ASSERT_EQ(sf_pack_check_structure(NULL, path, err, sizeof err), SF_ECORRUPT);
    ASSERT(strstr(err, path) == err);
    ASSERT(strstr(err, "pack id mismatch: entry records were changed after packing") != NULL);
    char hex[2 * SF_PACK_ID_LEN + 1];
    sf_pack_id_hex(good, hex);
    ASSERT(strstr(err, hex) != NULL); /* names what meta says */

    /* the same, in a child, as servd and verify run it */
    ASSERT_EQ(sf_check_isolated(sf_pack_check_structure, NULL, path, 5000, err, sizeof err),
              SF_ECORRUPT);
    ASSERT(strstr(err, "pack id mismatch") != NULL);

    /* SF_CHECK_NO_HASH leaves the id to its caller (verify recomputes it itself) */
    ASSERT_EQ(sf_pack_check_structure(SF_CHECK_NO_HASH, path, err, sizeof err), SF_OK);
}

/* ---- Format minor 1: meta's id_404 covers the status:404 entry ---- */

/* The id of the status:404 record (the same record as the paths', its h200
 * byte flip_at changed if >= 0), computed here without packid.c. */
static void reference_id_404(int flip_at, uint8_t out[SF_PACK_ID_LEN])
{
    uint8_t *rec, md[EVP_MAX_MD_SIZE];
    size_t n;
    unsigned len = 0;
    record(&rec, &n, flip_at);
    ASSERT_EQ(EVP_Digest(rec, n, md, &len, EVP_sha256(), NULL), 1);
    free(rec);
    memcpy(out, md, SF_PACK_ID_LEN);
}

/* A pack of PATHS with a status:404 entry (its h200 byte flip_at changed if
 * >= 0), whose meta has the right pack_id and id_404 = meta_404, written as
 * format minor `minor` (an older writer left the bytes of id_404 zero). */
static void write_pack_404(const char *path, int flip_at, const uint8_t meta_404[SF_PACK_ID_LEN],
                           int minor)
{
    sf_writer *w;
    char err[512];
    ASSERT_EQ(sf_writer_open(path, 1 << 20, &w, err, sizeof err), SF_OK);
    uint8_t key[SF_KEY_LEN];
    unsigned len = 0;
    ASSERT_EQ(EVP_Digest(BODY, 5, key, &len, EVP_sha256(), NULL), 1);
    ASSERT_EQ(sf_writer_put_body(w, key, BODY, 5), SF_OK);
    for (int i = 0; i < NPATHS; i++) {
        uint8_t *rec;
        size_t n;
        record(&rec, &n, -1);
        ASSERT_EQ(sf_writer_put_path(w, PATHS[i], strlen(PATHS[i]), rec, n), SF_OK);
        free(rec);
    }
    uint8_t *rec;
    size_t n;
    record(&rec, &n, flip_at);
    ASSERT_EQ(sf_writer_put_special(w, "status:404", rec, n), SF_OK);
    free(rec);
    sf_meta m;
    memset(&m, 0, sizeof m);
    m.n_paths = NPATHS;
    m.n_bodies = 1;
    reference_id(-1, -1, m.pack_id);
    if (minor >= 1)
        memcpy(m.id_404, meta_404, SF_PACK_ID_LEN);
    ASSERT_EQ(sf_writer_commit(w, &m, err, sizeof err), SF_OK);
    if (minor == SF_FORMAT_MINOR)
        return;
    FILE *f = fopen(path, "r+b"); /* an older writer: patch the minor version */
    ASSERT(f != NULL);
    static char buf[1 << 20];
    size_t got = fread(buf, 1, sizeof buf, f);
    char *magic = memmem(buf, got, SF_META_MAGIC, SF_META_MAGIC_LEN);
    ASSERT(magic != NULL);
    ASSERT_EQ(fseek(f, (long)(magic - buf) + 10, SEEK_SET), 0);
    uint8_t le[2] = {(uint8_t)minor, (uint8_t)(minor >> 8)};
    ASSERT_EQ(fwrite(le, 1, 2, f), 2);
    ASSERT_EQ(fclose(f), 0);
}

/* The 404 page's own record lives in meta, outside the paths the pack id
 * covers: a byte changed in it was served. From minor 1 meta carries its id
 * (id_404) and the check refuses a changed entry like a changed path. */
TEST(id_404_covers_the_404_entry)
{
    int at = (int)(strstr(H200, "text/plain") - H200) + 5;
    uint8_t good[SF_PACK_ID_LEN], got[SF_PACK_ID_LEN];
    reference_id_404(-1, good);

    char path[4096], err[1024] = "";
    snprintf(path, sizeof path, "%s/with404.lmdb", t_tmpdir());
    write_pack_404(path, -1, good, SF_FORMAT_MINOR);
    sf_pack *p;
    sf_reader *r;
    ASSERT_EQ(sf_pack_open(path, &p, err, sizeof err), SF_OK);
    ASSERT_MEM_EQ(sf_pack_meta(p)->id_404, SF_PACK_ID_LEN, good, SF_PACK_ID_LEN);
    ASSERT_EQ(sf_reader_begin(p, &r), SF_OK);
    ASSERT_EQ(sf_pack_id_404(r, got), SF_OK);
    sf_reader_end(r);
    sf_pack_close(p);
    ASSERT_MEM_EQ(got, SF_PACK_ID_LEN, good, SF_PACK_ID_LEN);
    ASSERT_EQ(sf_pack_check_structure(NULL, path, err, sizeof err), SF_OK);

    snprintf(path, sizeof path, "%s/flip404.lmdb", t_tmpdir());
    write_pack_404(path, at, good, SF_FORMAT_MINOR);
    ASSERT_EQ(sf_pack_check_structure(NULL, path, err, sizeof err), SF_ECORRUPT);
    ASSERT(strstr(err, "pack id mismatch: the status:404 entry was changed") != NULL);

    /* a pack without a 404 entry: id_404 must be zero */
    uint8_t zero[SF_PACK_ID_LEN] = {0};
    snprintf(path, sizeof path, "%s/no404.lmdb", t_tmpdir());
    write_pack(path, -1, -1, good);
    ASSERT_EQ(sf_pack_open(path, &p, err, sizeof err), SF_OK);
    ASSERT_EQ(sf_reader_begin(p, &r), SF_OK);
    ASSERT_EQ(sf_pack_id_404(r, got), SF_OK);
    sf_reader_end(r);
    sf_pack_close(p);
    ASSERT_MEM_EQ(got, SF_PACK_ID_LEN, zero, SF_PACK_ID_LEN);
}

/* Packs of minor 0 have no id_404 (those bytes were reserved): they load as
 * before, the 404 entry unchecked; a minor-1 pack with zeros there does not. */
TEST(minor_0_pack_has_no_id_404)
{
    uint8_t zero[SF_PACK_ID_LEN] = {0};
    char path[4096], err[1024] = "";
    snprintf(path, sizeof path, "%s/old.lmdb", t_tmpdir());
    write_pack_404(path, -1, zero, 0);
    sf_pack *p;
    ASSERT_EQ(sf_pack_open(path, &p, err, sizeof err), SF_OK);
    ASSERT_EQ(sf_pack_meta(p)->minor, 0);
    ASSERT_MEM_EQ(sf_pack_meta(p)->id_404, SF_PACK_ID_LEN, zero, SF_PACK_ID_LEN);
    sf_pack_close(p);
    ASSERT_EQ(sf_pack_check_structure(NULL, path, err, sizeof err), SF_OK);

    snprintf(path, sizeof path, "%s/new.lmdb", t_tmpdir());
    write_pack_404(path, -1, zero, SF_FORMAT_MINOR);
    ASSERT_EQ(sf_pack_check_structure(NULL, path, err, sizeof err), SF_ECORRUPT);
    ASSERT(strstr(err, "status:404") != NULL);
}
