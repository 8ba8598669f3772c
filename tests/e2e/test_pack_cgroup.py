"""servd-pack build takes its default --memory from the cgroup it runs in: a build in a
memory cgroup limited to 200 MiB on a machine with far more gets half of that, 100 MiB,
and so compresses on 2 of its 4 threads (34 MiB of encoder state each), as its summary
says; --memory given on the command line wins over the cgroup's. The limit is read from
the process's own cgroup and its parents, under the v1 memory controller (a cgroup below
the mount's root, as on the machine this was written on) or in the v2 hierarchy. Needs
root and a memory controller it may make a cgroup under; skipped without."""
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "pack"))
import packtest as T  # noqa: E402

LIMIT = 200 << 20


def make_cgroup():
    """A new cgroup beside this process's own, limited to LIMIT: (its directory, the file
    to write a pid into), or (None, why not)."""
    with open("/proc/self/cgroup") as f:
        lines = [line.rstrip("\n").split(":", 2) for line in f]
    name = "servd-test-%d" % os.getpid()
    why = "no memory controller"
    for _, controllers, path in lines:
        v1 = "memory" in controllers.split(",")
        if not v1 and controllers:
            continue
        root = "/sys/fs/cgroup/memory" if v1 else "/sys/fs/cgroup"
        limit_file = "memory.limit_in_bytes" if v1 else "memory.max"
        # a container sees its own cgroup at the root of the mount
        parent = root + path if os.path.isdir(root + path) else root
        d = os.path.join(parent, name)
        try:
            os.mkdir(d)
        except OSError as e:
            why = "cannot make a cgroup in %s: %s" % (parent, e)
            continue
        if not os.path.exists(os.path.join(d, limit_file)):
            os.rmdir(d)
            why = "no memory controller in %s" % parent
            continue
        with open(os.path.join(d, limit_file), "w") as f:
            f.write(str(LIMIT))
        return d, os.path.join(d, "cgroup.procs")
    return None, why


def build_in(procs, root, out, *extra):
    """servd-pack build in the cgroup; returns the CompletedProcess."""
    def enter():
        with open(procs, "w") as f:
            f.write(str(os.getpid()))
    return subprocess.run([T.PACK, "build", root, "-o", out, "--jobs", "4"] + list(extra),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=enter)


def main():
    cg, procs = make_cgroup()
    if not cg:
        print("test_pack_cgroup: skipped: %s" % procs)
        sys.exit(77)
    try:
        with T.TempDir() as work:
            root = os.path.join(work, "site")
            os.makedirs(root)
            for i in range(2):
                with open(os.path.join(root, "page%d.html" % i), "w") as f:
                    f.write("<p>%d %s</p>\n" % (i, "".join(T.WORDS)) * 500)
            out = os.path.join(work, "site.lmdb")
            p = build_in(procs, root, out)
            err = p.stderr.decode(errors="replace")
            T.eq(p.returncode, 0, "build in the cgroup: %s" % err)
            T.check("memory: compressed on 2 of 4 threads" in err and "100.0 MiB of --memory" in err,
                    "half the cgroup's 200 MiB is the build's limit: %s" % err)
            p = build_in(procs, root, out, "--memory", "1G")
            err = p.stderr.decode(errors="replace")
            T.eq(p.returncode, 0, "build in the cgroup with --memory 1G: %s" % err)
            T.check("memory:" not in err, "--memory 1G is the limit, not the cgroup's: %s" % err)
            T.eq([line.split("\t")[0] for line in T.ls(out).splitlines()],
                 ["/page0.html", "/page1.html"], "the pack's paths")
    finally:
        os.rmdir(cg)
    T.finish("test_pack_cgroup")


if __name__ == "__main__":
    main()
