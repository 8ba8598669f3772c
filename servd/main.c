/*
 * main.c - servd's command line: parses the options, takes any sockets a
 * service manager passed (activation.c), looks up the --user account
 * (privdrop.c), loads and validates the pack - or the built-in site when no
 * --pack is given (embedded.c) - then hands over to the server (server.c).
 *
 * Exit codes: 0 after a graceful stop (and for --help / --version), 1 when
 * the pack is refused or the server cannot be set up (sockets, admin
 * address, access log, passed sockets, the switch to --user), 2 for a usage
 * error (including an unknown --user).
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "activation.h"
#include "say.h"
#include "sf/cpus.h"
#include "sf/isolate.h"
#include "sf/opts.h"
#include "sf/stdfds.h"
#include "embedded.h"
#include "mapguard.h"
#include "privdrop.h"
#include "server.h"
#include "snapshot.h"
#include "watch.h"

#define EXIT_USAGE 2

/* Longest timeout accepted on the command line: a day; anything longer is
 * a typo, and the millisecond arithmetic stays far from overflow. */
#define SV_MAX_TIMEOUT_S 86400.0
/* Highest --max-conns: far beyond what one loop serves well. */
#define SV_MAX_MAX_CONNS 1000000
/* getopt's string of short options */
#define SHORTS ":p:l:w:a:u:hV"

static const char usage_text[] =
    "Usage: servd [--pack SITE.lmdb] [OPTION]...\n"
    "Serve a static site over HTTP/1.1 straight from a pack built by servd-pack.\n"
    "\n"
    "  -p, --pack FILE           the pack to serve; reloaded on SIGHUP and when FILE\n"
    "                            is replaced (rename or symlink flip); without it,\n"
    "                            servd serves its built-in sample site\n"
    "      --no-watch            reload only on SIGHUP, never on a change of FILE\n"
    "      --watch-interval S    also stat FILE every S seconds, for file systems\n"
    "                            without inotify; 0 turns that off (2)\n"
    "  -l, --listen HOST:PORT    address to serve on; repeatable; [::1]:8080 for IPv6,\n"
    "                            *:8080 for every IPv4 address (default 127.0.0.1:8080,\n"
    "                            none when a service manager passes sockets)\n"
    "  -w, --workers N           worker threads, one event loop each (default: the\n"
    "                            number of CPUs servd may run on)\n"
    "  -a, --admin HOST:PORT     serve /metrics and /healthz on this address only\n"
    "      --access-log FILE     append a line per response (combined format plus\n"
    "                            content coding and microseconds); reopened on SIGUSR1\n"
    "      --real-ip-header NAME log the client this header names (X-Forwarded-For,\n"
    "                            CF-Connecting-IP) on connections from --real-ip-from\n"
    "      --real-ip-from CIDR   a trusted proxy's networks (10.0.0.0/8, 2400:cb00::/32,\n"
    "                            an address), comma-separated; repeatable\n"
    "      --spa                 answer missing paths with /index.html, unless their\n"
    "                            extension names a file (.js, .png, .data, ...)\n"
    "      --idle-timeout S      close keep-alive connections idle this long (75)\n"
    "      --header-timeout S    a request head must arrive whole within this (10)\n"
    "      --send-timeout S      close when a client reads nothing for this long (60)\n"
    "      --shutdown-timeout S  on a stop signal, wait at most this for responses in\n"
    "                            flight (10)\n"
    "      --max-conns N         connections per worker; then idle ones make room,\n"
    "                            else 503 (10000)\n"
    "  -u, --user NAME           after binding, switch to this user and its groups\n"
    "                            (the pack must be readable by it)\n"
    "  -h, --help                show this help and exit\n"
    "  -V, --version             show the version and exit\n"
    "\n"
    "Signals: SIGHUP reloads the pack (a bad pack is refused, the old one keeps\n"
    "serving), SIGUSR1 reopens the access log, SIGTERM/SIGINT/SIGQUIT stop gracefully.\n"
    "Sockets passed by systemd (LISTEN_FDS) are served instead of binding.\n"
    "Exit status: 0 after a stop, 1 if the pack or the server setup fails, 2 for\n"
    "a usage error. See servd(1).\n";

#define STR(x)  #x
#define XSTR(x) STR(x) /* a limit's value, in a message */

static void usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void usage_error(const char *fmt, ...)
{
    char msg[SV_SAY_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    sv_say_then(SV_ERR, "Try 'servd --help'.", "%s", msg);
    exit(EXIT_USAGE);
}

/* Whether --help or --version got out: `servd --help >/dev/full` must
 * not exit 0. */
static int stdout_done(void)
{
    if (fflush(stdout) == 0 && !ferror(stdout))
        return 0;
    sv_say(SV_ERR, "writing to standard output: %s", strerror(errno));
    return 1;
}

/* Sets *slot to a value that names something: an empty one (as in
 * "--pack=$PACK" with PACK unset) names nothing. */
static void named(const char **slot, const char *name, const char *what)
{
    if (!*optarg)
        usage_error("%s '': expected %s", name, what);
    *slot = optarg;
}

/* Seconds as a decimal number ("30", "0.25"): digits with at most one
 * point. strtod alone would also take "0x10", "1e3" and " 5". With
 * zero_off, "0" is allowed and @returns 0 (the option's "off"). */
static uint64_t parse_seconds_or_off(const char *opt, const char *s, int zero_off)
{
    size_t digits = strspn(s, "0123456789"), frac = 0;
    if (s[digits] == '.')
        frac = 1 + strspn(s + digits + 1, "0123456789");
    int decimal = digits > 0 || frac > 1; /* a digit before or after the point */
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (zero_off && decimal && !s[digits + frac] && !*end && v == 0)
        return 0;
    if (!decimal || s[digits + frac] || *end || errno || !(v > 0) || v > SV_MAX_TIMEOUT_S)
        usage_error("%s '%s': expected %sseconds, more than 0 and at most %.0f", opt, s,
                    zero_off ? "0 (off) or " : "", SV_MAX_TIMEOUT_S);
    uint64_t ms = (uint64_t)(v * 1000 + 0.5);
    return ms ? ms : 1;
}

static uint64_t parse_seconds(const char *opt, const char *s)
{
    return parse_seconds_or_off(opt, s, 0);
}

/* A whole number: digits only (strtol alone would also take " 2" and
 * "+2"). */
static long parse_count(const char *opt, const char *s, long max)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (*s < '0' || *s > '9' || *end || errno || v < 1 || v > max)
        usage_error("%s '%s': expected a whole number from 1 to %ld", opt, s, max);
    return v;
}

/* --listen or --admin HOST:PORT. A malformed one is a usage error; a
 * name that does not resolve fails the start (1), like an address that
 * cannot be bound: the command line may be right and the resolver down. */
static void parse_addr(const char *opt, const char *s, sv_addr *out)
{
    char err[256];
    int rc = sv_addr_parse(s, out, err, sizeof err);
    if (rc == -1)
        usage_error("%s %s", opt, err);
    if (rc != 0) {
        sv_say(SV_ERR, "%s %s", opt, err);
        exit(EXIT_FAILURE);
    }
}

enum {
    OPT_ACCESS_LOG = 256,
    OPT_SPA,
    OPT_IDLE,
    OPT_HEADER,
    OPT_SEND,
    OPT_SHUTDOWN,
    OPT_MAX_CONNS,
    OPT_NO_WATCH,
    OPT_WATCH_INTERVAL,
    OPT_REAL_IP_HEADER,
    OPT_REAL_IP_FROM,
};

/* Refuses a second use of an option that takes one value: a second
 * --pack or --workers would silently win over the first. --listen and
 * --real-ip-from add up. seen has a bit for each entry of opts. */
static void given_once(const struct option *opts, int c, uint64_t *seen)
{
    if (c == 'l' || c == OPT_REAL_IP_FROM)
        return;
    const char *name = sf_opt_repeated(opts, c, seen);
    if (name)
        usage_error("--%s is given twice", name);
}

/* Reads the command line into @p cfg; a usage error exits with status 2.
 * @return -1 to go on, or the exit status of --help and --version. */
static int parse_args(int argc, char **argv, sv_config *cfg, const char **user_name)
{
    static const struct option opts[] = {
        {"pack", required_argument, NULL, 'p'},
        {"listen", required_argument, NULL, 'l'},
        {"workers", required_argument, NULL, 'w'},
        {"admin", required_argument, NULL, 'a'},
        {"access-log", required_argument, NULL, OPT_ACCESS_LOG},
        {"real-ip-header", required_argument, NULL, OPT_REAL_IP_HEADER},
        {"real-ip-from", required_argument, NULL, OPT_REAL_IP_FROM},
        {"spa", no_argument, NULL, OPT_SPA},
        {"idle-timeout", required_argument, NULL, OPT_IDLE},
        {"header-timeout", required_argument, NULL, OPT_HEADER},
        {"send-timeout", required_argument, NULL, OPT_SEND},
        {"shutdown-timeout", required_argument, NULL, OPT_SHUTDOWN},
        {"max-conns", required_argument, NULL, OPT_MAX_CONNS},
        {"no-watch", no_argument, NULL, OPT_NO_WATCH},
        {"watch-interval", required_argument, NULL, OPT_WATCH_INTERVAL},
        {"user", required_argument, NULL, 'u'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    _Static_assert(sizeof opts / sizeof opts[0] <= 64, "sf_opt_repeated: a bit of seen per option");
    char err[1024];
    int c;
    const char *listen_arg[SV_MAX_LISTEN], *admin_arg = NULL;

    cfg->workers = 0;
    cfg->idle_ms = SV_DEFAULT_IDLE_MS;
    cfg->header_ms = SV_DEFAULT_HEADER_MS;
    cfg->send_ms = SV_DEFAULT_SEND_MS;
    cfg->shutdown_ms = SV_DEFAULT_SHUTDOWN_MS;
    cfg->max_conns = SV_DEFAULT_MAX_CONNS;
    cfg->watch = 1;
    cfg->watch_poll_ms = SV_WATCH_DEFAULT_POLL_MS;
    cfg->admin_inherited = -1;

    uint64_t seen = 0;
    int interval_given = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, SHORTS, opts, NULL)) != -1) {
        given_once(opts, c, &seen);
        switch (c) {
        case 'p':
            named(&cfg->pack_path, "--pack", "a file name");
            break;
        case 'l':
            if (cfg->nlisten == SV_MAX_LISTEN)
                usage_error("too many --listen addresses (at most " XSTR(SV_MAX_LISTEN) ")");
            listen_arg[cfg->nlisten++] = optarg; /* resolved last */
            break;
        case 'w':
            cfg->workers = (int)parse_count("--workers", optarg, SV_MAX_WORKERS);
            break;
        case 'a':
            admin_arg = optarg;
            cfg->has_admin = 1;
            break;
        case OPT_ACCESS_LOG:
            named(&cfg->access_log, "--access-log", "a file name");
            break;
        case OPT_REAL_IP_HEADER:
            if (sv_realip_header(&cfg->realip, optarg, err, sizeof err) != 0)
                usage_error("--real-ip-header %s", err);
            break;
        case OPT_REAL_IP_FROM:
            if (sv_realip_from(&cfg->realip, optarg, err, sizeof err) != 0)
                usage_error("--real-ip-from %s", err);
            break;
        case OPT_SPA:
            cfg->site.spa = 1;
            break;
        case OPT_IDLE:
            cfg->idle_ms = parse_seconds("--idle-timeout", optarg);
            break;
        case OPT_HEADER:
            cfg->header_ms = parse_seconds("--header-timeout", optarg);
            break;
        case OPT_SEND:
            cfg->send_ms = parse_seconds("--send-timeout", optarg);
            break;
        case OPT_SHUTDOWN:
            cfg->shutdown_ms = parse_seconds("--shutdown-timeout", optarg);
            break;
        case OPT_MAX_CONNS:
            cfg->max_conns = (unsigned)parse_count("--max-conns", optarg, SV_MAX_MAX_CONNS);
            break;
        case OPT_NO_WATCH:
            cfg->watch = 0;
            break;
        case OPT_WATCH_INTERVAL:
            cfg->watch_poll_ms = parse_seconds_or_off("--watch-interval", optarg, 1);
            interval_given = 1;
            break;
        case 'u':
            named(user_name, "--user", "a user name");
            break;
        case 'h':
            fputs(usage_text, stdout);
            return stdout_done();
        case 'V':
            printf("servd %s (pack format %d.%d)\n", SERVD_VERSION, SF_FORMAT_MAJOR,
                   SF_FORMAT_MINOR);
            return stdout_done();
        case ':':
            usage_error("option '%s' needs a value", argv[optind - 1]);
            break;
        default: {
            if (optopt > 0 && optopt < 256 && !strchr(SHORTS, optopt)) /* also in -xV */
                usage_error("unknown option '-%c'", optopt);
            const char *arg = argv[optind - 1], *eq = strchr(arg, '=');
            if (optopt && eq && strncmp(arg, "--", 2) == 0) /* --spa=1 */
                usage_error("option '%.*s' takes no value", (int)(eq - arg), arg);
            /* getopt_long takes an abbreviation of one option alone (--work) */
            char names[512];
            if (!optopt && sf_opt_ambiguous(opts, arg, names, sizeof names) > 1)
                usage_error("option '%.*s' is ambiguous: %s",
                            (int)(eq ? (size_t)(eq - arg) : strlen(arg)), arg, names);
            usage_error("unknown option '%s'", arg);
        }
        }
    }
    if (optind < argc) /* "servd site.lmdb": a pack given without its option */
        usage_error(cfg->pack_path
                        ? "unexpected argument '%s'"
                        : "unexpected argument '%s' (the pack is given with --pack FILE)",
                    argv[optind]);
    if (!cfg->watch && interval_given)
        usage_error("--watch-interval sets how FILE is watched, and --no-watch turns watching "
                    "off: give one of them");
    /* The header is believed only from the networks, and changes only the
     * log: one without the other, or both without a log, is a mistake. */
    if (cfg->realip.header_len && !cfg->realip.nnets)
        usage_error("--real-ip-header needs --real-ip-from: the networks of the proxies whose "
                    "header %s is believed",
                    cfg->realip.header);
    if (cfg->realip.nnets && !cfg->realip.header_len)
        usage_error("--real-ip-from needs --real-ip-header: the header that names the client");
    if (cfg->realip.header_len && !cfg->access_log)
        usage_error("--real-ip-header changes only the access log: give --access-log too");
    if (sv_realip_trusts_all(&cfg->realip))
        sv_say(SV_WARNING,
               "warning: --real-ip-from includes every address (a /0): the "
               "client logged is then whatever any client puts in %s",
               cfg->realip.header);
    /* Addresses last: a host name is looked up only once the rest of the
     * command line is known to be right (a usage error stays one). */
    for (int n = 0; n < cfg->nlisten; n++) {
        parse_addr("--listen", listen_arg[n], &cfg->listen[n]);
        for (int i = 0; i < n; i++)
            if (sv_addr_same(&cfg->listen[i], &cfg->listen[n])) {
                snprintf(err, sizeof err, "%s: the same address as --listen %s", listen_arg[n],
                         cfg->listen[i].text);
                usage_error("--listen %s", err);
            }
    }
    if (admin_arg)
        parse_addr("--admin", admin_arg, &cfg->admin);
    return -1;
}

/* Sockets from a service manager replace the default address; --listen
 * addresses given as well are bound in addition. @return 0, or -1 said. */
static int take_sockets(sv_config *cfg)
{
    static sv_activation act;
    char err[1024];
    if (sv_activation_take(&act, err, sizeof err) != 0) {
        sv_say(SV_ERR, "%s", err);
        return -1;
    }
    if (cfg->nlisten + act.n > SV_MAX_LISTEN)
        usage_error(
            "too many listening sockets with the ones passed in (at most " XSTR(SV_MAX_LISTEN) ")");
    for (int i = 0; i < act.n; i++)
        cfg->inherited[cfg->ninherited++] = act.fds[i];
    if (act.admin_fd >= 0 && cfg->has_admin)
        usage_error("--admin %s and a passed socket named admin: give one of them",
                    cfg->admin.text);
    if (act.admin_fd >= 0 && act.n == 0 && cfg->nlisten == 0) {
        /* no default address beside passed sockets (servd.1) */
        sv_say(SV_ERR, "socket activation: only a socket named admin was passed; pass one to "
                       "serve HTTP on as well, or give --listen");
        return -1;
    }
    if (act.admin_fd >= 0) {
        cfg->admin_inherited = act.admin_fd;
        cfg->has_admin = 1;
        sv_activation_describe(act.admin_fd, cfg->admin.text, sizeof cfg->admin.text);
    }
    if (cfg->nlisten == 0 && cfg->ninherited == 0 &&
        sv_addr_parse("127.0.0.1:8080", &cfg->listen[0], err, sizeof err) == 0)
        cfg->nlisten = 1;
    /* The admin socket is bound without SO_REUSEPORT: the same port as a
     * --listen address would fail with "Address already in use", which
     * points at another process. Say which options clash. */
    for (int i = 0; cfg->has_admin && cfg->admin_inherited < 0 && i < cfg->nlisten; i++)
        if (sv_addr_clash(&cfg->admin, &cfg->listen[i])) {
            snprintf(err, sizeof err, "%s: the same port as --listen %s", cfg->admin.text,
                     cfg->listen[i].text);
            usage_error("--admin %s", err);
        }
    return 0;
}

/* The process-wide signal dispositions and mask the server relies on. */
static void set_up_signals(void)
{
    /* A client that goes away must cost an EPIPE, not the process; nor must
     * a pack file cut short under its map (mapguard.h). */
    signal(SIGPIPE, SIG_IGN);
    /* Nor a file size limit (ulimit -f, LimitFSIZE=) the access log or a
     * redirected stderr reaches: the write fails with EFBIG, the log counts
     * its lost lines and says so once. */
    signal(SIGXFSZ, SIG_IGN);
    /* An ignored SIGCHLD is inherited across exec, and has children reaped
     * unseen: the exit status of the pack check (--check-pack) would be
     * lost. */
    signal(SIGCHLD, SIG_DFL);
    /* A signal mask is inherited across exec: a supervisor or script that
     * leaked one with SIGTERM or SIGHUP blocked left a servd that neither
     * stopped nor reloaded (the signals stayed pending), and a blocked
     * SIGBUS would bypass the map guard and kill the process. Unblocked
     * once SIGHUP and SIGUSR1 are caught (a pending one is noted like any
     * other); every thread servd starts inherits this mask. */
    sigset_t used;
    sigemptyset(&used);
    static const int used_signals[] = {SIGHUP, SIGUSR1, SIGUSR2, SIGTERM, SIGINT, SIGQUIT, SIGBUS};
    for (size_t i = 0; i < sizeof used_signals / sizeof used_signals[0]; i++)
        sigaddset(&used, used_signals[i]);
    pthread_sigmask(SIG_UNBLOCK, &used, NULL);
    if (sv_mapguard_install() != 0)
        sv_say(SV_WARNING, "warning: no SIGBUS guard for the pack map: %s", strerror(errno));
}

int main(int argc, char **argv)
{
    /* Until the main loop takes them (server.c), a reload or a log reopen
     * sent while servd starts (systemd's ExecReload, a logrotate script
     * during a restart) must not kill it by the default action; nor be
     * lost: a deploy that renamed a new pack over the path after servd
     * opened the old one sends SIGHUP for it. They are noted, and acted on
     * once servd is listening. First of all, so that the window where the
     * default action still applies is only the program's loading. */
    sv_server_note_early_signals();
    if (sf_std_fds_open() != 0)
        return 1; /* nowhere to say why */
    sv_say_init();
    int check = (argc == 3 || argc == 4) && strcmp(argv[1], "--check-pack") == 0;
    if (sf_sha256_ready() != 0) {
        if (check) {
            printf("out of memory setting up SHA-256\n");
            return SF_CHECK_EXIT_NO_VERDICT;
        }
        sv_say(SV_ERR, "out of memory setting up SHA-256");
        return 1;
    }
    /* Internal: the child that walks a new pack before the server maps it
     * (snapshot.c, sf/isolate.h). Prints SF_CHECK_OK, or the reason for a
     * refusal. */
    if (check) {
        /* Dies with the servd that started it (a stop while it runs, a
         * kill): an orphan would go on reading the whole pack for nothing.
         * servd may have ended before the request: its pid is the last
         * argument. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        /* run from /proc/self/fd/N (snapshot.c), the kernel named it "N":
         * named servd, as ps, top, pgrep and killall look for it */
        prctl(PR_SET_NAME, "servd");
        if (argc == 4 && (long)getppid() != atol(argv[3]))
            return SF_CHECK_EXIT_NO_VERDICT;
        char err[1024] = "";
        int rc = sf_pack_check_structure(NULL, argv[2], err, sizeof err);
        printf("%s\n", rc == 0 ? SF_CHECK_OK : err[0] ? err : sf_strerror(rc));
        if (rc == SF_ENOMEM || rc == SF_EIO)
            return SF_CHECK_EXIT_NO_VERDICT; /* out of memory or descriptors */
        return rc != 0;
    }
    sv_server_end_on_early_stop();
    /* libuv's pool runs only a pack's load (server.c), one at a time: one
     * thread, not libuv's four, unless the user set the size. Before any
     * thread starts, so setenv does not race a getenv. */
    if (setenv("UV_THREADPOOL_SIZE", "1", 0) != 0) {
        sv_say(SV_ERR, "out of memory setting up the environment");
        return 1;
    }
    static sv_config cfg;
    static sv_user user;
    const char *user_name = NULL;
    char err[1024];
    int done = parse_args(argc, argv, &cfg, &user_name);
    if (done >= 0)
        return done;
    if (user_name) {
        int rc = sv_user_lookup(user_name, &user, err, sizeof err);
        if (rc == -1)
            usage_error("%s", err);
        if (rc != 0) {
            sv_say(SV_ERR, "refusing to start: %s", err);
            return 1;
        }
        cfg.user = &user;
    }

    if (take_sockets(&cfg) != 0)
        return 1;
    if (cfg.workers == 0)
        cfg.workers = (int)sf_cpu_count(SV_MAX_WORKERS);
    set_up_signals();

    sv_snapshot *snap;
    if (!cfg.pack_path) {
        cfg.pack_path = SV_EMBEDDED_NAME;
        cfg.builtin = 1;
        cfg.watch = 0;
        if (sv_embedded_open(cfg.workers, &snap, err, sizeof err) != 0) {
            sv_say(SV_ERR, "refusing to start: no --pack given, and %s", err);
            return 1;
        }
        sv_say(SV_INFO,
               "no --pack given: serving the built-in sample site (www/, %zu "
               "bytes); run servd --pack SITE.lmdb to serve your own",
               sv_embedded_size());
    } else if (sv_snapshot_open(cfg.pack_path, cfg.workers, &snap, NULL, err, sizeof err) != 0) {
        sv_say(SV_ERR, "refusing to start: %s", err);
        return 1;
    }
    return sv_server_run(&cfg, snap);
}
