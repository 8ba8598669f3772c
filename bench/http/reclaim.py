#!/usr/bin/env python3
"""What a newcomer costs servd at --max-conns, when the slots are held by connections
that have sent nothing (a client holding them, re-opening each before it is idle for
SV_RECLAIM_IDLE_MS): each newcomer makes the worker look for room (sv__conn_make_room)
and, finding none, answer 503. Prints servd's CPU time per newcomer.

    python3 bench/http/reclaim.py --build build [--compare OTHER_BUILD] [-n 8000] [-m 500]

servd runs with one worker on core 0, this script on core 1; with --compare, the two
builds alternate for --rounds rounds and the medians are printed.
"""
import argparse
import os
import socket
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def cpu_seconds(pid):
    """CPU time of all of pid's threads, from schedstat (nanoseconds, not ticks)."""
    total = 0
    for t in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/schedstat" % (pid, t)) as f:
                total += int(f.read().split()[0])
        except OSError:
            pass  # a thread that ended
    return total / 1e9


def one_round(build, pack, port, n, m):
    servd = subprocess.Popen(["taskset", "-c", "0", os.path.join(build, "servd"), "--pack", pack,
                              "--listen", "127.0.0.1:%d" % port, "--workers", "1",
                              "--max-conns", str(n)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(1)
        held = [socket.create_connection(("127.0.0.1", port)) for _ in range(n)]
        time.sleep(0.2)  # all accepted; none idle for 3 s yet
        c0, t0 = cpu_seconds(servd.pid), time.time()
        codes = {}
        for _ in range(m):
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            code = s.recv(12)[9:12].decode() or "closed"
            codes[code] = codes.get(code, 0) + 1
            s.close()
        cpu, took = cpu_seconds(servd.pid) - c0, time.time() - t0
        for h in held:
            h.close()
        return cpu / m * 1e3, took, codes
    finally:
        servd.kill()
        servd.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--compare")
    ap.add_argument("-n", type=int, default=8000, help="--max-conns, all held")
    ap.add_argument("-m", type=int, default=500, help="newcomers, one after another")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--port", type=int, default=18190)
    a = ap.parse_args()
    os.sched_setaffinity(0, {1})
    import resource
    resource.setrlimit(resource.RLIMIT_NOFILE, (a.n + 1000, a.n + 1000))
    pack = "/tmp/servd-reclaim-www.lmdb"
    subprocess.run([os.path.join(a.build, "servd-pack"), "build", os.path.join(ROOT, "www"),
                    "-o", pack, "-q"], check=True)
    builds = [a.build] + ([a.compare] if a.compare else [])
    got = {b: [] for b in builds}
    for r in range(a.rounds):
        for i, b in enumerate(builds):
            ms, took, codes = one_round(b, pack, a.port + 2 * i, a.n, a.m)
            got[b].append(ms)
            print("round %d %s: %.3f ms of servd CPU per newcomer (%d in %.2f s: %s)"
                  % (r + 1, b, ms, a.m, took, codes), flush=True)
    for b in builds:
        print("median %s: %.3f ms per newcomer" % (b, statistics.median(got[b])))


if __name__ == "__main__":
    sys.exit(main())
