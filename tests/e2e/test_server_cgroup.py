"""servd's default --workers (and servd-pack's --jobs, which count the same way) follows
the CPU quota of the cgroup it runs in, not the host's CPUs: a container given one CPU of
a 64-CPU host must not start 64 workers. The quota is read from the process's own cgroup
and every parent (a systemd slice's CPUQuota= sits on a parent), under the v1 cpu
controller (cpu.cfs_quota_us over cpu.cfs_period_us) or in the v2 hierarchy (cpu.max).
The test puts servd in a cgroup whose parent allows 1 CPU and expects 1 worker where it
starts 2 outside. Needs root, 2 CPUs and a cpu controller it may make cgroups under;
skipped without."""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servdtest as st  # noqa: E402
from servdtest import eq  # noqa: E402


def make_cgroups():
    """A new cgroup below this process's own whose quota is one CPU, and a child of it
    without a quota: (the two directories, the child's cgroup.procs), or (None, None,
    why not)."""
    with open("/proc/self/cgroup") as f:
        lines = [line.rstrip("\n").split(":", 2) for line in f]
    name = "servd-test-%d" % os.getpid()
    why = "no cpu controller"
    for _, controllers, path in lines:
        v1 = "cpu" in controllers.split(",")
        if not v1 and controllers:
            continue
        root = "/sys/fs/cgroup/cpu" if v1 else "/sys/fs/cgroup"
        # a container sees its own cgroup at the root of the mount
        parent = root + path if os.path.isdir(root + path) else root
        if not os.path.exists(os.path.join(parent, "cgroup.procs")):
            # not a cgroup file system: a hybrid host's /sys/fs/cgroup is a tmpfs, and
            # servd reads v2's files only at the top of /sys/fs/cgroup
            why = "%s is not a cgroup" % parent
            continue
        d = os.path.join(parent, name)
        try:
            os.mkdir(d)
        except OSError as e:
            why = "cannot make a cgroup in %s: %s" % (parent, e)
            continue
        try:
            if v1:
                with open(os.path.join(d, "cpu.cfs_period_us"), "w") as f:
                    f.write("100000")
                with open(os.path.join(d, "cpu.cfs_quota_us"), "w") as f:
                    f.write("100000")
            else:  # the child's processes need the controller enabled below d
                with open(os.path.join(d, "cpu.max"), "w") as f:
                    f.write("100000 100000")
                with open(os.path.join(d, "cgroup.subtree_control"), "w") as f:
                    f.write("+cpu")
            inner = os.path.join(d, "inner")
            os.mkdir(inner)
        except OSError as e:
            os.rmdir(d)
            why = "cannot set a CPU quota in %s: %s" % (d, e)
            continue
        return d, inner, os.path.join(inner, "cgroup.procs")
    return None, None, why


def workers(procs):
    """The workers servd (built-in site, default --workers) starts in the cgroup whose
    cgroup.procs is procs (None: this process's)."""
    def enter():
        with open(procs, "w") as f:
            f.write(str(os.getpid()))
    port = st.free_port()
    log = os.path.join(st.tmpdir(), "servd-cgroup-%d.log" % port)
    with open(log, "wb") as logf:
        p = subprocess.Popen([st.SERVD, "--listen", "127.0.0.1:%d" % port], stdout=logf,
                             stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             preexec_fn=enter if procs else None)
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
    outer, inner, procs = make_cgroups()
    if not outer:
        raise st.Skip(procs)
    try:
        outside = workers(None)
        if outside < 2:
            raise st.Skip("servd starts %d worker outside the test's cgroup (a quota of "
                          "this process's own?)" % outside)
        eq(outside, min(n, 256), "workers outside the cgroup (%d CPUs)" % n)
        eq(workers(procs), 1, "workers under a parent's quota of 1 CPU")
    finally:
        for d in (inner, outer):
            try:
                os.rmdir(d)
            except OSError as e:
                print("test_server_cgroup: cannot remove %s: %s" % (d, e))


if __name__ == "__main__":
    st.run(st.collect(globals()))
