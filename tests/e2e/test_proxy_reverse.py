#!/usr/bin/env python3
"""servd behind the reverse proxies operators put in front of it: HAProxy, nginx
(proxy_pass, both HTTP/1.0 without a pool and HTTP/1.1 with an upstream keepalive pool),
Apache 2.4 mod_proxy_http and Caddy 2, each started by this test in the foreground on
127.0.0.1 with its configuration and state in a temp dir, in the configuration
docs/cdn.md recommends (keep-alive to servd; HAProxy's retry-on, Apache's ttl and no-gzip
with Debian's mod_deflate on, Caddy's compression off). A proxy whose binary is missing
is skipped.

What is checked, for each proxy: every encoding reaches the client as servd sent it
(decoded and compared with the file; ETag, Vary and Content-Length as servd's), 304 for
If-None-Match and If-Modified-Since, Range and If-Range, HEAD, the 404 page, the /dir
redirect's Location, a body over 1 MiB; requests spaced past servd's --idle-timeout, so
that every pooled connection the proxy reuses was closed by servd, all succeed; the
access log names the client that X-Forwarded-For names (--real-ip-header), never the one
a client wrote into the header itself."""
import http.client
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cdntest as ct  # noqa: E402
import servdtest as st  # noqa: E402
from servdtest import Fail, eq, ok  # noqa: E402

IDLE = 1.0  # servd's --idle-timeout here: short, so that the test sees servd close pools
CLIENT_IP = "127.0.0.5"  # the clients' source address (loopback): not a trusted proxy


def _write(path, text):
    with open(path, "w") as f:
        f.write(text)


class Proxy:
    """One reverse proxy in the foreground: .name, .port, started by start(), stopped by
    stop(). conf(dir, port, origin) writes its configuration and returns the command."""

    def __init__(self, name, binary, conf, origin):
        self.name = name
        self.binary = binary
        self.conf = conf
        self.origin = origin
        self.proc = None
        self.port = None

    def start(self):
        if shutil.which(self.binary) is None:
            return self
        self.dir = ct._cache_dir(self.name + "-")
        self.out = os.path.join(self.dir, "out.log")
        for _ in range(3):
            self.port = st.free_port()
            cmd, env = self.conf(self.dir, self.port, self.origin)
            with open(self.out, "wb") as f:
                self.proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT,
                                             stdin=subprocess.DEVNULL, env=env)
            try:
                ct._wait_port(self.proc, self.port, self.name, self.read_out)
                return self
            except Fail:
                if self.proc.poll() is None or "in use" not in self.read_out().lower():
                    self.stop()
                    raise
        raise Fail("%s could not bind a free port\n%s" % (self.name, self.read_out()))

    def need(self):
        if self.proc is None:
            raise st.Skip("%s is not installed (tests/deps.sh test installs it)" % self.binary)

    def read_out(self):
        return ct._tail(self.out)

    def stop(self, check=True):
        proc, self.proc = self.proc, None
        try:
            ct._stop(proc, self.name, self.read_out)
        except Fail:
            if check:
                raise


def haproxy_conf(d, port, origin):
    # retry-on: a request sent on a pooled connection that servd closed meanwhile is sent
    # again on a new one (HAProxy 2.6's default closes the client's connection instead).
    _write(os.path.join(d, "h.cfg"), """global
  maxconn 200
defaults
  mode http
  option forwardfor
  timeout connect 5s
  timeout client 30s
  timeout server 30s
  timeout http-keep-alive 10s
frontend f
  bind 127.0.0.1:%d
  default_backend servd
backend servd
  retry-on conn-failure empty-response response-timeout
  server s1 127.0.0.1:%d
""" % (port, origin))
    return ["haproxy", "-db", "-f", os.path.join(d, "h.cfg")], None


def _nginx_conf(d, port, origin, pooled):
    os.makedirs(os.path.join(d, "tmp"))
    loc = "proxy_set_header Host $host; " \
          "proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for; "
    if pooled:
        up = "upstream servd { server 127.0.0.1:%d; keepalive 8; }" % origin
        loc += 'proxy_pass http://servd; proxy_http_version 1.1; proxy_set_header Connection "";'
    else:
        up = ""
        loc += "proxy_pass http://127.0.0.1:%d;" % origin
    _write(os.path.join(d, "nginx.conf"), """worker_processes 1;
pid %(d)s/nginx.pid;
error_log %(d)s/error.log warn;
events { worker_connections 256; }
http {
  access_log off;
  client_body_temp_path %(d)s/tmp; proxy_temp_path %(d)s/tmp; fastcgi_temp_path %(d)s/tmp;
  uwsgi_temp_path %(d)s/tmp; scgi_temp_path %(d)s/tmp;
  %(up)s
  server { listen 127.0.0.1:%(port)d; location / { %(loc)s } }
}
""" % dict(d=d, up=up, port=port, loc=loc))
    return ["nginx", "-c", os.path.join(d, "nginx.conf"), "-g", "daemon off;"], None


def apache_conf(d, port, origin):
    # ttl=1: Apache closes a pooled origin connection idle for 1 s, before servd's
    # --idle-timeout (here 1.0 s plus the sweep): Apache does not resend a request that
    # fails on a reused connection (502), so it must be the side that closes idle ones.
    # Debian enables mod_deflate for text types by default (mods-enabled/deflate.conf):
    # it would gzip what servd stores uncompressed (small text files) under an ETag of its
    # own ("...-gzip") that servd never matches (no 304), while HEAD and ranges get
    # servd's identity answer. no-gzip leaves servd's answers alone.
    mods = "".join("LoadModule %s_module /usr/lib/apache2/modules/mod_%s.so\n" % (m, m)
                   for m in ("mpm_event", "authz_core", "proxy", "proxy_http", "filter",
                             "deflate", "env"))
    os.makedirs(os.path.join(d, "logs"))
    _write(os.path.join(d, "httpd.conf"), """ServerRoot %(d)s
ServerName localhost
%(mods)s
Listen 127.0.0.1:%(port)d
PidFile %(d)s/httpd.pid
DefaultRuntimeDir %(d)s
ErrorLog %(d)s/logs/error.log
User nobody
Group nogroup
StartServers 1
ServerLimit 1
ThreadsPerChild 16
MaxRequestWorkers 16
AddOutputFilterByType DEFLATE text/html text/plain text/xml text/css text/javascript
AddOutputFilterByType DEFLATE application/javascript application/json application/xml
SetEnv no-gzip 1
ProxyPass / http://127.0.0.1:%(origin)d/ ttl=1
ProxyPassReverse / http://127.0.0.1:%(origin)d/
""" % dict(d=d, mods=mods, port=port, origin=origin))
    return ["apache2", "-f", os.path.join(d, "httpd.conf"), "-DFOREGROUND"], None


def caddy_conf(d, port, origin):
    # compression off: otherwise Go's transport asks servd for gzip on behalf of a client
    # that sent no Accept-Encoding, gunzips it, and passes on the gzip variant's strong
    # ETag with the identity bytes (and no Content-Length).
    _write(os.path.join(d, "Caddyfile"), """{
  admin off
  auto_https off
  storage file_system %s/data
}
http://:%d {
  bind 127.0.0.1
  reverse_proxy 127.0.0.1:%d {
    transport http {
      compression off
    }
  }
}
""" % (d, port, origin))
    env = dict(os.environ, HOME=d, XDG_DATA_HOME=d, XDG_CONFIG_HOME=d)
    return ["caddy", "run", "--config", os.path.join(d, "Caddyfile"), "--adapter",
            "caddyfile"], env


PROXIES = [("haproxy", "haproxy", haproxy_conf),
           ("nginx-http10", "nginx", lambda d, p, o: _nginx_conf(d, p, o, False)),
           ("nginx-pooled", "nginx", lambda d, p, o: _nginx_conf(d, p, o, True)),
           ("apache", "apache2", apache_conf),
           ("caddy", "caddy", caddy_conf)]


class Ctx:
    def __init__(self):
        self.root = os.path.join(st.tmpdir(), "proxy-site")
        self.files = ct.make_site(self.root)
        big = ct._text("big", 1300000)  # over 1 MiB, compressible
        self.files["/big.txt"] = big
        self.files["/docs/index.html"] = b"<!doctype html><title>docs</title>\n" + ct._text(
            "docs", 3000)
        # A text file too small for servd-pack to store compressed variants of.
        self.files["/small.txt"] = b"User-agent: *\nAllow: /\n" \
            b"Sitemap: https://proxy.test/sitemap.xml\n# servd behind a reverse proxy\n"
        st.write_tree(self.root, {p: self.files[p] for p in ("/big.txt", "/docs/index.html",
                                                              "/small.txt")})
        self.pack = st.pack(self.root, "proxy.lmdb", extra=["-q"])
        self.access_log = os.path.join(st.tmpdir(), "proxy-access.log")
        self.admin = st.free_port()
        self.servd = None
        self.proxies = {}

    def __enter__(self):
        self.servd = st.Servd(self.pack, workers=1, extra=[
            "--access-log", self.access_log, "--admin", "127.0.0.1:%d" % self.admin,
            "--idle-timeout", str(IDLE), "--real-ip-header", "X-Forwarded-For",
            "--real-ip-from", "127.0.0.1"]).start()
        try:
            for name, binary, conf in PROXIES:
                self.proxies[name] = Proxy(name, binary, conf, self.servd.port).start()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, et, ev, tb):
        for p in self.proxies.values():
            p.stop(check=et is None)
        if self.servd:
            self.servd.stop(check=et is None)
        return False

    def metric(self, name):
        return st.metrics(self.admin).get(name, 0.0)


def decode(body, coding):
    if coding == "identity":
        return body
    if coding == "gzip":
        return zlib.decompress(body, 31)
    tool = {"br": ["brotli", "-d", "-c"], "zstd": ["zstd", "-d", "-c", "-q"]}[coding]
    if shutil.which(tool[0]) is None:
        raise st.Skip("%s is not installed" % tool[0])
    return subprocess.run(tool, input=body, stdout=subprocess.PIPE, check=True).stdout


AES = [None, "identity", "gzip", "br", "zstd", "gzip, deflate, br, zstd", "br;q=0, gzip"]
PATHS = ["/vary/1.txt", "/index.html", "/blob.bin", "/big.txt", "/small.txt",
         "/range/2.txt?a=1&b=%20"]


def check_proxy(c, name):
    p = c.proxies[name]
    p.need()
    n = 0
    eq(ct.fetch(c.servd.port, "/small.txt", ct.ae("gzip")).coding, "identity",
       "servd's answer for /small.txt (stored without compressed variants)")
    for path in PATHS:
        want = c.files[path.split("?")[0]]
        for a in AES:
            d = ct.fetch(c.servd.port, path, ct.ae(a))
            r = ct.fetch(p.port, path, ct.ae(a))
            what = "%s GET %s AE=%r" % (name, path, a)
            eq(r.status, 200, what)
            eq(r.coding, d.coding, what + ": Content-Encoding")
            eq(decode(r.body, r.coding), want, what + ": decoded body")
            for h in ("ETag", "Vary", "Content-Length", "Last-Modified", "Cache-Control"):
                eq(r.get(h), d.get(h), "%s: %s" % (what, h))
            etag = r.get("ETag")
            for cond in (("If-None-Match", etag), ("If-Modified-Since", r.get("Last-Modified"))):
                q = ct.fetch(p.port, path, ct.ae(a) + [cond])
                eq((q.status, q.body, q.get("ETag")), (304, b"", etag), "%s %s" % (what, cond[0]))
            h = ct.fetch(p.port, path, ct.ae(a), method="HEAD")
            eq((h.status, h.body, h.get("Content-Length"), h.get("ETag")),
               (200, b"", str(len(r.body)), etag), what + ": HEAD")
            last = len(r.body) - 1
            for rng, first, end in (("bytes=10-29", 10, min(29, last)),
                                    ("bytes=-40", max(0, len(r.body) - 40), last)):
                for extra in ([], [("If-Range", etag)]):
                    q = ct.fetch(p.port, path, ct.ae(a) + [("Range", rng)] + extra)
                    eq((q.status, q.get("Content-Range"), q.body),
                       (206, "bytes %d-%d/%d" % (first, end, len(r.body)), r.body[first:end + 1]),
                       "%s Range %s %r" % (what, rng, extra))
            q = ct.fetch(p.port, path, ct.ae(a) + [("Range", "bytes=0-9"), ("If-Range", '"x"')])
            eq((q.status, q.body), (200, r.body), what + ": If-Range of another version")
            n += 12
    r = ct.fetch(p.port, "/missing/page.html", ct.ae("gzip"))
    eq(r.status, 404, name + ": missing page")
    r = ct.fetch(p.port, "/docs?x=1")
    eq((r.status, r.get("Location")), (301, "/docs/?x=1"), name + ": directory redirect")
    ct.note("%s: %d requests, bodies decoded and compared, ETag/Vary/Content-Length as "
            "servd's" % (name, n + 2))


def t_haproxy(c):
    check_proxy(c, "haproxy")


def t_nginx_http10(c):
    check_proxy(c, "nginx-http10")


def t_nginx_pooled(c):
    check_proxy(c, "nginx-pooled")


def t_apache(c):
    check_proxy(c, "apache")


def t_caddy(c):
    check_proxy(c, "caddy")


def t_idle_pool_reused(c):
    """Requests spaced past servd's --idle-timeout, several at once per proxy: the pools'
    connections are closed by servd (or, Apache, by its ttl) between rounds, and no
    client sees an error."""
    live = [n for n, p in c.proxies.items() if p.proc is not None]
    if not live:
        raise st.Skip("no reverse proxy installed")
    idle0 = c.metric('servd_timeouts_total{kind="idle"}')
    acc0 = c.metric("servd_connections_accepted_total")
    errors = []
    counts = {}
    lock = threading.Lock()

    def one(name, port, rnd, i):
        try:
            r = ct.fetch(port, "/vary/%d.txt" % (1 + i), ct.ae("gzip"))
            good = r.status == 200 and decode(r.body, r.coding) == c.files["/vary/%d.txt" % (1 + i)]
            res = r.status if good else "wrong body"
        except (OSError, http.client.HTTPException) as e:
            res = repr(e)
        with lock:
            counts[name] = counts.get(name, 0) + 1
            if res != 200:
                errors.append("%s round %d: %s" % (name, rnd, res))

    rounds = 4
    for rnd in range(rounds):
        ts = [threading.Thread(target=one, args=(n, c.proxies[n].port, rnd, i))
              for n in live for i in range(3)]
        [t.start() for t in ts]
        [t.join() for t in ts]
        time.sleep(IDLE + 0.6)
    eq(errors, [], "client-visible errors with servd closing idle pooled connections")
    idle = c.metric('servd_timeouts_total{kind="idle"}') - idle0
    acc = c.metric("servd_connections_accepted_total") - acc0
    ok(idle > 0, "servd closed no idle connection: the pools were never put to the test")
    ct.note("idle pools: %d requests through %s in %d rounds %.1f s apart; servd accepted "
            "%d connections, closed %d idle" % (sum(counts.values()), ", ".join(live), rounds,
                                                IDLE + 0.6, acc, idle))


ACCESS_HOST = re.compile(r'^(\S+) - - \[[^\]]+\] "GET (\S+) ')


def t_real_ip(c):
    """The access log names the client (from 127.0.0.5) every proxy put in
    X-Forwarded-For, also when the client sent an X-Forwarded-For of its own."""
    live = [n for n, p in c.proxies.items() if p.proc is not None]
    if not live:
        raise st.Skip("no reverse proxy installed")
    try:
        socket.create_connection(("127.0.0.1", c.servd.port), source_address=(CLIENT_IP, 0)
                                 ).close()
    except OSError as e:
        raise st.Skip("cannot connect from %s: %s" % (CLIENT_IP, e))
    want = {}
    for name in live:
        for k, spoof in enumerate((None, "6.6.6.6", "6.6.6.6, 7.7.7.7")):
            target = "/robots-%s-%d" % (name, k)
            conn = http.client.HTTPConnection("127.0.0.1", c.proxies[name].port,
                                              timeout=st.IO_TIMEOUT,
                                              source_address=(CLIENT_IP, 0))
            conn.request("GET", target, headers={"X-Forwarded-For": spoof} if spoof else {})
            eq(conn.getresponse().status, 404, name + " " + target)
            conn.close()
            want[target] = CLIENT_IP
    got = {}
    deadline = time.time() + ct.LOG_TIMEOUT
    while time.time() < deadline and len(got) < len(want):
        with open(c.access_log, "rb") as f:
            for ln in f.read().decode("latin-1").splitlines():
                m = ACCESS_HOST.match(ln)
                if m and m.group(2) in want:
                    got[m.group(2)] = m.group(1)
        time.sleep(0.1)
    eq(got, want, "access-log HOST per request")


if __name__ == "__main__":
    st.run(st.collect(globals()), setup=Ctx)
