"""The command line: --help, --version, exit statuses (0 ok, 1 failure, 2 usage), and
failures that name the file and the cause and leave no output behind."""
import gzip
import json
import os
import random
import shutil
import signal
import stat
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "pack"))
import packtest as T  # noqa: E402

NOBODY = 65534


def no_output(outdir, out, what):
    T.check(not os.path.exists(out), "%s: output %s exists" % (what, out))
    left = [f for f in os.listdir(outdir) if ".tmp-" in f]
    T.eq(left, [], "%s: temporary files left in %s" % (what, outdir))


def expect_failure(args, status, needles, what, outdir=None, out=None, preexec_fn=None, env=None):
    p = T.run(args, preexec_fn=preexec_fn, env=env)
    err = p.stderr.decode(errors="replace")
    T.eq(p.returncode, status, "%s: exit status (stderr: %s)" % (what, err.strip()))
    for n in needles:
        T.check(n in err, "%s: message %r does not contain %r" % (what, err.strip(), n))
    if out:
        no_output(outdir, out, what)
    return err


def under_terminal(args, term, cols):
    """Runs servd-pack with stderr on a pseudo-terminal cols wide and TERM=term (None:
    unset); returns the exit status and what the terminal received."""
    import fcntl
    import pty
    import struct
    import termios
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, cols, 0, 0))
    env = {k: v for k, v in os.environ.items() if k != "TERM"}
    if term is not None:
        env["TERM"] = term
    p = subprocess.Popen([T.PACK] + args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=slave, env=env)
    os.close(slave)
    got = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the last writer has closed the terminal
            break
        if not chunk:
            break
        got += chunk
    os.close(master)
    return p.wait(timeout=120), got


def progress_bar(work):
    """The progress bar is drawn only on a terminal that can redraw a line, and never
    wider than the terminal: a line that fills the last column wraps, and each redraw
    then leaves a line behind."""
    import re
    root = os.path.join(work, "bar-site")
    T.make_site(root, big=1)
    out = os.path.join(work, "bar.lmdb")
    bar = re.compile(rb"\x1b\[K[a-z]+ *\[([#.]*)\] +\d+%")
    for term, cols, width in (("xterm", 80, 40), ("xterm", 200, 40), ("xterm", 40, 19),
                              ("xterm", 31, 10), ("xterm", 30, 0), ("dumb", 80, 0), (None, 80, 0)):
        what = "TERM=%s, %d columns" % (term, cols)
        rc, got = under_terminal(["build", root, "-o", out], term, cols)
        T.eq(rc, 0, "%s: exit status (%r)" % (what, got[-300:]))
        bars = bar.findall(got)
        if width == 0:
            T.check(b"\x1b" not in got and not bars, "%s: no bar, no escape: %r" % (what, got[:300]))
            continue
        T.check(bars, "%s: a bar is drawn: %r" % (what, got[:300]))
        T.check(all(len(b) == width for b in bars), "%s: the bar is %d wide: %r"
                % (what, width, sorted(set(len(b) for b in bars))))
        for m in bar.finditer(got):
            line = m.group(0)[3:]  # after ESC [ K
            T.check(len(line) <= cols - 1, "%s: a drawn line of %d columns: %r"
                    % (what, len(line), line))
        T.check(got.count(b"\r\x1b[K") > len(bars), "%s: the bar is cleared at the end" % what)
        last = {}
        for m in re.finditer(rb"\x1b\[K([a-z]+) *\[[#.]*\] +(\d+)%", got):
            last[m.group(1)] = int(m.group(2))
        T.eq(last, {k: 100 for k in last}, "%s: each phase's last frame shows it done" % what)
        T.check(b"paths" in got or b"path" in got, "%s: the summary follows: %r" % (what, got[-300:]))


def children_of(pid):
    """The pids of pid's children (each thread's list: the check child is forked by the
    main thread)."""
    kids = []
    try:
        for t in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/children" % (pid, t)) as f:
                kids += [int(k) for k in f.read().split()]
    except OSError:
        pass
    return kids


def running(pid):
    """Whether pid is a process that has not ended (a zombie has)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:  # gone, even between a look and the read
        return False


def killed_during_its_check(work):
    """Every command that reads a pack walks it in a forked child first. When servd-pack
    is killed meanwhile (a CI job's timeout, kill -9), the child must die with it: an
    orphan went on reading the whole pack, or spinning for good where a damaged one made
    liblmdb loop (one ran 76 minutes after its fuzzer had gone). Here the child's first
    read of the pack waits 20 s (the test shim), servd-pack is killed, and its child must
    be gone at once."""
    root = os.path.join(work, "orphan-site")
    T.make_site(root)
    pack = os.path.join(work, "orphan.lmdb")
    T.eq(T.run(["build", root, "-o", pack, "-q"]).returncode, 0, "build")
    p = subprocess.Popen([T.PACK, "verify", pack], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL,
                         env=T.shim_env(SLOW_READ="orphan.lmdb", SLOW_READ_MS="20000"))
    kids = []
    deadline = time.monotonic() + 10
    while not kids and time.monotonic() < deadline and p.poll() is None:
        kids = children_of(p.pid)
        time.sleep(0.01)
    T.check(kids != [], "verify's check child was not seen")
    p.kill()
    p.wait()
    deadline = time.monotonic() + 3
    alive = kids
    while alive and time.monotonic() < deadline:
        alive = [k for k in kids if running(k)]
        time.sleep(0.05)
    for k in alive:
        os.kill(k, signal.SIGKILL)
    T.eq(alive, [], "the check child of a killed servd-pack is still running")


def cut_while_read(work):
    """A pack written in place while a command reads it (cp onto it cuts it to nothing
    first): the command ends with a line naming the file and exit status 1, not by
    SIGBUS ("Bus error", no file named). Cut as LMDB opens it (before servd-pack knows
    where the map lies) and once it is open; and a build's --base cut while the new pack
    is being written: the temporary files go, and the pack and manifest at -o stay.
    swap_open.so does the cut (CUT_AT_TXN_BEGIN)."""
    root = os.path.join(work, "cut-site")
    T.make_site(root)
    good, pack = os.path.join(work, "cut-good.lmdb"), os.path.join(work, "cut.lmdb")
    T.build(root, good)
    cut = "%s: the file was cut short while it was read (written in place?)" % pack
    checked = "%s: the file was cut short while it was checked (written in place?)" % pack
    changed = "%s: the file changed while it was checked (written in place?)" % pack
    for args in (["ls", pack], ["verify", pack], ["cat", pack, "/index.html"],
                 ["diff", good, pack]):
        for n, when, child, needle in ((1, "as it is opened", "", cut),
                                       (2, "once it is open", "", cut),
                                       # in the child that walks it first ("corrupt pack:
                                       # reading it crashed (signal Bus error)" before)
                                       (1, "as its check reads it", "1", checked),
                                       # and made its size again, zeros (a cp in place
                                       # that has written it back): "corrupt pack" before
                                       (1, "and written back as its check reads it", "1",
                                        changed)):
            shutil.copyfile(good, pack)
            shim = dict(CUT_AT_TXN_BEGIN=str(n), CUT_ON="/cut.lmdb")
            if child:
                shim["CUT_IN_CHILD"] = child
            if needle is changed:
                shim["CUT_REGROW"] = "1"
                # an mtime of the copy apart from the cut's, whatever the clock's tick
                os.utime(pack, (time.time() - 60, time.time() - 60))
            expect_failure(args, 1, [needle], "%s of a pack cut %s" % (args[0], when),
                           env=T.shim_env(**shim))
            T.eq(os.path.getsize(pack), os.path.getsize(good) if needle is changed else 0,
                 "%s: the pack's size once cut %s" % (args[0], when))
    outdir = os.path.join(work, "cut-out")
    os.makedirs(outdir)
    out, manifest = os.path.join(outdir, "site.lmdb"), os.path.join(outdir, "site.json")
    T.build(root, out, "--manifest", manifest)
    before = (open(out, "rb").read(), open(manifest, "rb").read())
    with open(os.path.join(root, "index.html"), "ab") as f:
        f.write(b"<!-- changed -->\n")
    for n, on, what in ((2, "/cut.lmdb", "as the build indexes it"),
                        (1, "/site.lmdb.tmp-", "as the new pack is written")):
        shutil.copyfile(good, pack)
        expect_failure(["build", root, "-o", out, "--manifest", manifest, "--base", pack, "-q"],
                       1, [cut, "%s was not changed" % out], "a --base cut " + what,
                       env=T.shim_env(CUT_AT_TXN_BEGIN=str(n), CUT_ON=on, CUT_FILE=pack))
        T.eq(os.path.getsize(pack), 0, "the base was cut " + what)
        T.eq((open(out, "rb").read(), open(manifest, "rb").read()), before,
             "a --base cut %s: the pack and the manifest are the previous ones" % what)
        T.eq([f for f in os.listdir(outdir) if ".tmp-" in f or ".old-" in f], [],
             "a --base cut %s: no temporary file left" % what)


def progress_lines(work):
    """Where no bar can be drawn (a CI log), a long build is not silent: a line every 10 s
    says the phase and how far it is. A short build prints none."""
    root = os.path.join(work, "slow-site")
    T.make_site(root)
    out = os.path.join(work, "slow.lmdb")
    p = T.run(["build", root, "-o", out])
    T.eq(p.returncode, 0, "quick build")
    T.check(b"servd-pack: reading:" not in p.stderr, "quick build: no progress line: %r" % p.stderr)
    t0 = time.monotonic()
    p = T.run(["build", root, "-o", out],
              env=T.shim_env(SLOW_READ="/index.html", SLOW_READ_MS="11000"))
    took = time.monotonic() - t0
    err = p.stderr.decode()
    T.eq(p.returncode, 0, "slow build (%s)" % err)
    lines = [ln for ln in err.splitlines() if ln.startswith("servd-pack: reading: ")]
    T.check(took >= 11 and len(lines) == 1 and lines[0].endswith("%"),
            "slow build (%.1f s): one progress line: %r" % (took, err))
    T.check("\r" not in err and "\033" not in err, "no terminal codes in a log: %r" % err)
    p = T.run(["build", root, "-o", out, "-q"],
              env=T.shim_env(SLOW_READ="/index.html", SLOW_READ_MS="11000"))
    T.eq((p.returncode, p.stderr), (0, b""), "slow build with -q: silent")
    # A log reader that has gone (`2>&1 | head`, a dead log shipper): the progress line
    # must not kill the build halfway (SIGPIPE) and leave its temporary file. The pack is
    # put in place; only the summary, after it, still meets the closed pipe.
    with open(os.path.join(root, "index.html"), "ab") as f:
        f.write(b"<!-- pipe -->\n")
    before = open(out, "rb").read()
    r, w = os.pipe()
    os.close(r)
    try:
        q = subprocess.run([T.PACK, "build", root, "-o", out], stdout=subprocess.DEVNULL,
                           stderr=w, timeout=120,
                           env=T.shim_env(SLOW_READ="/index.html", SLOW_READ_MS="11000"))
    finally:
        os.close(w)
    T.check(q.returncode in (0, -signal.SIGPIPE), "closed log: status %d" % q.returncode)
    T.check(open(out, "rb").read() != before, "closed log: the new pack is in place")
    T.eq([n for n in os.listdir(work) if ".tmp-" in n], [], "closed log: no temporary file")
    T.eq(T.run(["verify", out, "-q"]).returncode, 0, "closed log: the pack verifies")


def rebuild(root, args, mark, **shim):
    """Changes the site's index.html (appends mark), then builds with the shim steered by
    shim; returns (exit status, stderr text)."""
    with open(os.path.join(root, "index.html"), "ab") as f:
        f.write(mark)
    p = T.run(args, env=T.shim_env(**shim))
    return p.returncode, p.stderr.decode()


def io_errors(work):
    """I/O errors name their cause. A stat() of an existing -o that fails was "a symbolic
    link to a file that cannot be reached" for a plain file; a directory that cannot be
    synced after the rename gave no cause, and the pack is in place all the same."""
    root = os.path.join(work, "io-site")
    T.make_site(root)
    out = os.path.join(work, "io.lmdb")
    T.eq(T.run(["build", root, "-o", out, "-q"]).returncode, 0, "build")
    before = open(out, "rb").read()
    p = T.run(["build", root, "-o", out, "-q"], env=T.shim_env(FAIL_STAT="/io.lmdb"))
    err = p.stderr.decode()
    T.eq(p.returncode, 1, "stat of -o fails: exit status (%s)" % err)
    T.check(out + ": Input/output error" in err and "symbolic link" not in err,
            "stat of -o fails: message %r" % err)
    T.eq(open(out, "rb").read(), before, "stat of -o fails: the pack is unchanged")
    rc, err = rebuild(root, ["build", root, "-o", out, "-q"], b"<!-- io -->\n",
                      FAIL_FSYNC_DIR="1")
    T.eq(rc, 1, "directory sync fails: exit status (%s)" % err)
    T.check("renamed into place, but syncing its directory failed: Input/output error" in err
            and "disk full" not in err,
            "directory sync fails: message names the cause, and no partial pack: %r" % err)
    T.check(open(out, "rb").read() != before, "directory sync fails: the new pack is in place")
    T.eq(T.run(["verify", out, "-q"]).returncode, 0, "directory sync fails: the pack verifies")

    # The manifest in a directory of its own: its sync failing is the same exit 1 with
    # both files in place; a copy of the previous manifest that cannot be removed is a
    # warning (the build succeeded), and the copy is named.
    mdir = os.path.join(work, "io-manifests")
    os.mkdir(mdir)
    man = os.path.join(mdir, "site.json")
    T.eq(T.run(["build", root, "-o", out, "--manifest", man, "-q"]).returncode, 0,
         "build with a manifest")
    build = ["build", root, "-o", out, "--manifest", man, "-q"]
    rc, err = rebuild(root, build, b"<!-- io 2 -->\n", FAIL_FSYNC_DIR="/io-manifests")
    T.eq(rc, 1, "manifest directory sync fails: exit status (%s)" % err)
    T.check(man + ": renamed into place, but syncing its directory failed: Input/output error"
            in err and ("the pack %s is in place" % out) in err,
            "manifest directory sync fails: message %r" % err)
    listed = {e["path"]: e for e in json.loads(T.run(["ls", out, "--json"]).stdout)}
    T.eq(json.load(open(man))["paths"]["/index.html"]["variants"][0]["etag"],
         listed["/index.html"]["etag"],
         "manifest directory sync fails: the new manifest describes the new pack")
    T.eq(sorted(os.listdir(mdir)), ["site.json"], "manifest directory sync fails: no copy left")
    rc, err = rebuild(root, build, b"<!-- io 3 -->\n", FAIL_UNLINK="site.json.old-")
    T.eq(rc, 0, "copy of the manifest cannot be removed: exit status (%s)" % err)
    left = [n for n in os.listdir(mdir) if n.startswith("site.json.old-")]
    T.eq(len(left), 1, "copy of the manifest cannot be removed: it is there")
    T.check(left and ("warning: %s: cannot remove the copy of the previous manifest: "
                      "Device or resource busy" % os.path.join(mdir, left[0])) in err,
            "copy of the manifest cannot be removed: the warning names it: %r" % err)


def strict(work):
    """build --strict: a warning about the options, the site or the rules fails the build
    (exit 1) before anything is written; a clean build, and the same tree without it,
    succeed."""
    root = os.path.join(work, "strict-site")
    os.makedirs(os.path.join(root, "old"))
    with open(os.path.join(root, "index.html"), "wb") as f:
        f.write(b"<p>home</p>\n")
    out = os.path.join(work, "strict.lmdb")
    T.build(root, out, "--strict")
    T.check(os.path.exists(out), "--strict on a tree with no warning writes the pack")
    os.unlink(out)
    rules = os.path.join(work, "strict-rules.json")
    with open(rules, "w") as f:
        f.write('{"exclude": ["/drafts/**"]}')
    with open(os.path.join(root, "old", "index.htm"), "wb") as f:
        f.write(b"<p>old</p>\n")
    cases = [
        ([], ["index.htm", "--strict: 1 warning above about the options, the site or the rules; "
                    "nothing was built"], "an index.htm"),
        (["--rules", rules], ["/exclude/0", "--strict: 2 warnings above"], "an unused rule"),
    ]
    for extra, needles, what in cases:
        expect_failure(["build", root, "-o", out, "--strict"] + extra, 1, needles,
                             "--strict, " + what, work, out)
        # without --strict the same build succeeds, with the same warnings
        p = T.run(["build", root, "-o", out, "-q"] + extra)
        T.eq(p.returncode, 0, "%s without --strict: %r" % (what, p.stderr))
        for n in needles[:1]:
            T.check(n in p.stderr.decode(), "%s without --strict warns: %r" % (what, p.stderr))
        os.unlink(out)
    os.unlink(os.path.join(root, "old", "index.htm"))
    # a modification time in the future (the build is not reproducible), alone
    future = time.time() + 86400 * 30
    os.utime(os.path.join(root, "index.html"), (future, future))
    expect_failure(["build", root, "-o", out, "--strict", "-q"], 1,
                   ["modification time in the future", "--strict: 1 warning above"],
                   "--strict, an mtime in the future", work, out)
    os.utime(os.path.join(root, "index.html"), (future - 86400 * 60,) * 2)
    expect_failure(["build", root, "-o", out, "--strict", "-q"], 1,
                   ["SOURCE_DATE_EPOCH=99999999999 is in the future", "--strict: 1 warning"],
                   "--strict, SOURCE_DATE_EPOCH in the future", work, out,
                   env={"SOURCE_DATE_EPOCH": "99999999999"})


def main():
    # Help and version.
    p = T.run(["--help"])
    T.eq(p.returncode, 0, "--help exit status")
    help_text = p.stdout.decode()
    for word in ("build", "ls", "verify", "diff", "cat", "--rules", "--manifest", "--base",
                 "--jobs", "--memory", "--strict", "--encoding", "exit status"):
        T.check(word in help_text, "--help mentions %s" % word)
    T.check("Last-Modified of unchanged files" in help_text,
            "--help says that --base keeps Last-Modified: %s" % help_text)
    p = T.run(["--version"])
    T.eq(p.returncode, 0, "--version exit status")
    T.check(p.stdout.decode().startswith("servd-pack "), "--version output: %r" % p.stdout)
    T.eq(T.run(["build", "--help"]).returncode, 0, "build --help")
    if os.path.exists("/dev/full"):  # output that cannot be written is a failure
        for opt in (["--help"], ["--version"], ["build", "--help"], ["ls", "-h"],
                    ["verify", "--help"], ["diff", "-h"], ["cat", "--help"]):
            with open("/dev/full", "wb") as full:
                p = subprocess.run([T.PACK] + opt, stdout=full, stderr=subprocess.PIPE)
            T.eq(p.returncode, 1, "%s >/dev/full: exit status" % opt)
            T.check(b"writing to standard output" in p.stderr, "%s: %r" % (opt, p.stderr))

    with T.TempDir() as work:
        root = os.path.join(work, "site")
        T.make_site(root)
        outdir = os.path.join(work, "out")
        os.mkdir(outdir)
        out = os.path.join(outdir, "site.lmdb")

        # Usage errors: exit 2.
        expect_failure([], 2, ["usage"], "no arguments")
        expect_failure(["frobnicate"], 2, ["unknown command"], "unknown command")
        expect_failure(["build", root], 2, ["-o"], "build without -o")
        expect_failure(["build", "-o", out], 2, ["WEBROOT"], "build without a root")
        expect_failure(["build", root, "-o", out, "--bogus"], 2, [], "unknown option", outdir, out)
        # An option that names a file is given once: a second one must not
        # silently replace the first (a pipeline adding its own --rules).
        for opt, val in (("-o", out), ("--output", out), ("--rules", os.path.join(work, "r.json")),
                         ("--manifest", os.path.join(outdir, "m.json")),
                         ("--base", os.path.join(outdir, "old.lmdb"))):
            args = ["build", root] + ([] if opt in ("-o", "--output") else ["-o", out])
            name = "--output" if opt == "-o" else opt  # named by its long name
            expect_failure(args + [opt, val, opt, val], 2, [name + " is given twice"],
                           "%s twice" % opt, outdir, out)
        expect_failure(["build", "", "-o", out], 2, ["WEBROOT: an empty file name"],
                       "an empty WEBROOT", outdir, out)
        # An option's value must be a file name: an unset variable ("--base
        # $PREV" on the first deploy) is named, and "-o=site.lmdb" or "-o
        # --base" must not write a pack named "=site.lmdb" or "--base" while
        # the pipeline ships the old site.lmdb.
        for args, needle in ((["--base", ""], "--base: an empty file name"),
                             (["--base="], "--base: an empty file name"),
                             (["--rules", ""], "--rules: an empty file name"),
                             (["--manifest="], "--manifest: an empty file name")):
            expect_failure(["build", root, "-o", out] + args, 2, [needle], " ".join(args), outdir, out)
        cwd = os.getcwd()
        os.chdir(outdir)
        try:
            for args, needle in ((["-o=site.lmdb"], "-o =site.lmdb: a file name that starts with '='"),
                                 (["-o", "--base"], "-o --base: a file name that starts with '-'"),
                                 (["--output", "-q"], "--output -q: a file name that starts with '-'"),
                                 (["--output="], "--output: an empty file name"),
                                 (["-o", "-"], "-o -: only --manifest can be standard output"),
                                 (["-o", "x.lmdb", "--base", "-"], "--base -: a file is read, not standard input"),
                                 (["-o", "x.lmdb", "--rules=-"], "--rules -: a file is read, not standard input")):
                expect_failure(["build", root] + args, 2, [needle], " ".join(args))
                T.eq(os.listdir(outdir), [], "%s: nothing written" % " ".join(args))
        finally:
            os.chdir(cwd)
        # Nothing left to pack: the message says where the files went.
        empty = os.path.join(work, "empty-site")
        os.mkdir(empty)
        err = expect_failure(["build", empty, "-o", out], 1, ["no files to pack"], "an empty root",
                             outdir, out)
        T.check("skipped" not in err, "an empty root: nothing was skipped: %r" % err)
        with open(os.path.join(empty, ".env"), "w") as f:
            f.write("x")
        with open(os.path.join(empty, "a.txt"), "w") as f:
            f.write("x")
        rules = os.path.join(work, "exclude-all.json")
        with open(rules, "w") as f:
            f.write('{"exclude": ["*.txt"]}')
        expect_failure(["build", empty, "-o", out, "--rules", rules], 1,
                       ["no files to pack (skipped: 1 dotfiles (/.env), 1 excluded by rules)"],
                       "a root whose files are all skipped", outdir, out)
        err = expect_failure(["build", root, "-o", out, "--jobs", "0"], 2,
                             ["--jobs 0: not a number from 1 to"], "--jobs 0", outdir, out)
        T.eq(err.count("\n"), 1, "--jobs 0: one line: %r" % err)
        expect_failure(["build", root, "-o", out, "--jobs", "x"], 2, ["--jobs"], "--jobs x", outdir, out)
        for spelling in (" 1", "+1", "-1", "1 "):  # digits only, as SOURCE_DATE_EPOCH
            expect_failure(["build", root, "-o", out, "--jobs", spelling], 2, ["--jobs"],
                           "--jobs %r" % spelling, outdir, out)
        # --memory: bytes, or K, M, G, T (powers of 1024); nothing else, and once
        for spelling in ("1.5G", " 1G", "G", "-1", "1X", "1GG", "1 G", "20000000T", ""):
            err = expect_failure(["build", root, "-o", out, "--memory", spelling], 2,
                                 ["--memory %s: expected a size" % spelling],
                                 "--memory %r" % spelling, outdir, out)
            # a bad value is one line, which says what is expected, as for --jobs
            T.eq(err.count("\n"), 1, "--memory %r: one line: %r" % (spelling, err))
        expect_failure(["build", root, "-o", out, "--memory", "1G", "--memory", "2G"], 2,
                       ["--memory is given twice"], "--memory twice", outdir, out)
        # so is every option with a value: "--jobs 4 -j 1" took 1, "cat --encoding br
        # --encoding gzip" gzip (2026-12-06)
        for args in (["--jobs", "2", "--jobs", "2"], ["-j2", "--jobs=1"]):
            expect_failure(["build", root, "-o", out] + args, 2, ["--jobs is given twice"],
                           " ".join(args), outdir, out)
        for spelling in ("0", "300000000", "512M", "34M", "64k", "1GiB", "2GB", "1t", "1"):
            p = T.run(["build", root, "-o", out, "-q", "--memory", spelling])
            err = p.stderr.decode()
            T.eq(p.returncode, 0, "--memory %s: %s" % (spelling, err))
            # below one compressing thread's 34 MiB the limit cannot be kept: said
            small = spelling in ("64k", "1")
            T.eq("warning: --memory" in err and "less than one compressing thread needs "
                 "(34.0 MiB)" in err, small, "--memory %s: the warning: %r" % (spelling, err))
        os.remove(out)
        expect_failure(["build", root, "-o", out], 2, ["SOURCE_DATE_EPOCH"], "bad SOURCE_DATE_EPOCH",
                       outdir, out, env={"SOURCE_DATE_EPOCH": "yesterday"})
        for bad in ("253402300800", "99999999999999999999", "-1", "1e9"):
            expect_failure(["build", root, "-o", out], 2, ["SOURCE_DATE_EPOCH", "0 to 253402300799"],
                           "SOURCE_DATE_EPOCH=%s" % bad, outdir, out, env={"SOURCE_DATE_EPOCH": bad})
        # In the future (here: the last second of year 9999): clamped to now, with a warning.
        before = int(time.time())
        p = T.run(["build", root, "-o", out, "-q"], env={"SOURCE_DATE_EPOCH": "253402300799"})
        T.eq(p.returncode, 0, "future SOURCE_DATE_EPOCH: " + p.stderr.decode())
        T.check(b"in the future" in p.stderr, "warning for a future SOURCE_DATE_EPOCH: %r" % p.stderr)
        lms = {e["last_modified"] for e in T.ls_json(out)}
        T.check(all(before <= lm <= time.time() for lm in lms), "Last-Modified clamped to now: %r" % lms)
        os.unlink(out)
        # A directory with an index.htm and no index.html (a site from a server that took
        # either): packed, with a warning, since servd answers "/dir/" with index.html only.
        htm_root = os.path.join(work, "htm-site")
        T.make_site(htm_root)

        def index_pages(dirs):
            for d, names in dirs:
                os.makedirs(os.path.join(htm_root, d))
                for name in names:
                    with open(os.path.join(htm_root, d, name), "w") as f:
                        f.write("<p>%s</p>\n" % name)
        index_pages((("old", ["index.htm"]), ("both", ["index.htm", "index.html"]),
                     ("bak", ["index.htm.bak", "index.html"]),
                     ("cased", ["Index.html", "index.html"])))
        p = T.run(["build", htm_root, "-o", out, "-q"])
        T.eq(p.returncode, 0, "index.htm site: " + p.stderr.decode())
        T.eq(p.stderr.decode(), "servd-pack: warning: %s/old/index.htm: servd answers /old/ with "
             "the directory's index.html, never an index.htm (rename it to index.html)\n"
             % htm_root, "index.htm warning, for the one directory without index.html")
        T.check("/old/index.htm" in [e["path"] for e in T.ls_json(out)], "index.htm still packed")
        os.unlink(out)
        # The same for an index page in other letters' case (a site from IIS or Windows):
        # each was packed without a word.
        index_pages((("iis", ["Index.html"]), ("dos", ["INDEX.HTM"])))
        p = T.run(["build", htm_root, "-o", out, "-q"])
        T.eq(p.returncode, 0, "Index.html site: " + p.stderr.decode())
        T.eq(p.stderr.decode(), "servd-pack: warning: 3 files name an index page otherwise than "
             "index.html (index.htm, Index.html) in a directory without one, the first "
             "%s/dos/INDEX.HTM: servd answers a directory with its index.html only (rename "
             "them)\n" % htm_root, "the warning for index pages in other letter cases")
        shutil.rmtree(os.path.join(htm_root, "dos"))
        shutil.rmtree(os.path.join(htm_root, "old"))
        p = T.run(["build", htm_root, "-o", out, "-q"])
        T.eq(p.stderr.decode(), "servd-pack: warning: %s/iis/Index.html: servd answers /iis/ "
             "with the directory's index.html, never an Index.html (rename it to index.html)\n"
             % htm_root, "the warning for one Index.html")
        os.unlink(out)
        # A name in the decomposed form (NFD: "e" + U+0301, as macOS writes names): links
        # in the composed form (NFC) miss it, so a warning names it; packed all the same.
        nfd_root = os.path.join(work, "nfd-site")
        T.make_site(nfd_root)
        nfd, nfc = "cafe\u0301.html", "caf\u00e9.txt"
        os.makedirs(os.path.join(nfd_root, "u\u0308ber"))
        # NFC as they are, with a mark that composes with nothing (Yoruba, "n" + U+0308):
        # no warning (each was one, and --strict could not build such a site)
        marked = ("\u1eb9\u0301k\u1ecd\u0301.html", "Spin\u0308al.txt")
        for name in (nfd, nfc, "u\u0308ber/index.html") + marked:
            with open(os.path.join(nfd_root, name), "w") as f:
                f.write("<p>accent</p>\n")
        p = T.run(["build", nfd_root, "-o", out, "-q"])
        T.eq(p.returncode, 0, "NFD site: " + p.stderr.decode())
        T.eq(p.stderr.decode(), "servd-pack: warning: 2 paths are in the decomposed form "
             "(NFD, as macOS writes names), the first %s/%s: links in the usual "
             "composed form (NFC) do not reach them; rename them to NFC (convmv -f utf8 -t utf8 "
             "--nfc -r --notest DIR)\n" % (nfd_root, nfd), "the NFD warning")
        paths = [e["path"] for e in T.ls_json(out)]
        T.check("/" + nfd in paths and "/" + nfc in paths, "NFD and NFC names packed: %r" % paths)
        os.unlink(out)
        shutil.rmtree(os.path.join(nfd_root, "u\u0308ber"))
        # one such path: the warning's singular wording names it
        p = T.run(["build", nfd_root, "-o", out, "-q"])
        T.eq(p.returncode, 0, "site with one NFD name: " + p.stderr.decode())
        T.eq(p.stderr.decode(), "servd-pack: warning: %s/%s is in the decomposed form (NFD, as "
             "macOS writes names): a link in the usual composed form (NFC) does not reach it; "
             "rename it to NFC (convmv -f utf8 -t utf8 --nfc -r --notest DIR)\n"
             % (nfd_root, nfd), "the warning for one NFD name")
        os.unlink(out)
        os.unlink(os.path.join(nfd_root, nfd))
        p = T.run(["build", nfd_root, "-o", out, "-q", "--strict"])
        T.eq((p.returncode, p.stderr.decode()), (0, ""),
             "NFC names with marks that compose with nothing: no warning under --strict")
        os.unlink(out)
        # A '?', '#' or '%' in a name (a page saved as "page.php?id=3", a "100%.html"):
        # a link that writes it as it is asks for /page.php or is refused (400), so a
        # warning names the first such path and the URL that reaches it; packed all the
        # same, and not counted by --strict (wget -k writes a mirror's links escaped).
        odd_root = os.path.join(work, "odd-site")
        T.make_site(odd_root)
        for name in ("page.php?id=3", "docs/100%.html", "notes#1.txt"):
            with open(os.path.join(odd_root, name), "w") as f:
                f.write("<p>odd</p>\n")
        p = T.run(["build", odd_root, "-o", out, "-q"])
        T.eq(p.returncode, 0, "odd names: " + p.stderr.decode())
        T.eq(p.stderr.decode(), "servd-pack: warning: 3 paths have a '?', '#' or '%%' in them, "
             "the first %s/docs/100%%.html: only a link that escapes them reaches one, "
             "/docs/100%%25.html (one that writes it as it is asks for another path, or is "
             "refused); rename them unless the site's links escape them\n" % odd_root,
             "the warning for odd names")
        paths = [e["path"] for e in T.ls_json(out)]
        T.check("/page.php?id=3" in paths and "/notes#1.txt" in paths, "packed: %r" % paths)
        os.unlink(out)
        for name in ("docs/100%.html", "notes#1.txt"):
            os.unlink(os.path.join(odd_root, name))
        p = T.run(["build", odd_root, "-o", out, "-q", "--strict"])
        T.eq((p.returncode, p.stderr.decode()), (0, 
             "servd-pack: warning: %s/page.php?id=3 has a '?', '#' or '%%' in its path: only a "
             "link that escapes them reaches it, /page.php%%3Fid=3 (one that writes it as it "
             "is asks for another path, or is refused); rename it unless the site's links "
             "escape them\n" % odd_root), "one odd name under --strict: built, with the note")
        os.unlink(out)
        # Netlify's and Cloudflare Pages' configuration at the root (_headers, _redirects;
        # Cloudflare's _worker.js, a file or a directory, and _routes.json): read by those
        # hosts and never served; servd-pack packs them (with a warning each), and not below
        # the root, where those hosts do not read them either.
        cfg_root = os.path.join(work, "netlify-site")
        T.make_site(cfg_root)  # has a docs/
        for name, text in (("_headers", "/admin/*\n  Basic-Auth: admin:hunter2\n"),
                           ("_redirects", "/old /new 301\n"), ("docs/_headers", "notes\n"),
                           ("_worker.js", "export default {}\n"), ("_routes.json", "{}\n")):
            with open(os.path.join(cfg_root, name), "w") as f:
                f.write(text)
        p = T.run(["build", cfg_root, "-o", out, "-q"])
        T.eq(p.returncode, 0, "site with _headers: " + p.stderr.decode())
        both, cf = "Netlify's and Cloudflare Pages'", "Cloudflare Pages'"
        conf = "give what it says in --rules and exclude it there"
        want = "".join(
            "servd-pack: warning: %s/%s: %s %s file, which servd-pack does not read, is packed "
            "as /%s, a page anyone can fetch%s; %s (\"exclude\": [\"/%s\"])\n"
            % (cfg_root, name, whose, name, name, what, how, name)
            for name, whose, what, how in (
                ("_headers", both, " (Basic-Auth lines included)", conf),
                ("_redirects", both, "", conf),
                ("_worker.js", cf, " (server code, and what secrets it holds)",
                 "exclude it in --rules"),
                ("_routes.json", cf, "", "exclude it in --rules")))
        T.eq(p.stderr.decode(), want, "the host configuration warnings")
        paths = [e["path"] for e in T.ls_json(out)]
        T.check("/_headers" in paths and "/docs/_headers" in paths, "still packed: %r" % paths)
        rules = os.path.join(work, "netlify-rules.json")
        with open(rules, "w") as f:
            f.write('{"exclude": ["/_headers", "/_redirects", "/_worker.js", "/_routes.json"]}')
        p = T.run(["build", cfg_root, "-o", out, "-q", "--rules", rules])
        T.eq((p.returncode, p.stderr.decode()), (0, ""), "excluded by a rule: no warning")
        os.unlink(out)
        # _worker.js as a directory of modules: one warning for the directory
        os.unlink(os.path.join(cfg_root, "_worker.js"))
        os.makedirs(os.path.join(cfg_root, "_worker.js", "lib"))
        for name in ("_worker.js/index.js", "_worker.js/lib/a.js"):
            with open(os.path.join(cfg_root, name), "w") as f:
                f.write("export default {}\n")
        p = T.run(["build", cfg_root, "-o", out, "-q", "--rules", rules])
        err = p.stderr.decode()
        T.eq(err.splitlines()[0],
             "servd-pack: warning: %s/_worker.js/index.js: Cloudflare Pages' _worker.js "
             "directory (server code, and what secrets it holds), which servd-pack does not "
             "read, is packed under /_worker.js/, pages anyone can fetch; exclude it in --rules "
             "(\"exclude\": [\"/_worker.js/**\"])" % cfg_root, "the _worker.js directory")
        T.check(len(err.splitlines()) == 2 and 'write "/_worker.js/**"' in err,
                "and the rule that named the directory: %r" % err)
        with open(rules, "w") as f:
            f.write('{"exclude": ["/_headers", "/_redirects", "/_worker.js/**", "/_routes.json"]}')
        p = T.run(["build", cfg_root, "-o", out, "-q", "--rules", rules])
        T.eq((p.returncode, p.stderr.decode()), (0, ""), "the directory excluded: no warning")
        os.unlink(out)
        # getopt's complaints carry the program name like every other message.
        err = expect_failure(["build", root, "-o", out, "--bogus"], 2, [], "unknown long option")
        T.check(err.startswith("servd-pack: unknown option --bogus\n"), "unknown option: %r" % err)
        err = expect_failure(["build", root, "-x", "-o", out], 2, [], "unknown short option")
        T.check(err.startswith("servd-pack: unknown option -x\n"), "unknown option -x: %r" % err)
        err = expect_failure(["build", root, "-o"], 2, [], "-o without its argument")
        T.check(err.startswith("servd-pack: option -o requires an argument\n"), "-o: %r" % err)
        err = expect_failure(["build", root, "--output"], 2, [], "--output without its argument")
        T.check(err.startswith("servd-pack: option --output requires an argument\n"),
                "--output: %r" % err)
        # a value given to an option that takes none: named as written, not as -q
        for args, name in ((["build", root, "-o", out, "--quiet=1"], "--quiet"),
                           (["ls", out, "--json=1"], "--json")):
            err = expect_failure(args, 2, [], "%s with a value" % name)
            T.check(err.startswith("servd-pack: option %s takes no value\n" % name),
                    "%s=1: %r" % (name, err))
        # an unknown letter inside a cluster, after an option given in full
        for args in (["build", root, "-o", out, "--quiet", "-xq"],
                     ["build", "--rules=" + out, "-xq", "-o", out, root], ["ls", "--json", "-xq", out]):
            err = expect_failure(args, 2, [], "-x in a cluster: %s" % args)
            T.check(err.startswith("servd-pack: unknown option -x\n"), "%s: %r" % (args, err))
        # an option of another command: named with the command, a usage error, not run
        for args, want in ((["verify", out, "--json"], "verify: --json"),
                           (["cat", out, "/", "--json"], "cat: --json"),
                           (["ls", out, "-q"], "ls: -q"),
                           (["ls", out, "--encoding", "gzip"], "ls: --encoding"),
                           (["diff", out, out, "--encoding", "br"], "diff: --encoding"),
                           (["verify", out, "--content"], "verify: --content"),
                           (["ls", out, "--headers"], "ls: --headers")):
            p = T.run(args)
            err = p.stderr.decode(errors="replace")
            T.eq((p.returncode, p.stdout), (2, b""), "%s: exit status and output (%r)" % (args, err))
            T.check(err.startswith("servd-pack: %s is not an option of this command\n" % want),
                    "%s: %r" % (args, err))
        err = expect_failure(["ls", out, "--encoding"], 2, [], "--encoding without its argument")
        T.check(err.startswith("servd-pack: "), "ls --encoding: %r" % err)
        # an abbreviation of several long options names them ("unknown option" before)
        for args, want in ((["build", root, "-o", out, "--m", "x.json"],
                            "option --m is ambiguous: --manifest, --memory"),
                           (["cat", out, "/", "--h"], "option --h is ambiguous: --headers, --help")):
            err = expect_failure(args, 2, [], "%s" % args)
            T.check(err.startswith("servd-pack: %s\n" % want), "%s: %r" % (args, err))

        # Control bytes in names and rule values are escaped, never printed raw.
        ctl_root = os.path.join(work, "ctl-site")
        os.mkdir(ctl_root)
        with open(os.path.join(ctl_root, "a\nb\x1b[31m.txt"), "w") as f:
            f.write("x")
        err = expect_failure(["build", ctl_root, "-o", out], 1, ["a\\x0ab\\x1b[31m.txt"],
                             "a file name with control bytes", outdir, out)
        T.eq(err.count("\n"), 1, "one line for a name with a newline: %r" % err)
        T.check("\x1b" not in err, "no raw escape byte: %r" % err)
        os.remove(os.path.join(ctl_root, "a\nb\x1b[31m.txt"))
        # ... and so is the name of a pack in verify's verdict on standard output
        odd = os.path.join(work, "p\x1b[31m\nq.lmdb")
        T.eq(T.run(["build", root, "-o", odd, "-q"]).returncode, 0, "a pack with an odd name")
        p = T.run(["verify", odd])
        T.eq(p.returncode, 0, "verify of a pack with an odd name")
        T.check(p.stdout.decode().startswith(odd.replace("\x1b", "\\x1b").replace("\n", "\\x0a")
                                             + ": OK: ") and p.stdout.count(b"\n") == 1,
                "verify's OK line escapes the pack's name: %r" % p.stdout)
        os.remove(odd)
        with open(os.path.join(ctl_root, "next\u0085line.txt"), "w") as f:  # NEL, a C1 control
            f.write("x")
        expect_failure(["build", ctl_root, "-o", out], 1, ["next", "control character"],
                       "a file name with a C1 control", outdir, out)
        ctl_rules = os.path.join(work, "ctl.json")
        with open(ctl_rules, "w") as f:
            json.dump({"cache_control": [{"match": "*", "value": "max-age=1\r\nSet-Cookie: x=1"}]}, f)
        err = expect_failure(["build", root, "-o", out, "--rules", ctl_rules], 1,
                             ["max-age=1\\x0d\\x0aSet-Cookie: x=1"], "a rule value with CR LF",
                             outdir, out)
        T.eq(err.count("\n"), 1, "one line for a rule value with CR LF: %r" % err)
        # ls's columns stay five, and its text inert, whatever a rule's media type holds
        # (a tab is OWS before ';', a bidi control may sit in a quoted parameter)
        mime_rules = os.path.join(work, "mime-ctl.json")
        with open(mime_rules, "w") as f:
            json.dump({"mime": [{"match": "/tiny.txt", "type": "text/plain;\tcharset=utf-8"},
                                {"match": "/index.html", "type": 'text/html; x="\u202ez"'}]}, f)
        T.eq(T.run(["build", root, "-o", out, "-q", "--rules", mime_rules]).returncode, 0,
             "a pack with odd media types")
        lines = T.run(["ls", out]).stdout.decode().splitlines()
        for line in lines:
            T.eq(len(line.split("\t")), 5, "ls columns: %r" % line)
            T.check("\u202e" not in line, "ls writes a bidi control raw: %r" % line)
        T.check(any(line.endswith("\ttext/plain;\\x09charset=utf-8") for line in lines),
                "the tab in the type escaped: %r" % lines)
        os.remove(out)

        expect_failure(["ls"], 2, ["SITE"], "ls without a pack")
        expect_failure(["ls", "a", "b"], 2, [], "ls with two packs")
        err = expect_failure(["cat", "x.lmdb", "/", "--encoding", "deflate"], 2,
                             ["--encoding deflate: expected identity, gzip, br or zstd"],
                             "cat --encoding deflate")
        T.eq(err.count("\n"), 1, "cat --encoding deflate: one line: %r" % err)
        expect_failure(["cat", "x.lmdb", "/", "--encoding", "br", "--encoding=gzip"], 2,
                       ["--encoding is given twice"], "cat --encoding twice")
        expect_failure(["diff", "x.lmdb"], 2, [], "diff with one pack")

        # Failures: exit 1, message names the file, nothing left behind.
        missing = os.path.join(work, "no-such-root")
        expect_failure(["build", missing, "-o", out], 1, [missing], "missing root", outdir, out)
        afile = os.path.join(root, "tiny.txt")
        expect_failure(["build", afile, "-o", out], 1, [afile, "not a directory"], "root is a file", outdir, out)
        nodir = os.path.join(work, "no-such-dir", "site.lmdb")
        expect_failure(["build", root, "-o", nodir], 1, [nodir], "output directory missing")
        expect_failure(["build", root, "-o", outdir], 1, [outdir, "directory"], "output is a directory")
        man_missing = os.path.join(work, "no-such-dir", "m.json")
        expect_failure(["build", root, "-o", out, "--manifest", man_missing], 1, [man_missing],
                       "manifest directory missing", outdir, out)

        bad_rules = os.path.join(work, "bad.json")
        with open(bad_rules, "w") as f:
            f.write('{"headers": [{"match": "*", "name": "X Bad", "value": "v"}]}')
        expect_failure(["build", root, "-o", out, "--rules", bad_rules], 1,
                       [bad_rules, "/headers/0", "header name"], "bad header name in rules", outdir, out)
        with open(bad_rules, "w") as f:
            f.write('{"exclude": [')
        expect_failure(["build", root, "-o", out, "--rules", bad_rules], 1, [bad_rules + ":1:"],
                       "rules file with a JSON syntax error", outdir, out)
        expect_failure(["build", root, "-o", out, "--rules", os.path.join(work, "none.json")], 1,
                       ["--rules " + os.path.join(work, "none.json") + ": No such file"],
                       "missing rules file", outdir, out)

        # A FIFO in the root.
        fifo_root = os.path.join(work, "fifo-site")
        T.make_site(fifo_root)
        fifo = os.path.join(fifo_root, "docs", "pipe")
        os.mkfifo(fifo)
        expect_failure(["build", fifo_root, "-o", out], 1, [fifo, "FIFO"], "FIFO in the root", outdir, out)
        # ... unless excluded by the rules.
        ex_rules = os.path.join(work, "exclude.json")
        with open(ex_rules, "w") as f:
            f.write('{"exclude": ["/docs/pipe"]}')
        p = T.run(["build", fifo_root, "-o", out, "--rules", ex_rules])
        T.eq(p.returncode, 0, "excluded FIFO: " + p.stderr.decode())
        T.check("1 excluded" in p.stderr.decode(), "summary counts the exclude: " + p.stderr.decode())
        os.unlink(out)

        # A symbolic link leading outside the root.
        link_root = os.path.join(work, "link-site")
        T.make_site(link_root)
        link = os.path.join(link_root, "secrets")
        os.symlink(work, link)
        expect_failure(["build", link_root, "-o", out], 1, [link, "outside the root",
                                                            "cp -rL or rsync -L"],
                       "symlink outside the root (and what to do)", outdir, out)

        # Links that would publish what the walk skips: a dotfile, a dot-directory.
        for target, name in ((".env", "env.txt"), (".git", "g")):
            hid_root = os.path.join(work, "hidden-link-" + name)
            T.make_site(hid_root)
            hid_link = os.path.join(hid_root, name)
            os.symlink(target, hid_link)
            expect_failure(["build", hid_root, "-o", out], 1, [hid_link, "hidden path"],
                           "symlink %s -> %s" % (name, target), outdir, out)

        # A name that cannot be a URL path.
        name_root = os.path.join(work, "name-site")
        T.make_site(name_root)
        bad_name = os.path.join(name_root.encode(), b"caf\xe9.html")
        with open(bad_name, "wb") as f:
            f.write(b"x")
        expect_failure(["build", name_root, "-o", out], 1, ["UTF-8"], "invalid UTF-8 file name", outdir, out)

        # An unreadable file. Root reads everything, so drop to nobody for this one.
        ro_root = os.path.join(work, "ro-site")
        T.make_site(ro_root)
        secret = os.path.join(ro_root, "docs", "index.html")
        os.chmod(secret, 0)
        # and an unreadable directory beside it: one run names both (servd-pack(1))
        locked = os.path.join(ro_root, "locked")
        os.makedirs(locked)
        with open(os.path.join(locked, "a.html"), "w") as f:
            f.write("<p>a</p>\n")
        # and a directory that can be listed but not searched (r without x): its
        # files' names are read, but they cannot be looked up
        noexec = os.path.join(ro_root, "noexec")
        os.makedirs(noexec)
        with open(os.path.join(noexec, "b.txt"), "w") as f:
            f.write("b\n")
        drop = None
        if os.geteuid() == 0:
            for dirpath, dirs, files in os.walk(work):
                os.chmod(dirpath, 0o777)
            os.chmod(work, 0o777)

            def drop():
                os.setgid(NOBODY)
                os.setuid(NOBODY)
        os.chmod(locked, 0)  # after that walk, which opens every directory
        os.chmod(noexec, 0o644)
        expect_failure(["build", ro_root, "-o", out], 1,
                       [secret + ": cannot open: Permission denied",
                        locked + ": cannot open directory: Permission denied",
                        os.path.join(noexec, "b.txt") + ": cannot look it up: Permission denied"],
                       "unreadable file and directories", outdir, out, preexec_fn=drop)
        if os.geteuid() == 0:
            # Root reads them all the same: packed (a container's build), with a warning,
            # since the mode says no one is to read them; --strict fails.
            os.chmod(noexec, 0o755)
            p = T.run(["build", ro_root, "-o", out, "-q"])
            T.eq(p.returncode, 0, "root builds the unreadable site: " + p.stderr.decode())
            T.eq(p.stderr.decode(), "servd-pack: warning: 2 files and directories have modes that "
                 "let no one read them, the first %s; they are packed (a directory: what it "
                 "holds): servd-pack runs as root, which reads them anyway, where a build as "
                 "another user fails on them (make them readable, or exclude them)\n" % secret,
                 "the warning for mode 000")
            os.unlink(out)
            p = T.run(["build", ro_root, "-o", out, "-q", "--strict"])
            T.eq(p.returncode, 1, "--strict with a mode 000 file: " + p.stderr.decode())
            T.check(not os.path.exists(out), "--strict built nothing")
            # one such file: the singular wording names it
            os.chmod(locked, 0o755)
            p = T.run(["build", ro_root, "-o", out, "-q"])
            T.eq(p.returncode, 0, "root builds a site with one mode 000 file: " +
                 p.stderr.decode())
            T.eq(p.stderr.decode(), "servd-pack: warning: %s: its mode lets no one read it, yet "
                 "it is packed (a directory: what it holds): servd-pack runs as root, which reads "
                 "it anyway, where a build as another user fails on it (make it readable, or "
                 "exclude it)\n" % secret, "the warning for one mode 000 file")
            os.unlink(out)
        os.chmod(secret, stat.S_IRUSR | stat.S_IWUSR)
        os.chmod(locked, 0o755)
        os.chmod(noexec, 0o755)

        # A file longer than its size says (one that grew while being read, or a
        # kernel file whose size is 0) is refused, not packed cut short. Needs a bind
        # mount of a /proc file, so root only.
        if os.geteuid() == 0 and os.path.exists("/proc/sys/kernel/ostype"):
            grow_root = os.path.join(work, "grow-site")
            os.makedirs(grow_root)
            grown = os.path.join(grow_root, "ostype.txt")
            open(grown, "w").close()
            if subprocess.run(["mount", "--bind", "/proc/sys/kernel/ostype", grown],
                              stderr=subprocess.DEVNULL).returncode == 0:
                try:
                    expect_failure(["build", grow_root, "-o", out], 1,
                                   [grown, "changed while being read"],
                                   "a file with more bytes than its size", outdir, out)
                finally:
                    subprocess.run(["umount", grown])
            else:
                print("SKIP: mount --bind is not permitted here")

        # A directory that takes no file, though root passes its access check
        # (/proc): the refusal names the output, not only the directory.
        if os.geteuid() == 0 and os.path.isdir("/proc/self"):
            expect_failure(["build", ro_root, "-o", "/proc/site.lmdb"], 1,
                           ["/proc/site.lmdb: ", "/proc"], "an output in /proc, as root")

        # A file over the 1 GiB limit (servd-pack(1)) is refused by its size, before it
        # is read (a sparse file: no disk, no time).
        huge_root = os.path.join(work, "huge-site")
        os.makedirs(huge_root)
        with open(os.path.join(huge_root, "index.html"), "wb") as f:
            f.write(b"<p>small</p>\n")
        huge = os.path.join(huge_root, "disk.img")
        with open(huge, "wb") as f:
            f.truncate((1 << 30) + 1)
        expect_failure(["build", huge_root, "-o", out], 1,
                       [huge, "1073741825 bytes is larger than the limit of 1073741824 bytes"],
                       "a file of 1 GiB + 1 byte", outdir, out)
        # Every file over the limit is named in one run (a media site fixes them all at
        # once), the first three by name, walked in byte order.
        for i, name in enumerate(("v1.mp4", "v2.mp4", "v3.mp4", "v4.mp4", "v5.mp4")):
            with open(os.path.join(huge_root, name), "wb") as f:
                f.truncate((1 << 30) + 1 + i)
        v1, v2 = (os.path.join(huge_root, n) for n in ("v1.mp4", "v2.mp4"))
        expect_failure(["build", huge_root, "-o", out], 1,
                       [huge + ": 1073741825 bytes is larger than the limit of 1073741824 bytes "
                        "(1 GiB: servd-pack holds a file whole in memory)",
                        "; so are %s, %s and 3 more" % (v1, v2)],
                       "six files over the limit", outdir, out)
        for name in ("v2.mp4", "v3.mp4", "v4.mp4", "v5.mp4"):
            os.unlink(os.path.join(huge_root, name))
        expect_failure(["build", huge_root, "-o", out], 1, ["; so is %s" % v1],
                       "two files over the limit", outdir, out)
        shutil.rmtree(huge_root)

        # Output lost to a closed stdout (`servd-pack ls x >&-`) is an error, as it
        # is on a full device: descriptor 1 used to be /dev/null, read-write.
        closed_out = os.path.join(outdir, "closed.lmdb")
        T.eq(T.run(["build", root, "-o", closed_out, "-q"]).returncode, 0, "build for >&-")
        for cmd in (["ls", closed_out], ["ls", closed_out, "--json"],
                    ["cat", closed_out, "/index.html"], ["verify", closed_out], ["--version"]):
            expect_failure(cmd, 1, ["Bad file descriptor"], "%s >&-" % " ".join(cmd[:1]),
                           preexec_fn=lambda: os.close(1))

        # An output directory removed while it is still the cwd: stat and access pass
        # on it, and the build failed only after all its work.
        gone = os.path.join(work, "gone")
        os.mkdir(gone)

        def in_removed_dir():
            os.chdir(gone)
            os.rmdir(gone)
        expect_failure(["build", root, "-o", "out.lmdb"], 1, ["output directory . was deleted"],
                       "-o in a removed cwd", preexec_fn=in_removed_dir)

        # nohup (SIGHUP ignored) and a shell's background job (SIGINT ignored): a signal
        # the parent ignores stays ignored, and the build goes on.
        slow_root = os.path.join(work, "slow-site")
        os.makedirs(slow_root)
        rng = random.Random(3)
        with open(os.path.join(slow_root, "words.txt"), "w") as f:
            f.write(" ".join("w%d" % rng.randrange(100000) for _ in range(150000)))
        slow_out = os.path.join(outdir, "slow.lmdb")
        for sig in (signal.SIGHUP, signal.SIGINT):
            if os.path.exists(slow_out):
                os.unlink(slow_out)
            p = subprocess.Popen([T.PACK, "build", slow_root, "-o", slow_out, "-q", "--jobs", "1"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 preexec_fn=lambda sig=sig: signal.signal(sig, signal.SIG_IGN))
            time.sleep(0.5)  # the build has started: its handlers are in place
            p.send_signal(sig)
            out_, err_ = p.communicate(timeout=120)
            T.eq(p.returncode, 0, "%s ignored by the parent: the build goes on (%r)"
                 % (signal.Signals(sig).name, err_.decode(errors="replace")))
            T.check(os.path.exists(slow_out), "%s ignored: the pack is written"
                    % signal.Signals(sig).name)

        # A file size limit (ulimit -f) reached while writing: SIGXFSZ killed the build
        # silently, its temporary pack left beside the output. An error naming the limit
        # now, the previous pack untouched, nothing left.
        import resource
        fs_out = os.path.join(outdir, "fsize.lmdb")
        T.eq(T.run(["build", root, "-o", fs_out, "-q"]).returncode, 0, "build before the limit")
        before = open(fs_out, "rb").read()
        # Below 65536 the limit is met by the temporary file of compressed variants,
        # which the compression writes beside the pack, before the pack.
        for limit in (0, 4096, 8192, 65536):
            def fsize(limit=limit):
                resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
            file_words = ([fs_out + ".tmp-"] if limit == 65536 else
                          ["cannot write the compressed variants to a temporary file in %s: "
                           "File too large" % outdir])
            expect_failure(["build", root, "-o", fs_out, "-q", "--jobs", "1"], 1,
                           file_words + ["the file size limit is"],
                           "RLIMIT_FSIZE %d" % limit, preexec_fn=fsize)
            T.eq(open(fs_out, "rb").read(), before, "RLIMIT_FSIZE %d: the pack unchanged" % limit)
            T.eq([f for f in os.listdir(outdir) if ".tmp-" in f], [],
                 "RLIMIT_FSIZE %d: no temporary file left" % limit)

        # A variant read back from the temporary file is not what was written there (a
        # failing disk; swap_open.so flips a byte): a pack with a body its ETag does not
        # name would be served. An error naming the file, and the pack unchanged.
        expect_failure(["build", root, "-o", fs_out, "-q"], 1,
                       ["variant, read back from the temporary file in %s, is not what was "
                        "written there (SHA-256 mismatch)" % outdir],
                       "a variant changed in its temporary file", env=T.shim_env(
                           FLIP_PREAD=" (deleted)"))
        T.eq(open(fs_out, "rb").read(), before, "a variant changed: the pack unchanged")
        # A file of the site that cannot be looked at again when its compression reads
        # it (an I/O error): the message is that file's, with no hint about the free
        # space of the output's file system, which is another disk.
        err = expect_failure(["build", root, "-o", fs_out, "-q"], 1,
                             ["index.html: Input/output error while the site was being packed"],
                             "a file of the site unreadable at its compression",
                             env=T.shim_env(FAIL_STAT="/index.html"))
        T.check("disk full" not in err, "no hint about the output's disk: %r" % err)
        T.eq(open(fs_out, "rb").read(), before, "an unreadable file: the pack unchanged")
        T.eq([f for f in os.listdir(outdir) if ".tmp-" in f], [],
             "a variant changed: no temporary file left")
        os.unlink(fs_out)

        # Packs that are not packs.
        notpack = os.path.join(work, "not.lmdb")
        with open(notpack, "wb") as f:
            f.write(b"hello" * 4000)
        for cmd in (["ls", notpack], ["verify", notpack], ["cat", notpack, "/"],
                    ["diff", notpack, notpack]):
            expect_failure(cmd, 1, [notpack, "not a servd pack"], "%s of a non-pack" % cmd[0])
        nopack = os.path.join(work, "absent.lmdb")
        expect_failure(["ls", nopack], 1, [nopack], "ls of a missing pack")

        # A good build, then cat errors.
        p = T.run(["build", root, "-o", out])
        T.eq(p.returncode, 0, "build: " + p.stderr.decode())
        summary = p.stderr.decode()
        for word in ("identity", "gzip", "br", "zstd", "3 dotfiles", "paths"):
            T.check(word in summary, "summary mentions %r: %s" % (word, summary))
        # which dotfiles: a site moved from a host that serves them (.nojekyll,
        # .buildinfo) is told what it lost, the smallest names first
        T.check("  skipped: 3 dotfiles (/.env, /.git, /docs/.draft.html), 0 excluded;" in summary,
                "summary names the dotfiles: " + summary)
        many = os.path.join(work, "many-dots")
        os.makedirs(many)
        # a long name is cut at 100 bytes, where a character starts
        for name in ("index.html", ".e", ".d", ".c", ".b", ".a", ".0" + "\u00e9" * 80):
            with open(os.path.join(many, name), "w") as f:
                f.write("x\n")
        p = T.run(["build", many, "-o", os.path.join(outdir, "many-dots.lmdb")])
        T.check("  skipped: 6 dotfiles (/.0%s..., /.a, /.b and 3 more), 0 excluded;"
                % ("\u00e9" * 48) in p.stderr.decode(),
                "six dotfiles: the first three named: %s" % p.stderr.decode())
        T.check("precompressed copies packed at their own URLs (servd-pack makes the variants "
                "itself; exclude the copies with a rule if nothing links to them): "
                "/js/app.js.gz\n" in summary, "summary names the precompressed copy: " + summary)
        T.eq(T.run(["build", root, "-o", out, "-q"]).stderr, b"", "-q prints nothing")

        # More copies than the summary names: the first three, then how many more.
        many = os.path.join(work, "many-sidecars")
        os.makedirs(many)
        for n in "abcde":
            body = ("/* %s */\n" % n + "var x = 1;\n" * 200).encode()
            with open(os.path.join(many, n + ".js"), "wb") as f:
                f.write(body)
            with open(os.path.join(many, n + ".js.gz"), "wb") as f:
                f.write(gzip.compress(body))
        p = T.run(["build", many, "-o", os.path.join(work, "many.lmdb")])
        T.eq(p.returncode, 0, "build with five sidecars: " + p.stderr.decode())
        T.check("exclude the copies with a rule if nothing links to them): /a.js.gz, /b.js.gz, "
                "/c.js.gz and 2 more\n" in p.stderr.decode(),
                "summary of five copies: " + p.stderr.decode())

        # An .svgz is stored as the SVG it contains, with the usual variants.
        svg_root = os.path.join(work, "svgz-site")
        os.mkdir(svg_root)
        svg = ("<svg xmlns='http://www.w3.org/2000/svg'>%s</svg>\n" %
               "".join("<circle cx='%d' cy='%d' r='3'/>" % (i, i * 2) for i in range(150))).encode()
        with open(os.path.join(svg_root, "logo.svgz"), "wb") as f:
            f.write(gzip.compress(svg))
        svg_out = os.path.join(outdir, "svgz.lmdb")
        p = T.run(["build", svg_root, "-o", svg_out, "-q"])
        T.eq(p.returncode, 0, "build with an .svgz: " + p.stderr.decode())
        entry = T.ls_json(svg_out)[0]
        T.eq((entry["path"], entry["mime"]), ("/logo.svgz", "image/svg+xml; charset=utf-8"), ".svgz type")
        T.eq(T.cat(svg_out, "/logo.svgz"), svg, ".svgz identity is the SVG")
        T.eq(T.decode("gzip", T.cat(svg_out, "/logo.svgz", "gzip")), svg, ".svgz gzip variant")
        T.check(b"Content-Encoding: gzip\r\n" in T.cat(svg_out, "/logo.svgz", "gzip", headers=True),
                ".svgz gzip variant is sent with Content-Encoding")
        with open(os.path.join(svg_root, "logo.svgz"), "wb") as f:
            f.write(b"\x1f\x8b" + b"broken" * 10)
        expect_failure(["build", svg_root, "-o", svg_out + ".2"], 1,
                       [os.path.join(svg_root, "logo.svgz"), "gzip"], "corrupt .svgz")
        # gzip of something else (a JPEG) would be sent as image/svg+xml, which no
        # browser shows: refused too; an SVG after a BOM and an XML declaration is fine
        with open(os.path.join(svg_root, "logo.svgz"), "wb") as f:
            f.write(gzip.compress(b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + bytes(200)))
        expect_failure(["build", svg_root, "-o", svg_out + ".2"], 1,
                       [os.path.join(svg_root, "logo.svgz") + ": an .svgz must be a gzip file "
                        "of an SVG: it decompresses to bytes that do not start like XML"],
                       ".svgz of a JPEG")
        with open(os.path.join(svg_root, "logo.svgz"), "wb") as f:
            f.write(gzip.compress(b"\xef\xbb\xbf<?xml version='1.0'?>\n" + svg))
        p = T.run(["build", svg_root, "-o", svg_out + ".2", "-q"])
        T.eq(p.returncode, 0, "an .svgz with a BOM and a declaration: " + p.stderr.decode())
        os.unlink(svg_out + ".2")

        # X.gz beside X is a file of the site like any other, whether or not it is X
        # compressed: a link to it (a download, a sitemap.xml.gz named in robots.txt)
        # works, as with nginx, Caddy and h2o. X's variants are servd-pack's own.
        sc_root = os.path.join(work, "sidecar-site")
        os.mkdir(sc_root)
        data = b"id,name\n" + b"".join(b"%d,item %d\n" % (i, i) for i in range(200))
        older_gz = gzip.compress(data[:-9], mtime=0)  # once: the header holds a time stamp
        for name, content in (("data.csv", data), ("data.csv.gz", older_gz),
                              ("data.csv.br", T.encode("br", data)), ("notes.txt", b"hello\n" * 30),
                              ("notes.txt.zst", b"not zstd at all")):
            with open(os.path.join(sc_root, name), "wb") as f:
                f.write(content)
        sc_out = os.path.join(outdir, "sidecar.lmdb")
        p = T.run(["build", sc_root, "-o", sc_out])
        T.eq(p.returncode, 0, "build with sidecars: " + p.stderr.decode())
        keys = [line.split("\t")[0] for line in T.ls(sc_out).splitlines()]
        T.eq(keys, ["/data.csv", "/data.csv.br", "/data.csv.gz", "/notes.txt", "/notes.txt.zst"],
             "every X.gz, X.br and X.zst is packed")
        T.check("/data.csv.br, /data.csv.gz, /notes.txt.zst\n" in p.stderr.decode(),
                "summary: " + p.stderr.decode())
        T.eq(T.cat(sc_out, "/data.csv.gz"), older_gz, "X.gz is stored as it is")
        T.eq(T.cat(sc_out, "/data.csv.br"), T.encode("br", data), "so is an exact X.br")
        T.eq(T.decode("br", T.cat(sc_out, "/data.csv", "br")), data, "X's own br variant")
        expect_failure(["cat", out, "/nope.html"], 1, ["/nope.html", "no such path"], "cat of a missing path")
        # a directory named without its '/' is no path, but servd answers it (a 301): say so
        expect_failure(["cat", out, "/docs"], 1,
                       ["/docs: no such path in the pack; servd answers it with a 301 to /docs/ "
                        "(cat /docs/ for the page)"], "cat of a directory without its slash")
        expect_failure(["cat", out, "/img/photo.png", "--encoding", "br"], 1,
                       ["/img/photo.png", "no br variant"], "cat of a missing variant")
        expect_failure(["cat", out, "/../etc/passwd"], 2, ['"/../etc/passwd" is not a URL path'],
                       "cat of a bad path")
        expect_failure(["cat", out, "index.html"], 2, ["(one starts with /"], "cat of a relative path")
        # ls prints names, cat takes URLs: a name pasted from ls that is not its URL gets
        # the URL (a migrating user's "cat /q?.txt" said only "/q: no such path")
        ls_root = os.path.join(work, "ls-names")
        os.makedirs(ls_root)
        for name in ("q?.txt", "100%.html", "a b%.txt", "x\u202ey%.txt", "75%/index.html",
                     "a dir/index.html"):
            os.makedirs(os.path.dirname(os.path.join(ls_root, name)), exist_ok=True)
            with open(os.path.join(ls_root, name), "w") as f:
                f.write("x\n")
        ls_out = os.path.join(outdir, "ls-names.lmdb")
        T.build(ls_root, ls_out)
        T.eq(sorted(line.split("\t")[0] for line in T.ls(ls_out).splitlines()),
             ["/100%.html", "/75%/index.html", "/a b%.txt", "/a dir/index.html", "/q?.txt",
              "/x\\u202ey%.txt"], "ls prints the names")
        expect_failure(["cat", ls_out, "/q?.txt"], 1,
                       ["/q: no such path in the pack (ls's \"/q?.txt\" is /q%3F.txt as a URL)\n"],
                       "cat of a name with '?' as ls prints it")
        expect_failure(["cat", ls_out, "/100%.html"], 2,
                       ['cat: "/100%.html" is not a URL path (ls\'s "/100%.html" is /100%25.html '
                        'as a URL)\n'], "cat of a name with '%' as ls prints it")
        # the name in the hint is quoted, as the operand is, and escaped: a space does
        # not read as the end of it, a bidi control does not reorder the line
        expect_failure(["cat", ls_out, "/a b%.txt"], 2,
                       ['(ls\'s "/a b%.txt" is /a%20b%25.txt as a URL)\n'],
                       "cat of a name with a space and '%' as ls prints it")
        expect_failure(["cat", ls_out, "/x\u202ey%.txt"], 2,
                       ['(ls\'s "/x\\u202ey%.txt" is /x%E2%80%AEy%25.txt as a URL)\n'],
                       "cat of a name with a bidi control and '%' as ls prints it")
        # a directory without its '/': the URL to cat is named as a URL (cat "/75%/"
        # is no URL path, "/a dir/" no one word)
        expect_failure(["cat", ls_out, "/75%25"], 1,
                       ["/75%: no such path in the pack; servd answers it with a 301 to /75%25/ "
                        "(cat /75%25/ for the page)\n"], "cat of a directory with '%'")
        expect_failure(["cat", ls_out, "/a%20dir"], 1,
                       ["/a dir: no such path in the pack; servd answers it with a 301 to "
                        "/a%20dir/ (cat /a%20dir/ for the page)\n"],
                       "cat of a directory with a space")
        for url in ("/75%25/", "/a%20dir/"):
            T.eq(T.cat(ls_out, url), b"x\n", "cat %s, as the message says" % url)
        expect_failure(["cat", ls_out, "/50%"], 2, ['cat: "/50%" is not a URL path\n'],
                       "cat of a bad URL that names nothing")
        for url in ("/q%3F.txt", "/100%25.html"):
            T.eq(T.cat(ls_out, url), b"x\n", "cat %s" % url)
        for args in (["ls", ""], ["verify", ""], ["diff", out, ""], ["cat", "", "/"]):
            expect_failure(args, 2, [args[0] + ": an empty file name for a pack"], "%s ''" % args[0])
        expect_failure(["ls", out, out], 2, ["ls: expected SITE.lmdb, got 2 operands"],
                       "ls of two packs")
        T.eq(T.run(["cat", out, "/docs/"]).stdout, T.run(["cat", out, "/docs/index.html"]).stdout,
             "cat /docs/ serves /docs/index.html")
        T.eq(T.run(["cat", out, "/caf%C3%A9/men%C3%BC.html"]).stdout,
             T.run(["cat", out, "/caf\u00e9/men\u00fc.html"]).stdout, "cat percent-decodes PATH")
        T.eq(T.run(["cat", out, "/docs/index.html?v=2#x"]).stdout,
             T.run(["cat", out, "/docs/index.html"]).stdout, "cat ignores the query, as servd does")

        # The tree changes between the walk and the read (a deploy step still writing
        # it): a file swapped for a link out of the root, for a FIFO (the open must
        # not wait for a writer), or rewritten in place at the same size, during its
        # read or after it. Each is an error naming the file; none is packed.
        # swap_open.so does the swap.
        outside = os.path.join(work, "outside")
        os.makedirs(outside)
        secret = os.path.join(outside, "secret.txt")
        with open(secret, "wb") as f:
            f.write(b"outside the root\n")
        race = os.path.join(work, "race-site")
        for kind, suffix, needle, bad in (
                ("link:" + secret, "/b.txt", "replaced while being packed", "b.txt"),
                ("fifo", "/b.txt", "no longer a regular file", "b.txt"),
                ("rewrite", "/b.txt", "the file changed while being read", "b.txt"),
                # rewritten once read, while the rest is compressed: the pack would
                # hold the old bytes beside files of the new tree
                ("after", "/b.txt", "changed while the site was being packed", "b.txt"),
                # the same for a file nothing compresses, whose bytes are not kept
                # after the read but read again when written
                ("after", "/pic.jpg", "changed while the site was being packed", "pic.jpg"),
                # removed once read: the same words for both
                ("gone", "/b.txt", "removed while the site was being packed", "b.txt"),
                ("gone", "/pic.jpg", "removed while the site was being packed", "pic.jpg"),
                # a directory swapped for a link while the walk is inside it
                ("dir:" + outside, "/sub", "reached outside the root", "sub/secret.txt")):
            shutil.rmtree(race, ignore_errors=True)
            os.makedirs(os.path.join(race, "sub"))
            with open(os.path.join(race, "index.html"), "wb") as f:
                f.write(b"<p>index</p>\n")
            with open(os.path.join(race, "sub", "secret.txt"), "wb") as f:
                f.write(b"inside\n")
            with open(os.path.join(race, "b.txt"), "wb") as f:
                f.write(b"the walked file\n" * 100)
            with open(os.path.join(race, "pic.jpg"), "wb") as f:
                f.write(b"\xff\xd8\xff\xe0" + random.Random(3).randbytes(5000))
            # older mtimes, so that the rewrite moves them whatever the clock's tick
            for name in ("b.txt", "pic.jpg"):
                os.utime(os.path.join(race, name), (time.time() - 60, time.time() - 60))
            env = T.shim_env(SWAP_SUFFIX=suffix, SWAP_KIND=kind)
            race_out = os.path.join(outdir, "race.lmdb")
            expect_failure(["build", race, "-o", race_out, "-q"], 1,
                           [os.path.join(race, bad), needle], "build, %s %s" % (bad, kind),
                           outdir=outdir, out=race_out, env=env)

        # A deploy renames another pack over the path just after servd-pack's check of
        # it in a child (swap_open.so does the rename when the child is reaped): the
        # command must read the file it checked, never the unchecked one.
        checked = os.path.join(outdir, "checked.lmdb")
        other, other_src = os.path.join(outdir, "other.lmdb"), os.path.join(outdir, "other-src.lmdb")
        other_root = os.path.join(work, "other-site")
        os.makedirs(other_root)
        with open(os.path.join(other_root, "index.html"), "wb") as f:
            f.write(b"<p>another site</p>\n")
        T.eq(T.run(["build", other_root, "-o", other_src, "-q"]).returncode, 0, "build of another pack")
        for args in (["ls", checked], ["cat", checked, "/index.html"], ["verify", checked]):
            shutil.copyfile(out, checked)
            want = T.run(args)
            T.eq(want.returncode, 0, "%s: %s" % (args[0], want.stderr.decode()))
            shutil.copyfile(other_src, other)
            got = T.run(args, env=T.shim_env(WAIT_RENAME_FROM=other, WAIT_RENAME_TO=checked))
            T.check(not os.path.exists(other) and
                    open(checked, "rb").read() == open(other_src, "rb").read(),
                    "%s: the other pack was renamed over the path" % args[0])
            T.eq(got.returncode, 0, "%s: %s" % (args[0], got.stderr.decode()))
            T.check(got.stdout == want.stdout, "%s reads the pack it checked, not the other" % args[0])

        # A failed build changes neither file, also where the previous manifest cannot
        # be hard-linked aside (it is copied instead): link() fails, then the pack's
        # rename into place fails, after the manifest's.
        m_out, m_json = os.path.join(outdir, "m.lmdb"), os.path.join(outdir, "m.json")
        T.eq(T.run(["build", root, "-o", m_out, "--manifest", m_json, "-q"]).returncode, 0,
             "build with a manifest")
        before = (open(m_out, "rb").read(), open(m_json, "rb").read())
        with open(os.path.join(root, "index.html"), "ab") as f:
            f.write(b"<!-- changed -->\n")
        shim_env = T.shim_env(FAIL_LINK="1")
        expect_failure(["build", root, "-o", m_out, "--manifest", m_json, "-q"], 1,
                       [m_out], "build whose pack cannot be renamed into place",
                       env=dict(shim_env, FAIL_RENAME_TO="/m.lmdb"))
        T.eq((open(m_out, "rb").read(), open(m_json, "rb").read()), before,
             "a failed build without hard links: the pack and the manifest are the previous ones")
        T.eq([f for f in os.listdir(outdir) if ".old-" in f or ".tmp-" in f], [],
             "no copy or temporary file left")
        # And where the previous manifest cannot be renamed back either: the new one
        # (which describes a pack that is not there) goes, and the message says where the
        # previous one is. It was silently left aside.
        p = T.run(["build", root, "-o", m_out, "--manifest", m_json, "-q"],
                  env=dict(shim_env, FAIL_RENAME_TO="/m.lmdb", FAIL_RENAME_FROM=".old-"))
        err = p.stderr.decode()
        kept = [f for f in os.listdir(outdir) if f.startswith("m.json.old-")]
        T.eq(p.returncode, 1, "the previous manifest cannot be put back: exit status (%s)" % err)
        T.eq(len(kept), 1, "the previous manifest is kept aside: %s" % os.listdir(outdir))
        T.check(kept and os.path.join(outdir, kept[0]) in err and "could not be put back" in err,
                "the message says where the previous manifest is: %r" % err)
        T.check(not os.path.exists(m_json), "the new manifest is not left beside the old pack")
        T.eq(open(m_out, "rb").read(), before[0], "the pack is the previous one")
        if kept:
            T.eq(open(os.path.join(outdir, kept[0]), "rb").read(), before[1],
                 "the kept manifest is the previous one")
            os.rename(os.path.join(outdir, kept[0]), m_json)
        p = T.run(["build", root, "-o", m_out, "--manifest", m_json, "-q"], env=shim_env)
        T.eq(p.returncode, 0, "build without hard links: " + p.stderr.decode())
        T.check(open(m_json, "rb").read() != before[1], "the new manifest is in place")
        T.eq([f for f in os.listdir(outdir) if ".old-" in f or ".tmp-" in f], [],
             "no copy or temporary file left after a good build")
    with T.TempDir() as work:
        progress_bar(work)
        progress_lines(work)
        io_errors(work)
        strict(work)
        killed_during_its_check(work)
        cut_while_read(work)
    T.finish("test_pack_cli")


if __name__ == "__main__":
    main()
