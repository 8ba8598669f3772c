#!/usr/bin/env python3
"""Per-request costs of one server, independent of machine noise.

    bench/http/profile.py callgrind [--server servd|ceiling] [--workload w1|w2pre]
                          [-n REQUESTS] [-c CONNS] [-m PIPELINE] [--build DIR]
                          [--compare DIR]
    bench/http/profile.py syscalls  ...   (strace -c: system calls per request)
    bench/http/profile.py perf      ...   (perf record -e cpu-clock: where the time goes,
                                           kernel included; hardware counters are not
                                           available on this machine)

callgrind: the server runs under valgrind --tool=callgrind; after a warm-up the
counters are zeroed (callgrind_control -z), h2load sends REQUESTS requests, and
the counters are dumped: user-space instructions per request, the number that
compares two versions of servd without noise, and where they are by source file
(the request path is inlined into a few functions). --compare BUILD runs a second
build's servd the same way and prints the two side by side, file by file.

Uses the fixtures and the pack that bench/http/run.py prepares in /tmp/servd-bench
(run.py --quick once first), and h2load --h1 -t1 on core 0; the server on core 1.
"""
import argparse
import glob
import os
import re
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import run  # noqa: E402  (the harness: fixtures, ports, load generators)


def server_argv(a, build=None):
    port = run.PORTS[a.server]
    if a.server == "servd":
        return [f"{build or a.build}/servd", "--pack", f"{run.WORK}/site.lmdb", "--workers", "1",
                "--listen", f"127.0.0.1:{port}"], port
    body = ([f"{run.WORK}/www/index.html"] if a.workload == "w1"
            else [f"{run.WORK}/www/pre/app.js.gz", "gzip"])
    return [f"{run.WORK}/ceiling", str(port)] + body, port


def load(a, port, n):
    path, ae, _ = run.WORKLOADS[a.workload]
    cmd = ["taskset", "-c", run.CLIENT_CPU, "h2load", "--h1", "-t1", f"-c{a.c}", f"-n{n}",
           f"-m{a.m}"]
    if ae:
        cmd += ["-H", f"Accept-Encoding: {ae}"]
    cmd.append(f"http://127.0.0.1:{port}{path}")
    o = subprocess.run(cmd, capture_output=True, text=True, preexec_fn=run.raise_nofile).stdout
    m = re.search(r"(\d+) succeeded, (\d+) failed", o)
    if not m or int(m.group(2)):
        sys.exit("h2load: " + o)
    return int(m.group(1))


def start(argv, wrap, port):
    p = subprocess.Popen(["taskset", "-c", run.SERVER_CPU] + wrap + argv,
                         preexec_fn=run.raise_nofile, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    run.wait_port(port, p, timeout=60)
    return p


def stop(p):
    os.killpg(p.pid, signal.SIGTERM)
    try:
        p.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()


def by_file(dump):
    """{source file: instructions} of a callgrind dump, each instruction counted in the
    file of its source line (fl=, fi=, fe=): servd's request path is inlined into a few
    functions, so a listing by function says nothing, one by file says where the
    instructions are. Costs of call lines (inclusive) are skipped."""
    out, fl, cur, after_calls = {}, "?", "?", False
    for ln in open(dump):
        if ln.startswith("fl="):
            fl = cur = ln[3:].strip()
            continue
        if ln.startswith(("fi=", "fe=")):
            cur = ln[3:].strip()
            continue
        if ln.startswith("fn="):  # a function's costs start in its own file
            cur = fl
            continue
        if ln.startswith("calls="):
            after_calls = True
            continue
        m = re.match(r"^([+-]?\d+|\*)\s+(\d+)", ln)
        if m:
            if not after_calls:
                out[cur] = out.get(cur, 0) + int(m.group(2))
            after_calls = False
    return out


def callgrind_run(a, build, tag):
    """One server under callgrind: (requests, instructions, {file: instructions}), the
    dump kept as {outdir}/{tag}.cg."""
    argv, port = server_argv(a, build)
    outdir = f"{run.WORK}/callgrind"
    os.makedirs(outdir, exist_ok=True)
    for f in glob.glob(f"{outdir}/cg.out*"):
        os.remove(f)
    p = start(argv, ["valgrind", "--tool=callgrind", f"--callgrind-out-file={outdir}/cg.out",
                     "--dump-instr=no", "--collect-systime=no", "--compress-strings=no"], port)
    try:
        load(a, port, 2000)
        subprocess.run(["callgrind_control", "-z", str(p.pid)], capture_output=True, check=True)
        n = load(a, port, a.n)
        subprocess.run(["callgrind_control", "-d", str(p.pid)], capture_output=True, check=True)
        time.sleep(0.5)
    finally:
        stop(p)
    best = None
    for d in glob.glob(f"{outdir}/cg.out.*"):
        t = open(d).read()
        m = re.search(r"^(?:summary|totals): (\d+)", t, re.M)
        if m and (best is None or int(m.group(1)) > best[0]):
            best = (int(m.group(1)), d)
    if not best:
        sys.exit("no callgrind dump found in " + outdir)
    ir, d = best
    kept = f"{outdir}/{tag}.cg"
    os.replace(d, kept)
    print(f"{a.server} {a.workload} c={a.c} m={a.m} [{build}]: {n} requests, {ir} "
          f"instructions (user space) = {ir / n:.0f} per request   [{kept}]")
    files = {}
    root = os.path.dirname(os.path.abspath(build)) + "/"  # the build's source tree
    for f, c in by_file(kept).items():  # its files named alike whichever tree built them
        f = f[len(root):] if f.startswith(root) else f
        files[f] = files.get(f, 0) + c
    return n, ir, files


def callgrind(a):
    n, ir, files = callgrind_run(a, a.build, "a")
    if not a.compare:
        for f, c in sorted(files.items(), key=lambda x: -x[1])[:a.top]:
            print(f"  {c / n:8.1f}/req {100 * c / ir:5.1f}%  {f}")
        return
    n2, ir2, files2 = callgrind_run(a, a.compare, "b")
    print(f"  {'--build':>10} {'--compare':>10} {'diff':>8}  per request, by source file")
    rows = sorted(set(files) | set(files2), key=lambda f: -max(files.get(f, 0) / n,
                                                                 files2.get(f, 0) / n2))
    for f in rows[:a.top]:
        x, y = files.get(f, 0) / n, files2.get(f, 0) / n2
        print(f"  {x:10.1f} {y:10.1f} {x - y:+8.1f}  {f}")
    print(f"  {ir / n:10.1f} {ir2 / n2:10.1f} {ir / n - ir2 / n2:+8.1f}  total")


def syscalls(a):
    argv, port = server_argv(a)
    p = start(argv, [], port)
    try:
        load(a, port, 2000)
        st = subprocess.Popen(["strace", "-c", "-f", "-p", str(p.pid), "-o",
                               f"{run.WORK}/strace.out"], stderr=subprocess.DEVNULL)
        time.sleep(1)
        n = load(a, port, a.n)
        time.sleep(0.3)
        st.send_signal(signal.SIGINT)
        st.wait(30)
    finally:
        stop(p)
    print(f"{a.server} {a.workload} c={a.c} m={a.m}: {n} requests; system calls per request:")
    for ln in open(f"{run.WORK}/strace.out"):
        f = ln.split()
        if len(f) >= 5 and f[0][0].isdigit() and f[-1] != "total":
            calls = int(f[3])
            print(f"  {calls / n:7.3f}  {f[-1]}")


def perf(a):
    argv, port = server_argv(a)
    p = start(argv, [], port)
    try:
        load(a, port, 2000)
        data = f"{run.WORK}/perf.data"
        pr = subprocess.Popen(["perf", "record", "-e", "cpu-clock", "-F", "4999", "-o", data,
                               "-p", str(p.pid)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        n = load(a, port, a.n)
        pr.send_signal(signal.SIGINT)
        pr.wait(30)
    finally:
        stop(p)
    print(f"{a.server} {a.workload} c={a.c} m={a.m}: {n} requests")
    rep = subprocess.run(["perf", "report", "-i", data, "--stdio", "--sort", "dso,sym",
                          "--percent-limit", "0.7"], capture_output=True, text=True).stdout
    print("\n".join(ln for ln in rep.splitlines() if ln and not ln.startswith("#"))[:6000])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=["callgrind", "syscalls", "perf"])
    ap.add_argument("--server", default="servd", choices=["servd", "ceiling"])
    ap.add_argument("--workload", default="w1", choices=["w1", "w2pre"])
    ap.add_argument("-n", type=int, default=50000)
    ap.add_argument("-c", type=int, default=100)
    ap.add_argument("-m", type=int, default=1)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--build", default=os.path.join(run.ROOT, "build-bench"))
    ap.add_argument("--compare", metavar="BUILD",
                    help="callgrind: run this build's servd too, and show the two by file")
    a = ap.parse_args()
    run.raise_nofile()
    {"callgrind": callgrind, "syscalls": syscalls, "perf": perf}[a.mode](a)


if __name__ == "__main__":
    main()
