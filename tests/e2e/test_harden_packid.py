#!/usr/bin/env python3
"""A byte changed inside an entry record after packing (docs/security.md, "pack id").

A pre-rendered header block is text that decodes whatever its letters are: before the
load check recomputed the pack id, servd served a flipped byte in one as stored
("Content-Type: text/qlain"). Now the check that servd runs on every new pack (servd
--check-pack, sf_pack_check_structure) recomputes the pack id over the path records,
as the packer does (sf_pack_id_compute), and refuses the pack when it differs from
meta's pack_id.

From a deterministic pack of a small site, copies with one letter of a header value
changed inside the pre-rendered 200 block of /a.txt (the Content-Type value, and a
digit of the Cache-Control max-age). The change is in LMDB's values, not its
structure: `servd-pack cat --headers` of the copy shows the changed header, so the
copy is a well-formed pack whose record says something the packer never wrote. For
each copy:
  (a) `servd --pack COPY` refuses to start: exit 1, naming the file and "pack id
      mismatch";
  (b) a running servd given the copy by rename + SIGHUP refuses it, counts it in
      servd_pack_swap_failures_total, logs the cause, and keeps serving the old pack
      (same body, ETag, Content-Type, pack id);
  (c) `servd-pack verify COPY` fails and says the pack id does not match.
And the good pack passes all three (so the refusals are about the flipped byte)."""
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hardtest as ht  # noqa: E402
import servdtest as st  # noqa: E402
from servdtest import eq, ok  # noqa: E402

# A refusal or a swap takes milliseconds; longer than this is a hang.
LIMIT = 10.0
A_TXT = b"hello, the pack id covers every byte of this record\n"
CAUSE = "pack id mismatch"


def run(cmd):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)


class Good:
    """A deterministic pack of a two-file site and damaged copies of it."""

    def __init__(self):
        root = os.path.join(st.tmpdir(), "packid-site")
        os.makedirs(root, exist_ok=True)
        with open(os.path.join(root, "a.txt"), "wb") as f:
            f.write(A_TXT)
        with open(os.path.join(root, "index.html"), "wb") as f:
            f.write(b"<!doctype html><title>pack id</title><p>index</p>\n")
        # A fixed SOURCE_DATE_EPOCH: the same pack bytes, so the same offsets, every run.
        os.environ["SOURCE_DATE_EPOCH"] = "1767225600"
        self.path = st.pack(root, "packid-good.lmdb")
        with open(self.path, "rb") as f:
            self.data = f.read()
        self.headers = self.cat_headers(self.path)
        ok("Content-Type: text/plain" in self.headers, "headers of /a.txt: %r" % self.headers)
        self.copies = [
            self.damaged("content-type", b"Content-Type: text/plain", b"text/p", b"text/q",
                         "Content-Type: text/qlain"),
            self.damaged("max-age", b"max-age=3600", b"max-age=3", b"max-age=9",
                         "max-age=9600"),
        ]

    @staticmethod
    def cat_headers(pack):
        p = run([st.SERVD_PACK, "cat", pack, "/a.txt", "--headers"])
        eq(p.returncode, 0, "servd-pack cat --headers %s: %s" % (pack, p.stderr.decode()))
        return p.stdout.decode(errors="replace")

    def damaged(self, name, anchor, old, new, shows):
        """A copy with old replaced by new (same length) at the first occurrence of
        anchor in the pack bytes; checks the copy still reads and shows the change."""
        at = self.data.find(anchor)
        ok(at >= 0, "%r not found in the pack bytes" % anchor)
        eq(self.data[at:at + len(anchor)].find(old) >= 0, True, "%r inside %r" % (old, anchor))
        at += self.data[at:at + len(anchor)].find(old)
        d = bytearray(self.data)
        d[at:at + len(old)] = new
        path = os.path.join(st.tmpdir(), "packid-%s.lmdb" % name)
        with open(path, "wb") as f:
            f.write(bytes(d))
        got = self.cat_headers(path)
        ok(shows in got, "%s: the copy does not show %r in /a.txt's headers (the byte at %d "
           "is not in the live record?): %r" % (name, shows, at, got))
        return name, path, bytes(d)


def t_good_pack_passes(good):
    """Control: the undamaged pack passes the load check and verify."""
    p = run([st.SERVD, "--check-pack", good.path])
    eq(p.returncode, 0, "servd --check-pack of the good pack: %s" % p.stdout.decode())
    p = run([st.SERVD_PACK, "verify", good.path, "-q"])
    eq(p.returncode, 0, "servd-pack verify of the good pack: %s" % p.stderr.decode())
    res = ht.try_start(good.path, timeout=LIMIT)
    ok(res[0] == "serving", "servd refused the good pack: %r" % (res[1:],))
    s = res[1]
    try:
        r = st.get(s.port, "/a.txt")
        eq(r.status, 200, "GET /a.txt status")
        eq(r.body, A_TXT, "GET /a.txt body")
    except BaseException:
        s.stop(check=False)
        raise
    s.stop()  # exit status 0 after SIGTERM


def start_refused(path, probe, says):
    """servd --pack PATH must refuse to start: @return (exit status, log). If it serves,
    fails with says(the response to GET probe)."""
    res = ht.try_start(path, timeout=LIMIT)
    if res[0] != "refused":
        try:
            r = st.get(res[1].port, probe)
        finally:
            res[1].stop(check=False)
        raise st.Fail(says(r))
    return res[1], res[2]


def t_startup_refuses_changed_record(good):
    """(a) servd --pack COPY exits 1 and names the file and the cause."""
    for name, path, _ in good.copies:
        rc, log = start_refused(path, "/a.txt", lambda r: (
            "%s: servd started on a pack whose record was changed, and serves Content-Type %r"
            % (name, r.get("Content-Type"))))
        eq(rc, 1, "%s: exit status of servd at startup\nlog: %s" % (name, log[-1500:]))
        ok(path in log, "%s: the refusal does not name %s: %r" % (name, path, log[-500:]))
        ok(CAUSE in log, "%s: the refusal does not say %r: %r" % (name, CAUSE, log[-500:]))
        print("  %s: %s" % (name, log.strip().splitlines()[-1][:200]))
        # the check itself, as servd spawns it
        p = run([st.SERVD, "--check-pack", path])
        eq(p.returncode, 1, "%s: servd --check-pack exit status" % name)
        ok(CAUSE in p.stdout.decode(), "%s: servd --check-pack says %r" % (
            name, p.stdout.decode()))


def t_swap_refuses_changed_record(good):
    """(b) rename + SIGHUP onto each copy: refused, counted, logged; the old pack keeps
    serving the same bytes."""
    live_dir = os.path.join(st.tmpdir(), "packid-live")
    os.makedirs(live_dir, exist_ok=True)
    live = os.path.join(live_dir, "site.lmdb")
    shutil.copyfile(good.path, live)
    with ht.Proc(live, admin=True, workers=2, extra=["--no-watch"]) as s:
        before = st.get(s.port, "/a.txt")
        eq(before.status, 200, "GET /a.txt on the good pack")
        pid0 = st.get(s.admin, "/healthz").body
        for name, _, data in good.copies:
            m0 = s.metrics()
            tmp = live + ".new"
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, live)
            s.hup()
            done = ht.wait_until(
                lambda: s.metrics()["servd_pack_swap_failures_total"]
                > m0["servd_pack_swap_failures_total"]
                or s.metrics()["servd_pack_swaps_total"] > m0["servd_pack_swaps_total"],
                LIMIT, step=0.01)
            ok(done, "%s: SIGHUP was neither a swap nor a refusal within %.0f s" % (name, LIMIT))
            m1 = s.metrics()
            eq(m1["servd_pack_swaps_total"], m0["servd_pack_swaps_total"],
               "%s: servd swapped in a pack whose record was changed" % name)
            eq(m1["servd_pack_swap_failures_total"], m0["servd_pack_swap_failures_total"] + 1,
               "%s: swap failures" % name)
            ok(s.alive(), "%s: servd died at the swap\nlog: %s" % (name, s.read_log()))
            r = st.get(s.port, "/a.txt")
            eq(r.status, 200, "%s: GET /a.txt after the refused swap" % name)
            eq(r.body, before.body, "%s: the old body keeps serving" % name)
            eq(r.get("ETag"), before.get("ETag"), "%s: the old ETag keeps serving" % name)
            eq(r.get("Content-Type"), before.get("Content-Type"),
               "%s: the old Content-Type keeps serving" % name)
            eq(r.get("Cache-Control"), before.get("Cache-Control"),
               "%s: the old Cache-Control keeps serving" % name)
            eq(st.get(s.admin, "/healthz").body, pid0, "%s: the pack id" % name)
        with open(s.log, "rb") as f:
            log = f.read().decode(errors="replace")
        eq(log.count(CAUSE), len(good.copies), "refusals logged with %r:\n%s" % (
            CAUSE, log[-1500:]))
        ok(live in log, "the refusals do not name %s: %s" % (live, log[-1500:]))


def t_verify_fails_on_changed_record(good):
    """(c) servd-pack verify fails on each copy and says why."""
    for name, path, _ in good.copies:
        p = run([st.SERVD_PACK, "verify", path, "-q"])
        err = p.stderr.decode(errors="replace")
        eq(p.returncode, 1, "%s: servd-pack verify exit status\n%s" % (name, err))
        ok("pack id does not match" in err, "%s: verify does not name the pack id: %r" % (
            name, err[-800:]))


def t_changed_404_record_is_refused(good):
    """The status:404 entry (the 404 page's own record, in meta, outside the paths the
    pack id covers) has its own id in meta since format 1.1 (id_404): a byte changed in
    its status line was served before ("404 Not Fount"); now the load check and verify
    refuse the copy, and the good pack still answers a missing path with its 404 page."""
    root = os.path.join(st.tmpdir(), "packid-404-site")
    os.makedirs(root, exist_ok=True)
    with open(os.path.join(root, "index.html"), "wb") as f:
        f.write(b"<!doctype html><title>index</title><p>index</p>\n")
    page = b"<!doctype html><title>missing</title><p>no such page</p>\n"
    with open(os.path.join(root, "404.html"), "wb") as f:
        f.write(page)
    path = st.pack(root, "packid-404-good.lmdb")
    with open(path, "rb") as f:
        data = f.read()
    anchor = b"HTTP/1.1 404 Not Found\r\n"
    eq(data.count(anchor), 1, "the 404 status line appears once in the pack")
    at = data.find(anchor) + len(b"HTTP/1.1 404 Not Foun")
    copy = os.path.join(st.tmpdir(), "packid-404-damaged.lmdb")
    with open(copy, "wb") as f:
        f.write(data[:at] + b"t" + data[at + 1:])

    p = run([st.SERVD, "--check-pack", path])
    eq(p.returncode, 0, "servd --check-pack of the good pack: %s" % p.stdout.decode())
    res = ht.try_start(path, timeout=LIMIT)
    ok(res[0] == "serving", "servd refused the good pack: %r" % (res[1:],))
    try:
        r = st.get(res[1].port, "/no/such/page")
        eq(r.status, 404, "GET of a missing path")
        eq(r.reason, "Not Found", "reason phrase")
        eq(r.body, page, "the 404 page")
    except BaseException:
        res[1].stop(check=False)
        raise
    res[1].stop()  # exit status 0 after SIGTERM

    p = run([st.SERVD, "--check-pack", copy])
    eq(p.returncode, 1, "servd --check-pack of the damaged 404 entry: %s" % p.stdout.decode())
    ok(CAUSE in p.stdout.decode(), "servd --check-pack says %r" % p.stdout.decode())
    rc, log = start_refused(copy, "/no/such/page", lambda r: (
        "servd started on a pack whose 404 entry was changed, and answers %d %s"
        % (r.status, r.reason)))
    eq(rc, 1, "exit status of servd at startup")
    ok(CAUSE in log, "the refusal does not say %r: %r" % (CAUSE, log[-500:]))
    p = run([st.SERVD_PACK, "verify", copy, "-q"])
    err = p.stderr.decode(errors="replace")
    eq(p.returncode, 1, "servd-pack verify of the damaged 404 entry: %s" % err)
    ok("status:404 entry was changed" in err, "verify does not name the 404 entry: %r" % (
        err[-800:],))
    p = run([st.SERVD_PACK, "verify", path, "-q"])
    eq(p.returncode, 0, "servd-pack verify of the good pack: %s" % p.stderr.decode())


class Setup:
    def __enter__(self):
        return Good()

    def __exit__(self, *a):
        return False


if __name__ == "__main__":
    st.run(st.collect(globals()), setup=Setup)
