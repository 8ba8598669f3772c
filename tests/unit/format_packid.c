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

/* An encoded record: identity only, body "hello", the header block head
 * (representation headers from rep_off). */
static void record_of(uint8_t **rec, size_t *n, sf_view head, uint32_t rep_off)
{
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
    v->h200 = head;
    v->rep_off = rep_off;
    v->h304 = V(H304);
    ASSERT_EQ(sf_entry_encode(&s, rec, n), SF_OK);
}

/* The record of one path: h200 is H200 with its byte at flip_at (if >= 0)
 * replaced by 'X'. */
static void record(uint8_t **rec, size_t *n, int flip_at)
{
    static char h200[sizeof H200];
    memcpy(h200, H200, sizeof H200);
    if (flip_at >= 0)
        h200[flip_at] = 'X';
    record_of(rec, n, (sf_view){h200, sizeof H200 - 1}, REP_OFF);
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
 * flip_at changed) whose meta says meta_id, and, when special is given, the
 * status:404 entry it makes. The meta passed in says 0x77... for id_404: the
 * writer must put its own in (zeros without a 404 entry). */
static void write_pack_special(const char *path, int flip_path, int flip_at,
                               const uint8_t meta_id[SF_PACK_ID_LEN],
                               void (*special)(uint8_t **rec, size_t *n))
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
    if (special) {
        uint8_t *rec;
        size_t n;
        special(&rec, &n);
        ASSERT_EQ(sf_writer_put_special(w, "status:404", rec, n), SF_OK);
        free(rec);
    }
    memset(m.id_404, 0x77, sizeof m.id_404); /* ignored: the writer's own goes in */
    m.n_paths = NPATHS;
    m.n_bodies = 1;
    memcpy(m.pack_id, meta_id, SF_PACK_ID_LEN);
    ASSERT_EQ(sf_writer_commit(w, &m, err, sizeof err), SF_OK);
}

static void write_pack(const char *path, int flip_path, int flip_at,
                       const uint8_t meta_id[SF_PACK_ID_LEN])
{
    write_pack_special(path, flip_path, flip_at, meta_id, NULL);
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

static const char H404[] = "HTTP/1.1 404 Not Found\r\nContent-Length: 5\r\nContent-Type: "
                           "text/plain\r\n";

/* The status:404 record of the test packs: like the paths', with H404. */
static void record_404(uint8_t **rec, size_t *n)
{
    record_of(rec, n, V(H404), (uint32_t)(strstr(H404, "Content-Type") - H404));
}

/* A pack of PATHS (right pack_id) with the status:404 entry when with_404;
 * the writer fills in id_404. */
static void write_pack_404(const char *path, int with_404)
{
    uint8_t id[SF_PACK_ID_LEN];
    reference_id(-1, -1, id);
    write_pack_special(path, -1, -1, id, with_404 ? record_404 : NULL);
}

/* Replaces n bytes at the first occurrence of `find` (+ skip) in the file;
 * @return the file offset of `find`. */
static long patch(const char *path, const void *find, size_t flen, size_t skip, const void *with,
                  size_t n)
{
    static char buf[1 << 20];
    FILE *f = fopen(path, "r+b");
    ASSERT(f != NULL);
    size_t got = fread(buf, 1, sizeof buf, f);
    char *at = memmem(buf, got, find, flen);
    ASSERT(at != NULL);
    ASSERT(memmem(at + 1, got - (size_t)(at + 1 - buf), find, flen) == NULL); /* only one */
    ASSERT_EQ(fseek(f, (long)(at - buf + (long)skip), SEEK_SET), 0);
    ASSERT_EQ(fwrite(with, 1, n, f), n);
    ASSERT_EQ(fclose(f), 0);
    return (long)(at - buf);
}

static int check(const char *path, char *err, size_t errlen)
{
    return sf_pack_check_structure(NULL, path, err, errlen);
}

/* The 404 page's own record lives in meta, outside the paths the pack id
 * covers: a byte changed in it after packing was served. From minor 1 meta
 * carries its id (id_404), and the check refuses a changed entry. */
TEST(id_404_covers_the_404_entry)
{
    uint8_t *rec, want[SF_PACK_ID_LEN], md[EVP_MAX_MD_SIZE], got[SF_PACK_ID_LEN];
    size_t n;
    unsigned len = 0;
    record_404(&rec, &n);
    ASSERT_EQ(EVP_Digest(rec, n, md, &len, EVP_sha256(), NULL), 1); /* the definition */
    free(rec);
    memcpy(want, md, SF_PACK_ID_LEN);

    char path[4096], err[1024] = "";
    snprintf(path, sizeof path, "%s/with404.lmdb", t_tmpdir());
    write_pack_404(path, 1);
    sf_pack *p;
    sf_reader *r;
    ASSERT_EQ(sf_pack_open(path, &p, err, sizeof err), SF_OK);
    ASSERT_EQ(sf_pack_meta(p)->minor, SF_FORMAT_MINOR);
    ASSERT_MEM_EQ(sf_pack_meta(p)->id_404, SF_PACK_ID_LEN, want, SF_PACK_ID_LEN);
    ASSERT_EQ(sf_reader_begin(p, &r), SF_OK);
    ASSERT_EQ(sf_pack_id_404(r, got), SF_OK);
    sf_reader_end(r);
    sf_pack_close(p);
    ASSERT_MEM_EQ(got, SF_PACK_ID_LEN, want, SF_PACK_ID_LEN);
    ASSERT_EQ(check(path, err, sizeof err), SF_OK);

    /* "404 Not Found" -> "404 Not Fount" in the stored record */
    patch(path, "Not Found", 9, 8, "t", 1);
    ASSERT_EQ(check(path, err, sizeof err), SF_ECORRUPT);
    ASSERT(strstr(err, path) == err);
    ASSERT(strstr(err, "pack id mismatch: the status:404 entry was changed after packing") != NULL);
}

/* Without a 404 entry id_404 is zero, and such a pack loads; an id_404 with
 * no entry to match is refused. */
TEST(id_404_of_a_pack_without_a_404_entry)
{
    char path[4096], err[1024] = "";
    snprintf(path, sizeof path, "%s/no404.lmdb", t_tmpdir());
    write_pack_404(path, 0);
    ASSERT_EQ(check(path, err, sizeof err), SF_OK);
    static const uint8_t zero[SF_PACK_ID_LEN], one[1] = {1};
    sf_pack *p;
    ASSERT_EQ(sf_pack_open(path, &p, err, sizeof err), SF_OK);
    ASSERT_MEM_EQ(sf_pack_meta(p)->id_404, SF_PACK_ID_LEN, zero, SF_PACK_ID_LEN);
    sf_pack_close(p);
    patch(path, SF_META_MAGIC, SF_META_MAGIC_LEN, 264, one, 1);
    ASSERT_EQ(check(path, err, sizeof err), SF_ECORRUPT);
    ASSERT(strstr(err, "status:404") != NULL);
}

/* Packs written before minor 1 have zeros where id_404 is: they load as
 * before, their 404 entry unchecked. A minor byte damaged from 1 to 0 does
 * not turn the check off while id_404 is there. */
TEST(minor_0_pack_has_no_id_404)
{
    static const uint8_t zero16[16], zero2[2];
    char path[4096], err[1024] = "";
    snprintf(path, sizeof path, "%s/old.lmdb", t_tmpdir());
    write_pack_404(path, 1);
    patch(path, "Not Found", 9, 8, "t", 1);                         /* a changed 404 entry */
    patch(path, SF_META_MAGIC, SF_META_MAGIC_LEN, 10, zero2, 2);    /* minor 0 */
    ASSERT_EQ(check(path, err, sizeof err), SF_ECORRUPT);           /* id_404 still there */
    patch(path, SF_META_MAGIC, SF_META_MAGIC_LEN, 264, zero16, 16); /* as a 1.0 writer left it */
    ASSERT_EQ(check(path, err, sizeof err), SF_OK);
    sf_pack *p;
    ASSERT_EQ(sf_pack_open(path, &p, err, sizeof err), SF_OK);
    ASSERT_EQ(sf_pack_meta(p)->minor, 0);
    sf_pack_close(p);
}
