#!/usr/bin/env python3
"""No leaks across pack swaps (issue 6 item 5). servd serves pack A; SWAPS times (10 by
default, HARDEN_SWAPS=40 for the recorded run) the pack path is replaced by the other
pack (every fifth time by garbage first, which must be refused) and servd gets SIGHUP;
between swaps it serves every file, ranges, 404s, a pipelined batch, and one large
response that is still being written when the swap happens (so an old snapshot stays
pinned across it). Then SIGTERM.

- In an AddressSanitizer build (the sanitizer ctest run), LeakSanitizer checks at exit:
  a leak makes servd exit non-zero with a LeakSanitizer report, which fails the test.
- In a normal build, servd runs under valgrind --leak-check=full: definitely and
  indirectly lost must be 0 bytes and the error summary 0 errors.

Memory must also stay flat: in a normal build without a checker, VmRSS after the last
swap may exceed VmRSS after swap RSS_FROM by at most RSS_GROWTH_KIB."""
import os
import re
import shutil
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hardtest as ht  # noqa: E402
import servdtest as st  # noqa: E402
from servdtest import eq, ok  # noqa: E402

SWAPS = int(os.environ.get("HARDEN_SWAPS", "10"))
RSS_FROM = min(5, SWAPS // 2)
# Allocator noise (glibc arenas, valgrind's own bookkeeping), not per-swap growth:
# a leaked snapshot or map would cost far more per swap.
RSS_GROWTH_KIB = 1024
# Under valgrind everything is ~20x slower.
SWAP_LIMIT = 30.0


def make_site(tag):
    root = os.path.join(st.tmpdir(), "leak-site-" + tag)
    files = {
        "/index.html": ("<html><body>site %s</body></html>\n" % tag).encode(),
        "/big.txt": b"".join(b"%s line %06d, compressible text for the variants\n"
                             % (tag.encode(), i) for i in range(20000)),  # ~1 MB
        "/only-%s.txt" % tag: b"only in " + tag.encode() + b"\n",
        "/docs/index.html": b"<p>docs " + tag.encode() + b"</p>\n",
        "/404.html": b"<p>missing</p>\n",
    }
    if not os.path.isdir(root):
        for path, data in files.items():
            full = os.path.join(root, path.lstrip("/"))
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "wb") as f:
                f.write(data)
    return st.pack(root, "leak-%s.lmdb" % tag), files


def exercise(s, files, tag):
    """Serves every file in every coding, a range, a 404, a redirect, pipelined."""
    seq = []
    for path in sorted(files):
        for enc in ("identity", "gzip", "br", "zstd"):
            seq.append(st.req("GET", path, [("Accept-Encoding", enc)]))
    seq.append(st.req("GET", "/big.txt", [("Range", "bytes=0-9,100-199,-5")]))
    seq.append(st.req("GET", "/nope"))
    seq.append(st.req("GET", "/docs"))
    seq.append(st.req("HEAD", "/big.txt"))
    with st.Conn(s.port, timeout=SWAP_LIMIT) as c:
        c.send(b"".join(seq))
        for i in range(len(seq)):
            r = c.read_response("HEAD" if seq[i].startswith(b"HEAD") else "GET")
            ok(r.status in (200, 206, 301, 404), "%s: request %d: status %d" % (tag, i, r.status))
    r = st.get(s.port, "/only-%s.txt" % tag)
    eq((r.status, r.body), (200, files["/only-%s.txt" % tag]), "%s: a file only it has" % tag)


def start_in_flight(port):
    """A large response that stays partly unread across the next swap."""
    c = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8192)
    c.settimeout(SWAP_LIMIT)
    c.connect(("127.0.0.1", port))
    c.sendall(st.req("GET", "/big.txt", [("Connection", "close")]))
    return c


def finish_in_flight(c, want, what):
    data = b""
    while True:
        chunk = c.recv(1 << 16)
        if not chunk:
            break
        data += chunk
    c.close()
    ok(data.endswith(want), "%s: the response in flight across the swap is not the old body "
       "(%d bytes)" % (what, len(data)))


def valgrind_summary(log):
    with open(log) as f:
        text = f.read()

    def lost(kind):
        m = re.search(kind + r" lost: ([\d,]+) bytes in ([\d,]+) blocks", text)
        return int(m.group(1).replace(",", "")) if m else 0
    m = re.search(r"ERROR SUMMARY: ([\d,]+) errors", text)
    ok(m is not None, "valgrind wrote no summary: %s" % text[-1500:])
    return lost("definitely"), lost("indirectly"), int(m.group(1).replace(",", "")), text


def run_swaps(mode):
    """Runs the swap sequence on a fresh servd under mode ("valgrind", "LeakSanitizer"
    or "plain"); returns (exit status, servd log, valgrind log path, {swap: VmRSS})."""
    pa, fa = make_site("a")
    pb, fb = make_site("b")
    live_dir = os.path.join(st.tmpdir(), "leak-live-%d" % len(os.listdir(st.tmpdir())))
    os.makedirs(live_dir, exist_ok=True)
    live = os.path.join(live_dir, "site.lmdb")
    shutil.copyfile(pa, live)
    env, wrapper, vlog = {}, [], None
    if mode == "LeakSanitizer":
        env = {"ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0:exitcode=23"}
    elif mode == "valgrind":
        if shutil.which("valgrind") is None:
            raise st.Fail("valgrind is not installed (tests/deps.sh test installs it)")
        vlog = os.path.join(st.tmpdir(), "valgrind-%d.log" % os.getpid())
        wrapper = ["valgrind", "--leak-check=full", "--show-leak-kinds=definite,indirect",
                   "--errors-for-leak-kinds=definite,indirect", "--error-exitcode=99",
                   "--log-file=" + vlog]
    t0 = time.time()
    s = ht.Proc(live, workers=2, admin=True, wrapper=wrapper, env=env,
                start_timeout=60).start()
    rss = {}
    try:
        exercise(s, fa, "a")
        for i in range(1, SWAPS + 1):
            src, files, tag = (pb, fb, "b") if i % 2 else (pa, fa, "a")
            old = fa if tag == "b" else fb
            m0 = s.metrics()
            if i % 5 == 0:  # a refused swap first: its failure path must not leak either
                tmp = live + ".new"
                with open(tmp, "wb") as f:
                    f.write(os.urandom(8192))
                os.replace(tmp, live)
                s.hup()
                ok(ht.wait_until(lambda: s.metrics()["servd_pack_swap_failures_total"]
                                 > m0["servd_pack_swap_failures_total"], SWAP_LIMIT),
                   "swap %d: garbage was not refused" % i)
            flight = start_in_flight(s.port)
            time.sleep(0.05)
            tmp = live + ".new"
            shutil.copyfile(src, tmp)
            os.replace(tmp, live)
            s.hup()
            ok(ht.wait_until(lambda: s.metrics()["servd_pack_swaps_total"]
                             > m0["servd_pack_swaps_total"], SWAP_LIMIT),
               "swap %d was not done within %.0f s" % (i, SWAP_LIMIT))
            finish_in_flight(flight, old["/big.txt"], "swap %d" % i)
            exercise(s, files, tag)
            rss[i] = ht.rss_kib(s.proc.pid)
        # The --pack watch may load a replacement before the SIGHUP arrives; SIGHUP then
        # loads the same file once more (a SIGHUP always reloads). So each replacement
        # is one or two loads.
        m = s.metrics()
        ok(SWAPS <= m["servd_pack_swaps_total"] <= 2 * SWAPS, "%d swaps counted for %d "
           "replacements" % (m["servd_pack_swaps_total"], SWAPS))
        ok(SWAPS // 5 <= m["servd_pack_swap_failures_total"] <= 2 * (SWAPS // 5),
           "%d refusals counted for %d garbage files" % (
               m["servd_pack_swap_failures_total"], SWAPS // 5))
    except BaseException:
        s.stop(check=False)
        raise
    rc = s.terminate(timeout=120)  # valgrind's leak check runs at exit
    print("  MEASURE %s, %d swaps (%d refused) in %.1f s: VmRSS after swap %d %d KiB, after "
          "swap %d %d KiB (%+d KiB); every swap: %s" % (
              mode, SWAPS, SWAPS // 5, time.time() - t0, RSS_FROM, rss[RSS_FROM], SWAPS,
              rss[SWAPS], rss[SWAPS] - rss[RSS_FROM], " ".join(str(rss[k]) for k in sorted(rss))),
          flush=True)
    return rc, s.read_log(), vlog, rss


def t_swaps_without_leaks():
    """valgrind (normal build) or LeakSanitizer (ASan build): nothing lost. Their VmRSS
    is not servd's own (valgrind's bookkeeping, ASan's quarantine and size classes grow
    with every freed block), so memory flatness is the next test's job."""
    mode = "LeakSanitizer" if ht.sanitized() else "valgrind"
    rc, log, vlog, rss = run_swaps(mode)
    if mode == "valgrind":
        definite, indirect, errors, text = valgrind_summary(vlog)
        print("  MEASURE valgrind: definitely lost %d B, indirectly lost %d B, %d errors"
              % (definite, indirect, errors), flush=True)
        eq((definite, indirect), (0, 0), "bytes lost (definitely, indirectly); valgrind log:\n"
           + text[-3000:])
        eq(errors, 0, "valgrind errors; log:\n" + text[-3000:])
    else:
        ok("ERROR: LeakSanitizer" not in log, "LeakSanitizer found leaks:\n" + log[-4000:])
        ok("ERROR: AddressSanitizer" not in log, "AddressSanitizer report:\n" + log[-4000:])
        print("  MEASURE LeakSanitizer: no report at exit", flush=True)
    eq(rc, 0, "servd exit status after SIGTERM; log:\n%s" % log[-2000:])


def t_swaps_memory_flat():
    """Without any checker (and not in an ASan build, whose allocator grows by design):
    VmRSS after the last swap is within RSS_GROWTH_KIB of VmRSS after swap RSS_FROM."""
    if ht.sanitized():
        raise st.Skip("an AddressSanitizer build: its allocator's RSS is not servd's; the "
                      "normal build runs this check")
    rc, log, vlog, rss = run_swaps("plain")
    eq(rc, 0, "servd exit status after SIGTERM; log:\n%s" % log[-2000:])
    ok(rss[SWAPS] - rss[RSS_FROM] <= RSS_GROWTH_KIB,
       "VmRSS grew by %d KiB from swap %d to swap %d" % (rss[SWAPS] - rss[RSS_FROM],
                                                       RSS_FROM, SWAPS))


if __name__ == "__main__":
    st.run(st.collect(globals()))
