/*
 * outputs.c - where servd-pack build may write: the files -o and
 * --manifest lead to, checked before minutes of compression (an existing
 * file must be a pack or a manifest, never inside the web root, its
 * directory writable).
 */
#include "build_int.h"
#include "msg.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Whether the process may replace the files of others in a sticky
 * directory (CAP_FOWNER in its effective set; root has it unless dropped). */
static int has_cap_fowner(void)
{
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
    struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];
    if (syscall(SYS_capget, &h, d) != 0)
        return 1; /* not known: rename(2) will say */
    return (d[CAP_TO_INDEX(CAP_FOWNER)].effective & CAP_TO_MASK(CAP_FOWNER)) != 0;
}

/* Fails early, before minutes of compression, if the output cannot be made:
 * its directory must exist and be writable, the file there one we may
 * replace, and the temporary name beside it ("<name>.tmp-<pid>") a legal
 * file name there. */
static int check_output_dir(build *b, const char *path)
{
    char d[PATH_MAX];
    snprintf(d, sizeof d, "%s", path);
    char *slash = strrchr(d, '/');
    const char *base = slash ? path + (slash - d) + 1 : path;
    if (!slash)
        snprintf(d, sizeof d, ".");
    else if (slash == d)
        d[1] = '\0';
    else
        *slash = '\0';
    struct stat st;
    if (stat(d, &st) != 0) {
        snprintf(b->err, sizeof b->err, "%.900s: output directory %.900s: %s", path, d,
                 strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        snprintf(b->err, sizeof b->err, "%.900s: %.900s is not a directory", path, d);
        return -1;
    }
    /* Removed, yet still the cwd: stat and access pass. (Only "." can name
     * a removed directory; some FUSE file systems report 0 links for live
     * ones.) */
    if (st.st_nlink == 0 && strcmp(d, ".") == 0) {
        snprintf(b->err, sizeof b->err, "%.900s: output directory %.900s was deleted", path, d);
        return -1;
    }
    if (access(d, W_OK) != 0) {
        snprintf(b->err, sizeof b->err, "%.900s: output directory %.900s: %s", path, d,
                 strerror(errno));
        return -1;
    }
    /* In a sticky directory (/tmp, a shared deploy directory), rename(2)
     * over a file fails with EPERM unless the file or the directory is
     * ours, or we have CAP_FOWNER: found out now, not at the last step. */
    struct stat f;
    if ((st.st_mode & S_ISVTX) && stat(path, &f) == 0 && f.st_uid != geteuid() &&
        st.st_uid != geteuid() && !has_cap_fowner()) {
        snprintf(
            b->err, sizeof b->err,
            "%.900s: belongs to another user (uid %lu) in a sticky directory, so it "
            "cannot be replaced (remove it as its owner or the directory's, or name another file)",
            path, (unsigned long)f.st_uid);
        return -1;
    }
    char tmp[PATH_MAX];
    if (sf_tmp_name(path, tmp, sizeof tmp) != 0) {
        snprintf(b->err, sizeof b->err,
                 "%.900s...: the path is too long: servd-pack writes PATH.tmp-PID first, and a "
                 "path holds at most %d bytes",
                 path, PATH_MAX - 1);
        return -1;
    }
    long name_max = pathconf(d, _PC_NAME_MAX);
    if (name_max <= 0)
        name_max = NAME_MAX;
    if (sf_tmp_name(base, tmp, sizeof tmp) != 0 || strlen(tmp) > (size_t)name_max) {
        snprintf(
            b->err, sizeof b->err,
            "%.600s: the file name is too long: servd-pack writes %.600s first and renames it, "
            "and names in %.600s hold at most %ld bytes",
            path, tmp, d, name_max);
        return -1;
    }
    return 0;
}

/* The descriptor a name stands for: /dev/stdout (1), /dev/stderr (2),
 * /dev/fd/N or /proc/self/fd/N, also through symbolic links to those;
 * else -1. Written through that descriptor, output goes where the shell
 * sent it (appended after ">>", into a pipe), never renamed over a file. */
static int descriptor_name(const char *path)
{
    char buf[PATH_MAX], link[PATH_MAX];
    snprintf(buf, sizeof buf, "%s", path);
    for (int hops = 0; hops < 8; hops++) {
        static const char *const dirs[] = {"/dev/fd/", "/proc/self/fd/", "/proc/thread-self/fd/"};
        if (strcmp(buf, "/dev/stdout") == 0)
            return STDOUT_FILENO;
        if (strcmp(buf, "/dev/stderr") == 0)
            return STDERR_FILENO;
        for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
            size_t n = strlen(dirs[i]);
            char *end;
            if (strncmp(buf, dirs[i], n) == 0 && buf[n] >= '0' && buf[n] <= '9') {
                long fd = strtol(buf + n, &end, 10);
                if (*end == '\0' && fd <= INT_MAX)
                    return (int)fd;
            }
        }
        ssize_t len = readlink(buf, link, sizeof link - 1);
        if (len <= 0 || link[0] != '/')
            return -1; /* not a link, or a relative one: not a descriptor's name */
        link[len] = '\0';
        memcpy(buf, link, (size_t)len + 1);
    }
    return -1;
}

/* Whether the existing regular file at path is one servd-pack may replace:
 * empty, or what a build writes there - a pack (sf_lmdb_magic, so that a
 * damaged pack is still replaced) or a manifest (a JSON object whose first
 * member is "servd_manifest"). Anything else was put there by someone
 * else: a mistyped -o must not destroy it. @return 0, or -1 with b->err. */
int pk__replaceable(build *b, const char *opt, const char *path, int manifest)
{
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0)
        return 0; /* a new file (resolve_output refused the other kinds) */
    unsigned char h[64];
    ssize_t n = -1;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd >= 0) {
        n = pread(fd, h, sizeof h, 0);
        int e = errno;
        close(fd);
        errno = e;
    }
    if (n < 0) {
        snprintf(b->err, sizeof b->err,
                 "%s: cannot read it to see whether it is a %s servd-pack may replace (%s)", path,
                 manifest ? "manifest" : "pack", strerror(errno));
        return -1;
    }
    if (!manifest && sf_lmdb_magic(h, (size_t)n))
        return 0;
    if (manifest) {
        ssize_t i = 0;
        while (i < n && (h[i] == ' ' || h[i] == '\t' || h[i] == '\r' || h[i] == '\n'))
            i++;
        if (i < n && h[i] == '{') {
            i++;
            while (i < n && (h[i] == ' ' || h[i] == '\t' || h[i] == '\r' || h[i] == '\n'))
                i++;
            static const char key[] = "\"servd_manifest\"";
            if (n - i >= (ssize_t)sizeof key - 1 && memcmp(h + i, key, sizeof key - 1) == 0)
                return 0;
        }
    }
    snprintf(b->err, sizeof b->err,
             "%s: exists and is not a %s; %s replaces only what servd-pack wrote "
             "(remove the file first, or name another)",
             path, manifest ? "servd-pack manifest" : "servd pack", opt);
    return -1;
}

/* Resolves the name given to -o or --manifest (opt) into out: through a
 * symbolic link to the file it leads to (the file a reader of that name
 * sees, as with a shell redirection), and refuses what servd-pack must not
 * replace. The pack needs a regular file; the manifest may also go to a
 * pipe, a terminal or a device (*stream is then set: it is written into,
 * never replaced). @return 0, or -1 with b->err. */
int pk__resolve_output(build *b, const char *opt, const char *path, char *out, size_t cap,
                       int *stream)
{
    struct stat lst, st;
    if (stream)
        *stream = 0;
    if ((size_t)snprintf(out, cap, "%s", path) >= cap) {
        snprintf(b->err, sizeof b->err, "%s %.256s...: the name is too long", opt, path);
        return -1;
    }
    int fd = descriptor_name(path);
    if (fd >= 0) {
        if (!stream) {
            snprintf(b->err, sizeof b->err,
                     "%s: names descriptor %d; %s must name a file, which servd-pack replaces "
                     "with the new pack",
                     path, fd, opt);
            return -1;
        }
        int fl = fcntl(fd, F_GETFL);
        if (fl < 0) {
            snprintf(b->err, sizeof b->err, "%s: descriptor %d is not open", path, fd);
            return -1;
        }
        /* a descriptor closed when servd-pack started is /dev/null read-only
         * (sf_std_fds_open): found out now, not once the pack is in place */
        if ((fl & O_ACCMODE) == O_RDONLY) {
            snprintf(b->err, sizeof b->err, "%s: descriptor %d is not open for writing", path, fd);
            return -1;
        }
        b->manifest_fd = fd;
        *stream = 1;
        return 0;
    }
    if (lstat(path, &lst) != 0)
        return check_output_dir(b, out); /* a new file */
    if (stat(path, &st) != 0) {
        if (S_ISLNK(lst.st_mode))
            snprintf(b->err, sizeof b->err,
                     "%s: a symbolic link to a file that cannot be reached (%s); remove the "
                     "link or name the file itself",
                     path, strerror(errno));
        else /* an I/O error between the two looks */
            snprintf(b->err, sizeof b->err, "%s: %s", path, strerror(errno));
        return -1;
    }
    if (S_ISDIR(st.st_mode)) {
        snprintf(b->err, sizeof b->err, "%s: is a directory", path);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        if (stream && !S_ISSOCK(st.st_mode)) { /* a socket file cannot be opened */
            *stream = 1;
            return 0;
        }
        if (stream)
            snprintf(b->err, sizeof b->err,
                     "%s: is a socket; --manifest must name a file, a pipe, a terminal or a device",
                     path);
        else
            snprintf(b->err, sizeof b->err,
                     "%s: is %s; %s must name a regular file, which servd-pack replaces with the "
                     "new pack",
                     path, pk_kind_name(st.st_mode), opt);
        return -1;
    }
    if (S_ISLNK(lst.st_mode) && !realpath(path, out)) {
        snprintf(b->err, sizeof b->err, "%s: %s", path, strerror(errno));
        return -1;
    }
    return check_output_dir(b, out);
}

/* Whether a and b are one file: the same inode (links of any kind), or the
 * same name when one does not exist yet. */
int pk__same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    if (stat(a, &sa) == 0 && stat(b, &sb) == 0)
        return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    return pk_same_file_name(a, b);
}

/* Whether descriptor fd is open on the file at path. */
int pk__fd_is_file(int fd, const char *path)
{
    struct stat sf, sp;
    return fstat(fd, &sf) == 0 && stat(path, &sp) == 0 && sf.st_dev == sp.st_dev &&
           sf.st_ino == sp.st_ino;
}

static int canonical_name(const char *path, char *out, size_t cap);

/* An output inside the root that the walk skips (an exclude rule matches
 * it) still has temporary names the rule may not match: a killed build's
 * "<key>.tmp-<pid>", and a manifest's "<key>.old-<pid>" (warn_leftovers).
 * The walk found such a file as one of the site's, to be served as a URL:
 * refused, as the output itself would be. */
static int check_no_leftover_packed(build *b, const char *opt, const char *path, const char *key)
{
    size_t kl = strlen(key);
    for (size_t i = 0; i < b->site.n; i++) {
        const pk_file *f = &b->site.files[i];
        size_t fl = 0;
        if ((sf_name_pid(f->key, ".tmp-", &fl) > 0 || sf_name_pid(f->key, ".old-", &fl) > 0) &&
            fl == kl && memcmp(f->key, key, kl) == 0) {
            snprintf(b->err, sizeof b->err,
                     "%s %s: %s, a temporary file of a build of it (one that did not finish, "
                     "or one still running), lies inside the web root %s, where this build "
                     "would pack it (as %s): remove it, or make the exclude rule match it "
                     "too (\"%s*\")",
                     opt, path, f->src, b->site.root, f->key, key);
            return -1;
        }
    }
    return 0;
}

/* Refuses an output that is one of the inputs: writing it would destroy a
 * file of the site (or the rules) that the build was reading. And one that
 * would become an input: a new file where the walk would pack it, which the
 * next build of the same command would then refuse as a file of the site. */
int pk__check_not_input(build *b, const char *opt, const char *path)
{
    struct stat st;
    int exists = stat(path, &st) == 0;
    for (size_t i = 0; exists && i < b->site.n; i++) {
        const pk_file *f = &b->site.files[i];
        if (f->dev == (uint64_t)st.st_dev && f->ino == (uint64_t)st.st_ino) {
            snprintf(b->err, sizeof b->err,
                     "%s %s is the file %s of the web root (served as %s); writing it would "
                     "replace a file that is being packed: choose an output outside %s",
                     opt, path, f->src, f->key, b->site.root);
            return -1;
        }
    }
    struct stat rst;
    if (exists && b->o->rules && stat(b->o->rules, &rst) == 0 && rst.st_dev == st.st_dev &&
        rst.st_ino == st.st_ino) {
        snprintf(b->err, sizeof b->err, "%s %s is the --rules file", opt, path);
        return -1;
    }
    char name[PATH_MAX];
    const char *root = b->site.root;
    size_t rl = strcmp(root, "/") == 0 ? 0 : strlen(root);
    /* pk_walk_skips marks an exclude that skips it used: its warning would
     * otherwise tell the user to remove the rule that lets this build run */
    if (canonical_name(path, name, sizeof name) != 0 || strncmp(name, root, rl) != 0 ||
        name[rl] != '/')
        return 0;
    if (pk_walk_skips(b->rules, name + rl))
        return check_no_leftover_packed(b, opt, path, name + rl);
    snprintf(b->err, sizeof b->err,
             "%s %s lies inside the web root %s, where the next build would pack it (as %.400s) "
             "and then refuse to replace it: choose an output outside %s, or a name the walk "
             "skips (one starting with '.', or one an exclude rule matches)",
             opt, path, root, name + rl, root);
    return -1;
}

int pk__check_stream_not_input(build *b, const char *path)
{
    struct stat st;
    if (b->manifest_fd < 0 || fstat(b->manifest_fd, &st) != 0 || !S_ISREG(st.st_mode))
        return 0;
    for (size_t i = 0; i < b->site.n; i++) {
        const pk_file *f = &b->site.files[i];
        if (f->dev == (uint64_t)st.st_dev && f->ino == (uint64_t)st.st_ino) {
            snprintf(b->err, sizeof b->err,
                     "--manifest %s writes into the file %s of the web root (served as %s), "
                     "which the shell created before the walk: redirect it outside %s",
                     path, f->src, f->key, b->site.root);
            return -1;
        }
    }
    return 0;
}

/* Writes realpath(dirname(path)) + "/" + basename(path) into out: the name a
 * file at path has or would have, whatever the spelling. @return 0 or -1
 * (the directory does not resolve). */
static int canonical_name(const char *path, char *out, size_t cap)
{
    char d[PATH_MAX], real[PATH_MAX];
    snprintf(d, sizeof d, "%s", path);
    char *slash = strrchr(d, '/');
    const char *base = path;
    if (!slash) {
        snprintf(d, sizeof d, ".");
    } else {
        base = path + (slash - d) + 1;
        if (slash == d)
            d[1] = '\0';
        else
            *slash = '\0';
    }
    if (!realpath(d, real))
        return -1;
    int n = snprintf(out, cap, "%s/%s", strcmp(real, "/") == 0 ? "" : real, base);
    return n < 0 || (size_t)n >= cap ? -1 : 0;
}

int pk_same_file_name(const char *a, const char *b)
{
    char ca[PATH_MAX], cb[PATH_MAX];
    if (canonical_name(a, ca, sizeof ca) != 0 || canonical_name(b, cb, sizeof cb) != 0)
        return strcmp(a, b) == 0;
    return strcmp(ca, cb) == 0;
}
