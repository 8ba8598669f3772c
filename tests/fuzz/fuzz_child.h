/*
 * fuzz_child.h - for the targets that take a whole pack file and walk it in
 * a child first (sf_check_isolated).
 *
 * The child is expected to crash on damaged structure, and there the crash
 * is the refusal: fuzz_quiet_child, set as sf__isolate_child_hook, keeps
 * libFuzzer and the sanitizers from reporting it, and from writing a
 * crash-* file for an input the parent handles correctly.
 *
 * fuzz_pack_file writes an input to a memory file, the same one for every
 * input, and returns a path that opens it.
 */
#ifndef FUZZ_CHILD_H
#define FUZZ_CHILD_H

#include "sf/isolate.h"

#include <fcntl.h>
#include <sanitizer/common_interface_defs.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
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

/* Sets up the quiet child on the first call. */
static const char *fuzz_pack_file(const uint8_t *data, size_t size)
{
    static int fd = -1;
    static char path[64];
    if (fd < 0) {
        sf__isolate_child_hook = fuzz_quiet_child;
        fd = memfd_create("fuzz-pack", MFD_CLOEXEC);
        if (fd < 0)
            abort();
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != (ssize_t)size)
        abort();
    return path;
}

#endif
