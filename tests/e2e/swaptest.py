"""swaptest - what the pack-swap tests share (stdlib only; builds on servdtest).

  Versions(n)        n versions of one small site whose every file embeds its version marker,
                     packed with the real servd-pack; expected bytes and ETags of every
                     (version, path, encoding) read back with `servd-pack cat` / `ls --json`
  Live(dir)          a deploy directory: install a pack by rename (mv -T), by symlink flip,
                     or by replacing the symlink's target; read servd's /proc maps of it
  metrics(port)      the admin endpoint's samples as {name{labels}: value}
  rss_kib(pid)       VmRSS / RssAnon of a process
"""
import hashlib
import json
import os
import random
import shutil
import subprocess
import time

import servdtest as st
from servdtest import Fail, ok

ENCODINGS = ("identity", "gzip", "br", "zstd")


def _text(version, path, lines):
    """Compressible text in which every line names the version and the path, so any byte
    range of any variant comes from exactly one version."""
    rnd = random.Random("%s-%d" % (path, version))
    out = []
    for i in range(lines):
        out.append("version %d %s line %d %s\n" % (version, path, i, rnd.choice(
            ("alpha", "beta", "gamma", "delta", "epsilon"))))
    return "".join(out).encode()


def _binary(version, path, size):
    """Incompressible bytes (stored once, never precompressed), a version marker at the
    start of every 4 KiB block."""
    rnd = random.Random("%s-%d" % (path, version))
    out = bytearray()
    while len(out) < size:
        out += b"version %d %s\n" % (version, path.encode())
        out += rnd.randbytes(4096 - 32)
    return bytes(out[:size])


# path -> number of lines (about 40 bytes each) of compressible text: small pages, a
# script and a stylesheet with every precompressed variant. Kept small enough that the
# strongest compressors pack three versions in a few seconds, even in sanitizer builds.
SITE_SHAPE = {
    "/index.html": 20,
    "/about/index.html": 60,
    "/js/app.js": 1500,
    "/css/site.css": 4000,
    "/data/feed.json": 400,
    "/robots.txt": 2,
}
# path -> size of incompressible files: a large one whose response is still being written
# when swaps happen (larger than the loopback socket buffers take at once).
BINARY_SHAPE = {
    "/img/big.bin": 3 * 1024 * 1024 + 123,
}


class Versions:
    def __init__(self, n, tag="swap"):
        self.n = n
        self.packs = []
        self.files = []  # per version: {path: identity bytes}
        for v in range(1, n + 1):
            root = os.path.join(st.tmpdir(), "%s-site-v%d" % (tag, v))
            files = {p: _text(v, p, lines + v) for p, lines in SITE_SHAPE.items()}
            files.update({p: _binary(v, p, size + v) for p, size in BINARY_SHAPE.items()})
            if not os.path.isdir(root):
                for p, data in files.items():
                    full = os.path.join(root, p.lstrip("/"))
                    os.makedirs(os.path.dirname(full), exist_ok=True)
                    with open(full, "wb") as f:
                        f.write(data)
            self.files.append(files)
            self.packs.append(st.pack(root, "%s-v%d.lmdb" % (tag, v)))
        self.paths = sorted(files)
        self._expect = None

    def index(self, v):
        """The body of / in version v (1-based)."""
        return self.files[v - 1]["/index.html"]

    def expectations(self):
        """{(path, encoding): {etag: (version, bytes)}} from servd-pack itself."""
        if self._expect is not None:
            return self._expect
        out = {}
        for v, pk in enumerate(self.packs, 1):
            p = subprocess.run([st.SERVD_PACK, "ls", pk, "--json"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, timeout=60)
            if p.returncode != 0:
                raise Fail("servd-pack ls %s: %s" % (pk, p.stderr.decode()))
            for entry in json.loads(p.stdout):
                if entry.get("kind") != "file":
                    continue
                for var in entry["variants"]:
                    body = st.pack_cat(pk, entry["path"], var["encoding"])
                    ok(len(body) == var["size"], "servd-pack cat %s %s %s: %d bytes, ls says %d"
                       % (pk, entry["path"], var["encoding"], len(body), var["size"]))
                    slot = out.setdefault((entry["path"], var["encoding"]), {})
                    prev = slot.get(var["etag"])
                    ok(prev is None or prev[1] == body,
                       "one ETag %s for two bodies of %s (%s) in the packs themselves"
                       % (var["etag"], entry["path"], var["encoding"]))
                    slot[var["etag"]] = (v, body)
        for path in self.paths:
            ok((path, "identity") in out, "%s missing from the packs" % path)
        self._expect = out
        return out


class Live:
    """A deploy directory: live/site.lmdb, plus live/releases/ for symlink flips."""

    def __init__(self, name="live"):
        self.dir = os.path.join(st.tmpdir(), name)
        self.rel = os.path.join(self.dir, "releases")
        os.makedirs(self.rel, exist_ok=True)
        self.path = os.path.join(self.dir, "site.lmdb")
        self.seq = 0

    def _tmp(self, where):
        self.seq += 1
        return os.path.join(where, ".tmp-%d" % self.seq)

    def rename_in(self, src):
        """cp src live/.tmp; mv -T live/.tmp live/site.lmdb - a new file under the name."""
        tmp = self._tmp(self.dir)
        shutil.copyfile(src, tmp)
        os.rename(tmp, self.path)

    def release(self, src, name):
        """Copies src to releases/name (once) and returns its path."""
        dst = os.path.join(self.rel, name)
        if not os.path.exists(dst):
            tmp = self._tmp(self.rel)
            shutil.copyfile(src, tmp)
            os.rename(tmp, dst)
        return dst

    def flip(self, src, name):
        """ln -s releases/name live/.tmp; mv -T live/.tmp live/site.lmdb - a symlink flip."""
        self.release(src, name)
        tmp = self._tmp(self.dir)
        os.symlink(os.path.join("releases", name), tmp)
        os.rename(tmp, self.path)

    def replace_target(self, src, name):
        """Replaces releases/name (what the symlink points at) by a rename."""
        tmp = self._tmp(self.rel)
        shutil.copyfile(src, tmp)
        os.rename(tmp, os.path.join(self.rel, name))

    def write_bytes(self, data):
        tmp = self._tmp(self.dir)
        with open(tmp, "wb") as f:
            f.write(data)
        os.rename(tmp, self.path)

    def maps(self, pid):
        """Distinct files under this directory that process pid maps."""
        seen = []
        with open("/proc/%d/maps" % pid) as f:
            for line in f:
                parts = line.split(None, 5)
                if len(parts) == 6 and parts[5].strip().startswith(self.dir):
                    name = parts[5].strip()
                    if name not in seen:
                        seen.append(name)
        return seen

    def wait_one_mapped(self, pid, limit=10.0):
        """Waits until exactly one pack file under the directory is mapped, not deleted."""
        t0 = time.time()
        while True:
            m = self.maps(pid)
            if len(m) == 1 and "(deleted)" not in m[0]:
                return m
            if time.time() - t0 > limit:
                raise Fail("packs still mapped %.0f s after the last swap: %r" % (limit, m))
            time.sleep(0.05)


metrics = st.metrics  # the one /metrics parser (servdtest); callers here say sw.metrics


def wait_metric(port, name, want, limit=10.0):
    """Waits until metric name reaches want (>=); returns its value."""
    return st.wait_metrics(port, lambda m: m.get(name, 0) >= want, limit).get(name, 0)


def pack_id(admin_port):
    body = st.get(admin_port, "/healthz").body.decode().split()
    ok(body and body[0] == "ok", "/healthz: %r" % body)
    return body[1]


def status_kib(pid, field):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise Fail("%s not in /proc/%d/status" % (field, pid))


def sha(data):
    return hashlib.sha256(data).hexdigest()[:16]
