#!/usr/bin/env python3
"""bench/swap/wrk_swaps.py - servd at full keep-alive load (wrk) while the pack is swapped
every SWAP_INTERVAL seconds, against the same load without swaps.

For each phase: requests/s, latency percentiles, wrk's socket errors and non-2xx count
(must be 0: the mix asks only for paths and ranges valid in every version), servd's
swap counters, and servd's memory (VmRSS, RssAnon) before and after; after the swaps,
which pack files are still mapped. Prints one JSON object.

Usage: wrk_swaps.py SECONDS  (env: SERVD_BUILD_DIR, SWAP_INTERVAL, SWAP_WORKERS,
WRK_THREADS, WRK_CONNECTIONS; SWAP_ACCESS_LOG=FILE gives servd an access log, to see
what any non-2xx answer was)
"""
import json
import os
import re
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "e2e"))
import servdtest as st  # noqa: E402
import swaptest as sw  # noqa: E402

SECONDS = float(sys.argv[1]) if len(sys.argv) > 1 else 30.0
INTERVAL = float(os.environ.get("SWAP_INTERVAL", "0.2"))
WORKERS = int(os.environ.get("SWAP_WORKERS", "2"))
THREADS = int(os.environ.get("WRK_THREADS", "1"))
CONNS = int(os.environ.get("WRK_CONNECTIONS", "64"))


def parse_wrk(out):
    r = {}
    m = re.search(r"(\d+) requests in ([\d.]+)(\w+)", out)
    r["requests"] = int(m.group(1))
    m = re.search(r"Requests/sec:\s+([\d.]+)", out)
    r["req_per_s"] = round(float(m.group(1)))
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    r["non_2xx_3xx"] = int(m.group(1)) if m else 0
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    r["socket_errors"] = dict(zip(("connect", "read", "write", "timeout"),
                                  map(int, m.groups()))) if m else {
        "connect": 0, "read": 0, "write": 0, "timeout": 0}
    for pct in ("50", "90", "99"):
        m = re.search(r"^\s+%s(?:\.000)?%%\s+([\d.]+)(us|ms|s)\s*$" % pct, out, re.M)
        if m:
            v = float(m.group(1)) * {"us": 0.001, "ms": 1, "s": 1000}[m.group(2)]
            r["latency_p%s_ms" % pct] = round(v, 2)
    return r


def mem(pid):
    return {"VmRSS_kib": sw.status_kib(pid, "VmRSS"), "RssAnon_kib": sw.status_kib(pid, "RssAnon")}


def phase(d, adm, live, v, swap):
    """Runs wrk for SECONDS; swaps every INTERVAL when swap is true."""
    m0 = sw.metrics(adm)
    before = mem(d.proc.pid)
    wrk = subprocess.Popen(
        ["wrk", "-t%d" % THREADS, "-c%d" % CONNS, "-d%ds" % SECONDS, "--latency",
         "-s", os.path.join(HERE, "mix.lua"), "http://127.0.0.1:%d" % d.port],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    swaps = 0
    methods = ("rename", "flip", "rename+SIGHUP")
    t_next = time.time() + INTERVAL
    while wrk.poll() is None:
        time.sleep(max(0.0, t_next - time.time()))
        t_next += INTERVAL
        if not swap or wrk.poll() is not None:
            continue
        ver = 1 + (swaps + 1) % v.n
        how = methods[(swaps // v.n) % len(methods)]
        if how == "flip":
            live.flip(v.packs[ver - 1], "v%d.lmdb" % ver)
        else:
            live.rename_in(v.packs[ver - 1])
            if how == "rename+SIGHUP":
                d.proc.send_signal(signal.SIGHUP)
        swaps += 1
    out = wrk.stdout.read().decode()
    if wrk.returncode != 0:
        raise SystemExit("wrk failed:\n" + out)
    res = parse_wrk(out)
    counted = sw.wait_metric(adm, "servd_pack_swaps_total", m0["servd_pack_swaps_total"] + swaps)
    m1 = sw.metrics(adm)
    res.update({
        "swaps_done": swaps,
        "swaps_counted": int(counted - m0["servd_pack_swaps_total"]),
        "swap_refusals": int(m1["servd_pack_swap_failures_total"]
                             - m0["servd_pack_swap_failures_total"]),
        "mem_before": before,
        "mem_after": mem(d.proc.pid),
        "packs_mapped_after": [os.path.relpath(p, live.dir)
                               for p in live.wait_one_mapped(d.proc.pid)],
    })
    return res


def main():
    v = sw.Versions(3, tag="bench")
    live = sw.Live("bench-live")
    live.rename_in(v.packs[0])
    smallest = min(len(b) for known in v.expectations().values() for _, b in known.values())
    os.environ["SWAP_SMALLEST"] = str(smallest)
    adm = st.free_port()
    extra = ["--admin", "127.0.0.1:%d" % adm]
    if os.environ.get("SWAP_ACCESS_LOG"):
        extra += ["--access-log", os.environ["SWAP_ACCESS_LOG"]]
    d = st.Servd(live.path, workers=WORKERS, extra=extra).start()
    try:
        # Warm the page cache and the allocator, then measure without and with swaps.
        subprocess.run(["wrk", "-t1", "-c8", "-d2s", "-s", os.path.join(HERE, "mix.lua"),
                        "http://127.0.0.1:%d" % d.port], stdout=subprocess.DEVNULL, check=True)
        base = phase(d, adm, live, v, swap=False)
        swapped = phase(d, adm, live, v, swap=True)
    finally:
        d.stop()
    print(json.dumps({"seconds": SECONDS, "interval": INTERVAL, "workers": WORKERS,
                      "wrk_threads": THREADS, "wrk_connections": CONNS,
                      "pack_bytes": os.path.getsize(v.packs[0]),
                      "without_swaps": base, "with_swaps": swapped}, sort_keys=True))


if __name__ == "__main__":
    main()
