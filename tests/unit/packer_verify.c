/* verify decompresses every compressed variant and compares it with the
 * identity body: a pack whose hashes, lengths and ETags all agree can still
 * pair a path with the gzip of another file. */
#include "commands.h"
#include "compress.h"
#include "digest.h"
#include "headers.h"
#include "mime.h"
#include "runner.h"

#include <fcntl.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static const char text_a[] = "servd packs a static site into one file and serves it. "
                             "servd packs a static site into one file and serves it.\n";
static const char text_b[] = "servd packs a static site into one file and serves IT. "
                             "servd packs a static site into one file and serves IT.\n";

/* What the next write_pack_etags changes; it resets them. */
static struct {
    const pk_header *extra; /* rule headers */
    size_t nextra;
    void (*edit)(pk_buf *h200, pk_buf *h304); /* applied to each variant's blocks */
    const char *key;                          /* the file's key instead of /a.txt */
    const char *redirect;                     /* adds /r, a redirect to this target */
    void (*edit_rec)(uint8_t *rec);           /* applied to /a.txt's encoded record */
} tweak;

/* Writes a one-path pack: /a.txt with identity text_a and a gzip variant
 * made of gz_src (text_a for a good pack). Everything else is consistent,
 * with ETags as format minor 2 derives them, or with body_only_etags as
 * minor 0 and 1 did (from the body key alone). */
static void write_pack_etags(const char *path, const char *gz_src, int body_only_etags)
{
    pk_compressor *c = pk_compressor_new();
    uint8_t *gz;
    size_t gzn;
    char err[512];
    ASSERT(c != NULL);
    ASSERT_EQ(pk_compress(c, SF_ENC_GZIP, PK_CLASS_TEXT, (const uint8_t *)gz_src, strlen(gz_src),
                          &gz, &gzn, err, sizeof err),
              0);
    pk_compressor_free(c);
    const uint8_t *bytes[2] = {(const uint8_t *)text_a, gz};
    size_t lens[2] = {strlen(text_a), gzn};
    uint8_t keys[2][PK_DIGEST_LEN];
    char etags[2][PK_ETAG_SIZE];
    pk_buf h200[2] = {PK_BUF_INIT, PK_BUF_INIT}, h304[2] = {PK_BUF_INIT, PK_BUF_INIT};
    pk_rep rep = {.mime = "text/plain; charset=utf-8",
                  .cache_control = "no-cache",
                  .last_modified = 1700000000,
                  .negotiable = 1,
                  .extra = tweak.extra,
                  .nextra = tweak.nextra};
    pk_buf extras = PK_BUF_INIT;
    ASSERT_EQ(pk_render_extras(&extras, &rep), 0);
    sf_entry_spec spec = {.kind = SF_KIND_FILE,
                          .flags = SF_ENTRY_NEGOTIABLE,
                          .last_modified = 1700000000,
                          .mime = {rep.mime, strlen(rep.mime)},
                          .nvariants = 2};
    for (int i = 0; i < 2; i++) {
        ASSERT_EQ(pk_sha256(bytes[i], lens[i], keys[i]), 0);
        if (body_only_etags)
            pk_etag(keys[i], etags[i]);
        else
            ASSERT_EQ(
                pk_etag_rep(keys[i], rep.mime, strlen(rep.mime), extras.p, extras.len, etags[i]),
                0);
        sf_variant_spec *vs = &spec.variants[i];
        vs->encoding = i == 0 ? SF_ENC_IDENTITY : SF_ENC_GZIP;
        vs->body_len = lens[i];
        memcpy(vs->body_key, keys[i], SF_KEY_LEN);
        ASSERT_EQ(pk_render_200(&h200[i], &vs->rep_off, &rep, vs->encoding, lens[i], etags[i]), 0);
        ASSERT_EQ(pk_render_304(&h304[i], &rep, etags[i]), 0);
        if (tweak.edit)
            tweak.edit(&h200[i], &h304[i]);
        vs->etag = (sf_view){etags[i], strlen(etags[i])};
        vs->h200 = (sf_view){h200[i].p, h200[i].len};
        vs->h304 = (sf_view){h304[i].p, h304[i].len};
    }
    uint8_t *rec;
    size_t reclen;
    ASSERT_EQ(sf_entry_encode(&spec, &rec, &reclen), 0);
    if (tweak.edit_rec)
        tweak.edit_rec(rec); /* before the pack id is taken over it */
    /* the paths in key order, as the pack id takes them */
    const char *keyv[2] = {tweak.key ? tweak.key : "/a.txt", "/r"};
    uint8_t *recv[2] = {rec, NULL};
    size_t recn[2] = {reclen, 0}, npaths = tweak.redirect ? 2 : 1;
    if (tweak.redirect) {
        sf_entry_spec r = {.kind = SF_KIND_REDIRECT,
                           .last_modified = 1700000000,
                           .target = {tweak.redirect, strlen(tweak.redirect)}};
        ASSERT_EQ(sf_entry_encode(&r, &recv[1], &recn[1]), 0);
        if (strcmp(keyv[0], keyv[1]) > 0) {
            keyv[0] = "/r", keyv[1] = tweak.key;
            recv[0] = recv[1], recv[1] = rec;
            recn[0] = recn[1], recn[1] = reclen;
        }
    }
    sf_writer *w;
    ASSERT_EQ(sf_writer_open(path, 1 << 20, &w, err, sizeof err), 0);
    for (int i = 0; i < 2; i++)
        ASSERT_EQ(sf_writer_put_body(w, keys[i], bytes[i], lens[i]), 0);
    for (size_t i = 0; i < npaths; i++)
        ASSERT_EQ(sf_writer_put_path(w, keyv[i], strlen(keyv[i]), recv[i], recn[i]), 0);
    sf_meta m;
    memset(&m, 0, sizeof m);
    m.created = 1700000000;
    m.n_paths = npaths;
    m.n_bodies = 2;
    m.identity_bytes = lens[0];
    m.stored_bytes = lens[0] + lens[1];
    pk_sha *id = pk_sha_new();
    uint8_t d[PK_DIGEST_LEN];
    ASSERT(id != NULL);
    for (size_t i = 0; i < npaths; i++) {
        pk_sha_update(id, keyv[i], strlen(keyv[i]));
        pk_sha_update(id, "", 1);
        pk_sha_update(id, recv[i], recn[i]);
    }
    ASSERT_EQ(pk_sha_final(id, d), 0);
    memcpy(m.pack_id, d, sizeof m.pack_id);
    snprintf(m.packer, sizeof m.packer, "test");
    ASSERT_EQ(pk_profile(m.profile), 0);
    ASSERT_EQ(sf_writer_commit(w, &m, err, sizeof err), 0);
    free(recv[0]);
    free(recv[1]);
    free(gz);
    pk_buf_free(&extras);
    memset(&tweak, 0, sizeof tweak);
    for (int i = 0; i < 2; i++) {
        pk_buf_free(&h200[i]);
        pk_buf_free(&h304[i]);
    }
}

/* Runs verify on path with stderr captured into msg. @return its status. */
static int verify_quietly(const char *path, char *msg, size_t cap)
{
    char log[2048];
    snprintf(log, sizeof log, "%s/verify.log", t_tmpdir());
    fflush(stderr);
    int saved = dup(2);
    int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ASSERT(saved >= 0 && fd >= 0);
    dup2(fd, 2);
    close(fd);
    int status = pk_cmd_verify(path, 1);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    FILE *f = fopen(log, "r");
    ASSERT(f != NULL);
    size_t n = fread(msg, 1, cap - 1, f);
    msg[n] = '\0';
    fclose(f);
    return status;
}

static void write_pack(const char *path, const char *gz_src)
{
    write_pack_etags(path, gz_src, 0);
}

/* Sets the format minor in the meta record of the pack file at path (LMDB
 * keeps no checksums, so the byte is all that changes). */
static void set_minor(const char *path, unsigned minor)
{
    FILE *f = fopen(path, "r+b");
    ASSERT(f != NULL);
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf, f);
    char *m = memmem(buf, n, "SERVDPK1", 8);
    ASSERT(m != NULL);
    ASSERT_EQ(fseek(f, (long)(m - buf) + 10, SEEK_SET), 0);
    unsigned char le[2] = {(unsigned char)minor, 0};
    ASSERT_EQ(fwrite(le, 1, 2, f), 2);
    ASSERT_EQ(fclose(f), 0);
}

/* From minor 2 an ETag covers the body, the type and the rule headers; a
 * minor 0 or 1 pack's ETags, from the body key alone, still verify. */
TEST(verify_etags_by_format_minor)
{
    char path[2048], msg[4096];
    snprintf(path, sizeof path, "%s/old-etags.lmdb", t_tmpdir());
    write_pack_etags(path, text_a, 1);
    ASSERT_EQ(verify_quietly(path, msg, sizeof msg), PK_EXIT_FAIL);
    if (!strstr(msg, "/a.txt: the identity ETag"))
        t__fail(__FILE__, __LINE__, "verify said: %s", msg);
    set_minor(path, 1);
    ASSERT_EQ(verify_quietly(path, msg, sizeof msg), PK_EXIT_OK);
    /* the reverse: new ETags in a pack that says minor 1 */
    write_pack_etags(path, text_a, 0);
    set_minor(path, 1);
    ASSERT_EQ(verify_quietly(path, msg, sizeof msg), PK_EXIT_FAIL);
}

TEST(verify_decompresses_every_variant)
{
    char good[2048], bad[2048], msg[4096];
    snprintf(good, sizeof good, "%s/good.lmdb", t_tmpdir());
    snprintf(bad, sizeof bad, "%s/bad.lmdb", t_tmpdir());
    write_pack(good, text_a);
    ASSERT_EQ(verify_quietly(good, msg, sizeof msg), PK_EXIT_OK);
    write_pack(bad, text_b);
    ASSERT_EQ(verify_quietly(bad, msg, sizeof msg), PK_EXIT_FAIL);
    if (!strstr(msg, "/a.txt: the gzip variant does not decompress to the identity body"))
        t__fail(__FILE__, __LINE__, "verify said: %s", msg);
}

/* Replaces the first occurrence of from in b by to. */
static void swap_text(pk_buf *b, const char *from, const char *to)
{
    char *at = memmem(b->p, b->len, from, strlen(from));
    ASSERT(at != NULL);
    pk_buf out = PK_BUF_INIT;
    pk_buf_addf(&out, "%.*s%s%.*s", (int)(at - b->p), b->p, to,
                (int)(b->p + b->len - at - strlen(from)), at + strlen(from));
    ASSERT(!pk_buf_failed(&out));
    pk_buf_free(b);
    *b = out;
}

static void etag_line_in_200(pk_buf *h200, pk_buf *h304)
{
    (void)h304;
    swap_text(h200, "ETag: \"", "ETag: \"X");
}

static void bare_lf_in_304(pk_buf *h200, pk_buf *h304)
{
    (void)h200;
    swap_text(h304, "no-cache\r\n", "no-cache\n");
}

static void type_line_in_200(pk_buf *h200, pk_buf *h304)
{
    (void)h304;
    swap_text(h200, "text/plain", "text/html");
}

static void framing_line_at_the_end(pk_buf *h200, pk_buf *h304)
{
    pk_buf_adds(h200, "Content-Length: 5\r\n");
    pk_buf_adds(h304, "Content-Length: 5\r\n");
}

static void check_fails(const char *path, const char *why)
{
    char msg[4096];
    ASSERT_EQ(verify_quietly(path, msg, sizeof msg), PK_EXIT_FAIL);
    if (!strstr(msg, why))
        t__fail(__FILE__, __LINE__, "verify said: %s (wanted: %s)", msg, why);
}

/* servd sends the header blocks as they are: verify holds every byte of
 * them to what servd-pack renders from the entry, not just the status line
 * and Content-Length (found by a review that changed an ETag line, which
 * verify passed and servd then sent, breaking every revalidation). */
TEST(verify_checks_every_byte_of_the_header_blocks)
{
    char path[2048], msg[4096];
    snprintf(path, sizeof path, "%s/blocks.lmdb", t_tmpdir());
    static const pk_header xfo = {"X-Frame-Options", "DENY"};
    tweak.extra = &xfo;
    tweak.nextra = 1;
    write_pack(path, text_a);
    ASSERT_EQ(verify_quietly(path, msg, sizeof msg), PK_EXIT_OK);

    tweak.edit = etag_line_in_200;
    write_pack(path, text_a);
    check_fails(path, "/a.txt: the identity 200 header block is not the one its entry renders");
    tweak.edit = bare_lf_in_304;
    write_pack(path, text_a);
    check_fails(path, "/a.txt: the identity 304 header block is not the one its entry renders");
    tweak.edit = type_line_in_200;
    write_pack(path, text_a);
    check_fails(path, "where \"Content-Type: text/plain; charset=utf-8\\x0d\\x0a\" belongs");
    /* a line no rule could have made: with ETags of the body alone (minor
     * 1), the ETag check cannot see it */
    tweak.edit = framing_line_at_the_end;
    write_pack_etags(path, text_a, 1);
    set_minor(path, 1);
    check_fails(path, "the identity 200 header block has a line whose name servd-pack writes "
                      "itself");
}

TEST(verify_checks_keys_and_redirect_targets)
{
    char path[2048], msg[4096];
    snprintf(path, sizeof path, "%s/redirects.lmdb", t_tmpdir());
    tweak.redirect = "/a.txt";
    write_pack(path, text_a);
    ASSERT_EQ(verify_quietly(path, msg, sizeof msg), PK_EXIT_OK);
    const char *bad[] = {"//evil.example/x", "/a\r\nSet-Cookie: x=1", "http://evil.example/",
                         "/../a.txt", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tweak.redirect = bad[i];
        write_pack(path, text_a);
        check_fails(path, "/r: redirects to");
    }
    /* servd looks up index.html under such a key, never the key itself */
    tweak.key = "/dir/";
    write_pack(path, text_a);
    check_fails(path, "/dir/: a key that ends in '/'");
}

/* Rewrites the meta record of the pack at path through LMDB: edit gets a
 * copy of it (room for 512 bytes) and may change its bytes and length. */
static void edit_meta(const char *path, void (*edit)(uint8_t *rec, size_t *len))
{
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    MDB_val k = {4, "meta"}, val;
    static uint8_t rec[512];
    ASSERT_EQ(mdb_env_create(&env), 0);
    ASSERT_EQ(mdb_env_set_maxdbs(env, 4), 0);
    ASSERT_EQ(mdb_env_set_mapsize(env, 4 << 20), 0);
    ASSERT_EQ(mdb_env_open(env, path, MDB_NOSUBDIR | MDB_NOLOCK, 0644), 0);
    ASSERT_EQ(mdb_txn_begin(env, NULL, 0, &txn), 0);
    ASSERT_EQ(mdb_dbi_open(txn, "meta", 0, &dbi), 0);
    ASSERT_EQ(mdb_get(txn, dbi, &k, &val), 0);
    size_t len = val.mv_size;
    ASSERT(len <= sizeof rec);
    memcpy(rec, val.mv_data, len);
    edit(rec, &len);
    val = (MDB_val){len, rec};
    ASSERT_EQ(mdb_put(txn, dbi, &k, &val, 0), 0);
    ASSERT_EQ(mdb_txn_commit(txn), 0);
    mdb_env_close(env);
}

static void reserved_byte(uint8_t *rec, size_t *len)
{
    (void)len;
    rec[13] = 0x01;
}

/* a later minor, which may use reserved bytes and append fields */
static void minor_ahead(uint8_t *rec, size_t *len)
{
    rec[10] = SF_FORMAT_MINOR + 1;
    rec[13] = 0x01;
    rec[(*len)++] = 0x07;
}

static void minor_0_with_bytes_at_264(uint8_t *rec, size_t *len)
{
    (void)len;
    rec[10] = 0;
    rec[270] = 0x5a;
}

static void one_byte_longer(uint8_t *rec, size_t *len)
{
    rec[(*len)++] = 0;
}

static void profile_not_ascii(uint8_t *rec, size_t *len)
{
    (void)len;
    memcpy(rec + 136, "r1 gzip=\xc3\xa9", 10); /* UTF-8 for U+00E9, but not ASCII */
}

static void profile_not_padded(uint8_t *rec, size_t *len)
{
    (void)len;
    rec[136 + 127] = 'x';
}

static void packer_not_utf8(uint8_t *rec, size_t *len)
{
    (void)len;
    memcpy(rec + 72, "servd-pack \xff", 12);
}

static void packer_not_padded(uint8_t *rec, size_t *len)
{
    (void)len;
    rec[72 + 40] = 'y';
}

static void packer_cut_in_a_character(uint8_t *rec, size_t *len)
{
    (void)len;
    memset(rec + 72, 'a', 63);
    rec[72 + 63] = 0xc3; /* all 64 bytes used, the last one half of a character */
}

static void packer_full_utf8(uint8_t *rec, size_t *len)
{
    (void)len;
    memset(rec + 72, 'a', 62);
    memcpy(rec + 72 + 62, "\xc3\xa9", 2); /* no NUL: allowed when all 64 bytes are used */
}

/* The meta record's own fields (docs/format.md §3), which readers ignore:
 * verify names the field, what it holds and what the format requires. Of
 * a later minor it checks what it knows (a warning says so), and passes. */
TEST(verify_checks_the_meta_fields)
{
    char path[2048], msg[4096], longer[256];
    snprintf(path, sizeof path, "%s/meta.lmdb", t_tmpdir());
    snprintf(longer, sizeof longer, "meta: the record is 281 bytes; format 1.%d's is exactly 280",
             SF_FORMAT_MINOR);
    const struct {
        void (*edit)(uint8_t *, size_t *);
        const char *why;
    } bad[] = {
        {reserved_byte, "meta: the reserved bytes 12-15 hold 00 01 00 00 where the format "
                        "requires 0"},
        {minor_0_with_bytes_at_264, "meta: bytes 264-279, reserved in format 1.0"},
        {one_byte_longer, longer},
        {profile_not_ascii, "is not ASCII: byte 8 is 0xc3"},
        {profile_not_padded, "meta: the profile field is not NUL-padded: byte 127"},
        {packer_not_utf8, "meta: the packer \"servd-pack \\xff\" is not UTF-8: byte 11 is 0xff"},
        {packer_not_padded, "meta: the packer field is not NUL-padded: byte 40, after the NUL "
                            "that ends \"test\", is 0x79 where the format requires 0"},
        {packer_cut_in_a_character, "is not UTF-8: byte 63 is 0xc3"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_pack(path, text_a);
        ASSERT_EQ(verify_quietly(path, msg, sizeof msg), PK_EXIT_OK);
        edit_meta(path, bad[i].edit);
        check_fails(path, bad[i].why);
    }
    write_pack(path, text_a);
    edit_meta(path, packer_full_utf8);
    ASSERT_EQ(verify_quietly(path, msg, sizeof msg), PK_EXIT_OK);
    write_pack(path, text_a);
    edit_meta(path, minor_ahead);
    ASSERT_EQ(verify_quietly(path, msg, sizeof msg), PK_EXIT_OK);
    ASSERT(strstr(msg, "what that version added is not checked") != NULL);
}

static void flag_bit_2(uint8_t *rec)
{
    rec[2] |= 0x4;
}

static void date_weak(uint8_t *rec)
{
    rec[2] |= SF_ENTRY_DATE_WEAK;
}

static void gzip_reserved_byte(uint8_t *rec)
{
    rec[32 + 72 + 2] = 0x01; /* the second descriptor's byte 2 */
}

/* Entry flag bits a pack's minor does not define and a variant's reserved
 * bytes are written as 0 (docs/format.md §4, §5): readers ignore them, so
 * that a later minor may use them; verify finds them set in a pack of a
 * minor it knows, and passes them in a later one. */
TEST(verify_checks_unused_entry_bits)
{
    char path[2048], msg[4096], want[256];
    snprintf(path, sizeof path, "%s/bits.lmdb", t_tmpdir());
    tweak.edit_rec = flag_bit_2;
    write_pack(path, text_a);
    snprintf(want, sizeof want,
             "/a.txt: its flags 0x0005 set bits format minor %d does not define (0x0004)",
             SF_FORMAT_MINOR);
    check_fails(path, want);
    set_minor(path, SF_FORMAT_MINOR + 1);
    ASSERT_EQ(verify_quietly(path, msg, sizeof msg), PK_EXIT_OK);

    /* the weak date is a bit of minor 3 on */
    tweak.edit_rec = date_weak;
    write_pack(path, text_a);
    ASSERT_EQ(verify_quietly(path, msg, sizeof msg), PK_EXIT_OK);
    set_minor(path, 2);
    check_fails(path, "/a.txt: its flags 0x0003 set bits format minor 2 does not define (0x0002)");

    tweak.edit_rec = gzip_reserved_byte;
    write_pack(path, text_a);
    check_fails(path, "/a.txt: the gzip variant's reserved bytes are 0x000100 where the format "
                      "requires 0");
    set_minor(path, SF_FORMAT_MINOR + 1);
    ASSERT_EQ(verify_quietly(path, msg, sizeof msg), PK_EXIT_OK);
}
