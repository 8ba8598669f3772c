#!/usr/bin/env python3
"""HTTP benchmark: servd against nginx and the ceiling server (PERF.md method).

Each server runs with ONE worker pinned to core 1 (taskset -c 1); wrk runs with
one thread pinned to core 0. Rounds are interleaved (A B C A B C ...) and the
report quotes medians with min-max, requests/s, p50/p99 latency, socket
errors, server CPU microseconds per request (utime+stime of the server process
from /proc/PID/stat over the run, divided by the requests wrk completed) and
peak RSS (VmHWM).

    bench/http/run.py [--quick] [--rounds N] [--duration S] [--conns 100,1000]
                      [--servers ceiling,servd,nginx] [--workloads w1,w2pre]
                      [--out FILE]

Needs: a release build of servd and servd-pack in build-bench/ (made here),
wrk and nginx-light (installed if missing), npm (to fetch vue@2.7.16).
"""
import argparse, os, re, shutil, signal, socket, statistics, subprocess, sys, time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WORK = "/tmp/servd-bench"
BUILD = os.path.join(ROOT, "build-bench")
W1_BODY = b"<html><body><h1>It works!!</h1></body></html>\n"
PORTS = {"ceiling": 18091, "servd": 18090, "nginx": 18080}
CLK = os.sysconf("SC_CLK_TCK")


def sh(cmd, **kw):
    return subprocess.run(cmd, shell=True, check=True, **kw)


def ensure_tools():
    need = [p for p, b in (("wrk", "wrk"), ("nginx-light", "nginx")) if not shutil.which(b)]
    if need:
        sh("apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq " + " ".join(need))
    sh(f"cmake -S {ROOT} -B {BUILD} -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF >/dev/null")
    sh(f"cmake --build {BUILD} -j2 --target servd servd-pack >/dev/null")
    sh(f"cc -O2 -Wall -o {WORK}/ceiling {ROOT}/bench/ceiling/ceiling.c")


def fixtures():
    www = os.path.join(WORK, "www")
    os.makedirs(os.path.join(www, "pre"), exist_ok=True)
    with open(os.path.join(www, "index.html"), "wb") as f:
        f.write(W1_BODY)
    js = os.path.join(www, "pre", "app.js")
    if not os.path.exists(js):
        cache = os.path.join(WORK, "npm")
        os.makedirs(cache, exist_ok=True)
        sh(f"cd {cache} && npm pack vue@2.7.16 --silent >/dev/null && tar xzf vue-2.7.16.tgz")
        shutil.copy(os.path.join(cache, "package", "dist", "vue.min.js"), js)
    sh(f"gzip -9 -n -k -f {js}")  # nginx gzip_static sidecar
    # servd packs the same tree (servd-pack skips the sidecar and makes its own gzip)
    sh(f"{BUILD}/servd-pack build {www} -o {WORK}/site.lmdb -q")
    return www


NGINX_CONF = """worker_processes 1;
worker_rlimit_nofile 16384;
daemon off;
master_process on;
user www-data;
pid {work}/nginx.pid;
error_log {work}/nginx-error.log warn;
events {{ worker_connections 8192; use epoll; }}
http {{
    include /etc/nginx/mime.types;
    default_type application/octet-stream;
    access_log off;
    sendfile on;
    tcp_nopush on;
    tcp_nodelay on;
    keepalive_timeout 65;
    keepalive_requests 1000000;
    server {{
        listen 127.0.0.1:{port} backlog=4096;
        root {www};
        location /pre/ {{
            gzip off;
            gzip_static on;
            gzip_vary on;
        }}
    }}
}}
"""


def wait_port(port, timeout=10):
    end = time.time() + timeout
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listening on {port}")


def raise_nofile():
    import resource
    resource.setrlimit(resource.RLIMIT_NOFILE, (65536, 65536))


class Server:
    def __init__(self, name, workload, www):
        self.name, self.port = name, PORTS[name]
        if name == "nginx":
            conf = os.path.join(WORK, "nginx.conf")
            with open(conf, "w") as f:
                f.write(NGINX_CONF.format(work=WORK, port=self.port, www=www))
            argv = ["nginx", "-c", conf]
        elif name == "servd":
            argv = [f"{BUILD}/servd", "--pack", f"{WORK}/site.lmdb", "--workers", "1",
                    "--listen", f"127.0.0.1:{self.port}"]
        else:
            if workload == "w1":
                argv = [f"{WORK}/ceiling", str(self.port), os.path.join(www, "index.html")]
            else:
                argv = [f"{WORK}/ceiling", str(self.port), os.path.join(www, "pre/app.js.gz"), "gzip"]
        self.proc = subprocess.Popen(["taskset", "-c", "1"] + argv, preexec_fn=raise_nofile,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(self.port)
        self.pid = self.proc.pid
        if name == "nginx":  # measure the worker, not the master
            time.sleep(0.3)
            kids = open(f"/proc/{self.pid}/task/{self.pid}/children").read().split()
            self.pid = int(kids[0])

    def cpu(self):
        f = open(f"/proc/{self.pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(f[11]) + int(f[12])) / CLK

    def hwm_kib(self):
        for line in open(f"/proc/{self.pid}/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
        return 0

    def stop(self):
        self.proc.send_signal(signal.SIGTERM if self.name != "nginx" else signal.SIGQUIT)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def unit_us(v, u):
    return float(v) * {"us": 1, "ms": 1e3, "s": 1e6}[u]


def wrk(port, path, conns, duration, gzip):
    cmd = ["taskset", "-c", "0", "wrk", "-t1", f"-c{conns}", f"-d{duration}s", "--latency"]
    if gzip:
        cmd += ["-H", "Accept-Encoding: gzip"]
    cmd.append(f"http://127.0.0.1:{port}{path}")
    out = subprocess.run(cmd, capture_output=True, text=True, preexec_fn=raise_nofile).stdout
    r = {"rps": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)),
         "requests": int(re.search(r"(\d+) requests in", out).group(1)), "errors": 0}
    for pct, key in (("50", "p50"), ("99", "p99")):
        m = re.search(rf"^\s+{pct}%\s+([\d.]+)(us|ms|s)", out, re.M)
        r[key] = unit_us(*m.groups()) if m else float("nan")
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    if m:
        r["errors"] = sum(map(int, m.groups()))
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if m:
        r["errors"] += int(m.group(1))
    return r


def fmt_k(v):
    return f"{v / 1000:.1f}k"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="2 rounds of 5 s at c=100,1000")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--conns", default="100,1000")
    ap.add_argument("--servers", default="ceiling,servd,nginx")
    ap.add_argument("--workloads", default="w1,w2pre")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    if a.quick:
        a.rounds, a.duration = 2, 5
    os.makedirs(WORK, exist_ok=True)
    ensure_tools()
    www = fixtures()
    servers = a.servers.split(",")
    conns = [int(c) for c in a.conns.split(",")]
    wl = {"w1": ("/index.html", False), "w2pre": ("/pre/app.js", True)}
    res = {}  # (workload, c, server) -> list of runs
    hwm = {}
    for w in a.workloads.split(","):
        path, gz = wl[w]
        for c in conns:
            for rnd in range(a.rounds):
                for s in servers:
                    srv = Server(s, w, www)
                    try:
                        wrk(srv.port, path, min(c, 50), 1, gz)  # warm up
                        c0 = srv.cpu()
                        r = wrk(srv.port, path, c, a.duration, gz)
                        r["cpu_us"] = (srv.cpu() - c0) * 1e6 / max(r["requests"], 1)
                        hwm[(w, c, s)] = max(hwm.get((w, c, s), 0), srv.hwm_kib())
                    finally:
                        srv.stop()
                    res.setdefault((w, c, s), []).append(r)
                    print(f"{w} c={c} round {rnd + 1} {s}: {r['rps']:.0f} req/s "
                          f"p99 {r['p99']:.0f} us cpu {r['cpu_us']:.2f} us/req err {r['errors']}",
                          flush=True)
    lines = ["| workload | c | server | req/s median (min-max) | vs ceiling | p50 | p99 | "
             "socket errors | server CPU us/req | peak RSS |", "|---|---|---|---|---|---|---|---|---|---|"]
    for w in a.workloads.split(","):
        for c in conns:
            ceil = statistics.median(r["rps"] for r in res.get((w, c, "ceiling"), [{"rps": 0}]))
            for s in servers:
                runs = res[(w, c, s)]
                rps = [r["rps"] for r in runs]
                med = statistics.median(rps)
                vs = f"{med / ceil:.3f}" if ceil else "-"
                lines.append(
                    f"| {w} | {c} | {s} | {fmt_k(med)} ({fmt_k(min(rps))}-{fmt_k(max(rps))}) | "
                    f"{vs} | ")
                lines[-1] += (f"{statistics.median(r['p50'] for r in runs) / 1000:.2f} ms | "
                              f"{statistics.median(r['p99'] for r in runs) / 1000:.2f} ms | "
                              f"{sum(r['errors'] for r in runs)} | "
                              f"{statistics.median(r['cpu_us'] for r in runs):.2f} | "
                              f"{hwm[(w, c, s)] / 1024:.1f} MiB |")
    table = "\n".join(lines)
    print(table)
    if a.out:
        with open(a.out, "w") as f:
            f.write(table + "\n")


if __name__ == "__main__":
    main()
