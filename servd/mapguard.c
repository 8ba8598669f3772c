/*
 * mapguard.c - the SIGBUS handler for pack maps cut short (mapguard.h).
 */
#include "mapguard.h"

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static struct {
    atomic_int used;
    atomic_int hit;
    atomic_int served;        /* faults count (sv_mapguard_serve) */
    atomic_uint gen;          /* odd while a thread changes lo and hi */
    _Atomic uintptr_t lo, hi; /* lo 0: not (yet) a range */
} slots[SV_MAPGUARD_SLOTS];

static atomic_ulong faults;
/* The calling thread's open of a pack (sv_mapguard_open_begin): a fault
 * past the end of a file is its map's, whatever the address. Initial-exec
 * TLS of the program itself: a plain load in the handler. */
static _Thread_local volatile sig_atomic_t opening, opening_hit;
static struct sigaction previous;
static uintptr_t page_mask;

static void on_sigbus(int sig, siginfo_t *si, void *ctx)
{
    (void)sig;
    (void)ctx;
    int saved = errno;
    uintptr_t a = (uintptr_t)si->si_addr;
    /* Only a read past the end of a mapped file (BUS_ADRERR; not a kill or
     * sigqueue, si_code <= 0, nor a memory error) can be a map cut short. */
    int slot = -1;
    for (int i = 0; si->si_code == BUS_ADRERR && i < SV_MAPGUARD_SLOTS && slot < 0; i++) {
        /* A consistent (lo, hi): no change began or ended in between. */
        unsigned g = atomic_load_explicit(&slots[i].gen, memory_order_acquire);
        uintptr_t lo = atomic_load_explicit(&slots[i].lo, memory_order_acquire);
        uintptr_t hi = atomic_load_explicit(&slots[i].hi, memory_order_acquire);
        if (!(g & 1) && g == atomic_load_explicit(&slots[i].gen, memory_order_acquire) && lo &&
            a >= lo && a < hi)
            slot = i;
    }
    /* A guarded map, or one the thread is opening (LMDB's first reads of a
     * map whose range is not known yet: not counted in faults, no pack in
     * use was cut). mmap is a plain system call: safe here in practice. */
    if ((slot >= 0 || (si->si_code == BUS_ADRERR && opening)) &&
        mmap((void *)(a & page_mask), ~page_mask + 1, PROT_READ,
             MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) != MAP_FAILED) {
        if (slot >= 0) {
            atomic_store_explicit(&slots[slot].hit, 1, memory_order_relaxed);
            if (atomic_load_explicit(&slots[slot].served, memory_order_relaxed))
                atomic_fetch_add_explicit(&faults, 1, memory_order_relaxed);
        } else {
            opening_hit = 1;
        }
        errno = saved;
        return; /* the read is retried and finds zeros */
    }
    /* Not a guarded map: as if there were no guard. A fault repeats when
     * the handler returns; a sent signal is sent again. */
    sigaction(SIGBUS, &previous, NULL);
    if (si->si_code <= 0)
        raise(SIGBUS);
    errno = saved;
}

int sv_mapguard_install(void)
{
    long ps = sysconf(_SC_PAGESIZE);
    page_mask = ~(uintptr_t)((ps > 0 ? ps : 4096) - 1);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    return sigaction(SIGBUS, &sa, &previous);
}

int sv_mapguard_add(const void *start, size_t len)
{
    for (int i = 0; i < SV_MAPGUARD_SLOTS; i++) {
        int free_slot = 0;
        if (!atomic_compare_exchange_strong(&slots[i].used, &free_slot, 1))
            continue;
        atomic_fetch_add_explicit(&slots[i].gen, 1, memory_order_acq_rel);
        atomic_store_explicit(&slots[i].hi, (uintptr_t)start + len, memory_order_release);
        atomic_store_explicit(&slots[i].lo, (uintptr_t)start, memory_order_release);
        atomic_fetch_add_explicit(&slots[i].gen, 1, memory_order_acq_rel);
        return i;
    }
    return -1;
}

int sv_mapguard_room(void)
{
    for (int i = 0; i < SV_MAPGUARD_SLOTS; i++)
        if (!atomic_load(&slots[i].used))
            return 1;
    return 0;
}

void sv_mapguard_open_begin(void)
{
    opening_hit = 0;
    opening = 1;
}

int sv_mapguard_open_cut(void)
{
    return opening_hit;
}

int sv_mapguard_open_end(void)
{
    opening = 0;
    int hit = opening_hit;
    opening_hit = 0;
    return hit;
}

void sv_mapguard_remove(int slot)
{
    if (slot < 0 || slot >= SV_MAPGUARD_SLOTS)
        return;
    atomic_fetch_add_explicit(&slots[slot].gen, 1, memory_order_acq_rel);
    atomic_store_explicit(&slots[slot].lo, 0, memory_order_release);
    atomic_store_explicit(&slots[slot].hi, 0, memory_order_release);
    atomic_fetch_add_explicit(&slots[slot].gen, 1, memory_order_acq_rel);
    atomic_store_explicit(&slots[slot].hit, 0, memory_order_relaxed);
    atomic_store_explicit(&slots[slot].served, 0, memory_order_relaxed);
    atomic_store(&slots[slot].used, 0);
}

void sv_mapguard_mark(int slot)
{
    if (slot >= 0 && slot < SV_MAPGUARD_SLOTS)
        atomic_store_explicit(&slots[slot].hit, 1, memory_order_relaxed);
}

const atomic_int *sv_mapguard_flag(int slot)
{
    static const atomic_int never;
    return slot >= 0 && slot < SV_MAPGUARD_SLOTS ? &slots[slot].hit : &never;
}

void sv_mapguard_serve(int slot)
{
    if (slot >= 0 && slot < SV_MAPGUARD_SLOTS)
        atomic_store_explicit(&slots[slot].served, 1, memory_order_relaxed);
}

unsigned long sv_mapguard_faults(void)
{
    return atomic_load_explicit(&faults, memory_order_relaxed);
}
