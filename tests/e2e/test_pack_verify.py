"""servd-pack verify: passes on a good pack; fails, naming what is wrong, on a flipped
byte in a stored body (identity or compressed), on a truncated file, and on a file that
is not a pack. Each damaged pack is a copy: the original keeps verifying."""
import collections
import hashlib
import json
import os
import random
import re
import shutil
import struct
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "pack"))
import packtest as T  # noqa: E402


def damaged_copy(src, dst, body, delta=0x20):
    """Copies the pack src to dst with one byte flipped in the middle of body. LMDB may
    leave stale copies of a value in the free space of split pages, so every occurrence
    is flipped (the live one among them)."""
    with open(src, "rb") as f:
        data = bytearray(f.read())
    at = data.find(body)
    if at < 0:
        raise SystemExit("body of %d bytes not found in %s" % (len(body), src))
    while at >= 0:
        data[at + len(body) // 2] ^= delta
        at = data.find(body, at + 1)
    with open(dst, "wb") as f:
        f.write(data)


def verify(pack):
    p = T.run(["verify", pack])
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def lmdb_leaf_nodes(data, ps=4096):
    """Yields (offset of the node, its flags, its key) for every node of every leaf page
    of an LMDB file (LMDB 0.9, 64-bit: page header of 16 bytes; a node is lo, hi, flags,
    ksize as 4 little-endian uint16, then the key, then the data or, with F_BIGDATA (1),
    the number of its first overflow page)."""
    for pg in range(len(data) // ps):
        o = pg * ps
        if struct.unpack_from("<Q", data, o)[0] != pg:
            continue
        flags, lower = struct.unpack_from("<HH", data, o + 10)
        if not flags & 0x02 or flags & 0x04 or lower > ps:  # P_LEAF, not P_OVERFLOW
            continue
        for i in range((lower - 16) // 2):
            no = o + struct.unpack_from("<H", data, o + 16 + 2 * i)[0]
            if no + 8 > o + ps:
                break
            nflags, ksize = struct.unpack_from("<HH", data, no + 4)
            yield no, nflags, bytes(data[no + 8:no + 8 + ksize])


def keys_no_request_reaches(work, good):
    """A pack whose path key is no normalised path (tests/fixtures/craft_pack.c writes one
    servd-pack never would) is damaged or hand-made: servd refuses it, verify names the key,
    diff prints no purge list from it, and ls lists it but fails."""
    for key in ("/../etc/passwd", "index.html"):
        bad = os.path.join(work, "bad-key.lmdb")
        subprocess.run([os.path.join(T.BUILD_DIR, "craft_pack"), bad, key], check=True)
        rc, _, err = verify(bad)
        T.eq(rc, 1, "verify of a pack with the key %r" % key)
        T.check("not a normalised path key" in err, "verify names the key %r: %r" % (key, err))
        for args in (["diff", good, bad], ["diff", bad, good], ["diff", good, bad, "--json"]):
            p = T.run(args)
            err = p.stderr.decode()
            T.eq(p.returncode, 1, "%s with the key %r: exit status (%s)" % (args, key, err))
            T.eq(p.stdout, b"", "%s with the key %r: no purge list" % (args, key))
            T.check("corrupt pack: a path key that is not a normalised URL path" in err,
                    "%s with the key %r: message %r" % (args, key, err))
        for args in (["ls", bad], ["ls", bad, "--json"]):
            p = T.run(args)
            err = p.stderr.decode()
            T.eq(p.returncode, 1, "%s with the key %r: exit status (%s)" % (args, key, err))
            T.check(key.encode() in p.stdout, "%s lists the key %r" % (args, key))
            T.check("corrupt pack: 1 path key is not a normalised URL path" in err,
                    "%s with the key %r: message %r" % (args, key, err))
    # A key that is not UTF-8: listed as its escaped text (JSON cannot hold the byte), and
    # the listing ends with the report on the key, not with a failure to write it.
    bad = os.path.join(work, "bad-utf8.lmdb")
    subprocess.run([os.path.join(T.BUILD_DIR, "craft_pack"), bad, b"/caf\xe9.html"], check=True)
    for args, shown in ((["ls", bad], b"/caf\\xe9.html\t"),
                        (["ls", bad, "--json"], b'"path": "/caf\\\\xe9.html"')):
        p = T.run(args)
        err = p.stderr.decode()
        T.eq(p.returncode, 1, "%s with a key that is not UTF-8: exit status (%s)" % (args, err))
        T.check(shown in p.stdout, "%s lists the key escaped: %r" % (args, p.stdout[:200]))
        T.check("corrupt pack: 1 path key is not a normalised URL path" in err,
                "%s with a key that is not UTF-8: message %r" % (args, err))
    listing = json.loads(T.run(["ls", bad, "--json"]).stdout)
    T.eq([e["path"] for e in listing], ["/caf\\xe9.html"], "the JSON listing's paths")
    # A pack of no path, consistent otherwise: servd refuses it (format.md 7), and verify
    # said OK.
    empty = os.path.join(work, "empty.lmdb")
    subprocess.run([os.path.join(T.BUILD_DIR, "craft_pack"), empty, ""], check=True)
    rc, _, err = verify(empty)
    T.eq(rc, 1, "verify of a pack of no path")
    T.check("the pack holds no paths, which servd refuses" in err, "verify says why: %r" % err)
    for args in (["ls", good], ["diff", good, good]):
        T.eq(T.run(args).returncode, 0, "%s of a good pack" % args)


def stored_redirect(work):
    """A stored redirect (format.md §4, kind 2; servd-pack writes none today, a pack of
    another writer may hold one): ls shows it as servd-pack(1) says, "-" for size,
    encodings and ETag and "redirect TARGET" for the type; --json gives path, kind and
    target only."""
    pack = os.path.join(work, "redirect.lmdb")
    subprocess.run([os.path.join(T.BUILD_DIR, "craft_pack"), pack, "/a.html", "/old b",
                    "/a.html"], check=True)
    p = T.run(["ls", pack])
    T.eq(p.returncode, 0, "ls of a pack with a redirect: " + p.stderr.decode())
    T.eq(p.stdout.decode().splitlines()[1], "/old b\t-\t-\t-\tredirect /a.html",
         "ls's line for the redirect")
    p = T.run(["ls", pack, "--json"])
    T.eq(p.returncode, 0, "ls --json of a pack with a redirect: " + p.stderr.decode())
    T.eq(json.loads(p.stdout)[1], {"path": "/old b", "kind": "redirect", "target": "/a.html"},
         "ls --json's object for the redirect")


def runaway_lengths(work):
    """A hostile pack whose value lengths run past the end of the file: LMDB takes a
    value's length from its node and never bounds it. Every command refuses the pack,
    naming it, instead of crashing (SIGSEGV in ls/diff, SIGBUS in verify, cat copying
    bytes from beyond the value, build --base crashing)."""
    root = os.path.join(work, "runaway")
    os.makedirs(root)
    blob = random.Random(3).randbytes(20000)  # incompressible: one identity body
    with open(os.path.join(root, "rand.bin"), "wb") as f:
        f.write(blob)
    with open(os.path.join(root, "index.html"), "wb") as f:
        f.write(b"<p>hello</p>\n")
    rules = os.path.join(work, "runaway-rules.json")
    with open(rules, "w") as f:  # a record over 2 KB: LMDB puts it in overflow pages
        f.write('{"headers": [{"match": "/index.html", "name": "X-Pad", "value": "%s"}]}' % ("p" * 3000))
    good = os.path.join(work, "runaway-good.lmdb")
    T.build(root, good, "--rules", rules)
    with open(good, "rb") as f:
        data = bytearray(f.read())
    huge = 0x7FFF0000

    def long_body(length):
        """A copy whose /rand.bin body is length bytes long: its node's length and the
        length its record gives (found by the body's key, which follows it)."""
        body = bytearray(data)
        nodes = [no for no, fl, k in lmdb_leaf_nodes(body) if fl & 1 and len(k) == 32 and
                 struct.unpack_from("<I", body, no)[0] == len(blob)]
        T.eq(len(nodes), 1, "one overflow body of %d bytes" % len(blob))
        struct.pack_into("<I", body, nodes[0], length)
        pat = struct.pack("<Q", len(blob)) + hashlib.sha256(blob).digest()
        at = body.find(pat)
        T.check(at >= 0, "the record of /rand.bin names its body")
        while at >= 0:
            struct.pack_into("<Q", body, at, length)
            at = body.find(pat, at + 1)
        return body

    # Longer than the file, and one byte past its end (shorter than the file: only
    # the view's place tells).
    body = long_body(huge)
    T.check(data.count(blob) == 1, "the body is stored once")
    past_end = long_body(len(data) - data.find(blob) + 1)

    # A record: its node's length (the record itself says nothing of its length).
    rec = bytearray(data)
    nodes = [no for no, fl, k in lmdb_leaf_nodes(rec) if fl & 1 and k == b"/index.html"]
    T.eq(len(nodes), 1, "the record of /index.html is in overflow pages")
    struct.pack_into("<I", rec, nodes[0], huge)

    other = os.path.join(work, "runaway-other")
    os.makedirs(other)
    with open(os.path.join(other, "rand.bin"), "wb") as f:
        f.write(blob)
    # Without /proc (a chroot), where the map is cannot be read from /proc/self/maps:
    # it is found from LMDB's page header instead, and the checks hold.
    no_proc = T.shim_env(HIDE_PROC_MAPS="1")
    p = T.run(["ls", good], env=no_proc)
    T.eq(p.returncode, 0, "ls of a good pack without /proc (%s)" % p.stderr.decode().strip())
    T.check(b"/rand.bin" in p.stdout, "ls without /proc lists the pack")
    T.eq(T.run(["cat", good, "/rand.bin"], env=no_proc).stdout, bytes(blob),
         "cat without /proc gives the body")
    # Without /proc/self/fd, the pack that was opened once cannot be checked and read
    # by that name: the message says so, not "No such file" about a file that is there.
    no_fd = T.shim_env(HIDE_PROC_FD="1")
    for args in (["ls", good], ["verify", good], ["cat", good, "/rand.bin"],
                 ["diff", good, good]):
        p = T.run(args, env=no_fd)
        err = p.stderr.decode()
        T.eq(p.returncode, 1, "%s without /proc/self/fd: exit status (%s)" % (args[0], err))
        T.check(good in err and "is /proc mounted?" in err and "No such file" not in err,
                "%s without /proc/self/fd: message %r" % (args[0], err))
    cases = [("body", body, "the identity body of /rand.bin is damaged", None),
             ("record", rec, "corrupt entry record for path /index.html", None),
             ("body-past-end", past_end, "the identity body of /rand.bin is damaged", None),
             ("body-past-end-no-proc", past_end, "the identity body of /rand.bin is damaged",
              no_proc)]
    for name, patched, what, env in cases:
        bad = os.path.join(work, "runaway-%s.lmdb" % name)
        with open(bad, "wb") as f:
            f.write(patched)
        for args in (["verify", bad], ["ls", bad], ["diff", good, bad], ["cat", bad, "/rand.bin"],
                     ["cat", bad, "/index.html"],
                     ["build", other, "-o", os.path.join(work, "o.lmdb"), "--base", bad, "-q"]):
            p = T.run(args, env=env)
            err = p.stderr.decode(errors="replace")
            T.eq(p.returncode, 1, "a %s length past the end of the file: %s exit status (%s)" %
                 (name, args[0], err.strip()))
            T.check(bad in err and what in err, "%s %s: message names the pack and the damage: %r" %
                    (name, args[0], err))
            T.eq(p.stdout, b"", "%s %s: nothing written to stdout" % (name, args[0]))


def out_of_memory(work):
    """build and verify short of memory. verify that runs out of memory has no
    verdict: a good pack is never called corrupt. A failed allocation inside the brotli or zstd decoder read as "not valid
    data", a failed realloc as "unknown encoding", and the pack was reported FAILED.
    Swept over address-space limits; not under AddressSanitizer, whose shadow memory
    needs an unlimited address space."""
    import resource
    if T.sanitized():
        print("SKIP (part): RLIMIT_AS under AddressSanitizer")
        return
    root = os.path.join(work, "large-site")
    os.makedirs(root)
    rng = random.Random(7)
    words = ["static", "origin", "pack", "servd", "memory", "bytes", "strong", "etag"]
    with open(os.path.join(root, "large.txt"), "w") as f:
        f.write(" ".join(rng.choice(words) + str(rng.randrange(1000)) for _ in range(300000)))
    pack = os.path.join(work, "large.lmdb")
    T.build(root, pack)
    seen = set()
    for mib in range(16, 97, 4):
        def limit(mib=mib):
            resource.setrlimit(resource.RLIMIT_AS, (mib << 20, resource.RLIM_INFINITY))
        p = T.run(["verify", pack], preexec_fn=limit)
        err = p.stderr.decode(errors="replace")
        if p.returncode == 0:
            seen.add("ok")
        else:
            T.eq(p.returncode, 1, "verify in %d MiB: exit status (%r)" % (mib, err))
            T.check("out of memory" in err and "FAILED" not in err,
                    "verify in %d MiB: out of memory, not a bad pack: %r" % (mib, err))
            seen.add("no memory")
    T.eq(sorted(seen), ["no memory", "ok"], "the sweep reached both outcomes")

    # build, short of memory for brotli's encoder: it called exit(1) itself, and the
    # build ended with no message at all. An error naming the file now; or, with
    # enough memory, the pack.
    out = os.path.join(work, "short.lmdb")
    br_failed = 0
    for mib in range(32, 257, 32):
        def limit(mib=mib):
            resource.setrlimit(resource.RLIMIT_AS, (mib << 20, resource.RLIM_INFINITY))
        p = T.run(["build", root, "-o", out, "-q", "--jobs", "1"], preexec_fn=limit)
        err = p.stderr.decode(errors="replace")
        if p.returncode == 0:
            T.eq(T.ls(out), T.ls(pack), "build in %d MiB: the pack of a build without a limit"
                 % mib)
            os.unlink(out)
            continue
        T.eq(p.returncode, 1, "build in %d MiB: exit status (%r)" % (mib, err))
        T.check(os.path.join(root, "large.txt") in err,
                "build in %d MiB: the message names the file: %r" % (mib, err))
        T.check(not os.path.exists(out), "build in %d MiB: no pack" % mib)
        br_failed += "br compression failed: out of memory" in err
    T.check(br_failed > 0, "the sweep reached brotli's encoder")



def allocation_failures(work):
    """Every command on a good pack, with the Nth allocation failing (fail_alloc.so),
    swept over N: it either does its whole job (exit 0, the same output) or fails with
    a message and no verdict. A listing printed without some of its variants and exit
    0, a double free in ls --json, "corrupt pack: LMDB error", "FAILED" and servd's
    check calling the pack corrupt were each found this way. Not under
    AddressSanitizer, whose allocator is never this one."""
    import subprocess
    if T.sanitized():
        print("SKIP (part): allocation failures under AddressSanitizer")
        return
    shim = os.path.join(T.BUILD_DIR, "fail_alloc.so")
    T.check(os.path.exists(shim), "%s is built with the tests" % shim)
    root = os.path.join(work, "alloc-site")
    T.make_site(root)
    good = os.path.join(work, "alloc.lmdb")
    other = os.path.join(work, "alloc-other.lmdb")
    T.eq(T.run(["build", root, "-o", good, "-q"]).returncode, 0, "build")
    shutil.copyfile(good, other)
    report = os.path.join(work, "alloc-report")
    servd = os.path.join(T.BUILD_DIR, "servd")

    def run(cmd, n, **extra):
        if os.path.exists(report):
            os.unlink(report)
        env = dict(os.environ, LD_PRELOAD=shim, FAIL_ALLOC_AT=str(n), FAIL_ALLOC_REPORT=report,
                   **extra)
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                           timeout=60)
        lines = open(report).read().split() if os.path.exists(report) else []
        calls = int(lines[lines.index("calls") + 1]) if "calls" in lines else 0
        return p, "hit" in lines, calls

    commands = [([T.PACK, "ls", "--json", good], 2), ([T.PACK, "ls", good], 3),
                ([T.PACK, "verify", good], 4), ([T.PACK, "cat", good, "/index.html"], 1),
                ([T.PACK, "diff", "--json", good, other], 2), ([servd, "--check-pack", good], 2)]
    for cmd, stride in commands:
        what = " ".join(os.path.basename(c) for c in cmd[:3])
        want, _, total = run(cmd, 0)
        T.eq(want.returncode, 0, "%s: exit status without a failure" % what)
        T.check(total > 10, "%s: allocations counted (%d)" % (what, total))
        hits = 0
        for n in range(1, total + 1, stride):
            p, hit, _ = run(cmd, n)
            if not hit:
                continue
            hits += 1
            err = p.stderr.decode(errors="replace") + p.stdout.decode(errors="replace")
            ok_status = (0, 3) if cmd[0] == servd else (0, 1)
            T.check(p.returncode in ok_status, "%s, allocation %d fails: exit status %d (%r)"
                    % (what, n, p.returncode, err[-300:]))
            if p.returncode == 0:
                T.check(p.stdout == want.stdout, "%s, allocation %d fails: exit 0 with other "
                        "output (%d bytes, not %d)" % (what, n, len(p.stdout), len(want.stdout)))
            T.check(not any(v in err for v in ("corrupt", "FAILED", "damaged")),
                    "%s, allocation %d fails: a verdict on a good pack: %r" % (what, n, err[-300:]))
        T.check(hits > total // stride // 2, "%s: the sweep failed allocations (%d)" % (what, hits))

    # build, on a one-file site (about a hundred allocations, every one swept): exit 0
    # only with the very pack and manifest a run without a failure writes. A failed hash
    # of the class tables once left "cls=00000000" in the pack's profile, with exit 0.
    # A failure never names a temporary file: the manifest's write said
    # "alloc-tiny.json.tmp-PID: cannot write: Cannot allocate memory" (2026-12-06).
    tiny = os.path.join(work, "alloc-tiny")
    os.makedirs(tiny)
    with open(os.path.join(tiny, "index.html"), "w") as f:
        f.write("<p>%s</p>\n" % ("hello, world " * 20))
    outs = [os.path.join(work, n) for n in ("alloc-tiny.lmdb", "alloc-tiny.json")]
    cmd = [T.PACK, "build", tiny, "-o", outs[0], "--manifest", outs[1], "-q"]
    epoch = {"SOURCE_DATE_EPOCH": "1700000000"}  # the same bytes at every run
    p, _, total = run(cmd, 0, **epoch)
    T.eq(p.returncode, 0, "build without a failure")
    want = [open(o, "rb").read() for o in outs]
    T.check(total > 10, "build: allocations counted (%d)" % total)
    hits = 0
    for n in range(1, total + 1):
        for o in outs:
            if os.path.exists(o):
                os.unlink(o)
        p, hit, _ = run(cmd, n, **epoch)
        if not hit:
            continue
        hits += 1
        err = p.stderr.decode(errors="replace")
        T.check(p.returncode in (0, 1), "build, allocation %d fails: exit status %d (%r)"
                % (n, p.returncode, err[-300:]))
        if p.returncode == 0:
            got = [open(o, "rb").read() for o in outs]
            T.check(got == want, "build, allocation %d fails: exit 0 with another pack or "
                    "manifest" % n)
        else:
            T.check(err.strip() != "", "build, allocation %d fails: exit 1 unexplained" % n)
            T.check(".tmp-" not in err, "build, allocation %d fails: %r" % (n, err[-300:]))
    T.check(hits > total // 2, "build: the sweep failed allocations (%d of %d)" % (hits, total))

    # build --base of the same site, every body taken from the base: a failure is never a
    # verdict on the base, and never names the pack's temporary file ("site.lmdb.tmp-PID:
    # cannot store the meta record" was out of memory). Running out of memory while re-hashing a body taken from it
    # was "base.lmdb: the br body of /t7.txt is corrupt (SHA-256 mismatch); run
    # servd-pack verify on it" (an audit, 2026-12-05), and verify then found it good.
    base = os.path.join(work, "alloc-base.lmdb")
    os.replace(outs[0], base)
    cmd = [T.PACK, "build", tiny, "-o", outs[0], "--base", base, "-q", "--jobs", "1"]
    p, _, total = run(cmd, 0, **epoch)
    T.eq(p.returncode, 0, "build --base without a failure")
    want = open(outs[0], "rb").read()
    hits = 0
    for n in range(1, total + 1):
        if os.path.exists(outs[0]):
            os.unlink(outs[0])
        p, hit, _ = run(cmd, n, **epoch)
        if not hit:
            continue
        hits += 1
        err = p.stderr.decode(errors="replace")
        T.check(p.returncode in (0, 1), "build --base, allocation %d fails: exit status %d "
                "(%r)" % (n, p.returncode, err[-300:]))
        if p.returncode == 0:
            T.check(open(outs[0], "rb").read() == want, "build --base, allocation %d fails: "
                    "exit 0 with another pack" % n)
        else:
            T.check(err.strip() != "" and "corrupt" not in err and ".tmp-" not in err and
                    ("SHA-256" not in err or "out of memory computing" in err),
                    "build --base, allocation %d fails: %r" % (n, err[-300:]))
    T.check(hits > total // 2, "build --base: the sweep failed allocations (%d)" % hits)

    # The new pack's map (its size and 64 MiB more, of address space) refused, as a limit
    # such as ulimit -v does (glibc reserves 64 MiB of it for each thread's heap, so
    # builds on several threads meet it first): that was "alloc-tiny.lmdb.tmp-PID:
    # Cannot allocate memory", naming a file the user never gave (an audit, 2026-12-05).
    # Any other allocation failing in LMDB is "out of memory", naming the pack (the --base
    # sweep above checks that no failure names the temporary file).
    if os.path.exists(outs[0]):
        os.unlink(outs[0])
    env = dict(os.environ, LD_PRELOAD=shim, FAIL_MMAP_OVER=str(32 << 20))
    p = subprocess.run([T.PACK, "build", tiny, "-o", outs[0], "-q"], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, env=env, timeout=60)
    err = p.stderr.decode(errors="replace")
    T.eq(p.returncode, 1, "a map refused: exit status")
    T.check(re.fullmatch(r"servd-pack: %s: cannot map \d+ MiB of address space for the new "
                         r"pack \(is it limited, as by ulimit -v\?\)\n" % re.escape(outs[0]), err),
            "a map refused: %r" % err)
    T.eq(sorted(n for n in os.listdir(work) if n.startswith("alloc-tiny.lmdb")), [],
         "nothing left beside the pack's name")


def meta_fields(work, good):
    """The meta record's own fields (docs/format.md §3), which readers ignore: a pack
    servd-pack wrote, with one of them changed in place, still lists, but verify fails
    naming the field, what it holds and what the format requires."""
    with open(good, "rb") as f:
        data = f.read()
    at = data.find(b"SERVDPK1")
    T.check(at >= 0 and data.find(b"SERVDPK1", at + 1) < 0, "one meta record in the pack")
    minor = struct.unpack_from("<H", data, at + 10)[0]
    n_paths, n_bodies, identity, stored = struct.unpack_from("<4Q", data, at + 24)
    cases = (
        ("reserved", 12, b"\x00\x00\x07\x00",
         "meta: the reserved bytes 12-15 hold 00 00 07 00 where the format requires 0"),
        ("profile", 136, b"r1 \xe2\x80\xae",
         "meta: the profile \"r1 \\u202e"),
        ("packer", 72 + 63, b"!",
         "meta: the packer field is not NUL-padded: byte 63"),
        # the summaries ls and the metrics show (format.md §3): each off by one
        ("n_paths", 24, struct.pack("<Q", n_paths + 1),
         "meta says %d paths, the pack has %d" % (n_paths + 1, n_paths)),
        ("n_bodies", 32, struct.pack("<Q", n_bodies + 1),
         "meta says %d bodies, the pack has %d" % (n_bodies + 1, n_bodies)),
        ("identity_bytes", 40, struct.pack("<Q", identity + 1),
         "meta says %d identity bytes, the entries add up to %d" % (identity + 1, identity)),
        ("stored_bytes", 48, struct.pack("<Q", stored + 1),
         "meta says %d stored bytes, the bodies add up to %d" % (stored + 1, stored)),
    )
    for name, off, raw, want in cases:
        bad = os.path.join(work, "meta-%s.lmdb" % name)
        with open(bad, "wb") as f:
            f.write(data[:at + off] + raw + data[at + off + len(raw):])
        rc, _, err = verify(bad)
        T.eq(rc, 1, "verify of a pack whose meta %s was changed (%s)" % (name, err))
        T.check(want in err, "verify names the meta %s: %r" % (name, err))
        T.eq(T.run(["ls", bad]).returncode, 0, "ls of a pack whose meta %s was changed" % name)
    # A newer minor (format.md §9: readers accept every minor; servd serves it) is said,
    # not failed: an older servd-pack verifying a newer one's pack before a deploy.
    newer = os.path.join(work, "meta-minor.lmdb")
    with open(newer, "wb") as f:
        f.write(data[:at + 10] + struct.pack("<H", minor + 1) + data[at + 12:])
    rc, out, err = verify(newer)
    T.eq(rc, 0, "verify of a pack of a newer minor (%s)" % err)
    T.check("warning: %s: meta: minor is %d, a format version this servd-pack does not know"
            % (newer, minor + 1) in err, "verify says the minor is newer: %r" % err)
    T.check(" OK" in out, "verify of a pack of a newer minor: OK (%r)" % out)


def record_at(data, key, ps=4096):
    """The offset in data of the record stored under key (a path, or status:404), in its
    leaf node or, for a record too large for one (F_BIGDATA), its overflow pages."""
    for no, nflags, k in lmdb_leaf_nodes(data, ps):
        if k == key:
            at = no + 8 + len(key)
            if nflags & 0x01:
                return struct.unpack_from("<Q", data, at)[0] * ps + 16
            return at
    T.check(False, "a record under %r" % key)
    return 0


def entry_bits(work, good):
    """An entry's flag bits its format minor does not define and a variant's reserved
    bytes (format.md §4, §5) are written as 0 and ignored by readers: in a pack servd-pack
    wrote, set in place, in a path's record and in the status:404 entry, verify names
    them (besides the pack id that no longer matches)."""
    with open(good, "rb") as f:
        data = f.read()
    cases = (
        ("path-flags", b"/index.html", 2, 0x04,
         "/index.html: its flags 0x%04x set bits format minor"),
        ("404-reserved", b"status:404", 32 + 72 + 2, 0x01,
         "status:404: the gzip variant's reserved bytes are 0x000100 where the format "
         "requires 0"),
    )
    for name, key, off, bit, want in cases:
        at = record_at(data, key) + off
        T.eq(data[at] & bit, 0, "%s: the bit is 0 as written" % name)
        if "%" in want:
            want = want % (struct.unpack_from("<H", data, at)[0] | bit)
        bad = os.path.join(work, "bits-%s.lmdb" % name)
        with open(bad, "wb") as f:
            f.write(data[:at] + bytes([data[at] | bit]) + data[at + 1:])
        rc, _, err = verify(bad)
        T.eq(rc, 1, "verify of a pack with %s set (%s)" % (name, err))
        T.check(want in err, "verify names %s: %r (wanted %r)" % (name, err, want))


def record_fields(work):
    """An entry record changed in place (format.md §4, §5) the way a tool that writes
    packs by hand might get it wrong: verify names the field and the path. Where the
    change alters what an ETag is derived from (the type, the rule lines), the ETags are
    forged to match first, so that verify looks past them at the lines themselves."""
    root = os.path.join(work, "fields")
    T.make_site(root)
    rules = os.path.join(work, "fields.json")
    with open(rules, "w") as f:
        json.dump({"cache_control": [{"match": "**", "value": "public, max-age=60"}],
                   "headers": [{"match": "**", "name": "X-Test", "value": "abcdefgh"}]}, f)
    good = os.path.join(work, "fields.lmdb")
    T.build(root, good, "--rules", rules)
    with open(good, "rb") as f:
        data = f.read()

    def span(d, key):
        at = record_at(d, key)
        return at, 32 + 72 * d[at + 1] + struct.unpack_from("<I", d, at + 4)[0]

    def replace(key, old, new):
        def change(d):
            at, n = span(d, key)
            rec = bytes(d[at:at + n])
            T.check(old in rec and len(old) == len(new), "%r in the record of %r" % (old, key))
            d[at:at + n] = rec.replace(old, new)
        return change

    def field(key, off, fmt, value):
        def change(d):
            at, _ = span(d, key)
            struct.pack_into(fmt, d, at + off, value)
        return change

    def forge_etags(bad, d):
        """Writes, over each ETag verify says is not derived, the one it derives."""
        _, _, err = verify(bad)
        for old, new in re.findall(r'ETag ("[^"]{22}") is not derived from its body, type '
                                   r'and headers \(("[^"]{22}")\)', err):
            replace(b"/index.html", old.encode(), new.encode())(d)

    idx = b"/index.html"
    cases = (
        ("rule-nul", [replace(idx, b"abcdefgh", b"abc\x00efgh")], True,
         "/index.html: the identity 200 header block holds a NUL byte after its fixed lines"),
        ("rule-lf", [replace(idx, b"abcdefgh\r\n", b"abcdefgh\n\n")], True,
         "/index.html: the identity 200 header block ends in a line without CRLF after its "
         "fixed lines"),
        ("rule-colon", [replace(idx, b"X-Test: ", b"X-Test:x")], True,
         "/index.html: the identity 200 header block has a line that is not \"Name: value\" "
         "after its fixed lines"),
        ("rule-control", [replace(idx, b"abcdefgh", b"abc\x01efgh")], True,
         "/index.html: the identity 200 header block has a line whose value no header may "
         "hold after its fixed lines"),
        ("cache-control", [replace(idx, b"max-age=60", b"max-age\x0160")], False,
         "/index.html: the identity Cache-Control value \"public, max-age\\x0160\" has a "
         "control character"),
        # mime_len cut to 4: "text"
        ("type", [field(idx, 20, "<I", 4)], True,
         "/index.html: its type \"text\" is not a media type"),
        # the 404's variants have neither: its etag pair pointed at the blob's first byte
        ("404-etag", [field(b"status:404", 32 + 4, "<I", 0), field(b"status:404", 32 + 8, "<I", 1)],
         False, "status:404: the identity variant has an ETag or a 304 block"),
        ("date", [field(idx, 8, "<q", 1 << 60)], False,
         "/index.html: the identity header blocks cannot be rendered again (a date out of range)"),
        # the reader's own checks, before verify's: a body key that names no body, a length
        ("body-key", [field(idx, 32 + 40, "<B", data[record_at(data, idx) + 72] ^ 1)], False,
         "corrupt pack: the identity body of /index.html is missing"),
        ("body-length", [field(idx, 32 + 32, "<Q", struct.unpack_from(
            "<Q", data, record_at(data, idx) + 64)[0] + 1)], False,
         "corrupt pack: the identity body of /index.html is damaged (its length is wrong"),
        # the negotiable flag cleared on an entry of four variants (format.md §4)
        ("flags", [field(idx, 2, "<H", struct.unpack_from(
            "<H", data, record_at(data, idx) + 2)[0] & ~1)], False,
         "corrupt pack: corrupt entry record for path /index.html"),
        # nvariants of the 404 entry past the 4 encodings: refused as the pack opens
        ("404-nvariants", [field(b"status:404", 1, "<B", 9)], False,
         "corrupt pack: the 404 entry cannot be read: corrupt record"),
    )
    for name, changes, forge, want in cases:
        bad = os.path.join(work, "field-%s.lmdb" % name)
        d = bytearray(data)
        for change in changes:
            change(d)
        with open(bad, "wb") as f:
            f.write(d)
        if forge:
            forge_etags(bad, d)
            with open(bad, "wb") as f:
                f.write(d)
        rc, _, err = verify(bad)
        T.eq(rc, 1, "verify of a pack with its %s changed (%s)" % (name, err))
        T.check(want in err, "verify names the %s: %r (wanted %r)" % (name, err, want))
        T.check("is not derived" not in err, "%s: the ETags were forged: %r" % (name, err))


def identity_shared(work):
    """A flipped byte in a text's identity body that 25 paths share: no variant decodes
    to it, and verify says so once, naming the body whose bytes do not match its key,
    not 75 times that a variant "does not decompress to the identity body" (which hid
    the one message that names the fault past the first 20)."""
    root = os.path.join(work, "shared")
    os.makedirs(root)
    text = "".join("line %d of a text that 25 pages share\n" % i for i in range(200))
    for i in range(25):
        with open(os.path.join(root, "p%02d.txt" % i), "w") as f:
            f.write(text)
    good = os.path.join(work, "shared.lmdb")
    T.build(root, good)
    bad = os.path.join(work, "shared-flip.lmdb")
    damaged_copy(good, bad, text.encode())
    rc, _, err = verify(bad)
    T.eq(rc, 1, "verify after flipping a byte of a shared identity body")
    T.check("SHA-256" in err and "the identity variant of /p" in err,
            "verify names the identity body at fault: " + err)
    T.check("does not decompress" not in err, "no variant is blamed: " + err)


def main():
    with T.TempDir() as work:
        root = os.path.join(work, "site")
        T.make_site(root)
        good = os.path.join(work, "good.lmdb")
        T.build(root, good, "--manifest", good + ".json")
        rc, out, err = verify(good)
        T.eq(rc, 0, "verify of a good pack (stderr: %s)" % err)
        # the pack id, as the manifest (and servd's /healthz) say it, for a deploy script
        # that has the pack and not its manifest
        with open(good + ".json") as f:
            pid = json.load(f)["pack_id"]
        T.check(out.startswith("%s: OK: pack %s, " % (good, pid)) and out.endswith(
            " bytes re-hashed\n"), "verify reports OK and the pack id %s: %r" % (pid, out))

        # A flipped byte in an identity body (a large one: stored in overflow pages).
        photo = T.cat(good, "/img/photo.png")
        bad = os.path.join(work, "flip-identity.lmdb")
        damaged_copy(good, bad, photo)
        rc, _, err = verify(bad)
        T.eq(rc, 1, "verify after flipping a byte of /img/photo.png")
        T.check("/img/photo.png" in err and "SHA-256" in err, "message names the path: " + err)
        T.check(bad in err, "message names the pack: " + err)

        # A flipped byte in a small compressed body (stored inside a leaf page).
        br = T.cat(good, "/index.html", "br")
        bad = os.path.join(work, "flip-br.lmdb")
        damaged_copy(good, bad, br)
        rc, _, err = verify(bad)
        T.eq(rc, 1, "verify after flipping a byte of the br body of /index.html")
        T.check("/index.html" in err and "br" in err, "message names the path and encoding: " + err)

        # Truncated files.
        size = os.path.getsize(good)
        with open(good, "rb") as f:
            data = f.read()
        for cut in (size // 2, size - 4096, size - 1):
            trunc = os.path.join(work, "trunc-%d.lmdb" % cut)
            with open(trunc, "wb") as f:
                f.write(data[:cut])
            rc, _, err = verify(trunc)
            T.eq(rc, 1, "verify of a pack cut to %d of %d bytes" % (cut, size))
            T.check(trunc in err, "message names the truncated pack: " + err)

        # The good pack is still good.
        T.eq(verify(good)[0], 0, "the original pack still verifies")

        # Not a pack at all.
        junk = os.path.join(work, "junk.lmdb")
        with open(junk, "wb") as f:
            f.write(b"\x00" * 8192)
        rc, _, err = verify(junk)
        T.eq(rc, 1, "verify of zeros")
        T.check(junk in err, "message names the file: " + err)

        keys_no_request_reaches(work, good)
        stored_redirect(work)
        meta_fields(work, good)
        entry_bits(work, good)
        record_fields(work)
        identity_shared(work)
        runaway_lengths(work)
        out_of_memory(work)
        allocation_failures(work)
    T.finish("test_pack_verify")


if __name__ == "__main__":
    main()
