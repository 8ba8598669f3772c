/*
 * sf/isolate.h - reading an untrusted pack in a child process first.
 *
 * LMDB trusts the structure of its file: a damaged page flag or node can
 * make it dereference NULL, fail an assertion or read past the map (see
 * docs/security.md). The fields it would divide or map with are checked by
 * sf_pack_open(); for the rest, a program that must survive any damage runs
 * its full validation walk once in a forked child. If the child dies by a
 * signal, hangs, or reports an error, the pack is refused and the parent -
 * a running server - has touched nothing. Once the child has walked every
 * page without harm, the parent's own walk over the same immutable bytes
 * follows the same paths.
 */
#ifndef SF_ISOLATE_H
#define SF_ISOLATE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A check run in the child: 0 when the pack is good, else a negative SF_E*
 * code with a sentence in err. */
typedef int (*sf_check_fn)(void *arg, const char *path, char *err, size_t errlen);

/* Runs check(arg, path, ...) in a forked child and waits at most
 * timeout_ms for it. The child only reads: it must not touch state the
 * parent shares (sockets, files being written). It dies with the thread
 * that forked it (PR_SET_PDEATHSIG): a caller killed meanwhile leaves no
 * orphan reading the pack.
 * @return 0 when the check passed; the check's own code and message when it
 *         failed; SF_ECORRUPT with "PATH: corrupt pack: reading it crashed
 *         (...)" when the child died by a signal; SF_ETIMEDOUT ("corrupt
 *         pack: reading it did not finish ...") when it did not finish in
 *         time, a refusal too, but one that says nothing of which bytes;
 *         SF_EIO when the child could not be started, or when it crashed
 *         or refused the pack and the file at path is now shorter
 *         than when the check began ("PATH: the file was cut short while
 *         it was checked (written in place?)") or of another size or
 *         modification time ("PATH: the file changed while it was checked
 *         (written in place?)"): no verdict on the pack; SF_ENOMEM when it
 *         ran but gave no verdict on the pack, worth trying again: it was
 *         stopped by a signal sent from outside (SIGKILL - the OOM
 *         killer's among them -, SIGTERM, SIGINT, SIGHUP, SIGQUIT). */
int sf_check_isolated(sf_check_fn check, void *arg, const char *path, int timeout_ms, char *err,
                      size_t errlen);

/* Like sf_check_isolated, but the child is a fresh program: prog is
 * executed (posix_spawn) with argv (argv[0] its name, in messages too:
 * prog may be a /proc/self/fd/N path) and must print SF_CHECK_OK on its
 * standard output
 * and exit 0 when the pack is good, or print one line (the reason) and exit
 * non-zero. An exit 0 without SF_CHECK_OK is a crash (a runtime that ends a
 * crashed process with status 0 must not pass a pack). For a
 * multi-threaded caller, where a forked child could inherit a lock held by
 * another thread (an allocator's, for one), this is the safe form. path is
 * only used in messages. The child starts with no signal blocked.
 * cancel_fd: -1, or a descriptor that becomes readable when the caller
 * wants the check abandoned (servd stopping while it loads a pack): the
 * child is killed at once and SF_ECANCELED returned, with "PATH: the check
 * of the pack was abandoned; not a verdict". Otherwise the same return
 * values as sf_check_isolated, but for a file written meanwhile: path is
 * not looked at again, so a crash or refusal is SF_ECORRUPT whatever
 * happened to the file; the caller, which holds the file open, tells
 * (servd's snapshot.c). */
int sf_check_spawn(const char *prog, char *const argv[], const char *path, int timeout_ms,
                   int cancel_fd, char *err, size_t errlen);

/* What an sf_check_spawn child prints (one line) when the pack is good. */
#define SF_CHECK_OK "ok"

/* The exit status of an sf_check_spawn child that could not judge the pack
 * (it ran out of memory or descriptors: SF_ENOMEM, SF_EIO): reported as
 * SF_ENOMEM, no verdict, where any other failure is SF_ECORRUPT. */
#define SF_CHECK_EXIT_NO_VERDICT 3

/* A check for sf_check_isolated (arg NULL): first brings the pack into the
 * page cache as large folios when it fits in memory (see preload() in
 * isolate.c), then opens it and walks every structure a reader will ever
 * follow - every path record (decoded), the body of every variant of every
 * path and of the 404 entry (found, with its recorded length) - then
 * recomputes the pack id over the path records as stored, which must equal
 * meta's (a record changed after packing, such as a flipped byte in a
 * pre-rendered header block, is refused with "pack id mismatch"), and
 * meta's id_404 over the status:404 entry where the pack has one to check
 * (sf_meta_has_id_404), and checks that every body record's bytes hash to
 * its key (SHA-256: a damaged body is refused, not served).
 * @return 0, or an SF_E* code with "PATH: ..." in err. */
int sf_pack_check_structure(void *arg, const char *path, char *err, size_t errlen);

/* arg for sf_pack_check_structure: walk everything but hash nothing - not
 * the bodies, not the pack id (for a caller that hashes both itself and
 * names what it finds, like servd-pack verify). */
#define SF_CHECK_NO_HASH ((void *)1)

/* For test harnesses only: when set, called first thing in the child (a
 * fuzzer resets its crash handlers there, so that the child's expected
 * crashes are not reported as the fuzzer's own). */
extern void (*sf__isolate_child_hook)(void);

/* A file checked and then opened must be the same file even when a deploy
 * renames another over its path in between: open the path once and give
 * both "/proc/self/fd/N". Their messages then begin with that name; this
 * puts path in its place (err unchanged when it begins otherwise). */
void sf_name_file(char *err, size_t errlen, const char *fdpath, const char *path);

/* Writes "/proc/self/fd/N" for fd into out (32 bytes are enough) and checks
 * that it leads to fd's file: without /proc mounted (a bare chroot or
 * container) it does not, and every later open by that name would say "No
 * such file or directory" about a file that is there.
 * @return 0, or SF_EIO with "PATH: cannot reach ... (is /proc mounted?)", or
 * with "PATH: " and the error of an fstat of fd, or of a stat through /proc
 * (EIO), that failed. */
int sf_fd_path(int fd, const char *path, char *out, size_t outlen, char *err, size_t errlen);

/* How long a structure walk in a child may take before the pack is refused:
 * SF_CHECK_TIMEOUT_MS, plus a second for every SF_CHECK_RATE bytes of the
 * file. The walk reads and hashes the whole pack, so a fixed limit refused
 * a large pack on a slow disk as corrupt (a 7.5 GB pack read cold at
 * 125 MB/s takes the whole minute); the rate is about a fifteenth of such a
 * disk's. A check that loops (a damaged page) is still stopped, in a time
 * that grows with the file as an honest check's does. */
#define SF_CHECK_TIMEOUT_MS 60000
#define SF_CHECK_RATE       (8u << 20)

/* The limit above for a pack of the given size, in ms (at most INT_MAX). */
int sf_check_timeout_ms(uint64_t bytes);

#ifdef __cplusplus
}
#endif
#endif
