#!/usr/bin/env python3
"""--user (servd(1) "--user", "PACK SWAPS"): started as root, servd binds a port below 1024,
then runs as the given user - every thread's real, effective and saved uid and gid are the
user's, its groups are the user's, no capability is left - and it still serves, swaps by
rename (the watch) and by SIGHUP, and writes its access log as that user. A replacement
pack that user cannot read is refused with the cause, and the current pack keeps serving.
An unknown user is a usage error; a process that is not root cannot switch to another user
(exit 1); --user naming the user servd already runs as is accepted; and the documented
alternative works: an unprivileged user holding only CAP_NET_BIND_SERVICE binds port < 1024.
A first pack only root can read is refused at startup (exit 1): every swap opens it again.

Needs root (CI runs as root); prints SKIP otherwise.
"""
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servdtest as st  # noqa: E402
import swaptest as sw  # noqa: E402
from servdtest import eq, ok  # noqa: E402

USER = "nobody"


def privileged_port():
    """A free 127.0.0.1 port below 1024 (only root can bind it)."""
    port = st.bindable_port(range(980, 600, -1))
    if port is None:
        raise st.Fail("no free port below 1024")
    return port


def ids(path):
    """{'Uid': [...], 'Gid': [...], 'Groups': [...], 'CapEff': '...'} of a status file."""
    out = {}
    with open(path) as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("Uid", "Gid", "Groups"):
                out[k] = [int(x) for x in v.split()]
            elif k in ("CapEff", "CapPrm", "CapInh", "CapAmb"):
                out[k] = v.strip()
    return out


class Ctx:
    def __enter__(self):
        self.pw = pwd.getpwnam(USER)
        # st.tmpdir() is private to root (0700): the user could not even reach its pack.
        self.dir = tempfile.mkdtemp(prefix="servd-user-", dir="/tmp")
        os.chmod(self.dir, 0o755)
        self.v = sw.Versions(2, tag="user")
        self.pack = os.path.join(self.dir, "site.lmdb")
        self.install(self.v.packs[0])
        self.logdir = os.path.join(self.dir, "log")
        os.mkdir(self.logdir)
        os.chown(self.logdir, self.pw.pw_uid, self.pw.pw_gid)
        self.access = os.path.join(self.logdir, "access.log")
        self.port = privileged_port()
        self.adm = st.free_port()
        self.log = os.path.join(self.dir, "servd.log")
        cmd = [st.SERVD, "--pack", self.pack, "--listen", "127.0.0.1:%d" % self.port,
               "--workers", "2", "--admin", "127.0.0.1:%d" % self.adm, "--user", USER,
               "--access-log", self.access]
        # Started with an inheritable capability (as a container runtime or setpriv
        # may leave): the switch must clear it too.
        setpriv = shutil.which("setpriv")
        if setpriv:
            cmd = [setpriv, "--inh-caps", "+net_bind_service"] + cmd
        with open(self.log, "wb") as logf:
            self.proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)
        # Not "the port accepts": the kernel queues connections as soon as the socket
        # is bound, before the switch. The startup line comes after it and the threads.
        t0 = time.time()
        while "servd: listening on" not in self.read_log():
            if self.proc.poll() is not None or time.time() - t0 > st.START_TIMEOUT:
                raise st.Fail("servd --user did not start (exit %s): %s" % (
                    self.proc.poll(), self.read_log()))
            time.sleep(0.02)
        return self

    def install(self, src, mode=0o644):
        tmp = os.path.join(self.dir, ".new")
        shutil.copyfile(src, tmp)
        os.chmod(tmp, mode)
        os.rename(tmp, self.pack)

    def read_log(self):
        with open(self.log, "rb") as f:
            return f.read().decode(errors="replace")

    def index(self):
        return st.get(self.port, "/").body

    def wait_index(self, want, what):
        t0 = time.time()
        while time.time() - t0 < 5 and self.index() != want:
            time.sleep(0.03)
        eq(self.index(), want, what)

    def __exit__(self, et, ev, tb):
        try:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(st.STOP_TIMEOUT)
            if et is None:
                eq(self.proc.returncode, 0, "exit status after SIGTERM\n" + self.read_log())
        finally:
            shutil.rmtree(self.dir, True)


def t_runs_as_the_user_on_a_privileged_port(c):
    u, g = c.pw.pw_uid, c.pw.pw_gid
    st_ = ids("/proc/%d/status" % c.proc.pid)
    eq(st_["Uid"], [u, u, u, u], "Uid line (real, effective, saved, fs)")
    eq(st_["Gid"], [g, g, g, g], "Gid line")
    want_groups = sorted({g} | {gr.gr_gid for gr in __import__("grp").getgrall()
                                if USER in gr.gr_mem})
    eq(sorted(st_["Groups"]), want_groups, "supplementary groups (root's are gone)")
    for cap in ("CapInh", "CapEff", "CapPrm", "CapAmb"):
        eq(st_[cap], "0000000000000000", cap)
    tasks = os.listdir("/proc/%d/task" % c.proc.pid)
    ok(len(tasks) >= 3, "threads: %r" % tasks)
    for t in tasks:
        eq(ids("/proc/%d/task/%s/status" % (c.proc.pid, t))["Uid"], [u, u, u, u],
           "Uid of thread %s" % t)
    eq(c.index(), c.v.index(1), "GET / on port %d" % c.port)
    ok("servd: listening on 127.0.0.1:%d" % c.port in c.read_log(), "startup line")


def t_swaps_as_the_user(c):
    c.install(c.v.packs[1])
    c.wait_index(c.v.index(2), "after a rename (watch), as %s" % USER)
    c.install(c.v.packs[0])
    c.proc.send_signal(signal.SIGHUP)
    c.wait_index(c.v.index(1), "after a rename and SIGHUP, as %s" % USER)
    eq(sw.metrics(c.adm)["servd_pack_swap_failures_total"], 0, "refusals")


def t_an_unreadable_pack_is_refused(c):
    fails0 = sw.metrics(c.adm)["servd_pack_swap_failures_total"]
    c.install(c.v.packs[1], mode=0o600)  # root's only
    eq(sw.wait_metric(c.adm, "servd_pack_swap_failures_total", fails0 + 1), fails0 + 1,
       "the unreadable pack is refused")
    eq(c.index(), c.v.index(1), "the current pack keeps serving")
    ok("Permission denied" in c.read_log(), "the cause is logged: %r" % c.read_log()[-500:])
    c.install(c.v.packs[1])  # readable again: a new file, so the watch loads it
    c.wait_index(c.v.index(2), "a readable pack after the refused one")


def t_the_served_pack_made_unreadable_keeps_serving(c):
    """The pack served made unreadable to the user and touched, not a byte changed (a
    chmod and a touch by hand): the reload is refused with the cause, and the pack keeps
    serving. It was taken for a pack written in place and every request answered 503,
    for good with the watch (the chmod back moves only the ctime, which it ignores)."""
    want = c.index()
    fails0 = sw.metrics(c.adm)["servd_pack_swap_failures_total"]
    os.chmod(c.pack, 0o600)
    try:
        later = time.time() + 5
        os.utime(c.pack, (later, later))
        c.proc.send_signal(signal.SIGHUP)
        ok(sw.wait_metric(c.adm, "servd_pack_swap_failures_total", fails0 + 1) >= fails0 + 1,
           "the unreadable pack is refused")
        r = st.get(c.port, "/")
        eq((r.status, r.body), (200, want), "the pack served keeps serving")
        ok("written in place" not in c.read_log(), "taken for a pack written in place: %r"
           % c.read_log()[-800:])
    finally:
        os.chmod(c.pack, 0o644)
    eq(c.index(), want, "after the chmod back")


def t_access_log_written_as_the_user(c):
    st.get(c.port, "/robots.txt")
    t0 = time.time()
    while time.time() - t0 < 5 and not (os.path.exists(c.access) and
                                        b"/robots.txt" in open(c.access, "rb").read()):
        time.sleep(0.1)
    ok(os.path.exists(c.access), "no access log")
    eq(os.stat(c.access).st_uid, c.pw.pw_uid, "owner of the access log servd created")
    ok(b"/robots.txt" in open(c.access, "rb").read(), "the request is logged")


def t_an_unwritable_access_log_names_the_user(c):
    """The access log is opened after the switch: a log the user cannot write is refused
    with a message that names the user, as an unreadable pack's does."""
    log = os.path.join(c.dir, "root-only.log")  # c.dir is root's, 0755
    p = subprocess.run([st.SERVD, "--pack", c.pack, "--listen", "127.0.0.1:%d" % st.free_port(),
                        "--user", USER, "--access-log", log], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, timeout=30)
    err = p.stderr.decode(errors="replace")
    eq(p.returncode, 1, "an access log the user cannot write: exit status (%r)" % err)
    ok("Permission denied" in err and "as user %s, who must write the access log" % USER in err,
       "an access log the user cannot write: message %r" % err)


def t_without_root():
    rc = subprocess.run([st.SERVD, "--pack", st.pack(st.WWW, "user-www.lmdb"),
                         "--user", "no-such-user-here"], stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, timeout=30)
    eq(rc.returncode, 2, "unknown user: exit status")
    ok(b"no-such-user-here" in rc.stderr, "unknown user: message %r" % rc.stderr)
    # a number past the uid range must not wrap (2^32 is uid 0, root), and
    # 2^32 - 1 is setresuid's "unchanged"
    for uid in ("4294967296", "4294967295", "18446744073709551616"):
        rc = subprocess.run([st.SERVD, "--pack", st.pack(st.WWW, "user-www.lmdb"),
                             "--listen", "127.0.0.1:%d" % st.free_port(), "--user", uid],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
        eq(rc.returncode, 2, "--user %s: exit status (%r)" % (uid, rc.stderr))
        ok(b"not a user id" in rc.stderr, "--user %s: message %r" % (uid, rc.stderr))
    # a password database that cannot be read (LDAP or sssd down) is no usage error
    rc = subprocess.run([st.SERVD, "--pack", st.pack(st.WWW, "user-www.lmdb"),
                         "--listen", "127.0.0.1:%d" % st.free_port(), "--user", USER],
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30,
                        env=st.preload_env(os.path.join(st.BUILD_DIR, "swap_open.so"),
                                           FAIL_GETPW="1"))
    eq(rc.returncode, 1, "an unreadable password database: exit status (%r)" % rc.stderr)
    eq(rc.stderr, b"servd: refusing to start: --user '%s': Input/output error\n" % USER.encode(),
       "an unreadable password database: message")
    setpriv = shutil.which("setpriv")
    if setpriv is None:  # util-linux has it: not expected on Debian
        raise st.Skip("setpriv is not installed: the half of this test that needs it")
    pk = os.path.join(tempfile.mkdtemp(prefix="servd-user-", dir="/tmp"), "site.lmdb")
    try:
        os.chmod(os.path.dirname(pk), 0o755)
        shutil.copyfile(st.pack(st.WWW, "user-www.lmdb"), pk)
        os.chmod(pk, 0o644)
        pw = pwd.getpwnam(USER)
        as_nobody = [setpriv, "--reuid", str(pw.pw_uid), "--regid", str(pw.pw_gid),
                     "--clear-groups", st.SERVD,
                     "--pack", pk]
        rc = subprocess.run(as_nobody + ["--user", "root"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, timeout=30)
        eq(rc.returncode, 1, "not root, --user root: exit status (%r)" % rc.stderr)
        ok(b"not as root" in rc.stderr, "not root: message %r" % rc.stderr)
        # Started as root with a pack only root can read: the pack opens, but every swap
        # would open it again as the user, so servd refuses to start (not at the first
        # deploy).
        os.chmod(pk, 0o600)
        rc = subprocess.run([st.SERVD, "--pack", pk, "--listen", "127.0.0.1:%d" % st.free_port(),
                             "--user", USER], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            timeout=30)
        eq(rc.returncode, 1, "a pack %s cannot read: exit status (%r)" % (USER, rc.stderr))
        ok(b"Permission denied as user " + USER.encode() in rc.stderr,
           "a pack the user cannot read: message %r" % rc.stderr)
        os.chmod(pk, 0o644)
        port = st.free_port()
        out = os.path.join(os.path.dirname(pk), "servd.log")
        with open(out, "wb") as outf:
            p = subprocess.Popen(as_nobody + ["--user", USER, "--listen", "127.0.0.1:%d" % port],
                                 stdout=outf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            t0 = time.time()
            while True:
                try:
                    eq(st.get(port, "/").status, 200, "already %s, --user %s" % (USER, USER))
                    break
                except OSError:
                    if p.poll() is not None or time.time() - t0 > st.START_TIMEOUT:
                        raise st.Fail("servd --user %s as %s did not start: %s" % (
                            USER, USER, open(out, "rb").read().decode(errors="replace")))
                    time.sleep(0.05)
        finally:
            p.send_signal(signal.SIGTERM)
            p.wait(st.STOP_TIMEOUT)
        eq(p.returncode, 0, "already %s: exit status" % USER)
        # The documented alternative to --user: an unprivileged user with only
        # CAP_NET_BIND_SERVICE binds a port below 1024 itself.
        port = privileged_port()
        with open(out, "wb") as outf:
            p = subprocess.Popen(as_nobody[:1] + ["--inh-caps", "+net_bind_service",
                                                  "--ambient-caps", "+net_bind_service"]
                                 + as_nobody[1:] + ["--listen", "127.0.0.1:%d" % port],
                                 stdout=outf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            t0 = time.time()
            while True:
                try:
                    eq(st.get(port, "/").status, 200, "%s with CAP_NET_BIND_SERVICE on port %d"
                       % (USER, port))
                    break
                except OSError:
                    if p.poll() is not None or time.time() - t0 > st.START_TIMEOUT:
                        raise st.Fail("servd as %s with CAP_NET_BIND_SERVICE did not start: %s"
                                      % (USER, open(out, "rb").read().decode(errors="replace")))
                    time.sleep(0.05)
            eq(ids("/proc/%d/status" % p.pid)["CapEff"], "0000000000000400",
               "effective capabilities: CAP_NET_BIND_SERVICE only")
        finally:
            p.send_signal(signal.SIGTERM)
            p.wait(st.STOP_TIMEOUT)
        eq(p.returncode, 0, "with CAP_NET_BIND_SERVICE: exit status")
    finally:
        shutil.rmtree(os.path.dirname(pk), True)


if __name__ == "__main__":
    if os.geteuid() != 0:
        print("SKIP: --user needs root to test (CI runs as root)")
        sys.exit(77)
    # The tests sharing one servd --user run under one Ctx, t_without_root on its own.
    shared = [t for t in st.collect(globals()) if t is not t_without_root]
    codes = []
    for tests, setup in ((shared, Ctx), ([t_without_root], None)):
        try:
            st.run(tests, setup=setup)
        except SystemExit as e:
            codes.append(e.code)
    sys.exit(1 if any(c not in (0, 77) for c in codes) else 77 if all(c == 77 for c in codes)
             else 0)
