"""servd's default --workers (and servd-pack's --jobs, which count the same way) follows
the CPU quota of the cgroup it runs in, not the host's CPUs: a container given one CPU of
a 64-CPU host must not start 64 workers. The quota is read from the process's own cgroup
and every parent (a systemd slice's CPUQuota= sits on a parent), under the v1 cpu
controller (cpu.cfs_quota_us over cpu.cfs_period_us) or in the v2 hierarchy (cpu.max).
The test puts servd in a cgroup whose parent allows 1 CPU and expects 1 worker where it
starts 2 outside. Needs root, 2 CPUs and a cpu controller it may make cgroups under;
skipped without. Also: a pids controller's limit that leaves no room for a thread or a
process is named as such, by servd and servd-pack."""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cgrouptest  # noqa: E402
import servdtest as st  # noqa: E402
from servdtest import eq  # noqa: E402


def workers(procs):
    """The workers servd (built-in site, default --workers) starts in the cgroup whose
    cgroup.procs is procs (None: this process's)."""
    port = st.free_port()
    log = os.path.join(st.tmpdir(), "servd-cgroup-%d.log" % port)
    with open(log, "wb") as logf:
        p = subprocess.Popen([st.SERVD, "--listen", "127.0.0.1:%d" % port], stdout=logf,
                             stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             preexec_fn=cgrouptest.enter(procs) if procs else None)
    try:
        deadline = time.time() + 30
        while time.time() < deadline and p.poll() is None:
            with open(log, errors="replace") as f:
                text = f.read()
            for line in text.splitlines():
                if line.startswith("servd: listening on") and " with " in line:
                    return int(line.split(" with ")[1].split()[0])
            time.sleep(0.05)
        with open(log, errors="replace") as f:
            raise st.Fail("servd did not start: %s" % f.read())
    finally:
        if p.poll() is None:
            p.terminate()
        p.wait(30)


def t_default_workers_follow_a_parent_cgroups_cpu_quota():
    st.ensure_binaries()
    n = len(os.sched_getaffinity(0))
    if n < 2:
        raise st.Skip("fewer than 2 CPUs")
    # the quota on a parent of servd's cgroup, as a slice's CPUQuota= is
    dirs, procs = cgrouptest.make("cpu", [("cpu.cfs_period_us", "100000"),
                                          ("cpu.cfs_quota_us", "100000")],
                                  [("cpu.max", "100000 100000")], child=True)
    if not dirs:
        raise st.Skip(procs)
    try:
        outside = workers(None)
        if outside < 2:
            raise st.Skip("servd starts %d worker outside the test's cgroup (a quota of "
                          "this process's own?)" % outside)
        eq(outside, min(n, 256), "workers outside the cgroup (%d CPUs)" % n)
        eq(workers(procs), 1, "workers under a parent's quota of 1 CPU")
    finally:
        cgrouptest.remove(dirs)


def t_a_limit_on_processes_is_named():
    """A cgroup's pids.max (or ulimit -u) that leaves no room for a thread or the pack's
    check process: servd and servd-pack said "Resource temporarily unavailable" (what
    strerror calls EAGAIN), which names neither the cause nor the remedy (2026-12-06)."""
    st.ensure_binaries()
    reason = "out of memory, or at a limit on processes (ulimit -u, a cgroup's pids.max)"
    pack = os.path.join(st.tmpdir(), "pids.lmdb")
    subprocess.run([st.SERVD_PACK, "build", st.WWW, "-o", pack, "-q"], check=True)
    # LeakSanitizer's check at exit starts a process of its own, which the limit refuses
    env = dict(os.environ, ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0")
    for limit, cmd, want in (
            ("1", [st.SERVD, "--pack", pack, "--listen", "127.0.0.1:0"],
             "servd: refusing to start: %s: cannot check the pack: %s: %s\n"
             % (pack, os.path.realpath(st.SERVD), reason)),
            ("2", [st.SERVD, "--pack", pack, "--listen", "127.0.0.1:0", "--workers", "2"],
             "servd: cannot start worker 1: %s\n" % reason),
            ("1", [st.SERVD_PACK, "build", st.WWW, "-o", pack + ".new", "-q", "--jobs", "2"],
             "servd-pack: cannot start a thread: %s\n" % reason)):
        dirs, procs = cgrouptest.make("pids", [("pids.max", limit)], [("pids.max", limit)])
        if not dirs:
            raise st.Skip(procs)
        try:
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               stdin=subprocess.DEVNULL, timeout=60, env=env,
                               preexec_fn=cgrouptest.enter(procs))
        finally:
            cgrouptest.remove(dirs)
        err = p.stderr.decode(errors="replace")
        what = "%s with pids.max %s" % (os.path.basename(cmd[0]), limit)
        eq(p.returncode, 1, "%s: exit status (%r)" % (what, err))
        st.ok(err.startswith(want), "%s: %r" % (what, err))


if __name__ == "__main__":
    st.run(st.collect(globals()))
