/*
 * snapshot.c - opening and validating a pack, and the reference count that
 * keeps its map alive while any response still points into it.
 *
 * Validation happens once, at load (at startup on the main thread, at a
 * reload on libuv's thread pool, see server.c): the request path afterwards
 * trusts that every path decodes and every body a variant names exists
 * with its recorded length, so a corrupt pack is refused before it can
 * serve a single byte. The walk runs in a child (servd --check-pack,
 * sf/isolate.h), which decodes every entry record and reads and hashes
 * every body, so a damaged page crashes the child, not servd; the server
 * then checks the records again in-process.
 */
#include "snapshot.h"

#include "mapguard.h"

#include "sf/isolate.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "http.h"
#include "sf/path.h"

/* Refusals of a file written in place (cp, install, rsync --inplace) while
 * it was loaded, not verdicts on it: a write that began as LMDB first read
 * the map (its pages gone), or during the check (the file now shorter, or
 * another size or mtime). */
#define CHANGED_AT_OPEN  "the file changed while it was being opened (written in place?)"
#define CUT_IN_CHECK     "the file was cut short while it was checked (written in place?)"
#define CHANGED_IN_CHECK "the file changed while it was checked (written in place?)"
#define CHANGED_IN_WALK  "the file changed while it was validated (written in place?)"

/* Room for a key in a message, escaped (sf_escape): longer ones are cut. */
#define SV_SHOW_KEY 256

/* name, a key from the pack (untrusted bytes), as text for a message. */
static const char *shown(sf_view name, char buf[SV_SHOW_KEY])
{
    sf_escape(name.ptr, name.len, buf, SV_SHOW_KEY);
    return buf;
}

/* Snapshots open right now, over all threads. */
static atomic_long live_snapshots;

struct check_ctx {
    sf_reader *rd;
    uint64_t n;
    char *err;
    size_t errlen;
    const char *file;
    int cancel_fd; /* see sv_snapshot_load */
};

/* Paths walked between two looks at the load's cancel_fd: a poll(2) per
 * 4096 paths costs nothing, and a stop waits for at most that many. */
#define SV_CANCEL_EVERY 4096

/* Whether fd (-1: none) says to abandon the load: it is readable. */
static int cancelled(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return fd >= 0 && poll(&p, 1, 0) > 0;
}

/* Fields servd writes itself or that concern one connection: a stored
 * copy would frame a response wrongly or say two things (the names
 * servd-pack's rules refuse for the same reason, packer/fields.c, but for
 * those it renders once itself). */
static const char *const servd_fields[] = {
    "connection", "content-length", "content-range",
    "date",       "keep-alive",     "proxy-connection",
    "te",         "trailer",        "transfer-encoding",
    "upgrade",
};

/* Whether b[0, n) is header field lines, each "name: value" CRLF with a
 * token name and no CR, LF or NUL in the value, none of them one of
 * servd_fields, and a Content-Type only as the first line when
 * type_first (rep, whose first line a multipart 206 drops), else none. */
static int fields_ok(const char *b, size_t n, int type_first)
{
    const char *p = b, *end = b + n;
    for (int first = 1; p < end; first = 0) {
        const char *colon = memchr(p, ':', (size_t)(end - p));
        if (!colon || !sv_is_token(p, (size_t)(colon - p)))
            return 0;
        size_t nl = (size_t)(colon - p);
        for (size_t i = 0; i < sizeof servd_fields / sizeof servd_fields[0]; i++)
            if (sv_ieq(p, nl, servd_fields[i]))
                return 0;
        if (sv_ieq(p, nl, "content-type") != (type_first && first))
            return 0;
        const char *v = colon + 1;
        while (v < end && *v != '\r' && *v != '\n' && *v != '\0')
            v++;
        if (end - v < 2 || v[0] != '\r' || v[1] != '\n')
            return 0;
        p = v + 2;
    }
    return !type_first || n > 0;
}

/* Room for a status line and "Content-Length: " with 20 digits and CRLF. */
#define SV_BLOCK_HEAD 64

/* Whether a variant's header blocks are what servd writes unchanged and
 * builds its other answers from (docs/format.md §6): the 200 block starts
 * with its status line and the Content-Length of the body, the
 * representation headers (rep) follow at once and start with Content-Type
 * (a multipart 206 drops that line), the 304 block starts with its status
 * line, and every other line is a sound field line. A block that breaks
 * this would frame a response wrongly, or split it. */
static int blocks_ok(const sf_variant *v, int is404)
{
    static const char s200[] = "HTTP/1.1 200 OK\r\n", s404[] = "HTTP/1.1 404 Not Found\r\n",
                      s304[] = "HTTP/1.1 304 Not Modified\r\n";
    char head[SV_BLOCK_HEAD];
    int hl = snprintf(head, sizeof head, "%sContent-Length: %llu\r\n", is404 ? s404 : s200,
                      (unsigned long long)v->body_len);
    if (hl <= 0 || (size_t)hl >= sizeof head || (size_t)hl > v->h200.len ||
        memcmp(v->h200.ptr, head, (size_t)hl) != 0 || v->rep.ptr != v->h200.ptr + hl ||
        !fields_ok(v->rep.ptr, v->rep.len, 1))
        return 0;
    if (v->h304.len == 0)
        return is404;
    return v->h304.len >= sizeof s304 - 1 && memcmp(v->h304.ptr, s304, sizeof s304 - 1) == 0 &&
           fields_ok(v->h304.ptr + sizeof s304 - 1, v->h304.len - (sizeof s304 - 1), 0);
}

/* Checks one decoded entry: its shape, its header blocks and that each
 * variant's body is there with the right length. what names it in the
 * error ("path", "entry"). */
static int check_entry(struct check_ctx *c, const char *what, sf_view name, const sf_entry *e,
                       int is404)
{
    return sv_snapshot_check_entry(c->rd, e, is404, c->file, what, name, c->err, c->errlen);
}

int sv_snapshot_check_entry(sf_reader *rd, const sf_entry *e, int is404, const char *file,
                            const char *what, sf_view name, char *err, size_t errlen)
{
    char show[SV_SHOW_KEY];
    if (e->kind == SF_KIND_REDIRECT) {
        if (sf_path_check(e->target.ptr, e->target.len) != 0) {
            snprintf(err, errlen,
                     "%s: corrupt pack: %s %s redirects to something that is not a normalised "
                     "path",
                     file, what, shown(name, show));
            return SF_ECORRUPT;
        }
        return 0;
    }
    if (e->kind != SF_KIND_FILE || e->nvariants < 1 || e->nvariants > SF_ENC_COUNT ||
        e->variants[0].encoding != SF_ENC_IDENTITY) {
        snprintf(err, errlen, "%s: corrupt pack: %s %s has a malformed entry", file, what,
                 shown(name, show));
        return SF_ECORRUPT;
    }
    for (unsigned i = 0; i < e->nvariants; i++) {
        const sf_variant *v = &e->variants[i];
        sf_view body;
        if (!sf_encoding_name(v->encoding) || v->h200.len == 0 ||
            (!is404 && (v->h304.len == 0 || v->etag.len < 2))) {
            snprintf(err, errlen, "%s: corrupt pack: %s %s has a malformed %s variant", file, what,
                     shown(name, show),
                     sf_encoding_name(v->encoding) ? sf_encoding_name(v->encoding) : "unknown");
            return SF_ECORRUPT;
        }
        if (!blocks_ok(v, is404)) {
            snprintf(err, errlen,
                     "%s: corrupt pack: the %s header block of %s %s is not one servd can send",
                     file, sf_encoding_name(v->encoding), what, shown(name, show));
            return SF_ECORRUPT;
        }
        int rc = sf_body(rd, v, &body);
        if (rc != 0) {
            snprintf(err, errlen, "%s: corrupt pack: the %s body of %s %s is %s", file,
                     sf_encoding_name(v->encoding), what, shown(name, show),
                     rc == SF_ENOTFOUND  ? "missing"
                     : rc == SF_ECORRUPT ? "not of its recorded length"
                                         : "unreadable");
            return rc == SF_ENOTFOUND ? SF_ECORRUPT : rc;
        }
    }
    return 0;
}

static int check_path(void *arg, sf_view path, const sf_entry *e)
{
    struct check_ctx *c = arg;
    if (sf_path_check(path.ptr, path.len) != 0) {
        char show[SV_SHOW_KEY];
        snprintf(c->err, c->errlen, "%s: corrupt pack: key %s is not a normalised path", c->file,
                 shown(path, show));
        return SF_ECORRUPT;
    }
    if (++c->n % SV_CANCEL_EVERY == 0 && cancelled(c->cancel_fd)) {
        snprintf(c->err, c->errlen, "%s: the load of the pack was abandoned; not a verdict",
                 c->file);
        return SF_ECANCELED;
    }
    return check_entry(c, "path", path, e, 0);
}

/* Walks the whole pack with reader rd (see sv_snapshot_open). */
static int validate(const char *file, sf_pack *pack, sf_reader *rd, int cancel_fd,
                    uint64_t *n_paths, char *err, size_t errlen)
{
    struct check_ctx c = {rd, 0, err, errlen, file, cancel_fd};
    char why[256] = "";
    int rc = sf_foreach_path(rd, check_path, &c, why, sizeof why);
    if (rc != 0) {
        /* check_path already wrote err; otherwise the walk itself failed. */
        if (why[0])
            snprintf(err, errlen, "%s: corrupt pack: %s", file, why);
        else if (!err[0])
            snprintf(err, errlen, "%s: cannot walk the pack: %s", file, sf_strerror(rc));
        return rc;
    }
    const sf_meta *m = sf_pack_meta(pack);
    if (c.n != m->n_paths) {
        snprintf(err, errlen, "%s: corrupt pack: %llu paths stored but the meta record says %llu",
                 file, (unsigned long long)c.n, (unsigned long long)m->n_paths);
        return SF_ECORRUPT;
    }
    if (c.n == 0) {
        snprintf(err, errlen, "%s: the pack holds no paths", file);
        return SF_ECORRUPT;
    }
    sf_entry e404;
    rc = sf_lookup_special(rd, "status:404", &e404);
    if (rc == 0) {
        sf_view name = {"status:404", 10};
        rc = check_entry(&c, "entry", name, &e404, 1);
        if (rc != 0)
            return rc;
    } else if (rc != SF_ENOTFOUND) {
        snprintf(err, errlen, "%s: corrupt pack: the 404 entry cannot be read: %s", file,
                 sf_strerror(rc));
        return rc;
    }
    *n_paths = c.n;
    return 0;
}

int sv_snapshot_head_hash(int fd, uint64_t *hash)
{
    /* pread of a short file leaves the rest zero */
    unsigned char b[2][SV_SNAPSHOT_HEAD] = {{0}};
    int rc = pread(fd, b[0], sizeof b[0], 0) < 0 ? -1 : 0;
    size_t psize = sf_lmdb_page_size(b[0], sizeof b[0]);
    if (rc == 0 && pread(fd, b[1], sizeof b[1], (off_t)(psize ? psize : sizeof b[0])) < 0)
        rc = -1;
    const unsigned char *p = (const unsigned char *)b;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < sizeof b; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    *hash = h;
    return rc;
}

static sv_file_id id_of(const struct stat *st)
{
    return (sv_file_id){(uint64_t)st->st_dev, (uint64_t)st->st_ino};
}

static sv_file_stamp stamp_of(const struct stat *st)
{
    return (sv_file_stamp){(int64_t)st->st_size,
                           (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec};
}

/* What stat or fstat returned (rc) put into id and stamp. */
static int state_from(int rc, const struct stat *st, sv_file_id *id, sv_file_stamp *stamp)
{
    if (rc != 0) {
        *id = (sv_file_id){0, 0};
        return -errno;
    }
    *id = id_of(st);
    *stamp = stamp_of(st);
    return 0;
}

int sv_file_state_get(const char *path, sv_file_id *id, sv_file_stamp *stamp)
{
    struct stat st;
    return state_from(stat(path, &st), &st, id, stamp);
}

int sv_file_state_of(int fd, sv_file_id *id, sv_file_stamp *stamp)
{
    struct stat st;
    return state_from(fstat(fd, &st), &st, id, stamp);
}

int sv_file_id_get(const char *path, sv_file_id *id)
{
    sv_file_stamp unused;
    return sv_file_state_get(path, id, &unused);
}

/* This program, for spawning the pack check: @return the path to run,
 * /proc/self/fd/N of a descriptor on it, so that the check is always run by
 * the program serving, even after a package upgrade renamed another over
 * its path; *name its path, resolved from /proc/self/exe once. The
 * descriptor is opened through /proc/self/exe, never through the path,
 * which may name another program by now, so an open that failed (EMFILE)
 * is tried again at the next load; until then the check runs
 * /proc/self/exe itself, which the spawned child resolves to the same
 * program. Under valgrind the link names valgrind itself, but readlink and
 * open of it are answered with servd's (and the open's descriptor is a
 * dup, without O_CLOEXEC: hence the fcntl); an exec of it is not, which is
 * why the descriptor is wanted. Only the thread of a load calls it, one at
 * a time. */
static const char *self_exe(const char **name)
{
    static char exe[4096], run[32];
    if (!exe[0]) {
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (n <= 0 || (size_t)n >= sizeof exe - 1)
            snprintf(exe, sizeof exe, "/proc/self/exe");
        else
            exe[n] = '\0';
    }
    if (!run[0]) {
        int fd = open("/proc/self/exe", O_PATH | O_CLOEXEC);
        if (fd >= 0) {
            fcntl(fd, F_SETFD, FD_CLOEXEC);
            snprintf(run, sizeof run, "/proc/self/fd/%d", fd);
        }
    }
    *name = exe;
    return run[0] ? run : "/proc/self/exe";
}

int sv_snapshot_open_file(const char *path, int *fdp, sv_file_seen *seen, char *err, size_t errlen)
{
    sv_file_id file;
    int rc;

    if (errlen == 0)
        return SF_EINVAL;
    err[0] = '\0';
    /* Open the path once: the file checked, the file opened and the file
     * noted as seen must be the same even when a deploy renames another
     * pack over the path meanwhile. */
    /* O_NONBLOCK: a FIFO renamed over the path must be refused, not wait
     * (with the main thread, and so every signal) for a writer. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        rc = -errno;
        if (fd >= 0)
            close(fd);
        file.dev = file.ino = 0;
        /* a file that exists but cannot be opened (EACCES) is noted as
         * itself, so that the watch does not retry it every poll; one that
         * servd had no descriptor or memory for is worth trying again, as
         * is one a failing disk kept from it (EIO says nothing of the file,
         * nor does a failed read of its first pages, below) */
        if (sv_file_state_get(path, &seen->id, &seen->stamp) != 0)
            *seen = (sv_file_seen){file, {0, 0}, 0};
        seen->retry = rc == -EMFILE || rc == -ENFILE || rc == -ENOMEM || rc == -EIO;
        snprintf(err, errlen, "%s: %s", path, strerror(-rc));
        return SF_EIO;
    }
    file = id_of(&st);
    *seen = (sv_file_seen){file, stamp_of(&st), 0};
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        /* a web root given for its pack: say how a pack is made */
        snprintf(err, errlen, "%s: not a regular file (a %s)%s", path,
                 S_ISDIR(st.st_mode)    ? "directory"
                 : S_ISFIFO(st.st_mode) ? "FIFO"
                 : S_ISSOCK(st.st_mode) ? "socket"
                 : S_ISCHR(st.st_mode)  ? "character device"
                                        : "block device",
                 S_ISDIR(st.st_mode) ? "; servd serves a pack: make one with servd-pack build "
                                       "DIR -o site.lmdb"
                                     : "");
        return SF_EIO;
    }
    *fdp = fd;
    return 0;
}

/* The absolute path in, its "." and empty segments dropped and each ".."
 * taking the segment before it away (lexically: a ".." after a symlinked
 * directory is a path through a link, which the comparison below then
 * reports unless it leads back to the same file), into out (PATH_MAX bytes;
 * never longer than in, or "/" for an empty in). Not sf_path_from_target:
 * a file name is no request target (no %-decoding, any bytes but '/'). */
static void lexical_clean(const char *in, char *out)
{
    size_t w = 0;
    for (const char *p = in; *p;) {
        while (*p == '/')
            p++;
        const char *s = p;
        while (*p && *p != '/')
            p++;
        size_t len = (size_t)(p - s);
        if (len == 0 || (len == 1 && s[0] == '.'))
            continue;
        if (len == 2 && s[0] == '.' && s[1] == '.') {
            while (w > 0 && out[--w] != '/')
                ;
            continue;
        }
        out[w++] = '/';
        memcpy(out + w, s, len);
        w += len;
    }
    if (w == 0)
        out[w++] = '/';
    out[w] = '\0';
}

/* The file fd holds, into target, when path leads to it through a symlink
 * (a release flip: site.lmdb -> releases/v7.lmdb, or current ->
 * releases/v7 above it), else "": the descriptor's own link, not the
 * path's, which may have been flipped again since the open, whenever it is
 * not the path itself made absolute and cleaned ("./site.lmdb" and
 * "dir//site.lmdb" name the file itself). Not for a descriptor's path (the
 * built-in site's memfd). */
static void link_target(const char *path, int fd, char *target, size_t cap)
{
    char link[32], abs[PATH_MAX], clean[PATH_MAX];
    ssize_t n = -1;
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    if (strncmp(path, "/proc/", 6) != 0)
        n = readlink(link, target, cap - 1);
    target[n > 0 ? (size_t)n : 0] = '\0';
    if (path[0] == '/') {
        snprintf(abs, sizeof abs, "%s", path);
    } else if (getcwd(abs, sizeof abs)) {
        size_t l = strlen(abs);
        if ((size_t)snprintf(abs + l, sizeof abs - l, "%s%s", l > 1 ? "/" : "", path) >=
            sizeof abs - l)
            abs[0] = '\0';
    } else {
        abs[0] = '\0';
    }
    lexical_clean(abs, clean);
    if (abs[0] && strcmp(target, clean) == 0)
        target[0] = '\0';
}

/* Whether a refusal rc judged the file's bytes, rather than running out of
 * something, being abandoned or failing to read it (SF_EIO). */
static int verdict(int rc)
{
    return rc != SF_EIO && rc != SF_ENOMEM && rc != SF_ECANCELED;
}

/* The stamp of the file open at fd now, into *now. @return 1, or 0 when
 * there is none to compare (no descriptor, or fstat failed). */
static int stamp_now(int fd, const sv_file_seen *seen, sv_file_stamp *now)
{
    sv_file_id id;
    *now = seen->stamp;
    return fd >= 0 && sv_file_state_of(fd, &id, now) == 0;
}

/* Whether the file open at fd was written since it was seen. */
static int written_since(int fd, const sv_file_seen *seen)
{
    sv_file_stamp now;
    return stamp_now(fd, seen, &now) && !sv_file_stamp_eq(&seen->stamp, &now);
}

/* Whether the file open at fd now has another size than when it was seen,
 * or other first bytes than s's head, read then. @return 1 or 0, or -1
 * with errno set when its first bytes could not be read (a failing disk
 * is no rewrite). */
static int rewritten(int fd, const sv_file_seen *seen, const sv_snapshot *s)
{
    sv_file_stamp now;
    if (!stamp_now(fd, seen, &now))
        return 0;
    if (now.size != seen->stamp.size)
        return 1;
    int same = sv_snapshot_head_same(s, fd);
    return same < 0 ? -1 : !same;
}

int sv_snapshot_load(int fd, const char *path, int nreaders, int cancel_fd, sv_snapshot **out,
                     sv_file_seen *seen, char *err, size_t errlen)
{
    sf_pack *pack;
    int rc;
    /* A refusal names the release a symlinked path led to: which one of a
     * deploy's was bad. */
    char target[PATH_MAX], shown[PATH_MAX + 64];
    link_target(path, fd, target, sizeof target);
    if (target[0] &&
        (size_t)snprintf(shown, sizeof shown, "%s (-> %s)", path, target) < sizeof shown)
        path = shown;

    if (errlen == 0 || nreaders < 1) {
        close(fd);
        return SF_EINVAL;
    }
    err[0] = '\0';
    /* Every pack mapped is guarded against writes in place (mapguard.h).
     * With no slot left, old packs are still held by connections sending
     * from them: the pack served goes on, and a retry loads this one once
     * one is released. An unguarded map would be one a cp over the file
     * could crash servd through. */
    if (!sv_mapguard_room()) {
        close(fd);
        snprintf(err, errlen,
                 "%s: not loaded: %ld packs are mapped, the one served and old ones still "
                 "held by connections sending from them (slow readers; servd_packs_mapped), "
                 "and servd guards no more",
                 path, sv_snapshot_live());
        seen->retry = 1; /* no verdict on the file */
        return SF_ENOMEM;
    }
    char fdpath[32];
    if ((rc = sf_fd_path(fd, path, fdpath, sizeof fdpath, err, errlen)) != 0) {
        close(fd);
        seen->retry = 1; /* says nothing about the file */
        return rc;
    }
    /* LMDB trusts its page structure; a damaged pack must not crash a
     * running server. Walk it once in a child first (sf/isolate.h). */
    /* The check runs as a fresh program (servd --check-pack), not a bare
     * fork: a fork of this multi-threaded process could inherit a lock that
     * another thread holds. The descriptor is inherited for the spawn only.
     * The child is told servd's pid, to tell whether servd ended before it
     * asked to end with it (main.c). */
    /* The meta pages as the file is seen, before the check: a rewrite from
     * then on shows in them (rewritten()). */
    uint64_t head;
    if (sv_snapshot_head_hash(fd, &head) != 0) {
        /* not "changed while it was validated" once the walk reads them */
        snprintf(err, errlen, "%s: cannot read it: %s", path, strerror(errno));
        close(fd);
        seen->retry = 1; /* no verdict on the file */
        return SF_EIO;
    }
    char pid[24];
    snprintf(pid, sizeof pid, "%ld", (long)getpid());
    const char *name, *prog = self_exe(&name);
    char *argv[] = {(char *)name, "--check-pack", fdpath, pid, NULL};
    fcntl(fd, F_SETFD, 0);
    int timeout_ms = sf_check_timeout_ms((uint64_t)seen->stamp.size);
    rc = sf_check_spawn(prog, argv, path, timeout_ms, cancel_fd, err, errlen);
    if (rc == SF_EIO && strcmp(prog, "/proc/self/exe") != 0) /* a start that failed */
        rc = sf_check_spawn("/proc/self/exe", argv, path, timeout_ms, cancel_fd, err, errlen);
    sv_file_stamp now;
    if (rc == SF_ECORRUPT && stamp_now(fd, seen, &now) && !sv_file_stamp_eq(&seen->stamp, &now)) {
        /* The check's verdict (a crash, SIGBUS, or what it read) is of a
         * file written meanwhile (a cp in place cuts it, then writes it
         * again, often back to its size by now): no verdict on it. */
        snprintf(err, errlen, "%s: %s", path,
                 now.size < seen->stamp.size ? CUT_IN_CHECK : CHANGED_IN_CHECK);
        rc = SF_EIO;
    }
    fcntl(fd, F_SETFD, FD_CLOEXEC);
    int opened = rc == 0;
    if (opened) {
        sv_mapguard_open_begin(); /* LMDB reads its map before the range is known */
        rc = sf_pack_open_checked(fdpath, sv_mapguard_open_cut, &pack, err, errlen);
    }
    if (rc != 0) {
        /* whatever LMDB made of the zeros, or what the open read of a
         * file written since its check passed */
        if (sv_mapguard_open_end() || (opened && verdict(rc) && written_since(fd, seen))) {
            snprintf(err, errlen, "%s: %s", fdpath, CHANGED_AT_OPEN);
            rc = SF_EIO;
        }
        close(fd);
        sf_name_file(err, errlen, fdpath, path);
        /* No verdict on the file: the check could not start, or the file
         * was written while it was checked (SF_EIO), or it ran out of
         * something or was stopped (SF_ENOMEM) or abandoned
         * (SF_ECANCELED), or it passed and servd could not then open the
         * pack (SF_EIO, SF_ENOMEM from the system). Only a start that
         * failed tries /proc/self/exe. */
        seen->retry = !verdict(rc);
        return rc;
    }
    close(fd); /* LMDB holds its own descriptor */

    sv_snapshot *s = calloc(1, sizeof *s + (size_t)nreaders * sizeof s->readers[0]);
    if (!s) {
        sv_mapguard_open_end();
        snprintf(err, errlen, "%s: out of memory", path);
        seen->retry = 1; /* no verdict, as above */
        rc = SF_ENOMEM;
        goto out_close_pack;
    }
    s->pack = pack;
    s->file = seen->id;
    s->stamp = seen->stamp;
    s->head_hash = head;
    memcpy(s->target, target, sizeof target);
    /* Guarded before the validation walk reads every page. */
    int map_fd = -1;
    const char *map;
    s->guard = sf_pack_file(pack, &map_fd, &map) == 0
                   ? sv_mapguard_add(map, (size_t)sf_pack_size(pack))
                   : -1;
    s->cut = sv_mapguard_flag(s->guard);
    if (sv_mapguard_open_end()) { /* LMDB's first reads found zeros, and took them */
        snprintf(err, errlen, "%s: %s", path, CHANGED_AT_OPEN);
        rc = SF_EIO; /* no verdict on the file: looked at again */
        goto out_end_readers;
    }
    for (int i = 0; i < nreaders && rc == 0; i++) {
        if ((rc = sf_reader_begin(pack, &s->readers[i])) != 0)
            snprintf(err, errlen, "%s: cannot start a reader: %s", path, sf_strerror(rc));
        else
            s->nreaders = i + 1;
    }
    if (rc == 0)
        rc = validate(path, pack, s->readers[0], cancel_fd, &s->n_paths, err, errlen);
    /* What the readers and the walk read of a file cut or written meanwhile
     * (pages past a cut read as zeros) is no verdict on it, as the check's
     * is not; nor is a pass of a file rewritten at its size (nothing
     * faulted), which the check never saw whole: other first bytes, as
     * LMDB's meta pages are for any other pack. A touch alone (an mtime)
     * changes no byte, and does not refuse a pack that passed. */
    int changed = !verdict(rc)          ? 0
                  : atomic_load(s->cut) ? 1
                  : rc != 0             ? written_since(map_fd, seen)
                                        : rewritten(map_fd, seen, s);
    if (changed < 0) { /* a read that failed: no verdict either, and said as such */
        snprintf(err, errlen, "%s: cannot read it: %s", path, strerror(errno));
        rc = SF_EIO;
    } else if (changed) {
        snprintf(err, errlen, "%s: %s", path, CHANGED_IN_WALK);
        rc = SF_EIO;
    }
    if (rc != 0)
        goto out_end_readers;

    sf_pack_id_hex(sf_pack_meta(pack)->pack_id, s->id_hex);
    s->loaded_at = (int64_t)time(NULL);
    atomic_init(&s->refs, 1);
    atomic_fetch_add(&live_snapshots, 1);
    sv_mapguard_serve(s->guard);
    *out = s;
    return 0;

out_end_readers:
    /* out of memory for a reader or the walk, or abandoned: no verdict, as above */
    seen->retry = !verdict(rc);
    for (int i = 0; i < s->nreaders; i++)
        sf_reader_end(s->readers[i]);
    sv_mapguard_remove(s->guard);
    free(s);
out_close_pack:
    sf_pack_close(pack);
    return rc;
}

int sv_snapshot_open(const char *path, int nreaders, sv_snapshot **out, sv_file_seen *seen,
                     char *err, size_t errlen)
{
    sv_file_seen unused;
    int fd;
    if (!seen)
        seen = &unused;
    int rc = sv_snapshot_open_file(path, &fd, seen, err, errlen);
    return rc != 0 ? rc : sv_snapshot_load(fd, path, nreaders, -1, out, seen, err, errlen);
}

void sv_snapshot_unref(sv_snapshot *s)
{
    /* acq_rel: every use of the map by the thread dropping a reference
     * happens before the thread that drops the last one unmaps it. */
    if (atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) != 1)
        return;
    for (int i = 0; i < s->nreaders; i++)
        sf_reader_end(s->readers[i]);
    sv_mapguard_remove(s->guard); /* no read of the map from here on */
    sf_pack_close(s->pack);
    free(s);
    atomic_fetch_sub(&live_snapshots, 1);
}

int sv_snapshot_head_same(const sv_snapshot *s, int fd)
{
    uint64_t now;
    if (sv_snapshot_head_hash(fd, &now) != 0)
        return -1;
    return now == s->head_hash;
}

long sv_snapshot_live(void)
{
    return atomic_load(&live_snapshots);
}
