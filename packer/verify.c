/*
 * verify.c - servd-pack verify: prove that a pack is intact.
 *
 * Checks, and names what fails:
 *   - the pack opens (magic, version, meta record, no missing pages);
 *   - every path is a normalised key and its record decodes;
 *   - no key ends in '/', and a redirect's target is a normalised path;
 *   - every variant's body exists with the recorded length, its ETag is the
 *     one derived from the body key, type and rule headers (from the body
 *     key alone before format minor 2), its header blocks are byte for
 *     byte the ones servd-pack renders from the entry's fields and the
 *     Cache-Control and rule lines found in its 200 block (valid header
 *     lines, none of a header servd-pack writes itself; today's policies
 *     of the rules - the RFC 9111 check, no digests or Age - are not
 *     applied, so older releases still verify), and the negotiable flag
 *     matches the number of variants; flag bits the pack's minor does
 *     not define and the variants' reserved bytes are 0;
 *   - every compressed variant decompresses to exactly the identity body of
 *     the same entry (a pack whose hashes all match can still pair a path
 *     with another file's gzip);
 *   - every body re-hashes to its key (this is what finds flipped bits),
 *     and every body is used by some path;
 *   - the status:404 entry, if any, points at existing bodies;
 *   - the meta record's own fields follow docs/format.md §3: of a minor
 *     this servd-pack knows, that minor's length and zero reserved bytes
 *     (a newer minor gets a warning); packer NUL-padded UTF-8, profile
 *     NUL-padded ASCII;
 *   - the meta counts, byte totals and pack id match what is stored. The id
 *     is recomputed over the records as stored (sf_pack_id_compute, which
 *     servd's load check uses, through the sf_pack_id_add the packer
 *     writes it with), and from format minor 1 meta's id_404 over the
 *     status:404 entry (sf_pack_id_404).
 */
#include "commands.h"
#include "msg.h"

#include "decode.h"
#include "digest.h"
#include "headers.h"
#include "fields.h"
#include "sf/isolate.h"
#include "sf/path.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Problems printed before the rest are only counted: one corrupt page can
 * produce thousands of identical complaints. */
#define VERIFY_MAX_REPORTS 20

/* Longest path shown in a message. */
#define SHOW_PATH 200

typedef struct ref {
    uint8_t key[SF_KEY_LEN];
    char *path; /* a path that uses the body (its encoding below) */
    int encoding;
} ref;

typedef struct verify {
    const char *site;
    sf_reader *r;
    uint64_t problems;
    uint64_t paths, identity_bytes;
    unsigned minor; /* the pack's format minor: how its ETags are derived */
    ref *refs;
    size_t nrefs, cap;
    int oom;
} verify;

static void problem(verify *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void problem(verify *v, const char *fmt, ...)
{
    if (v->problems++ >= VERIFY_MAX_REPORTS)
        return;
    char msg[PK_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    pk_err("verify: %s: %s", v->site, msg);
}

static int add_ref(verify *v, const uint8_t *key, sf_view path, int enc)
{
    if (v->nrefs == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 256;
        ref *n = realloc(v->refs, cap * sizeof *n);
        if (!n)
            return -1;
        v->refs = n;
        v->cap = cap;
    }
    ref *r = &v->refs[v->nrefs];
    memcpy(r->key, key, SF_KEY_LEN);
    r->encoding = enc;
    if (!(r->path = strndup(path.ptr, path.len)))
        return -1;
    v->nrefs++;
    return 0;
}

/* The extra header lines that end a stored block, parsed back into the
 * rule headers they were rendered from. */
typedef struct extras {
    pk_header *h;
    size_t n;
    char *text; /* the lines, copied: each name and value NUL-terminated */
} extras;

static void extras_free(extras *x)
{
    free(x->h);
    free(x->text);
}

/* Parses p[0, n) as header lines "Name: value\r\n": a token name that
 * servd-pack does not write itself and a value without controls (not
 * today's stricter rules policies: see check_blocks). @return NULL with *x
 * set (extras_free it in any case), or why not. */
static const char *extras_parse(const char *p, size_t n, extras *x)
{
    memset(x, 0, sizeof *x);
    if (n == 0)
        return NULL;
    if (memchr(p, '\0', n))
        return "holds a NUL byte";
    x->text = malloc(n + 1);
    x->h = calloc(n / 4 + 1, sizeof *x->h); /* a line is at least "a: b\r\n" */
    if (!x->text || !x->h)
        return "cannot be checked: out of memory";
    memcpy(x->text, p, n);
    x->text[n] = '\0';
    for (char *s = x->text, *end = x->text + n; s < end;) {
        char *eol = memmem(s, (size_t)(end - s), "\r\n", 2);
        if (!eol)
            return "ends in a line without CRLF";
        *eol = '\0';
        char *colon = strstr(s, ": ");
        if (!colon)
            return "has a line that is not \"Name: value\"";
        *colon = '\0';
        /* what servd-pack renders itself, or framing (reserved 1); names
         * today's rules refuse as a policy (digests, Age: 2) are let be,
         * so that a release packed before that policy still verifies */
        if (!pk_header_name_ok(s) || pk_header_name_reserved(s) == 1)
            return "has a line whose name servd-pack writes itself or that is not a token";
        if (pk_header_value_problem(colon + 2))
            return "has a line whose value no header may hold";
        x->h[x->n].name = s;
        x->h[x->n].value = colon + 2;
        x->n++;
        s = eol + 2;
    }
    return NULL;
}

/* Reports the first line where the stored block got differs from the one
 * want that the entry's fields render. @return 1 when they differ. */
static int block_differs(verify *v, sf_view path, const char *enc, const char *which, sf_view got,
                         const pk_buf *want)
{
    if (got.len == want->len && memcmp(got.ptr, want->p, got.len) == 0)
        return 0;
    size_t i = 0;
    while (i < got.len && i < want->len && got.ptr[i] == want->p[i])
        i++;
    size_t line = i;
    while (line > 0 && got.ptr[line - 1] != '\n')
        line--;
    const char *g = got.ptr + line, *w = want->p + line;
    const char *ge = memchr(g, '\n', got.len - line), *we = memchr(w, '\n', want->len - line);
    int gl = (int)((ge ? (size_t)(ge - g) + 1 : got.len - line));
    int wl = (int)((we ? (size_t)(we - w) + 1 : want->len - line));
    problem(v,
            "%.*s: the %s %s header block is not the one its entry renders: at byte %zu it has "
            "\"%.*s\" where \"%.*s\" belongs",
            (int)(path.len > SHOW_PATH ? SHOW_PATH : path.len), path.ptr, enc, which, i,
            gl > 120 ? 120 : gl, g, wl > 120 ? 120 : wl, w);
    return 1;
}

/* Checks every byte of the stored header blocks of var: they must be the
 * ones servd-pack renders (headers.h) from the entry's type, date and
 * flags, the variant's encoding, length and ETag, the block's own
 * Cache-Control value (a 404 block's: no-cache, perhaps with no-transform)
 * and the rule lines at its end, each of which must be a
 * valid header line (extras_parse). servd sends these bytes as they are. */
static void check_blocks(verify *v, sf_view path, const sf_entry *e, const sf_variant *var,
                         int special)
{
    int sp = (int)(path.len > SHOW_PATH ? SHOW_PATH : path.len);
    const char *enc = sf_encoding_name(var->encoding);
    char *mime = strndup(e->mime.ptr, e->mime.len);
    char *etag = strndup(var->etag.ptr, var->etag.len);
    char *cc = NULL;
    pk_buf fixed = PK_BUF_INIT, b = PK_BUF_INIT;
    extras x = {0};
    if (!mime || !etag) {
        v->oom = 1;
        goto out_free_blocks;
    }
    if (memchr(e->mime.ptr, '\0', e->mime.len) || !pk_mime_type_ok(mime)) {
        problem(v, "%.*s: its type \"%s\" is not a media type", sp, path.ptr, mime);
        goto out_free_blocks;
    }
    if (special && (var->etag.len || var->h304.len)) {
        problem(v, "%.*s: the %s variant has an ETag or a 304 block", sp, path.ptr, enc);
        goto out_free_blocks;
    }
    /* the 404's too: no-cache, perhaps with no-transform (pk_render_404) */
    const char *cv;
    size_t cn;
    if (pk_header_find(var->h200.ptr, var->h200.len, "Cache-Control", &cv, &cn) != 0) {
        problem(v, "%.*s: the %s %s header block has no Cache-Control line", sp, path.ptr, enc,
                special ? "404" : "200");
        goto out_free_blocks;
    }
    if (!(cc = strndup(cv, cn))) {
        v->oom = 1;
        goto out_free_blocks;
    }
    /* a header value; not the rules' RFC 9111 check, a policy newer
     * than some packs that may still be rolled back to */
    const char *bad = memchr(cv, '\0', cn) ? "holds a NUL byte" : pk_header_value_problem(cc);
    if (bad) {
        problem(v, "%.*s: the %s Cache-Control value \"%s\" %s", sp, path.ptr, enc, cc, bad);
        goto out_free_blocks;
    }
    pk_rep rep = {.mime = mime,
                  .cache_control = cc,
                  .last_modified = e->last_modified,
                  .negotiable = (e->flags & SF_ENTRY_NEGOTIABLE) != 0};
    size_t rep_off;
    /* The fixed lines first: what follows them are the rule lines. */
    int rc = special ? pk_render_404(&fixed, &rep_off, &rep, var->encoding, var->body_len)
                     : pk_render_200(&fixed, &rep_off, &rep, var->encoding, var->body_len, etag);
    if (rc != 0 && pk_buf_failed(&fixed)) {
        v->oom = 1; /* no verdict: not a problem of the pack */
        goto out_free_blocks;
    }
    if (rc != 0) {
        problem(v, "%.*s: the %s header blocks cannot be rendered again (a date out of range)", sp,
                path.ptr, enc);
        goto out_free_blocks;
    }
    const char *which = special ? "404" : "200";
    sf_view head = {var->h200.ptr, var->h200.len < fixed.len ? var->h200.len : fixed.len};
    if (block_differs(v, path, enc, which, head, &fixed))
        goto out_free_blocks;
    const char *why = extras_parse(var->h200.ptr + fixed.len, var->h200.len - fixed.len, &x);
    if (why) {
        problem(v, "%.*s: the %s %s header block %s after its fixed lines", sp, path.ptr, enc,
                which, why);
        goto out_free_blocks;
    }
    rep.extra = x.h;
    rep.nextra = x.n;
    rc = special ? pk_render_404(&b, &rep_off, &rep, var->encoding, var->body_len)
                 : pk_render_200(&b, &rep_off, &rep, var->encoding, var->body_len, etag);
    if (rc != 0) {
        v->oom = 1;
        goto out_free_blocks;
    }
    if (block_differs(v, path, enc, which, var->h200, &b) || special)
        goto out_free_blocks;
    if (pk_render_304(&b, &rep, etag) != 0) {
        v->oom = 1;
        goto out_free_blocks;
    }
    block_differs(v, path, enc, "304", var->h304, &b);
out_free_blocks:
    extras_free(&x);
    pk_buf_free(&fixed);
    pk_buf_free(&b);
    free(cc);
    free(etag);
    free(mime);
}

/* Whether an ETag field has the shape servd-pack writes: PK_ETAG_LEN bytes,
 * base64url between double quotes (digest.h). */
static int etag_shaped(sf_view t)
{
    if (t.len != PK_ETAG_LEN || t.ptr[0] != '"' || t.ptr[t.len - 1] != '"')
        return 0;
    for (size_t i = 1; i + 1 < t.len; i++) {
        char c = t.ptr[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_'))
            return 0;
    }
    return 1;
}

/* Checks one variant of path (or of the special entry). */
static void check_variant(verify *v, sf_view path, const sf_entry *e, const sf_variant *var,
                          int special)
{
    int sp = (int)(path.len > SHOW_PATH ? SHOW_PATH : path.len);
    const char *enc = sf_encoding_name(var->encoding);
    sf_view body;
    int rc = sf_body(v->r, var, &body);
    if (rc == SF_ENOTFOUND)
        problem(v, "%.*s: the %s body is missing", sp, path.ptr, enc);
    else if (rc == SF_ECORRUPT)
        problem(v, "%.*s: the %s body has the wrong length (record says %llu)", sp, path.ptr, enc,
                (unsigned long long)var->body_len);
    else if (rc != 0)
        problem(v, "%.*s: the %s body cannot be read: %s", sp, path.ptr, enc, sf_strerror(rc));
    if (add_ref(v, var->body_key, path, var->encoding) != 0)
        v->oom = 1;

    char want[64];
    int n = snprintf(want, sizeof want, "HTTP/1.1 %s\r\nContent-Length: %llu\r\n",
                     special ? "404 Not Found" : "200 OK", (unsigned long long)var->body_len);
    if (var->h200.len < (size_t)n || memcmp(var->h200.ptr, want, (size_t)n) != 0 ||
        var->rep.ptr != var->h200.ptr + n) {
        problem(v,
                "%.*s: the %s header block does not start with the status line and "
                "Content-Length %llu",
                sp, path.ptr, enc, (unsigned long long)var->body_len);
        return;
    }
    if (!special) {
        /* Minor 2 on: from the body key, the type and the rule headers;
         * before: from the body key alone (digest.h). */
        char etag[PK_ETAG_SIZE] = "";
        const char *ex;
        size_t exn;
        if (v->minor < 2)
            pk_etag(var->body_key, etag);
        else if (pk_extras_of_200(var->h200.ptr, var->h200.len, &ex, &exn) != 0)
            problem(v, "%.*s: the %s header block has no Accept-Ranges line", sp, path.ptr, enc);
        else if (pk_etag_rep(var->body_key, e->mime.ptr, e->mime.len, ex, exn, etag) != 0)
            v->oom = 1; /* OpenSSL could not allocate: no verdict */
        if (etag[0] && !etag_shaped(var->etag)) {
            /* a damaged offset points the field at other bytes: not quoted */
            problem(v, "%.*s: the %s ETag field holds no ETag (%zu bytes; the record is damaged)",
                    sp, path.ptr, enc, var->etag.len);
            return;
        }
        if (etag[0] && memcmp(var->etag.ptr, etag, PK_ETAG_LEN) != 0) {
            problem(v, "%.*s: the %s ETag %.*s is not derived from its body, type and headers (%s)",
                    sp, path.ptr, enc, (int)var->etag.len, var->etag.ptr, etag);
            return;
        }
    }
    check_blocks(v, path, e, var, special);
}

/* Whether the identity body id of e is not what its key says: then no
 * variant decodes to it, and check_body names the body at fault. */
static int identity_corrupt(verify *v, const sf_entry *e, sf_view id)
{
    uint8_t d[PK_DIGEST_LEN];
    if (pk_sha256(id.ptr, id.len, d) != 0) {
        v->oom = 1;
        return 1;
    }
    return memcmp(d, e->variants[0].body_key, SF_KEY_LEN) != 0;
}

/* Checks that every compressed variant of e decodes to its identity body. */
static void check_decodes(verify *v, sf_view path, const sf_entry *e)
{
    int sp = (int)(path.len > SHOW_PATH ? SHOW_PATH : path.len);
    sf_view id;
    if (e->nvariants < 2 || sf_body(v->r, &e->variants[0], &id) != 0)
        return; /* a missing identity body is reported by check_variant */
    /* whether id is corrupt: asked at the first mismatch */
    int corrupt = -1;
    for (unsigned i = 1; i < e->nvariants; i++) {
        const sf_variant *var = &e->variants[i];
        const char *enc = sf_encoding_name(var->encoding);
        sf_view body;
        if (sf_body(v->r, var, &body) != 0)
            continue; /* reported by check_variant */
        uint8_t *out;
        size_t outn;
        char why[128];
        int rc = pk_decompress(var->encoding, (const uint8_t *)body.ptr, body.len, id.len, &out,
                               &outn, why, sizeof why);
        if (rc == PK_DECODE_NOMEM) {
            v->oom = 1; /* no verdict: not a problem of the pack */
            return;
        } else if (rc == PK_DECODE_TOO_BIG) {
            problem(v, "%.*s: the %s variant decompresses to more than the %zu bytes of identity",
                    sp, path.ptr, enc, id.len);
        } else if (rc != 0) {
            problem(v, "%.*s: the %s variant cannot be decompressed: %s", sp, path.ptr, enc, why);
        } else {
            int differs = outn != id.len || (outn && memcmp(out, id.ptr, outn) != 0);
            free(out);
            if (differs && corrupt < 0)
                corrupt = identity_corrupt(v, e, id);
            /* a corrupt identity is one fault, check_body's, not one per variant */
            if (differs && !corrupt)
                problem(v, "%.*s: the %s variant does not decompress to the identity body", sp,
                        path.ptr, enc);
        }
    }
}

/* Checks the bits docs/format.md §4 and §5 say are written as 0, in a pack
 * of a minor this servd-pack knows (a later one may use them): the entry's
 * flags beyond those of its minor, and each variant's reserved bytes. */
static void check_unused_bits(verify *v, sf_view path, const sf_entry *e)
{
    if (v->minor > SF_FORMAT_MINOR)
        return;
    int sp = (int)(path.len > SHOW_PATH ? SHOW_PATH : path.len);
    unsigned known = SF_ENTRY_NEGOTIABLE | (v->minor >= 3 ? SF_ENTRY_DATE_WEAK : 0);
    if (e->flags & ~known)
        problem(v,
                "%.*s: its flags 0x%04x set bits format minor %u does not define (0x%04x), "
                "which servd-pack writes as 0",
                sp, path.ptr, e->flags, v->minor, e->flags & ~known);
    for (unsigned i = 0; i < e->nvariants; i++) {
        uint32_t r = sf_variant_reserved(&e->variants[i]);
        if (r)
            problem(v,
                    "%.*s: the %s variant's reserved bytes are 0x%06x where the format "
                    "requires 0",
                    sp, path.ptr, sf_encoding_name(e->variants[i].encoding), (unsigned)r);
    }
}

static int check_path(void *arg, sf_view path, const sf_entry *e)
{
    verify *v = arg;
    int sp = (int)(path.len > SHOW_PATH ? SHOW_PATH : path.len);
    v->paths++;
    if (sf_path_check(path.ptr, path.len) != 0)
        problem(v, "%.*s: not a normalised path key", sp, path.ptr);
    else if (path.ptr[path.len - 1] == '/')
        problem(v,
                "%.*s: a key that ends in '/', which no request reaches (servd looks up "
                "index.html there)",
                sp, path.ptr);
    if (e->kind == SF_KIND_REDIRECT && sf_path_check(e->target.ptr, e->target.len) != 0)
        problem(v, "%.*s: redirects to \"%.*s\", which is not a normalised path", sp, path.ptr,
                (int)(e->target.len > SHOW_PATH ? SHOW_PATH : e->target.len), e->target.ptr);
    check_unused_bits(v, path, e);
    if (e->kind == SF_KIND_FILE) {
        v->identity_bytes += e->variants[0].body_len;
        if (((e->flags & SF_ENTRY_NEGOTIABLE) != 0) != (e->nvariants > 1))
            problem(v, "%.*s: the negotiable flag does not match its %u variants", sp, path.ptr,
                    e->nvariants);
        for (unsigned i = 0; i < e->nvariants; i++)
            check_variant(v, path, e, &e->variants[i], 0);
        check_decodes(v, path, e);
    }
    return 0;
}

/* By key, then by path: of the users of a body, paths ("/...") come before
 * "status:404", so that a message names one a request reaches. */
static int cmp_ref(const void *a, const void *b)
{
    const ref *x = a, *y = b;
    int c = memcmp(x->key, y->key, SF_KEY_LEN);
    return c ? c : strcmp(x->path, y->path);
}

static int cmp_ref_key(const void *a, const void *b)
{
    return memcmp(((const ref *)a)->key, ((const ref *)b)->key, SF_KEY_LEN);
}

typedef struct body_pass {
    verify *v;
    uint64_t bodies, bytes;
} body_pass;

static int check_body(void *arg, const uint8_t key[SF_KEY_LEN], sf_view bytes)
{
    body_pass *bp = arg;
    verify *v = bp->v;
    bp->bodies++;
    bp->bytes += bytes.len;
    char hex[2 * SF_KEY_LEN + 1];
    sf_hex(key, SF_KEY_LEN, hex);
    ref probe;
    memcpy(probe.key, key, SF_KEY_LEN);
    const ref *user =
        v->nrefs ? bsearch(&probe, v->refs, v->nrefs, sizeof *v->refs, cmp_ref_key) : NULL;
    while (user && user > v->refs && cmp_ref_key(user - 1, user) == 0)
        user--; /* the first user */
    uint8_t d[PK_DIGEST_LEN];
    if (pk_sha256(bytes.ptr, bytes.len, d) != 0) {
        v->oom = 1;
        return 0;
    }
    if (memcmp(d, key, SF_KEY_LEN) != 0) {
        if (user)
            problem(v, "body %s (the %s variant of %.*s): its bytes do not match its SHA-256 key",
                    hex, sf_encoding_name(user->encoding), SHOW_PATH, user->path);
        else
            problem(v, "body %s: its bytes do not match its SHA-256 key", hex);
    }
    if (!user)
        problem(v, "body %s is not used by any path", hex);
    return 0;
}

/* Checks a NUL-padded text field of meta, n bytes at f: its text ends at
 * its first NUL (or fills it) and every byte after that is NUL; with
 * ascii, every byte of the text is below 0x80, else the text is UTF-8. */
static void check_meta_text(verify *v, const char *field, const uint8_t *f, size_t n, int ascii)
{
    size_t len = strnlen((const char *)f, n);
    for (size_t i = len; i < n; i++)
        if (f[i] != 0) {
            problem(v,
                    "meta: the %s field is not NUL-padded: byte %zu, after the NUL that ends "
                    "\"%.*s\", is 0x%02x where the format requires 0",
                    field, i, (int)len, (const char *)f, f[i]);
            return;
        }
    for (size_t i = 0; i < len;) {
        size_t l = ascii ? f[i] < 0x80 : sf_utf8_char(f + i, len - i, NULL);
        if (l == 0) {
            problem(v, "meta: the %s \"%.*s\" is not %s: byte %zu is 0x%02x", field, (int)len,
                    (const char *)f, ascii ? "ASCII" : "UTF-8", i, f[i]);
            return;
        }
        i += l;
    }
}

/* Checks the fields of the meta record that docs/format.md (§3) gives
 * rules and readers ignore: the minor version is one this servd-pack
 * knows, the record is as long as that minor's, the reserved bytes are 0,
 * packer is NUL-padded UTF-8 and profile NUL-padded ASCII. (created has no
 * rule; the counts, totals and ids are checked against the contents.) */
static void check_meta(verify *v, const sf_meta *m)
{
    sf_view rec;
    int rc = sf_special_record(v->r, "meta", &rec);
    if (rc == SF_ENOMEM) {
        v->oom = 1;
        return;
    }
    if (rc != 0 || rec.len < SF_META_RECORD_LEN) { /* sf_pack_open decoded it */
        problem(v, "meta: the record cannot be read again: %s", sf_strerror(rc ? rc : SF_ECORRUPT));
        return;
    }
    const uint8_t *b = (const uint8_t *)rec.ptr;
    /* A later minor may append fields and use reserved bytes: neither is
     * checked in a pack of one. Readers accept every minor (format.md §9)
     * and servd serves it: said, not failed, so that an older servd-pack
     * on a deploy host does not refuse a newer one's pack. */
    if (m->minor > SF_FORMAT_MINOR) {
        pk_warn("%s: meta: minor is %u, a format version this servd-pack does not know (it "
                "knows %d.0 to %d.%d): what that version added is not checked",
                v->site, m->minor, SF_FORMAT_MAJOR, SF_FORMAT_MAJOR, SF_FORMAT_MINOR);
    } else {
        if (rec.len != SF_META_RECORD_LEN)
            problem(v, "meta: the record is %zu bytes; format %d.%u's is exactly %d", rec.len,
                    SF_FORMAT_MAJOR, m->minor, SF_META_RECORD_LEN);
        const uint8_t *r = b + SF_META_RESERVED_OFF;
        if (r[0] || r[1] || r[2] || r[3])
            problem(v,
                    "meta: the reserved bytes 12-15 hold %02x %02x %02x %02x where the format "
                    "requires 0",
                    r[0], r[1], r[2], r[3]);
        /* id_404 from minor 1 on (checked with the 404 entry): reserved
         * before, and a non-zero one there is still checked as id_404 */
        static const uint8_t zero[SF_PACK_ID_LEN];
        if (m->minor == 0 && memcmp(b + SF_META_ID404_OFF, zero, sizeof zero) != 0)
            problem(v,
                    "meta: bytes 264-279, reserved in format %d.0 (id_404 from %d.1 on), are "
                    "not all 0 as the format requires",
                    SF_FORMAT_MAJOR, SF_FORMAT_MAJOR);
    }
    check_meta_text(v, "packer", b + SF_META_PACKER_OFF, SF_META_PACKER_LEN, 0);
    check_meta_text(v, "profile", b + SF_META_PROFILE_OFF, SF_META_PROFILE_LEN, 1);
}

int pk_cmd_verify(const char *site, int quiet)
{
    sf_pack *pack;
    verify v;
    memset(&v, 0, sizeof v);
    v.site = site;
    /* A damaged LMDB structure can crash a reader: pk_open_pack walks it in
     * a child first, so that verify reports the damage instead of dying. */
    int rc = pk_open_pack(site, &pack, &v.r);
    if (rc != 0) {
        /* FAILED is a verdict on the file; a file that could not be read or
         * checked (no such file, a fork refused, out of memory) has none */
        if (rc != SF_EIO && rc != SF_ENOMEM)
            pk_err("verify: %s: FAILED", site);
        return PK_EXIT_FAIL;
    }
    const sf_meta *m = sf_pack_meta(pack);
    v.minor = m->minor;
    int status = PK_EXIT_FAIL;
    char err[512] = "";
    check_meta(&v, m);
    rc = sf_foreach_path(v.r, check_path, &v, err, sizeof err);
    if (rc == SF_ENOMEM || v.oom)
        goto out_nomem;
    if (rc != 0) {
        problem(&v, "%s", err[0] ? err : sf_strerror(rc));
        goto out_report;
    }
    sf_entry e;
    rc = sf_lookup_special(v.r, "status:404", &e);
    if (rc == 0) {
        sf_view name = {"status:404", 10};
        check_unused_bits(&v, name, &e);
        for (unsigned i = 0; i < e.nvariants; i++)
            check_variant(&v, name, &e, &e.variants[i], 1);
        check_decodes(&v, name, &e);
    } else if (rc == SF_ENOMEM) {
        goto out_nomem;
    } else if (rc != SF_ENOTFOUND) {
        problem(&v, "status:404: %s", sf_strerror(rc));
    }
    if (v.oom)
        goto out_nomem;
    if (v.nrefs)
        qsort(v.refs, v.nrefs, sizeof *v.refs, cmp_ref);
    body_pass bp = {&v, 0, 0};
    rc = sf_foreach_body(v.r, check_body, &bp);
    if (rc == SF_ENOMEM || v.oom)
        goto out_nomem;
    if (rc != 0)
        problem(&v, "reading the bodies: %s", sf_strerror(rc));

    uint8_t id[SF_PACK_ID_LEN];
    rc = sf_pack_id_compute(v.r, id);
    if (rc == SF_ENOMEM)
        goto out_nomem;
    if (m->n_paths != v.paths)
        problem(&v, "meta says %llu paths, the pack has %llu", (unsigned long long)m->n_paths,
                (unsigned long long)v.paths);
    else if (v.paths == 0)
        problem(&v, "the pack holds no paths, which servd refuses");
    if (m->n_bodies != bp.bodies)
        problem(&v, "meta says %llu bodies, the pack has %llu", (unsigned long long)m->n_bodies,
                (unsigned long long)bp.bodies);
    if (m->identity_bytes != v.identity_bytes)
        problem(&v, "meta says %llu identity bytes, the entries add up to %llu",
                (unsigned long long)m->identity_bytes, (unsigned long long)v.identity_bytes);
    if (m->stored_bytes != bp.bytes)
        problem(&v, "meta says %llu stored bytes, the bodies add up to %llu",
                (unsigned long long)m->stored_bytes, (unsigned long long)bp.bytes);
    if (rc != 0)
        problem(&v, "cannot recompute the pack id: %s", sf_strerror(rc));
    else if (memcmp(m->pack_id, id, sizeof m->pack_id) != 0)
        problem(&v, "the pack id does not match the path records (pack id mismatch: entry "
                    "records were changed after packing)");
    if (sf_meta_has_id_404(m)) {
        rc = sf_pack_id_404(v.r, id);
        if (rc == SF_ENOMEM)
            goto out_nomem;
        if (rc != 0)
            problem(&v, "cannot recompute the 404 entry's id: %s", sf_strerror(rc));
        else if (memcmp(m->id_404, id, sizeof m->id_404) != 0)
            problem(&v, "the 404 entry does not match its id in meta (pack id mismatch: the "
                        "status:404 entry was changed after packing)");
    }
    if (v.problems == 0) {
        status = PK_EXIT_OK;
        if (!quiet) {
            /* the pack id, checked above: what servd will say it serves
             * (/healthz), for a pack whose manifest is not at hand */
            char hex[2 * SF_PACK_ID_LEN + 1];
            sf_pack_id_hex(m->pack_id, hex);
            pk_esc_fputs(site, stdout); /* a name may hold a newline or an escape */
            printf(": OK: pack %s, %llu paths, %llu bodies, %llu bytes re-hashed\n", hex,
                   (unsigned long long)v.paths, (unsigned long long)bp.bodies,
                   (unsigned long long)bp.bytes);
        }
    }
    goto out_report;
out_nomem:
    /* the rest was not checked: FAILED below only for problems found
     * before memory ran out */
    pk_err("verify: %s: out of memory; the pack was not fully checked", site);
out_report:
    if (v.problems > VERIFY_MAX_REPORTS)
        pk_err("verify: %s: ... %llu problems in all", site, (unsigned long long)v.problems);
    if (v.problems)
        pk_err("verify: %s: FAILED", site);
    for (size_t i = 0; i < v.nrefs; i++)
        free(v.refs[i].path);
    free(v.refs);
    pk_close_pack(pack, v.r);
    return status;
}
