/* runner.c - see runner.h. */
#include "runner.h"

#include <ftw.h>
#include <stdarg.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_TESTS 1024

static struct {
    const char *name;
    t_fn fn;
} tests[MAX_TESTS];
static int ntests;
static char tmpdir[4096];

void t__register(const char *name, t_fn fn)
{
    if (ntests == MAX_TESTS) {
        fprintf(stderr, "runner: more than %d tests\n", MAX_TESTS);
        exit(2);
    }
    tests[ntests].name = name;
    tests[ntests].fn = fn;
    ntests++;
}

void t__fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s:%d: ", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
    exit(1);
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
    return remove(p);
}

static pid_t tmpdir_owner; /* the process that made it: a forked child must not remove it */

static void rm_tmpdir(void)
{
    if (tmpdir[0] && getpid() == tmpdir_owner)
        nftw(tmpdir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

const char *t_tmpdir(void)
{
    if (!tmpdir[0]) {
        const char *base = getenv("TMPDIR");
        snprintf(tmpdir, sizeof tmpdir, "%s/servd-test-XXXXXX", base ? base : "/tmp");
        if (!mkdtemp(tmpdir))
            t__fail(__FILE__, __LINE__, "mkdtemp %s failed", tmpdir);
        tmpdir_owner = getpid();
        atexit(rm_tmpdir);
    }
    return tmpdir;
}

const char *t_source_dir(void)
{
    const char *s = getenv("SERVD_SOURCE_DIR");
    return s ? s : SERVD_SOURCE_DIR;
}

const char *t_build_dir(void)
{
    const char *s = getenv("SERVD_BUILD_DIR");
    return s ? s : SERVD_BUILD_DIR;
}

void t_skip(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("SKIPPED: ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
    exit(T_SKIP);
}

static int run_one(int i)
{
    tests[i].fn();
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--list") == 0) {
        for (int i = 0; i < ntests; i++)
            printf("%s\n", tests[i].name);
        return 0;
    }
    if (argc == 2) {
        for (int i = 0; i < ntests; i++)
            if (strcmp(tests[i].name, argv[1]) == 0)
                return run_one(i);
        fprintf(stderr, "runner: no test named %s\n", argv[1]);
        return 2;
    }
    int failed = 0, skipped = 0;
    for (int i = 0; i < ntests; i++) {
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0)
            exit(run_one(i)); /* exit, not _exit: atexit removes the test's t_tmpdir() */
        int st = 0;
        waitpid(pid, &st, 0);
        int ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
        int skip = WIFEXITED(st) && WEXITSTATUS(st) == T_SKIP;
        printf("%s %s\n", ok ? "ok    " : skip ? "SKIP  " : "FAILED", tests[i].name);
        failed += !ok && !skip;
        skipped += skip;
    }
    printf("%d passed, %d skipped, %d failed\n", ntests - failed - skipped, skipped, failed);
    return failed ? 1 : 0;
}
