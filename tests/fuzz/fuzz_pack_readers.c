/*
 * fuzz_pack_readers - random bytes as a whole pack file, read by every
 * command of servd-pack that reads one.
 *
 * fuzz_pack checks the LMDB walk that stands between a damaged file and
 * liblmdb. This target checks what comes after it: each command that opens
 * a pack (ls and ls --json, verify, diff of the pack against itself, cat of
 * its paths, and the --base reader a build uses) walks the file in a child
 * first (pk_pack_open_checked) and then reads it in this process: its
 * records, its header blocks (verify re-renders them, diff fingerprints
 * their lines, cat prints them), its bodies (re-hashed, decompressed).
 * Whatever the bytes:
 *   - no command crashes, reads outside what it was given (ASan), or
 *     leaks; each returns an exit status servd-pack documents (0, 1, 2);
 *   - a pack that verify passes is one the other readers read: ls, diff of
 *     it against itself and cat of each path (identity, with headers)
 *     succeed, and --base opens it.
 * The seeds are fuzz_pack's (real small packs); both targets skip the body
 * hashes in the structure walk, as servd-pack does, so that mutated records
 * and blocks reach the readers. Run with -close_fd_mask=3: the commands
 * print listings and refusals, and libFuzzer keeps its own reports.
 *
 * Every command walks the file in a child, a dozen forks of a process
 * under ASan for one input: the verdict for one input's bytes is the same
 * each time, so the first is kept (__wrap_sf_check_isolated) and the
 * readers, which this target is for, get most of the time.
 */
#include "base.h"
#include "commands.h"
#include "compress.h"
#include "fuzz_child.h"
#include "sf/isolate.h"
#include "sf/path.h"
#include "sf/store.h"

#include <sanitizer/common_interface_defs.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Paths cat is asked for, at most: a seed has a handful. */
#define FUZZ_MAX_CATS 8

static const char *path; /* the input's memory file */

/* The child's verdict on this input: every path the commands give the check
 * ("/proc/self/fd/N", one N per open) leads to the same memory file. The
 * message is kept without its leading path, which each call puts back. */
static struct {
    int known;
    sf_check_fn check;
    void *arg;
    int rc;
    char why[1024];
} verdict;

int __real_sf_check_isolated(sf_check_fn check, void *arg, const char *file, int timeout_ms,
                             char *err, size_t errlen);

int __wrap_sf_check_isolated(sf_check_fn check, void *arg, const char *file, int timeout_ms,
                             char *err, size_t errlen)
{
    size_t flen = strlen(file);
    if (verdict.known && verdict.check == check && verdict.arg == arg) {
        if (verdict.rc != 0)
            snprintf(err, errlen, "%s%s", file, verdict.why);
        return verdict.rc;
    }
    int rc = __real_sf_check_isolated(check, arg, file, timeout_ms, err, errlen);
    /* no verdict (no child, or one stopped from outside): not kept */
    if (rc == SF_EIO || rc == SF_ENOMEM || (rc != 0 && strncmp(err, file, flen) != 0))
        return rc;
    verdict.known = 1;
    verdict.check = check;
    verdict.arg = arg;
    verdict.rc = rc;
    snprintf(verdict.why, sizeof verdict.why, "%s", rc != 0 ? err + flen : "");
    return rc;
}

/* Reports a failed check and aborts. Under -close_fd_mask=3 standard error
 * is /dev/null; the sanitizers' report descriptor is libFuzzer's own. */
static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void fail(const char *fmt, ...)
{
    char msg[1536];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    __sanitizer_report_error_summary(msg);
    abort();
}

static void expect_status(const char *what, int rc)
{
    if (rc != PK_EXIT_OK && rc != PK_EXIT_FAIL && rc != PK_EXIT_USAGE)
        fail("fuzz_pack_readers: %s returned %d, not an exit status", what, rc);
}

struct keys {
    char *v[FUZZ_MAX_CATS];
    size_t n;
};

/* A file's path as cat takes it: its URL. */
static int collect(void *arg, sf_view key, const sf_entry *e)
{
    struct keys *k = arg;
    char url[3 * SF_PATH_MAX + 1];
    if (k->n == FUZZ_MAX_CATS || e->kind != SF_KIND_FILE)
        return 0;
    size_t n = sf_path_to_url(key.ptr, key.len, url, sizeof url - 1);
    if (n < sizeof url) {
        url[n] = '\0';
        k->v[k->n++] = strdup(url);
    }
    return 0;
}

/* The URLs of the pack's files, for cat (at most FUZZ_MAX_CATS). */
static void keys_of(struct keys *k)
{
    sf_pack *p;
    sf_reader *r;
    char err[1024];
    k->n = 0;
    if (pk_pack_open_checked(path, &p, err, sizeof err) != 0)
        return;
    if (sf_reader_begin(p, &r) == 0) {
        (void)sf_foreach_path(r, collect, k, err, sizeof err);
        sf_reader_end(r);
    }
    sf_pack_close(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    path = fuzz_pack_file(data, size);
    verdict.known = 0;

    int verified = pk_cmd_verify(path, 1);
    expect_status("verify", verified);
    int ls = pk_cmd_ls(path, 0), ls_json = pk_cmd_ls(path, 1);
    int diff = pk_cmd_diff(path, path, 1, 0), diff_content = pk_cmd_diff(path, path, 0, 1);
    expect_status("ls", ls);
    expect_status("ls --json", ls_json);
    expect_status("diff --json", diff);
    expect_status("diff --content", diff_content);

    struct keys k;
    keys_of(&k);
    int cats = PK_EXIT_OK;
    for (size_t i = 0; i < k.n; i++) {
        if (!k.v[i])
            continue;
        for (int enc = 0; enc < SF_ENC_COUNT; enc++) {
            int rc = pk_cmd_cat(path, k.v[i], enc, 0);
            expect_status("cat", rc);
            if (enc == SF_ENC_IDENTITY && rc != PK_EXIT_OK)
                cats = rc;
        }
        expect_status("cat --headers", pk_cmd_cat(path, k.v[i], SF_ENC_IDENTITY, 1));
        free(k.v[i]);
    }

    char profile[PK_PROFILE_SIZE], err[1024];
    if (pk_profile(profile) != 0)
        abort(); /* out of memory in the fuzzer itself */
    pk_base *base = NULL;
    int usable = 0;
    int based = pk_base_open(path, profile, &base, &usable, err, sizeof err);
    if (based == 0)
        pk_base_close(base);

    if (verified == PK_EXIT_OK &&
        (ls != PK_EXIT_OK || ls_json != PK_EXIT_OK || diff != PK_EXIT_OK ||
         diff_content != PK_EXIT_OK || cats != PK_EXIT_OK || based != 0)) {
        fail("fuzz_pack_readers: verify passed a pack another reader refused: ls %d, "
             "ls --json %d, diff %d, diff --content %d, cat %d, --base %d (%s)",
             ls, ls_json, diff, diff_content, cats, based, based ? err : "");
    }
    return 0;
}
