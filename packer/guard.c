/*
 * guard.c - a pack cut short while servd-pack reads it (guard.h).
 *
 * Slots are taken and let go by the threads that open and close packs; the
 * handler reads them with atomic loads only. A slot's line is written
 * before its range or the thread's mark is set, and neither is cleared
 * before the map goes away.
 */
#include "guard.h"

#include "commands.h"
#include "msg.h"

#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

typedef struct guard_slot {
    atomic_int taken;
    _Atomic uintptr_t start; /* the map guarded; len 0 while none */
    atomic_size_t len;
    char line[PATH_MAX + 96]; /* written with the slot taken and unguarded */
} guard_slot;

static guard_slot slots[PK_GUARD_SLOTS];
static _Thread_local volatile sig_atomic_t opening = -1; /* this thread's slot */
static void (*_Atomic cleanup_fn)(void);

static struct sigaction previous; /* what a fault that is not a pack's gets */

static void on_bus(int sig, siginfo_t *si, void *ctx)
{
    (void)ctx;
    uintptr_t at = (uintptr_t)si->si_addr;
    int hit = -1;
    /* Only a read past the end of a mapped file (BUS_ADRERR; not a kill
     * or sigqueue, si_code <= 0, nor a memory error) can be a pack cut. */
    for (int i = 0; si->si_code == BUS_ADRERR && i < PK_GUARD_SLOTS && hit < 0; i++) {
        size_t len = atomic_load(&slots[i].len);
        if (len && at - atomic_load(&slots[i].start) < len)
            hit = i;
    }
    if (hit < 0 && si->si_code == BUS_ADRERR)
        hit = opening;
    if (hit < 0) { /* not a pack's: a fault repeats, a sent signal is sent again */
        sigaction(sig, &previous, NULL);
        if (si->si_code <= 0)
            raise(sig);
        return;
    }
    const char *line = slots[hit].line;
    if (write(STDERR_FILENO, line, strlen(line)) < 0) {
        /* nothing left to tell */
    }
    void (*cleanup)(void) = atomic_load(&cleanup_fn);
    if (cleanup)
        cleanup();
    _exit(PK_EXIT_FAIL);
}

void pk_guard_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_bus;
    sa.sa_flags = SA_SIGINFO;
    sigfillset(&sa.sa_mask); /* one line, one cleanup */
    sigaction(SIGBUS, &sa, &previous);
}

int pk_guard_open_begin(const char *path)
{
    for (int i = 0; i < PK_GUARD_SLOTS; i++) {
        int free_slot = 0;
        if (!atomic_compare_exchange_strong(&slots[i].taken, &free_slot, 1))
            continue;
        pk_format_line(slots[i].line, sizeof slots[i].line, "%s: " PK_GUARD_CUT, path);
        opening = i;
        return i;
    }
    return -1;
}

void pk_guard_open_end(int slot, const sf_pack *pack)
{
    int fd;
    const char *map;
    if (slot < 0)
        return;
    if (pack && sf_pack_file(pack, &fd, &map) == 0) {
        atomic_store(&slots[slot].start, (uintptr_t)map);
        atomic_store(&slots[slot].len, (size_t)sf_pack_size(pack));
    } else {
        atomic_store(&slots[slot].taken, 0);
    }
    opening = -1;
}

void pk_guard_forget(const sf_pack *pack)
{
    int fd;
    const char *map;
    if (!pack || sf_pack_file(pack, &fd, &map) != 0)
        return;
    for (int i = 0; i < PK_GUARD_SLOTS; i++)
        if (atomic_load(&slots[i].len) && atomic_load(&slots[i].start) == (uintptr_t)map) {
            atomic_store(&slots[i].len, 0);
            atomic_store(&slots[i].start, 0);
            atomic_store(&slots[i].taken, 0);
            return;
        }
}

void pk_guard_on_fault(void (*cleanup)(void))
{
    atomic_store(&cleanup_fn, cleanup);
}
