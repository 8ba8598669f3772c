#!/usr/bin/env python3
"""Real HTTP client programs and libraries against a real servd, with their own defaults
(HTTP.md; servd(1) HTTP): wget, curl, Python's urllib and http.client, and Node's fetch
(undici) and http module. Each fetches every file of a site with odd names (spaces, UTF-8,
'+', ';', sub-delims), as that client encodes them, and the body it hands its user must be
the file: decoded from the coding its own Accept-Encoding asked for (wget and urllib ask
for identity, curl --compressed for br or zstd, fetch for gzip). Also, per client: the
directory redirect (query kept) followed to the index, the 404 page, HEAD, the conditional
requests users make (wget -N, curl -z and --etag-compare), resume of a cut download
(wget -c, curl -C -, fetch with Range, which asks for identity then), HTTP/1.0 (curl -0,
http.client), and connection reuse over many requests, counted by servd's
servd_connections_accepted_total: one connection for wget's URL list, curl's, http.client's
and node:http's keep-alive agent. A client that is not installed is skipped (all: exit 77).
Not here, as CI does not install them: requests and Java's HttpClient (their audit found
nothing servd-side; requests sends Accept-Encoding: gzip, deflate with a user's Range, see
servd(1) on resuming through a compressed representation)."""
import gzip
import json
import os
import random
import shutil
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
import http.client

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servdtest as st  # noqa: E402
from servdtest import eq, ok  # noqa: E402

# How long one client command may run before the test calls it a hang.
CLIENT_TIMEOUT = 60
# The clients as a user's shell runs them, without a proxy in between (wget, curl and
# urllib follow http_proxy) and with UTF-8 names encoded as UTF-8 (wget takes the locale's).
for _k in [k for k in os.environ if k.lower() in ("http_proxy", "https_proxy", "all_proxy")]:
    del os.environ[_k]
os.environ["LC_ALL"] = "C.UTF-8"
MTIME = 1700000000  # the files' modification time: 2023-11-14, a strong Last-Modified

BIG = "/big.txt"  # > 1 MB of text, so that resume and Range matter
ODD = ["/with space/file name.txt", "/caf\u00e9/r\u00e9sum\u00e9.html", "/\u65e5\u672c/\u6587\u66f8.txt",
       "/odd/a+b.txt", "/odd/semi;colon.txt", "/odd/bang!$&'()*,=@~.txt"]


def _text(rnd, n):
    words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()
    out, size = [], 0
    while size < n:
        line = " ".join(rnd.choice(words) for _ in range(12)) + " %d\n" % rnd.randrange(10**9)
        out.append(line)
        size += len(line)
    return "".join(out)[:n].encode()


def _site():
    rnd = random.Random(7)
    files = {
        "/index.html": b"<!doctype html><title>home</title>" + _text(rnd, 3000),
        "/404.html": b"<!doctype html><title>not found</title><p>custom 404 page\n",
        BIG: _text(rnd, 1_200_000),
        "/app.js": b"console.log('hi');\n" * 500,
        "/style.css": b"body{color:red}\n" * 400,
        "/img/photo.png": b"\x89PNG\r\n\x1a\n" + bytes(rnd.randrange(256) for _ in range(60000)),
        "/empty.txt": b"",
        "/docs/index.html": b"<p>docs " + _text(rnd, 2000),
        "/docs/guide/index.html": b"<p>guide " + _text(rnd, 2000),
        "/noindex/file.txt": b"no index here " + _text(rnd, 500),
        "/caf\u00e9/index.html": b"<p>caf\xc3\xa9 index",
    }
    for p in ODD:
        files[p] = p.encode() + b" " + _text(rnd, 1500)
    root = st.write_tree(os.path.join(st.tmpdir(), "clients-site"), files)
    for d, _, names in os.walk(root):
        for n in names:
            os.utime(os.path.join(d, n), (MTIME, MTIME))
    return root, files


class Setup:
    def __enter__(self):
        self.root, self.files = _site()
        self.admin = st.free_port()
        self.srv = st.Servd(st.pack(self.root, "clients.lmdb"), workers=1,
                            extra=["--admin", "127.0.0.1:%d" % self.admin]).start()
        self.port = self.srv.port
        self.base = "http://127.0.0.1:%d" % self.port
        self.work = os.path.join(st.tmpdir(), "clients-work")
        os.makedirs(self.work, exist_ok=True)
        return self

    def __exit__(self, et, ev, tb):
        self.srv.stop(check=et is None)
        return False

    def accepted(self):
        return st.metrics(self.admin)["servd_connections_accepted_total"]


def need(tool):
    if shutil.which(tool) is None:
        raise st.Skip("%s is not installed" % tool)
    if tool == "wget":  # wget2 (Fedora's "wget") fetches a URL list in parallel
        v = subprocess.run(["wget", "--version"], stdout=subprocess.PIPE).stdout
        if not v.startswith(b"GNU Wget 1."):
            raise st.Skip("wget is not GNU Wget 1.x")


def sh(cmd, what, codes=(0,), cwd=None):
    # neither ~/.wgetrc nor ~/.curlrc: each client's own defaults
    if cmd[0] == "wget":
        cmd = ["wget", "--no-config"] + cmd[1:]
    elif cmd[0] == "curl":
        cmd = ["curl", "-q"] + cmd[1:]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd,
                       timeout=CLIENT_TIMEOUT)
    ok(p.returncode in codes, "%s: exit %d (want %s): %s" % (
        what, p.returncode, codes, p.stderr.decode(errors="replace")[-1500:]))
    return p


def same_file(path, want, what):
    with open(path, "rb") as f:
        got = f.read()
    if got != want:
        n = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
        raise st.Fail("%s: %d bytes, want %d; first difference at byte %d" % (what, len(got),
                                                                           len(want), n))


def t_wget(S):
    need("wget")
    out = os.path.join(S.work, "wget.out")
    for p, data in sorted(S.files.items()):  # names typed as they are: wget encodes them
        sh(["wget", "-q", "-O", out, S.base + p], "wget " + p)
        same_file(out, data, "wget " + p)
    sh(["wget", "-q", "--compression=auto", "-O", out, S.base + BIG], "wget --compression=auto")
    same_file(out, S.files[BIG], "wget --compression=auto (gzip, decoded)")
    sh(["wget", "-q", "-O", out, S.base + "/docs/guide?x=1"], "wget of a directory")
    same_file(out, S.files["/docs/guide/index.html"], "wget /docs/guide: the redirect followed")
    sh(["wget", "-q", "-O", out, S.base + "/nope"], "wget of a missing path", codes=(8,))
    sh(["wget", "-q", "--content-on-error", "-O", out, S.base + "/nope"], "wget 404", codes=(8,))
    same_file(out, S.files["/404.html"], "wget --content-on-error: the site's 404 page")

    # -N: the file gets Last-Modified as its mtime; the next run asks If-Modified-Since and
    # gets 304; a local file older than the server's is fetched again.
    d = os.path.join(S.work, "wget-N")
    os.makedirs(d, exist_ok=True)
    local = os.path.join(d, "big.txt")
    sh(["wget", "-q", "-N", S.base + BIG], "wget -N", cwd=d)
    same_file(local, S.files[BIG], "wget -N")
    eq(int(os.stat(local).st_mtime), MTIME, "wget -N: the mtime it set from Last-Modified")
    p = sh(["wget", "-N", "-S", S.base + BIG], "wget -N again", cwd=d)
    ok(b"304 Not Modified" in p.stderr, "wget -N again: no 304: %r" % p.stderr[-600:])
    os.utime(local, (MTIME - 86400, MTIME - 86400))
    p = sh(["wget", "-N", "-S", S.base + BIG], "wget -N of an older file", cwd=d)
    ok(b"200 OK" in p.stderr, "wget -N of an older local file: no 200: %r" % p.stderr[-600:])
    same_file(local, S.files[BIG], "wget -N of an older local file")

    # -c: a download cut at any byte is completed with the right bytes
    d = os.path.join(S.work, "wget-c")
    os.makedirs(d, exist_ok=True)
    local = os.path.join(d, "big.txt")
    for cut in (1, 65536, 777777, len(S.files[BIG]) - 1):
        with open(local, "wb") as f:
            f.write(S.files[BIG][:cut])
        sh(["wget", "-q", "-c", S.base + BIG], "wget -c after %d bytes" % cut, cwd=d)
        same_file(local, S.files[BIG], "wget -c after %d bytes" % cut)
    sh(["wget", "-q", "-c", S.base + BIG], "wget -c of a complete file", cwd=d)
    same_file(local, S.files[BIG], "wget -c of a complete file")

    # several URLs, 200s, 301s and 404s mixed: one connection for all
    urls = [S.base + p for p in (BIG, "/nope", "/docs", "/empty.txt", "/img/photo.png")] * 6
    n0 = S.accepted()
    sh(["wget", "-q", "-O", out] + urls, "wget of %d URLs" % len(urls), codes=(8,))
    eq(S.accepted() - n0, 1, "wget of %d URLs: connections" % len(urls))
    sh(["wget", "-q", "--no-http-keep-alive", "-O", out, S.base + "/docs"],
       "wget --no-http-keep-alive")
    same_file(out, S.files["/docs/index.html"], "wget --no-http-keep-alive of /docs")


def t_curl(S):
    need("curl")
    out = os.path.join(S.work, "curl.out")
    for p, data in sorted(S.files.items()):
        target = S.base + st.url(p)  # curl sends what it is given: the user encodes
        for opt in ([], ["--compressed"]):
            sh(["curl", "-sS", "-o", out] + opt + [target], "curl %s %s" % (opt, p))
            same_file(out, data, "curl %s %s" % (opt, p))
    p = sh(["curl", "-sS", "--compressed", "-o", out, "-D", "-", S.base + BIG], "curl")
    ok(b"content-encoding: " in p.stdout.lower(),  # br or zstd as Debian builds curl
       "curl --compressed of a text file: %r" % p.stdout)
    sh(["curl", "-sSL", "-o", out, S.base + "/docs/guide?x=1"], "curl -L of a directory")
    same_file(out, S.files["/docs/guide/index.html"], "curl -L /docs/guide")
    p = sh(["curl", "-sS", "-o", out, "-w", "%{http_code}", S.base + "/nope"], "curl 404")
    eq(p.stdout, b"404", "curl of a missing path")
    same_file(out, S.files["/404.html"], "curl of a missing path: the site's 404 page")

    # conditionals: -z a file (If-Modified-Since from its mtime), ETag round trip, -R
    local = os.path.join(S.work, "curl-R.txt")
    sh(["curl", "-sS", "-R", "-o", local, S.base + BIG], "curl -R")
    eq(int(os.stat(local).st_mtime), MTIME, "curl -R: the mtime it set from Last-Modified")
    for opt in ([], ["--compressed"]):
        p = sh(["curl", "-sS", "-o", out, "-w", "%{http_code}", "-z", local] + opt
               + [S.base + BIG], "curl -z")
        eq(p.stdout, b"304", "curl -z %s" % opt)
        etag = os.path.join(S.work, "etag")
        sh(["curl", "-sS", "-o", out, "--etag-save", etag] + opt + [S.base + BIG], "etag-save")
        p = sh(["curl", "-sS", "-o", out, "-w", "%{http_code}", "--etag-compare", etag] + opt
               + [S.base + BIG], "curl --etag-compare")
        eq(p.stdout, b"304", "curl --etag-compare %s" % opt)

    # -C -: resume from what is on disk (without --compressed: see servd(1) on Range)
    for cut in (1, 777777, len(S.files[BIG]) - 1):
        with open(out, "wb") as f:
            f.write(S.files[BIG][:cut])
        p = sh(["curl", "-sS", "-C", "-", "-o", out, "-w", "%{http_code}", S.base + BIG],
               "curl -C - after %d bytes" % cut)
        eq(p.stdout, b"206", "curl -C - after %d bytes" % cut)
        same_file(out, S.files[BIG], "curl -C - after %d bytes" % cut)

    sh(["curl", "-sS", "-0", "-o", out, S.base + BIG], "curl -0")
    same_file(out, S.files[BIG], "curl -0 (HTTP/1.0)")
    sh(["curl", "-sS", "-0", "-L", "-o", out, S.base + "/docs"], "curl -0 -L")
    same_file(out, S.files["/docs/index.html"], "curl -0 -L /docs")

    # several URLs on one command line: one connection, whatever the statuses
    paths = [BIG, "/nope", "/docs", "/empty.txt", "/img/photo.png"] * 6
    cmd = ["curl", "-sS", "-w", "%{num_connects}\\n"]
    for p in paths:
        cmd += ["-o", "/dev/null", S.base + p]
    n0 = S.accepted()
    p = sh(cmd, "curl of %d URLs" % len(paths))
    eq(sum(int(x) for x in p.stdout.split()), 1, "curl of %d URLs: connects" % len(paths))
    eq(S.accepted() - n0, 1, "curl of %d URLs: connections servd accepted" % len(paths))
    p = sh(["curl", "-sS", "-I", S.base + BIG], "curl -I")
    ok(b"content-length: %d\r\n" % len(S.files[BIG]) in p.stdout.lower(), "curl -I: %r" % p.stdout)


def t_python_urllib(S):
    for p, data in sorted(S.files.items()):
        with urllib.request.urlopen(S.base + urllib.parse.quote(p), timeout=st.IO_TIMEOUT) as r:
            eq(r.read(), data, "urllib " + p)
    with urllib.request.urlopen(S.base + "/docs/guide?x=1", timeout=st.IO_TIMEOUT) as r:
        eq(r.geturl(), S.base + "/docs/guide/?x=1", "urllib: URL after the redirect")
        eq(r.read(), S.files["/docs/guide/index.html"], "urllib: redirect followed")
    with urllib.request.urlopen(S.base + urllib.parse.quote("/caf\u00e9"), timeout=st.IO_TIMEOUT) as r:
        eq(r.geturl(), S.base + "/caf%C3%A9/", "urllib /caf%C3%A9: URL after the redirect")
        eq(r.read(), S.files["/caf\u00e9/index.html"], "urllib /caf%C3%A9: redirect followed")
    try:
        urllib.request.urlopen(S.base + "/nope", timeout=st.IO_TIMEOUT)
        raise st.Fail("urllib: no HTTPError for a missing path")
    except urllib.error.HTTPError as e:
        eq((e.code, e.read()), (404, S.files["/404.html"]), "urllib 404")


def t_python_http_client_keepalive(S):
    """http.client on one connection: every file by GET (asking for gzip) and HEAD, a 301,
    a 404, a 304 and a 416 between them; the connection is never closed."""
    n0 = S.accepted()
    c = http.client.HTTPConnection("127.0.0.1", S.port, timeout=st.IO_TIMEOUT)
    big = None
    for p, data in sorted(S.files.items()) * 2:
        for method in ("GET", "HEAD"):
            c.request(method, urllib.parse.quote(p), headers={"Accept-Encoding": "gzip"})
            r = c.getresponse()
            body = r.read()
            what = "http.client %s %s" % (method, p)
            eq(r.status, 200, what)
            if method == "GET":
                ce = r.getheader("Content-Encoding")
                eq(gzip.decompress(body) if ce == "gzip" else body, data, what)
                if p == BIG:
                    big = r
            else:
                eq(body, b"", what)
            ok(not r.will_close, what + ": the connection would close")
    ok(big is not None and big.getheader("Content-Encoding") == "gzip", "gzip was never chosen")
    for target, hdrs, status in (("/docs?x=1", {}, 301), ("/nope", {}, 404),
                                 (BIG, {"If-None-Match": big.getheader("ETag"),
                                        "Accept-Encoding": "gzip"}, 304),
                                 (BIG, {"Range": "bytes=99999999-"}, 416)):
        c.request("GET", target, headers=hdrs)
        r = c.getresponse()
        r.read()
        eq(r.status, status, "http.client GET %s %s" % (target, hdrs))
        ok(not r.will_close, "http.client GET %s: the connection would close" % target)
    c.close()
    eq(S.accepted() - n0, 1, "http.client keep-alive: connections")


def t_python_http10(S):
    for target, status, want in ((BIG, 200, S.files[BIG]), ("/empty.txt", 200, b""),
                                 ("/docs", 301, b""), ("/nope", 404, S.files["/404.html"])):
        c = http.client.HTTPConnection("127.0.0.1", S.port, timeout=st.IO_TIMEOUT)
        c._http_vsn, c._http_vsn_str = 10, "HTTP/1.0"
        c.request("GET", target)
        r = c.getresponse()
        eq((r.status, r.read()), (status, want), "HTTP/1.0 GET " + target)
        ok(r.will_close, "HTTP/1.0 GET %s: not closed" % target)
        c.close()


NODE = r"""
const fs = require('node:fs'), http = require('node:http'), zlib = require('node:zlib');
const [base, root] = process.argv.slice(1)  // node -e: no script name;
const files = JSON.parse(fs.readFileSync(0, 'utf8'));
const out = [];
const fail = (m) => { out.push(m); };
const read = (p) => fs.readFileSync(root + p);
(async () => {
  for (const p of files) {
    const r = await fetch(base + p);  // WHATWG URL encodes the raw name
    const b = Buffer.from(await r.arrayBuffer());
    if (r.status !== 200 || !b.equals(read(p)))
      fail(`fetch ${p}: ${r.status}, ${b.length} bytes, CE ${r.headers.get('content-encoding')}`);
  }
  let r = await fetch(base + '/big.txt');
  if (r.headers.get('content-encoding') !== 'gzip') fail('fetch big.txt: not gzip');
  await r.arrayBuffer();
  r = await fetch(base + '/docs/guide?x=1');
  if (r.url !== base + '/docs/guide/?x=1' || !Buffer.from(await r.arrayBuffer()).equals(read('/docs/guide/index.html')))
    fail('fetch redirect: ' + r.url);
  r = await fetch(base + '/nope');
  if (r.status !== 404 || !Buffer.from(await r.arrayBuffer()).equals(read('/404.html'))) fail('fetch 404');
  const big = read('/big.txt');
  for (const cut of [1, 777777]) {  // fetch asks for identity with a Range (Fetch standard)
    r = await fetch(base + '/big.txt', { headers: { range: `bytes=${cut}-` } });
    const b = Buffer.from(await r.arrayBuffer());
    if (r.status !== 206 || !Buffer.concat([big.subarray(0, cut), b]).equals(big))
      fail(`fetch Range ${cut}-: ${r.status} CE ${r.headers.get('content-encoding')}`);
  }
  const all = await Promise.all(Array.from({ length: 60 }, (_, i) => files[i % files.length]).map(
    async (p) => [p, Buffer.from(await (await fetch(base + p)).arrayBuffer())]));
  for (const [p, b] of all) if (!b.equals(read(p))) fail('fetch concurrent ' + p);
  // node:http, keep-alive agent: GET and HEAD mixed stay on one socket
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const sockets = new Set();
  for (const p of files.concat(['/docs', '/nope'])) for (const method of ['GET', 'HEAD']) {
    const [res, b] = await new Promise((ok, ko) => {
      const q = http.request(base + encodeURI(p), { agent, method, headers: { 'accept-encoding': 'gzip' } }, (res) => {
        const ch = []; res.on('data', (c) => ch.push(c)); res.on('end', () => ok([res, Buffer.concat(ch)]));
      });
      // the socket as the request gets it (a kept-alive response's res.socket is null by 'end')
      q.on('socket', (s) => sockets.add(s));
      q.on('error', ko); q.setTimeout(10000, () => q.destroy(new Error('timeout'))); q.end();
    });
    const want = p === '/docs' ? 301 : p === '/nope' ? 404 : 200;
    const gz = method === 'GET' && res.headers['content-encoding'] === 'gzip';
    const body = gz ? zlib.gunzipSync(b) : b;
    if (res.statusCode !== want || (method === 'HEAD' ? b.length !== 0 : want === 200 && !body.equals(read(p))))
      fail(`http ${method} ${p}: ${res.statusCode}, want ${want}`);
  }
  agent.destroy();
  if (sockets.size !== 1) fail('node:http keep-alive agent used ' + sockets.size + ' sockets');
  console.log(JSON.stringify(out));
})().catch((e) => { console.log(JSON.stringify([String(e) + ' ' + (e.cause || '')])); });
"""


def t_node(S):
    need("node")
    p = subprocess.run(["node", "-e", NODE, S.base, S.root],
                       input=json.dumps(sorted(S.files)).encode(),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=CLIENT_TIMEOUT)
    ok(p.returncode == 0, "node exited %d: %s" % (p.returncode, p.stderr.decode()[-1500:]))
    if b"fetch is not defined" in p.stdout:
        raise st.Skip("node has no fetch (Node.js < 18)")
    eq(json.loads(p.stdout.decode().strip().splitlines()[-1]), [],
       "node: what went wrong")


if __name__ == "__main__":
    st.run(st.collect(globals()), Setup)
