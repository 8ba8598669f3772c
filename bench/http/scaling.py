#!/usr/bin/env python3
"""Does servd --workers 2 serialize? W1 and W2 precompressed with one and two
workers on the same two cores as the load generator (wrk -t2, all unpinned:
this machine has only 2 cores, so server and client share them).

No serialization means: CPU per request does not grow with the second worker,
both worker threads carry a similar share of the requests (SO_REUSEPORT
spreads the connections), and throughput does not drop. Rounds alternate
1, 2, 1, 2 ... workers.

    bench/http/scaling.py [--rounds 3] [--duration 5] [-c 200] [--build DIR]
"""
import argparse
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import run  # noqa: E402


def thread_cpu(pid):
    """CPU seconds of each thread of pid whose name is not the main thread's."""
    out = {}
    for t in os.listdir(f"/proc/{pid}/task"):
        f = open(f"/proc/{pid}/task/{t}/stat").read().rsplit(")", 1)[1].split()
        out[int(t)] = (int(f[11]) + int(f[12])) / run.CLK
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("-c", type=int, default=200)
    ap.add_argument("--build", default=os.path.join(run.ROOT, "build-bench"))
    a = ap.parse_args()
    run.raise_nofile()
    res = {}
    saved = run.SERVER_CPU, run.CLIENT_CPU
    run.SERVER_CPU = run.CLIENT_CPU = "0,1"
    try:
        for rnd in range(a.rounds):
            for wl in ("w1", "w2pre"):
                path, ae, _ = run.WORKLOADS[wl]
                for workers in (1, 2):
                    srv = run.Server("servd", wl, a.build, ("--workers", str(workers)))
                    try:
                        run.wrk(srv.port, path, ae, 50, 1)
                        t0 = thread_cpu(srv.pid)
                        cmd_c = a.c
                        r = wrk2(srv.port, path, ae, cmd_c, a.duration)
                        t1 = thread_cpu(srv.pid)
                    finally:
                        srv.stop()
                    per = sorted((t1[t] - t0.get(t, 0) for t in t1), reverse=True)[:workers]
                    r["cpu_us"] = sum(t1[t] - t0.get(t, 0) for t in t1) * 1e6 / r["requests"]
                    r["split"] = [p / max(sum(per), 1e-9) for p in per]
                    res.setdefault((wl, workers), []).append(r)
                    print(f"round {rnd + 1} {wl} workers={workers}: {r['rps']:.0f} req/s, "
                          f"{r['cpu_us']:.2f} us/req, thread CPU split "
                          f"{' / '.join(f'{s:.2f}' for s in r['split'])}", flush=True)
    finally:
        run.SERVER_CPU, run.CLIENT_CPU = saved
    print()
    print("| workload | workers | req/s median (min-max) | CPU us/req | busiest worker threads' "
          "share of worker CPU |")
    print("|---|---:|---|---:|---|")
    for (wl, workers), runs in sorted(res.items()):
        rps = [r["rps"] for r in runs]
        split = [statistics.median(r["split"][i] for r in runs) for i in range(workers)]
        print(f"| {wl} | {workers} | {run.k(statistics.median(rps))} ({run.k(min(rps))}-"
              f"{run.k(max(rps))}) | {statistics.median(r['cpu_us'] for r in runs):.2f} | "
              f"{' / '.join(f'{s:.2f}' for s in split)} |")


def wrk2(port, path, ae, conns, duration):
    """run.wrk with two client threads."""
    import re
    import subprocess
    cmd = ["taskset", "-c", "0,1", "wrk", "-t2", f"-c{conns}", f"-d{duration}s", "--latency"]
    if ae:
        cmd += ["-H", f"Accept-Encoding: {ae}"]
    cmd.append(f"http://127.0.0.1:{port}{path}")
    o = subprocess.run(cmd, capture_output=True, text=True, preexec_fn=run.raise_nofile).stdout
    return {"rps": float(re.search(r"Requests/sec:\s+([\d.]+)", o).group(1)),
            "requests": int(re.search(r"(\d+) requests in", o).group(1))}


if __name__ == "__main__":
    main()
