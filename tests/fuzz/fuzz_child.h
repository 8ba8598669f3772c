/*
 * fuzz_child.h - for the targets that walk a fuzzed pack in a child
 * (sf_check_isolated): the child is expected to crash on damaged structure,
 * and there the crash is the refusal. fuzz_quiet_child, set as
 * sf__isolate_child_hook, keeps libFuzzer and the sanitizers from reporting
 * it, and from writing a crash-* file for an input the parent handles
 * correctly.
 */
#ifndef FUZZ_CHILD_H
#define FUZZ_CHILD_H

#include <fcntl.h>
#include <sanitizer/common_interface_defs.h>
#include <signal.h>
#include <unistd.h>

static void fuzz_quiet_child(void)
{
    static const int sigs[] = {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL};
    __sanitizer_set_death_callback(NULL);
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        signal(sigs[i], SIG_DFL);
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0)
        dup2(null, 2);
}

#endif
