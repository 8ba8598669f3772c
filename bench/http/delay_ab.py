#!/usr/bin/env python3
"""The bench/RESULTS.md experiment of bench/http/delay.c: servd with and without a 1 ms
delay before each blocking epoll_wait, beside lighttpd and h2o, W1, 3 interleaved rounds.

  cc -O2 -shared -fPIC -o /tmp/delay.so bench/http/delay.c -ldl
  bench/http/delay_ab.py C          (after bench/http/run.py has set up /tmp/servd-bench)
"""
import sys, os, time, subprocess, re, statistics
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run as R
R.raise_nofile()
wl = "w1"; c = int(sys.argv[1]); dur = 4
path, ae, _ = R.WORKLOADS[wl]
res = {}
for rnd in range(3):
    for spec in ["servd", "servd+delay", "lighttpd", "h2o"]:
        if spec == "servd+delay": os.environ.update(LD_PRELOAD="/tmp/delay.so", DELAY_US="1000")
        s = R.Server(spec.split("+")[0], wl, os.path.join(R.ROOT, "build"))
        os.environ.pop("LD_PRELOAD", None)
        subprocess.run(["taskset", "-c", "0", "wrk", "-t1", "-c50", "-d1s", f"http://127.0.0.1:{s.port}{path}"], capture_output=True)
        cpu0 = s.cpu(); t0 = os.times()
        w = subprocess.run(["taskset", "-c", "0", "wrk", "-t1", f"-c{c}", f"-d{dur}s", "--latency", f"http://127.0.0.1:{s.port}{path}"], capture_output=True, text=True).stdout
        t1 = os.times()
        cpu = s.cpu() - cpu0
        n = int(re.search(r"(\d+) requests in", w).group(1))
        p99 = R.unit_us(*re.search(r"99%\s+([\d.]+)(\w+)", w).groups())
        wcpu = (t1.children_user - t0.children_user + t1.children_system - t0.children_system) * 1e6 / n
        s.stop()
        res.setdefault(spec, []).append((n / dur, cpu * 1e6 / n, p99, wcpu))
        print(f"r{rnd} {spec:12s} {n/dur/1000:7.1f}k  srv {cpu*1e6/n:5.2f}us  wrk {wcpu:5.2f}us  p99 {p99/1000:.2f}ms", flush=True)
for spec, v in res.items():
    print(f"median c={c} {spec:12s} {statistics.median(x[0] for x in v)/1000:7.1f}k  srv {statistics.median(x[1] for x in v):5.2f}us  wrk {statistics.median(x[3] for x in v):5.2f}us  p99 {statistics.median(x[2] for x in v)/1000:.2f}ms")
