"""cdntest - helpers for the tests that put real caches in front of servd (stdlib only).

What it gives a test script (on top of servdtest):
  make_site(root)        a generated site: compressible text in /vary, /stale, /range, HTML
                         in /page and /index.html, an incompressible /blob.bin; RULES gives
                         /stale/** a max-age of 1 s and /page/** an s-maxage of 1 s (max-age=0,
                         must-revalidate), so that a cache sees those objects go stale
  Origin(root, rules)    packs the site and runs servd behind a recording relay:
                         .port (what a cache must talk to: the relay), .direct (servd itself),
                         .requests() (every request head the cache sent to the origin),
                         .log() (servd's access log, parsed), .metrics()
  Varnish(origin_port)   varnishd -F on a free port with its own work dir and VCL
                         (NORMALISE_AE: the Accept-Encoding normalisation docs/cdn.md shows)
  TrafficServer(port)    traffic_server with its own runroot (config, cache, logs) in a temp dir
  fetch(port, path, hdrs)  one request on a fresh connection with http.client (the caches may
                         answer chunked); the body is never decoded
  Variants(pack, path)   the stored bytes and ETag of every encoding of a path
  check_post_body_keeps_connection(origin, cache, what)
                         chunked POSTs through a cache pointed at origin.direct keep the
                         cache's origin connection

The caches run as child processes of the test, never as daemons, on 127.0.0.1 only, with all
their state in a directory the test removes. Nothing outside that directory is touched.
"""
import collections
import http.client
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time

import servdtest as st
from servdtest import Fail, eq, ok

# How long a cache may take to start (varnishd compiles its VCL with cc; traffic_server
# initialises its cache file).
CACHE_START_TIMEOUT = 30.0
# How long a test waits for servd's access log writer (it flushes about once a second).
LOG_TIMEOUT = 5.0
# Seconds of freshness the rules give /stale/**: short enough for a test to wait it out.
STALE_MAX_AGE = 1

RULES = {
    "comment": "cdn tests: /stale/** goes stale after %d s, everything else keeps the defaults"
               % STALE_MAX_AGE,
    "cache_control": [
        {"match": "/stale/**", "value": "public, max-age=%d" % STALE_MAX_AGE},
        {"match": "/page/**", "value": "public, max-age=0, s-maxage=%d, must-revalidate"
                                        % STALE_MAX_AGE},
    ],
}

_WORDS = ("origin cache vary range etag gzip brotli zstd pack servd swap deploy header "
          "request response bytes stale fresh revalidate purge edge client proxy map "
          "lookup variant identity encoding length content date age via keep alive").split()


def _text(seed, size):
    """Deterministic compressible text of about size bytes (lines of pseudo-random words)."""
    rng = random.Random(seed)
    out = []
    n = 0
    line = 0
    while n < size:
        s = "%06d %s\n" % (line, " ".join(rng.choice(_WORDS) for _ in range(rng.randint(6, 14))))
        out.append(s)
        n += len(s)
        line += 1
    return "".join(out).encode()


def make_site(root):
    """Writes the CDN test site under root; returns {url path: bytes}."""
    files = {"/index.html": b"<!doctype html><title>cdn test</title>\n<pre>\n"
                            + _text("index", 6000) + b"</pre>\n"}
    for i in range(1, 7):
        files["/vary/%d.txt" % i] = _text("vary%d" % i, 20000)
        files["/stale/%d.json" % i] = b'{"lines": "' + _text("stale%d" % i, 8000).replace(
            b"\n", b" ") + b'"}\n'
        files["/range/%d.txt" % i] = _text("range%d" % i, 150000)
        files["/page/%d.html" % i] = b"<!doctype html><title>page %d</title>\n<pre>\n" % i \
            + _text("page%d" % i, 5000) + b"</pre>\n"
    files["/blob.bin"] = random.Random("blob").randbytes(40000)
    st.write_tree(root, files)
    return files


# ---- what the pack holds ----

class Variants:
    """The stored representations of one path: .enc[coding] = (etag, bytes)."""

    def __init__(self, pack_path, path):
        p = subprocess.run([st.SERVD_PACK, "ls", pack_path, "--json"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=60)
        if p.returncode != 0:
            raise Fail("servd-pack ls --json failed: %s" % p.stderr.decode())
        entry = [e for e in json.loads(p.stdout) if e["path"] == path]
        ok(len(entry) == 1, "path %s not in the pack" % path)
        e = entry[0]
        self.enc = {"identity": (e["etag"], st.pack_cat(pack_path, path))}
        for v in e["variants"]:
            if v["encoding"] != "identity":
                self.enc[v["encoding"]] = (v["etag"], st.pack_cat(pack_path, path, v["encoding"]))

    def etag(self, coding="identity"):
        return self.enc[coding][0]

    def body(self, coding="identity"):
        return self.enc[coding][1]


# ---- a recording relay between the cache and servd ----

class Request:
    """One request head as the cache sent it to the origin."""

    def __init__(self, head):
        lines = head.decode("latin-1").split("\r\n")
        self.line = lines[0]
        parts = self.line.split(" ")
        self.method = parts[0]
        self.target = parts[1] if len(parts) > 1 else ""
        self.headers = []
        for ln in lines[1:]:
            if ln:
                name, _, value = ln.partition(":")
                self.headers.append((name.strip(), value.strip()))

        self.response = None  # the OriginResponse servd sent back, once it has

    def get(self, name):
        vals = [v for k, v in self.headers if k.lower() == name.lower()]
        return ", ".join(vals) if vals else None

    @property
    def path(self):
        return self.target.split("?")[0]

    def __repr__(self):
        return "<%s %s -> %r>" % (self.line, self.headers, self.response)


class OriginResponse:
    """The head of one response servd sent to the cache (the body is only counted)."""

    def __init__(self, head):
        lines = head.decode("latin-1").split("\r\n")
        self.status = int(lines[0].split(" ")[1])
        self.headers = []
        for ln in lines[1:]:
            if ln:
                name, _, value = ln.partition(":")
                self.headers.append((name.strip(), value.strip()))
        self.body_bytes = 0

    def get(self, name):
        vals = [v for k, v in self.headers if k.lower() == name.lower()]
        if len(vals) > 1:
            raise Fail("servd sent %d %s lines: %r" % (len(vals), name, self.headers))
        return vals[0] if vals else None

    def __repr__(self):
        return "<%d %r>" % (self.status, self.headers)


class Relay:
    """127.0.0.1:port -> 127.0.0.1:target, byte for byte, recording every request head that
    passes and the head of servd's answer to it. It shows what a cache really asks the
    origin (Accept-Encoding, If-None-Match, Range, Via) and what servd answered (a 304 with
    its headers, a 206). The caches only send GET and HEAD without bodies, and servd frames
    every response by Content-Length, so the streams split exactly."""

    def __init__(self, target):
        self.target = target
        self.lock = threading.Lock()
        self.heads = []
        self.errors = []
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.open = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            try:
                u = socket.create_connection(("127.0.0.1", self.target), timeout=10)
                u.settimeout(None)
            except OSError:
                c.close()
                continue
            with self.lock:
                self.open += [c, u]
            state = {"pending": collections.deque(), "done": 0}
            threading.Thread(target=self._pump, args=(c, u, self._requests, state),
                             daemon=True).start()
            threading.Thread(target=self._pump, args=(u, c, self._responses, state),
                             daemon=True).start()

    def _requests(self, buf, state):
        """Takes every complete request head off buf; returns the rest."""
        while b"\r\n\r\n" in buf:
            head, _, buf = buf.partition(b"\r\n\r\n")
            r = Request(head)
            with self.lock:
                self.heads.append(r)
                state["pending"].append(r)
        return buf

    def _responses(self, buf, state):
        """Takes every complete response off buf (head parsed, body skipped by
        Content-Length); returns the rest."""
        while True:
            if state.get("skip"):
                n = min(state["skip"], len(buf))
                state["skip"] -= n
                buf = buf[n:]
                if state["skip"]:
                    return buf
            if b"\r\n\r\n" not in buf:
                return buf
            head, _, buf = buf.partition(b"\r\n\r\n")
            resp = OriginResponse(head)
            with self.lock:
                req = state["pending"].popleft() if state["pending"] else None
                if req is None:
                    self.errors.append("a response without a request: %r" % resp)
                else:
                    req.response = resp
            no_body = (req is not None and req.method == "HEAD") or resp.status in (204, 304) \
                or resp.status < 200
            if not no_body:
                cl = resp.get("Content-Length")
                if cl is None or not cl.isdigit():
                    with self.lock:
                        self.errors.append("servd response without Content-Length: %r" % resp)
                    state["skip"] = 1 << 62  # cannot frame the rest: stop parsing
                else:
                    state["skip"] = resp.body_bytes = int(cl)

    def _pump(self, src, dst, parse, state):
        buf = b""
        while True:
            try:
                data = src.recv(65536)
            except OSError:
                data = b""
            if not data:
                break
            buf = parse(buf + data, state)  # before forwarding: a request is recorded
            try:                             # before servd can answer it
                dst.sendall(data)
            except OSError:
                break
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        with self.lock:
            state["done"] += 1
            last = state["done"] == 2
        if last:
            for s in (src, dst):
                try:
                    s.close()
                except OSError:
                    pass

    def requests(self):
        with self.lock:
            if self.errors:
                raise Fail("relay: " + "; ".join(self.errors))
            return list(self.heads)

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass
        with self.lock:
            socks, self.open = self.open, []
        for s in socks:
            try:
                s.close()
            except OSError:
                pass


# ---- the origin: servd with an access log and an admin address, behind the relay ----

ACCESS_LINE = re.compile(r'^(\S+) - - \[([^\]]+)\] "(\S+) (\S+) (HTTP/1\.\d)" (\d{3}) (\d+|-) '
                         r'"[^"]*" "[^"]*" (\S+) (\d+)$')


class LogEntry:
    def __init__(self, m):
        self.method = m.group(3)
        self.target = m.group(4)
        self.path = self.target.split("?")[0]
        self.status = int(m.group(6))
        self.bytes = None if m.group(7) == "-" else int(m.group(7))
        self.encoding = m.group(8)

    def __repr__(self):
        return "<%s %s %d %s %s>" % (self.method, self.target, self.status, self.bytes,
                                     self.encoding)


class Origin:
    """The generated site, packed with RULES and served by servd (1 worker) with an access log
    and /metrics, behind a Relay. Use as a context manager."""

    def __init__(self, name="cdn"):
        self.root = os.path.join(st.tmpdir(), name + "-site")
        self.files = make_site(self.root)
        rules = os.path.join(st.tmpdir(), name + "-rules.json")
        with open(rules, "w") as f:
            json.dump(RULES, f)
        self.pack = st.pack(self.root, name + ".lmdb", extra=["--rules", rules, "-q"])
        self.access_log = os.path.join(st.tmpdir(), name + "-access.log")
        self.admin = st.free_port()
        self.servd = None
        self.relay = None
        self._variants = {}

    def __enter__(self):
        self.servd = st.Servd(self.pack, workers=1, extra=[
            "--access-log", self.access_log, "--admin", "127.0.0.1:%d" % self.admin]).start()
        self.relay = Relay(self.servd.port)
        return self

    def __exit__(self, et, ev, tb):
        if self.relay:
            self.relay.close()
        if self.servd:
            self.servd.stop(check=et is None)
        return False

    @property
    def port(self):
        """The port a cache must use as its backend (the relay)."""
        return self.relay.port

    @property
    def direct(self):
        """servd's own port."""
        return self.servd.port

    def variants(self, path):
        if path not in self._variants:
            self._variants[path] = Variants(self.pack, path)
        return self._variants[path]

    def metrics(self):
        return st.metrics(self.admin)

    def log(self):
        """Every access-log line so far, parsed. servd counts a line before it answers, and
        its writer thread flushes within about a second: wait until the file holds every
        line the counter says was queued."""
        want = int(self.metrics()["servd_access_log_lines_total"])
        deadline = time.time() + LOG_TIMEOUT
        while True:
            try:
                with open(self.access_log, "rb") as f:
                    lines = f.read().decode("latin-1").splitlines()
            except FileNotFoundError:
                lines = []
            if len(lines) >= want or time.time() > deadline:
                break
            time.sleep(0.05)
        # A cache may send a request (a background fetch) after the counter was read:
        # the file then holds more lines than that count, but never more than the
        # count read after it.
        after = int(self.metrics()["servd_access_log_lines_total"])
        ok(want <= len(lines) <= after,
           "access-log lines on disk (%d) vs servd_access_log_lines_total (%d before "
           "reading the file, %d after)" % (len(lines), want, after))
        out = []
        for ln in lines:
            m = ACCESS_LINE.match(ln)
            ok(m is not None, "unparsable access-log line: %r" % ln)
            out.append(LogEntry(m))
        return out

    def log_for(self, path):
        return [e for e in self.log() if e.path == path]

    def requests_for(self, path):
        return [r for r in self.relay.requests() if r.path == path]

    def wait_log_for(self, path, n, what, timeout=LOG_TIMEOUT):
        """Waits until servd has answered at least n requests for path (a cache may fetch
        in the background after answering the client); returns the entries."""
        deadline = time.time() + timeout
        while True:
            got = self.log_for(path)
            if len(got) >= n or time.time() > deadline:
                break
            time.sleep(0.1)
        ok(len(got) >= n, "%s: servd answered %d requests for %s, want at least %d: %r" % (
            what, len(got), path, n, got))
        return got


# ---- the client side ----

class Resp:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers
        self.body = body

    def all(self, name):
        return [v for k, v in self.headers if k.lower() == name.lower()]

    def get(self, name):
        vals = self.all(name)
        if len(vals) > 1:
            raise Fail("header %s appears %d times: %r" % (name, len(vals), self.headers))
        return vals[0] if vals else None

    @property
    def coding(self):
        ce = self.get("Content-Encoding")
        return "identity" if ce is None else ce.strip().lower()

    def __repr__(self):
        return "<%d %r [%d bytes]>" % (self.status, self.headers, len(self.body))


def fetch(port, path, headers=(), method="GET", host="cdn.test"):
    """One request on a fresh connection. headers: (name, value) pairs; a value of None
    means the header is not sent at all. http.client adds no Accept-Encoding itself when
    skip_accept_encoding is set, so what is listed is exactly what the cache sees."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=st.IO_TIMEOUT)
    try:
        c.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        c.putheader("Host", host)
        for k, v in headers:
            if v is not None:
                c.putheader(k, v)
        c.endheaders()
        r = c.getresponse()
        body = r.read()
        return Resp(r.status, r.getheaders(), body)
    finally:
        c.close()


def ae(value):
    """The header list for one Accept-Encoding value (None: no header)."""
    return [("Accept-Encoding", value)] if value is not None else []


# ---- the caches ----

def _cache_dir(prefix):
    """A private scratch directory for a cache (removed with the test's tmpdir)."""
    d = tempfile.mkdtemp(prefix=prefix, dir=st.tmpdir())
    os.chmod(d, 0o755)
    return d


def _wait_port(proc, port, what, log_reader, ready=None):
    deadline = time.time() + CACHE_START_TIMEOUT
    while time.time() < deadline:
        if proc.poll() is not None:
            raise Fail("%s exited at startup with %s\n%s" % (what, proc.returncode, log_reader()))
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            if ready is None or ready():
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise Fail("%s did not start within %.0f s\n%s" % (what, CACHE_START_TIMEOUT, log_reader()))


def _tail(path, n=3000):
    """The last n characters (None: all) of a cache's or proxy's output file ("" if none
    yet)."""
    try:
        with open(path, "rb") as f:
            text = f.read().decode(errors="replace")
    except OSError:
        return ""
    return text[-n:] if n else text


def _stop(proc, what, log_reader):
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise Fail("%s did not exit within 15 s of SIGTERM\n%s" % (what, log_reader()))


# The VCL of the tests: the origin as the only backend, and everything else left to
# Varnish's built-in VCL, except that a request whose query string has "pass" is passed
# (not cached), so that Varnish forwards it, Range included, to servd. %(recv)s: more
# vcl_recv code (NORMALISE_AE).
VCL = """vcl 4.1;
backend servd {
    .host = "127.0.0.1";
    .port = "%(port)d";
}
sub vcl_recv {
%(recv)s
    if (req.url ~ "[?&]pass") {
        return (pass);
    }
}
"""

# The Accept-Encoding normalisation docs/cdn.md recommends with http_gzip_support off:
# br, else gzip, else nothing, matching only bare tokens (so "br;q=0" is not br).
NORMALISE_AE = r"""    if (req.http.Accept-Encoding ~ "(?i)(^|,)\s*br\s*(,|$)") {
        set req.http.Accept-Encoding = "br";
    } elsif (req.http.Accept-Encoding ~ "(?i)(^|,)\s*gzip\s*(,|$)") {
        set req.http.Accept-Encoding = "gzip";
    } else {
        unset req.http.Accept-Encoding;
    }"""


class Varnish:
    """varnishd in the foreground (-F) on a free port, with its own work dir (-n), a 32 MB
    malloc store and no privilege separation (-j none: everything stays in the temp dir)."""

    def __init__(self, origin_port, params=(), recv=""):
        self.origin_port = origin_port
        self.params = list(params)
        self.recv = recv
        self.proc = None
        self.port = None

    def start(self):
        if shutil.which("varnishd") is None:
            raise Fail("varnishd is not installed (tests/deps.sh test installs varnish)")
        self.dir = _cache_dir("varnish-")
        vcl = os.path.join(self.dir, "test.vcl")
        with open(vcl, "w") as f:
            f.write(VCL % {"port": self.origin_port, "recv": self.recv})
        self.out = os.path.join(self.dir, "varnishd.out")
        for _ in range(3):
            self.port = st.free_port()
            cmd = ["varnishd", "-F", "-j", "none", "-a", "127.0.0.1:%d" % self.port,
                   "-f", vcl, "-n", os.path.join(self.dir, "work"), "-s", "malloc,32m",
                   "-T", "none"]
            for p in self.params:
                cmd += ["-p", p]
            with open(self.out, "wb") as f:
                self.proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT,
                                             stdin=subprocess.DEVNULL)
            try:
                _wait_port(self.proc, self.port, "varnishd", self.read_out)
                return self
            except Fail:
                if self.proc.poll() is None or "in use" not in self.read_out().lower():
                    self.stop(check=False)
                    raise
        raise Fail("varnishd could not bind a free port\n" + self.read_out())

    def read_out(self):
        return _tail(self.out)

    def stop(self, check=True):
        proc, self.proc = self.proc, None
        try:
            _stop(proc, "varnishd", self.read_out)
        except Fail:
            if check:
                raise

    def __enter__(self):
        return self.start()

    def __exit__(self, et, ev, tb):
        self.stop(check=et is None)
        return False


# records.config of the tests: listen on one port, reverse proxy only, run as the current
# user (#-1: no setuid), a small thread count, no access logging, no crash-log helper.
ATS_RECORDS = """CONFIG proxy.config.http.server_ports STRING %(port)d
CONFIG proxy.config.admin.user_id STRING #-1
CONFIG proxy.config.url_remap.remap_required INT 1
CONFIG proxy.config.reverse_proxy.enabled INT 1
CONFIG proxy.config.exec_thread.autoconfig INT 0
CONFIG proxy.config.exec_thread.limit INT 1
CONFIG proxy.config.accept_threads INT 1
CONFIG proxy.config.task_threads INT 1
CONFIG proxy.config.net.connections_throttle INT 1000
CONFIG proxy.config.log.logging_enabled INT 0
CONFIG proxy.config.crash_log_helper STRING /bin/true
CONFIG proxy.config.http.wait_for_cache INT 1
"""

# Everything traffic_server would otherwise read from /etc/trafficserver lives here.
ATS_RUNROOT = """prefix: %(d)s
exec_prefix: /usr
bindir: /usr/bin
sbindir: /usr/bin
sysconfdir: %(d)s/etc
datadir: %(d)s/cache
includedir: /usr/include
libdir: /usr/lib/trafficserver
libexecdir: /usr/lib/trafficserver/modules
localstatedir: %(d)s/var
runtimedir: %(d)s/run
logdir: %(d)s/log
cachedir: %(d)s/cache
"""

ATS_IP_ALLOW = """ip_allow:
  - apply: in
    ip_addrs: 127.0.0.1
    action: allow
  - apply: out
    ip_addrs: 127.0.0.1
    action: allow
"""


class TrafficServer:
    """traffic_server (without traffic_manager) in the foreground, with a runroot of its own
    in a temp dir: runroot.yaml points sysconfdir, the cache, logs and run files there, so
    /etc/trafficserver and /var are never read or written. records: extra "CONFIG ..." lines
    (later lines override earlier ones)."""

    def __init__(self, origin_port, records=()):
        self.origin_port = origin_port
        self.records = list(records)
        self.proc = None
        self.port = None

    def start(self):
        if shutil.which("traffic_server") is None:
            raise Fail("traffic_server is not installed (tests/deps.sh test installs "
                       "trafficserver)")
        self.dir = d = _cache_dir("ats-")
        for sub in ("etc", "var", "run", "log", "cache"):
            os.makedirs(os.path.join(d, sub))
        with open(os.path.join(d, "runroot.yaml"), "w") as f:
            f.write(ATS_RUNROOT % {"d": d})
        etc = os.path.join(d, "etc")
        for name in ("cache.config", "parent.config", "plugin.config", "volume.config",
                     "hosting.config", "ssl_multicert.config", "logging.yaml", "sni.yaml"):
            open(os.path.join(etc, name), "w").close()
        with open(os.path.join(etc, "ip_allow.yaml"), "w") as f:
            f.write(ATS_IP_ALLOW)
        with open(os.path.join(etc, "remap.config"), "w") as f:
            f.write("map / http://127.0.0.1:%d/\n" % self.origin_port)
        with open(os.path.join(etc, "storage.config"), "w") as f:
            f.write("%s 64M\n" % os.path.join(d, "cache"))
        self.out = os.path.join(d, "traffic_server.out")
        self.diags = os.path.join(d, "log", "diags.log")
        for _ in range(3):
            self.port = st.free_port()
            with open(os.path.join(etc, "records.config"), "w") as f:
                f.write(ATS_RECORDS % {"port": self.port})
                for line in self.records:
                    f.write(line + "\n")
            with open(self.out, "wb") as f:
                self.proc = subprocess.Popen(["traffic_server", "--run-root=" + d], stdout=f,
                                             stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            try:
                # The port opens before the cache is ready; wait for both.
                _wait_port(self.proc, self.port, "traffic_server", self.read_out,
                           ready=lambda: "fully initialized" in self.read_diags())
                return self
            except Fail:
                if self.proc.poll() is None or "in use" not in self.read_out().lower():
                    self.stop(check=False)
                    raise
        raise Fail("traffic_server could not bind a free port\n" + self.read_out())

    def read_diags(self):
        return _tail(self.diags, None)

    def read_out(self):
        return _tail(self.out, 2000) + "\n--- diags.log ---\n" + _tail(self.diags)

    def stop(self, check=True):
        proc, self.proc = self.proc, None
        try:
            _stop(proc, "traffic_server", self.read_out)
        except Fail:
            if check:
                raise

    def __enter__(self):
        return self.start()

    def __exit__(self, et, ev, tb):
        self.stop(check=et is None)
        return False


# ---- checks shared by both caches ----

def same_except_date(a, b):
    """Header lists equal but for the Date line."""
    return [h for h in a if h[0].lower() != "date"] == [h for h in b if h[0].lower() != "date"]


def check_post_body_keeps_connection(origin, cache, what, rounds=10, batches=4):
    """A client's POST with a chunked body, which a cache passes to the origin (Varnish and
    ATS forward it chunked, with its head): servd answers 405 and skips the body, so the
    cache keeps its origin connection for the next request. cache must be pointed at
    origin.direct, not at the relay, which forwards each read apart and so would split a
    head from its body (servd then answers and closes, as it must for a body still
    arriving). Each round: the POST, then a GET the cache has not stored. Before servd
    measured chunked bodies every POST closed its connection: at least a new connection a
    round. A cache writes the head and the body apart, though (ATS does), and on a busy
    machine servd may read between the two writes in every round of a batch: up to
    batches batches are run, and one that keeps a connection passes."""
    def accepted():
        return int(origin.metrics()["servd_connections_accepted_total"])

    posts_before = len([e for e in origin.log() if e.method == "POST"])
    for b in range(batches):
        before = accepted()
        for k in range(rounds):
            with st.Conn(cache.port, timeout=st.IO_TIMEOUT) as c:
                c.send(b"POST /index.html HTTP/1.1\r\nHost: cdn.test\r\n"
                       b"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n3\r\n!!!\r\n0\r\n\r\n")
                r = c.read_response()
            eq(r.status, 405, "%s: a POST passed to servd" % what)
            r = fetch(cache.port, "/vary/1.txt?post-round=%d-%d" % (b, k), ae("gzip"))
            eq(r.status, 200, "%s: the GET after POST %d" % (what, k))
        opened = accepted() - before
        posts = [e for e in origin.log() if e.method == "POST"]
        eq(len(posts) - posts_before, (b + 1) * rounds, "%s: POSTs that reached servd" % what)
        if opened < rounds:
            break
    ok(opened < rounds, "%s: %d origin connections for %d POSTs and GETs in each of %d "
       "batches: the POSTs' connections were closed" % (what, opened, rounds, b + 1))
    note("%s: %d chunked POSTs and %d GETs through it took %d origin connection(s) (batch %d)"
         % (what, rounds, rounds, opened, b + 1))


def check_via_ignored(origin, path, coding):
    """servd answers a request with a Via header exactly as the same request without it."""
    base = [("Accept-Encoding", coding)] if coding else []
    for extra in ([("Via", "1.1 varnish (Varnish/7.1)")],
                  [("Via", "1.1 cache.example (ApacheTrafficServer/9.2.5)")],
                  [("Via", "1.0 fred, 1.1 p.example.net, HTTP/2.0 edge")],
                  [("Via", "1.1 a"), ("Via", "1.1 b")]):
        for method in ("GET", "HEAD"):
            for hdrs in (base, base + [("Range", "bytes=0-99")]):
                r0 = st.get(origin.direct, path, hdrs, method=method)
                r1 = st.get(origin.direct, path, hdrs + extra, method=method)
                what = "%s %s %r with %r" % (method, path, hdrs, extra)
                eq(r1.status, r0.status, what + ": status")
                ok(same_except_date(r0.headers, r1.headers),
                   "%s: headers differ\nwithout Via: %r\nwith Via:    %r" % (
                       what, r0.headers, r1.headers))
                eq(r1.body, r0.body, what + ": body")


# ---- response checks ----

def expect_full(r, v, coding, what, etag=None):
    """r is a 200 carrying the whole stored `coding` representation of v, byte for byte;
    etag defaults to that representation's strong ETag."""
    eq(r.status, 200, what + ": status")
    eq(r.coding, coding, what + ": Content-Encoding")
    eq(r.body, v.body(coding), what + ": body (want the stored %s bytes)" % coding)
    eq(r.get("ETag"), etag if etag is not None else v.etag(coding), what + ": ETag")


def expect_part(r, v, coding, first, last, what):
    """r is a 206 for bytes first..last of the stored `coding` representation of v."""
    data = v.body(coding)
    eq(r.status, 206, what + ": status")
    eq(r.coding, coding, what + ": Content-Encoding")
    eq(r.get("Content-Range"), "bytes %d-%d/%d" % (first, last, len(data)),
       what + ": Content-Range")
    eq(r.body, data[first:last + 1], what + ": body (bytes %d-%d of the %s representation)"
       % (first, last, coding))


def multipart_parts(r):
    """[(content-range, bytes)] of a multipart/byteranges body."""
    ct = r.get("Content-Type") or ""
    m = re.search(r'boundary="?([^";]+)"?', ct)
    ok(m is not None, "multipart response without a boundary: %r" % ct)
    sep = b"--" + m.group(1).encode()
    parts = []
    for chunk in r.body.split(sep)[1:]:
        if chunk.startswith(b"--"):
            break
        head, _, body = chunk.lstrip(b"\r\n").partition(b"\r\n\r\n")
        cr = re.search(rb"(?im)^content-range:\s*(.+?)\s*$", head)
        parts.append((cr.group(1).decode() if cr else None, body[:-2] if body.endswith(b"\r\n")
                      else body))
    return parts


def wait_until(cond, what, timeout=LOG_TIMEOUT):
    deadline = time.time() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.time() > deadline:
            raise Fail("%s: not within %.0f s" % (what, timeout))
        time.sleep(0.05)


def check_304_like_200(resp304, resp200, what):
    """servd's 304 to a cache names the same representation as its 200: same ETag,
    Cache-Control, Vary and Last-Modified (RFC 9110 §15.4.5), and no body."""
    eq(resp304.status, 304, what + ": status at the origin")
    for h in ("ETag", "Cache-Control", "Vary", "Last-Modified"):
        eq(resp304.get(h), resp200.get(h), "%s: %s of the 304 vs the 200" % (what, h))
    eq(resp304.body_bytes, 0, what + ": 304 body bytes")


def revalidate(o, cache, path, variants, label, objects=None):
    """Through cache, in front of Origin o: fetches each (Accept-Encoding, coding, ETag the
    client must see) once, lets the objects (as many as the cache keeps for these clients;
    default one per variant) go stale, fetches again, and checks that each revalidation
    reached servd as If-None-Match with that object's ETag and got a 304 carrying the
    200's validators, while the client got the whole body every time."""
    v = o.variants(path)

    def round_(what):
        for a, coding, etag in variants:
            r = fetch(cache.port, path, ae(a))
            expect_full(r, v, coding, "%s %s AE=%r" % (label, what, a), etag=etag)

    round_("first fetch")
    n_fetch = objects or len(variants)
    wait_until(lambda: len(o.requests_for(path)) >= n_fetch, "first fetches at the origin")
    time.sleep(STALE_MAX_AGE + 1.2)
    round_("stale")
    # Varnish answers a stale object within its grace at once and revalidates in the
    # background (ATS revalidates before it answers): wait for the conditional requests.
    wait_until(lambda: len(o.requests_for(path)) >= 2 * n_fetch and all(
        q.response for q in o.requests_for(path)), "revalidations at the origin")
    round_("after revalidation")
    # The refreshed objects may have gone stale again on a slow machine: Varnish then
    # answered this round from grace and revalidates in the background, a request the
    # relay has recorded and servd may not have answered yet.
    reqs = wait_until(lambda: (lambda rs: rs if all(q.response for q in rs) else None)(
        o.requests_for(path)), "servd's answers to the origin requests")
    firsts = reqs[:n_fetch]
    for q in firsts:
        eq((q.get("If-None-Match"), q.response.status), (None, 200),
           "%s: first origin request %s" % (label, q))
    by_ae = {q.get("Accept-Encoding"): q.response for q in firsts}
    for q in reqs[n_fetch:]:
        # Every later origin request is a revalidation: a slow machine may let the
        # refreshed object go stale again, which is one more 304, never a new body.
        r200 = by_ae.get(q.get("Accept-Encoding"))
        ok(r200 is not None, "%s: revalidation with an Accept-Encoding never fetched: %s"
           % (label, q))
        eq(q.get("If-None-Match"), r200.get("ETag"),
           "%s: If-None-Match of the revalidation (AE=%r)" % (label, q.get("Accept-Encoding")))
        check_304_like_200(q.response, r200, "%s AE=%r" % (label, q.get("Accept-Encoding")))
    log = o.log_for(path)
    eq(sorted(e.status for e in log), sorted([200] * n_fetch + [304] * (len(log) - n_fetch)),
       "%s: servd access log statuses" % label)
    return reqs


def note(msg):
    """A figure or an observation for the log of the test run."""
    print("NOTE " + msg, flush=True)
