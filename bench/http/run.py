#!/usr/bin/env python3
"""HTTP benchmark of servd against its peers and a ceiling server (PERF.md).

One command builds servd (Release), installs what is missing (nginx-light, h2o,
lighttpd with lighttpd-mod-deflate, caddy, apache2, wrk, nghttp2-client for h2load, gnuplot-nox), writes
the peers' configurations from bench/http/peers/ (the exact settings behind the
numbers in PERF.md: one worker each, no access log, the W2 file under /gz/
compressed on the fly and under /pre/ served from a precompressed variant),
builds the ceiling server (bench/ceiling/ceiling.c) and measures:

  w1     GET /index.html, 46 bytes                        wrk -t1 -c C
  w2pre  GET /pre/app.js, Accept-Encoding: gzip, a precompressed variant
  w2fly  GET /gz/app.js,  Accept-Encoding: gzip, compressed per request (peers)
  pipe   h2load --h1 -m 8 on W1 and W2pre (the server, not wrk, is the limit)
  site   a real site replayed (bench/http/site.py): many files, encodings,
         conditional requests - servd against nginx

Each server runs alone with ONE worker under `taskset -c 1`, the load generator
with one thread under `taskset -c 0`; both with a raised ulimit -n. Rounds are
interleaved (every server once per round, the order rotated by one each round, so
that no server always takes the first slot after another cell) and a fresh server
is started for every measurement. Reported: req/s median (min-max), p50/p99,
socket errors (wrk), failed+errored requests (h2load, one run per cell), server
CPU microseconds per request (utime+stime of the server's process tree from
/proc/PID/stat over the run / requests completed), peak RSS (VmHWM of the
serving process), and the pipelined req/s with its CPU per request.

    bench/http/run.py            full mode: 3 rounds x 10 s, c = 100,500,1000,1500
    bench/http/run.py --quick    under 3 minutes: 1 round x 2 s, fewer servers

Results go to bench/RESULTS.md (the section between the "http" markers; other
sections are kept) and PNG plots to bench/plots/. Only 127.0.0.1 is used; every
server started is stopped before the next one starts.
"""
import argparse
import datetime
import os
import platform
import re
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
WORK = "/tmp/servd-bench"  # the peers' configs say /tmp/peerbench; replaced by this
CACHE = os.path.join(HERE, ".cache")  # npm downloads (git ignores it)
W1_BODY = b"<html><body><h1>It works!!</h1></body></html>\n"
VUE = ("vue", "2.7.16", "dist/vue.min.js", 107679)
CLK = os.sysconf("SC_CLK_TCK")
SERVER_CPU, CLIENT_CPU = "1", "0"
NOFILE = 65536

# name -> port: the reference configs' 1808x + 8000 (other tests here use 1808x), below
# the ephemeral range (32768-60999), where wrk's own sockets could hold the port
PORT_SHIFT = 8000
PORTS = {"ceiling": 26091, "servd": 26090, "servd-base": 26092, "h2o": 26082, "lighttpd": 26083, "nginx": 26080,
         "nginx-ofc": 26086, "caddy": 26081, "apache": 26084}
ALL_SERVERS = ["ceiling", "servd", "h2o", "lighttpd", "nginx", "nginx-ofc", "caddy", "apache"]
QUICK_SERVERS = ["ceiling", "servd", "h2o", "lighttpd", "nginx-ofc"]
WORKLOADS = {  # name -> (path, Accept-Encoding, servers it applies to)
    "w1": ("/index.html", None, None),
    "w2pre": ("/pre/app.js", "gzip", None),
    "w2fly": ("/gz/app.js", "gzip", {"h2o", "lighttpd", "nginx", "nginx-ofc", "caddy", "apache"}),
}
APT = {"nginx": "nginx-light", "h2o": "h2o", "lighttpd": "lighttpd", "caddy": "caddy",
       "apache2": "apache2", "wrk": "wrk", "h2load": "nghttp2-client", "gnuplot": "gnuplot-nox",
       "npm": "npm"}
LIGHTTPD_DEFLATE = "/usr/lib/lighttpd/mod_deflate.so"


def sh(cmd, **kw):
    return subprocess.run(cmd, shell=True, check=True, **kw)


def out(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True).stdout.strip() or \
            subprocess.run(cmd, shell=True, capture_output=True, text=True).stderr.strip()
    except OSError:
        return "?"


def raise_nofile():
    """ulimit -n as high as allowed (the hard limit may be below NOFILE)."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    n = NOFILE if hard == resource.RLIM_INFINITY else min(NOFILE, hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (n, hard))


# ---- setup ----------------------------------------------------------------

def ensure_tools(build, servers, no_install, no_build):
    need = {APT[b] for b in ["wrk", "h2load", "gnuplot", "npm"] +
            [{"h2o": "h2o", "lighttpd": "lighttpd", "nginx": "nginx",
              "nginx-ofc": "nginx", "caddy": "caddy", "apache": "apache2"}[s]
             for s in servers if s not in ("ceiling", "servd", "servd-base")]
            if not shutil.which(b) and not os.path.exists("/usr/sbin/" + b)}
    # lighttpd's mod_deflate is a package of its own, only recommended by
    # lighttpd: without it lighttpd serves W2 uncompressed
    if "lighttpd" in servers and not os.path.exists(LIGHTTPD_DEFLATE):
        need.add("lighttpd-mod-deflate")
    need = sorted(need)
    if need:
        if no_install:
            sys.exit("missing: " + " ".join(need))
        sh("apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "
           "--no-install-recommends " + " ".join(need) + " >/dev/null")
    # Debian starts the peers it installs as services: they are not ours to measure
    for svc in ("nginx", "h2o", "lighttpd", "caddy", "apache2"):
        subprocess.run(f"service {svc} stop", shell=True, capture_output=True)
    if not no_build:
        sh(f"cmake -S {ROOT} -B {build} -DCMAKE_BUILD_TYPE=Release >/dev/null")
        sh(f"cmake --build {build} -j2 --target servd servd-pack >/dev/null")
    sh(f"cc -O2 -Wall -o {WORK}/ceiling {ROOT}/bench/ceiling/ceiling.c")


def npm_file(pkg, version, rel, size):
    """Fetches pkg@version from npm once (into CACHE) and returns rel inside it."""
    d = os.path.join(CACHE, f"{pkg}-{version}")
    path = os.path.join(d, "package", rel)
    if not os.path.exists(path):
        os.makedirs(d, exist_ok=True)
        sh(f"cd {d} && npm pack {pkg}@{version} --silent >/dev/null && tar xzf {pkg}-{version}.tgz")
    if size is not None and os.path.getsize(path) != size:
        sys.exit(f"{path}: {os.path.getsize(path)} bytes, expected {size}: not the W2 file")
    return path


def fixtures(build):
    www = os.path.join(WORK, "www")
    for d in ("www/pre", "www/gz", "var", "lighttpd-cache", "apache-run", "caddy-home"):
        os.makedirs(os.path.join(WORK, d), exist_ok=True)
    with open(os.path.join(www, "index.html"), "wb") as f:
        f.write(W1_BODY)
    js = npm_file(*VUE)
    for d in ("pre", "gz"):
        shutil.copy(js, os.path.join(www, d, "app.js"))
    sh(f"gzip -9 -n -k -f {www}/pre/app.js")  # the sidecar nginx, h2o, Caddy, Apache serve
    # www-data must read the tree and write lighttpd's cache
    sh(f"chmod -R a+rX {WORK} && chown -R www-data {WORK}/lighttpd-cache {WORK}/var "
       f"{WORK}/apache-run")
    shutil.rmtree(os.path.join(WORK, "lighttpd-cache"), ignore_errors=True)
    os.makedirs(os.path.join(WORK, "lighttpd-cache"))
    sh(f"chown www-data {WORK}/lighttpd-cache")
    # servd serves a pack of the same tree (its gzip variant is its own, not the sidecar)
    sh(f"{build}/servd-pack build {www} -o {WORK}/site.lmdb -q")
    return www


def write_conf(name):
    src = {"h2o": "h2o.conf", "lighttpd": "lighttpd.conf", "nginx": "nginx.conf",
           "nginx-ofc": "nginx-ofc.conf", "caddy": "Caddyfile", "apache": "apache2.conf"}[name]
    text = open(os.path.join(HERE, "peers", src)).read().replace("/tmp/peerbench", WORK)
    text = re.sub(r"\b(1808\d)\b", lambda m: str(int(m.group(1)) + PORT_SHIFT), text)
    if str(PORTS[name]) not in text:
        sys.exit(f"{src}: port {PORTS[name]} not found after the substitution")
    dst = os.path.join(WORK, "conf-" + src)
    with open(dst, "w") as f:
        f.write(text)
    return dst


# ---- servers ----------------------------------------------------------------

def wait_port(port, proc, timeout=15):
    end = time.time() + timeout
    while time.time() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"server on port {port} exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listening on 127.0.0.1:{port}")


def tree(pid):
    """pid and all its descendants."""
    pids, todo = [], [pid]
    while todo:
        p = todo.pop()
        pids.append(p)
        try:
            for t in os.listdir(f"/proc/{p}/task"):
                todo += [int(x) for x in open(f"/proc/{p}/task/{t}/children").read().split()]
        except OSError:
            pass
    return sorted(set(pids))


def proc_cpu(pid):
    try:
        f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(f[11]) + int(f[12])) / CLK
    except OSError:
        return 0.0


def proc_hwm_kib(pid):
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


BASE_BUILD = [None]  # --base-build: the servd-base server's build directory
RUNNING = []  # servers started and not yet stopped (stopped on SIGTERM/SIGINT too)


def stop_all(signum=None, frame=None):
    while RUNNING:
        RUNNING[-1].stop()
    if signum is not None:
        sys.exit(128 + signum)


class Server:
    """One server on core SERVER_CPU, started fresh for one measurement."""

    def __init__(self, name, workload, build, servd_args=()):
        self.name, self.port = name, PORTS[name]
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
            raise RuntimeError(f"127.0.0.1:{self.port} is already in use: cannot measure {name}")
        except OSError:
            pass
        env = dict(os.environ)
        argv = []
        www = os.path.join(WORK, "www")
        if name in ("servd", "servd-base"):
            if name == "servd-base":  # A/B: another build of servd (--base-build)
                build = BASE_BUILD[0]
            # one worker unless servd_args say (scaling.py): servd refuses --workers twice
            given = any(a in ("-w", "--workers") or a.startswith(("-w", "--workers="))
                        for a in servd_args)
            argv = [f"{build}/servd", "--pack", f"{WORK}/site.lmdb",
                    *(() if given else ("--workers", "1")),
                    "--listen", f"127.0.0.1:{self.port}", *servd_args]
        elif name == "ceiling":
            body = ([os.path.join(www, "index.html")] if workload == "w1"
                    else [os.path.join(www, "pre/app.js.gz"), "gzip"])
            argv = [f"{WORK}/ceiling", str(self.port)] + body
        elif name in ("nginx", "nginx-ofc"):
            argv = ["nginx", "-c", write_conf(name)]
        elif name == "h2o":
            argv = ["h2o", "-c", write_conf(name)]
        elif name == "lighttpd":
            argv = ["lighttpd", "-D", "-f", write_conf(name)]
        elif name == "caddy":
            home = os.path.join(WORK, "caddy-home")
            env.update(GOMAXPROCS="1", HOME=home, XDG_DATA_HOME=home, XDG_CONFIG_HOME=home)
            argv = ["caddy", "run", "--config", write_conf(name), "--adapter", "caddyfile"]
        elif name == "apache":
            argv = ["apache2", "-f", write_conf(name), "-D", "FOREGROUND"]
        self.log = open(os.path.join(WORK, f"{name}.stderr"), "w")
        self.proc = subprocess.Popen(["taskset", "-c", SERVER_CPU] + argv, env=env,
                                     preexec_fn=raise_nofile, stdout=self.log, stderr=self.log,
                                     start_new_session=True)
        self.pid = self.proc.pid
        RUNNING.append(self)
        try:
            wait_port(self.port, self.proc)
        except RuntimeError:
            self.stop()
            raise RuntimeError(f"{name} did not start: see {WORK}/{name}.stderr")

    def cpu(self):
        return sum(proc_cpu(p) for p in tree(self.pid))

    def serving_pid(self):
        """The process that did the most work (nginx's worker, Apache's child)."""
        return max(tree(self.pid), key=proc_cpu)

    def hwm_kib(self):
        return proc_hwm_kib(self.serving_pid())

    def stop(self):
        if self in RUNNING:
            RUNNING.remove(self)
        try:
            os.killpg(self.pid, signal.SIGQUIT if self.name.startswith("nginx") else signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(self.pid, signal.SIGKILL)
            self.proc.wait()
        # apache and nginx may leave children for a moment: wait for the port to be free
        end = time.time() + 10
        while time.time() < end:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                time.sleep(0.1)
            except OSError:
                break
        self.log.close()


def check_response(name, port, path, ae):
    """One request by hand: a misconfigured peer must not be measured."""
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    req = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n" + (f"Accept-Encoding: {ae}\r\n" if ae
                                                           else "") + "\r\n"
    s.sendall(req.encode())
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    head = data.split(b"\r\n\r\n")[0].decode("latin-1").lower()
    if not head.startswith("http/1.1 200"):
        raise RuntimeError(f"{name} {path}: {head.splitlines()[0] if head else 'no answer'}")
    if ae and "content-encoding: gzip" not in head:
        raise RuntimeError(f"{name} {path}: no Content-Encoding: gzip in\n{head}")


# ---- load generators --------------------------------------------------------

def unit_us(v, u):
    return float(v) * {"us": 1, "ms": 1e3, "s": 1e6}[u]


def wrk(port, path, ae, conns, duration, script=None, script_args=()):
    cmd = ["taskset", "-c", CLIENT_CPU, "wrk", "-t1", f"-c{conns}", f"-d{duration}s", "--latency",
           "--timeout", "5s"]
    if ae:
        cmd += ["-H", f"Accept-Encoding: {ae}"]
    if script:
        cmd += ["-s", script]
    cmd.append(f"http://127.0.0.1:{port}{path}")
    if script_args:
        cmd += ["--", *script_args]
    t0 = os.times()
    p = subprocess.run(cmd, capture_output=True, text=True, preexec_fn=raise_nofile,
                       timeout=duration + 120)
    t1 = os.times()
    o = p.stdout
    m = re.search(r"Requests/sec:\s+([\d.]+)", o)
    if not m:
        raise RuntimeError("wrk failed: " + o + p.stderr)
    r = {"rps": float(m.group(1)), "requests": int(re.search(r"(\d+) requests in", o).group(1)),
         "errors": 0, "non2xx": 0, "cmd": " ".join(cmd[3:])}
    # The client's CPU per request: with one wrk thread it bounds req/s, and it depends on
    # the server (bench/RESULTS.md, "Why a faster server gets fewer req/s").
    wrk_s = (t1.children_user - t0.children_user) + (t1.children_system - t0.children_system)
    r["client_us"] = wrk_s * 1e6 / max(r["requests"], 1)
    for pct, key in (("50", "p50"), ("99", "p99")):
        m = re.search(rf"^\s+{pct}%\s+([\d.]+)(us|ms|s)\s*$", o, re.M)
        r[key] = unit_us(*m.groups()) if m else float("nan")
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", o)
    if m:
        r["errors"] = sum(map(int, m.groups()))
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", o)
    if m:
        r["non2xx"] = int(m.group(1))
    m = re.search(r"Transfer/sec:\s+([\d.]+)(B|KB|MB|GB)", o)
    if m:
        r["bps"] = float(m.group(1)) * {"B": 1, "KB": 1024, "MB": 1 << 20, "GB": 1 << 30}[m.group(2)]
    return r


def h2load(port, path, ae, conns, duration, pipeline=1):
    # -N 5: a connection that receives nothing for 5 s fails (wrk --timeout 5s likewise)
    cmd = ["taskset", "-c", CLIENT_CPU, "h2load", "--h1", "-t1", f"-c{conns}", f"-D{duration}",
           "-N5"]
    if pipeline > 1:
        cmd.append(f"-m{pipeline}")
    if ae:
        cmd += ["-H", f"Accept-Encoding: {ae}"]
    cmd.append(f"http://127.0.0.1:{port}{path}")
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, preexec_fn=raise_nofile,
                           timeout=duration + 120)
    except subprocess.TimeoutExpired:
        # A server too slow to finish its requests (lighttpd compressing W2 on the fly for
        # 1500 connections did once): h2load is killed, the cell says so, the run goes on.
        return {"rps": float("nan"), "requests": 0, "failed": 0, "hung": True, "non2xx": 0,
                "cmd": " ".join(cmd[3:])}
    o = p.stdout
    m = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, "
                  r"(\d+) failed, (\d+) errored, (\d+) timeout", o)
    if not m:
        raise RuntimeError("h2load failed: " + o + p.stderr)
    tot, _, done, ok, failed, errored, timeout = map(int, m.groups())
    m2 = re.search(r"finished in ([\d.]+)(s|ms), ([\d.]+) req/s", o)
    st = re.search(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", o)
    return {"rps": float(m2.group(3)), "requests": ok, "failed": failed + errored + timeout,
            "non2xx": int(st.group(3)) + int(st.group(4)) if st else 0,
            "cmd": " ".join(cmd[3:])}


# ---- measurement ----------------------------------------------------------------

def served_files():
    """Every file a server of this harness answers from: servd's pack, the
    peers' tree (with the sidecars) and lighttpd's deflate cache."""
    files = [os.path.join(WORK, "site.lmdb")]
    for root in ("www", "lighttpd-cache"):
        for d, _, names in os.walk(os.path.join(WORK, root)):
            files += [os.path.join(d, n) for n in names]
    return [f for f in files if os.path.isfile(f)]


def settle_page_cache(mode):
    """Puts every served file in the same page-cache state before a server
    starts. A file's pages stay in the large folios they were written in
    until the kernel drops them; read back, they come in as 4 KiB pages, and
    sendfile from those costs the servers 3-14% more CPU per W2 response
    (servd 14%, nginx 7%, lighttpd 3%: bench/RESULTS.md). This machine drops clean pages every few
    minutes, so without this a cell's result would depend on when that last
    happened. fresh: rewrite each file (copy, rename over it; owner and
    times kept), the state just after a deploy; evict: drop its pages
    (posix_fadvise DONTNEED), the state after a restart; asis: nothing."""
    for f in served_files():
        if mode == "fresh":
            st = os.stat(f)
            tmp = f + ".settle"
            shutil.copy2(f, tmp)
            os.chown(tmp, st.st_uid, st.st_gid)
            os.rename(tmp, f)
        elif mode == "evict":
            fd = os.open(f, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def measure(name, wl, c, a, with_h2load):
    path, ae, _ = WORKLOADS[wl]
    settle_page_cache(a.page_cache)
    srv = Server(name, wl, a.build, a.servd_arg)
    try:
        check_response(name, srv.port, path, ae)
        wrk(srv.port, path, ae, min(c, 50), 1)  # warm-up (and lighttpd's deflate cache)
        c0 = srv.cpu()
        r = wrk(srv.port, path, ae, c, a.duration)
        r["cpu_us"] = (srv.cpu() - c0) * 1e6 / max(r["requests"], 1)
        if with_h2load:
            h = h2load(srv.port, path, ae, c, a.h2load_duration)
            r["h2_failed"], r["h2_rps"] = h["failed"], h["rps"]
            r["h2_hung"] = h.get("hung", False)
            r["h2_cmd"] = h["cmd"]
        r["hwm_kib"] = srv.hwm_kib()
    finally:
        srv.stop()
    return r


def measure_pipe(name, wl, a):
    path, ae, _ = WORKLOADS[wl]
    settle_page_cache(a.page_cache)
    srv = Server(name, wl, a.build, a.servd_arg)
    try:
        check_response(name, srv.port, path, ae)
        h2load(srv.port, path, ae, 10, 1, a.pipeline)  # warm-up
        c0 = srv.cpu()
        r = h2load(srv.port, path, ae, a.pipe_conns, a.duration, a.pipeline)
        r["cpu_us"] = (srv.cpu() - c0) * 1e6 / max(r["requests"], 1)
        r["hwm_kib"] = srv.hwm_kib()
    finally:
        srv.stop()
    return r


def k(v):
    return f"{v / 1000:.1f}k" if v >= 1000 else f"{v:.0f}"


def ms(us):
    return f"{us / 1000:.2f}" if us == us else "-"


def med(runs, key):
    vals = [r[key] for r in runs if key in r]
    return statistics.median(vals) if vals else float("nan")


def cpu_model():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def versions(build, servers):
    v = {"servd": out(f"{build}/servd --version").splitlines()[0] + " (git " +
         out(f"git -C {ROOT} rev-parse --short HEAD") + ")",
         "wrk": out("wrk -v 2>&1 | head -1").split(" [")[0],
         "h2load": out("h2load --version"), "kernel": platform.release()}
    q = {"nginx": "nginx -v 2>&1", "nginx-ofc": "nginx -v 2>&1", "h2o": "h2o --version | head -1",
         "lighttpd": "lighttpd -v | head -1", "caddy": "caddy version",
         "apache": "apache2 -v | head -1"}
    for s in servers:
        if s in q:
            v[s] = out(q[s])
    return v


def plots(res, servers, wls, conns, plotdir):
    """req/s and p99 against concurrency, one PNG each per workload (gnuplot)."""
    os.makedirs(plotdir, exist_ok=True)
    files = []
    for wl in wls:
        names = [s for s in servers if (wl, conns[0], s) in res]
        dat = os.path.join(WORK, f"plot-{wl}.dat")
        with open(dat, "w") as f:
            f.write("c " + " ".join(names) + "\n")
            for c in conns:
                row = [str(c)]
                for s in names:
                    runs = res.get((wl, c, s), [])
                    row.append(f"{med(runs, 'rps'):.0f} {med(runs, 'p99') / 1000:.3f}"
                               if runs else "? ?")
                f.write(" ".join(row) + "\n")
        for what, col, ylabel in (("rps", 0, "requests/s (median)"), ("p99", 1, "p99 latency (ms)")):
            png = os.path.join(plotdir, f"http-{wl}-{what}.png")
            lines = ", ".join(f"'{dat}' using 1:{2 + 2 * i + col} with linespoints title '{s}'"
                              for i, s in enumerate(names))
            gp = (f"set terminal pngcairo size 800,480 noenhanced\nset output '{png}'\n"
                  f"set title '{wl}: {ylabel} against concurrency (server on 1 core, wrk -t1)'\n"
                  f"set xlabel 'connections'\nset ylabel '{ylabel}'\nset key outside right\n"
                  f"set grid\nset xtics ({', '.join(str(c) for c in conns)})\n"
                  f"set yrange [0:*]\nset datafile missing '?'\nplot {lines}\n")
            gpf = os.path.join(WORK, f"plot-{wl}-{what}.gp")
            with open(gpf, "w") as f:
                f.write(gp)
            r = subprocess.run(["gnuplot", gpf], capture_output=True, text=True)
            if r.returncode != 0 and "pngcairo" in r.stderr:  # gnuplot-nox without cairo
                with open(gpf, "w") as f:
                    f.write(gp.replace("pngcairo", "png"))
                r = subprocess.run(["gnuplot", gpf], capture_output=True, text=True)
            if r.returncode == 0:
                files.append(png)
            else:
                print("gnuplot:", r.stderr, file=sys.stderr)
    return files


def report(a, res, pipe, servers, wls, conns, started, load0, plotfiles):
    L = []
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    L.append("## HTTP: servd against the peers" + (" (quick mode)" if a.quick else ""))
    L.append("")
    L.append(f"- Date: {now} (started {started})")
    L.append(f"- Machine: {os.cpu_count()} cores (`nproc`), {cpu_model()}, Linux "
             f"{platform.release()}; load average at the start {load0}, at the end "
             f"{' '.join(open('/proc/loadavg').read().split()[:3])} (the machine is shared: "
             "compare ratios within this run)")
    L.append("- Versions: " + "; ".join(f"{k_}: {v}" for k_, v in versions(a.build, servers).items()))
    L.append(f"- Command: `{' '.join(['bench/http/run.py'] + sys.argv[1:])}`: {a.rounds} "
             f"interleaved round(s) of {a.duration} s per cell (server order rotated each "
             f"round), a fresh server per measurement "
             f"(served files' page cache: {a.page_cache}, see settle_page_cache()), "
             f"server `taskset -c {SERVER_CPU}` with one worker, load generator `taskset -c "
             f"{CLIENT_CPU}`, ulimit -n {resource.getrlimit(resource.RLIMIT_NOFILE)[0]}")
    L.append("- Load: `wrk -t1 -cC -dDs --latency --timeout 5s [-H 'Accept-Encoding: gzip'] URL`; "
             f"failed requests: `h2load --h1 -t1 -cC -D{a.h2load_duration}` once per cell (first "
             f"round); pipelined: `h2load --h1 -t1 -c{a.pipe_conns} -m{a.pipeline} -D{a.duration}`")
    L.append("- CPU us/req: utime+stime of the server's process tree over the wrk run / requests "
             "(wrk CPU: the same for the load generator, which bounds req/s with one wrk thread); "
             "peak RSS: VmHWM of the serving process after the run (fresh process per cell). "
             "Peers' configs: bench/http/peers/ (= /work/shared/brief/peers/). servd serves its "
             "own pack of the same tree (its gzip variant of app.js comes from servd-pack, the "
             "peers' from `gzip -9 -n`).")
    L.append("")
    L.append("| workload | c | server | req/s median (min-max) | vs ceiling | p50 ms | p99 ms | "
             "socket errors | h2load failed | CPU us/req | wrk CPU us/req | peak RSS MiB |")
    L.append("|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for wl in wls:
        for c in conns:
            ceil = med(res.get((wl, c, "ceiling"), []), "rps")
            for s in servers:
                runs = res.get((wl, c, s))
                if not runs:
                    continue
                rps = [r["rps"] for r in runs]
                vs = f"{med(runs, 'rps') / ceil:.3f}" if ceil == ceil and ceil else "-"
                h2 = [r["h2_failed"] for r in runs if "h2_failed" in r]
                err = sum(r["errors"] for r in runs)
                bad = sum(r["non2xx"] for r in runs)
                L.append(f"| {wl} | {c} | {s} | {k(med(runs, 'rps'))} ({k(min(rps))}-{k(max(rps))})"
                         f" | {vs} | {ms(med(runs, 'p50'))} | {ms(med(runs, 'p99'))} | {err}"
                         f"{f' (+{bad} non-2xx)' if bad else ''} | "
                         f"{sum(h2) if h2 else '-'}"
                         f"{' (h2load hung: killed)' if any(r.get('h2_hung') for r in runs) else ''}"
                         f" | {med(runs, 'cpu_us'):.2f} | "
                         f"{med(runs, 'client_us'):.2f} | "
                         f"{max(r['hwm_kib'] for r in runs) / 1024:.1f} |".replace("nan", "-"))
    if pipe:
        L.append("")
        L.append(f"Pipelined (`h2load --h1 -t1 -c{a.pipe_conns} -m{a.pipeline} -D{a.duration}`):")
        L.append("")
        L.append("| workload | server | req/s median (min-max) | vs ceiling | vs h2o | failed | "
                 "CPU us/req |")
        L.append("|---|---|---|---:|---:|---:|---:|")
        for wl in sorted({w for w, _ in pipe}, key=wls.index):
            ceil = med(pipe.get((wl, "ceiling"), []), "rps")
            h2o_ = med(pipe.get((wl, "h2o"), []), "rps")
            for s in servers:
                runs = pipe.get((wl, s))
                if not runs:
                    continue
                rps = [r["rps"] for r in runs]
                m = med(runs, "rps")
                L.append(f"| {wl} | {s} | {k(m)} ({k(min(rps))}-{k(max(rps))}) | "
                         f"{m / ceil:.3f} | {m / h2o_:.2f} | {sum(r['failed'] for r in runs)}"
                         f"{' (hung)' if any(r.get('hung') for r in runs) else ''} | "
                         f"{med(runs, 'cpu_us'):.2f} |".replace("nan", "-"))
    L += [""] + targets(res, pipe, conns)
    if plotfiles:
        L.append("")
        L.append("Plots: " + ", ".join(f"[{os.path.basename(p)}](plots/{os.path.basename(p)})"
                                        for p in plotfiles))
    return "\n".join(L) + "\n"


def verdict(ok, text):
    return f"{'met' if ok else '**missed**'}: {text}"


def targets(res, pipe, conns):
    """PERF.md's targets for servd, checked against this run."""
    T = ["### Targets (PERF.md), this run", ""]

    def best_peer(wl, c, key, lowest):
        vals = [(med(res[(wl, c, s)], key), s) for s in PORTS
                if s not in ("servd", "servd-base", "ceiling") and (wl, c, s) in res]
        vals = [v for v in vals if v[0] == v[0]]
        if not vals:
            return None, None
        return min(vals) if lowest else max(vals)

    for wl in ("w1", "w2pre"):
        for c in conns:
            sv = res.get((wl, c, "servd"))
            if not sv:
                continue
            rps = med(sv, "rps")
            ceil = med(res.get((wl, c, "ceiling"), []), "rps")
            if ceil == ceil:
                T.append(f"- {wl} c={c}: within 3% of the ceiling: " +
                         verdict(rps >= 0.97 * ceil, f"{rps / ceil:.3f} of {k(ceil)}"))
            b, bs = best_peer(wl, c, "rps", False)
            if b:
                T.append(f"- {wl} c={c}: >= the best peer ({bs} {k(b)}): " +
                         verdict(rps >= b, f"servd {k(rps)}, {rps / b:.3f}x"))
            p, ps = best_peer(wl, c, "p99", True)
            if p:
                sp = med(sv, "p99")
                T.append(f"- {wl} c={c}: lowest p99 of all peers ({ps} {ms(p)} ms): " +
                         verdict(sp <= p, f"servd {ms(sp)} ms"))
        c = max(conns)
        sv = res.get((wl, c, "servd"))
        if sv:
            e = sum(r["errors"] + r["non2xx"] for r in sv)
            f = sum(r.get("h2_failed", 0) for r in sv)
            hung = any(r.get("h2_hung") for r in sv)
            T.append(f"- {wl} c={c}: 0 socket errors and 0 failed requests: " +
                     verdict(e == 0 and f == 0 and not hung,
                             f"{e} socket errors, {f} h2load failed"
                             f"{', h2load hung' if hung else ''}"))
    c0 = conns[0]
    sv = res.get(("w1", c0, "servd"))
    h2 = res.get(("w1", c0, "h2o"))
    if sv and h2:
        r = med(sv, "cpu_us") / med(h2, "cpu_us")
        T.append(f"- w1 c={c0}: CPU per request <= 0.85x h2o's: " +
                 verdict(r <= 0.85, f"servd {med(sv, 'cpu_us'):.2f} us, h2o "
                         f"{med(h2, 'cpu_us'):.2f} us: {r:.2f}x"))
    sv = res.get(("w2pre", c0, "servd"))
    b, bs = best_peer("w2pre", c0, "cpu_us", True)
    if sv and b:
        r = med(sv, "cpu_us") / b
        T.append(f"- w2pre c={c0}: CPU per request <= 0.9x the best peer's ({bs}): " +
                 verdict(r <= 0.9, f"servd {med(sv, 'cpu_us'):.2f} us, {bs} {b:.2f} us: {r:.2f}x"))
    if ("w1", "servd") in pipe and ("w1", "h2o") in pipe:
        r = med(pipe[("w1", "servd")], "rps") / med(pipe[("w1", "h2o")], "rps")
        T.append("- pipelined w1 >= 1.5x h2o: " + verdict(r >= 1.5, f"{r:.2f}x"))
    hw = [max(r["hwm_kib"] for r in res[(wl, 1000, "servd")]) for wl in ("w1", "w2pre")
          if (wl, 1000, "servd") in res]
    if hw:
        T.append("- peak RSS <= 8 MiB at c=1000: " + verdict(max(hw) <= 8192,
                                                              f"{max(hw) / 1024:.1f} MiB"))
    return T


def write_results(path, section):
    """Replaces the HTTP section of RESULTS.md (between markers), keeping the rest."""
    begin, end = "<!-- http:begin (bench/http/run.py) -->", "<!-- http:end -->"
    text = open(path).read() if os.path.exists(path) else "# Benchmark results\n"
    block = f"{begin}\n{section}{end}\n"
    if begin in text and end in text:
        pre, rest = text.split(begin, 1)
        text = pre + block + rest.split(end, 1)[1].lstrip("\n")
    else:
        text = text.rstrip("\n") + "\n\n" + block
    with open(path, "w") as f:
        f.write(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true",
                    help="under 3 minutes: 1 round of 2 s, c=100,1000, 5 servers, no w2fly")
    ap.add_argument("--rounds", type=int, help="interleaved rounds (3; quick: 1)")
    ap.add_argument("--duration", type=int, help="seconds per wrk run (10; quick: 3)")
    ap.add_argument("--h2load-duration", type=int, help="seconds per h2load run (5; quick: 2)")
    ap.add_argument("--conns", help="concurrencies (100,500,1000,1500; quick: 100,1000)")
    ap.add_argument("--servers", help=f"{','.join(ALL_SERVERS)} (quick: {','.join(QUICK_SERVERS)})")
    ap.add_argument("--workloads", help="w1,w2pre,w2fly (quick: w1,w2pre)")
    ap.add_argument("--pipeline", type=int, default=8, help="h2load -m for the pipelined run")
    ap.add_argument("--pipe-conns", type=int, default=100)
    ap.add_argument("--no-pipe", action="store_true")
    ap.add_argument("--no-h2load", action="store_true", help="skip the failed-request runs")
    ap.add_argument("--servd-arg", action="append", default=[], help="extra servd option")
    ap.add_argument("--build", default=os.path.join(ROOT, "build-bench"))
    ap.add_argument("--base-build", help="A/B comparison: server 'servd-base' runs the servd "
                    "of this build directory (e.g. a build of the previous commit)")
    ap.add_argument("--page-cache", choices=["fresh", "evict", "asis"], default="fresh",
                    help="page-cache state of the served files before each server starts: "
                         "rewritten (fresh, default), dropped (evict) or untouched (asis)")
    ap.add_argument("--no-install", action="store_true")
    ap.add_argument("--no-build", action="store_true", help="use the servd already in --build")
    ap.add_argument("--results", default=None,
                    help="file whose HTTP section is replaced (full mode: bench/RESULTS.md)")
    ap.add_argument("--plots", help="PNG directory (full mode: bench/plots; quick: "
                    f"{WORK}/plots, so a quick run never replaces the committed plots)")
    a = ap.parse_args()
    dflt = (dict(rounds=1, duration=2, h2load_duration=1, conns="100,1000",
                 servers=",".join(QUICK_SERVERS), workloads="w1,w2pre") if a.quick else
            dict(rounds=3, duration=10, h2load_duration=5, conns="100,500,1000,1500",
                 servers=",".join(ALL_SERVERS), workloads="w1,w2pre,w2fly"))
    for key, v in dflt.items():
        if getattr(a, key) is None:
            setattr(a, key, v)
    if a.results is None and not a.quick:
        a.results = os.path.join(ROOT, "bench", "RESULTS.md")
    if a.plots is None:
        a.plots = os.path.join(WORK, "plots") if a.quick else os.path.join(ROOT, "bench", "plots")
    servers = a.servers.split(",")
    BASE_BUILD[0] = a.base_build
    if "servd-base" in servers and not a.base_build:
        sys.exit("servd-base needs --base-build DIR")
    wls = a.workloads.split(",")
    conns = [int(c) for c in a.conns.split(",")]
    for s in servers:
        if s not in PORTS:
            sys.exit(f"unknown server {s}; known: {', '.join(ALL_SERVERS)}")
    started = datetime.datetime.now(datetime.timezone.utc).strftime("%H:%M UTC")
    load0 = " ".join(open("/proc/loadavg").read().split()[:3])
    os.makedirs(WORK, exist_ok=True)
    raise_nofile()
    signal.signal(signal.SIGTERM, stop_all)
    signal.signal(signal.SIGINT, stop_all)
    ensure_tools(a.build, servers, a.no_install, a.no_build)
    fixtures(a.build)

    res, pipe = {}, {}
    t0 = time.time()
    for rnd in range(a.rounds):
        for wl in wls:
            only = WORKLOADS[wl][2]
            for c in conns:
                # rotated each round: the first slot after a heavy cell is
                # measurably worse (bench/RESULTS.md, 2026-12-01, p99)
                k = rnd % len(servers)
                for s in servers[k:] + servers[:k]:
                    if only and s not in only:
                        continue
                    r = measure(s, wl, c, a, with_h2load=(rnd == 0 and not a.no_h2load))
                    res.setdefault((wl, c, s), []).append(r)
                    print(f"[{time.time() - t0:5.0f}s] round {rnd + 1} {wl} c={c} {s}: "
                          f"{r['rps']:.0f} req/s p99 {ms(r['p99'])} ms cpu {r['cpu_us']:.2f} "
                          f"us/req (wrk {r['client_us']:.2f}) err {r['errors']}+{r['non2xx']} "
                          f"h2load failed "
                          f"{r.get('h2_failed', '-')} rss {r['hwm_kib'] / 1024:.1f} MiB",
                          flush=True)
        if not a.no_pipe:
            for wl in [w for w in wls if w in ("w1", "w2pre")]:
                for s in servers:
                    r = measure_pipe(s, wl, a)
                    pipe.setdefault((wl, s), []).append(r)
                    print(f"[{time.time() - t0:5.0f}s] round {rnd + 1} pipelined {wl} {s}: "
                          f"{r['rps']:.0f} req/s cpu {r['cpu_us']:.2f} us/req failed "
                          f"{r['failed']}", flush=True)
    plotfiles = plots(res, servers, wls, conns, a.plots) if len(conns) > 1 else []
    section = report(a, res, pipe, servers, wls, conns, started, load0, plotfiles)
    print(section)
    if a.results:
        write_results(a.results, section)
        print(f"written to {a.results}")


if __name__ == "__main__":
    main()
