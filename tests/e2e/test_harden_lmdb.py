#!/usr/bin/env python3
"""Damage to LMDB's own structure in a pack must be refused like any other corruption,
never crash servd or servd-pack verify (both walk a new pack in a child process first:
format/include/sf/isolate.h). Every third structure byte by default (every sixth under
the sanitizers, not the same ones); set SERVD_LMDB_STRIDE=1 for all of them.

Every byte that liblmdb interprets as structure (hardtest.lmdb_structure: the meta
records of pages 0 and 1, each page header, each node pointer, each node header, each
overflow page number; about 2500 bytes in the pack of www/) is XORed with 0xff in turn.
The pack is built with SOURCE_DATE_EPOCH=1767225600, so every offset reproduces:

    SOURCE_DATE_EPOCH=1767225600 servd-pack build www -o good.lmdb
    python3 -c "d=bytearray(open('good.lmdb','rb').read()); d[6*4096+30]^=0xff; \\
                open('bad.lmdb','wb').write(d)"
    servd --pack bad.lmdb --listen 127.0.0.1:0      # SIGSEGV in liblmdb (want: exit 1)

For each copy:
  - `servd --pack COPY` exits 1 with a message, or starts and serves every path
    (never a signal);
  - a servd serving the good pack survives `mv COPY live; kill -HUP` (the same
    validation runs inside the running server, so a crash there takes the site down);
  - `servd-pack verify COPY` exits 0 or 1 (never a signal).

What happened before the fix (2026-11-30, liblmdb 0.9.24 from Debian 12): liblmdb trusts page
contents. A node flag F_DUPDATA on a database without MDB_DUPSORT makes
mdb_cursor_get() write through a NULL xcursor (SIGSEGV at address 0x190); a damaged
page flag trips an mdb_assert (SIGABRT, "Assertion '!mc->mc_dbi || NUMKEYS(mp) > 1'
failed in mdb_page_search_root()"); a damaged page size in the newer meta page reads
past the mapping (SIGBUS). servd's validation walks every path and body with an LMDB
cursor (format/src/store_read.c foreach(), snapshot.c validate()), so it crashes at
startup and at SIGHUP; servd-pack verify walks the same way. The fix, a walk in a
separate process before the pack is mapped, is in docs/security.md §6.

Run: SERVD_BUILD_DIR=build python3 tests/e2e/test_harden_lmdb.py (about 30 s)."""
import collections
import concurrent.futures
import os
import shutil
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hardtest as ht  # noqa: E402
import servdtest as st  # noqa: E402
import test_harden_packs as hp  # noqa: E402
from servdtest import eq, ok  # noqa: E402

XOR = 0xff


def t_every_structure_byte(good):
    structure = ht.lmdb_structure(good.data)
    ok(len(structure) >= 1000, "only %d structure bytes found" % len(structure))
    # Under the sanitizers, every sixth byte from the second: half the copies, and bytes
    # the normal build's run (every third from the first) does not try.
    stride, first = (6, 1) if ht.sanitized() else (3, 0)
    stride = int(os.environ.get("SERVD_LMDB_STRIDE", stride))
    structure = {off: kind for i, (off, kind) in enumerate(sorted(structure.items()))
                 if i % stride == first % stride}

    def one(off):
        data = bytearray(good.data)
        data[off] ^= XOR
        path = hp.variant(good, "lmdb-%d" % off, bytes(data))
        res = ht.try_start(path, timeout=hp.REFUSE_LIMIT)
        if res[0] == "refused":
            start = "refused" if res[1] == 1 else "startup exit %d" % res[1]
        else:
            s = res[1]
            try:
                hp.served_bytes(good, s.port, "lmdb-%d" % off)
            except st.Fail:
                pass
            if s.alive():
                s.stop(check=False)
                start = "served"
            else:
                start = "serving exit %d" % s.proc.returncode
                s.proc = None
        try:
            v = subprocess.run([st.SERVD_PACK, "verify", path, "-q"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, timeout=hp.VERIFY_LIMIT).returncode
        except subprocess.TimeoutExpired:
            v = "hang"
        os.unlink(path)
        return off, start, v

    t0 = time.time()
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        results = list(pool.map(one, sorted(structure)))
    table = collections.Counter()
    example = {}
    for off, start, v in results:
        key = (structure[off], start, "verify %s" % v)
        table[key] += 1
        example.setdefault(key, off)
    print("  MEASURE %d structure bytes XOR 0x%02x in %.1f s:" % (
        len(results), XOR, time.time() - t0))
    for key, n in sorted(table.items()):
        off = example[key]
        print("    %4d  %-22s servd %-17s %-11s e.g. page %d offset %d" % (
            n, key[0], key[1], key[2], off // ht.LMDB_PAGE, off % ht.LMDB_PAGE))
    good.startup_crashes = [off for off, start, v in results
                            if start not in ("refused", "served")]
    bad_start = len(good.startup_crashes)
    bad_verify = [off for off, start, v in results if v not in (0, 1)]
    first = (good.startup_crashes or bad_verify or [0])[0]
    ok(bad_start == 0 and not bad_verify,
       "%d copies crash servd (at startup or while serving), %d crash or hang servd-pack "
       "verify (first: page %d offset %d)" % (
           bad_start, len(bad_verify), first // ht.LMDB_PAGE, first % ht.LMDB_PAGE))


def t_sighup_onto_structure_damage(good):
    """Each copy that crashed servd at startup, installed under a running servd with
    SIGHUP (or the first 60 structure bytes when none crashed)."""
    offs = getattr(good, "startup_crashes", None) or sorted(ht.lmdb_structure(good.data))[:60]
    live_dir = os.path.join(st.tmpdir(), "lmdb-live")
    os.makedirs(live_dir, exist_ok=True)
    live = os.path.join(live_dir, "site.lmdb")
    index = good.bodies[("/index.html", "identity")]
    died = []
    s = None
    for off in offs:
        if s is None or not s.alive():
            shutil.copyfile(good.path, live)
            s = ht.Proc(live, admin=True, extra=["--no-watch"]).start()
        data = bytearray(good.data)
        data[off] ^= XOR
        tmp = live + ".new"
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, live)
        m0 = s.metrics()
        before = m0["servd_pack_swap_failures_total"] + m0["servd_pack_swaps_total"]

        def settled():
            if not s.alive():
                return True
            try:
                m = s.metrics()
            except (st.Closed, OSError):
                return not s.alive()
            return m["servd_pack_swap_failures_total"] + m["servd_pack_swaps_total"] > before
        s.hup()
        ok(ht.wait_until(settled, hp.REFUSE_LIMIT),
           "offset %d: SIGHUP onto the damaged copy neither swapped nor refused it" % off)
        time.sleep(0.05)
        if not s.alive():
            died.append((off, s.proc.returncode))
            s.proc = None
            continue
        if st.get(s.port, "/").body != index:  # swapped: go back to the good pack
            shutil.copyfile(good.path, live)
            s.hup()
            ok(ht.wait_until(lambda: st.get(s.port, "/").body == index, hp.REFUSE_LIMIT),
               "offset %d: SIGHUP onto the good pack again did not swap back" % off)
    if s is not None and s.alive():
        s.stop()  # after the swaps: exit status 0, and no sanitizer report
    print("  MEASURE SIGHUP onto %d damaged copies: the running servd died %d times %s" % (
        len(offs), len(died), ", ".join("page %d offset %d (exit %d)" % (
            o // ht.LMDB_PAGE, o % ht.LMDB_PAGE, rc) for o, rc in died[:5])))
    eq(died, [], "running servd killed by SIGHUP onto a damaged pack (offset, exit status)")


def t_damaged_branch_key_is_refused(good):
    """A key in a branch page of the paths B-tree is read only by lookups: a walk with a
    cursor follows the child links and never compares them. One changed byte there sent
    every lookup of a whole range of paths to the wrong child (1890 of 3000 paths answered
    404) while servd's load check and servd-pack verify, both walks, passed the pack.
    Both now look every walked path up again."""
    root = os.path.join(st.tmpdir(), "many-paths")
    if not os.path.isdir(root):
        os.makedirs(root)
        for i in range(3000):
            with open(os.path.join(root, "p%05d.txt" % i), "wb") as f:
                f.write(b"file %d\n" % i)
    path = st.pack(root, "many-paths.lmdb")
    data = bytearray(open(path, "rb").read())
    node = None
    for pg in range(2, len(data) // ht.LMDB_PAGE):  # a branch page of the paths tree
        b = pg * ht.LMDB_PAGE
        flags, lower = struct.unpack_from("<HH", data, b + 10)
        n = (lower - 16) // 2
        if flags & 0x01 and n > 2:
            ptr = struct.unpack_from("<H", data, b + 16 + 2 * (n // 2))[0]
            ksize = struct.unpack_from("<H", data, b + ptr + 6)[0]
            if data[b + ptr + 8:b + ptr + 10] == b"/p":
                node = (pg, b + ptr + 8, ksize)
                break
    ok(node is not None, "the pack of 3000 paths has a branch page of paths")
    pg, key, ksize = node
    name = bytes(data[key:key + ksize]).decode()
    data[key + 1] = ord("~")  # "/p01500.txt" -> "/~01500.txt": sorts after every path
    bad = os.path.join(st.tmpdir(), "branch-key.lmdb")
    with open(bad, "wb") as f:
        f.write(data)
    res = ht.try_start(bad, timeout=hp.REFUSE_LIMIT)
    if res[0] != "refused":
        missing = st.get(res[1].port, "/" + name.lstrip("/")).status
        res[1].stop(check=False)
        ok(False, "servd served a pack whose branch key %s (page %d) is damaged: GET %s -> %d"
           % (name, pg, name, missing))
    eq(res[1], 1, "servd's exit status for the damaged branch key")
    v = subprocess.run([st.SERVD_PACK, "verify", bad, "-q"], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=hp.VERIFY_LIMIT)
    eq(v.returncode, 1, "servd-pack verify of the damaged branch key: %s" % v.stderr[-300:])
    ok(b"lookup does not find it" in v.stderr, "verify names the problem: %r" % v.stderr[-300:])


def t_every_command_survives_a_damaged_pack(good):
    """ls, cat, diff and build --base open packs too, and a node flag F_DUPDATA in the
    paths tree (a database without MDB_DUPSORT) made liblmdb crash them (SIGSEGV); only
    verify walked the pack in a child first. Each command now does, and exits 1 naming
    the file."""
    data = bytearray(good.data)
    for pg in range(2, len(data) // ht.LMDB_PAGE):  # the first leaf page of paths
        b = pg * ht.LMDB_PAGE
        flags, lower = struct.unpack_from("<HH", data, b + 10)
        if flags == 0x02 and lower > 16:
            ptr = struct.unpack_from("<H", data, b + 16)[0]
            nflags, ksize = struct.unpack_from("<HH", data, b + ptr + 4)
            if data[b + ptr + 8:b + ptr + 9] == b"/":
                struct.pack_into("<H", data, b + ptr + 4, nflags | 0x04)  # F_DUPDATA
                break
    else:
        ok(False, "no leaf page of paths in the pack of www/")
    bad = hp.variant(good, "dupdata", bytes(data))
    root = os.path.join(st.tmpdir(), "dupdata-root")
    os.makedirs(root, exist_ok=True)
    with open(os.path.join(root, "a.txt"), "w") as f:
        f.write("a\n")
    out = os.path.join(st.tmpdir(), "dupdata-out.lmdb")
    for args in (["ls", bad], ["cat", bad, "/index.html"], ["diff", bad, good.path],
                 ["diff", good.path, bad], ["verify", bad],
                 ["build", root, "-o", out, "--base", bad, "-q"]):
        r = subprocess.run([st.SERVD_PACK] + args, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=hp.VERIFY_LIMIT)
        eq(r.returncode, 1, "servd-pack %s: exit status (stderr %r)" % (args[0], r.stderr[-300:]))
        ok(b"corrupt pack" in r.stderr and bad.encode() in r.stderr,
           "servd-pack %s names the damaged file: %r" % (args[0], r.stderr[-300:]))
    ok(not os.path.exists(out), "build --base of a damaged pack wrote no pack")


def t_a_huge_last_page_is_damage_not_a_lack_of_memory(good):
    """LMDB maps (mm_last_pg + 1) pages of the newer meta page whatever map size it is
    given, so a damaged mm_last_pg made its mmap fail with ENOMEM: read as a lack of
    memory (no verdict, retried for ever) rather than as damage. The header check now
    refuses it before LMDB opens the file: "truncated pack", exit 1."""
    data = bytearray(good.data)
    psize = struct.unpack_from("<I", data, 40)[0]
    newer = psize if struct.unpack_from("<Q", data, psize + 144)[0] > \
        struct.unpack_from("<Q", data, 144)[0] else 0
    for last in (1 << 36, 1 << 40, 1 << 51):
        struct.pack_into("<Q", data, newer + 136, last)
        bad = hp.variant(good, "lastpg-%d" % last, bytes(data))
        p = subprocess.run([st.SERVD, "--check-pack", bad], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=hp.VERIFY_LIMIT)
        eq(p.returncode, 1, "servd --check-pack, mm_last_pg 2^%d: %r" % (
            last.bit_length() - 1, p.stdout[-200:]))
        ok(b"truncated pack" in p.stdout, "the reason: %r" % p.stdout[-200:])
        v = subprocess.run([st.SERVD_PACK, "verify", bad, "-q"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=hp.VERIFY_LIMIT)
        eq(v.returncode, 1, "servd-pack verify, mm_last_pg 2^%d" % (last.bit_length() - 1))
        os.unlink(bad)


if __name__ == "__main__":
    st.run(st.collect(globals()), setup=hp.Setup)
