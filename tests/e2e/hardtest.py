"""hardtest - helpers of the hardening tests (tests/e2e/test_harden_*.py), on top of
servdtest (which they reuse for packing, starting servd and raw HTTP).

What it adds:
  site()/site_pack()        a small site with a marker file (/smuggled.txt) that no
                            hardening test ever requests openly: a response carrying
                            its body means a request was smuggled
  Proc(pack, ...)           servd started with --listen 127.0.0.1:0 (the port is read
                            from its startup message, so there is no port race), with
                            an optional wrapper (valgrind), environment, and preexec
                            (a lower RLIMIT_NOFILE); a servdtest.Servd otherwise
  try_start(pack, ...)      start servd on a pack that may be refused: ("refused", rc,
                            log) or ("serving", Proc); a hang is a failure
  sanitized()               whether the servd under test is an AddressSanitizer or
                            ThreadSanitizer build
  wait_until(fn, limit)     poll fn() until true
  cpu_seconds/rss_kib/open_fds(pid)   from /proc
  raise_nofile(n)           raise this process's soft RLIMIT_NOFILE (to hold sockets)
  normal_get(port, ...)     a fresh connection, GET, exact body, and how long it took
  responses(port, data)     send bytes, read every response until close or silence
  lmdb_structure(data)      {offset: what} for the bytes of a pack that are LMDB's own
                            structure (meta pages, page headers, node pointers and
                            headers, overflow page numbers), as opposed to keys and values
"""
import os
import re
import resource
import signal
import socket
import struct
import subprocess
import time

import servdtest as st
from servdtest import eq, ok

SMUGGLE_PATH = "/smuggled.txt"
SMUGGLE_BODY = b"SMUGGLED-MARKER: this body is only ever requested from inside another request\n"
TINY = "/tiny.txt"
BIG = "/big.txt"


def _site_files():
    big = b"".join(b"line %06d of the range target, compressible text\n" % i
                   for i in range(4000))  # ~200 KB: gzip/br/zstd variants, many pages
    return {
        "/index.html": b"<html><body><h1>hardening</h1></body></html>\n",
        TINY: b"tiny\n",
        BIG: big,
        SMUGGLE_PATH: SMUGGLE_BODY,
        "/404.html": b"<html><body>not here</body></html>\n",
        "/docs/index.html": b"<p>docs index</p>\n",
        "/docs/a.txt": b"docs a\n",
        "/caf\u00e9.txt": b"cafe with an accent\n",
    }


FILES = _site_files()


def site():
    """Writes the hardening site into the scratch dir once; returns its root."""
    root = os.path.join(st.tmpdir(), "harden-site")
    if not os.path.isdir(root):
        st.write_tree(root, FILES)
    return root


def site_pack():
    p = os.path.join(st.tmpdir(), "harden.lmdb")
    if not os.path.exists(p):
        st.pack(site(), "harden.lmdb")
    return p


_LISTEN_RE = re.compile(r"listening on 127\.0\.0\.1:(\d+)")


class Proc(st.Servd):
    """servd on 127.0.0.1:0. wrapper: argv prefix (e.g. valgrind); env: extra
    environment; preexec: run in the child before exec; admin: also serve the admin
    endpoint (its port is self.admin)."""

    def __init__(self, pack_path, workers=1, extra=(), wrapper=(), env=None, preexec=None,
                 admin=False, start_timeout=st.START_TIMEOUT):
        super().__init__(pack_path, workers=workers, extra=extra)
        self.wrapper = list(wrapper)
        self.env = env
        self.preexec = preexec
        self.want_admin = admin
        self.admin = None
        self.start_timeout = start_timeout

    def launch(self):
        """Starts the process; returns without waiting for it to listen."""
        args = ["--pack", self.pack, "--listen", "127.0.0.1:0", "--workers", str(self.workers)]
        if self.want_admin:
            self.admin = st.free_port()
            args += ["--admin", "127.0.0.1:%d" % self.admin]
        self.cmd = self.wrapper + [st.SERVD] + args + self.extra
        self.log = os.path.join(st.tmpdir(), "servd-h-%d-%d.log" % (os.getpid(), id(self)))
        env = dict(os.environ)
        env.update(self.env or {})
        with open(self.log, "wb") as logf:
            self.proc = subprocess.Popen(self.cmd, stdout=logf, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, env=env,
                                         preexec_fn=self.preexec)
        return self

    def wait_listening(self):
        """The port from the startup message, or None when servd exited first."""
        deadline = time.time() + self.start_timeout
        while time.time() < deadline:
            m = _LISTEN_RE.search(self.read_log())
            if m:
                self.port = int(m.group(1))
                if self.admin is None:
                    return self.port
                try:  # the admin thread may start a moment after the workers
                    socket.create_connection(("127.0.0.1", self.admin), timeout=1).close()
                    return self.port
                except OSError:
                    pass
            if self.proc.poll() is not None:
                return None
            time.sleep(0.01)
        self.proc.kill()
        self.proc.wait()
        raise st.Fail("servd neither listened nor exited within %.0f s: %s\nlog: %s" % (
            self.start_timeout, " ".join(self.cmd), self.read_log()))

    def start(self):
        self.launch()
        if self.wait_listening() is None:
            raise st.Fail("servd exited at startup with %s: %s\nlog: %s" % (
                self.proc.returncode, " ".join(self.cmd), self.read_log()))
        return self

    def hup(self):
        self.proc.send_signal(signal.SIGHUP)

    def terminate(self, timeout=st.STOP_TIMEOUT):
        """SIGTERM, wait; returns the exit status (a hang is a Fail)."""
        proc, self.proc = self.proc, None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                raise st.Fail("servd did not exit within %.0f s of SIGTERM\nlog: %s" % (
                    timeout, self.read_log()))
        return proc.returncode

    def metrics(self):
        return st.metrics(self.admin)


def try_start(pack_path, extra=(), timeout=10.0):
    """Starts servd on a pack that may be refused. Returns ("refused", exit status, log)
    when it exits by itself, ("serving", Proc) when it listens. A startup that takes
    longer than timeout is a hang (Fail)."""
    p = Proc(pack_path, extra=extra, start_timeout=timeout).launch()
    if p.wait_listening() is None:
        rc = p.proc.returncode
        log = p.read_log()
        p.proc = None
        return "refused", rc, log
    return "serving", p


def sanitized():
    """True when the servd under test was built with AddressSanitizer (its allocator
    adds redzones and a quarantine, so memory figures are larger; LeakSanitizer checks
    at exit) or ThreadSanitizer (the same, and its shadow memory too)."""
    return st.built_with("SERVD_ASAN", "SERVD_TSAN")



def wait_until(fn, limit, step=0.05):
    """Polls fn() until it returns a true value (returned) or limit seconds pass
    (returns the last value)."""
    deadline = time.time() + limit
    while True:
        v = fn()
        if v or time.time() >= deadline:
            return v
        time.sleep(step)


def cpu_seconds(pid):
    """User + system CPU time of a process (all threads), from /proc/PID/stat."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def thread_cpu(pid):
    """{thread name (with its id): user + system CPU seconds} of every thread."""
    out = {}
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
                head, tail = f.read().rsplit(")", 1)
        except OSError:
            continue  # the thread ended meanwhile
        fields = tail.split()
        name = head.split("(", 1)[1]
        out["%s/%s" % (name, tid)] = (int(fields[11]) + int(fields[12])) / os.sysconf(
            "SC_CLK_TCK")
    return out


def thread_cpu_since(pid, before):
    """The CPU each thread used since thread_cpu() returned before, as text."""
    now = thread_cpu(pid)
    return ", ".join("%s %.2f s" % (k, v - before.get(k, 0.0)) for k, v in sorted(now.items()))


def status_kib(pid, key):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise st.Fail("%s not in /proc/%d/status" % (key, pid))


def rss_kib(pid):
    return status_kib(pid, "VmRSS")


def open_fds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def raise_nofile(n):
    """Raises this process's soft RLIMIT_NOFILE to at least n (root may also raise the
    hard limit). Returns the new soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= n:
        return soft
    if hard != resource.RLIM_INFINITY and hard < n:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))
            return n
        except (ValueError, OSError):
            n = hard
    resource.setrlimit(resource.RLIMIT_NOFILE, (n, hard))
    return n


def normal_get(port, path=TINY, limit=st.IO_TIMEOUT):
    """GET path on a fresh connection; checks 200 and the exact body; returns seconds."""
    t0 = time.time()
    with st.Conn(port, timeout=limit) as c:
        c.send(st.req("GET", path))
        r = c.read_response()
    took = time.time() - t0
    eq((r.status, r.body), (200, FILES[path]), "a normal GET %s" % path)
    return took


def responses(port, data, wait=2.0, method="GET"):
    """Sends data on a fresh connection and reads responses until the server closes
    or stays silent for `wait` seconds. Returns (responses, 'closed' | 'open')."""
    out = []
    with st.Conn(port, timeout=wait) as c:
        try:
            c.send(data)
        except (BrokenPipeError, ConnectionResetError):
            pass
        while True:
            try:
                out.append(c.read_response(method if not out else "GET"))
            except st.Closed:
                return out, "closed"
            except st.Fail as e:
                if "timed out" in str(e) and not c.buf:
                    return out, "open"
                raise


def no_smuggled(rs, what):
    """No response in rs carries the marker body."""
    for i, r in enumerate(rs):
        ok(SMUGGLE_BODY not in r.body, "%s: response %d carries %s: a smuggled request was "
           "answered\n%s" % (what, i, SMUGGLE_PATH, r.dump()))


# ---- the LMDB container of a pack (liblmdb 0.9, 64-bit; see lmdb's midl.h/mdb.c) ----

LMDB_PAGE = 4096
_P_BRANCH, _P_LEAF, _P_OVERFLOW = 0x01, 0x02, 0x04
_F_BIGDATA = 0x01
# page header: pgno u64, pad u16, flags u16, lower u16, upper u16 (overflow: pages u32)
_PAGEHDR = 16
# node header: lo u16, hi u16, flags u16, ksize u16; then the key, then the data
_NODEHDR = 8
# the MDB_meta of pages 0 and 1 (magic, version, address, mapsize, two MDB_db,
# last page, txnid) after the page header
_META_END = _PAGEHDR + 136


def lmdb_structure(data, psize=LMDB_PAGE):
    """{offset: label} of every byte liblmdb interprets as structure rather than as a
    key or value: the meta records, the page headers, the node pointer arrays, the node
    headers and the overflow page numbers of big values. Pages are walked in file order;
    the pages an overflow value spans are skipped (they hold only the value)."""
    out = {}
    skip = 0
    for pg in range(len(data) // psize):
        b = pg * psize
        if skip:
            skip -= 1
            continue
        if pg < 2:
            for i in range(_META_END):
                out[b + i] = "meta page"
            continue
        flags = struct.unpack_from("<H", data, b + 10)[0]
        if flags & _P_OVERFLOW:
            for i in range(_PAGEHDR):
                out[b + i] = "overflow page header"
            skip = max(0, struct.unpack_from("<I", data, b + 12)[0] - 1)
            continue
        if not flags & (_P_BRANCH | _P_LEAF):
            continue
        for i in range(_PAGEHDR):
            out[b + i] = "page header"
        lower = struct.unpack_from("<H", data, b + 12)[0]
        for k in range(max(0, (lower - _PAGEHDR) // 2)):
            at = b + _PAGEHDR + 2 * k
            out[at] = out[at + 1] = "node pointer"
            ptr = struct.unpack_from("<H", data, at)[0]
            if ptr + _NODEHDR > psize:
                continue
            nflags, ksize = struct.unpack_from("<HH", data, b + ptr + 4)
            for i in range(_NODEHDR):
                out[b + ptr + i] = "node header"
            big = b + ptr + _NODEHDR + ksize
            if flags & _P_LEAF and nflags & _F_BIGDATA and big + 8 <= b + psize:
                for i in range(8):
                    out[big + i] = "overflow page number"
    return out
