/*
 * runner.h - a tiny unit-test runner in the manner of libuv's test/.
 *
 *   TEST(name) { ASSERT_EQ(1 + 1, 2); }
 *
 * Tests register themselves; `prog NAME` runs one test in this process,
 * `prog` runs every test each in its own child process (so a crash or a
 * leaked global in one cannot affect another), `prog --list` prints names.
 * ctest calls `prog NAME` once per test (tests/CMakeLists.txt finds the
 * names in the sources). A failed assertion prints both operands.
 */
#ifndef SERVD_TEST_RUNNER_H
#define SERVD_TEST_RUNNER_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void (*t_fn)(void);
void t__register(const char *name, t_fn fn);
void t__fail(const char *file, int line, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 3, 4)));

/* Ends the test as skipped (exit status T_SKIP, which ctest reports as "Not
 * Run (Skipped)"): for a test whose subject this system cannot show, saying
 * why, rather than passing without having checked anything. */
#define T_SKIP 77
void t_skip(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));

/* A fresh empty directory for this test, removed with its contents at exit. */
const char *t_tmpdir(void);
/* Path of the source tree (SERVD_SOURCE_DIR) and the build tree. */
const char *t_source_dir(void);
const char *t_build_dir(void);

#define TEST(name)                                                                                 \
    static void test_##name(void);                                                                 \
    __attribute__((constructor)) static void t__reg_##name(void)                                   \
    {                                                                                              \
        t__register(#name, test_##name);                                                           \
    }                                                                                              \
    static void test_##name(void)

#define ASSERT(cond)                                                                               \
    do {                                                                                           \
        if (!(cond))                                                                               \
            t__fail(__FILE__, __LINE__, "assertion failed: %s", #cond);                            \
    } while (0)

#define ASSERT_EQ(a, b)                                                                            \
    do {                                                                                           \
        long long t__a = (long long)(a), t__b = (long long)(b);                                    \
        if (t__a != t__b)                                                                          \
            t__fail(__FILE__, __LINE__, "%s == %s: %lld != %lld", #a, #b, t__a, t__b);             \
    } while (0)

#define ASSERT_NE(a, b)                                                                            \
    do {                                                                                           \
        long long t__a = (long long)(a), t__b = (long long)(b);                                    \
        if (t__a == t__b)                                                                          \
            t__fail(__FILE__, __LINE__, "%s != %s: both %lld", #a, #b, t__a);                      \
    } while (0)

#define ASSERT_STR_EQ(a, b)                                                                        \
    do {                                                                                           \
        const char *t__a = (a), *t__b = (b);                                                       \
        if (!t__a || !t__b || strcmp(t__a, t__b) != 0)                                             \
            t__fail(__FILE__, __LINE__, "%s == %s: \"%s\" != \"%s\"", #a, #b,                      \
                    t__a ? t__a : "(null)", t__b ? t__b : "(null)");                               \
    } while (0)

#define ASSERT_MEM_EQ(a, alen, b, blen)                                                            \
    do {                                                                                           \
        size_t t__al = (alen), t__bl = (blen);                                                     \
        if (t__al != t__bl || memcmp((a), (b), t__al) != 0)                                        \
            t__fail(__FILE__, __LINE__, "%s == %s: \"%.*s\" (%zu) != \"%.*s\" (%zu)", #a, #b,      \
                    (int)(t__al > 200 ? 200 : t__al), (const char *)(a), t__al,                    \
                    (int)(t__bl > 200 ? 200 : t__bl), (const char *)(b), t__bl);                   \
    } while (0)

#endif
