#!/usr/bin/env python3
"""Hostile pack files (issue 6 item 3). From a valid pack of www/, copies that are
truncated (at 12 lengths), wrong-magic (servd's meta magic, LMDB's meta magic),
wrong-version (servd's major version, LMDB's format version) and bit-flipped (FLIPS
single-bit flips, 240 or 120 under the sanitizers, at offsets drawn with a fixed seed
per build kind: a third inside stored bodies, a third in entry records and keys, a third
anywhere else; the pack is built with a fixed SOURCE_DATE_EPOCH so offsets reproduce).
Bytes that are LMDB's own structure (page headers, node pointers and headers, meta pages)
are left to test_harden_lmdb.py: damage there used to crash liblmdb inside servd
(docs/security.md §6).

For each copy, `servd --pack COPY` must either
  - refuse it at startup: exit status 1 (never a signal, never a sanitizer report)
    with a message naming the file, within REFUSE_LIMIT seconds; or
  - start (the flip hit bytes nobody checks at startup: inside a body, in free space,
    in an unused field) and then answer every path in every encoding, a 404 and a
    Range without crashing, and stop with exit 0 on SIGTERM;
and `servd-pack verify COPY` must never crash or hang, and must fail, naming the path,
whenever the flipped byte is part of a stored body. A copy that servd starts on must be
served byte for byte like the good pack: servd's load check hashes every body against
its key and recomputes the pack id over the entry records, so a flip that would change
a served body or pre-rendered header block is refused (test_harden_packid.py shows one
such record change in detail).

At a swap: a servd serving the good pack gets each refused copy (and a sample of the
accepted ones) installed over its pack path and a SIGHUP: a refused copy is logged,
counted in servd_pack_swap_failures_total, and the old content keeps being served;
an accepted copy is swapped in and served without a crash. The test runs in well
under a minute (the flips run on two threads)."""
import concurrent.futures
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hardtest as ht  # noqa: E402
import servdtest as st  # noqa: E402
from servdtest import eq, ok  # noqa: E402

# Under the sanitizers, half as many flips from another seed: other offsets, in half the
# time.
FLIPS, SEED = (120, 7) if ht.sanitized() else (240, 6)
# servd validates the whole pack at startup; a refusal or a start takes milliseconds
# (an ASan build: well under a second). Longer than this is a hang.
REFUSE_LIMIT = 10.0
VERIFY_LIMIT = 20.0
ENCODINGS = ("identity", "gzip", "br", "zstd")


class Good:
    """The good pack, its paths, and where each stored body lies in its bytes."""

    def __init__(self):
        # A fixed SOURCE_DATE_EPOCH makes the pack, and so every flipped offset, the same
        # on every run: a failure names an offset that reproduces.
        os.environ["SOURCE_DATE_EPOCH"] = "1767225600"
        self.path = st.pack(st.WWW, "harden-www.lmdb")
        with open(self.path, "rb") as f:
            self.data = f.read()
        p = subprocess.run([st.SERVD_PACK, "ls", self.path], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=60)
        eq(p.returncode, 0, "servd-pack ls of the good pack: %s" % p.stderr.decode())
        self.paths = {}  # url path -> encodings stored
        for line in p.stdout.decode().splitlines():
            f = line.split("\t")
            encs = ["identity"] + ([e.split(":")[0] for e in f[2].split(",")]
                                   if f[2] != "-" else [])
            self.paths[f[0]] = encs
        ok(len(self.paths) >= 10, "www/ pack has only %d paths" % len(self.paths))
        self.bodies = {}  # (path, enc) -> bytes
        self.spans = []  # (start, end, path, enc) for every occurrence of every body
        for path, encs in self.paths.items():
            for enc in encs:
                body = st.pack_cat(self.path, path, enc)
                self.bodies[(path, enc)] = body
                at = self.data.find(body)
                while at >= 0 and len(body) > 0:
                    self.spans.append((at, at + len(body), path, enc))
                    at = self.data.find(body, at + 1)
        ok(self.spans, "no stored body found in the pack bytes")
        self.size = len(self.data)
        with ht.Proc(self.path) as s:
            self.served = serve_all(self, s, "the good pack")

    def bodies_at(self, off):
        return [(p, e) for a, b, p, e in self.spans if a <= off < b]

    def request_all(self):
        """Every path in every encoding, a 404 and two ranges, pipelined."""
        reqs = []
        for path, encs in sorted(self.paths.items()):
            for enc in ENCODINGS:
                reqs.append(st.req("GET", st.url(path), [("Accept-Encoding", enc)]))
        reqs.append(st.req("GET", "/definitely-missing"))
        reqs.append(st.req("GET", "/index.html", [("Range", "bytes=1-5,-3")]))
        reqs.append(st.req("HEAD", "/index.html"))
        return reqs


def variant(good, name, data):
    path = os.path.join(st.tmpdir(), "hostile-%s.lmdb" % name)
    with open(path, "wb") as f:
        f.write(data)
    return path


def flipped(good, off, bit):
    d = bytearray(good.data)
    d[off] ^= 1 << bit
    return bytes(d)


def fixed_variants(good):
    """(name, bytes) of the truncated, wrong-magic and wrong-version copies."""
    out = []
    n = good.size
    for cut in (0, 1, 16, 100, 4095, 4096, 4097, 8192, n // 4, n // 2, n - 4096, n - 1):
        out.append(("truncated-%d" % cut, good.data[:cut]))
    d = bytearray(good.data)
    i = d.find(b"SERVDPK1")
    ok(i >= 0, "servd's meta magic SERVDPK1 not found in the pack")
    for j, c in ((0, b"X"), (7, b"2")):
        dd = bytearray(d)
        dd[i + j:i + j + 1] = c
        out.append(("servd-magic-%d" % j, bytes(dd)))
    dd = bytearray(d)
    dd[i + 8] += 1  # major version, u16 LE after the magic
    out.append(("servd-major+1", bytes(dd)))
    # LMDB's two meta pages: magic 0xBEEFC0DE at byte 16 of the page, version at 20.
    lmdb_magic = bytes.fromhex("dec0efbe")
    for page in (0, 4096):
        eq(bytes(d[page + 16:page + 20]), lmdb_magic, "LMDB meta magic at page offset %d" % page)
    dd = bytearray(d)
    dd[16] ^= 0xff
    dd[4096 + 16] ^= 0xff
    out.append(("lmdb-magic", bytes(dd)))
    dd = bytearray(d)
    dd[20] += 1
    dd[4096 + 20] += 1
    out.append(("lmdb-version+1", bytes(dd)))
    out.append(("zeros", b"\0" * n))
    out.append(("all-ones", b"\xff" * n))
    return out


def flip_offsets(good):
    """FLIPS (offset, bit) pairs drawn with a fixed seed from three strata, none of them
    LMDB's own structure (see hardtest.lmdb_structure; test_harden_lmdb.py flips
    every one of those bytes): stored bodies; entry records and path keys (around
    each pre-rendered 200 block: the fixed fields, the variant descriptors, the blob);
    anywhere else (free space, the meta record, body keys)."""
    rnd = random.Random(SEED)
    structure = ht.lmdb_structure(good.data)
    covered = set()
    for start, end, _, _ in good.spans:
        covered.update(range(start, end))
    in_body = sorted(covered - set(structure))
    records = set()
    at = good.data.find(b"HTTP/1.1 ")
    while at >= 0:
        records.update(range(max(0, at - 400), min(good.size, at + 300)))
        at = good.data.find(b"HTTP/1.1 ", at + 1)
    records = sorted(records - covered - set(structure))
    rest = sorted(set(range(good.size)) - covered - set(records) - set(structure))
    third = FLIPS // 3
    offs = []
    for pool, n in ((in_body, third), (records, third), (rest, FLIPS - 2 * third)):
        ok(len(pool) >= n, "flip stratum too small: %d bytes" % len(pool))
        offs += rnd.sample(pool, n)
    return [(o, rnd.randrange(8)) for o in offs]


def sanitizer_report(log):
    return "Sanitizer" in log or "runtime error:" in log


def served_bytes(good, port, what):
    """Every request of good.request_all() pipelined on one connection, the last with
    "Connection: close"; returns all the bytes servd sent until it closed, without the
    Date lines (the only bytes not taken from the pack)."""
    reqs = good.request_all() + [st.req("GET", "/", [("Connection", "close")])]
    with st.Conn(port, timeout=REFUSE_LIMIT) as c:
        c.send(b"".join(reqs))
        out = b""
        while True:
            try:
                chunk = c.sock.recv(1 << 16)
            except ConnectionResetError:
                break
            except OSError as e:
                raise st.Fail("%s: servd sent %d bytes, then nothing for %.0f s (%s)" % (
                    what, len(out), REFUSE_LIMIT, e))
            if not chunk:
                break
            out += chunk
    return re.sub(rb"\r\nDate: [^\r\n]*", b"", out)


def serve_all(good, s, what):
    """Every path in every encoding served without servd dying or hanging, and a new
    connection served afterwards. Returns what was served (see served_bytes)."""
    raw = served_bytes(good, s.port, what)
    ok(s.alive(), "%s: servd died while serving\nlog: %s" % (what, s.read_log()))
    ok(raw.startswith(b"HTTP/1.1 "), "%s: no response at all (%r)" % (what, raw[:100]))
    with st.Conn(s.port, timeout=REFUSE_LIMIT) as c:
        c.send(st.req("GET", "/definitely-missing", [("Connection", "close")]))
        first = c.sock.recv(100)
    ok(first.startswith(b"HTTP/1"), "%s: a new connection afterwards got %r" % (what, first))
    return raw


def verify(pack):
    t0 = time.time()
    try:
        p = subprocess.run([st.SERVD_PACK, "verify", pack, "-q"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=VERIFY_LIMIT)
    except subprocess.TimeoutExpired:
        raise st.Fail("servd-pack verify %s hung (> %.0f s)" % (pack, VERIFY_LIMIT))
    err = p.stderr.decode(errors="replace")
    ok(p.returncode in (0, 1) and not sanitizer_report(err),
       "servd-pack verify %s: exit %d (a crash?)\n%s" % (pack, p.returncode, err[-2000:]))
    return p.returncode, err, time.time() - t0


def check_startup(good, name, data):
    """Starts servd on one hostile copy; returns 'refused' or 'served' and details."""
    path = variant(good, name, data)
    t0 = time.time()
    res = ht.try_start(path, timeout=REFUSE_LIMIT)
    if res[0] == "refused":
        _, rc, log = res
        ok(rc == 1 and not sanitizer_report(log),
           "%s: servd exited with %s at startup (want 1)\n%s" % (name, rc, log[-3000:]))
        ok(path in log and "servd:" in log, "%s: the refusal does not name the file: %r"
           % (name, log[-500:]))
        os.unlink(path)
        return "refused", log.strip().splitlines()[-1], time.time() - t0
    s = res[1]
    try:
        raw = serve_all(good, s, name)
    except BaseException:
        s.stop(check=False)
        raise
    s.stop()  # exit 0 after SIGTERM, else Fail
    return "served", raw != good.served, time.time() - t0


def check_verify(good, name, data, off):
    """verify must never crash; it must fail when the flip changed a stored body."""
    path = variant(good, name + "-v", data)
    rc, err, took = verify(path)
    changed = []
    for p, e in good.bodies_at(off):
        c = subprocess.run([st.SERVD_PACK, "cat", path, p, "--encoding", e],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=VERIFY_LIMIT)
        if c.returncode != 0 or c.stdout != good.bodies[(p, e)]:
            changed.append((p, e))
    if changed:
        ok(rc == 1, "%s: verify passed a pack whose body of %s (%s) changed" % (
            name, changed[0][0], changed[0][1]))
        ok(any(p in err for p, e in changed), "%s: verify does not name %s: %r" % (
            name, changed[0][0], err[-500:]))
    os.unlink(path)
    return rc, bool(changed)


def t_fixed_variants_refused(good):
    """Truncated, wrong-magic, wrong-version, zeroed: always refused at startup, with a
    cause; verify fails on each."""
    causes = {}
    for name, data in fixed_variants(good):
        kind, detail, took = check_startup(good, name, data)
        eq(kind, "refused", "%s: servd started on it" % name)
        rc, err, _ = verify(variant(good, name + "-v", data))
        eq(rc, 1, "%s: servd-pack verify exit status" % name)
        causes[name] = detail
    for name in ("servd-major+1",):
        ok("version" in causes[name], "%s: cause %r" % (name, causes[name]))
    for name, cause in sorted(causes.items()):
        print("  %-16s %s" % (name, cause[:110]))


def t_bit_flips(good):
    """FLIPS single-bit flips: refused or served without a crash; verify is exact about
    stored bodies."""
    flips = flip_offsets(good)
    eq(len(flips), FLIPS, "number of flips")

    def one(item):
        off, bit = item
        name = "flip-%d-%d" % (off, bit)
        data = flipped(good, off, bit)
        try:
            kind, detail, took = check_startup(good, name, data)
            rc, in_body = check_verify(good, name, data, off)
            if kind == "served" and detail:
                # servd served something else than from the good pack (a body or a
                # pre-rendered header block changed): verify must see it.
                ok(rc == 1, "servd served different bytes, yet servd-pack verify passed")
        except st.Fail as e:
            raise st.Fail("byte %d bit %d (%s): %s" % (off, bit, "in a body" if good.bodies_at(
                off) else "outside bodies", e))
        return off, bit, kind, detail, rc, in_body, took

    t0 = time.time()
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        results = list(pool.map(one, flips))
    refused = [r for r in results if r[2] == "refused"]
    served = [r for r in results if r[2] == "served"]
    differs = [r for r in served if r[3]]
    body_hits = [r for r in results if r[5]]
    causes = {}
    for r in refused:
        cause = re.sub(r"^servd: refusing to start: [^:]*: ", "", r[3])
        cause = re.sub(r"path \S+", "path P", cause)[:90]
        causes[cause] = causes.get(cause, 0) + 1
    print("  MEASURE %d flips in %.1f s: %d refused at startup, %d served (%d served other "
          "bytes than the good pack; %d changed a stored body); verify failed on %d, and on "
          "every one of those; slowest case %.2f s" % (
              len(results), time.time() - t0, len(refused), len(served), len(differs),
              len(body_hits), len([r for r in results if r[4] == 1]),
              max(r[6] for r in results)), flush=True)
    for cause, n in sorted(causes.items(), key=lambda kv: -kv[1])[:10]:
        print("    %3d x %s" % (n, cause))
    ok(len(body_hits) >= FLIPS // 6, "only %d flips changed a stored body" % len(body_hits))
    first = differs[0][:2] if differs else (0, 0)
    ok(not differs, "%d accepted flips served other bytes than the good pack (the load check "
       "missed them), e.g. byte %d bit %d" % (len(differs), first[0], first[1]))
    ok(len(refused) >= 5, "only %d flips were refused: the checks look blind" % len(refused))
    good.refused_flips = [(r[0], r[1]) for r in refused]
    good.served_flips = [(r[0], r[1]) for r in served]


def t_swaps_to_hostile_packs(good):
    """SIGHUP onto each bad copy: refused, logged, counted; the old pack keeps serving.
    SIGHUP onto a copy that servd accepts: swapped in and served without a crash."""
    live_dir = os.path.join(st.tmpdir(), "hostile-live")
    os.makedirs(live_dir, exist_ok=True)
    live = os.path.join(live_dir, "site.lmdb")
    shutil.copyfile(good.path, live)
    index = good.bodies[("/index.html", "identity")]
    bad = fixed_variants(good)
    if not hasattr(good, "refused_flips"):
        raise st.Fail("t_bit_flips did not run first: it finds the flipped copies used here")
    ok(good.refused_flips and good.served_flips, "t_bit_flips found %d refused and %d served "
       "copies" % (len(good.refused_flips), len(good.served_flips)))
    bad += [("flip-%d-%d" % fb, flipped(good, *fb)) for fb in good.refused_flips[:40]]
    ok_copies = [("flip-%d-%d" % fb, flipped(good, *fb)) for fb in good.served_flips[:10]]

    def install(data):
        tmp = live + ".new"
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, live)

    # --no-watch: each bad copy is loaded once, by the SIGHUP, not also by the watch
    with ht.Proc(live, admin=True, workers=2, extra=["--no-watch"]) as s:
        pid0 = st.get(s.admin, "/healthz").body
        for name, data in bad:
            m0 = s.metrics()
            install(data)
            s.hup()
            done = ht.wait_until(lambda: s.metrics()["servd_pack_swap_failures_total"]
                                 > m0["servd_pack_swap_failures_total"]
                                 or s.metrics()["servd_pack_swaps_total"]
                                 > m0["servd_pack_swaps_total"], REFUSE_LIMIT, step=0.01)
            m1 = s.metrics()
            ok(done, "%s: SIGHUP was neither a swap nor a refusal within %.0f s"
               % (name, REFUSE_LIMIT))
            eq(m1["servd_pack_swaps_total"], m0["servd_pack_swaps_total"],
               "%s: swapped in a pack that servd refuses at startup" % name)
            ok(s.alive(), "%s: servd died at the swap\nlog: %s" % (name, s.read_log()))
            eq(st.get(s.port, "/").body, index, "%s: the old pack keeps serving" % name)
            eq(st.get(s.admin, "/healthz").body, pid0, "%s: the pack id" % name)
        with open(s.log, "rb") as f:  # all of it (read_log() keeps only the tail)
            log = f.read().decode(errors="replace")
        ok(log.count("refused") >= len(bad), "%d refusals logged for %d bad swaps:\n%s" % (
            log.count("refused"), len(bad), log[-1500:]))
        ok(live in log, "the refusals do not name %s" % live)
        for name, data in ok_copies:
            m0 = s.metrics()
            install(data)
            s.hup()
            done = ht.wait_until(lambda: s.metrics()["servd_pack_swaps_total"]
                                 > m0["servd_pack_swaps_total"]
                                 or s.metrics()["servd_pack_swap_failures_total"]
                                 > m0["servd_pack_swap_failures_total"], REFUSE_LIMIT,
                                 step=0.01)
            ok(done, "%s: SIGHUP had no effect" % name)
            eq(s.metrics()["servd_pack_swaps_total"], m0["servd_pack_swaps_total"] + 1,
               "%s: a copy servd serves at startup is swapped in" % name)
            serve_all(good, s, "after swapping to " + name)
        install(good.data)
        s.hup()
        ok(ht.wait_until(lambda: st.get(s.port, "/").body == index, REFUSE_LIMIT),
           "back on the good pack")
        print("  %d refused swaps, %d accepted swaps of flipped copies; servd swaps/failures "
              "%d/%d" % (len(bad), len(ok_copies), s.metrics()["servd_pack_swaps_total"],
                         s.metrics()["servd_pack_swap_failures_total"]))


class Setup:
    def __enter__(self):
        return Good()

    def __exit__(self, *a):
        return False


if __name__ == "__main__":
    if not st.www_exists():
        print("www/index.html missing: nothing to pack")
        sys.exit(1)
    st.run(st.collect(globals()), setup=Setup)
