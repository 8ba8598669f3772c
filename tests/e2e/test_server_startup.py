#!/usr/bin/env python3
"""servd's command line and startup (servd(1)): a missing, empty, garbage, truncated,
wrong-version or not-a-pack file is refused with a message naming the file and exit 1;
usage errors exit 2; --help lists every option and exits 0; --version; a listen address
already taken is exit 1 with the address in the message; IPv6 and several --listen
addresses serve; --workers N serves from N loops; closed standard descriptors are not
reused for files."""
import hashlib
import os
import re
import shutil
import signal
import socket
import subprocess
import struct
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servdtest as st  # noqa: E402
from servdtest import eq, ok  # noqa: E402

# Startup refusals must come quickly: validation walks the pack once.
REFUSE_TIMEOUT = 20


def site():
    """A tiny web root with a few files (one large enough to span LMDB overflow pages)."""
    root = os.path.join(st.tmpdir(), "startup-site")
    if not os.path.isdir(root):
        os.makedirs(os.path.join(root, "docs"))
        with open(os.path.join(root, "index.html"), "w") as f:
            f.write("<html><body><h1>startup</h1></body></html>\n")
        with open(os.path.join(root, "docs", "index.html"), "w") as f:
            f.write("<p>docs</p>\n")
        with open(os.path.join(root, "big.txt"), "w") as f:
            f.write("".join("line %06d of a text file that compresses well\n" % i
                            for i in range(20000)))
    return root


def good_pack():
    p = os.path.join(st.tmpdir(), "startup.lmdb")
    if not os.path.exists(p):
        st.pack(site(), "startup.lmdb")
    return p


def run_servd(args, timeout=REFUSE_TIMEOUT):
    p = subprocess.run([st.SERVD] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       stdin=subprocess.DEVNULL, timeout=timeout)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def refused(path, what):
    """servd must refuse path at startup: exit 1, a message naming the file, no listening."""
    port = st.free_port()
    rc, out, err = run_servd(["--pack", path, "--listen", "127.0.0.1:%d" % port])
    eq(rc, 1, "%s: exit status (stderr: %s)" % (what, err.strip()))
    ok(path in err, "%s: the message does not name the file %s: %r" % (what, path, err))
    return err


def patched_copy(name, fn):
    src = good_pack()
    dst = os.path.join(st.tmpdir(), name)
    with open(src, "rb") as f:
        data = bytearray(f.read())
    fn(data)
    with open(dst, "wb") as f:
        f.write(data)
    return dst


def t_missing_pack():
    path = os.path.join(st.tmpdir(), "does-not-exist.lmdb")
    err = refused(path, "missing pack")
    ok("No such file" in err, "missing pack: the cause is not given: %r" % err)


def t_empty_and_directory():
    empty = os.path.join(st.tmpdir(), "empty.lmdb")
    open(empty, "wb").close()
    refused(empty, "empty file")
    d = os.path.join(st.tmpdir(), "a-directory.lmdb")
    os.makedirs(d, exist_ok=True)
    err = refused(d, "directory")
    # a web root given for its pack: the message says how a pack is made
    ok("servd-pack build DIR -o site.lmdb" in err, "directory: no hint: %r" % err)


def t_garbage_pack():
    path = os.path.join(st.tmpdir(), "garbage.lmdb")
    with open(path, "wb") as f:
        f.write(os.urandom(64 * 1024))
    err = refused(path, "random bytes")
    ok("not a servd pack" in err or "corrupt" in err, "garbage: cause %r" % err)


def t_truncated_pack():
    src = good_pack()
    size = os.path.getsize(src)
    for keep in (size // 2, size - 4096, 4096):
        path = patched_copy("truncated-%d.lmdb" % keep, lambda d, k=keep: d.__delitem__(
            slice(k, None)))
        err = refused(path, "pack cut to %d of %d bytes" % (keep, size))
        ok("truncated" in err or "corrupt" in err or "not a servd pack" in err,
           "truncated pack: cause %r" % err)


def t_wrong_major_version():
    def bump(data):
        i, n = 0, 0
        while True:
            i = data.find(b"SERVDPK1", i)
            if i < 0:
                break
            major = data[i + 8] | data[i + 9] << 8
            major += 1
            data[i + 8], data[i + 9] = major & 0xff, major >> 8
            i += 8
            n += 1
        ok(n >= 1, "the meta record magic SERVDPK1 was not found in the pack")
    path = patched_copy("wrong-version.lmdb", bump)
    err = refused(path, "pack with major version + 1")
    ok("version" in err, "wrong version: the message does not say so: %r" % err)


def t_entry_with_a_bad_body_refused():
    """Damage found only by walking every entry: a body of the wrong length, and a
    body that is not there. Both must be refused at startup, naming the path."""
    with open(os.path.join(site(), "big.txt"), "rb") as f:
        body = f.read()
    key = hashlib.sha256(body).digest()  # bodies are keyed by the SHA-256 of their bytes
    with open(good_pack(), "rb") as f:
        raw = f.read()
    # The variant descriptor holds body_len (u64 LE) right before the body key.
    want_len = struct.pack("<Q", len(body))
    at = [i for i in range(len(raw)) if raw.startswith(key, i) and raw[i - 8:i] == want_len]
    ok(len(at) >= 1, "the identity descriptor of /big.txt was not found in the pack")

    def wrong_length(d):
        for i in at:
            d[i - 8:i] = struct.pack("<Q", len(body) + 1)
    err = refused(patched_copy("bad-length.lmdb", wrong_length), "body of the wrong length")
    ok("/big.txt" in err and "length" in err, "wrong body length: message %r" % err)

    def missing(d):
        for i in at:
            d[i] ^= 0xFF
    missing_pack = patched_copy("missing-body.lmdb", missing)
    err = refused(missing_pack, "body missing")
    ok("/big.txt" in err and "missing" in err, "missing body: message %r" % err)
    # Started with SIGCHLD ignored (inherited across exec), children are reaped unseen:
    # the check's "exit 1" was read as "exit 0", and a pack whose damage only the check
    # finds (a changed byte in a body: its SHA-256) was served.
    def changed_byte(d):
        i = bytes(d).find(body[100:200])
        ok(i > 0, "the body of /big.txt is in the pack")
        d[i] ^= 0x01
    damaged = patched_copy("changed-body.lmdb", changed_byte)
    err = refused(damaged, "a changed byte in a body")
    ok("SHA-256" in err, "changed body: message %r" % err)
    p = subprocess.run([st.SERVD, "--pack", damaged, "--listen",
                        "127.0.0.1:%d" % st.free_port()], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, timeout=REFUSE_TIMEOUT,
                       preexec_fn=lambda: signal.signal(signal.SIGCHLD, signal.SIG_IGN))
    err = p.stderr.decode(errors="replace")
    eq(p.returncode, 1, "SIGCHLD ignored: exit status (%r)" % err)
    ok("SHA-256" in err, "SIGCHLD ignored: message %r" % err)


def crafted(name, *keys):
    """A pack servd-pack would never write (tests/fixtures/craft_pack.c): a file entry
    under keys[0] and, with two more, a redirect from keys[1] to keys[2]."""
    path = os.path.join(st.tmpdir(), name)
    subprocess.run([os.path.join(st.BUILD_DIR, "craft_pack"), path] + list(keys), check=True)
    return path


def t_untrusted_keys_and_targets_are_refused_and_shown_escaped():
    """A pack is untrusted input: a key that is not a normalised path is refused, and
    the message shows its bytes escaped, so a crafted key cannot forge a log line or
    drive a terminal. A redirect whose target is not a normalised path (another host,
    a header break) is refused at load, not answered with a 500 on every request."""
    err = refused(crafted("forged-key.lmdb", "/a\nservd: serving pack FORGED\x1b[31m.txt"),
                  "a key holding a newline and an escape")
    ok("/a\\x0aservd: serving pack FORGED\\x1b[31m.txt is not a normalised path" in err,
       "the key is not shown escaped: %r" % err)
    eq(len(err.strip().split("\n")), 1, "lines of the refusal (%r)" % err)
    for target in ("//evil.example/x", "/a\r\nSet-Cookie: x=1", "http://evil.example/",
                   "/../etc", "/a//b"):
        err = refused(crafted("bad-target.lmdb", "/a.txt", "/r", target), "redirect to %r" % target)
        ok("/r redirects to something that is not a normalised path" in err,
           "redirect to %r: message %r" % (target, err))
    # and a good one is served
    path = crafted("good-target.lmdb", "/a.txt", "/r", "/a.txt")
    with st.Servd(path) as s:
        r = st.get(s.port, "/r")
        eq(r.status, 301, "redirect status")
        eq(r.get("location"), "/a.txt", "redirect Location")


def t_not_a_servd_lmdb():
    if shutil.which("mdb_load") is None:
        raise st.Skip("mdb_load is not installed (Debian package lmdb-utils)")
    path = os.path.join(st.tmpdir(), "other.lmdb")
    if os.path.exists(path):
        os.unlink(path)
    dump = ("VERSION=3\nformat=bytevalue\ntype=btree\nHEADER=END\n"
            " 6b6579\n 76616c7565\nDATA=END\n")
    p = subprocess.run(["mdb_load", "-n", "-f", "/dev/stdin", path], input=dump.encode(),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    eq(p.returncode, 0, "mdb_load: %s" % p.stderr.decode())
    err = refused(path, "an LMDB file that is not a pack")
    ok("not a servd pack" in err, "plain LMDB file: cause %r" % err)


def t_usage_errors():
    pack = good_pack()
    cases = [
        (["--pack"], "--pack without a value"),
        (["--pack", pack, "--bogus"], "unknown option"),
        (["--pack", pack, "extra"], "extra argument"),
        ([pack], "a pack without --pack"),
        (["--pack", pack, "--workers", "0"], "--workers 0"),
        (["--pack", pack, "--workers", "many"], "--workers many"),
        (["--pack", pack, "--workers", "100000"], "--workers too many"),
        (["--pack", pack, "--workers", " 2"], "--workers with a space (as --idle-timeout ' 5')"),
        (["--pack", pack, "--max-conns", "+5"], "--max-conns with a sign"),
        (["--pack", pack, "--listen", "nonsense"], "--listen without a port"),
        (["--pack", pack, "--listen", "8089"], "--listen a port alone"),
        (["--pack", pack, "--listen", "::1:80"], "--listen IPv6 without brackets"),
        (["--pack", pack, "--listen", "127.0.0.1:99999"], "--listen port out of range"),
        (["--pack", pack, "--listen", "[::1]80"], "--listen bad brackets"),
        (["--pack", pack, "--listen", "300.1.2.3:80"], "--listen IPv4 out of range"),
        (["--pack", pack, "--listen", "[localhost]:80"], "--listen a name in brackets"),
        # the resolver's inet_aton() forms: 10.0.0.010 would bind 10.0.0.8
        (["--pack", pack, "--listen", "127.0.0.010:8089"], "--listen an octet with a leading 0"),
        (["--pack", pack, "--listen", "127.1:8089"], "--listen an IPv4 address of two parts"),
        (["--pack", pack, "--listen", "2130706433:8089"], "--listen an IPv4 address as a number"),
        (["--pack", pack, "--listen", "0x7f.0.0.1:8089"], "--listen a hexadecimal octet"),
        (["--pack", pack, "--admin", "0x7f000001:8089"], "--admin a hexadecimal address"),
        (["--pack", pack, "--listen", "127.0.0.1: 8089"], "--listen a port after a space"),
        (["--pack", pack, "--listen", "127.0.0.1:+8089"], "--listen a port with a sign"),
        (["--pack", pack, "--listen", "127.0.0.1:-0"], "--listen port -0"),
        (["--pack", pack, "--no-watch", "--watch-interval", "0.5"],
         "--no-watch with --watch-interval"),
        (["--pack", pack, "--listen", "servd-test.invalid:80", "--bogus"],
         "an unknown option after a name that does not resolve (looked up last)"),
        (["--pack", pack, "--admin", "127.0.0.1"], "--admin without a port"),
        (["--pack", pack, "--idle-timeout", "-1"], "negative timeout"),
        (["--pack", pack, "--header-timeout", "0"], "zero timeout"),
        (["--pack", pack, "--send-timeout", "soon"], "timeout not a number"),
        (["--pack", pack, "--max-conns", "0"], "--max-conns 0"),
        (["--pack", pack, "--idle-timeout", "0x10"], "hexadecimal timeout"),
        (["--pack", pack, "--idle-timeout", "1e3"], "timeout with an exponent"),
        (["--pack", pack, "--send-timeout", "."], "timeout without a digit"),
        (["--pack", pack, "--listen", "127.0.0.1:8089", "--listen", "127.0.0.1:8089"],
         "the same --listen twice (SO_REUSEPORT would bind it twice)"),
        (["--pack", pack, "--listen", "[::1]:8089", "--listen", "[::1]:8089"],
         "the same IPv6 --listen twice"),
        (["--pack", pack, "--listen", "127.0.0.1:8089", "--admin", "127.0.0.1:8089"],
         "--admin on a --listen address"),
        (["--pack", pack, "--listen", "127.0.0.1:8089", "--admin", "0.0.0.0:8089"],
         "--admin on the wildcard of a --listen port"),
        (["--pack", pack, "--watch-interval", "-1"], "--watch-interval -1"),
        (["--pack", pack, "--pack", pack], "--pack twice"),
        (["--pack", pack, "--admin", "127.0.0.1:8091", "--admin", "127.0.0.1:8092"],
         "--admin twice"),
        (["--pack", pack, "--access-log", "/dev/null", "--access-log", "/dev/null"],
         "--access-log twice"),
        (["--pack", pack, "--user", "root", "--user", "root"], "--user twice"),
        (["--pack", pack, "--workers", "1", "--workers", "2"], "--workers twice"),
        (["--pack", pack, "-w1", "--workers=1"], "-w and --workers"),
        (["--pack", pack, "--idle-timeout", "5", "--idle-timeout", "6"], "--idle-timeout twice"),
        (["--pack", pack, "--max-conns", "5", "--max-conns", "6"], "--max-conns twice"),
        (["--pack", pack, "--watch-interval", "1", "--watch-interval", "0"],
         "--watch-interval twice"),
        (["--pack", pack, "--real-ip-header", "X-Real-IP", "--real-ip-header", "X-Real-IP",
          "--real-ip-from", "10.0.0.0/8", "--access-log", "/dev/null"], "--real-ip-header twice"),
    ]
    for args, what in cases:
        rc, out, err = run_servd(args)
        eq(rc, 2, "%s: exit status (stderr %r)" % (what, err))
        ok(err.startswith("servd: "), "%s: the message does not start with 'servd: ': %r"
           % (what, err))
        ok("--help" in err, "%s: no pointer to --help: %r" % (what, err))
    rc, out, err = run_servd([pack])
    ok("(the pack is given with --pack FILE)" in err, "a pack without --pack: no hint: %r" % err)
    # a port alone (nginx's "listen 8089"): the message says how to write every address
    rc, out, err = run_servd(["--pack", pack, "--listen", "8089"])
    ok("'8089': expected HOST:PORT (:8089 for every IPv4 address)" in err,
       "--listen a port alone: no hint: %r" % err)
    # an option with one value, given twice: named by its long name, whatever the spelling
    # ("--workers 4 -w 1" took 1 before 2026-12-06)
    rc, out, err = run_servd(["--pack", pack, "--workers=2", "-w", "1"])
    ok(err.startswith("servd: --workers is given twice\n"), "-w after --workers: %r" % err)
    # a value given to an option that takes none is not an unknown option
    rc, out, err = run_servd(["--pack", pack, "--spa=1"])
    eq(rc, 2, "--spa=1: exit status")
    ok(err.startswith("servd: option '--spa' takes no value\n"), "--spa=1: %r" % err)
    rc, out, err = run_servd(["--pack", pack, "--bogus=1"])
    ok(err.startswith("servd: unknown option '--bogus=1'\n"), "--bogus=1: %r" % err)
    # an abbreviation of one option is that option; of several, it says which
    rc, out, err = run_servd(["--pack", pack, "--work", "0"])
    ok(err.startswith("servd: --workers "), "--work: %r" % err)
    for arg in ("--w", "--real-ip=X-Real-IP"):
        rc, out, err = run_servd(["--pack", pack, arg])
        eq(rc, 2, "%s: exit status" % arg)
        name = arg.split("=")[0]
        ok(err.startswith("servd: option '%s' is ambiguous: " % name) and
           all("--" + o in err.splitlines()[0] for o in (
               ("workers", "watch-interval") if name == "--w" else
               ("real-ip-header", "real-ip-from"))), "%s: %r" % (arg, err))
    # an empty value ("--pack=$PACK" with PACK unset) is a usage error, not a file
    # named "" ("refusing to start: : No such file or directory", exit 1)
    for opt, what in (("--pack", "a file name"), ("--access-log", "a file name"),
                      ("--user", "a user name")):
        rc, out, err = run_servd([opt + "="] + (["--pack", pack] if opt != "--pack" else []))
        eq(rc, 2, "%s=: exit status (stderr %r)" % (opt, err))
        ok(err.startswith("servd: %s '': expected %s\n" % (opt, what)), "%s=: %r" % (opt, err))
    for args in (["--pack=" + pack, "-xV"], ["--spa", "-xV"]):  # a letter in a cluster
        rc, out, err = run_servd(args)
        ok(err.startswith("servd: unknown option '-x'\n"), "%s: %r" % (args, err))


def t_help_and_version():
    rc, out, err = run_servd(["--help"])
    eq(rc, 0, "--help exit status")
    for opt in ("--pack", "--listen", "--workers", "--admin", "--access-log", "--spa",
                "--idle-timeout", "--header-timeout", "--send-timeout", "--shutdown-timeout",
                "--max-conns", "--help", "--version", "SIGHUP", "SIGUSR1", "SIGTERM"):
        ok(opt in out, "--help does not mention %s" % opt)
    rc, out, err = run_servd(["-h"])
    eq(rc, 0, "-h exit status")
    rc, out, err = run_servd(["--version"])
    eq(rc, 0, "--version exit status")
    ok(out.startswith("servd ") and any(ch.isdigit() for ch in out), "--version: %r" % out)
    if os.path.exists("/dev/full"):  # output that cannot be written is a failure
        for opt in ("--help", "--version"):
            with open("/dev/full", "wb") as full:
                p = subprocess.run([st.SERVD, opt], stdout=full, stderr=subprocess.PIPE,
                                   timeout=REFUSE_TIMEOUT)
            eq(p.returncode, 1, "%s >/dev/full: exit status" % opt)
            ok(b"writing to standard output" in p.stderr, "%s >/dev/full: %r" % (opt, p.stderr))


def t_a_privileged_port_without_the_right_says_how():
    """An unprivileged servd asked for a port below 1024 fails with EACCES, and the
    message names the ways to get the port (servd(1), PRIVILEGES)."""
    with open("/proc/sys/net/ipv4/ip_unprivileged_port_start") as f:
        start = int(f.read())
    if os.geteuid() != 0 or start <= 81:
        raise st.Skip("not root, or ports below 1024 are open to all here")
    d = tempfile.mkdtemp(prefix="servd-nobody-")  # st.tmpdir() is closed to nobody
    os.chmod(d, 0o755)
    pack = os.path.join(d, "site.lmdb")
    with open(good_pack(), "rb") as f, open(pack, "wb") as g:
        g.write(f.read())
    os.chmod(pack, 0o644)

    def as_nobody():
        os.setgroups([])
        os.setgid(65534)
        os.setuid(65534)
    try:
        p = subprocess.run([st.SERVD, "--pack", pack, "--listen", "127.0.0.1:81"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           stdin=subprocess.DEVNULL, timeout=REFUSE_TIMEOUT, preexec_fn=as_nobody)
    finally:
        shutil.rmtree(d)
    err = p.stderr.decode(errors="replace")
    eq(p.returncode, 1, "a port below 1024 as nobody: exit status (stderr %r)" % err)
    ok("Permission denied" in err and "CAP_NET_BIND_SERVICE" in err and "--user" in err,
       "a port below 1024 as nobody: message %r" % err)


def t_address_in_use():
    holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    holder.bind(("127.0.0.1", 0))
    holder.listen(1)
    port = holder.getsockname()[1]
    try:
        rc, out, err = run_servd(["--pack", good_pack(), "--listen", "127.0.0.1:%d" % port])
        eq(rc, 1, "listen address taken: exit status (stderr %r)" % err)
        ok("127.0.0.1:%d" % port in err and "in use" in err,
           "listen address taken: message %r" % err)
    finally:
        holder.close()


def t_a_listen_name_that_does_not_resolve_is_exit_1():
    """A host name the resolver cannot find is a start that fails (1, like an address
    that cannot be bound), not a usage error (2): the command line may be right and the
    resolver down, and a service manager restarts on 1. The .invalid TLD never resolves
    (RFC 6761 section 6.4)."""
    for opt in ("--listen", "--admin"):
        rc, out, err = run_servd(["--pack", good_pack(), opt, "servd-test.invalid:8089"],
                                 timeout=60)
        eq(rc, 1, "%s an unknown name: exit status (stderr %r)" % (opt, err))
        ok(err.startswith("servd: ") and "servd-test.invalid:8089" in err
           and "resolve" in err, "%s an unknown name: message %r" % (opt, err))
        ok("--help" not in err, "%s an unknown name: called a usage error: %r" % (opt, err))
        eq(err.count("\n"), 1, "%s an unknown name: one line: %r" % (opt, err))


def t_a_newline_in_the_pack_path_stays_in_one_line():
    """Each message is one line (servd(1) DIAGNOSTICS), whatever bytes the file names it
    quotes hold: a newline could forge a second message, an escape drive the terminal."""
    d = st.tmpdir()
    bad = os.path.join(d, "not\na pack\x1b[31m.lmdb")
    with open(bad, "wb") as f:
        f.write(b"x" * 100)
    rc, out, err = run_servd(["--pack", bad, "--listen", "127.0.0.1:0"])
    eq(rc, 1, "a refused pack: exit status (stderr %r)" % err)
    eq(err.count("\n"), 1, "a refused pack with a newline in its name: one line: %r" % err)
    ok("not\\x0aa pack\\x1b[31m.lmdb" in err, "the name is not escaped: %r" % err)
    good = os.path.join(d, "a\nserved pack.lmdb")
    shutil.copyfile(good_pack(), good)
    p = subprocess.Popen([st.SERVD, "--pack", good, "--listen", "127.0.0.1:0"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        line = p.stderr.readline().decode(errors="replace")
        ok("a\\x0aserved pack.lmdb" in line and line.endswith("\n"),
           "a served pack's first message: %r" % line)
    finally:
        p.send_signal(signal.SIGTERM)
        rest = p.communicate(timeout=20)[1].decode(errors="replace")
    eq(p.returncode, 0, "exit status after SIGTERM: %r" % rest)
    for l in rest.splitlines():
        ok(l.startswith("servd: "), "a line that is not servd's: %r in %r" % (l, rest))


def t_a_worker_that_cannot_start_is_exit_1():
    """A thread limit that lets worker 0 start but not a later one: the started workers
    stop, and servd exits 1 ("could not be set up"), so Restart=on-failure restarts it."""
    env = st.preload_env(os.path.join(st.BUILD_DIR, "swap_open.so"))
    seen = set()
    # Fail the 1st, 2nd, ... thread servd starts until one is not a worker's (servd then
    # runs): which call is worker 1's depends on the threads started before it.
    for n in range(1, 8):
        env["FAIL_THREAD"] = str(n)
        p = subprocess.Popen([st.SERVD, "--pack", good_pack(), "--listen",
                              "127.0.0.1:%d" % st.free_port(), "--workers", "3"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             stdin=subprocess.DEVNULL, env=env)
        try:
            _, err = p.communicate(timeout=REFUSE_TIMEOUT if n == 1 else 5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            break
        err = err.decode(errors="replace")
        m = re.search(r"cannot start worker (\d+)", err)
        ok(m is not None, "FAIL_THREAD=%d: exited %d without naming a worker: %r"
           % (n, p.returncode, err))
        seen.add(int(m.group(1)))
        eq(p.returncode, 1, "FAIL_THREAD=%d: exit status (stderr %r)" % (n, err))
        ok("listening on" not in err, "FAIL_THREAD=%d: says it listens: %r" % (n, err))
    ok({1, 2} <= seen, "worker 1 and worker 2 were each made to fail (saw %s)" % sorted(seen))


def running(pid):
    """Whether pid exists and has not exited (a zombie has)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def t_a_stop_while_the_pack_is_checked_ends_servd_and_the_check():
    """A stop signal while servd checks the pack at startup (seconds, for a large pack):
    servd died by the signal's default action (status 143, not the 0 of a stop, and
    nothing said), and its check child went on reading the pack as an orphan. Now servd
    says so and exits 0, and the check dies with it. The check is held back here by a
    slow first read of the pack (swap_open.so)."""
    for sig, name in ((signal.SIGTERM, "SIGTERM"), (signal.SIGINT, "SIGINT")):
        env = st.preload_env(os.path.join(st.BUILD_DIR, "swap_open.so"),
                             SLOW_READ="startup.lmdb", SLOW_READ_MS="20000",
                             SLOW_READ_IN_CHECK="1")  # servd reads the pack's head first
        p = subprocess.Popen([st.SERVD, "--pack", good_pack(), "--listen",
                              "127.0.0.1:%d" % st.free_port()],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             stdin=subprocess.DEVNULL, env=env)
        try:
            t0, kids = time.time(), []
            while not kids and time.time() - t0 < 10:
                time.sleep(0.05)
                kids = st.check_children(p.pid)
            ok(kids, "%s: no check child of servd found" % name)
            time.sleep(0.2)
            p.send_signal(sig)
            try:
                _, err = p.communicate(timeout=10)
            except subprocess.TimeoutExpired:  # the check child holds the stderr pipe
                raise st.Fail("%s: servd, or an orphaned check child, still runs 10 s after "
                              "the signal" % name)
        finally:
            if p.poll() is None:
                p.kill()
                p.communicate()
        err = err.decode(errors="replace")
        eq(p.returncode, 0, "%s during the check: exit status (stderr %r)" % (name, err))
        ok("%s while starting: stopped before serving" % name in err, "%s: said: %r" % (name, err))
        t0 = time.time()
        while any(running(k) for k in kids) and time.time() - t0 < 5:
            time.sleep(0.05)
        ok(not any(running(k) for k in kids), "%s: the check child outlived servd" % name)


def t_no_proc_fd_is_named():
    """Without /proc (a bare chroot or container), the pack opened once cannot be checked
    through /proc/self/fd/N: servd must say so, not "No such file" about a pack that is
    there."""
    env = st.preload_env(os.path.join(st.BUILD_DIR, "swap_open.so"), HIDE_PROC_FD="1")
    p = subprocess.run([st.SERVD, "--pack", good_pack(), "--listen",
                        "127.0.0.1:%d" % st.free_port()], stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env,
                       timeout=REFUSE_TIMEOUT)
    err = p.stderr.decode(errors="replace")
    eq(p.returncode, 1, "without /proc/self/fd: exit status (stderr %r)" % err)
    ok(good_pack() in err and "is /proc mounted?" in err and "No such file" not in err,
       "without /proc/self/fd: message %r" % err)


def t_closed_standard_descriptors():
    """Started as `servd <&- >&- 2>&-`, servd must not let the access log (or the pack, or
    a socket) take descriptor 2: its own messages would be written into the log."""
    port = st.free_port()
    log = os.path.join(st.tmpdir(), "closed-fds.log")
    if os.path.exists(log):
        os.unlink(log)

    def close_std():
        for fd in (0, 1, 2):
            os.close(fd)

    p = subprocess.Popen([st.SERVD, "--pack", good_pack(), "--listen", "127.0.0.1:%d" % port,
                          "--access-log", log], preexec_fn=close_std)
    try:
        deadline = time.time() + REFUSE_TIMEOUT
        while time.time() < deadline:
            try:
                eq(st.get(port, "/").status, 200, "served")
                break
            except OSError:
                time.sleep(0.05)
        for fd in (0, 1, 2):
            eq(os.readlink("/proc/%d/fd/%d" % (p.pid, fd)), "/dev/null", "descriptor %d" % fd)
        p.send_signal(signal.SIGHUP)  # says "nothing to reload" on stderr
        time.sleep(0.5)
    finally:
        p.send_signal(signal.SIGTERM)
        eq(p.wait(timeout=20), 0, "exit status")
    with open(log, "rb") as f:
        lines = f.read().splitlines()
    eq(len(lines), 1, "the access log holds the one request's line: %r" % lines)
    ok(b"servd:" not in b"".join(lines), "no message in the access log: %r" % lines)


def t_descriptor_limit_far_below_max_conns_is_warned():
    """A hard RLIMIT_NOFILE that leaves room for much less than --max-conns x workers is
    said at startup (servd(1) --max-conns), and servd still serves."""
    import resource

    def limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (200, 200))

    for max_conns, warned in (("100", True), ("50", False)):
        port = st.free_port()
        errpath = os.path.join(st.tmpdir(), "fdlimit.err")
        with open(errpath, "wb") as errf:
            p = subprocess.Popen([st.SERVD, "--pack", good_pack(), "--listen",
                                  "127.0.0.1:%d" % port, "--workers", "2", "--max-conns",
                                  max_conns], stdin=subprocess.DEVNULL, stdout=errf, stderr=errf,
                                 preexec_fn=limit)
        try:
            deadline = time.time() + REFUSE_TIMEOUT
            while time.time() < deadline and b"listening on" not in open(errpath, "rb").read():
                time.sleep(0.05)
            eq(st.get(port, "/").status, 200, "--max-conns %s: served" % max_conns)
        finally:
            p.send_signal(signal.SIGTERM)
            eq(p.wait(timeout=20), 0, "exit status")
        err = open(errpath, "rb").read().decode()
        if warned:
            ok("the descriptor limit (200) leaves room for about 120 connections, not the 200"
               in err, "--max-conns 100, 2 workers, limit 200: warned: %r" % err)
        else:
            ok("descriptor limit" not in err, "--max-conns 50: room for all: %r" % err)


def t_every_descriptor_limit_serves_or_exits_1():
    """Under any hard RLIMIT_NOFILE, however low, servd either starts and serves or exits
    1 with a message naming what it could not open: never a crash. libuv aborted the
    process when its first loop could not make its signal pipe (limits 8 and 9 here)."""
    import resource
    log = os.path.join(st.tmpdir(), "fdlimits.log")
    outcomes = {}
    for n in range(4, 41):
        def limit():
            resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))
        port, adm = st.free_port(), st.free_port()
        errpath = os.path.join(st.tmpdir(), "fdlimits.err")
        with open(errpath, "wb") as errf:
            p = subprocess.Popen([st.SERVD, "--pack", good_pack(), "--listen",
                                  "127.0.0.1:%d" % port, "--workers", "2", "--max-conns", "4",
                                  "--admin", "127.0.0.1:%d" % adm, "--access-log", log],
                                 stdin=subprocess.DEVNULL, stdout=errf, stderr=errf,
                                 preexec_fn=limit)
        try:
            deadline = time.time() + REFUSE_TIMEOUT
            while (time.time() < deadline and p.poll() is None
                   and b"listening on" not in open(errpath, "rb").read()):
                time.sleep(0.02)
            if p.poll() is None:
                eq(st.get(port, "/").status, 200, "limit %d: served" % n)
                p.send_signal(signal.SIGTERM)
                eq(p.wait(timeout=20), 0, "limit %d: exit status after SIGTERM" % n)
                outcomes[n] = "served"
            else:
                err = open(errpath, "rb").read().decode(errors="replace")
                eq(p.returncode, 1, "limit %d: exit status (stderr %r)" % (n, err))
                ok(re.search(r"(?i)too many open files", err) is not None,
                   "limit %d: the message names the cause: %r" % (n, err))
                outcomes[n] = "exit 1"
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
    ok(outcomes[4] == "exit 1" and outcomes[40] == "served",
       "the lowest limit refused, the highest served: %s" % outcomes)


def t_a_second_servd_on_the_same_port_is_refused():
    """SO_REUSEPORT would let a second servd of the same user share the port (and the
    connections); it must be refused like any other taken address."""
    with st.Servd(good_pack(), workers=2) as first:
        for host in ("127.0.0.1", "0.0.0.0"):
            rc, out, err = run_servd(["--pack", good_pack(), "--listen",
                                      "%s:%d" % (host, first.port)])
            eq(rc, 1, "second servd on %s:%d: exit status (stderr %r)" % (host, first.port, err))
            ok("a server listening there" in err, "the message says why: %r" % err)
        eq(st.get(first.port, "/").status, 200, "the first servd still serves")


def ipv6_loopback():
    try:
        s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        s.bind(("::1", 0))
        s.close()
        return True
    except OSError:
        return False


def fetch(family, host, port, path="/"):
    s = socket.socket(family, socket.SOCK_STREAM)
    s.settimeout(st.IO_TIMEOUT)
    s.connect((host, port))
    s.sendall(st.req("GET", path, version="HTTP/1.0"))
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    return data


def t_port_zero_prints_the_ports_taken():
    """--listen and --admin with port 0: the startup line names the ports actually
    bound, so a harness can find both."""
    with st.Servd(good_pack(), extra=["--admin", "127.0.0.1:0"]) as s:
        m = re.search(r"admin on 127\.0\.0\.1:(\d+)", s.read_log())
        ok(m is not None, "startup message names the admin address: %r" % s.read_log())
        port = int(m.group(1))
        ok(port != 0, "the admin port printed is the one taken, not 0")
        data = fetch(socket.AF_INET, "127.0.0.1", port, "/healthz")
        ok(data.startswith(b"HTTP/1.1 200 "), "/healthz on the printed admin port: %r" % data[:60])


def t_several_listen_addresses_and_ipv6():
    with open(os.path.join(site(), "index.html"), "rb") as f:
        want = f.read()
    p4 = st.free_port()
    extra = ["--listen", "127.0.0.1:%d" % p4]
    v6 = ipv6_loopback()
    if v6:
        s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        s.bind(("::1", 0))
        p6 = s.getsockname()[1]
        s.close()
        extra += ["--listen", "[::1]:%d" % p6]
    else:
        print("  (no IPv6 loopback: IPv6 part skipped)")
    with st.Servd(good_pack(), workers=2, extra=extra) as s:
        for port in (s.port, p4):
            data = fetch(socket.AF_INET, "127.0.0.1", port)
            ok(data.startswith(b"HTTP/1.1 200 "), "IPv4 :%d: %r" % (port, data[:60]))
            ok(data.endswith(want), "IPv4 :%d: body" % port)
        if v6:
            data = fetch(socket.AF_INET6, "::1", p6)
            ok(data.startswith(b"HTTP/1.1 200 "), "IPv6 [::1]:%d: %r" % (p6, data[:60]))
            ok(data.endswith(want), "IPv6: body")
        ok("listening on" in s.read_log(), "startup message: %r" % s.read_log())


def t_listen_addresses_up_to_the_limit():
    """--listen is repeatable up to 16 addresses (SV_MAX_LISTEN): 16 are all served, a
    17th is a usage error that says the limit, before anything is bound."""
    with open(os.path.join(site(), "index.html"), "rb") as f:
        want = f.read()
    for attempt in range(3):
        # Servd retries a lost port race on its own port only: here on all 16
        ports = [st.free_port() for _ in range(15)]
        extra = []
        for p in ports:
            extra += ["--listen", "127.0.0.1:%d" % p]
        try:
            with st.Servd(good_pack(), extra=extra) as s:
                for port in [s.port] + ports:
                    data = fetch(socket.AF_INET, "127.0.0.1", port)
                    ok(data.startswith(b"HTTP/1.1 200 ") and data.endswith(want),
                       "--listen :%d of 16: %r" % (port, data[:60]))
            break
        except st.Fail as e:
            if "in use" not in str(e).lower() or attempt == 2:
                raise
    extra += ["--listen", "127.0.0.1:%d" % st.free_port(), "--listen",
              "127.0.0.1:%d" % st.free_port()]
    rc, out, err = run_servd(["--pack", good_pack()] + extra)
    eq(rc, 2, "17 --listen: exit status (stderr %r)" % err)
    ok(err.startswith("servd: too many --listen addresses (at most 16)\n") and "--help" in err,
       "17 --listen: message %r" % err)


def t_a_pack_path_without_a_symlink_names_no_link_target():
    """The startup line adds " (-> FILE)" only when the path leads to the file through a
    symbolic link (a release flip). A path written with "./", "//" or "dir/.." names the
    file itself: nothing to add. link_target() compared the file's name with the path
    made absolute but not normalised, and claimed a link for each of these."""
    gp = os.path.realpath(good_pack())  # servd names the file as the kernel resolves it
    d, name = os.path.split(gp)
    sub = os.path.join(d, "startup-sub")
    os.makedirs(sub, exist_ok=True)
    for arg, cwd in (("./" + name, d), (name, d), ("startup-sub/../" + name, d),
                     (d + "//" + name, None), (d + "/./" + name, None)):
        with st.Servd(arg, cwd=cwd) as s:
            eq(st.get(s.port, "/").status, 200, "served from %r" % arg)
            line = [l for l in s.read_log().splitlines() if "serving pack" in l]
            eq(len(line), 1, "startup line for %r: %r" % (arg, s.read_log()))
            ok(line[0].endswith(" from %s" % arg), "--pack %r: %r" % (arg, line[0]))
    # a symlink is still named with the file it leads to
    link = os.path.join(d, "startup-link.lmdb")
    if not os.path.lexists(link):
        os.symlink(name, link)
    with st.Servd(link) as s:
        ok(" from %s (-> %s)" % (link, gp) in s.read_log(), "a symlink: %r" % s.read_log())


def t_many_workers_all_serve():
    """With --workers 3 each loop has its own SO_REUSEPORT socket; the kernel spreads
    connections over them. 60 fresh connections must all be answered."""
    with open(os.path.join(site(), "index.html"), "rb") as f:
        want = f.read()
    with st.Servd(good_pack(), workers=3) as s:
        for i in range(60):
            r = st.get(s.port, "/")
            eq((r.status, r.body), (200, want), "connection %d" % i)


def t_default_workers_follow_the_cpu_affinity():
    """Without --workers, one worker per CPU servd may run on (servd(1): its affinity, as
    taskset sets it), and --workers takes 1 to 256."""
    cpus = sorted(os.sched_getaffinity(0))
    for allowed in ([cpus[0]], cpus):
        port, adm = st.free_port(), st.free_port()
        p = subprocess.Popen([st.SERVD, "--pack", good_pack(), "--listen", "127.0.0.1:%d" % port,
                              "--admin", "127.0.0.1:%d" % adm], stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                             preexec_fn=lambda: os.sched_setaffinity(0, allowed))
        try:
            m = st.wait_metrics(adm, lambda m: "servd_workers" in m, REFUSE_TIMEOUT)
            eq(m["servd_workers"], float(len(allowed)), "workers on CPUs %s" % allowed)
            eq(st.get(port, "/").status, 200, "served on CPUs %s" % allowed)
        finally:
            p.send_signal(signal.SIGTERM)
            err = p.communicate(timeout=30)[1].decode(errors="replace")
        eq(p.returncode, 0, "exit status after SIGTERM on CPUs %s: %r" % (allowed, err))
        n = len(allowed)
        ok("with %d worker%s" % (n, "" if n == 1 else "s") in err,
           "the start-up line names %d worker(s): %r" % (n, err))
    for n, code in (("256", None), ("257", 2), ("0", 2)):
        if code is None:
            with st.Servd(good_pack(), workers=int(n)) as s:
                eq(st.get(s.port, "/").status, 200, "--workers %s serves" % n)
        else:
            rc, out, err = run_servd(["--pack", good_pack(), "--workers", n])
            eq(rc, code, "--workers %s: exit status (%r)" % (n, err))


if __name__ == "__main__":
    st.run(st.collect(globals()))
