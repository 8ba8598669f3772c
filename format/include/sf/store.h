/*
 * sf/store.h - the servd pack: one LMDB file holding a whole static site.
 *
 * A pack is written once by servd-pack and then only ever read. It holds three
 * LMDB databases (the byte layout of each record is in docs/format.md):
 *
 *   "meta"   : "meta" -> the meta record (magic, version, pack id, counts),
 *              "status:404" -> the entry served for paths that do not exist.
 *   "paths"  : normalised request path ("/css/site.css") -> entry record.
 *   "bodies" : SHA-256 of the stored bytes -> the bytes (content addressed,
 *              so identical contents are stored once).
 *
 * Conventions (libuv style): functions return 0 on success and a negative
 * SF_E* code on failure; sf_strerror() names the code. Functions that can fail
 * for reasons worth a sentence also fill a caller-supplied error buffer.
 *
 * Lifetimes (LMDB style): a pack file is immutable once it has its final name,
 * so every pointer a reader returns points straight into the read-only map.
 * Such a view is valid until the sf_reader that produced it is ended (and
 * hence also until its sf_pack is closed, which requires all readers ended).
 */
#ifndef SF_STORE_H
#define SF_STORE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Error codes. 0 is success; every error is negative. */
enum {
    SF_OK = 0,
    SF_ENOTFOUND = -1,  /* no such path / body / variant */
    SF_ECORRUPT = -2,   /* a record is malformed: a length or offset is out of bounds */
    SF_EVERSION = -3,   /* unknown major format version */
    SF_EMAGIC = -4,     /* not a servd pack (bad magic) */
    SF_EIO = -5,        /* an operating-system call failed (errno kept in the message) */
    SF_ELMDB = -6,      /* LMDB reported an error */
    SF_ENOMEM = -7,     /* allocation failed */
    SF_EINVAL = -8,     /* invalid argument */
    SF_EPATH = -9,      /* a path cannot be normalised (traversal, NUL, bad escape) */
    SF_ETOOLONG = -10,  /* a path or record exceeds a limit */
    SF_EFULL = -11,     /* the pack's map is full: the writer's capacity was too small */
    SF_ETIMEDOUT = -12, /* a pack's check did not finish in time: refused as corrupt (a loop
                           or a bomb), but no sign that bytes changed (sf/isolate.h) */
    SF_ECANCELED = -13, /* the caller abandoned the operation (servd stopping during a load) */
};

/* Returns a static, human-readable name for an SF_E* code. */
const char *sf_strerror(int err);

/* Pack format version written by this library. Readers accept any minor
 * version of SF_FORMAT_MAJOR and refuse every other major version.
 * Minor 1: meta's id_404 covers the status:404 entry (docs/format.md).
 * Minor 2: ETags cover the type and the rule headers as well as the body
 * (docs/format.md §6.3); only servd-pack verify re-derives them.
 * Minor 3: entry flag SF_ENTRY_DATE_WEAK; older readers ignore it. */
#define SF_FORMAT_MAJOR 1
#define SF_FORMAT_MINOR 3

/* The key in "meta" of the entry served for paths that do not exist. */
#define SF_SPECIAL_404 "status:404"

/* Magic at offset 0 of the meta record. */
#define SF_META_MAGIC     "SERVDPK1"
#define SF_META_MAGIC_LEN 8

/* Length of a body key (SHA-256). */
#define SF_KEY_LEN 32

/* Length of the pack id: the first 16 bytes of a SHA-256 (see packid.c). */
#define SF_PACK_ID_LEN 16

/* Size of the buffers paths are normalised into, in bytes. A normalised
 * path can only be stored or found when it is at most SF_KEY_MAX bytes. */
#define SF_PATH_MAX 4096

/* Longest key LMDB stores (its compiled-in default maximum key size): the
 * longest path a pack can hold. */
#define SF_KEY_MAX 511

/* Content codings a variant can have. The numeric values are stored in
 * entry records: never renumber them. */
enum sf_encoding {
    SF_ENC_IDENTITY = 0,
    SF_ENC_GZIP = 1,
    SF_ENC_BR = 2,
    SF_ENC_ZSTD = 3,
    SF_ENC_COUNT = 4
};

/* The Content-Encoding token of an encoding ("identity", "gzip", "br",
 * "zstd"), or NULL for an out-of-range value. */
const char *sf_encoding_name(int enc);

/* Parses an encoding token (exact, lowercase). Returns the sf_encoding or -1. */
int sf_encoding_parse(const char *s, size_t len);

/* A view into the map (or into caller memory): not NUL-terminated. */
typedef struct sf_view {
    const char *ptr;
    size_t len;
} sf_view;

/* One stored representation of a path. All views point into the entry
 * record and share its lifetime. */
typedef struct sf_variant {
    int encoding;            /* enum sf_encoding */
    uint64_t body_len;       /* exact length of the stored bytes */
    sf_view etag;            /* quoted strong ETag, e.g. "\"Zk3..\"" */
    sf_view h200;            /* pre-rendered "HTTP/1.1 200 OK\r\n...": every header line
                                of a 200 except Date, each ending in CRLF, no blank line */
    sf_view rep;             /* suffix of h200: the representation header lines (everything
                                but the status line and Content-Length), for 206 */
    sf_view h304;            /* pre-rendered "HTTP/1.1 304 Not Modified\r\n..." (no Date) */
    const uint8_t *body_key; /* SF_KEY_LEN bytes: SHA-256 of the stored bytes */
} sf_variant;

/* Kinds of entry. */
enum sf_kind {
    SF_KIND_FILE = 1,     /* serve one of the variants */
    SF_KIND_REDIRECT = 2, /* 301 to target (a directory without its trailing slash) */
};

/* An entry record, decoded. Views point into the record. */
typedef struct sf_entry {
    int kind;                          /* enum sf_kind */
    unsigned flags;                    /* SF_ENTRY_* */
    int64_t last_modified;             /* Unix seconds */
    sf_view mime;                      /* Content-Type value */
    sf_view target;                    /* redirect target path (SF_KIND_REDIRECT only) */
    unsigned nvariants;                /* 0 for redirects, 1..SF_ENC_COUNT for files */
    sf_variant variants[SF_ENC_COUNT]; /* identity is always variants[0] */
} sf_entry;

/* The entry has more than one variant: responses carry Vary: Accept-Encoding. */
#define SF_ENTRY_NEGOTIABLE 0x1u
/* (minor 3) last_modified is not known to be when the file last changed
 * (SOURCE_DATE_EPOCH, a date servd-pack made or kept, a normalised mtime):
 * a strong validator it is not, so If-Range never matches it (RFC 9110
 * §13.1.5, §8.8.2.2). */
#define SF_ENTRY_DATE_WEAK 0x2u

/* Dates before this (2000-01-02) are taken for ones a build normalised
 * (Nix's 1 s and its SOURCE_DATE_EPOCH of 1980-01-01, zip's 1980-01-01,
 * 2000-01-01): every version of every file of such a tree has the date, so
 * it tells no change apart. servd-pack marks them SF_ENTRY_DATE_WEAK, and
 * servd answers no If-Modified-Since with them (a 304 could be for another
 * version); the ETag still revalidates. */
#define SF_DATE_NORMALISED 946771200

/* The meta record, decoded. */
typedef struct sf_meta {
    unsigned major, minor;
    int64_t created;                 /* Unix seconds (SOURCE_DATE_EPOCH when set) */
    uint64_t n_paths;                /* records in "paths" */
    uint64_t n_bodies;               /* records in "bodies" */
    uint64_t identity_bytes;         /* sum of identity lengths over all paths */
    uint64_t stored_bytes;           /* sum of all stored body lengths */
    uint8_t pack_id[SF_PACK_ID_LEN]; /* derived from the contents: same site, same id */
    uint8_t id_404[SF_PACK_ID_LEN];  /* minor >= 1: sf_record_id of the status:404 record,
                                        zeros without one (minor 0 wrote zeros) */
    char packer[65];                 /* packer version string, NUL-terminated */
    char profile[129];               /* compression profile string, NUL-terminated */
} sf_meta;

/* ---- Records (record.c): pure byte encoding, no LMDB. ---- */

/* Decodes and validates an entry record of n bytes at p. Every offset and
 * length is checked against n; on success *out holds views into p.
 * @return 0, or SF_ECORRUPT. */
int sf_entry_decode(const void *p, size_t n, sf_entry *out);

/* The reserved bytes 1..3 of the variant descriptor sf_entry_decode read v
 * from, as a little-endian integer: 0 in every pack written so far (readers
 * ignore them; servd-pack verify checks them). */
uint32_t sf_variant_reserved(const sf_variant *v);

/* Input to sf_entry_encode: the strings are copied into the record. */
typedef struct sf_variant_spec {
    int encoding;
    uint64_t body_len;
    uint8_t body_key[SF_KEY_LEN];
    sf_view etag;
    sf_view h200;
    size_t rep_off; /* offset of the representation headers inside h200 */
    sf_view h304;
} sf_variant_spec;

typedef struct sf_entry_spec {
    int kind;
    unsigned flags;
    int64_t last_modified;
    sf_view mime;
    sf_view target;
    unsigned nvariants;
    sf_variant_spec variants[SF_ENC_COUNT];
} sf_entry_spec;

/* Encodes spec into a new malloc'd buffer (*out, *outlen); the caller frees.
 * @return 0, SF_EINVAL (bad spec) or SF_ENOMEM. */
int sf_entry_encode(const sf_entry_spec *spec, uint8_t **out, size_t *outlen);

/* Decodes and validates a meta record. @return 0, SF_EMAGIC, SF_EVERSION or SF_ECORRUPT. */
int sf_meta_decode(const void *p, size_t n, sf_meta *out);

/* Fields of the meta record that verify reads raw
 * (record.c has the whole table) */
#define SF_META_RESERVED_OFF 12 /* 4 bytes, 0 */
#define SF_META_PACKER_OFF   72 /* 64 bytes, NUL-padded UTF-8 */
#define SF_META_PACKER_LEN   64
#define SF_META_PROFILE_OFF  136 /* 128 bytes, NUL-padded ASCII */
#define SF_META_PROFILE_LEN  128
#define SF_META_ID404_OFF    264 /* 16 bytes: id_404 from minor 1, reserved before */

/* Encodes a meta record into buf (at least SF_META_RECORD_LEN bytes). */
#define SF_META_RECORD_LEN 280
void sf_meta_encode(const sf_meta *m, uint8_t buf[SF_META_RECORD_LEN]);

/* ---- Reading (store_read.c) ---- */

/* Whether page, the first len bytes of a file or of one of its LMDB meta
 * pages, holds LMDB's meta page magic: 0xBEEFC0DE, little-endian, at offset
 * 16 (docs/format.md). The one test of it, for the reader's header check,
 * the preload and servd-pack's "is this a pack it may replace". */
int sf_lmdb_magic(const void *page, size_t len);

/* The page size that page, the first len bytes of an LMDB meta page, states
 * (a power of two from 512 to 65536, at offset 40): the second meta page
 * starts there. 0 when it holds no magic or another size. */
size_t sf_lmdb_page_size(const void *page, size_t len);

typedef struct sf_pack sf_pack;
typedef struct sf_reader sf_reader;

/* Opens the pack at path read-only (no lock file is created or needed) and
 * validates its meta record. On failure writes a sentence naming the file and
 * the cause into err (if errlen > 0).
 * @param[in] path   the pack file
 * @param[out] out   the open pack, to be closed with sf_pack_close()
 * @return 0, SF_EIO, SF_ELMDB, SF_EMAGIC, SF_EVERSION, SF_ECORRUPT or SF_ENOMEM. */
int sf_pack_open(const char *path, sf_pack **out, char *err, size_t errlen);

/* sf_pack_open, for a caller that survives reads past the end of the file
 * (servd's SIGBUS guard, which answers them with pages of zeros): cut() is
 * asked once LMDB has read the meta pages through its map, before anything
 * uses them, and says whether those reads found pages of the file gone (a
 * write in place began just then). LMDB would take a zeroed meta page's
 * root for a page number and abort on an assertion; the open fails instead,
 * with SF_EIO and "the file changed while it was being opened". */
int sf_pack_open_checked(const char *path, int (*cut)(void), sf_pack **out, char *err,
                         size_t errlen);

/* Closes a pack. Every reader of it must have been ended first. */
void sf_pack_close(sf_pack *pack);

/* The pack's decoded meta record; valid until sf_pack_close(). */
const sf_meta *sf_pack_meta(const sf_pack *pack);

/* The file size of the pack in bytes (as mapped). */
uint64_t sf_pack_size(const sf_pack *pack);

/* The pack's open file and the start of its map: every view a reader hands
 * out lies in [map, map + sf_pack_size()), at file offset (view - map). This
 * lets a server sendfile() a body instead of copying it from the map. Both
 * stay valid until sf_pack_close(); the descriptor must not be closed or
 * have its file position relied on (use pread/sendfile with an offset).
 * @return 0, or SF_EIO when LMDB has no descriptor for the file. */
int sf_pack_file(const sf_pack *pack, int *fd, const char **map);

/* Begins a reader: a read-only LMDB transaction. A reader may be used by one
 * thread at a time (it may move between threads). Allocates.
 * @return 0, SF_ELMDB or SF_ENOMEM. */
int sf_reader_begin(sf_pack *pack, sf_reader **out);

/* Ends a reader; every view obtained through it becomes invalid. */
void sf_reader_end(sf_reader *r);

/* Attaches the caller's data to a reader: data whose pointers into the map
 * must not outlive the reader (servd's lookup cache). sf_reader_end calls
 * user_free(user) (when user_free is not NULL) before it ends the reader. */
void sf_reader_set_user(sf_reader *r, void *user, void (*user_free)(void *));

/* The data attached by sf_reader_set_user, or NULL. */
void *sf_reader_user(const sf_reader *r);

/* Looks up a normalised path (see sf/path.h) and decodes its entry. Does not
 * allocate. @return 0, SF_ENOTFOUND, SF_ECORRUPT or SF_ELMDB. */
int sf_lookup(sf_reader *r, const char *path, size_t len, sf_entry *out);

/* Looks up a special entry in "meta" by name (e.g. "status:404"). */
int sf_lookup_special(sf_reader *r, const char *name, sf_entry *out);

/* The record of a special entry as stored (not decoded), a view into the
 * map. @return 0, SF_ENOTFOUND, SF_ECORRUPT or SF_ELMDB. */
int sf_special_record(sf_reader *r, const char *name, sf_view *out);

/* Finds the stored bytes of a variant; checks that their length is the one
 * the variant records. Does not allocate.
 * @return 0, SF_ENOTFOUND, SF_ECORRUPT or SF_ELMDB. */
int sf_body(sf_reader *r, const sf_variant *v, sf_view *out);

/* Finds a body by key. @return 0, SF_ENOTFOUND or SF_ELMDB. */
int sf_body_by_key(sf_reader *r, const uint8_t key[SF_KEY_LEN], sf_view *out);

/* Calls fn for every path in byte order with its decoded entry; stops at the
 * first non-zero return of fn and returns it. A record that fails to decode
 * returns SF_ECORRUPT after filling err with its path. */
typedef int (*sf_path_fn)(void *arg, sf_view path, const sf_entry *e);
int sf_foreach_path(sf_reader *r, sf_path_fn fn, void *arg, char *err, size_t errlen);

/* Calls fn for every path in byte order with its entry record as stored
 * (not decoded: bytes a decoder ignores are still seen); stops at the first
 * non-zero return of fn and returns it. SF_ECORRUPT when LMDB finds its
 * pages damaged, SF_ELMDB when it fails otherwise. */
typedef int (*sf_record_fn)(void *arg, sf_view path, sf_view rec);
int sf_foreach_record(sf_reader *r, sf_record_fn fn, void *arg);

/* Calls fn for every body (key, bytes) in key order. */
typedef int (*sf_body_fn)(void *arg, const uint8_t key[SF_KEY_LEN], sf_view bytes);
int sf_foreach_body(sf_reader *r, sf_body_fn fn, void *arg);

/* ---- The pack id (packid.c) ---- */

/* The meta record's pack_id: the first SF_PACK_ID_LEN bytes of SHA-256 over,
 * for every path in key order, the key, one NUL byte and its entry record
 * (docs/format.md). The packer computes it over the records it writes; a
 * reader recomputes it to prove that no record changed after packing. */
typedef struct sf_pack_id sf_pack_id;

/* Sets up OpenSSL's SHA-256 and checks that it works; call it first thing
 * in main. OpenSSL builds its tables at the first use: done here, running
 * out of memory in there stops the program before it reads any pack, not
 * in the middle of a check. (OpenSSL 3.0 does not report every allocation
 * that fails in there; the next use then crashes - here too, but still
 * before any pack is read.) @return 0 or SF_ENOMEM. */
int sf_sha256_ready(void);

/* Starts an id. @return 0 or SF_ENOMEM. */
int sf_pack_id_begin(sf_pack_id **out);

/* Adds one path and its entry record; paths must come in key order (byte
 * order, as LMDB keeps them). @return 0, or SF_ENOMEM when OpenSSL failed
 * (id must then still be freed with sf_pack_id_free). */
int sf_pack_id_add(sf_pack_id *id, const char *path, size_t len, const void *rec, size_t n);

/* Finishes the id into out and frees it. @return 0 or SF_ENOMEM. */
int sf_pack_id_end(sf_pack_id *id, uint8_t out[SF_PACK_ID_LEN]);

/* Frees an unfinished id (NULL is allowed). */
void sf_pack_id_free(sf_pack_id *id);

/* Recomputes the id of an open pack over its paths database, records as
 * stored. Compare with sf_pack_meta()->pack_id.
 * @return 0, SF_ENOMEM, SF_ECORRUPT or SF_ELMDB. */
int sf_pack_id_compute(sf_reader *r, uint8_t out[SF_PACK_ID_LEN]);

/* The id of one record: the first SF_PACK_ID_LEN bytes of its SHA-256.
 * @return 0 or SF_ENOMEM. */
int sf_record_id(const void *rec, size_t n, uint8_t out[SF_PACK_ID_LEN]);

/* Meta's id_404 (format minor 1) recomputed over an open pack: the id of the
 * status:404 record as stored, or all zero bytes when the pack has none.
 * @return 0, SF_ENOMEM, SF_ECORRUPT or SF_ELMDB. */
int sf_pack_id_404(sf_reader *r, uint8_t out[SF_PACK_ID_LEN]);

/* Whether a reader checks meta's id_404: for minor 1 and later, and for any
 * pack whose id_404 bytes are not all zero (minor 0 writers left them zero,
 * so a minor byte damaged from 1 to 0 cannot turn the check off). */
int sf_meta_has_id_404(const sf_meta *m);

/* Lowercase hex of n bytes into out (2n + 1 bytes), NUL-terminated. */
void sf_hex(const uint8_t *p, size_t n, char *out);

/* Lowercase hex of an id, NUL-terminated. */
void sf_pack_id_hex(const uint8_t id[SF_PACK_ID_LEN], char out[2 * SF_PACK_ID_LEN + 1]);

/* ---- Writing (store_write.c) ---- */

typedef struct sf_writer sf_writer;

/* Writes the temporary name a pack (or any file servd-pack puts in place
 * atomically) is built under before it is renamed to final_path:
 * "<final_path>.tmp-<pid>", in the same directory so that rename(2) is
 * atomic. The one place this name is made. @return 0, or SF_ETOOLONG when it
 * does not fit in cap bytes. */
int sf_tmp_name(const char *final_path, char *out, size_t cap);

/* The other way: if name (a path or a file name) is sf_tmp_name's form,
 * "<final>.tmp-<pid>", the pid, with the length of <final> in *final_len
 * (may be NULL); else 0. */
long sf_tmp_name_pid(const char *name, size_t *final_len);

/* sf_tmp_name_pid for "<final><tag><pid>" with any tag (not empty):
 * servd-pack's ".old-" copy of the previous manifest. */
long sf_name_pid(const char *name, const char *tag, size_t *final_len);

/* Gives tmp, about to be renamed over final_path, the owner, group and
 * permission bits of the file there (as an editor saving a file does), so
 * that a rebuilt pack stays readable by whoever could read the last one.
 * Without the right to give the owner (not root), the group alone is given
 * when this user is in it. The bits are copied only when both owner and
 * group were: else a mode such as 0640 would lock the old owner out, and
 * tmp gets fresh less the umask, as a new file does. So it does when
 * final_path is not a regular file or is empty (a placeholder, such as
 * mktemp(1) leaves, not a pack). tmp is created 0600, unreadable to others
 * while it is written. */
void sf_keep_attributes(const char *tmp, const char *final_path, mode_t fresh);

/* Syncs the directory path is in, so that a rename into it is durable.
 * @return 0, or an errno. EINVAL from fsync (a file system that cannot sync
 * a directory: some FUSE and network ones) counts as done. */
int sf_sync_dir_of(const char *path);

/* The page size LMDB gives a pack built on this machine: the system's,
 * at most 32 KiB. */
size_t sf_store_page_size(void);

/* The bytes of the pack one put of a kl-byte key and a vl-byte value takes,
 * laid out as LMDB lays it, on the safe side: overflow pages for a large
 * value, and its node counted twice for leaf pages that splits leave half
 * full (a leaf holding a single node near the limit takes a little more;
 * sf_writer_open's margin covers that). The sum over every put is the
 * capacity to give sf_writer_open. */
uint64_t sf_store_cost(size_t kl, uint64_t vl);

/* Starts a pack that will appear at final_path only when committed. Builds
 * into sf_tmp_name(final_path) in the same directory.
 * @param[in] capacity  the sum of sf_store_cost over every put (bodies,
 *                      records and specials); the map is sized from it.
 * @return 0, SF_EIO, SF_ELMDB or SF_ENOMEM (with a sentence in err). */
int sf_writer_open(const char *final_path, uint64_t capacity, sf_writer **out, char *err,
                   size_t errlen);

/* Stores a body under its key. Storing the same key twice is not an error
 * (content addressing: the first copy is kept). Keys put in ascending order
 * are appended (pages fill up). Every 32 MiB of LMDB pages put, a put also
 * commits the transaction (without a sync) and begins the next: its error may then be
 * that commit's, with sf_writer_cause saying why, and every later call
 * fails the same way.
 * @return 0, SF_EIO (the system: disk, limit, permission), SF_EFULL,
 *         SF_ENOMEM, SF_ETOOLONG or SF_ELMDB. */
int sf_writer_put_body(sf_writer *w, const uint8_t key[SF_KEY_LEN], const void *p, size_t n);

/* Like sf_writer_put_body, but the caller writes the n bytes: *room is
 * where they go (LMDB's MDB_RESERVE), to be filled before any other call
 * on w, or NULL when the key is stored already (nothing to write). A body
 * read from a file then needs no buffer of its own for LMDB to copy: the
 * largest file of a site is held once while it is written, not twice.
 * Bytes that do not hash to key must never be committed: on a failure to
 * fill the room, sf_writer_abort.
 * @return as sf_writer_put_body. */
int sf_writer_reserve_body(sf_writer *w, const uint8_t key[SF_KEY_LEN], size_t n, void **room);

/* Stores an encoded entry record under a normalised path, as
 * sf_writer_put_body does. A path may be stored once (SF_EINVAL). */
int sf_writer_put_path(sf_writer *w, const char *path, size_t len, const void *rec, size_t n);

/* Why a batch commit inside a put failed (strerror's words for an errno),
 * or NULL when none did. */
const char *sf_writer_cause(const sf_writer *w);

/* Stores a special entry in "meta" (e.g. "status:404"). For SF_SPECIAL_404
 * the writer also keeps the record's id, which sf_writer_seal puts in
 * meta's id_404 (format minor 1). */
int sf_writer_put_special(sf_writer *w, const char *name, const void *rec, size_t n);

/* Writes the meta record (with the id_404 of what sf_writer_put_special
 * stored, not meta's own), commits and fsyncs the temporary file: the pack is
 * then whole and durable, but not yet at its final name. Nothing may be put
 * after it. The writer is kept whatever the result: sf_writer_commit or
 * sf_writer_abort follows. Sealing first lets a caller put other files in
 * place (a manifest) in the short gap before the pack's rename.
 * @return 0, SF_EIO, SF_EFULL, SF_ENOMEM, SF_ELMDB, or SF_EINVAL when already
 *         sealed (with a sentence in err). */
int sf_writer_seal(sf_writer *w, const sf_meta *meta, char *err, size_t errlen);

/* Seals the pack unless sf_writer_seal already did (meta is then unused),
 * renames it to its final name and fsyncs the directory. The writer is freed
 * whatever the result; on a failure before the rename the temporary file is
 * removed and nothing appears. A failure to sync the directory leaves the
 * pack in place and still returns SF_EIO (EINVAL, a file system that cannot
 * sync a directory, is no failure).
 * @return 0, or what sf_writer_seal returns (with a sentence in err). */
int sf_writer_commit(sf_writer *w, const sf_meta *meta, char *err, size_t errlen);

/* Abandons the pack: removes the temporary file and frees the writer. */
void sf_writer_abort(sf_writer *w);

#ifdef __cplusplus
}
#endif
#endif /* SF_STORE_H */
