#!/usr/bin/env python3
"""What adversarial requests cost servd, by input size (an algorithmic-complexity audit).

    bench/http/adversarial.py callgrind|cpu [--build DIR] [--pack SITE.lmdb]
        [--cases a,b] [--sizes 10,100,1000,0] [-n N] [--send ka|pipe|trickleK]
        [--extra "SERVD ARGS"] [--port P]

Starts servd (--workers 1; under valgrind --tool=callgrind for "callgrind") and sends
each case's request N times on one keep-alive connection (--send ka), pipelined in one
write (pipe), or K bytes per send with a pause between sends (trickleK: a head arriving
in pieces). Each case is a request whose cost depends on a size: the tokens of an
Accept-Encoding, the entity-tags of an If-None-Match, the range-specs of a Range, the
segments of a path, the elements of an X-Forwarded-For (with --extra "--access-log
/dev/null --real-ip-header X-Forwarded-For --real-ip-from 127.0.0.0/8") and so on; size
0 is the largest that fits servd's limits (SV_MAX_HEAD, SV_MAX_REQUEST_LINE,
SV_MAX_HEADERS). Prints per case and size: the request's bytes, the statuses answered,
and user-space instructions per request (callgrind: the counters are zeroed before the
N requests and dumped after; the dumps are kept in --out, named case.size.cg) or the
servd process's CPU time per request (cpu: utime + stime from /proc, 10 ms ticks).
Without --pack, the repository's www/ is packed into --out first.
"""
import argparse, glob, os, re, shlex, signal, socket, subprocess, sys, time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PORT = 26094
HOST = "Host: 127.0.0.1\r\n"
ETAG_IDX = LM_IDX = None  # GET /index.html's ETag and Last-Modified, read at the start


def req(path="/index.html", headers="", method="GET"):
    return f"{method} {path} HTTP/1.1\r\n{HOST}{headers}\r\n".encode()


def fit(item, k, sep, budget=31000):
    """value = sep.join(item(i) for i<k), cut to budget bytes (None when k doesn't fit)"""
    v = sep.join(item(i) for i in range(k))
    return None if len(v) > budget else v


def cases():
    c = {}
    c["baseline"] = lambda k: req(headers="Accept-Encoding: gzip, br\r\n") if k == 1 else None
    c["junk"] = lambda k: req(headers=f"X-Junk: {'a' * k}\r\n") if k < 31000 else None
    c["ae_tokens"] = lambda k: (lambda v: v and req(headers=f"Accept-Encoding: {v}\r\n"))(
        fit(lambda i: f"x{i}", k, ","))
    c["ae_q"] = lambda k: (lambda v: v and req(headers=f"Accept-Encoding: {v}\r\n"))(
        fit(lambda i: "gzip;q=0.5", k, ","))
    c["ae_punct"] = lambda k: req(headers=f"Accept-Encoding: {'~' * k}\r\n") if k < 31000 else None
    c["ae_ows"] = lambda k: req(headers=f"Accept-Encoding: gzip{' ' * k};q=1\r\n") if k < 31000 else None
    c["ae_lines"] = lambda k: req(headers="".join(f"Accept-Encoding: {'x,' * (k // 2)}gzip\r\n" for _ in range(97))) if 97 * (k + 30) < 31000 else None
    c["inm_tags"] = lambda k: (lambda v: v and req(headers=f"If-None-Match: {v}\r\n"))(
        fit(lambda i: f'"{i:022d}"', k, ","))
    c["inm_empty"] = lambda k: req(headers=f"If-None-Match: {',' * k}\r\n") if k < 31000 else None
    c["inm_lines"] = lambda k: req(headers="".join("If-None-Match: " + '"a",' * (k // 4) + '"b"\r\n' for _ in range(97))) if 97 * (k + 20) < 31000 else None
    c["im_tags"] = lambda k: (lambda v: v and req(headers=f"If-Match: {v}, {ETAG_IDX}\r\n"))(
        fit(lambda i: f'W/"{i:020d}"', k, ","))
    c["range_dup"] = lambda k: (lambda v: v and req(headers=f"Range: bytes={v}\r\n"))(
        fit(lambda i: "0-0", k, ","))
    c["range_rev"] = lambda k: (lambda v: v and req(headers=f"Range: bytes={v}\r\n"))(
        fit(lambda i: f"{2 * (k - i)}-{2 * (k - i)}", k, ","))
    c["range_16rev_dup"] = lambda k: (lambda v: v and req(headers=f"Range: bytes={v}\r\n"))(
        fit(lambda i: f"{2 * (15 - i % 16)}-{2 * (15 - i % 16)}", k, ","))
    c["range_merge"] = lambda k: (lambda v: v and req(headers=f"Range: bytes={v}\r\n"))(
        fit(lambda i: f"{2 * (i % 16)}-{2 * (i % 16)}" if i < k - 1 else "0-", k, ","))
    c["range_ifr"] = lambda k: (lambda v: v and req(headers=f"If-Range: {ETAG_IDX}\r\nRange: bytes={v}\r\n"))(
        fit(lambda i: f"{2 * (15 - i % 16)}-{2 * (15 - i % 16)}", k, ","))
    c["path_dot"] = lambda k: req(path="/" + "./" * k + "index.html") if 2 * k < 8100 else None
    c["path_dotdot"] = lambda k: req(path="/" + "a/../" * k + "index.html") if 5 * k < 8100 else None
    c["path_slash"] = lambda k: req(path="/" * k + "index.html") if k < 8100 else None
    c["path_pct"] = lambda k: req(path="/" + "%61" * k) if 3 * k < 8100 else None
    c["path_pctdir"] = lambda k: req(path="/" + "%61/" * k + "x") if 4 * k < 8100 else None
    c["query"] = lambda k: req(path="/index.html?" + "a" * k) if k < 8100 else None
    c["query_301"] = lambda k: req(path="/docs?" + "%" * k) if k < 8100 else None
    c["lines97"] = lambda k: req(headers="".join(f"X-{i}: {'a=b; ' * (k // 485)}\r\n" for i in range(97))) if k < 31000 else None
    c["longname"] = lambda k: req(headers=f"X-{'n' * k}: v\r\n") if k < 31000 else None
    c["ifr_date_range"] = lambda k: (lambda v: v and req(headers=f"If-Range: {LM_IDX}\r\nRange: bytes={v}\r\n"))(
        fit(lambda i: f"{2 * (15 - i % 16)}-{2 * (15 - i % 16)}", k, ","))
    c["ims_lines"] = lambda k: req(headers="".join(f"If-Modified-Since: {LM_IDX}\r\n" for _ in range(k))) if k <= 98 else None
    c["many_hdrs"] = lambda k: req(headers="".join(f"X-{i}: v\r\n" for i in range(k))) if k <= 99 else None
    c["xff"] = lambda k: (lambda v: v and req(headers=f"X-Forwarded-For: {v}\r\n"))(
        fit(lambda i: "127.0.0.1", k, ","))
    c["xff_lines"] = lambda k: req(headers="".join(f"X-Forwarded-For: {'127.0.0.1,' * (k // 10)}127.0.0.1\r\n" for _ in range(97))) if 97 * (k + 30) < 31000 else None
    return c


def read_responses(s, n, head=False):
    buf = b""
    got = 0
    statuses = []
    while got < n:
        i = buf.find(b"\r\n\r\n")
        if i < 0:
            d = s.recv(1 << 20)
            if not d:
                break
            buf += d
            continue
        h = buf[:i].decode("latin1")
        st = int(h.split(" ", 2)[1])
        m = re.search(r"(?im)^content-length:\s*(\d+)", h)
        bl = int(m.group(1)) if (m and not head and st != 304) else 0
        while len(buf) < i + 4 + bl:
            d = s.recv(1 << 20)
            if not d:
                break
            buf += d
        buf = buf[i + 4 + bl:]
        statuses.append(st)
        got += 1
    return statuses


def run_case(data, n, mode):
    s = socket.create_connection(("127.0.0.1", PORT))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    st = []
    if mode == "pipe":
        s.sendall(data * n)
        st = read_responses(s, n)
    elif mode.startswith("trickle"):
        step = int(mode[7:] or 1)
        for _ in range(n):
            for i in range(0, len(data), step):
                s.send(data[i:i + step])
                time.sleep(0.0003)
            st += read_responses(s, 1)
    else:
        for _ in range(n):
            s.sendall(data)
            st += read_responses(s, 1)
    s.close()
    return st


def proc_cpu(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def start(a, wrap):
    argv = wrap + [a.servd, "--pack", a.pack, "--workers", "1", "--listen", f"127.0.0.1:{PORT}"] + shlex.split(a.extra)
    p = subprocess.Popen(["nice"] + argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    for _ in range(600):
        try:
            socket.create_connection(("127.0.0.1", PORT)).close()
            return p
        except OSError:
            time.sleep(0.1)
    raise SystemExit("server did not start")


def main():
    global ETAG_IDX, LM_IDX, PORT
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["callgrind", "cpu"])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--pack", default="")
    ap.add_argument("--extra", default="")
    ap.add_argument("--cases", default="")
    ap.add_argument("--sizes", default="1,10,100,1000,10000")
    ap.add_argument("-n", type=int, default=20)
    ap.add_argument("--send", default="ka")
    ap.add_argument("--port", type=int, default=PORT)
    ap.add_argument("--out", default="/tmp/servd-adversarial")
    a = ap.parse_args()
    PORT = a.port
    os.makedirs(a.out, exist_ok=True)
    a.servd = os.path.join(a.build, "servd")
    if not a.pack:
        a.pack = os.path.join(a.out, "site.lmdb")
        subprocess.run([os.path.join(a.build, "servd-pack"), "build", os.path.join(ROOT, "www"),
                        "-o", a.pack, "-q"], check=True)
    for f in glob.glob(f"{a.out}/cg.out*"):
        os.remove(f)
    wrap = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={a.out}/cg.out", "--dump-instr=no",
            "--collect-systime=no", "--compress-strings=no"] if a.mode == "callgrind" else []
    p = start(a, wrap)
    try:
        s = socket.create_connection(("127.0.0.1", PORT))
        s.sendall(req())
        hdr = s.recv(65536).decode("latin1")
        s.close()
        ETAG_IDX = re.search(r"(?im)^etag:\s*(\S+)", hdr).group(1)
        LM_IDX = re.search(r"(?im)^last-modified:\s*(.+?)\r$", hdr).group(1)
        cs = cases()
        names = a.cases.split(",") if a.cases else list(cs)
        for name in names:
            for k in [int(x) for x in a.sizes.split(",")]:
                if k == 0:  # the largest size that fits the limits
                    lo, hi = 1, 40000
                    while lo < hi:
                        mid = (lo + hi + 1) // 2
                        lo, hi = (mid, hi) if cs[name](mid) else (lo, mid - 1)
                    k = lo
                data = cs[name](k)
                if not data:
                    continue
                run_case(data, 1 if a.send.startswith("trickle") else 3, a.send)  # warm
                if a.mode == "callgrind":
                    subprocess.run(["callgrind_control", "-z", str(p.pid)], capture_output=True, check=True)
                    st = run_case(data, a.n, a.send)
                    before = set(glob.glob(f"{a.out}/cg.out.*"))
                    subprocess.run(["callgrind_control", "-d", str(p.pid)], capture_output=True, check=True)
                    new = set(glob.glob(f"{a.out}/cg.out.*")) - before
                    ir = 0
                    for d in new:
                        m = re.search(r"^(?:summary|totals): (\d+)", open(d).read(), re.M)
                        ir = max(ir, int(m.group(1)) if m else 0)
                        os.replace(d, f"{a.out}/{name}.{k}.cg")
                    val = f"{ir / max(len(st), 1):12.0f} instr/req"
                else:
                    t0 = proc_cpu(p.pid)
                    w0 = time.time()
                    st = run_case(data, a.n, a.send)
                    t1 = proc_cpu(p.pid)
                    val = f"{(t1 - t0) / max(len(st), 1) * 1e6:10.1f} us/req cpu ({time.time() - w0:.1f}s wall)"
                stat = sorted(set(st))
                print(f"{name:16s} {k:6d} {len(data):6d}B {str(stat):10s} {val}", flush=True)
    finally:
        os.killpg(p.pid, signal.SIGTERM)
        p.wait(60)


if __name__ == "__main__":
    main()
