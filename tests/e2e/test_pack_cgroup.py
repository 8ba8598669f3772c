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
import cgrouptest  # noqa: E402

LIMIT = 200 << 20


def build_in(procs, root, out, *extra):
    """servd-pack build in the cgroup; returns the CompletedProcess."""
    return subprocess.run([T.PACK, "build", root, "-o", out, "--jobs", "4"] + list(extra),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          preexec_fn=cgrouptest.enter(procs))


def main():
    cg, procs = cgrouptest.make("memory", [("memory.limit_in_bytes", str(LIMIT))],
                                [("memory.max", str(LIMIT))])
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
        cgrouptest.remove(cg)
    T.finish("test_pack_cgroup")


if __name__ == "__main__":
    main()
