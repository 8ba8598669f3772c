"""servdtest - the shared helper of servd's end-to-end HTTP tests (stdlib only).

What it gives a test script:
  write_tree(root, files)   write {"/url/path": bytes} under root
  pack(webroot)             build a pack with the real servd-pack; returns its path
  Servd(pack, ...)          start the real servd on a free 127.0.0.1 port, wait until it
                            accepts, stop it with SIGTERM and check that it exited 0
  Conn(port)                a raw socket that sends exact bytes and parses responses
                            (status, headers in order with duplicates, body by exact
                            Content-Length), and can check that the server closed
  get(port, path, ...)      one request on a fresh connection
  decode(body, coding)      gzip (python), br (`brotli -dc`), zstd (`zstd -dc`)
  run(tests)                run test functions, print each result, exit non-zero on failure

Nothing here is lenient about the server: a response head must use CRLF, a body is read
by Content-Length and never by guessing, and chunked responses are an error (servd
always knows every length in advance).
"""
import calendar
import email.utils
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback

SOURCE_DIR = os.environ.get(
    "SERVD_SOURCE_DIR",
    os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")))
# absolute: a servd started with cwd= (a relative --pack) is found all the same
BUILD_DIR = os.path.abspath(os.environ.get("SERVD_BUILD_DIR", os.path.join(SOURCE_DIR, "build")))
SERVD = os.path.join(BUILD_DIR, "servd")
SERVD_PACK = os.path.join(BUILD_DIR, "servd-pack")
FIXTURES = os.path.join(SOURCE_DIR, "tests", "fixtures", "http")
FIXTURE_SITE = os.path.join(FIXTURES, "site")
WWW = os.path.join(SOURCE_DIR, "www")

# How long a test waits for servd to accept after starting (ASan builds start slowly).
START_TIMEOUT = 15.0
# How long any single socket read may block before the test calls it a hang.
IO_TIMEOUT = 10.0
# How long servd may take to exit after SIGTERM.
STOP_TIMEOUT = 15.0

_tmp_root = None


def tmpdir():
    """A per-process scratch directory, removed when the process exits normally."""
    global _tmp_root
    if _tmp_root is None:
        _tmp_root = tempfile.mkdtemp(prefix="servd-e2e-")
        import atexit
        atexit.register(shutil.rmtree, _tmp_root, True)
    return _tmp_root


class Fail(AssertionError):
    pass


def _short(v, n=300):
    r = repr(v)
    return r if len(r) <= n else r[:n] + "...(%d chars)" % len(r)


def eq(got, want, what):
    if got != want:
        raise Fail("%s: got %s, want %s" % (what, _short(got), _short(want)))


def ok(cond, what):
    if not cond:
        raise Fail(what)


def ensure_binaries():
    for b in (SERVD, SERVD_PACK):
        if not os.access(b, os.X_OK):
            raise Fail("binary missing: %s (SERVD_BUILD_DIR=%s)" % (b, BUILD_DIR))


def write_tree(root, files):
    """Writes files ({"/url/path": bytes}) under root, making directories; returns root."""
    for path, data in files.items():
        full = os.path.join(root, path.lstrip("/"))
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb") as f:
            f.write(data)
    return root


def pack(webroot, name=None, extra=()):
    """Packs webroot with the real servd-pack into the scratch dir; returns the pack path."""
    ensure_binaries()
    name = name or (os.path.basename(os.path.normpath(webroot)) + ".lmdb")
    out = os.path.join(tmpdir(), name)
    cmd = [SERVD_PACK, "build", webroot, "-o", out] + list(extra)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=240)
    if p.returncode != 0 or not os.path.exists(out):
        raise Fail("servd-pack failed (exit %d): %s\nstdout: %s\nstderr: %s" % (
            p.returncode, " ".join(cmd), p.stdout.decode(errors="replace")[-2000:],
            p.stderr.decode(errors="replace")[-2000:]))
    return out


def pack_cat(pack_path, path, encoding="identity"):
    """The stored bytes of one variant, as `servd-pack cat` prints them."""
    p = subprocess.run([SERVD_PACK, "cat", pack_path, path, "--encoding", encoding],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    if p.returncode != 0:
        raise Fail("servd-pack cat %s %s failed: %s" % (pack_path, path, p.stderr.decode()))
    return p.stdout


def _ephemeral_low():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def freeze(proc, limit=5.0):
    """Sends SIGSTOP to proc and returns once every thread of it is stopped: a
    connection made then reaches servd's accept only after SIGCONT, whatever it sent."""
    proc.send_signal(signal.SIGSTOP)
    deadline = time.time() + limit
    while time.time() < deadline:
        states = []
        for t in os.listdir("/proc/%d/task" % proc.pid):
            try:
                with open("/proc/%d/task/%s/stat" % (proc.pid, t)) as f:
                    states.append(f.read().rsplit(")", 1)[1].split()[0])
            except FileNotFoundError:
                pass
        if states and all(s in "tT" for s in states):
            return
        time.sleep(0.005)
    raise AssertionError("pid %d did not stop within %.0f s" % (proc.pid, limit))


def sent_while_frozen(proc, port, data):
    """Connects to port and sends data while proc is stopped (freeze), so that the
    bytes are there when servd accepts; then lets it go on, and returns all it sends
    before it closes the connection."""
    try:
        freeze(proc)
        c = socket.create_connection(("127.0.0.1", port), timeout=5)
        c.sendall(data)
        time.sleep(0.05)  # delivered on the loopback by then, even on a loaded host
    finally:
        proc.send_signal(signal.SIGCONT)
    got = b""
    with c:
        while True:
            try:
                chunk = c.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                return got
            got += chunk
    return got


def free_port():
    """A port that is free now, for a server the test starts next. It is taken
    below the kernel's ephemeral range: a port from bind(0) lies inside it,
    and the outgoing connections of tests running in parallel draw their
    local ports from there, so one of them could take it before the server
    binds (seen in CI: "admin: cannot listen ... Address already in use")."""
    low = _ephemeral_low()
    rng = random.Random()
    fixed = os.environ.get("SERVD_TEST_PORTS")  # "LOW-HIGH": a sandbox's allowed range
    if fixed:
        a, b = (int(x) for x in fixed.split("-"))
        port = bindable_port(p for p in rng.sample(range(a, b + 1), b + 1 - a) if p not in _given)
        if port is None:
            raise Fail("no free port in SERVD_TEST_PORTS=%s" % fixed)
        _given.add(port)
        return port
    # Never one this process handed out already: two calls in a row for one
    # servd (--listen and --admin) got the same port once in CI (1 in 12000).
    port = bindable_port(p for p in (rng.randrange(max(1024, low - 12000), low)
                                     for _ in range(200)) if p not in _given)
    if port is None:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
    _given.add(port)
    return port


_given = set()  # ports free_port() returned



def bindable_port(candidates):
    """The first port of candidates that 127.0.0.1 can bind right now, or None."""
    for port in candidates:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.bind(("127.0.0.1", port))
            return port
        except OSError:
            continue
        finally:
            s.close()
    return None


def metrics(port):
    """The admin endpoint's /metrics as {sample name with labels: float}."""
    r = get(port, "/metrics")
    eq(r.status, 200, "/metrics status")
    out = {}
    for line in r.body.decode().splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


def wait_metrics(port, done, limit=10.0):
    """/metrics once done(metrics) holds, polled (an admin port not answering yet counts
    as not done); after limit seconds, /metrics as they are."""
    t0 = time.time()
    while time.time() - t0 < limit:
        try:
            m = metrics(port)
            if done(m):
                return m
        except (OSError, Fail):
            pass
        time.sleep(0.02)
    return metrics(port)


def built_with(*options):
    """Whether the build under test has any of the CMake options (e.g. "SERVD_TSAN") on."""
    try:
        with open(os.path.join(BUILD_DIR, "CMakeCache.txt")) as f:
            return any(line.strip() in ["%s:BOOL=ON" % o for o in options] for line in f)
    except OSError:
        return False


def preload_env(shim, **extra):
    """os.environ with the LD_PRELOAD shim added after any preload already there (ASan's
    runtime, which must stay first), and the variables in extra, which steer the shim."""
    ok(os.path.exists(shim), "%s is built with the tests" % shim)
    return dict(os.environ, LD_PRELOAD=" ".join(x for x in (os.environ.get("LD_PRELOAD"), shim) if x),
                ASAN_OPTIONS=":".join(x for x in (os.environ.get("ASAN_OPTIONS"),
                                                  "verify_asan_link_order=0") if x), **extra)

class Servd:
    """A running servd. Use as a context manager; leaving it stops servd and checks
    that it exited 0 after SIGTERM (a crash or sanitizer report fails the test)."""

    def __init__(self, pack_path, workers=1, spa=False, extra=(), env=None, binary=None,
                 cwd=None):
        ensure_binaries()
        self.binary = binary or SERVD
        self.env = env  # None: this process's environment
        self.cwd = cwd  # None: this process's directory (a relative pack_path is from cwd)
        self.pack = pack_path
        self.workers = workers
        self.spa = spa
        self.extra = list(extra)
        self.proc = None
        self.port = None
        self.log = None

    def start(self):
        last = ""
        for attempt in range(5):
            self.port = free_port()
            cmd = [self.binary, "--pack", self.pack, "--listen", "127.0.0.1:%d" % self.port,
                   "--workers", str(self.workers)] + (["--spa"] if self.spa else []) + self.extra
            self.log = os.path.join(tmpdir(), "servd-%d-%d.log" % (self.port, attempt))
            logf = open(self.log, "wb")
            self.proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, env=self.env, cwd=self.cwd)
            logf.close()
            deadline = time.time() + START_TIMEOUT
            while time.time() < deadline:
                if self.proc.poll() is not None:
                    break
                # The startup line comes after every socket and after the workers have
                # started. (Connecting to --listen alone once raced a first /metrics in
                # CI, when the admin socket was bound after the listeners.)
                if "servd: listening on" in self.read_log():
                    try:
                        socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                        self.cmd = cmd
                        return self
                    except OSError:
                        pass
                time.sleep(0.02)
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
                raise Fail("servd did not accept on port %d within %.0fs: %s\nlog: %s" % (
                    self.port, START_TIMEOUT, " ".join(cmd), self.read_log()))
            last = self.read_log()
            if "in use" not in last.lower():  # only a lost port race is worth a retry
                break
        raise Fail("servd exited at startup with %s: %s\nlog: %s" % (
            self.proc.returncode, " ".join(cmd), last))

    def read_log(self):
        try:
            with open(self.log, "rb") as f:
                return f.read().decode(errors="replace")[-4000:]
        except OSError:
            return ""

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self, check=True):
        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                if check:
                    raise Fail("servd did not exit within %.0fs of SIGTERM\nlog: %s" % (
                        STOP_TIMEOUT, self.read_log()))
        if check and proc.returncode != 0:
            raise Fail("servd exited with %s (want 0 after SIGTERM)\nlog: %s" % (
                proc.returncode, self.read_log()))

    def __enter__(self):
        return self.start()

    def __exit__(self, et, ev, tb):
        # Do not mask the test's own failure with a stop failure.
        self.stop(check=et is None)
        return False


def big_pack(index):
    """A pack of index.html (the bytes index) and a 64 MB random big.bin, built once per
    index: its load check hashes the body and takes ~0.2 s, long enough to catch the
    check child at work."""
    import hashlib
    tag = hashlib.sha256(index).hexdigest()[:12]
    root = os.path.join(tmpdir(), "big-site-" + tag)
    if not os.path.isdir(root):
        os.makedirs(root)
        with open(os.path.join(root, "index.html"), "wb") as f:
            f.write(index)
        with open(os.path.join(root, "big.bin"), "wb") as f:
            f.write(random.Random(7).randbytes(64 * 1024 * 1024))
    p = os.path.join(tmpdir(), "big-%s.lmdb" % tag)
    return p if os.path.exists(p) else pack(root, os.path.basename(p))


def check_children(ppid):
    """Pids of the `servd --check-pack` children of ppid (the load check of a pack). The
    check of a 64 MB body can last 50 ms (SHA-256 at 1.5 GB/s): each thread's children
    list is read, which takes microseconds, rather than all of /proc, which under load
    took long enough to miss it."""
    try:
        kids = []
        for t in os.listdir("/proc/%d/task" % ppid):
            with open("/proc/%d/task/%s/children" % (ppid, t)) as f:
                kids += f.read().split()
    except OSError:
        kids = None  # a kernel without CONFIG_PROC_CHILDREN, or ppid has gone
    if kids is not None:
        out = []
        for d in kids:
            try:
                with open("/proc/%s/cmdline" % d, "rb") as f:
                    if b"--check-pack" in f.read():
                        out.append(int(d))
            except OSError:
                continue
        return out
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
            with open("/proc/%s/cmdline" % d, "rb") as f:
                cmd = f.read()
        except (OSError, ValueError, IndexError):
            continue
        if parent == ppid and b"--check-pack" in cmd:
            out.append(int(d))
    return out


# ---- requests and responses ----

def req(method="GET", target="/", headers=(), version="HTTP/1.1", host="localhost", body=b""):
    """Request bytes. headers: (name, value) pairs or raw header lines (str/bytes)."""
    out = [("%s %s %s\r\n" % (method, target, version)).encode("latin-1")]
    if host is not None:
        out.append(b"Host: " + host.encode() + b"\r\n")
    for h in headers:
        if isinstance(h, tuple):
            out.append(("%s: %s\r\n" % h).encode("latin-1"))
        elif isinstance(h, bytes):
            out.append(h + b"\r\n")
        else:
            out.append(h.encode("latin-1") + b"\r\n")
    out.append(b"\r\n")
    return b"".join(out) + body


class Response:
    def __init__(self, version, status, reason, headers, body, head_raw):
        self.version = version
        self.status = status
        self.reason = reason
        self.headers = headers  # [(name, value)] in order, duplicates kept
        self.body = body
        self.head_raw = head_raw

    def all(self, name):
        n = name.lower()
        return [v for k, v in self.headers if k.lower() == n]

    def get(self, name):
        """The value of a header that must appear at most once (None when absent)."""
        vals = self.all(name)
        if len(vals) > 1:
            raise Fail("header %s appears %d times: %s\n%s" % (name, len(vals), vals, self.dump()))
        return vals[0] if vals else None

    def need(self, name):
        v = self.get(name)
        if v is None:
            raise Fail("header %s missing\n%s" % (name, self.dump()))
        return v

    def dump(self):
        return self.head_raw.decode("latin-1") + ("[body %d bytes]" % len(self.body))

    def __repr__(self):
        return "<Response %d %s>" % (self.status, self.headers)


class Closed(Exception):
    pass


class Skip(Exception):
    """Raised by a test that cannot run here (a tool or a device missing): reported as
    SKIP, not PASS; a script whose every test skipped exits 77, which ctest shows as
    skipped."""


class Conn:
    def __init__(self, port, timeout=IO_TIMEOUT, source=None):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout,
                                             source_address=source and (source, 0))
        self.sock.settimeout(timeout)
        self.buf = b""
        self.eof = False

    def send(self, data):
        self.sock.sendall(data)
        return self

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()

    def _fill(self):
        if self.eof:
            raise Closed("connection closed by the server")
        try:
            chunk = self.sock.recv(65536)
        except ConnectionResetError:
            chunk = b""
        except socket.timeout:
            raise Fail("timed out waiting for the server (%d bytes buffered: %s)" % (
                len(self.buf), _short(self.buf[:200])))
        if not chunk:
            self.eof = True
            raise Closed("connection closed by the server")
        self.buf += chunk

    def _take(self, n):
        while len(self.buf) < n:
            self._fill()
        data, self.buf = self.buf[:n], self.buf[n:]
        return data

    def read_response(self, method="GET"):
        """Reads one response. method tells whether a body follows (HEAD: never)."""
        while b"\r\n\r\n" not in self.buf:
            if len(self.buf) > 65536:
                raise Fail("response head larger than 64 KiB: %s" % _short(self.buf[:300]))
            self._fill()
        idx = self.buf.index(b"\r\n\r\n")
        head = self.buf[:idx + 4]
        self.buf = self.buf[idx + 4:]
        lines = head[:-4].split(b"\r\n")
        for line in lines:
            ok(b"\n" not in line and b"\r" not in line,
               "response head has a bare CR or LF: %s" % _short(head))
        m = re.match(rb"^(HTTP/\d\.\d) (\d\d\d) ?(.*)$", lines[0])
        ok(m is not None, "bad status line: %s" % _short(lines[0]))
        version, status, reason = m.group(1).decode(), int(m.group(2)), m.group(3).decode("latin-1")
        headers = []
        for line in lines[1:]:
            mh = re.match(rb"^([!#$%&'*+.^_`|~0-9A-Za-z-]+):[ \t]*(.*?)[ \t]*$", line)
            ok(mh is not None, "bad response header line: %s\n%s" % (_short(line), _short(head)))
            headers.append((mh.group(1).decode(), mh.group(2).decode("latin-1")))
        r = Response(version, status, reason, headers, b"", head)
        if r.all("Transfer-Encoding"):
            raise Fail("response uses Transfer-Encoding (servd must always send Content-Length)\n"
                       + r.dump())
        cls = r.all("Content-Length")
        if len(cls) > 1:
            raise Fail("response has %d Content-Length lines\n%s" % (len(cls), r.dump()))
        if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
            return r
        if cls:
            ok(re.match(r"^\d+$", cls[0]) is not None, "bad Content-Length %r" % cls[0])
            r.body = self._take(int(cls[0]))
        else:
            raise Fail("response with a body but no Content-Length\n" + r.dump())
        return r

    def closed_after(self, wait=3.0):
        """True when the server closes the connection with nothing more to read within
        wait seconds; False when it stays open (idle). Extra bytes are an error."""
        if self.buf:
            raise Fail("unexpected extra bytes from the server: %s" % _short(self.buf[:300]))
        if self.eof:
            return True
        self.sock.settimeout(wait)
        try:
            chunk = self.sock.recv(65536)
        except socket.timeout:
            return False
        except ConnectionResetError:
            return True
        finally:
            self.sock.settimeout(IO_TIMEOUT)
        if chunk:
            raise Fail("unexpected extra bytes from the server: %s" % _short(chunk[:300]))
        self.eof = True
        return True

    def expect_closed(self, what, wait=5.0):
        ok(self.closed_after(wait), "%s: the server kept the connection open (want closed)" % what)

    def nothing_more(self, wait=0.3):
        """Asserts that no unexpected bytes follow (e.g. no body after HEAD/304)."""
        self.closed_after(wait)


def exchange(port, data, method="GET"):
    """Sends raw bytes on a fresh connection and reads one response."""
    with Conn(port) as c:
        c.send(data)
        return c.read_response(method)


def get(port, target="/", headers=(), method="GET", version="HTTP/1.1"):
    return exchange(port, req(method, target, headers, version), method)


def raw_outcome(port, data, method="GET", wait=3.0):
    """Sends raw bytes; returns (response or None, closed_after_response)."""
    with Conn(port) as c:
        try:
            c.send(data)
        except (BrokenPipeError, ConnectionResetError):
            pass
        try:
            r = c.read_response(method)
        except Closed:
            return None, True
        return r, c.closed_after(wait)


# ---- content codings ----

def decode(body, coding):
    """Decodes a response body by its Content-Encoding (None/identity = as is)."""
    if coding in (None, "identity"):
        return body
    if coding in ("gzip", "x-gzip"):
        import gzip
        return gzip.decompress(body)
    tool = {"br": ["brotli", "-dc"], "zstd": ["zstd", "-dc", "-q"]}.get(coding)
    if tool is None:
        raise Fail("unknown Content-Encoding %r" % coding)
    if shutil.which(tool[0]) is None:
        raise Fail("%s is not installed (tests/deps.sh test installs it)" % tool[0])
    p = subprocess.run(tool, input=body, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=60)
    if p.returncode != 0:
        raise Fail("%s could not decode the body (%d bytes): %s" % (
            " ".join(tool), len(body), p.stderr.decode(errors="replace")))
    return p.stdout


# ---- header checks ----

IMF_FIXDATE = re.compile(r"^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d\d "
                         r"(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} "
                         r"\d\d:\d\d:\d\d GMT$")
ETAG_STRONG = re.compile(r'^"[\x21\x23-\x7e\x80-\xff]*"$')


def http_date(value, what):
    ok(value is not None, "%s missing" % what)
    ok(IMF_FIXDATE.match(value) is not None, "%s is not an IMF-fixdate: %r" % (what, value))
    return calendar.timegm(email.utils.parsedate(value))


def fmt_date(t):
    return email.utils.formatdate(t, usegmt=True)


def vary_accept_encoding(r, want, what):
    """want True: exactly one Vary line, naming Accept-Encoding; False: no Vary at all."""
    vals = r.all("Vary")
    if want:
        eq(len(vals), 1, "%s: number of Vary lines" % what)
        toks = [t.strip().lower() for t in vals[0].split(",")]
        ok("accept-encoding" in toks, "%s: Vary %r does not name Accept-Encoding" % (what, vals[0]))
    else:
        eq(vals, [], "%s: Vary lines on a file without variants" % what)


def content_encoding(r):
    ce = r.get("Content-Encoding")
    return None if ce is None else ce.strip().lower()


# ---- sites ----

def site_files(root):
    """{url path: bytes} for every non-dot file under root (what servd-pack must store)."""
    out = {}
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if not x.startswith("."))
        for f in sorted(files):
            if f.startswith("."):
                continue
            full = os.path.join(d, f)
            rel = "/" + os.path.relpath(full, root).replace(os.sep, "/")
            with open(full, "rb") as fh:
                out[rel] = fh.read()
    return out


def url(path):
    """Percent-encodes a decoded key for a request target."""
    from urllib.parse import quote
    return quote(path, safe="/-._~!$&'()*+,;=:@")


def www_exists():
    return os.path.isfile(os.path.join(WWW, "index.html"))


def file_bytes(root, rel):
    with open(os.path.join(root, rel.lstrip("/")), "rb") as f:
        return f.read()


# ---- running ----

def run(tests, setup=None):
    """Runs tests (callables taking the setup's result) and exits 1 on any failure.
    setup is a context manager factory; its value is passed to every test."""
    failed = []
    started = time.time()

    skipped = []

    def one(t, ctx):
        t0 = time.time()
        try:
            t(ctx) if ctx is not None else t()
            print("PASS %s (%.2fs)" % (t.__name__, time.time() - t0), flush=True)
        except Skip as e:
            skipped.append(t.__name__)
            print("SKIP %s: %s" % (t.__name__, e), flush=True)
        except Exception as e:  # noqa: BLE001 - every failure is reported, none stops the run
            failed.append(t.__name__)
            print("FAIL %s: %s" % (t.__name__, e), flush=True)
            if not isinstance(e, Fail):
                traceback.print_exc()

    try:
        if setup is None:
            for t in tests:
                one(t, None)
        else:
            with setup() as ctx:
                for t in tests:
                    one(t, ctx)
    except Exception as e:  # noqa: BLE001
        print("FAIL setup/teardown: %s" % e, flush=True)
        if not isinstance(e, Fail):
            traceback.print_exc()
        failed.append("setup/teardown")
    n = len(tests)
    passed = n - len([f for f in failed if f != "setup/teardown"]) - len(skipped)
    print("%d passed, %d failed%s (%.1fs)" % (
        passed, len(failed), ", %d skipped" % len(skipped) if skipped else "",
        time.time() - started), flush=True)
    sys.exit(1 if failed else 77 if n and len(skipped) == n else 0)


def collect(module_globals, prefix="t_"):
    """The test functions of a script, in definition order."""
    return [v for k, v in module_globals.items() if k.startswith(prefix) and callable(v)]


class Site:
    """A packed site served by a running servd: .port, .pack, .root, .files {path: bytes}."""

    def __init__(self, root, server, pack_path):
        self.root = root
        self.server = server
        self.port = server.port
        self.pack = pack_path
        self.files = site_files(root)


class Sites:
    """The fixture site (always) and www/ (when it exists), each packed and served."""

    def __init__(self, workers=1, spa=False, with_www=True):
        self.workers = workers
        self.spa = spa
        self.with_www = with_www
        self.fixture = None
        self.www = None
        self._servers = []

    def __enter__(self):
        try:
            p = pack(FIXTURE_SITE, "fixture.lmdb")
            s = Servd(p, workers=self.workers, spa=self.spa).start()
            self._servers.append(s)
            self.fixture = Site(FIXTURE_SITE, s, p)
            if self.with_www and www_exists():
                pw = pack(WWW, "www.lmdb")
                sw = Servd(pw, workers=self.workers, spa=self.spa).start()
                self._servers.append(sw)
                self.www = Site(WWW, sw, pw)
            elif self.with_www:
                print("NOTE www/index.html does not exist yet: www/ checks not run", flush=True)
        except BaseException:
            for s in self._servers:
                s.stop(check=False)
            raise
        return self

    def __exit__(self, et, ev, tb):
        errors = []
        for s in self._servers:
            try:
                s.stop(check=et is None)
            except Fail as e:
                errors.append(str(e))
        if errors and et is None:
            raise Fail("; ".join(errors))
        return False

    @property
    def port(self):
        return self.fixture.port

    def check_alive(self):
        for s in self._servers:
            ok(s.alive(), "servd died: %s" % s.read_log())
