#!/usr/bin/env python3
"""A real-site workload: servd against nginx on many files, mixed encodings and
conditional requests (PERF.md "later: a real-site mix").

The site is www/ plus the dist folders of a few npm packages: the tree
bench/pack/run.sh builds (bench/pack/.cache/site-npm) when it is there, else
www/ plus vue, jquery, lodash and bootstrap fetched with `npm pack` into
bench/http/.cache. servd serves `servd-pack build` of the tree; nginx (one
worker, open_file_cache, sendfile, no access log) serves the same tree with a
`gzip -9 -n` sidecar beside every compressible file (gzip_static).

The request list: every file, each asked for by a mix of clients, shuffled
with a fixed seed:
  40% a Chromium     Accept-Encoding: gzip, deflate, br, zstd
  30% a Firefox      Accept-Encoding: gzip, deflate, br
  20% a CDN          Accept-Encoding: br, gzip        (Cloudflare's origin fetch)
  10% curl           no Accept-Encoding
and one request in three revalidates: If-None-Match with the ETag that this
server gave for that file and that Accept-Encoding (fetched before the run), so
it must answer 304. wrk (-t1, bench/http/site.lua) cycles through the list.
Before the load, every request of the list is sent once and its status and
body bytes are counted, so the report says what each server answered.

    bench/http/site.py [--rounds 3] [--duration 10] [--conns 100,1000]
                       [--build DIR] [--results bench/RESULTS.md]
"""
import argparse
import datetime
import http.client
import os
import random
import shutil
import statistics
import subprocess
import sys
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import run  # noqa: E402

SITE_PORTS = {"servd": 26093, "nginx": 26094}
PROFILES = [("chromium", "gzip, deflate, br, zstd", 4), ("firefox", "gzip, deflate, br", 3),
            ("cdn", "br, gzip", 2), ("curl", None, 1)]
COMPRESSIBLE = {".html", ".css", ".js", ".mjs", ".json", ".svg", ".txt", ".xml", ".map", ".ico",
                ".md", ".cjs", ".ts"}
NPM = [("vue", "2.7.16", "dist"), ("jquery", "3.7.1", "dist"), ("lodash", "4.17.21", None),
       ("bootstrap", "5.3.3", "dist")]

NGINX_SITE = """worker_processes 1;
worker_rlimit_nofile 16384;
daemon off;
master_process on;
user www-data;
pid {work}/nginx-site.pid;
error_log {work}/nginx-site-error.log warn;
events {{ worker_connections 8192; use epoll; }}
http {{
    include /etc/nginx/mime.types;
    default_type application/octet-stream;
    access_log off;
    open_file_cache max=10000 inactive=60s;
    open_file_cache_valid 60s;
    sendfile on;
    tcp_nopush on;
    tcp_nodelay on;
    keepalive_timeout 65;
    keepalive_requests 1000000;
    gzip_static on;
    gzip_vary on;
    server {{
        listen 127.0.0.1:{port} backlog=4096;
        root {root};
    }}
}}
"""


def site_tree():
    """The site's files, copied to WORK/site (nginx adds sidecars there)."""
    dst = os.path.join(run.WORK, "site")
    shutil.rmtree(dst, ignore_errors=True)
    src = os.path.join(run.ROOT, "bench", "pack", ".cache", "site-npm")
    if os.path.isdir(src):
        shutil.copytree(src, dst)
        origin = "bench/pack/.cache/site-npm (www/ plus npm dist folders, bench/pack/run.sh)"
    else:
        shutil.copytree(os.path.join(run.ROOT, "www"), dst)
        for pkg, ver, sub in NPM:
            d = os.path.dirname(run.npm_file(pkg, ver, "package.json", None))
            shutil.copytree(os.path.join(d, sub) if sub else d,
                            os.path.join(dst, "vendor", f"{pkg}-{ver}"),
                            ignore=shutil.ignore_patterns("*.md", "package.json", "*.ts"))
        origin = "www/ plus " + ", ".join(f"{p}@{v}" for p, v, _ in NPM)
    files = []
    for d, _, names in os.walk(dst):
        for n in sorted(names):
            files.append(os.path.relpath(os.path.join(d, n), dst))
    return dst, sorted(files), origin


def prepare(build):
    root, files, origin = site_tree()
    pack = os.path.join(run.WORK, "site-real.lmdb")
    run.sh(f"{build}/servd-pack build {root} -o {pack} -q")
    gz = 0
    for f in files:
        if os.path.splitext(f)[1].lower() in COMPRESSIBLE:
            run.sh(f"gzip -9 -n -k -f '{os.path.join(root, f)}'")
            gz += 1
    run.sh(f"chmod -R a+rX {root}")
    conf = os.path.join(run.WORK, "nginx-site.conf")
    with open(conf, "w") as fh:
        fh.write(NGINX_SITE.format(work=run.WORK, port=SITE_PORTS["nginx"], root=root))
    size = sum(os.path.getsize(os.path.join(root, f)) for f in files)
    return {"root": root, "files": files, "pack": pack, "conf": conf, "origin": origin,
            "gz": gz, "bytes": size}


def url(f):
    return "/" + urllib.parse.quote(f)


def request_list(files):
    """(path, accept-encoding, conditional) tuples: every file x the client mix."""
    slots = [p for p in PROFILES for _ in range(p[2])]
    reqs = []
    n = 0
    for f in files:
        for prof in slots:
            reqs.append((url(f), prof[1], n % 3 == 0))
            n += 1
    random.Random(1).shuffle(reqs)
    return reqs


def fetch(port, path, ae, inm=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    h = {}
    if ae:
        h["Accept-Encoding"] = ae
    if inm:
        h["If-None-Match"] = inm
    c.request("GET", path, headers=h)
    r = c.getresponse()
    body = r.read()
    c.close()
    return r.status, r.getheader("ETag"), r.getheader("Content-Encoding") or "identity", len(body)


def materialise(port, reqs, listfile):
    """Writes the request list for this server (its own ETags) and answers it once."""
    etags = {}
    stats = {"status": {}, "enc": {}, "bytes": 0}
    with open(listfile, "w") as fh:
        for path, ae, cond in reqs:
            inm = ""
            if cond:
                key = (path, ae)
                if key not in etags:
                    etags[key] = fetch(port, path, ae)[1] or ""
                inm = etags[key]
            fh.write(f"{path}\t{ae or ''}\t{inm}\n")
            st, _, enc, n = fetch(port, path, ae, inm or None)
            stats["status"][st] = stats["status"].get(st, 0) + 1
            if st == 200:
                stats["enc"][enc] = stats["enc"].get(enc, 0) + 1
            stats["bytes"] += n
    return stats


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--conns", default="100,1000")
    ap.add_argument("--build", default=os.path.join(run.ROOT, "build-bench"))
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--results", default=None)
    a = ap.parse_args()
    run.raise_nofile()
    os.makedirs(run.WORK, exist_ok=True)
    run.ensure_tools(a.build, ["servd", "nginx"], False, a.no_build)
    site = prepare(a.build)
    reqs = request_list(site["files"])
    conns = [int(c) for c in a.conns.split(",")]
    started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    load0 = " ".join(open("/proc/loadavg").read().split()[:3])
    lua = os.path.join(HERE, "site.lua")
    answered, res = {}, {}
    for rnd in range(a.rounds):
        for c in conns:
            for name in ("servd", "nginx"):
                srv = start(name, a.build, site)
                try:
                    lst = os.path.join(run.WORK, f"site-{name}.txt")
                    if name not in answered:
                        answered[name] = materialise(srv.port, reqs, lst)
                    run.wrk(srv.port, "/", None, min(c, 50), 1, script=lua, script_args=[lst])
                    c0 = srv.cpu()
                    r = run.wrk(srv.port, "/", None, c, a.duration, script=lua, script_args=[lst])
                    r["cpu_us"] = (srv.cpu() - c0) * 1e6 / max(r["requests"], 1)
                    r["hwm_kib"] = srv.hwm_kib()
                finally:
                    srv.stop()
                res.setdefault((c, name), []).append(r)
                print(f"round {rnd + 1} site c={c} {name}: {r['rps']:.0f} req/s p99 "
                      f"{run.ms(r['p99'])} ms cpu {r['cpu_us']:.2f} us/req err {r['errors']}",
                      flush=True)
    section = report(a, site, reqs, answered, res, conns, started, load0)
    print(section)
    if a.results:
        write_section(a.results, section)


def start(name, build, site):
    """A fresh servd or nginx for the site on core SERVER_CPU."""
    if name == "servd":
        srv = run.Server.__new__(run.Server)
        argv = [f"{build}/servd", "--pack", site["pack"], "--workers", "1", "--listen",
                f"127.0.0.1:{SITE_PORTS['servd']}"]
    else:
        srv = run.Server.__new__(run.Server)
        argv = ["nginx", "-c", site["conf"]]
    srv.name, srv.port = name, SITE_PORTS[name]
    srv.log = open(os.path.join(run.WORK, f"site-{name}.stderr"), "w")
    srv.proc = subprocess.Popen(["taskset", "-c", run.SERVER_CPU] + argv,
                                preexec_fn=run.raise_nofile, stdout=srv.log, stderr=srv.log,
                                start_new_session=True)
    srv.pid = srv.proc.pid
    run.RUNNING.append(srv)
    run.wait_port(srv.port, srv.proc)
    return srv


def report(a, site, reqs, answered, res, conns, started, load0):
    L = ["## HTTP: a real site, servd against nginx", ""]
    L.append(f"- Date: {started}; machine: {os.cpu_count()} cores, {run.cpu_model()}; load "
             f"average at the start {load0}, at the end "
             f"{' '.join(open('/proc/loadavg').read().split()[:3])}")
    L.append(f"- Versions: servd {run.out(a.build + '/servd --version').splitlines()[0]}; "
             f"{run.out('nginx -v 2>&1')}; {run.out('wrk -v 2>&1 | head -1').split(' [')[0]}")
    L.append(f"- Command: `bench/http/site.py {' '.join(sys.argv[1:])}` ({a.rounds} interleaved "
             f"rounds of {a.duration} s, server on core {run.SERVER_CPU}, `wrk -t1 -s "
             "bench/http/site.lua` on core 0)")
    L.append(f"- Site: {len(site['files'])} files, {site['bytes']:,} bytes, from "
             f"{site['origin']}; nginx gets {site['gz']} `gzip -9 -n` sidecars and "
             "`gzip_static on`, open_file_cache, sendfile; servd its `servd-pack build`")
    L.append(f"- Requests: {len(reqs)} (every file x Chromium 40% / Firefox 30% / CDN `br, gzip`"
             " 20% / curl without Accept-Encoding 10%; one in three with the right "
             "If-None-Match), shuffled, cycled by wrk")
    L.append("")
    L.append("What each server answered to one pass over the list:")
    L.append("")
    L.append("| server | 200 | 304 | other | 200 by content coding | body bytes per request |")
    L.append("|---|---:|---:|---:|---|---:|")
    for name in ("servd", "nginx"):
        s = answered.get(name)
        if not s:
            continue
        other = sum(v for k_, v in s["status"].items() if k_ not in (200, 304))
        enc = ", ".join(f"{k_} {v}" for k_, v in sorted(s["enc"].items()))
        L.append(f"| {name} | {s['status'].get(200, 0)} | {s['status'].get(304, 0)} | {other} | "
                 f"{enc} | {s['bytes'] / len(reqs):,.0f} |")
    L.append("")
    L.append("| c | server | req/s median (min-max) | p50 ms | p99 ms | socket errors | "
             "CPU us/req | transfer MB/s | peak RSS MiB |")
    L.append("|---:|---|---|---:|---:|---:|---:|---:|---:|")
    for c in conns:
        for name in ("servd", "nginx"):
            runs = res.get((c, name))
            if not runs:
                continue
            rps = [r["rps"] for r in runs]
            L.append(f"| {c} | {name} | {run.k(run.med(runs, 'rps'))} ({run.k(min(rps))}-"
                     f"{run.k(max(rps))}) | {run.ms(run.med(runs, 'p50'))} | "
                     f"{run.ms(run.med(runs, 'p99'))} | {sum(r['errors'] for r in runs)} | "
                     f"{run.med(runs, 'cpu_us'):.2f} | "
                     f"{statistics.median(r.get('bps', 0) for r in runs) / 1e6:.1f} | "
                     f"{max(r['hwm_kib'] for r in runs) / 1024:.1f} |")
    return "\n".join(L) + "\n"


def write_section(path, section):
    begin, end = "<!-- site:begin (bench/http/site.py) -->", "<!-- site:end -->"
    text = open(path).read() if os.path.exists(path) else "# Benchmark results\n"
    block = f"{begin}\n{section}{end}\n"
    if begin in text and end in text:
        pre, rest = text.split(begin, 1)
        text = pre + block + rest.split(end, 1)[1].lstrip("\n")
    else:
        text = text.rstrip("\n") + "\n\n" + block
    with open(path, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
