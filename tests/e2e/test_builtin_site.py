#!/usr/bin/env python3
"""The built-in sample site (servd(1) "BUILT-IN SITE"; PRODUCT.md: www/ is "also the embedded
default that servd serves when run with no pack"): servd without --pack logs that it serves
the built-in site and serves every file of www/ byte for byte, with the ETags servd-pack
gives www/ and www/404.html as its 404 page; the embedded pack is reproducible (every
Last-Modified is one fixed date, and the pack linked in is byte-identical to a fresh
`SOURCE_DATE_EPOCH=that servd-pack build www`); it lives in a sealed memory file, not on
disk; SIGHUP has nothing to reload and says so; /metrics names it.
"""
import calendar
import email.utils
import json
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servdtest as st  # noqa: E402
import swaptest as sw  # noqa: E402
from servdtest import eq, ok  # noqa: E402


class Builtin(st.Servd):
    """servd started with no --pack (servdtest.Servd always passes one)."""

    def __init__(self, extra=()):
        super().__init__(None, workers=2, extra=extra)

    def start(self):
        self.port = st.free_port()
        self.log = os.path.join(st.tmpdir(), "builtin-%d.log" % self.port)
        self.cmd = [st.SERVD, "--listen", "127.0.0.1:%d" % self.port, "--workers", "2"] + \
            self.extra
        with open(self.log, "wb") as logf:
            self.proc = subprocess.Popen(self.cmd, stdout=logf, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)
        t0 = time.time()
        while "servd: listening on" not in self.read_log():
            if self.proc.poll() is not None or time.time() - t0 > st.START_TIMEOUT:
                raise st.Fail("servd without --pack did not start (exit %s): %s" % (
                    self.proc.poll(), self.read_log()))
            time.sleep(0.02)
        return self


def www_listing():
    p = os.path.join(st.tmpdir(), "www-fresh.lmdb")
    if not os.path.exists(p):
        st.pack(st.WWW, "www-fresh.lmdb")
    out = subprocess.run([st.SERVD_PACK, "ls", p, "--json"], stdout=subprocess.PIPE,
                         check=True, timeout=60).stdout
    return {e["path"]: e for e in json.loads(out)}


def t_serves_www_without_a_pack(d):
    log = d.read_log()
    ok("no --pack given: serving the built-in sample site" in log, "log: %r" % log)
    files = st.site_files(st.WWW)
    ok(len(files) >= 10, "www/ has %d files" % len(files))
    listing = www_listing()
    lm = set()
    with st.Conn(d.port) as c:
        for path, data in sorted(files.items()):
            c.send(st.req("GET", st.url(path), [("Accept-Encoding", "identity")]))
            r = c.read_response()
            eq(r.status, 200, "GET %s" % path)
            ok(r.body == data, "%s: body differs from www%s" % (path, path))
            eq(r.need("ETag"), listing[path]["etag"], "%s: ETag" % path)
            lm.add(r.need("Last-Modified"))
            for var in listing[path]["variants"][1:]:
                c.send(st.req("GET", st.url(path), [("Accept-Encoding", var["encoding"])]))
                r = c.read_response()
                eq(st.content_encoding(r), var["encoding"], "%s: coding" % path)
                eq(r.need("ETag"), var["etag"], "%s (%s): ETag" % (path, var["encoding"]))
                eq(st.decode(r.body, var["encoding"]), data, "%s (%s): decoded" % (
                    path, var["encoding"]))
    eq(len(lm), 1, "Last-Modified values (one fixed date, not file times): %r" % lm)
    d.last_modified = calendar.timegm(email.utils.parsedate(lm.pop()))
    r = st.get(d.port, "/no/such/page")
    eq(r.status, 404, "missing path")
    eq(r.body, files["/404.html"], "the 404 page is www/404.html")


def t_the_embedded_pack_is_reproducible(d):
    built = os.path.join(st.BUILD_DIR, "builtin-site.lmdb")
    ok(os.path.exists(built), "%s missing (built by servd/embedded.cmake)" % built)
    fresh = os.path.join(st.tmpdir(), "www-epoch.lmdb")
    env = dict(os.environ, SOURCE_DATE_EPOCH=str(d.last_modified))
    p = subprocess.run([st.SERVD_PACK, "build", st.WWW, "-o", fresh, "-q"], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    eq(p.returncode, 0, "servd-pack build www: %s" % p.stderr.decode())
    with open(built, "rb") as a, open(fresh, "rb") as b:
        want = b.read()
        ok(a.read() == want, "the built-in pack differs from SOURCE_DATE_EPOCH=%d "
           "servd-pack build www (www/ changed without a rebuild, or packing is not "
           "reproducible)" % d.last_modified)
    # and it is what the running servd serves: its memory file, read through its descriptor
    fds = "/proc/%d/fd" % d.proc.pid

    def links():
        out = {}
        for n in os.listdir(fds):
            try:  # a socket closed since the listing is gone
                out[n] = os.readlink(os.path.join(fds, n))
            except FileNotFoundError:
                pass
        return out
    held = links()
    memfds = [n for n, target in held.items()
              if target.startswith("/memfd:servd-builtin-site")]
    ok(memfds, "servd holds no descriptor of its memory file: %r" % sorted(held.values()))
    with open(os.path.join(fds, memfds[0]), "rb") as f:
        ok(f.read() == want, "the pack servd serves differs from the one servd-pack builds")


def t_lives_in_a_sealed_memory_file(d):
    with open("/proc/%d/maps" % d.proc.pid) as f:
        maps = f.read()
    ok("/memfd:servd-builtin-site" in maps, "no memfd mapping of the built-in pack")
    ok(".lmdb" not in maps, "a pack file is mapped: %r" % [
        l for l in maps.splitlines() if ".lmdb" in l])


def t_sighup_has_nothing_to_reload(d):
    m0 = sw.metrics(d.adm)
    d.proc.send_signal(signal.SIGHUP)
    t0 = time.time()
    while time.time() - t0 < 5 and "there is no pack file to load" not in d.read_log():
        time.sleep(0.05)
    ok("SIGHUP: serving the built-in site; there is no pack file to load" in d.read_log(),
       "SIGHUP log: %r" % d.read_log()[-400:])
    m1 = sw.metrics(d.adm)
    eq(m1["servd_pack_swaps_total"], m0["servd_pack_swaps_total"], "swaps")
    eq(m1["servd_pack_swap_failures_total"], m0["servd_pack_swap_failures_total"], "refusals")
    eq(st.get(d.port, "/").status, 200, "still serving")
    ok('path="(built-in sample site)"' in st.get(d.adm, "/metrics").body.decode(),
       "servd_pack_info names the built-in site")


def t_help_shows_the_pack_as_optional(d):
    out = subprocess.run([st.SERVD, "--help"], stdout=subprocess.PIPE, timeout=30).stdout
    ok(b"Usage: servd [--pack SITE.lmdb]" in out and b"built-in sample site" in out,
       "--help: %r" % out[:300])


class Ctx:
    def __enter__(self):
        self.adm = st.free_port()
        self.d = Builtin(extra=["--admin", "127.0.0.1:%d" % self.adm]).start()
        self.d.adm = self.adm
        return self.d

    def __exit__(self, et, ev, tb):
        self.d.stop(check=et is None)


if __name__ == "__main__":
    st.run(st.collect(globals()), setup=Ctx)
