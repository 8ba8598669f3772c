"""A file system call that fails (fail_io.so: a failing disk, EIO) at each point of a
servd-pack run, swept over every call the run makes on its files: the command does its
whole job (exit 0, the same output as without the failure), or it fails with exit 1 and
a message that names the error, never a verdict on a good pack. A build that fails
leaves the previous pack and manifest as they were, byte for byte, and no temporary
file; a build that succeeds wrote what a build without the failure writes. The one
documented exception: "renamed into place, but syncing its directory failed", exit 1
with the new files in place (servd-pack(1) EXIT STATUS). Each sweep takes a few
seconds: a one-file site, and runs of one call on one file (the manifest's hundred
fwrites) tried at their first and last."""
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "pack"))
import packtest as T  # noqa: E402

SHIM = os.path.join(T.BUILD_DIR, "fail_io.so")
EIO_TEXT = "Input/output error"


def run(cmd, n, under, report, **extra):
    """Runs cmd with the Nth call on a file under under failing with EIO (0: none), counted
    over the command and the children it forks (the pack check of verify, ls, cat, diff).
    @return (CompletedProcess, the call that failed or None, ["NAME PATH" of each call,
    in the order counted])."""
    count = report + ".count"
    for f in (report, count):
        if os.path.exists(f):
            os.unlink(f)
    env = dict(os.environ, LD_PRELOAD=SHIM, FAIL_IO_AT=str(n), FAIL_IO_UNDER=under,
               FAIL_IO_REPORT=report, FAIL_IO_TRACE="1", FAIL_IO_SHARED=count,
               SOURCE_DATE_EPOCH="1700000000", **extra)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, timeout=60)
    lines = open(report).read().splitlines() if os.path.exists(report) else []
    hit = [line[4:] for line in lines if line.startswith("hit ")]
    calls = sorted((int(line.split(" ", 2)[1]), line.split(" ", 2)[2]) for line in lines
                   if line.startswith("call "))
    T.eq([c[0] for c in calls], list(range(1, len(calls) + 1)), "%s: every call counted once"
         % cmd[1])
    return p, hit[0] if hit else None, [c[1] for c in calls]


def points(calls):
    """The Ns to sweep: every call, but of a run of one call on one file only the first
    and the last."""
    out = []
    for i, c in enumerate(calls):
        if i == 0 or i == len(calls) - 1 or calls[i - 1] != c or calls[i + 1] != c:
            out.append(i + 1)
    return out


def failure_said(what, p, hit):
    err = p.stderr.decode(errors="replace")
    T.eq(p.returncode, 1, "%s, %s fails: exit status (%r)" % (what, hit, err[-300:]))
    T.check(EIO_TEXT in err, "%s, %s fails: the message names the error: %r" % (what, hit,
                                                                               err[-300:]))
    for wrong in ("is /proc mounted?", "No such file", "corrupt", "FAILED", "damaged"):
        T.check(wrong not in err, "%s, %s fails: the message says %r: %r" % (what, hit, wrong,
                                                                           err[-300:]))


def read_commands(work):
    """verify, ls --json, cat and diff of good packs. The open's fstat failing was said as
    "cannot reach the open file as /proc/self/fd/3 (is /proc mounted?)"."""
    d = os.path.join(work, "read")
    os.makedirs(d)
    packs = []
    for i in (1, 2):
        root = os.path.join(work, "read-site%d" % i)
        T.make_site(root, seed=i)
        packs.append(os.path.join(d, "p%d.lmdb" % i))
        T.build(root, packs[-1])
    report = os.path.join(work, "report")
    a, b = packs
    for cmd in (["verify", a], ["ls", "--json", a], ["cat", a, "/index.html"],
                ["diff", "--json", a, b]):
        what = cmd[0] + (" --json" if "--json" in cmd else "")
        want, _, calls = run([T.PACK] + cmd, 0, d + "/", report)
        T.eq(want.returncode, 0, "%s without a failure" % what)
        T.check(len(calls) > 10, "%s: calls counted (%d)" % (what, len(calls)))
        for n in points(calls):
            p, hit, _ = run([T.PACK] + cmd, n, d + "/", report)
            T.check(hit is not None, "%s: call %d of %d failed" % (what, n, len(calls)))
            if p.returncode == 0:
                T.check(p.stdout == want.stdout, "%s, %s fails: exit 0 with other output" %
                        (what, hit))
            else:
                failure_said(what, p, hit)


def snapshot(d):
    out = {}
    for name in sorted(os.listdir(d)):
        with open(os.path.join(d, name), "rb") as f:
            out[name] = f.read()
    return out


def build_over(work):
    """A build over a previous pack and manifest (a new file too, and one changed)."""
    root = os.path.join(work, "build-site")
    os.makedirs(root)
    with open(os.path.join(root, "index.html"), "w") as f:
        f.write("<!doctype html><title>one</title><p>%s</p>\n" % ("hello " * 40))
    out = os.path.join(work, "out")
    os.makedirs(out)
    pack, manifest = os.path.join(out, "site.lmdb"), os.path.join(out, "site.json")
    T.build(root, pack, "--manifest", manifest)
    before = snapshot(out)
    with open(os.path.join(root, "index.html"), "a") as f:
        f.write("<p>two</p>\n")
    with open(os.path.join(root, "new.txt"), "w") as f:
        f.write("new " * 100)
    good = os.path.join(work, "good")
    os.makedirs(good)
    T.build(root, os.path.join(good, "site.lmdb"), "--manifest", os.path.join(good, "site.json"),
            env={"SOURCE_DATE_EPOCH": "1700000000"})
    want_ls = T.ls_json(os.path.join(good, "site.lmdb"))
    want_manifest = open(os.path.join(good, "site.json"), "rb").read()
    report = os.path.join(work, "report")
    cmd = [T.PACK, "build", root, "-o", pack, "--manifest", manifest, "-q", "--jobs", "1"]

    def restore():
        shutil.rmtree(out)
        os.makedirs(out)
        for name, data in before.items():
            with open(os.path.join(out, name), "wb") as f:
                f.write(data)

    p, _, calls = run(cmd, 0, out + "/", report)
    T.eq(p.returncode, 0, "build without a failure (%r)" % p.stderr)
    T.check(len(calls) > 50, "build: calls counted (%d)" % len(calls))
    swept = 0
    for n in points(calls):
        restore()
        p, hit, _ = run(cmd, n, out + "/", report)
        T.check(hit is not None, "build: call %d of %d failed" % (n, len(calls)))
        swept += 1
        err = p.stderr.decode(errors="replace")
        left = snapshot(out)
        temporary = [x for x in left if ".tmp-" in x or ".old-" in x]
        if p.returncode == 0:
            T.check(not temporary or "cannot remove the copy of the previous manifest" in err,
                    "build, %s fails: exit 0 leaving %s" % (hit, temporary))
            T.eq(T.ls_json(pack), want_ls, "build, %s fails: exit 0, the pack" % hit)
            T.eq(left["site.json"], want_manifest, "build, %s fails: exit 0, the manifest" % hit)
            continue
        failure_said("build", p, hit)
        T.eq(temporary, [], "build, %s fails: temporary files left" % hit)
        if "renamed into place, but syncing its directory failed" in err:
            T.eq(T.ls_json(pack), want_ls, "build, %s fails after the rename: the pack" % hit)
            continue
        T.check(left == before, "build, %s fails: the previous pack and manifest changed (%r)"
                % (hit, err[-300:]))
    T.check(swept > 50, "build: calls swept (%d)" % swept)


def manifest_link_fails(work):
    """The manifest's previous copy is kept as a hard link; a link() that fails otherwise
    than with ENOENT (EIO) is followed by a copy. With no previous manifest, that copy
    found none, and the build failed with "cannot keep a copy of the previous manifest
    (...): No such file or directory". Now the build goes on: there is none to keep."""
    root = os.path.join(work, "link-site")
    T.make_site(root)
    out = os.path.join(work, "link-out")
    os.makedirs(out)
    pack, manifest = os.path.join(out, "site.lmdb"), os.path.join(out, "site.json")
    report = os.path.join(work, "report")
    cmd = [T.PACK, "build", root, "-o", pack, "--manifest", manifest, "-q", "--jobs", "1"]
    _, _, calls = run(cmd, 0, out + "/", report, FAIL_IO_CALLS="meta")
    links = [i + 1 for i, c in enumerate(calls) if c.startswith("link ")]
    T.eq(len(links), 1, "one link() in the build: %r" % calls)
    shutil.rmtree(out)
    os.makedirs(out)
    p, hit, _ = run(cmd, links[0], out + "/", report, FAIL_IO_CALLS="meta")
    T.check(hit and hit.startswith("link "), "the link failed (%r)" % hit)
    T.eq(p.returncode, 0, "build whose link() of a manifest that is not there fails (%r)" %
         p.stderr.decode(errors="replace"))
    T.eq(sorted(x for x in os.listdir(out) if not x.startswith(".")), ["site.json", "site.lmdb"],
         "the outputs, and nothing else")
    T.eq(T.run(["verify", pack]).returncode, 0, "the pack verifies")


def main():
    if T.sanitized():
        print("test_pack_io_failures: skipped: an LD_PRELOAD shim under a sanitizer")
        sys.exit(77)
    T.check(os.path.exists(SHIM), "%s is built with the tests" % SHIM)
    with T.TempDir() as work:
        read_commands(work)
        build_over(work)
        manifest_link_fails(work)
    T.finish("test_pack_io_failures")


if __name__ == "__main__":
    main()
