"""What -o and --manifest may name, and what servd-pack must never replace.

A deploy pipeline may point the outputs at a link, a pipe or /dev/stdout, or mistype them
onto an input. servd-pack writes through links (the link stays), writes a manifest into a
pipe or device, and refuses to replace a device, a FIFO, a file of the web root or the
rules file: the input is never lost. And servd-pack diff prints URLs, percent-encoded."""
import fcntl
import json
import os
import random
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "pack"))
import packtest as T  # noqa: E402


def refused(args, status, needles, what):
    p = T.run(args)
    err = p.stderr.decode(errors="replace")
    T.eq(p.returncode, status, "%s: exit status (stderr: %s)" % (what, err.strip()))
    for n in needles:
        T.check(n in err, "%s: message %r does not contain %r" % (what, err.strip(), n))
    return err


def read(path):
    with open(path, "rb") as f:
        return f.read()


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)


def main():
    with T.TempDir() as work:
        root = os.path.join(work, "site")
        os.mkdir(root)
        write(os.path.join(root, "index.html"), b"<p>home</p>\n" * 20)
        write(os.path.join(root, "app.css"), b"body{margin:0}\n" * 20)
        pack = os.path.join(work, "site.lmdb")
        T.build(root, pack)
        packed = T.ls(pack)

        # A FIFO at -o is not replaced (a reader of it would wait forever on a file).
        fifo = os.path.join(work, "fifo")
        os.mkfifo(fifo)
        refused(["build", root, "-o", fifo, "-q"], 1, [fifo, "a FIFO", "regular file"], "-o FIFO")
        T.check(stat.S_ISFIFO(os.lstat(fifo).st_mode), "-o FIFO: the FIFO is still there")
        # A device node, made here rather than touching /dev (needs root).
        dev = os.path.join(work, "null")
        try:
            os.mknod(dev, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        except PermissionError:
            print("test_pack_outputs: no device test: mknod needs root")
        else:
            refused(["build", root, "-o", dev, "-q"], 1, [dev, "a character device"], "-o device")
            T.check(stat.S_ISCHR(os.lstat(dev).st_mode), "-o device: the device is still there")

        # Inputs are never outputs: a file of the root, the rules file.
        page = os.path.join(root, "app.css")
        before = read(page)
        refused(["build", root, "-o", page, "-q"], 2, ["file %s of the web root" % page, "/app.css"],
                "-o a file of the root")
        refused(["build", root, "-o", pack + ".new", "--manifest", page, "-q"], 2,
                ["--manifest", "/app.css"], "--manifest a file of the root")
        T.eq(read(page), before, "the page named as an output is intact")
        T.check(not os.path.exists(pack + ".new"), "no pack written when the manifest is refused")
        rules = os.path.join(work, "rules.json")
        write(rules, b"{}\n")
        refused(["build", root, "-o", rules, "--rules", rules, "-q"], 2, ["--rules file"],
                "-o the rules file")
        refused(["build", root, "-o", pack, "--rules", rules, "--manifest", rules, "-q"], 2,
                ["--rules file"], "--manifest the rules file")
        T.eq(read(rules), b"{}\n", "the rules file named as an output is intact")
        # Nor a new file where the walk would pack it: the same command run again would
        # find it a file of the site. Refused at once, whatever the spelling, unless the
        # walk skips the name (a dotfile, a hidden directory, an exclude).
        inside = os.path.join(root, "site.lmdb")
        refused(["build", root, "-o", inside, "-q"], 2,
                ["-o %s lies inside the web root" % inside, "(as /site.lmdb)", "starting with '.'"],
                "-o a new file inside the root")
        os.mkdir(os.path.join(root, "sub"))
        write(os.path.join(root, "sub", "a.txt"), b"a\n")
        os.symlink(os.path.join(root, "sub"), os.path.join(work, "linked"))
        refused(["build", root, "-o", os.path.join(work, "linked", "site.lmdb"), "-q"], 2,
                ["lies inside the web root", "(as /sub/site.lmdb)"], "-o inside, through a link")
        refused(["build", root, "-o", pack + ".new", "--manifest",
                 os.path.join(root, "manifest.json"), "-q"], 2,
                ["--manifest", "(as /manifest.json)"], "--manifest a new file inside the root")
        T.check(not os.path.exists(inside) and not os.path.exists(pack + ".new"),
                "nothing written when an output is refused")
        os.unlink(os.path.join(root, "sub", "a.txt"))
        os.rmdir(os.path.join(root, "sub"))
        os.unlink(os.path.join(work, "linked"))
        os.mkdir(os.path.join(root, ".out"))
        excl = os.path.join(work, "excl.json")
        write(excl, b'{"exclude": ["/build/**"]}\n')
        # an exclude of the output alone matches nothing on the first build: used all
        # the same, not warned about (--strict would fail on the warning)
        excl_file = os.path.join(work, "excl-file.json")
        write(excl_file, b'{"exclude": ["/site.lmdb"]}\n')
        os.mkdir(os.path.join(root, "build"))
        for out, extra in ((os.path.join(root, ".site.lmdb"), []),
                           (os.path.join(root, ".out", "site.lmdb"), []),
                           (os.path.join(root, "build", "site.lmdb"), ["--rules", excl]),
                           (os.path.join(root, "site.lmdb"), ["--rules", excl_file, "--strict"])):
            for _ in range(2):  # and again: the pack is not part of the site
                T.build(root, out, *extra)
                T.eq(T.ls(out), packed, "a pack at %s holds the site alone" % out)
            os.unlink(out)
        # The temporary names of such an output are no part of the site either: a killed
        # build's SITE.tmp-PID, or a manifest's .old-PID, that the exclude of the output
        # alone does not match was packed as a URL (and --strict passed).
        inside = os.path.join(root, "site.lmdb")
        T.build(root, inside, "--rules", excl_file)
        for left in (inside + ".tmp-99999", inside + ".old-4242"):
            shutil.copyfile(inside, left)
            refused(["build", root, "-o", inside, "--rules", excl_file, "--strict", "-q"], 2,
                    ["%s, a temporary file of a build of it" % left, "(as /%s)" %
                     os.path.basename(left), '("/site.lmdb*")'], "a leftover of -o in the root")
            os.unlink(left)
        os.unlink(inside)
        shutil.rmtree(os.path.join(root, ".out"))
        os.rmdir(os.path.join(root, "build"))
        # A manifest sent to standard output, which the shell redirected into the root:
        # the file exists (empty) before the walk, which would pack it.
        inside_json = os.path.join(root, "m.json")
        with open(inside_json, "wb") as f:
            p = subprocess.run([T.PACK, "build", root, "-o", pack + ".s", "--manifest",
                                "/dev/stdout", "-q"], stdout=f, stderr=subprocess.PIPE)
        err = p.stderr.decode(errors="replace")
        T.eq(p.returncode, 2, "--manifest /dev/stdout > ROOT/m.json: exit status (%s)" % err)
        T.check("which the shell created before the walk" in err and "/m.json" in err,
                "--manifest /dev/stdout > ROOT/m.json: %r" % err)
        T.check(not os.path.exists(pack + ".s"), "no pack written when the stream is refused")
        os.unlink(inside_json)

        # A file that servd-pack did not write is never replaced: a mistyped -o or
        # --manifest loses nothing. A pack (even a damaged one: LMDB's magic is enough)
        # and a manifest are replaced.
        notes = os.path.join(work, "notes.txt")
        write(notes, b"two years of notes\n")
        refused(["build", root, "-o", notes, "-q"], 1, [notes, "is not a servd pack", "remove"],
                "-o a file that is not a pack")
        refused(["build", root, "-o", pack + ".m", "--manifest", notes, "-q"], 1,
                [notes, "is not a servd-pack manifest"], "--manifest a file that is not one")
        T.eq(read(notes), b"two years of notes\n", "the file named as an output is intact")
        T.check(not os.path.exists(pack + ".m"), "no pack written when the manifest is refused")
        conf = os.path.join(work, "site.json")
        write(conf, b'{"name": "site", "servd_manifest": 1}\n')  # the key, but not first
        refused(["build", root, "-o", pack + ".m", "--manifest", conf, "-q"], 1,
                ["is not a servd-pack manifest"], "--manifest another JSON file")
        damaged = os.path.join(work, "damaged.lmdb")
        write(damaged, read(pack)[:4096])
        T.build(root, damaged, "--manifest", conf + ".new")
        T.eq(T.ls(damaged), packed, "a damaged pack is replaced")
        T.build(root, damaged, "--manifest", conf + ".new")
        T.eq(json.loads(read(conf + ".new"))["servd_manifest"], 1, "a manifest is replaced")

        # A replaced pack or manifest keeps its mode, owner and group (a deploy that made
        # the pack 0640 root:www-data for servd --user www-data must not lose that on the
        # next build); as root, to another owner too.
        # Under umask 022, so that 0640 is not what a new file gets anyway. An empty
        # placeholder (mktemp makes it 0600) is a new file: its mode is not copied.
        old_umask = os.umask(0o022)
        try:
            kept = os.path.join(work, "kept.lmdb")
            kept_m = os.path.join(work, "kept.json")
            T.build(root, kept, "--manifest", kept_m)
            owner = (os.getuid(), os.getgid())
            if os.getuid() == 0:
                owner = (65534, 65534)  # nobody, nogroup
            for f in (kept, kept_m):
                os.chmod(f, 0o640)
                os.chown(f, *owner)
            T.build(root, kept, "--manifest", kept_m)
            for f in (kept, kept_m):
                st_ = os.stat(f)
                T.eq((stat.S_IMODE(st_.st_mode), st_.st_uid, st_.st_gid), (0o640,) + owner,
                     "mode and owner of a replaced %s" % os.path.basename(f))
            placeholder = os.path.join(work, "placeholder.lmdb")
            write(placeholder, b"")
            os.chmod(placeholder, 0o600)
            T.build(root, placeholder)
            T.eq(stat.S_IMODE(os.stat(placeholder).st_mode), 0o644,
                 "a pack built into an empty 0600 placeholder has a new file's mode")
            # New files: 0644 for a pack, 0666 for a manifest, less the umask.
            os.umask(0o027)
            fresh, fresh_m = os.path.join(work, "fresh.lmdb"), os.path.join(work, "fresh.json")
            T.build(root, fresh, "--manifest", fresh_m)
            T.eq([stat.S_IMODE(os.stat(f).st_mode) for f in (fresh, fresh_m)], [0o640, 0o640],
                 "modes of a new pack and manifest under umask 027")
            os.umask(0o022)
            # While they are written, the temporary pack and manifest are 0600: a pack
            # made 0600 on purpose was 0644 to every user of the host for the whole
            # write (one could open it and keep the descriptor). 40 MB stored as is
            # keep the temporary pack there for a while.
            secret = os.path.join(work, "secret")
            os.makedirs(os.path.join(secret, "site"))
            write(os.path.join(secret, "site", "big.png"), os.urandom(40 << 20))
            spack, sman = os.path.join(secret, "s.lmdb"), os.path.join(secret, "s.json")
            T.build(os.path.join(secret, "site"), spack, "--manifest", sman)
            for f in (spack, sman):
                os.chmod(f, 0o600)
            p = subprocess.Popen([T.PACK, "build", os.path.join(secret, "site"), "-o", spack,
                                  "--manifest", sman, "-q"])
            modes = {}
            while p.poll() is None:
                for n in os.listdir(secret):
                    if ".tmp" in n:
                        try:
                            m = stat.S_IMODE(os.stat(os.path.join(secret, n)).st_mode)
                        except FileNotFoundError:
                            continue
                        modes.setdefault(n.split(".tmp")[0], set()).add(m)
            T.eq(p.returncode, 0, "the build of the 0600 pack")
            T.check("s.lmdb" in modes, "the temporary pack was seen: %r" % modes)
            T.eq({n: sorted(m) for n, m in modes.items()},
                 {n: [0o600] for n in modes}, "modes of the temporary files of a 0600 pack")
            T.eq([stat.S_IMODE(os.stat(f).st_mode) for f in (spack, sman)], [0o600, 0o600],
                 "a 0600 pack and manifest stay 0600")
            shutil.rmtree(secret)
        finally:
            os.umask(old_umask)

        # Names refused before any work.
        refused(["build", root, "-o", ""], 2, ["-o: an empty file name"], "-o ''")
        refused(["build", root, "-o", pack, "--manifest", ""], 2, ["--manifest: an empty file name"],
                "--manifest ''")
        long_name = os.path.join(work, "a" * 250 + ".lmdb")
        refused(["build", root, "-o", long_name, "-q"], 1, ["too long", ".tmp-"], "-o too long")
        dangling = os.path.join(work, "dangling")
        os.symlink("nowhere", dangling)
        refused(["build", root, "-o", dangling, "-q"], 1, [dangling, "cannot be reached"],
                "-o dangling link")
        T.eq(os.readlink(dangling), "nowhere", "the dangling link is left alone")

        # Through a link: the file it leads to is replaced, the link stays.
        releases = os.path.join(work, "releases")
        os.mkdir(releases)
        target = os.path.join(releases, "site-1.lmdb")
        write(target, b"")  # empty (as mktemp leaves it): replaceable
        link = os.path.join(work, "live.lmdb")
        os.symlink(os.path.join("releases", "site-1.lmdb"), link)
        mtarget = os.path.join(releases, "site-1.json")
        write(mtarget, b"")
        mlink = os.path.join(work, "live.json")
        os.symlink(os.path.join("releases", "site-1.json"), mlink)
        T.build(root, link, "--manifest", mlink)
        T.check(os.path.islink(link) and os.path.islink(mlink), "the links are still links")
        T.eq(T.ls(target), packed, "the pack went to the link's target")
        T.eq(sorted(json.loads(read(mtarget))["paths"]), ["/app.css", "/index.html"],
             "the manifest went to the link's target")

        # A manifest into a pipe: standard output through a link to /proc/self/fd/1 (what
        # /dev/stdout is), and a FIFO with a reader.
        out_link = os.path.join(work, "stdout")
        os.symlink("/proc/self/fd/1", out_link)
        p = T.run(["build", root, "-o", pack, "--manifest", out_link, "-q"])
        T.eq(p.returncode, 0, "--manifest to standard output: " + p.stderr.decode())
        T.eq(json.loads(p.stdout)["pack_id"], json.loads(read(mtarget))["pack_id"],
             "the manifest on standard output")
        T.eq(os.readlink(out_link), "/proc/self/fd/1", "the link to standard output stays")
        # Through the descriptor itself: after ">>" the manifest is appended, and the file
        # is not replaced (its other links see it too).
        log = os.path.join(work, "build.log")
        write(log, b"earlier lines\n")
        os.link(log, log + ".link")
        with open(log, "ab") as out:
            p = subprocess.run([T.PACK, "build", root, "-o", pack, "--manifest", out_link, "-q"],
                               stdout=out, stderr=subprocess.PIPE, timeout=120)
        T.eq(p.returncode, 0, "--manifest to an appended standard output: " + p.stderr.decode())
        text = read(log + ".link")
        T.check(text.startswith(b"earlier lines\n{"), "appended after the earlier lines: %r"
                % text[:40])
        T.eq(json.loads(text[len(b"earlier lines\n"):])["servd_manifest"], 1, "the manifest")
        refused(["build", root, "-o", out_link, "-q"], 1, ["names descriptor 1"],
                "-o standard output")
        # Standard output closed (`>&-`): servd-pack holds /dev/null there, read only. The
        # manifest could never be written: refused before the build, the pack untouched.
        before = os.stat(pack).st_ino  # a new pack would be a new inode
        p = subprocess.run([T.PACK, "build", root, "-o", pack, "--manifest", "/dev/stdout",
                            "-q"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           timeout=120, preexec_fn=lambda: os.close(1))
        T.eq(p.returncode, 1, "--manifest /dev/stdout with standard output closed (%r)"
             % p.stderr)
        T.check(b"/dev/stdout: descriptor 1 is not open for writing" in p.stderr,
                "message %r" % p.stderr)
        T.eq(os.stat(pack).st_ino, before,
             "the pack is not replaced when the manifest cannot be written")
        # Standard output that is -o or --base itself (`... --manifest /dev/stdout >>
        # site.lmdb`): the manifest went into the replaced pack's old inode, lost.
        for target, opt in ((pack, "-o"), (pack + ".base", "--base")):
            if opt == "--base":
                shutil.copyfile(pack, target)
            with open(target, "ab") as out:
                args = [T.PACK, "build", root, "-o", pack if opt == "-o" else pack + ".new",
                        "--manifest", out_link, "-q"] + (["--base", target] if opt == "--base"
                                                         else [])
                p = subprocess.run(args, stdout=out, stderr=subprocess.PIPE, timeout=120)
            T.eq(p.returncode, 2, "--manifest to a standard output that is %s (%r)"
                 % (opt, p.stderr))
            T.check(b"same file as " + opt.encode() in p.stderr, "message %r" % p.stderr)
        # The manifest never replaces the base, through a link or a hard link.
        base_link = os.path.join(work, "base-link")
        os.symlink(pack, base_link)
        base_hard = os.path.join(work, "base-hard")
        os.link(pack, base_hard)
        before = read(pack)
        for name in (base_link, base_hard):
            refused(["build", root, "-o", pack + ".2", "--base", pack, "--manifest", name, "-q"],
                    2, ["same file as --base"], "--manifest %s" % name)
        T.eq(read(pack), before, "the base is intact")
        # A socket file cannot take a manifest: refused before any work.
        sock_path = os.path.join(work, "sock")
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(sock_path)
        refused(["build", root, "-o", pack + ".3", "--manifest", sock_path, "-q"], 1,
                ["is a socket"], "--manifest socket")
        T.check(not os.path.exists(pack + ".3"), "nothing built for a socket manifest")
        sock.close()
        got = []
        reader = threading.Thread(target=lambda: got.append(read(fifo)), daemon=True)
        reader.start()
        p = T.run(["build", root, "-o", pack, "--manifest", fifo, "-q"])
        reader.join(30)
        T.eq(p.returncode, 0, "--manifest into a FIFO: " + p.stderr.decode())
        T.check(got and json.loads(got[0])["servd_manifest"] == 1, "the manifest read from the FIFO")
        T.check(stat.S_ISFIFO(os.lstat(fifo).st_mode), "the FIFO is still a FIFO")
        # A full device: the pack is in place, the failure says so.
        if os.path.exists("/dev/full"):
            err = refused(["build", root, "-o", pack + ".full", "--manifest", "/dev/full", "-q"], 1,
                          ["/dev/full", "cannot write the manifest", "is in place"],
                          "--manifest /dev/full")
            T.check("disk full?" not in err, "no disk hint for a manifest write: " + err)
            T.eq(T.ls(pack + ".full"), packed, "the pack written before the manifest")

        # diff: the purge list holds URLs, percent-encoded as servd decodes them.
        odd = os.path.join(work, "odd")
        os.mkdir(odd)
        for name in ("a b.txt", "100%.txt", "q?.txt", "h#.txt", "a%20b.txt"):
            write(os.path.join(odd, name), name.encode() + b"\n")
        odd_pack = os.path.join(work, "odd.lmdb")
        T.build(odd, odd_pack)
        p = T.run(["diff", pack, odd_pack])
        T.eq(p.returncode, 0, "diff: " + p.stderr.decode())
        added = [l[2:] for l in p.stdout.decode().splitlines() if l.startswith("+ ")]
        T.eq(added, ["/100%25.txt", "/a%20b.txt", "/a%2520b.txt", "/h%23.txt", "/q%3F.txt"],
             "diff text: URLs")
        doc = json.loads(T.run(["diff", pack, odd_pack, "--json"]).stdout)
        T.eq(sorted(doc["added"]), ["/100%.txt", "/a b.txt", "/a%20b.txt", "/h#.txt", "/q?.txt"],
             "diff --json: added lists paths")
        T.check(set(added) <= set(doc["urls"]), "diff --json: urls are the URLs: %r" % doc["urls"])
        # Every URL of the list fetches its file from the pack (cat decodes as servd does).
        for url, path in zip(added, ["100%.txt", "a b.txt", "a%20b.txt", "h#.txt", "q?.txt"]):
            T.eq(T.cat(odd_pack, url), read(os.path.join(odd, path)), "cat %s" % url)
        if os.path.exists("/dev/full"):
            # Listings that cannot be written blame the output, not the pack.
            for args in (["ls", pack], ["ls", pack, "--json"], ["diff", pack, odd_pack],
                         ["diff", pack, odd_pack, "--json"]):
                with open("/dev/full", "wb") as full:
                    p = subprocess.run([T.PACK] + args, stdout=full, stderr=subprocess.PIPE,
                                       timeout=60)
                err = p.stderr.decode()
                T.eq(p.returncode, 1, "%s > /dev/full: exit status (%s)" % (" ".join(args), err))
                T.check("writing the" in err and "No space left" in err and pack not in err,
                        "%s > /dev/full: %r" % (" ".join(args), err))
        # A signal mid-build says what it left, and leaves the old pack as it was.
        slow = os.path.join(work, "slow")
        os.mkdir(slow)
        rng = random.Random(7)
        for i in range(8):  # ~3 MB of text: brotli at its strongest takes seconds on one core
            write(os.path.join(slow, "f%d.js" % i), "".join(
                "function f%d(x){return x*%d}\n" % (j, rng.randrange(1 << 30))
                for j in range(12000)).encode())
        old = read(pack)
        for sig in (signal.SIGINT, signal.SIGTERM):
            p = subprocess.Popen([T.PACK, "build", slow, "-o", pack, "-j1", "-q"],
                                 stderr=subprocess.PIPE)
            time.sleep(0.5)
            p.send_signal(sig)
            err = p.communicate(timeout=60)[1].decode()
            T.eq(p.returncode, -sig, "%s mid-build: ends by the signal (%s)" % (sig.name, err))
            T.check("interrupted; %s was not changed" % pack in err,
                    "%s mid-build: message %r" % (sig.name, err))
            T.eq(read(pack), old, "%s mid-build: the old pack is intact" % sig.name)
            T.eq([f for f in os.listdir(work) if ".tmp-" in f], [],
                 "%s mid-build: no temporary file" % sig.name)
        killed_build_leftovers(work, root)
        overlapping_builds(work)
        manifest_after_whole_pack(work)
        gone_readers(work, root)
        sticky_directory()
    T.finish("test_pack_outputs")


def sticky_directory():
    """A pack (or manifest) of another user in a sticky directory cannot be replaced:
    rename(2) refuses (EPERM) unless the file or the directory is ours, or the process
    has CAP_FOWNER. A build found that out at its last step, after all its work
    (2026-12-06); now before it starts, and the file is left as it was. Needs root, to
    build as nobody."""
    import tempfile
    if os.geteuid() != 0:
        print("SKIP (part): a sticky directory needs root (to build as nobody)")
        return

    def nobody():
        os.setgroups([])
        os.setgid(65534)
        os.setuid(65534)
    # not under TMPDIR, which may be closed to nobody, as the test's own directory is
    d = tempfile.mkdtemp(prefix="servd-sticky-", dir="/tmp")
    try:
        os.chmod(d, 0o1777)
        site = os.path.join(d, "site")
        T.make_site(site)
        for dirpath, dirs, files in os.walk(site):
            os.chmod(dirpath, 0o755)
            for f in files:
                os.chmod(os.path.join(dirpath, f), 0o644)
        pack, manifest = os.path.join(d, "site.lmdb"), os.path.join(d, "site.json")
        T.build(site, pack, "--manifest", manifest)  # root's
        before = [read(pack), read(manifest)]
        for args, name in ((["-o", pack], pack), (["-o", os.path.join(d, "mine.lmdb"),
                                                   "--manifest", manifest], manifest)):
            p = T.run(["build", site, "-q"] + args, preexec_fn=nobody)
            err = p.stderr.decode(errors="replace")
            T.eq(p.returncode, 1, "%s of root in a sticky directory, as nobody: exit status "
                 "(%s)" % (os.path.basename(name), err.strip()))
            T.eq(err, "servd-pack: %s: belongs to another user (uid 0) in a sticky directory, "
                 "so it cannot be replaced (remove it as its owner or the directory's, or name "
                 "another file)\n"
                 % name, "%s of root in a sticky directory: the message" % os.path.basename(name))
        T.eq([read(pack), read(manifest)], before, "root's pack and manifest are as they were")
        T.eq(sorted(n for n in os.listdir(d) if n != ".servd-pack-lock"),  # root's build's
             ["site", "site.json", "site.lmdb"], "nothing else written")
        # a file of nobody's own there is replaced, and root (CAP_FOWNER) replaces anyone's
        mine = os.path.join(d, "mine.lmdb")
        p = T.run(["build", site, "-q", "-o", mine], preexec_fn=nobody)
        T.eq(p.returncode, 0, "nobody's own pack: %s" % p.stderr.decode(errors="replace"))
        p = T.run(["build", site, "-q", "-o", mine], preexec_fn=nobody)
        T.eq(p.returncode, 0, "nobody's own pack, replaced: %s" % p.stderr.decode(errors="replace"))
        T.build(site, mine)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def etags(entries):
    return {e["path"]: [v["etag"] for v in e["variants"]] for e in entries}


def killed_build_leftovers(work, root):
    """A build killed outright (SIGKILL, the OOM killer) leaves its temporary file: the
    next build names it with its size (it may be what fills the disk) and keeps it, as
    it keeps one whose process still runs (another build's, in progress)."""
    out = os.path.join(work, "leftovers")
    os.mkdir(out)
    pack, manifest = os.path.join(out, "site.lmdb"), os.path.join(out, "site.json")
    p = subprocess.Popen([T.PACK, "build", root, "-o", pack, "--manifest", manifest, "-j1"],
                         stderr=subprocess.DEVNULL)
    while not any(".tmp-" in f for f in os.listdir(out)) and p.poll() is None:
        time.sleep(0.001)
    p.kill()
    p.wait()
    pid = p.pid
    killed = ["site.lmdb.tmp-%d" % pid, "site.json.tmp-%d" % pid]
    for name in killed:  # the build may have been killed before it made the second
        if not os.path.exists(os.path.join(out, name)):
            write(os.path.join(out, name), b"x" * 3000)
    # killed between the manifest's rename and the pack's: the previous manifest
    old_manifest = "site.json.old-%d" % pid
    write(os.path.join(out, old_manifest), b"{}" * 300)
    live = "site.lmdb.tmp-%d" % os.getpid()
    write(os.path.join(out, live), b"busy")
    write(os.path.join(out, "site.json.old-%d" % os.getpid()), b"{}")
    p = T.run(["build", root, "-o", pack, "--manifest", manifest, "-q"])
    err = p.stderr.decode()
    T.eq(p.returncode, 0, "a build after a killed one: succeeds (%s)" % err)
    for name in killed:
        T.check("warning: %s/%s (" % (out, name) in err, "the leftover %s is named: %r" % (name, err))
    T.check("warning: %s/%s (600 B) is left from a build that did not finish (no process %d "
            "runs here): the manifest it replaced, kept until its pack was in place; remove it"
            % (out, old_manifest, pid) in err, "the leftover previous manifest: %r" % err)
    T.check(os.path.exists(os.path.join(out, old_manifest)), "the previous manifest is kept")
    T.check("site.json.old-%d" % os.getpid() not in err,
            "a previous manifest whose build runs is not named: %r" % err)
    T.check("did not finish (no process %d runs here); remove it" % pid in err,
            "the leftovers' message: %r" % err)
    T.check(live not in err, "a build's file whose process runs is not named: %r" % err)
    T.eq(sorted(f for f in os.listdir(out) if ".tmp-" in f), sorted(killed + [live]),
         "leftovers are kept")
    # read as a pack, such a file cut short is refused with what it is
    cut = os.path.join(out, "site.lmdb.tmp-4194305")  # above any pid_max
    with open(pack, "rb") as f:
        write(cut, f.read()[:8192])
    p = T.run(["ls", cut])
    T.eq(p.returncode, 1, "ls of a killed build's file: exit status")
    T.check("(a build's temporary file, which a build that did not finish leaves behind, "
            "perhaps cut short)" in p.stderr.decode(), "ls of a killed build's file: %r" % p.stderr)
    shutil.rmtree(out)


def gone_readers(work, root):
    """--manifest - is standard output; a reader of the log or of the manifest that went
    away ends what it read, not the build: SIGPIPE once killed servd-pack at its summary
    (exit 141 with the pack in place, a red pipeline under pipefail)."""
    pack = os.path.join(work, "readers.lmdb")
    p = subprocess.run([T.PACK, "build", root, "-o", pack, "--manifest", "-", "-q"], cwd=work,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    T.eq(p.returncode, 0, "--manifest -: " + p.stderr.decode())
    T.eq(json.loads(p.stdout)["servd_manifest"], 1, "--manifest - writes to standard output")
    T.check(not os.path.exists(os.path.join(work, "-")), "no file named -")
    r, w = os.pipe()
    os.close(r)  # the reader of standard error is gone
    p = subprocess.run([T.PACK, "build", root, "-o", pack], stdout=subprocess.DEVNULL,
                       stderr=w, timeout=120)
    os.close(w)
    T.eq(p.returncode, 0, "a build whose standard error has no reader")
    T.check(T.ls(pack) != "", "its pack is in place")
    r, w = os.pipe()
    os.close(r)  # nor has the manifest
    p = subprocess.run([T.PACK, "build", root, "-o", pack, "--manifest", "-", "-q"], stdout=w,
                       stderr=subprocess.PIPE, timeout=120)
    os.close(w)
    T.eq(p.returncode, 1, "a manifest into a pipe without a reader (%r)" % p.stderr)
    T.check(b"Broken pipe" in p.stderr, "says why: %r" % p.stderr)


def manifest_after_whole_pack(work):
    """The manifest goes into place only once the new pack is whole and synced
    under its temporary name: a kill then leaves the new manifest beside the old
    pack only in the gap between the two renames. The build is held (swap_open.so)
    at its manifest's rename, and a copy of its temporary pack must verify. Before,
    the pack's transaction was committed and synced after the manifest's rename."""
    outdir = os.path.join(work, "whole")
    os.mkdir(outdir)
    root = os.path.join(work, "root-whole")
    os.mkdir(root)
    write(os.path.join(root, "index.html"), b"<p>the new site</p>\n" * 40)
    pack, manifest = os.path.join(outdir, "site.lmdb"), os.path.join(outdir, "site.json")
    pause = os.path.join(work, "pause-whole")
    os.mkdir(pause)
    env = T.shim_env(PAUSE_RENAME_TO="/site.json", PAUSE_DIR=pause)
    p = subprocess.Popen([T.PACK, "build", root, "-o", pack, "--manifest", manifest, "-q"],
                         env=env, stderr=subprocess.PIPE)
    deadline = time.time() + 60
    while not os.path.exists(os.path.join(pause, "here")) and time.time() < deadline:
        time.sleep(0.01)
    T.check(os.path.exists(os.path.join(pause, "here")), "the build reached its manifest's rename")
    tmp = "%s.tmp-%d" % (pack, p.pid)
    T.check(os.path.exists(tmp), "the new pack waits under its temporary name %s" % tmp)
    copy = os.path.join(work, "whole-copy.lmdb")
    with open(tmp, "rb") as f:
        write(copy, f.read())
    v = T.run(["verify", copy, "-q"])
    T.eq(v.returncode, 0, "the pack is whole before the manifest's rename (%s)" %
         v.stderr.decode(errors="replace").strip())
    T.check(b"the new site" in T.cat(copy, "/index.html"), "... and holds the new site")
    write(os.path.join(pause, "go"), b"")
    T.eq(p.wait(timeout=60), 0, "the build: exit status (%s)" % p.stderr.read().decode())
    T.check(b"the new site" in T.cat(pack, "/index.html"), "the pack is in place")


def overlapping_builds(work):
    """Two builds to the same -o and --manifest that overlap: the manifest left in
    place describes the pack left in place. Build A is held (swap_open.so) just
    before its pack's rename, after its manifest's; build B runs meanwhile. Without
    a turn each, B put both its files in place and A's pack then replaced B's."""
    outdir = os.path.join(work, "overlap")
    os.mkdir(outdir)
    pack, manifest = os.path.join(outdir, "site.lmdb"), os.path.join(outdir, "site.json")
    roots = []
    for name in ("a", "b"):
        root = os.path.join(work, "root-" + name)
        os.mkdir(root)
        write(os.path.join(root, "index.html"), ("<p>site %s</p>\n" % name).encode() * 40)
        roots.append(root)
    pause = os.path.join(work, "pause")
    os.mkdir(pause)
    env = T.shim_env(PAUSE_RENAME_TO="/site.lmdb", PAUSE_DIR=pause)
    env.pop("SOURCE_DATE_EPOCH", None)
    a = subprocess.Popen([T.PACK, "build", roots[0], "-o", pack, "--manifest", manifest, "-q"],
                         env=env, stderr=subprocess.PIPE)
    deadline = time.time() + 60
    while not os.path.exists(os.path.join(pause, "here")) and time.time() < deadline:
        time.sleep(0.01)
    T.check(os.path.exists(os.path.join(pause, "here")), "build A reached its pack's rename")
    b_err = os.path.join(work, "b.stderr")
    with open(b_err, "wb") as f:
        b = subprocess.Popen([T.PACK, "build", roots[1], "-o", pack, "--manifest", manifest],
                             stderr=f, env={k: v for k, v in os.environ.items()
                                            if k != "SOURCE_DATE_EPOCH"})
    waiting = ("servd-pack: waiting for another build to put its pack in place (%s)\n" %
               os.path.join(outdir, ".servd-pack-lock")).encode()
    deadline = time.time() + 60
    while b.poll() is None and time.time() < deadline and b"waiting for another build" not in read(b_err):
        time.sleep(0.01)
    T.check(b.poll() is None, "build B waits while A puts its files in place (%s)" %
            read(b_err).decode(errors="replace"))
    # one line, written at once (a reader never sees half of it)
    T.check(waiting in read(b_err), "build B says what it waits for: %r" % read(b_err))
    write(os.path.join(pause, "go"), b"")
    T.eq(a.wait(timeout=60), 0, "build A: exit status (%s)" % a.stderr.read().decode())
    T.eq(b.wait(timeout=60), 0, "build B: exit status (%s)" % read(b_err).decode())
    with open(manifest) as f:
        described = {p: [v["etag"] for v in e["variants"]] for p, e in json.load(f)["paths"].items()}
    T.eq(described, etags(T.ls_json(pack)), "the manifest describes the pack in place")
    T.check(b"site b" in T.cat(pack, "/index.html"), "the later build's pack is in place")
    T.eq(sorted(f for f in os.listdir(outdir)),
         [".servd-pack-lock", "site.json", "site.lmdb"],
         "beside the outputs: only the lock file the builds take turns with")
    # A lock file that cannot be used (put there by someone else) is warned about,
    # and the build goes on without a turn, as builds did before there were turns.
    lock = os.path.join(outdir, ".servd-pack-lock")
    os.unlink(lock)
    os.mkfifo(lock)
    p = T.run(["build", roots[0], "-o", pack, "--manifest", manifest, "-q"])
    err = p.stderr.decode(errors="replace")
    T.eq(p.returncode, 0, "a FIFO as the lock file: exit status (%s)" % err)
    T.check(lock in err and "not a regular file" in err and "going on without one" in err,
            "a FIFO as the lock file: warning %r" % err)
    T.check(b"site a" in T.cat(pack, "/index.html"), "a FIFO as the lock file: the pack is built")
    os.unlink(lock)
    os.symlink(os.path.join(work, "elsewhere"), lock)
    p = T.run(["build", roots[1], "-o", pack, "--manifest", manifest, "-q"])
    err = p.stderr.decode(errors="replace")
    T.eq(p.returncode, 0, "a symbolic link as the lock file: exit status (%s)" % err)
    T.check(lock in err and "going on without one" in err,
            "a symbolic link as the lock file: warning %r" % err)
    T.check(not os.path.lexists(os.path.join(work, "elsewhere")), "no file made through the link")
    os.unlink(lock)
    # Made under a umask that keeps others out, the lock file is still readable by
    # every builder (each needs to open it to take a turn).
    old_umask = os.umask(0o077)
    try:
        T.build(roots[0], pack, "--manifest", manifest)
    finally:
        os.umask(old_umask)
    T.eq(stat.S_IMODE(os.stat(lock).st_mode) & 0o444, 0o444, "the lock file is readable by all")
    os.unlink(lock)
    # A lock file replaced while a build waits for it: the build locks the file now at
    # that name before going on, and waits for whoever holds that one. Here the test
    # holds both: the old file's lock until after the replacement, the new one's longer.
    T.build(roots[0], pack, "--manifest", manifest)  # makes the lock file
    old_fd = os.open(lock, os.O_RDWR)
    fcntl.flock(old_fd, fcntl.LOCK_EX)
    c_err = os.path.join(work, "c.stderr")
    with open(c_err, "wb") as f:
        c = subprocess.Popen([T.PACK, "build", roots[1], "-o", pack, "--manifest", manifest],
                             stderr=f)
    deadline = time.time() + 60
    while c.poll() is None and time.time() < deadline and b"waiting for another" not in read(c_err):
        time.sleep(0.01)
    T.check(c.poll() is None, "build C waits for the held lock (%s)" % read(c_err).decode())
    write(lock + ".new", b"")
    os.rename(lock + ".new", lock)
    new_fd = os.open(lock, os.O_RDWR)
    fcntl.flock(new_fd, fcntl.LOCK_EX)
    os.close(old_fd)
    time.sleep(1.0)
    T.check(c.poll() is None, "build C waits for the lock of the file now at the name (%s)" %
            read(c_err).decode())
    T.check(b"site a" in T.cat(pack, "/index.html"), "build C has not put its pack in place")
    os.close(new_fd)
    T.eq(c.wait(timeout=60), 0, "build C: exit status (%s)" % read(c_err).decode())
    T.check(b"site b" in T.cat(pack, "/index.html"), "build C's pack is in place")
    T.eq(read(c_err).count(b"waiting for another build"), 1, "build C says it waits once")
    os.unlink(lock)
    # Without --manifest there is nothing to pair, and no lock file.
    T.build(roots[0], pack)
    T.check(not os.path.exists(lock), "a build without a manifest makes no lock file")


if __name__ == "__main__":
    main()
