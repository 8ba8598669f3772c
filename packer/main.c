/*
 * main.c - the servd-pack command line: parse, validate, dispatch.
 *
 * Exit statuses: 0 success; 1 a problem with an input, the output or a pack
 * (the message names the file and the cause); 2 a bad command line or
 * environment (unknown option, missing argument, bad SOURCE_DATE_EPOCH).
 */
#include "build.h"
#include "msg.h"
#include "commands.h"
#include "compress.h"
#include "guard.h"
#include "pool.h"
#include "progress.h"
#include "sf/cpus.h"
#include "sf/opts.h"
#include "sf/stdfds.h"

#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static const char usage_text[] =
    "usage: servd-pack build WEBROOT -o SITE.lmdb [--rules RULES.json] [--manifest OUT.json]\n"
    "                        [--base OLD.lmdb] [--jobs N] [--memory SIZE] [--strict] [-q]\n"
    "       servd-pack ls SITE.lmdb [--json]\n"
    "       servd-pack verify SITE.lmdb [-q]\n"
    "       servd-pack diff OLD.lmdb NEW.lmdb [--json] [--content]\n"
    "       servd-pack cat SITE.lmdb PATH [--encoding identity|gzip|br|zstd] [--headers]\n"
    "       servd-pack --help | --version\n";

static const char help_text[] =
    "\n"
    "Packs a static web root into one LMDB file that servd serves from memory.\n"
    "\n"
    "commands:\n"
    "  build    walk WEBROOT, precompress (gzip, br, zstd), hash, pre-render headers and\n"
    "           write SITE.lmdb atomically (temporary file + rename)\n"
    "    -o, --output FILE     the pack to write (required)\n"
    "    --rules FILE          Cache-Control, extra headers, excludes, MIME overrides and\n"
    "                          files shipped compressed (JSON; see\n"
    "                          manifests/rules.schema.json)\n"
    "    --manifest FILE       also write a JSON manifest of every path and variant\n"
    "    --base FILE           reuse the compressed bodies of unchanged files from an older\n"
    "                          pack made with the same compression profile, and keep the\n"
    "                          Last-Modified of unchanged files (even over\n"
    "                          SOURCE_DATE_EPOCH)\n"
    "    -j, --jobs N          compression threads (default: the CPUs it may use)\n"
    "    --memory SIZE         the most memory the reads and the compression hold at once,\n"
    "                          as they reckon it (bytes, or with K, M, G or T: 512M; 0 for no\n"
    "                          limit); fewer threads compress and large files wait for room\n"
    "                          (default: half of what the machine, or its cgroup, has)\n"
    "    --strict              fail (exit status 1, the outputs untouched) when the options,\n"
    "                          the site or the rules gave a warning, before compressing\n"
    "    -q, --quiet           no progress bar or lines, and no summary\n"
    "  ls       one line per path: PATH SIZE ENCODINGS ETAG MIME (tab-separated);\n"
    "           --json for a JSON array\n"
    "  verify   re-hash every body, check every record and the meta record\n"
    "  diff     URLs added (+), changed (~) and removed (-) between two packs: a purge\n"
    "           list; an index also lists /dir/ (and /dir, its 301, when added,\n"
    "           removed or its 301's lines changed) marked\n"
    "           \"<TAB>via /dir/index.html\"; --json for {\"added\", \"changed\",\n"
    "           \"removed\", \"derived\", \"urls\", \"not_found\"}; a new 404 response is\n"
    "           said (\"not_found\", or a line on stderr), not listed; --content ignores\n"
    "           changes of Last-Modified alone (build with --base to keep them)\n"
    "  cat      write the stored bytes of one variant of PATH to stdout (default\n"
    "           identity); PATH is a URL path (\"/docs/\" -> /docs/index.html);\n"
    "           --headers writes the stored 200 header block instead\n"
    "\n"
    "Dotfiles are skipped (except the top-level .well-known/); X.gz/X.br/X.zst beside X are\n"
    "packed at their own URLs (X's variants are servd-pack's own); a variant is\n"
    "kept only if it saves at least 5% and 64 bytes. SOURCE_DATE_EPOCH, when set, is every\n"
    "Last-Modified and the creation time (but --base keeps the Last-Modified of unchanged\n"
    "files, and gives changed ones a later one than the base's).\n"
    "\n"
    "exit status: 0 success, 1 failure (the message names the file and the cause),\n"
    "             2 bad command line or environment\n"
    "see servd-pack(1)\n";

static int usage_error(const char *fmt, const char *arg)
{
    char msg[PK_MSG_MAX];
    snprintf(msg, sizeof msg, fmt, arg);
    pk_err("%s", msg);
    fputs(usage_text, stderr);
    return PK_EXIT_USAGE;
}

/* getopt's strings of short options: build's, and the other commands'. */
#define BUILD_SHORTS ":o:j:qh"
#define READ_SHORTS  ":qh"

/* getopt's own messages would start with the subcommand, not "servd-pack:"
 * (opterr is 0): says which option is unknown, ambiguous or lacks its
 * argument. shorts is getopt's string of short options, opts its long
 * ones. */
static int option_error(int c, char **argv, const char *shorts, const struct option *opts)
{
    char shortopt[3] = {'-', (char)optopt, '\0'};
    if (c == '?' && optopt > 0 && optopt < 256 && !strchr(shorts, optopt))
        return usage_error("unknown option %s", shortopt); /* also in a cluster, -xq */
    const char *opt = argv[optind - 1];
    const char *eq = strncmp(opt, "--", 2) == 0 ? strchr(opt, '=') : NULL;
    if (c == '?' && optopt && eq) { /* getopt_long found the option: --quiet=1 */
        char name[PK_MSG_MAX];
        snprintf(name, sizeof name, "%.*s", (int)(eq - opt), opt);
        return usage_error("option %s takes no value", name);
    }
    if (optopt && optopt < 256 && strncmp(opt, "--", 2) != 0)
        opt = shortopt; /* one of a cluster of short options: -qx */
    if (c == ':')
        return usage_error("option %s requires an argument", opt);
    /* getopt_long takes an abbreviation of one option alone (--man) */
    char names[512];
    if (!optopt && sf_opt_ambiguous(opts, opt, names, sizeof names) > 1) {
        char what[PK_MSG_MAX];
        snprintf(what, sizeof what, "%.*s is ambiguous: %s",
                 (int)(eq ? (size_t)(eq - opt) : strlen(opt)), opt, names);
        return usage_error("option %s", what);
    }
    return usage_error("unknown option %s", opt);
}

/* Whether what went to stdout got out: `servd-pack --help >/dev/full`
 * must not exit 0. */
static int stdout_done(void)
{
    if (fflush(stdout) == 0 && !ferror(stdout))
        return PK_EXIT_OK;
    pk_err("writing to standard output: %s", strerror(errno));
    return PK_EXIT_FAIL;
}

static int print_help(void)
{
    fputs(usage_text, stdout);
    fputs(help_text, stdout);
    return stdout_done();
}

static int print_version(void)
{
    char profile[PK_PROFILE_SIZE];
    if (pk_profile(profile) != 0) {
        pk_err("out of memory");
        return PK_EXIT_FAIL;
    }
    printf("servd-pack %s\npack format %d.%d\nprofile %s\n", SERVD_VERSION, SF_FORMAT_MAJOR,
           SF_FORMAT_MINOR, profile);
    return stdout_done();
}

/* The largest SOURCE_DATE_EPOCH: 9999-12-31T23:59:59Z, the last second an
 * IMF-fixdate (Last-Modified) can express. */
#define PK_EPOCH_MAX 253402300799LL

/* Parses SOURCE_DATE_EPOCH: decimal seconds from 0 to PK_EPOCH_MAX, as
 * reproducible-builds.org specifies. @return 1 set, 0 unset, -1 malformed
 * or out of range. */
static int source_date_epoch(int64_t *out)
{
    const char *s = getenv("SOURCE_DATE_EPOCH");
    if (!s || !*s)
        return 0;
    for (const char *p = s; *p; p++)
        if (*p < '0' || *p > '9')
            return -1;
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v > PK_EPOCH_MAX)
        return -1;
    *out = v;
    return 1;
}

/* Parses --memory's SIZE: decimal digits, then nothing (bytes) or one of
 * K, M, G, T (powers of 1024; "KiB", "kb" and "k" too), into *out. @return 0,
 * or -1. */
static int parse_size(const char *s, uint64_t *out)
{
    if (*s < '0' || *s > '9')
        return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno)
        return -1;
    static const char units[] = "KMGT";
    unsigned shift = 0;
    if (*end) {
        char c = end[0] >= 'a' && end[0] <= 'z' ? (char)(end[0] - 'a' + 'A') : end[0];
        const char *u = strchr(units, c); /* c is not '\0' */
        if (!u)
            return -1;
        shift = 10 * (unsigned)(u - units + 1);
        end++;
        if (strcmp(end, "") != 0 && strcasecmp(end, "iB") != 0 && strcasecmp(end, "B") != 0)
            return -1;
    }
    if (v > UINT64_MAX >> shift)
        return -1;
    *out = (uint64_t)v << shift;
    return 0;
}

/* Refuses an option that takes a value when it is given a second time
 * (c: what getopt_long returned; seen: a bit per entry of opts): the second
 * would silently win over the first, and a pipeline that adds its own -o,
 * --rules or --jobs would lose rules, write elsewhere or run otherwise.
 * Named by its long name, however it was spelt. @return 0, or
 * PK_EXIT_USAGE (reported). */
static int given_once(const struct option *opts, int c, uint64_t *seen)
{
    const char *name = sf_opt_repeated(opts, c, seen);
    return name ? usage_error("--%s is given twice", name) : 0;
}

/* Sets *slot to the value of an option that names a file. The value must
 * be a file name: not empty (an unset variable, `--base "$PREV"`), and not
 * one that starts like an option or with '=' (`-o --base` would write a
 * pack named --base, `-o=site.lmdb` one named =site.lmdb, and a pipeline
 * would ship the old site.lmdb); "-" is --manifest's standard output.
 * @return 0, or PK_EXIT_USAGE (reported). */
static int file_option(const char **slot, const char *name)
{
    char msg[PK_MSG_MAX];
    int longopt = name[1] == '-';
    if (!optarg[0])
        snprintf(msg, sizeof msg, "%s: an empty file name", name);
    else if (optarg[0] == '=')
        snprintf(msg, sizeof msg,
                 "%s %s: a file name that starts with '=' (write %s FILE or %s=FILE)", name, optarg,
                 name, longopt ? name : "--output");
    else if (strcmp(optarg, "-") == 0 && strcmp(name, "--manifest") != 0)
        snprintf(msg, sizeof msg, "%s -: %s (write ./- for a file of that name)", name,
                 strcmp(name, "-o") == 0 ? "only --manifest can be standard output"
                                         : "a file is read, not standard input");
    else if (optarg[0] == '-' && optarg[1])
        snprintf(msg, sizeof msg,
                 "%s %s: a file name that starts with '-' (write ./%s for a file of that name)",
                 name, optarg, optarg);
    else
        msg[0] = '\0';
    if (msg[0])
        return usage_error("%s", msg);
    *slot = optarg;
    return 0;
}

enum {
    OPT_RULES = 256,
    OPT_MANIFEST,
    OPT_BASE,
    OPT_MEMORY,
    OPT_STRICT,
    OPT_JSON,
    OPT_ENCODING,
    OPT_HEADERS,
    OPT_CONTENT
};

static int cmd_build(int argc, char **argv)
{
    static const struct option opts[] = {{"output", required_argument, NULL, 'o'},
                                         {"rules", required_argument, NULL, OPT_RULES},
                                         {"manifest", required_argument, NULL, OPT_MANIFEST},
                                         {"base", required_argument, NULL, OPT_BASE},
                                         {"jobs", required_argument, NULL, 'j'},
                                         {"memory", required_argument, NULL, OPT_MEMORY},
                                         {"strict", no_argument, NULL, OPT_STRICT},
                                         {"quiet", no_argument, NULL, 'q'},
                                         {"help", no_argument, NULL, 'h'},
                                         {0, 0, 0, 0}};
    pk_build_opts o = {0};
    o.jobs = sf_cpu_count(PK_POOL_MAX_THREADS);
    o.memory = sf_memory_available() / 2; /* 0: not known, no limit */
    _Static_assert(sizeof opts / sizeof opts[0] <= 64, "sf_opt_repeated: a bit of seen per option");
    uint64_t seen = 0;
    int memory_given = 0;
    int c, longindex = -1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, BUILD_SHORTS, opts, &longindex)) != -1) {
        int spelt_long = longindex >= 0; /* set by getopt_long for a long option only */
        longindex = -1;
        if (given_once(opts, c, &seen) != 0)
            return PK_EXIT_USAGE;
        switch (c) {
        case 'o': /* named as it was given: "-o -q" or "--output -q" */
            if (file_option(&o.output, spelt_long ? "--output" : "-o") != 0)
                return PK_EXIT_USAGE;
            break;
        case OPT_RULES:
            if (file_option(&o.rules, "--rules") != 0)
                return PK_EXIT_USAGE;
            break;
        case OPT_MANIFEST:
            if (file_option(&o.manifest, "--manifest") != 0)
                return PK_EXIT_USAGE;
            if (strcmp(o.manifest, "-") == 0) /* as most tools read it */
                o.manifest = "/dev/stdout";
            break;
        case OPT_BASE:
            if (file_option(&o.base, "--base") != 0)
                return PK_EXIT_USAGE;
            break;
        case 'q':
            o.quiet = 1;
            break;
        case OPT_STRICT:
            o.strict = 1;
            break;
        case OPT_MEMORY:
            memory_given = 1;
            if (parse_size(optarg, &o.memory) != 0) { /* one line, as --jobs */
                pk_err("--memory %s: expected a size in bytes, or with K, M, G or T (512M, 2G), "
                       "or 0 for no limit",
                       optarg);
                return PK_EXIT_USAGE;
            }
            break;
        case 'h':
            return print_help();
        case 'j': {
            char *end;
            errno = 0;
            long n = strtol(optarg, &end, 10);
            /* digits only, as SOURCE_DATE_EPOCH: not " 1" or "+1" */
            if (errno || *end || optarg[0] < '0' || optarg[0] > '9' || n < 1 ||
                n > PK_POOL_MAX_THREADS) {
                pk_err("--jobs %s: not a number from 1 to %d", optarg, PK_POOL_MAX_THREADS);
                return PK_EXIT_USAGE;
            }
            o.jobs = (unsigned)n;
            break;
        }
        default:
            return option_error(c, argv, BUILD_SHORTS, opts);
        }
    }
    if (optind + 1 != argc)
        return usage_error("build: %s",
                           optind >= argc ? "WEBROOT is missing" : "exactly one WEBROOT expected");
    o.root = argv[optind];
    if (!o.root[0])
        return usage_error("build: %s", "WEBROOT: an empty file name");
    if (!o.output)
        return usage_error("build: %s", "-o SITE.lmdb is required");
    int e = source_date_epoch(&o.epoch);
    if (e < 0) {
        pk_err("SOURCE_DATE_EPOCH=\"%s\" is not a number of seconds from 0 to %lld",
               getenv("SOURCE_DATE_EPOCH"), PK_EPOCH_MAX);
        return PK_EXIT_USAGE;
    }
    o.have_epoch = e;
    int64_t now = (int64_t)time(NULL);
    if (e && o.epoch > now) {
        /* servd's Date is the time of serving: a Last-Modified after it is
         * invalid (RFC 9110 section 8.8.2.1) and confuses caches. */
        pk_warn("SOURCE_DATE_EPOCH=%lld is in the future; using the current "
                "time (%lld), as Last-Modified must never be later than Date",
                (long long)o.epoch, (long long)now);
        o.epoch = now;
    }
    /* One compressing thread's state and room for a job of its size: a
     * limit below that cannot be kept, whatever the site. */
    if (memory_given && o.memory && o.memory < PK_COMPRESS_THREAD_SHARE) {
        char h[32], least[32];
        pk_human_bytes(o.memory, h, sizeof h);
        pk_human_bytes(PK_COMPRESS_THREAD_SHARE, least, sizeof least);
        pk_warn("--memory %s is less than one compressing thread needs (%s): one "
                "thread compresses, and the build may hold more than %s",
                h, least, h);
    }
    /* A reader of the log (or of --manifest) that goes away ends those
     * lines, not the build: a write there fails with EPIPE instead of
     * killing servd-pack, perhaps after the pack is in place. */
    signal(SIGPIPE, SIG_IGN);
    return pk_build(&o);
}

/* Parses the options of ls / verify / diff / cat into flags. */
static int parse_simple(int argc, char **argv, int *json, int *quiet, int *encoding, int *headers,
                        int *content)
{
    static const struct option opts[] = {{"json", no_argument, NULL, OPT_JSON},
                                         {"content", no_argument, NULL, OPT_CONTENT},
                                         {"quiet", no_argument, NULL, 'q'},
                                         {"encoding", required_argument, NULL, OPT_ENCODING},
                                         {"headers", no_argument, NULL, OPT_HEADERS},
                                         {"help", no_argument, NULL, 'h'},
                                         {0, 0, 0, 0}};
    _Static_assert(sizeof opts / sizeof opts[0] <= 64, "sf_opt_repeated: a bit of seen per option");
    uint64_t seen = 0;
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, READ_SHORTS, opts, NULL)) != -1) {
        if (given_once(opts, c, &seen) != 0)
            return PK_EXIT_USAGE;
        switch (c) {
        case OPT_JSON:
            if (!json)
                return usage_error("%s: --json is not an option of this command", argv[0]);
            *json = 1;
            break;
        case 'q':
            if (!quiet)
                return usage_error("%s: -q is not an option of this command", argv[0]);
            *quiet = 1;
            break;
        case OPT_ENCODING:
            if (!encoding)
                return usage_error("%s: --encoding is not an option of this command", argv[0]);
            *encoding = sf_encoding_parse(optarg, strlen(optarg));
            if (*encoding < 0) {
                pk_err("--encoding %s: expected identity, gzip, br or zstd", optarg);
                return PK_EXIT_USAGE;
            }
            break;
        case OPT_CONTENT:
            if (!content)
                return usage_error("%s: --content is not an option of this command", argv[0]);
            *content = 1;
            break;
        case OPT_HEADERS:
            if (!headers)
                return usage_error("%s: --headers is not an option of this command", argv[0]);
            *headers = 1;
            break;
        case 'h': {
            int rc = print_help();
            return rc == PK_EXIT_OK ? -1 : rc;
        }
        default:
            return option_error(c, argv, READ_SHORTS, opts);
        }
    }
    return 0;
}

/* Whether the command has its n operands, the packs among them (all but
 * cat's PATH) not empty: `servd-pack ls "$PACK"` with PACK unset must say
 * so, not ": No such file or directory". names lists the operands. */
static int want_args(int argc, char **argv, int n, const char *cmd, const char *names)
{
    int got = argc - optind;
    if (got != n) {
        pk_err("%s: expected %s, got %d operand%s", cmd, names, got, got == 1 ? "" : "s");
        fputs(usage_text, stderr);
        return PK_EXIT_USAGE;
    }
    int packs = strcmp(cmd, "cat") == 0 ? 1 : n;
    for (int i = 0; i < packs; i++)
        if (!argv[optind + i][0])
            return usage_error("%s: an empty file name for a pack", cmd);
    return 0;
}

int main(int argc, char **argv)
{
    if (sf_std_fds_open() != 0)
        return PK_EXIT_FAIL; /* nowhere to say why */
    /* Blocks of 1 MiB and more (the encoders' tables for large files, the
     * files being compressed) are mapped, and given back to the kernel when
     * freed. glibc's own threshold rises to the largest block freed, up to
     * 32 MiB, after which such blocks come from the threads' heaps, which
     * keep the pages of what was freed: a build of 8 text files of 1.5 MB
     * under --memory 80M peaked at 82 to 89 MB of anonymous memory, 56 with
     * this. Smaller blocks stay on the heaps, and the heaps keep 2 MiB
     * free at their top (glibc's own ratio, twice the threshold): with a
     * threshold of 256 KiB, brotli's 512 KiB hash table was mapped and
     * faulted in again for every small file, and a heap trimmed at glibc's
     * fixed 128 KiB did the same at its top: 2.0 and 1.5 times the CPU time
     * of glibc's default on 3,000 small files (bench/RESULTS.md). */
    mallopt(M_MMAP_THRESHOLD, 1 << 20);
    mallopt(M_TRIM_THRESHOLD, 2 << 20);
    if (sf_sha256_ready() != 0) {
        pk_err("out of memory setting up SHA-256");
        return PK_EXIT_FAIL;
    }
    /* stderr is unbuffered: escaped text (pk_esc_fputs) would go out a byte
     * at a time, and a reader - a log, a script waiting for a message,
     * another build's lines in the same file - could see half a line. Line
     * buffering writes each line with one write(2); the progress bar, which
     * ends no line, flushes itself. */
    setvbuf(stderr, NULL, _IOLBF, 0);
    /* A file size limit (ulimit -f) must fail a write with EFBIG and a
     * message naming the file, not kill the process with temporary files
     * left behind. */
    signal(SIGXFSZ, SIG_IGN);
    /* A pack cut short while it is read ends the command with a line naming it. */
    pk_guard_install();
    /* An inherited SIG_IGN has children reaped unseen: the exit status of
     * a pack's check in a child (sf_check_isolated) would be lost. */
    signal(SIGCHLD, SIG_DFL);
    if (argc < 2) {
        fputs(usage_text, stderr);
        return PK_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0)
        return print_help();
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "-V") == 0 || strcmp(cmd, "version") == 0)
        return print_version();
    argc--, argv++; /* getopt sees the subcommand as argv[0] */
    int json = 0, quiet = 0, encoding = SF_ENC_IDENTITY, headers = 0, content = 0, rc;
    if (strcmp(cmd, "build") == 0)
        return cmd_build(argc, argv);
    if (strcmp(cmd, "ls") == 0) {
        if ((rc = parse_simple(argc, argv, &json, NULL, NULL, NULL, NULL)) != 0)
            return rc < 0 ? PK_EXIT_OK : rc;
        if ((rc = want_args(argc, argv, 1, cmd, "SITE.lmdb")) != 0)
            return rc;
        return pk_cmd_ls(argv[optind], json);
    }
    if (strcmp(cmd, "verify") == 0) {
        if ((rc = parse_simple(argc, argv, NULL, &quiet, NULL, NULL, NULL)) != 0)
            return rc < 0 ? PK_EXIT_OK : rc;
        if ((rc = want_args(argc, argv, 1, cmd, "SITE.lmdb")) != 0)
            return rc;
        rc = pk_cmd_verify(argv[optind], quiet);
        return rc == PK_EXIT_OK ? stdout_done() : rc; /* the OK line got out too */
    }
    if (strcmp(cmd, "diff") == 0) {
        if ((rc = parse_simple(argc, argv, &json, NULL, NULL, NULL, &content)) != 0)
            return rc < 0 ? PK_EXIT_OK : rc;
        if ((rc = want_args(argc, argv, 2, cmd, "OLD.lmdb NEW.lmdb")) != 0)
            return rc;
        return pk_cmd_diff(argv[optind], argv[optind + 1], json, content);
    }
    if (strcmp(cmd, "cat") == 0) {
        if ((rc = parse_simple(argc, argv, NULL, NULL, &encoding, &headers, NULL)) != 0)
            return rc < 0 ? PK_EXIT_OK : rc;
        if ((rc = want_args(argc, argv, 2, cmd, "SITE.lmdb PATH")) != 0)
            return rc;
        return pk_cmd_cat(argv[optind], argv[optind + 1], encoding, headers);
    }
    return usage_error("unknown command \"%s\" (try --help)", cmd);
}
