#!/usr/bin/env python3
"""The --pack watch (servd(1) "PACK SWAPS", docs/architecture.md "A swap, step by step"):
a rename over the path, a symlink flip, and a rename over the symlink's target each reload
the pack without any signal; a burst of renames is read once; a bad pack arriving by the
watch is refused, logged, counted once and never retried until the path changes again; a
SIGHUP right after a rename loads the file once, not twice; a flip the directory watch
cannot see (a directory symlink higher up) is caught by the stat fallback, and not without
it; --no-watch leaves reloading to SIGHUP; 40 swaps by every method leave one pack mapped
and memory flat."""
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hardtest as ht  # noqa: E402
import servdtest as st  # noqa: E402
import swaptest as sw  # noqa: E402
from servdtest import eq, ok  # noqa: E402

# How long a change may take to be served: the settle delay is 75 ms; generous for
# sanitizer builds on a loaded CI machine.
RELOAD_LIMIT = 5.0
# How long to wait before concluding that something did NOT happen.
QUIET = 1.5


def fetch(port, path="/"):
    """A response, or None when the connection was cut (acceptable while a pack is cut)."""
    try:
        return st.get(port, path)
    except (OSError, st.Fail):
        return None


def wait_body(port, want, what, each=None):
    """Polls / until it answers want (RELOAD_LIMIT at most); each(response) checks every
    other answer on the way."""
    t0 = time.time()
    while time.time() - t0 < RELOAD_LIMIT:
        r = fetch(port)
        if r and r.body == want:
            return
        if each:
            each(r)
        time.sleep(0.05)
    eq(st.get(port, "/").body, want, what)


def own_servd(name, pack, workers=1, interval="0.2"):
    """A servd of its own on a fresh live path holding pack, polled every interval (None:
    --no-watch), with an admin port: (live, admin port, the Servd to enter)."""
    live = sw.Live(name)
    live.rename_in(pack)
    adm = st.free_port()
    watch = ["--no-watch"] if interval is None else ["--watch-interval", interval]
    return live, adm, st.Servd(live.path, workers=workers, extra=watch + [
        "--admin", "127.0.0.1:%d" % adm])


class Site:
    def __init__(self):
        self.v = sw.Versions(3, tag="watch")
        self.live = sw.Live("watch-live")
        self.live.rename_in(self.v.packs[0])
        self.adm = st.free_port()
        # Without the stat fallback (--watch-interval 0): every reload these tests wait
        # for must come from the inotify watch, which the fallback would otherwise stand in
        # for within its 2 s (t_directory_symlink_flip_needs_the_stat_fallback tests it).
        self.servd = st.Servd(self.live.path, workers=2, extra=[
            "--admin", "127.0.0.1:%d" % self.adm, "--watch-interval", "0"]).start()
        self.pid = self.servd.proc.pid

    def index(self):
        return st.get(self.servd.port, "/").body

    def wait_version(self, ver, what, limit=RELOAD_LIMIT):
        want = self.v.index(ver)
        t0 = time.time()
        while time.time() - t0 < limit:
            if self.index() == want:
                return time.time() - t0
            time.sleep(0.02)
        raise st.Fail("%s: still serving %r after %.0f s, want version %d\nlog: %s" % (
            what, self.index()[:40], limit, ver, self.servd.read_log()[-1500:]))

    def m(self, name):
        return sw.metrics(self.adm).get(name, 0)


def t_rename_over_the_path_reloads(s):
    swaps0 = s.m("servd_pack_swaps_total")
    s.live.rename_in(s.v.packs[1])
    took = s.wait_version(2, "mv -T v2 over the path")
    print("  rename seen in %.0f ms" % (took * 1000))
    eq(sw.wait_metric(s.adm, "servd_pack_swaps_total", swaps0 + 1), swaps0 + 1, "swaps counted")
    ok("pack changed: now serving pack" in s.servd.read_log(), "the reload is logged")


def t_symlink_flip_reloads(s):
    s.live.flip(s.v.packs[0], "v1.lmdb")
    s.wait_version(1, "flip to releases/v1.lmdb")
    s.live.flip(s.v.packs[2], "v3.lmdb")
    s.wait_version(3, "flip to releases/v3.lmdb")
    s.live.flip(s.v.packs[0], "v1.lmdb")
    s.wait_version(1, "flip back to releases/v1.lmdb (rollback)")


def t_rename_over_the_symlink_target_reloads(s):
    s.live.rename_in(s.v.packs[0])
    s.wait_version(1, "setup")
    # a flip to a version not served, so that its load is over before the target changes
    swaps0 = s.m("servd_pack_swaps_total")
    s.live.flip(s.v.packs[2], "current.lmdb")
    s.wait_version(3, "flip to releases/current.lmdb")
    eq(sw.wait_metric(s.adm, "servd_pack_swaps_total", swaps0 + 1), swaps0 + 1, "the flip loaded")
    time.sleep(0.3)  # past the settle delay of the flip's events
    s.live.replace_target(s.v.packs[1], "current.lmdb")
    s.wait_version(2, "releases/current.lmdb replaced by a rename")


def t_a_burst_of_renames_is_read_once(s):
    # Within the settle delay (75 ms) the missing path must not be looked at; a test
    # descheduled between the two renames for longer leaves it missing for real, and
    # then tries again (a loaded host), up to three bursts.
    for attempt in range(3):
        s.live.rename_in(s.v.packs[0])
        s.wait_version(1, "setup")
        time.sleep(0.3)
        swaps0, fails0 = s.m("servd_pack_swaps_total"), s.m("servd_pack_swap_failures_total")
        log0 = len(s.servd.read_log())
        # mv site.lmdb prev.lmdb; mv new.lmdb site.lmdb - the path is missing in between.
        tmp = os.path.join(s.live.dir, "next.lmdb")
        st_copy(s.v.packs[2], tmp)
        t0 = time.monotonic()
        os.rename(s.live.path, os.path.join(s.live.dir, "prev.lmdb"))
        os.rename(tmp, s.live.path)
        gap = time.monotonic() - t0
        s.wait_version(3, "after the burst")
        time.sleep(0.3)
        eq(s.m("servd_pack_swaps_total"), swaps0 + 1, "swaps for one burst of two renames")
        eq(s.m("servd_pack_swap_failures_total"), fails0, "refusals during the burst")
        if gap < 0.07:
            ok("No such file" not in s.servd.read_log()[log0:],
               "the half-done burst was looked at: %r" % s.servd.read_log()[log0:])
            return
        print("  NOTE the two renames were %.0f ms apart: once more" % (gap * 1000),
              flush=True)
    raise st.Skip("three bursts whose two renames were more than 70 ms apart: the "
                  "missing-path check could not run")


def st_copy(src, dst):
    with open(src, "rb") as f, open(dst, "wb") as g:
        g.write(f.read())


def t_bad_pack_by_watch_is_refused_once(s):
    s.live.rename_in(s.v.packs[1])
    s.wait_version(2, "setup")
    time.sleep(0.3)
    pid0 = sw.pack_id(s.adm)
    fails0 = s.m("servd_pack_swap_failures_total")
    with open(s.v.packs[0], "rb") as f:
        good = f.read()
    cases = [("garbage", os.urandom(50000)), ("truncated", good[:len(good) // 3]),
             ("empty", b"")]
    for n, (what, data) in enumerate(cases, 1):
        s.live.write_bytes(data)
        got = sw.wait_metric(s.adm, "servd_pack_swap_failures_total", fails0 + n)
        eq(got, fails0 + n, "%s: refusals counted" % what)
        eq(s.index(), s.v.index(2), "%s: the current pack keeps serving" % what)
        eq(sw.pack_id(s.adm), pid0, "%s: /healthz pack id" % what)
    # The refused file is not looked at again: no new refusal over several poll periods.
    time.sleep(QUIET)
    eq(s.m("servd_pack_swap_failures_total"), fails0 + len(cases), "refusals of one file")
    log = s.servd.read_log()
    ok("pack changed: refused" in log and s.live.path in log,
       "refusals are logged naming the file: %r" % log[-600:])
    s.live.rename_in(s.v.packs[2])
    s.wait_version(3, "a good pack after the bad ones")


def t_a_refused_file_that_changes_is_looked_at_again(s):
    # The watch once remembered a refused file by its inode number alone, so a good pack
    # that got the same number (ext4 hands a freed one to the next file: rm bad; cp good
    # n; mv -T n site.lmdb) was never loaded. Rewriting the refused file in place keeps
    # its number for certain, whatever the file system.
    live, adm, servd = own_servd("refused-live", s.v.packs[0])
    with servd as d:
        live.write_bytes(os.urandom(40000))
        eq(sw.wait_metric(adm, "servd_pack_swap_failures_total", 1), 1, "garbage refused")
        ino = os.stat(live.path).st_ino
        with open(s.v.packs[1], "rb") as f, open(live.path, "r+b") as g:
            g.truncate(0)
            g.write(f.read())
        eq(os.stat(live.path).st_ino, ino, "the same file")
        wait_body(d.port, s.v.index(2), "the refused file, now a good pack, loaded")
        # once more at most: the file seen between the truncate and the write (a whole
        # CI machine busy can delay the write past the watch's settle delay)
        ok(sw.metrics(adm).get("servd_pack_swap_failures_total") in (1, 2),
           "refusals: %r" % sw.metrics(adm).get("servd_pack_swap_failures_total"))


BIG_INDEX = b"<p>the big release</p>\n"


def t_a_check_stopped_from_outside_is_tried_again(s):
    # The load check of a new pack runs in a child. When something else kills that child
    # (the OOM killer, a `kill` or `timeout` aimed at the process group), the check said
    # nothing about the file, yet the watch remembered it as refused "corrupt pack:
    # reading it crashed (signal Killed)" and kept the old release for good. Now the
    # refusal says the check was stopped, and servd loads the file again after a wait
    # (2 s, doubling at each such refusal).
    big = st.big_pack(BIG_INDEX)
    live, adm, servd = own_servd("killed-check-live", s.v.packs[0], interval="0.3")
    with servd as d:
        served = os.stat(live.path).st_ino
        live.rename_in(big)
        killed, leaked = [], []
        t0 = time.time()
        while time.time() - t0 < (1.5 if killed else RELOAD_LIMIT):  # every check for 1.5 s
            for pid in st.check_children(d.proc.pid):
                try:
                    for fd in os.listdir("/proc/%d/fd" % pid):  # the served pack's stays
                        if os.stat("/proc/%d/fd/%s" % (pid, fd)).st_ino == served:
                            leaked.append(fd)
                except OSError:
                    pass
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
                except OSError:
                    pass
            time.sleep(0.002)
        ok(killed, "caught the check child of the new pack")
        eq(leaked, [], "descriptors of the served pack in the check child")
        wait_body(d.port, BIG_INDEX, "the pack whose check was killed, "
                  "loaded at the watch's next look")
        log = d.read_log()
        ok("the check of the pack was stopped (signal Killed); not a verdict" in log and
           "trying again in 2 s" in log,
           "the refusal says the check was stopped, and when servd tries again: %s"
           % log[-800:])
        ok("corrupt" not in log, "no pack called corrupt: %s" % log[-800:])


def freeze_check(pid):
    """Freezes servd's load check (SIGSTOP) the moment it appears, as a pack on a slow
    disk or a check that loops would hold it: the child's pid (checked stopped), or a
    failure."""
    t0 = time.time()
    while time.time() - t0 < RELOAD_LIMIT:
        for c in st.check_children(pid):
            try:
                os.kill(c, signal.SIGSTOP)
                for _ in range(500):
                    with open("/proc/%d/stat" % c) as f:
                        if f.read().rsplit(")", 1)[1].split()[0] == "T":
                            return c
                    time.sleep(0.002)
            except OSError:
                pass  # it ended first: the next one
        time.sleep(0.001)
    raise st.Fail("no load check of the new pack to freeze")


def gone(pid):
    """Whether pid has ended and been reaped (no zombie of it left either)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            f.read()
        return False
    except OSError:
        return True


def t_a_stop_during_a_pack_check_does_not_wait_for_it(s):
    # A reload's check of the new pack (a child reading and hashing all of it) ran on
    # servd's main thread, the one that handles signals: a stop during it waited for the
    # check - the read of a pack of many GB on a slow disk, or the check's whole time
    # limit for one that loops - and a service manager's stop timeout then killed servd
    # mid-response. A frozen check stands in for the slow disk. The check now runs off the
    # main thread: signals are handled meanwhile, and a stop kills the check.
    big = st.big_pack(BIG_INDEX)
    live, adm, servd = own_servd("stop-during-check", s.v.packs[0], interval=None)
    alog = os.path.join(live.dir, "access.log")
    servd.extra += ["--access-log", alog]
    with servd as d:
        live.rename_in(big)
        d.proc.send_signal(signal.SIGHUP)
        child = freeze_check(d.proc.pid)
        eq(fetch(d.port).body, s.v.index(1), "the old pack served during the check")
        # a log rotation during the check is done at once
        os.rename(alog, alog + ".1")
        d.proc.send_signal(signal.SIGUSR1)
        t0 = time.time()
        while not os.path.exists(alog) and time.time() - t0 < RELOAD_LIMIT:
            time.sleep(0.01)
        ok(os.path.exists(alog), "SIGUSR1 during the check reopened the access log")
        t0 = time.time()
        d.proc.send_signal(signal.SIGTERM)
        try:
            rc = d.proc.wait(timeout=RELOAD_LIMIT)
        except subprocess.TimeoutExpired:
            rc = None
        took = time.time() - t0
        if rc is None:
            os.kill(child, signal.SIGCONT)
        eq(rc, 0, "servd's exit after SIGTERM during the check (%.1f s)" % took)
        ok(took < 2.0, "the stop waited %.1f s for the frozen check" % took)
        ok(gone(child), "the check child is left: %d" % child)
        log = d.read_log()
        ok("SIGHUP: stopping: the load of %s is dropped (abandoned)" % live.path in log,
           "the log says the load was abandoned: %s" % log[-800:])
        ok("refused" not in log and "corrupt" not in log, "no refusal logged: %s" % log[-800:])


def t_reloads_during_a_pack_check_load_the_newest_file_once(s):
    # While a new pack's check runs, a SIGHUP for the same file starts no second check,
    # and a deploy of another file (a SIGHUP, the watch) is loaded once the check ends.
    big = st.big_pack(BIG_INDEX)
    live, adm, servd = own_servd("reload-during-check", s.v.packs[0], interval="0.2")
    with servd as d:
        live.rename_in(big)
        child = freeze_check(d.proc.pid)  # the watch's load
        d.proc.send_signal(signal.SIGHUP)  # the same file: nothing more
        time.sleep(0.5)
        eq(st.check_children(d.proc.pid), [child], "checks running")
        live.rename_in(s.v.packs[2])
        d.proc.send_signal(signal.SIGHUP)
        time.sleep(0.5)  # the watch sees it too
        eq(fetch(d.port).body, s.v.index(1), "the old pack served during the check")
        os.kill(child, signal.SIGCONT)
        wait_body(d.port, s.v.index(3), "the file renamed in during the check, loaded after it")
        time.sleep(QUIET)
        log = d.read_log()
        eq(log.count("now serving pack"), 2, "loads: the big pack, then the newest: %s"
           % log[-1500:])
        ok("is being loaded already" in log, "the SIGHUP for the file being loaded: %s"
           % log[-1500:])
        # the load queued by the SIGHUP (before the watch saw the rename) is logged as
        # the SIGHUP's, as the line that queued it said
        ok("SIGHUP: %s is loaded again once" % live.path in log and
           "SIGHUP: now serving pack" in log, "the queued load's name: %s" % log[-1500:])
        eq(sw.metrics(adm).get("servd_pack_swap_failures_total", 0), 0, "refusals")


def t_a_load_that_ends_before_its_start_returns_is_not_taken_for_a_pass(s):
    # The main thread queued the load and then stored the queueing's result (0) in the
    # field the load writes its own verdict into: when the load ended first (a refusal
    # takes milliseconds; here the main thread is held right after queueing it), its
    # refusal was overwritten with 0, and servd swapped in a NULL snapshot (SIGSEGV).
    live, adm, servd = own_servd("load-race", s.v.packs[0], interval=None)
    # (the shim takes servd's calls into libuv because libuv is a shared library, as
    # Debian ships it)
    servd.env = st.preload_env(os.path.join(st.BUILD_DIR, "swap_open.so"), SLOW_QUEUE_MS="1500")
    with servd as d:
        garbage = os.path.join(live.dir, "garbage.lmdb")
        with open(garbage, "wb") as f:
            f.write(b"not a pack at all" * 1000)
        live.rename_in(garbage)
        d.proc.send_signal(signal.SIGHUP)
        t0 = time.time()
        while "refused" not in d.read_log() and d.alive() and time.time() - t0 < RELOAD_LIMIT:
            time.sleep(0.05)
        ok(d.alive(), "servd died: %s" % d.read_log()[-800:])
        ok("refused" in d.read_log(), "the garbage refused: %s" % d.read_log()[-800:])
        eq(fetch(d.port).body, s.v.index(1), "the old pack still served")
        live.rename_in(s.v.packs[1])
        d.proc.send_signal(signal.SIGHUP)
        wait_body(d.port, s.v.index(2), "a good pack loaded after it")


def t_a_check_without_memory_is_no_verdict(s):
    # The load check (servd --check-pack) that cannot map the pack for want of memory
    # (a cgroup or RLIMIT_AS) used to exit 1 like a corrupt pack's, and servd remembered
    # the file as refused for good. It now exits SF_CHECK_EXIT_NO_VERDICT (3), which servd
    # reads as no verdict and retries with a doubling wait (the wait itself is tested by
    # t_a_check_stopped_from_outside_is_tried_again). The limit is set on the check alone:
    # on a whole servd the address space it has left varies (glibc arenas, thread
    # stacks). Not under AddressSanitizer, whose shadow memory needs an unlimited
    # address space.
    import resource
    if ht.sanitized():
        raise st.Skip("under a sanitizer, whose shadow memory needs RLIMIT_AS unlimited")
    big = st.big_pack(BIG_INDEX)

    def limited():
        resource.setrlimit(resource.RLIMIT_AS, (48 << 20, resource.RLIM_INFINITY))
    p = subprocess.run([st.SERVD, "--check-pack", big], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, preexec_fn=limited, timeout=60)
    eq(p.returncode, 3, "servd --check-pack of a 64 MB pack in 48 MB of address space: %r %r"
       % (p.stdout[-200:], p.stderr[-200:]))
    ok(b"Cannot allocate memory" in p.stdout, "the reason: %r" % p.stdout[-200:])
    p = subprocess.run([st.SERVD, "--check-pack", big], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=60)
    eq(p.returncode, 0, "the same check with no limit: %r" % p.stdout[-200:])


def t_a_pack_cut_short_in_place_does_not_kill_servd(s):
    # Writing into the live pack (cp onto the path) is not supported, but it must not take
    # the server down: cp truncates first, and reading a page past the new end of a map
    # raises SIGBUS (mapguard.h). servd answers those requests with errors, keeps running,
    # and loads the file once it holds a whole pack again. Without the watch, which would
    # see the cut and stop answering from the map before a read could fault.
    live, adm, servd = own_servd("cut-live", s.v.packs[0], workers=2, interval=None)
    with servd as d:
        eq(st.get(d.port, "/").status, 200, "before")
        os.truncate(live.path, 0)
        got = [fetch(d.port, "/not-cached-%d" % i) for i in range(8)]  # lookups read the map
        m = sw.metrics(adm)
        ok(m["servd_pack_cut_pages_total"] >= 1 and m["servd_pack_cut"] == 1,
           "the cut in /metrics: %r" % {k: v for k, v in m.items() if "cut" in k})
        r = st.get(adm, "/healthz")
        ok(r.status == 503 and r.body.startswith(b"pack-written-in-place"),
           "/healthz while cut: %r %r" % (r.status, r.body))
        ok(d.proc.poll() is None, "servd is alive after reads of a cut map; log: %s"
           % d.read_log()[-800:])
        statuses = {r.status for r in got if r}
        ok(statuses <= {500, 503}, "answers from the cut map are errors: %r" % statuses)
        ok(503 in statuses, "once a read found the map cut, servd answers 503: %r" % statuses)
        # The 503 follows the request's framing: no body for HEAD (a pipelined GET behind it
        # would read that body as its response), and Connection: close, as it closes.
        with st.Conn(d.port) as c:
            c.send(st.req("HEAD", "/") + st.req("GET", "/"))
            r = c.read_response("HEAD")
            eq((r.status, r.get("Connection"), r.get("Retry-After")), (503, "close", "1"),
               "HEAD while cut")
            c.expect_closed("after the 503 to HEAD")
        with open(s.v.packs[1], "rb") as f, open(live.path, "r+b") as g:
            g.write(f.read())
        d.proc.send_signal(signal.SIGHUP)
        wait_body(d.port, s.v.index(2), "the rewritten file, complete again, loaded",
                  lambda r: ok(not r or r.status in (503, 200), "while waiting: %r"
                               % (r and r.status)))
        ok("cut from its file" in d.read_log(), "the cut is logged: %s" % d.read_log()[-800:])
        eq(st.get(adm, "/healthz").status, 200, "/healthz once a whole pack is loaded")
        eq(sw.metrics(adm)["servd_pack_cut"], 0, "servd_pack_cut once loaded")


def t_a_cp_over_the_served_pack_is_answered_503_from_its_first_write(s):
    # cp over the live file rewrites the pages servd has mapped, and a path in a worker's
    # path cache was then answered with the old headers (its strong ETag, which a CDN
    # keeps) and bytes of the other pack, until the stat fallback saw the new mtime; with
    # --watch-interval 0, for ever. The inotify watch now reports the write itself: from
    # it on, 503 until the file, whole again, is loaded. No poll here: inotify alone.
    live, adm, servd = own_servd("cp-live", s.v.packs[0], workers=1, interval="0")
    expect = s.v.expectations()
    paths = ["/", "/js/app.js", "/img/big.bin"]
    with servd as d:
        for p in paths:  # into the path cache
            eq(fetch(d.port, p).status, 200, "%s before" % p)
        with open(s.v.packs[1], "rb") as f, open(live.path, "wb") as g:  # what cp does
            g.write(f.read())
        # The main thread reads the watch's event while the workers serve: until then
        # answers come from the rewritten map (the moment servd.1 warns of).
        t0 = time.time()
        while "was written in place" not in d.read_log() and time.time() - t0 < RELOAD_LIMIT:
            time.sleep(0.02)
        ok("was written in place" in d.read_log(), "the write is not seen: %s"
           % d.read_log()[-800:])
        seen = set()
        t0 = time.time()
        while time.time() - t0 < QUIET:
            for p in paths:
                r = fetch(d.port, p)
                if r is None or r.status == 503:
                    seen.add(503)
                    continue
                eq(r.status, 200, "%s after the cp" % p)
                got = expect[(p if p != "/" else "/index.html", "identity")].get(r.get("ETag"))
                ok(got is not None and got[1] == r.body,
                   "%s after the cp: ETag %s with a body of %d bytes that is not its own"
                   % (p, r.get("ETag"), len(r.body)))
                seen.add(got[0])
        wait_body(d.port, s.v.index(2), "the copied pack, whole, loaded")
        ok(seen <= {503, 1, 2}, "answers after the cp: %r" % seen)


def t_a_touch_or_a_link_of_the_served_pack_costs_no_503(s):
    # A new ctime (a hard link kept for a rollback, a chmod) is not a new pack: a SIGHUP
    # loads nothing. A new mtime (touch) is loaded again, but the first bytes (LMDB's meta
    # pages) are the ones loaded, so it is not taken for a write in place: no 503.
    live, adm, servd = own_servd("touch-live", s.v.packs[0])
    with servd as d:
        swaps0 = sw.metrics(adm).get("servd_pack_swaps_total", 0)
        os.link(live.path, live.path + ".prev")
        d.proc.send_signal(signal.SIGHUP)
        time.sleep(0.5)
        ok("nothing to reload" in d.read_log(), "SIGHUP after a link: %s" % d.read_log()[-600:])
        eq(sw.metrics(adm).get("servd_pack_swaps_total", 0), swaps0, "swaps after a link")
        os.utime(live.path, (time.time() + 5, time.time() + 5))
        t0 = time.time()
        while time.time() - t0 < QUIET:
            eq(st.get(d.port, "/").status, 200, "served after a touch")
            time.sleep(0.05)
        eq(st.get(d.port, "/").body, s.v.index(1), "the same pack")
        ok("written in place" not in d.read_log(), "no alarm: %s" % d.read_log()[-600:])


def t_sighup_right_after_a_rename_loads_once(s):
    for i in range(5):
        swaps0 = s.m("servd_pack_swaps_total")
        ver = 1 + i % 2
        s.live.rename_in(s.v.packs[ver - 1])
        s.servd.proc.send_signal(signal.SIGHUP)
        s.wait_version(ver, "rename + SIGHUP %d" % i)
        time.sleep(0.3)  # past the settle delay: a second load would have happened
        eq(s.m("servd_pack_swaps_total"), swaps0 + 1, "rename + SIGHUP %d: loads" % i)


def t_sighup_well_after_a_rename_loads_nothing_more(s):
    """The deploy recipe renames, then runs systemctl reload: by then the watch has
    loaded the new file, and the SIGHUP must not validate and swap it again."""
    for i in range(3):
        swaps0 = s.m("servd_pack_swaps_total")
        ver = 1 + i % 2
        s.live.rename_in(s.v.packs[ver - 1])
        s.wait_version(ver, "rename %d" % i)
        # the version may already be the one served (the test before left it): wait
        # for the load itself, which a loaded machine may take more than 0.3 s over
        eq(sw.wait_metric(s.adm, "servd_pack_swaps_total", swaps0 + 1), swaps0 + 1,
           "rename %d: the watch loads it" % i)
        time.sleep(0.3)
        s.servd.proc.send_signal(signal.SIGHUP)
        time.sleep(0.3)
        eq(s.m("servd_pack_swaps_total"), swaps0 + 1, "rename %d, then SIGHUP: no second load" % i)
        eq(s.index(), s.v.index(ver), "rename %d, then SIGHUP: still serving it" % i)
    ok("nothing to reload" in s.servd.read_log(), "the SIGHUP says why it did nothing")


def t_forty_swaps_leave_one_pack_mapped_and_memory_flat(s):
    methods = ("rename", "flip", "target", "sighup")
    rss = []
    fails0 = s.m("servd_pack_swap_failures_total")
    for i in range(40):
        ver = 1 + i % 3
        pk = s.v.packs[ver - 1]
        how = methods[i % len(methods)]
        if how == "rename":
            s.live.rename_in(pk)
        elif how == "flip":
            s.live.flip(pk, "v%d.lmdb" % ver)
        elif how == "target":
            # first a flip to the version neither served nor wanted, waited for
            third = 6 - ver - (1 + (i - 1) % 3)
            s.live.flip(s.v.packs[third - 1], "t%d.lmdb" % i)
            s.wait_version(third, "swap %d: flip before the target change" % i)
            s.live.replace_target(pk, "t%d.lmdb" % i)
        else:
            s.live.rename_in(pk)
            s.servd.proc.send_signal(signal.SIGHUP)
        s.wait_version(ver, "swap %d (%s)" % (i, how))
        body = st.get(s.servd.port, "/img/big.bin").body
        eq(body, s.v.files[ver - 1]["/img/big.bin"], "swap %d: the large file" % i)
        if i in (4, 39):
            s.live.wait_one_mapped(s.pid)
            rss.append((sw.status_kib(s.pid, "VmRSS"), sw.status_kib(s.pid, "RssAnon")))
    mapped = s.live.wait_one_mapped(s.pid)
    print("  after 40 swaps: mapped %s; VmRSS %d -> %d KiB, RssAnon %d -> %d KiB (swap 5 -> 40)"
          % ([os.path.relpath(m, s.live.dir) for m in mapped], rss[0][0], rss[1][0], rss[0][1],
             rss[1][1]))
    eq(s.m("servd_pack_swap_failures_total"), fails0, "refusals during 40 good swaps")
    # Each swap maps a fresh ~3.5 MB pack and validates it; neither the maps nor the heap
    # may keep anything of the 35 swaps between the two samples. Not in an ASan build:
    # its allocator keeps freed blocks in a quarantine (256 MB) that grows by design,
    # about 900 KiB over these swaps, near the bound (t_swaps_memory_flat does the same).
    if ht.sanitized():
        print("  (an AddressSanitizer build: the RSS bounds are checked in the normal build)")
        return
    ok(rss[1][1] - rss[0][1] < 1024, "RssAnon grew %d KiB over 35 swaps" % (rss[1][1] - rss[0][1]))
    ok(rss[1][0] - rss[0][0] < 2048, "VmRSS grew %d KiB over 35 swaps" % (rss[1][0] - rss[0][0]))


def t_directory_symlink_flip_needs_the_stat_fallback(s):
    # /live/current -> dirA holds site.lmdb; flipping current to dirB happens in a directory
    # the watch does not look at (it watches current's target, dirA), so only the periodic
    # stat sees it: caught with --watch-interval, and never without.
    base = os.path.join(st.tmpdir(), "dirflip")
    for n, ver in (("a", 1), ("b", 2)):
        os.makedirs(os.path.join(base, n), exist_ok=True)
        st_copy(s.v.packs[ver - 1], os.path.join(base, n, "site.lmdb"))
    cur = os.path.join(base, "current")
    os.symlink("a", cur)
    path = os.path.join(cur, "site.lmdb")

    def flip(to):
        tmp = os.path.join(base, "tmp")
        os.symlink(to, tmp)
        os.rename(tmp, cur)

    for interval, should in (("0.2", True), ("0", False)):
        flip("a")
        with st.Servd(path, workers=1, extra=["--watch-interval", interval]) as d:
            eq(st.get(d.port, "/").body, s.v.index(1), "--watch-interval %s: start" % interval)
            flip("b")
            t0 = time.time()
            while time.time() - t0 < (RELOAD_LIMIT if should else QUIET):
                if st.get(d.port, "/").body == s.v.index(2):
                    break
                time.sleep(0.05)
            seen = st.get(d.port, "/").body == s.v.index(2)
            eq(seen, should, "--watch-interval %s: directory flip noticed" % interval)
            if should:
                print("  directory flip seen by the stat fallback in %.0f ms"
                      % ((time.time() - t0) * 1000))
            else:
                d.proc.send_signal(signal.SIGHUP)
                wait_body(d.port, s.v.index(2), "--watch-interval 0: SIGHUP still loads")


def t_sighup_after_a_flip_to_another_directory_watches_it(s):
    # A release layout (current -> rel/A, the pack at current/site.lmdb): a flip of the
    # directory link, then SIGHUP, loads rel/B; the watch must then look at rel/B, so that
    # a rename there is seen at once, even without the stat fallback (--watch-interval 0).
    base = os.path.join(st.tmpdir(), "hupflip")
    for n, ver in (("A", 1), ("B", 2)):
        os.makedirs(os.path.join(base, "rel", n), exist_ok=True)
        st_copy(s.v.packs[ver - 1], os.path.join(base, "rel", n, "site.lmdb"))
    cur = os.path.join(base, "current")
    os.symlink(os.path.join("rel", "A"), cur)
    with st.Servd(os.path.join(cur, "site.lmdb"), workers=1,
                  extra=["--watch-interval", "0"]) as d:
        eq(st.get(d.port, "/").body, s.v.index(1), "start from rel/A")
        tmp = os.path.join(base, "tmp")
        os.symlink(os.path.join("rel", "B"), tmp)
        os.rename(tmp, cur)
        d.proc.send_signal(signal.SIGHUP)
        wait_body(d.port, s.v.index(2), "SIGHUP after the flip to rel/B")
        new = os.path.join(base, "rel", "B", ".new")
        st_copy(s.v.packs[2], new)
        os.rename(new, os.path.join(base, "rel", "B", "site.lmdb"))
        wait_body(d.port, s.v.index(3), "a rename in rel/B after the SIGHUP that moved there")


def t_a_deploy_while_servd_starts_is_loaded(s):
    # The deploy renames a new pack over the path after servd opened the old one, and sends
    # SIGHUP, all before servd listens (swap_open.so does both when the pack check is
    # reaped). The SIGHUP is acted on once servd listens, even with --no-watch. Without
    # the SIGHUP the rename lands before the watch is set, so inotify never reports it:
    # the watch looks at the path once it starts (with --watch-interval 0 the old pack was
    # served for good).
    for name, sighup, extra in (("startup-live", "1", ["--no-watch"]),
                                ("startup-watch", None, ["--watch-interval", "0"])):
        live = sw.Live(name)
        live.rename_in(s.v.packs[0])
        new = live.path + ".new"
        st_copy(s.v.packs[1], new)
        shim = dict(WAIT_RENAME_FROM=new, WAIT_RENAME_TO=live.path)
        if sighup:
            shim["WAIT_RENAME_SIGHUP"] = sighup
        env = st.preload_env(os.path.join(st.BUILD_DIR, "swap_open.so"), **shim)
        with st.Servd(live.path, workers=1, extra=extra, env=env) as d:
            wait_body(d.port, s.v.index(2), "%s: a rename during startup" % " ".join(extra))
            if sighup:
                ok("SIGHUP during startup: now serving pack" in d.read_log(),
                   "the startup SIGHUP is logged: " + d.read_log()[-800:])


def t_a_directory_replaced_under_the_path_is_watched_again(s):
    # mv live live.old; mkdir live; a pack renamed in. inotify went on watching the old
    # directory, whose own move it reported under the directory's name, which matched no
    # name the watch looks for: without the stat fallback (--watch-interval 0) no pack
    # was ever loaded again, and nothing said so.
    live, adm, servd = own_servd("dirswap-live", s.v.packs[0], workers=1, interval="0")
    with servd as d:
        eq(st.get(d.port, "/").body, s.v.index(1), "start")
        os.rename(live.dir, live.dir + ".old")
        os.makedirs(live.dir)
        live.rename_in(s.v.packs[1])
        wait_body(d.port, s.v.index(2), "a pack in a new directory under the old one's name")
        live.rename_in(s.v.packs[2])
        wait_body(d.port, s.v.index(3), "a rename in the new directory, watched now")
        # The directory gone for longer than the settle delay (a person typing the
        # commands): said once, looked for until it is back, and watched again then.
        os.rename(live.dir, live.dir + ".gone")
        said = "watch: cannot watch the directory of %s (No such file or directory); " \
            "looking for it every 0.25 s" % live.path
        t0 = time.time()
        while said not in d.read_log() and time.time() - t0 < RELOAD_LIMIT:
            time.sleep(0.05)
        ok(said in d.read_log(), "the lost watch is said: " + d.read_log()[-800:])
        time.sleep(0.6)
        eq(d.read_log().count(said), 1, "said once: " + d.read_log()[-800:])
        os.rename(live.dir + ".gone", live.dir)
        time.sleep(0.6)  # found again, and watched
        live.rename_in(s.v.packs[0])
        wait_body(d.port, s.v.index(1), "a rename once the directory is back")


def t_a_pack_named_without_a_directory_is_watched(s):
    """--pack site.lmdb, a name without a '/' (servd started in the deploy directory):
    the watch is on "." and sees a rename over the name; the name removed keeps the
    pack served, said once, and a file renamed in later is loaded."""
    live = sw.Live("relative-live")
    live.rename_in(s.v.packs[0])
    with st.Servd("site.lmdb", cwd=live.dir, extra=["--watch-interval", "0"]) as d:
        eq(st.get(d.port, "/").body, s.v.index(1), "served from the relative name")
        live.rename_in(s.v.packs[1])
        wait_body(d.port, s.v.index(2), "a rename over site.lmdb (watched in \".\")")
        os.unlink(live.path)
        said = "watch: site.lmdb: No such file or directory; still serving the current pack"
        t0 = time.time()
        while said not in d.read_log() and time.time() - t0 < RELOAD_LIMIT:
            time.sleep(0.05)
        ok(said in d.read_log(), "the removal is said: %s" % d.read_log()[-600:])
        eq(st.get(d.port, "/").body, s.v.index(2), "still served once the name is gone")
        live.rename_in(s.v.packs[2])
        wait_body(d.port, s.v.index(3), "a file renamed in after the removal")
        eq(d.read_log().count(said), 1, "the removal said once: %s" % d.read_log()[-600:])
        ok("cannot watch" not in d.read_log(), "no watch was lost: %s" % d.read_log()[-600:])


def t_no_watch_leaves_reloads_to_sighup(s):
    live = sw.Live("nowatch-live")
    live.rename_in(s.v.packs[0])
    with st.Servd(live.path, workers=1, extra=["--no-watch"]) as d:
        live.rename_in(s.v.packs[1])
        time.sleep(QUIET)
        eq(st.get(d.port, "/").body, s.v.index(1), "--no-watch: served after a rename")
        d.proc.send_signal(signal.SIGHUP)
        wait_body(d.port, s.v.index(2), "--no-watch: after SIGHUP")


class Setup:
    def __enter__(self):
        self.s = Site()
        return self.s

    def __exit__(self, et, ev, tb):
        self.s.servd.stop(check=et is None)


def t_a_pack_cut_or_overwritten_with_its_head_kept_is_no_longer_served(s):
    # A cut that keeps the first pages (truncate to 16 KiB, or a cut and the file
    # extended again as holes, or a body written over in place) leaves LMDB's meta pages
    # as they were, so the reload cannot tell it from a touch by them, and a path in a
    # worker's path cache is sent by the kernel from the map without servd's own reads
    # ever faulting. servd answered it with nothing or with zeros while /healthz said ok.
    # The reload now marks the pack cut when the file is shorter than its map, and when
    # it refuses the very file it serves.
    for how in ("cut", "holes", "overwritten"):
        live, adm, servd = own_servd("head-kept-" + how, s.v.packs[0], workers=1)
        with servd as d:
            paths = ["/", "/js/app.js", "/img/big.bin"]
            for p in paths:  # into the path cache
                eq(fetch(d.port, p).status, 200, "%s: %s before" % (how, p))
            size = os.path.getsize(live.path)
            if how == "overwritten":
                with open(s.v.packs[1], "rb") as f, open(live.path, "r+b") as g:
                    f.seek(16384)
                    g.seek(16384)
                    g.write(f.read(size - 16384))
            else:
                os.truncate(live.path, 16384)
                if how == "holes":
                    os.truncate(live.path, size)
            d.proc.send_signal(signal.SIGHUP)
            t0 = time.time()
            while st.get(adm, "/healthz").status != 503 and time.time() - t0 < RELOAD_LIMIT:
                time.sleep(0.05)
            r = st.get(adm, "/healthz")
            ok(r.status == 503 and r.body.startswith(b"pack-written-in-place"),
               "%s: /healthz: %r %r; log: %s" % (how, r.status, r.body, d.read_log()[-800:]))
            for p in paths:
                r = fetch(d.port, p)
                ok(r is not None and r.status == 503,
                   "%s: %s from the damaged map: %r" % (how, p, r and (r.status, r.body[:40])))
            ok("was written in place" in d.read_log(), "%s: logged: %s" % (how, d.read_log()[-800:]))
            live.rename_in(s.v.packs[1])
            wait_body(d.port, s.v.index(2), "%s: a whole pack renamed in, loaded" % how)
            eq(st.get(adm, "/healthz").status, 200, "%s: /healthz once a whole pack is loaded" % how)


if __name__ == "__main__":
    st.run(st.collect(globals()), setup=Setup)
