#!/usr/bin/env python3
"""Socket activation and zero-downtime restarts (servd(1) "SOCKET ACTIVATION", docs/servd.socket):
the test plays systemd - it creates the listening socket itself and starts servd with the
socket as descriptor 3, LISTEN_FDS=1 and LISTEN_PID set to the child's own pid (in a
preexec_fn, as a service manager does between fork and exec).

servd then serves on the passed socket and binds nothing of its own; a socket named
"admin" in LISTEN_FDNAMES becomes the admin endpoint; LISTEN_PID of another process is
ignored; descriptors that are not listening TCP sockets, malformed or missing variables and
more sockets than servd serves are refused with exit 1. The restart: while clients loop
requests - new connections and keep-alive ones - a second servd starts on the same
inherited socket and the first gets SIGTERM; three such hand-overs in a row: zero refused
connections, zero failed requests, each old servd exits 0 within its --shutdown-timeout.
"""
import os
import signal
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servdtest as st  # noqa: E402
from servdtest import eq, ok  # noqa: E402

# Client threads of each kind during the hand-overs.
FRESH_CLIENTS = 2
KEEPALIVE_CLIENTS = 2
# Hand-overs in the restart test, and how long clients run around each.
HANDOVERS = 3
OVERLAP = 0.7


def listener(port=0):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen(1024)
    return s


class Activated:
    """servd started the way systemd starts a socket-activated service: fds[i] becomes
    descriptor 3 + i; LISTEN_FDS, LISTEN_PID (the child's own pid) and optionally
    LISTEN_FDNAMES are set between fork and exec."""

    def __init__(self, pack, fds, names=None, args=(), listen_pid=None, fds_env=None):
        self.log = os.path.join(st.tmpdir(), "activated-%d-%d.log" % (os.getpid(), time.time_ns()))
        logf = open(self.log, "wb")
        targets = list(range(3, 3 + len(fds)))

        def preexec():
            # Move the sockets out of the way first, then into place: a socket that
            # already sits on a target number must not be overwritten before it moved.
            tmp = [os.dup(fd) for fd in fds]
            for t, fd in zip(targets, tmp):
                os.dup2(fd, t)  # dup2 clears close-on-exec on the copy
                os.close(fd)
            os.environ["LISTEN_FDS"] = fds_env if fds_env is not None else str(len(fds))
            if listen_pid is False:  # LISTEN_FDS without LISTEN_PID
                os.environ.pop("LISTEN_PID", None)
            else:
                os.environ["LISTEN_PID"] = str(listen_pid if listen_pid is not None
                                               else os.getpid())
            if names is not None:
                os.environ["LISTEN_FDNAMES"] = names

        cmd = [st.SERVD] + (["--pack", pack] if pack else []) + list(args)
        self.proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, preexec_fn=preexec,
                                     pass_fds=targets)
        logf.close()
        self.cmd = cmd

    def read_log(self):
        with open(self.log, "rb") as f:
            return f.read().decode(errors="replace")

    def wait_log(self, text, limit=st.START_TIMEOUT):
        t0 = time.time()
        while time.time() - t0 < limit:
            if text in self.read_log():
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        raise st.Fail("servd never logged %r (exit %s): %s\nlog: %s" % (
            text, self.proc.poll(), " ".join(self.cmd), self.read_log()))

    def stop(self, limit=st.STOP_TIMEOUT):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(limit)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise st.Fail("servd did not stop within %.0f s\nlog: %s" % (limit, self.read_log()))
        eq(self.proc.returncode, 0, "exit status after SIGTERM\nlog: %s" % self.read_log())


def listening_sockets(pid):
    """Inodes of the TCP sockets in LISTEN state that process pid holds."""
    inodes = set()
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            target = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    out = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            next(f)
            for line in f:
                parts = line.split()
                if parts[3] == "0A" and parts[9] in inodes:  # 0A: LISTEN
                    out.add(parts[1])
    return out


def pack():
    p = os.path.join(st.tmpdir(), "act.lmdb")
    if not os.path.exists(p):
        st.pack(st.FIXTURE_SITE if os.path.isdir(st.FIXTURE_SITE) else st.WWW, "act.lmdb")
    return p


def t_serves_on_the_passed_socket_only():
    lst = listener()
    port = lst.getsockname()[1]
    d = Activated(pack(), [lst.fileno()], args=["--workers", "2"])
    try:
        d.wait_log("listening on 127.0.0.1:%d (passed in) with 2 workers" % port)
        for _ in range(20):
            eq(st.get(port, "/").status, 200, "GET / on the passed socket")
        # Nothing bound by servd itself: its only listening socket is the passed one
        # (held twice: worker 0 has the descriptor, worker 1 a duplicate).
        eq(listening_sockets(d.proc.pid), {"0100007F:%04X" % port},
           "listening sockets of servd")
    finally:
        lst.close()
        d.stop()


def t_dual_stack_socket_logs_ipv4_clients_as_ipv4():
    """docs/servd.socket binds with BindIPv6Only=both: an IPv4 client arrives on the IPv6
    socket as ::ffff:a.b.c.d, and is logged as a.b.c.d, which log analysers, GeoIP and
    block lists take for the same host as on an IPv4 socket."""
    s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("::ffff:127.0.0.1", 0))  # IPv4 clients of 127.0.0.1 only
    s.listen(64)
    port = s.getsockname()[1]
    log = os.path.join(st.tmpdir(), "dual-stack-%d.log" % time.time_ns())
    d = Activated(pack(), [s.fileno()], args=["--access-log", log])
    try:
        d.wait_log("(passed in)")
        eq(st.get(port, "/").status, 200, "GET / over IPv4 on the dual-stack socket")
        t0 = time.time()
        while time.time() - t0 < 5 and not (os.path.exists(log) and os.path.getsize(log)):
            time.sleep(0.05)
        with open(log) as f:
            line = f.readline()
        ok(line.startswith("127.0.0.1 - - ["), "access log line: %r" % line)
    finally:
        s.close()
        d.stop()


def t_admin_socket_by_name():
    web, adm = listener(), listener()
    wport, aport = web.getsockname()[1], adm.getsockname()[1]
    d = Activated(pack(), [web.fileno(), adm.fileno()], names="web:admin")
    try:
        d.wait_log("listening on 127.0.0.1:%d (passed in)" % wport)
        eq(st.get(wport, "/").status, 200, "GET / on the web socket")
        r = st.get(aport, "/metrics")
        eq(r.status, 200, "/metrics on the socket named admin")
        ok(b"servd_pack_info" in r.body, "/metrics body")
        eq(st.get(wport, "/metrics").status, 404, "/metrics on the web socket")
        ok("admin on 127.0.0.1:%d" % aport in d.read_log(), "startup line names the admin socket")
    finally:
        web.close()
        adm.close()
        d.stop()


def t_listen_pid_of_another_process_is_ignored():
    lst = listener()
    own = st.free_port()
    d = Activated(pack(), [lst.fileno()], listen_pid=1, args=["--listen", "127.0.0.1:%d" % own])
    try:
        d.wait_log("listening on 127.0.0.1:%d with" % own)
        ok("passed in" not in d.read_log(), "a socket meant for another pid was used")
        eq(st.get(own, "/").status, 200, "GET / on servd's own --listen socket")
    finally:
        lst.close()
        d.stop()


def t_bad_activation_is_refused():
    lst = listener()
    adm = listener()
    conn_only = socket.socket(socket.AF_INET, socket.SOCK_STREAM)  # not listening
    conn_only.bind(("127.0.0.1", 0))
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # listening, but not TCP
    unix.bind("\0servd-act-%d" % os.getpid())  # abstract: no file, no length limit
    unix.listen(1)
    many = [listener() for _ in range(17)]
    f = open(pack(), "rb")
    cases = [
        ("a regular file", [f.fileno()], {}, "not a stream socket"),
        ("a socket that is not listening", [conn_only.fileno()], {}, "not listening"),
        ("a UDP socket", [udp.fileno()], {}, "not a stream socket"),
        ("LISTEN_FDS=x", [lst.fileno()], {"fds_env": "x"}, "LISTEN_FDS='x' is not a number"),
        ("LISTEN_FDS=2 with one socket", [lst.fileno()], {"fds_env": "2"}, "descriptor 4"),
        ("a listening Unix socket", [unix.fileno()], {},
         "socket 3 is not a TCP socket (IPv4 or IPv6)"),
        # a systemd that sets LISTEN_FDS sets LISTEN_PID too: without it the sockets may
        # be anyone's, and serving on none of them would go unnoticed
        ("LISTEN_PID missing", [lst.fileno()], {"listen_pid": False},
         "LISTEN_FDS is set but LISTEN_PID is missing"),
        ("LISTEN_PID=x", [lst.fileno()], {"listen_pid": "x"},
         "LISTEN_FDS is set but LISTEN_PID is 'x', not a process id"),
        # SV_ACTIVATION_MAX: 16 HTTP sockets and one admin; refused before any is looked at
        ("LISTEN_FDS=18", [lst.fileno()], {"fds_env": "18"},
         "18 sockets passed; at most 16 HTTP sockets and one admin socket are served"),
        ("17 HTTP sockets", [s.fileno() for s in many], {},
         "more than 16 HTTP sockets passed"),
        # the second was served as HTTP: the site on what was meant for metrics
        ("two sockets named admin", [lst.fileno(), adm.fileno()], {"names": "admin:admin"},
         "descriptors 3 and 4 are both named admin"),
        # servd.1: no default address beside passed sockets; 127.0.0.1:8080 was bound
        ("only a socket named admin", [adm.fileno()], {"names": "admin"},
         "only a socket named admin was passed"),
        # it was ignored without a word, its address never bound
        ("--admin and a socket named admin", [lst.fileno(), adm.fileno()],
         {"names": "web:admin", "args": ["--admin", "127.0.0.1:0"]},
         "--admin 127.0.0.1:0 and a passed socket named admin: give one of them"),
    ]
    try:
        for what, fds, kw, msg in cases:
            d = Activated(pack(), fds, **kw)
            try:
                d.proc.wait(st.START_TIMEOUT)
            except subprocess.TimeoutExpired:
                d.proc.kill()
                d.proc.wait()
                raise st.Fail("%s: servd kept running" % what)
            eq(d.proc.returncode, 2 if msg.startswith("--admin") else 1,
               "%s: exit status" % what)
            ok(msg in d.read_log(), "%s: message %r not in %r" % (what, msg, d.read_log()))
    finally:
        for x in [lst, adm, conn_only, udp, unix, f] + many:
            x.close()


def t_systemd_socket_activate():
    """The same through systemd's own implementation of the protocol (systemd-socket-activate
    binds, waits for the first connection, sets LISTEN_* and execs servd)."""
    import shutil
    tool = shutil.which("systemd-socket-activate")
    if tool is None:
        raise st.Skip("systemd-socket-activate is not installed (Debian package systemd)")
    port = st.free_port()
    log = os.path.join(st.tmpdir(), "sd-activate.log")
    with open(log, "wb") as logf:
        proc = subprocess.Popen([tool, "-l", "127.0.0.1:%d" % port, "--fdname=web", st.SERVD,
                                 "--pack", pack(), "--workers", "2"], stdout=logf,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        t0 = time.time()
        while True:
            try:
                r = st.get(port, "/")  # the first connection starts servd
                break
            except OSError:
                ok(time.time() - t0 < st.START_TIMEOUT, "systemd-socket-activate never listened")
                time.sleep(0.05)
        eq(r.status, 200, "first request (it started servd)")
        for _ in range(20):
            eq(st.get(port, "/").status, 200, "GET /")
        want = "listening on 127.0.0.1:%d (passed in)" % port
        t0 = time.time()
        while True:  # the line follows the workers' start: it may come after a response
            with open(log, "rb") as f:
                text = f.read().decode(errors="replace")
            if want in text or time.time() - t0 > 5:
                break
            time.sleep(0.05)
        ok(want in text, "servd log: %r" % text)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(st.STOP_TIMEOUT)
    eq(proc.returncode, 0, "servd (exec'd by systemd-socket-activate) exit status after SIGTERM")


class Load:
    """Clients looping requests against port until stopped: fresh connections (one request
    each, Connection: close) and keep-alive connections. Any connect error is a refused
    connection; any request without a complete, correct response is a failed request.
    A keep-alive client, like every HTTP client, retries a request once on a new connection
    when the server closed an idle connection before answering anything (RFC 9112 9.3.1);
    those retries are counted and reported, and the retried request must then succeed."""

    def __init__(self, port, want):
        self.port, self.want = port, want
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.requests = 0
        self.reused = 0  # requests answered on a connection that had answered before
        self.refused = []
        self.failed = []
        self.retried = 0
        self.threads = [threading.Thread(target=self.fresh, daemon=True)
                        for _ in range(FRESH_CLIENTS)]
        self.threads += [threading.Thread(target=self.keepalive, daemon=True)
                         for _ in range(KEEPALIVE_CLIENTS)]

    def start(self):
        for t in self.threads:
            t.start()
        return self

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join(30)

    def note(self, kind, what):
        with self.lock:
            (self.refused if kind == "refused" else self.failed).append(what)

    def check(self, r):
        eq(r.status, 200, "status")
        ok(r.body == self.want, "body differs from the pack's /")

    def fresh(self):
        while not self.stop.is_set():
            try:
                c = st.Conn(self.port)
            except OSError as e:
                self.note("refused", "connect: %r" % e)
                continue
            try:
                c.send(st.req("GET", "/", [("Connection", "close")]))
                self.check(c.read_response())
                with self.lock:
                    self.requests += 1
            except (OSError, st.Closed, st.Fail) as e:
                self.note("failed", "fresh connection: %r" % e)
            finally:
                c.close()

    def keepalive(self):
        c = None
        while not self.stop.is_set():
            reused = c is not None
            try:
                if c is None:
                    c = st.Conn(self.port)
            except OSError as e:
                self.note("refused", "connect: %r" % e)
                continue
            try:
                c.send(st.req("GET", "/"))
                r = c.read_response()
            except (OSError, st.Closed) as e:
                nothing = not c.buf
                c.close()
                c = None
                if reused and nothing:
                    with self.lock:
                        self.retried += 1
                    continue  # the standard retry, on a new connection
                self.note("failed", "keep-alive: %r" % e)
                continue
            except st.Fail as e:  # a timeout or a malformed response: never retried
                c.close()
                c = None
                self.note("failed", "keep-alive: %s" % e)
                continue
            try:
                self.check(r)
                with self.lock:
                    self.requests += 1
                    self.reused += reused
            except st.Fail as e:
                self.note("failed", "keep-alive: %s" % e)
            if r.get("Connection") == "close":
                c.close()
                c = None
        if c:
            c.close()


def t_restart_without_refused_connections():
    p = pack()
    lst = listener()
    port = lst.getsockname()[1]
    first = Activated(p, [lst.fileno()], args=["--workers", "2", "--shutdown-timeout", "5"])
    first.wait_log("listening on")
    want = st.get(port, "/").body
    load = Load(port, want).start()
    cur = first
    stops = []
    try:
        for i in range(HANDOVERS):
            time.sleep(OVERLAP)
            nxt = Activated(p, [lst.fileno()], args=["--workers", "2", "--shutdown-timeout", "5"])
            nxt.wait_log("listening on")
            time.sleep(OVERLAP / 2)  # both serve the one accept queue for a while
            t0 = time.time()
            cur.stop(limit=10)
            stops.append(time.time() - t0)
            cur = nxt
        time.sleep(OVERLAP)
    finally:
        load.finish()
        lst.close()  # the "manager" lets go; the last servd still holds the socket
        cur.stop()
    print("  %d hand-overs: %d requests (%d on reused connections), %d refused, %d failed, "
          "%d keep-alive retries; old servd stopped in %s s" % (
              HANDOVERS, load.requests, load.reused, len(load.refused), len(load.failed),
              load.retried,
                                          ", ".join("%.2f" % s for s in stops)))
    for what in (load.refused + load.failed)[:10]:
        print("  " + what[:300])
    eq(len(load.refused), 0, "refused connections")
    eq(len(load.failed), 0, "failed requests")
    ok(load.requests > 100, "only %d requests" % load.requests)
    ok(load.reused > 100, "only %d requests on reused keep-alive connections" % load.reused)
    eq([t.name for t in load.threads if t.is_alive()], [], "clients still running")
    ok(all(s < 5 for s in stops), "an old servd took %r s to stop" % stops)


if __name__ == "__main__":
    st.run(st.collect(globals()))
