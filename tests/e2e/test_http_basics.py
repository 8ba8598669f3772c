#!/usr/bin/env python3
"""The headers of every 200 and the connection behaviour of a real servd (HTTP.md
"Representations and validators", "What CDNs do"): Content-Type with charset on text,
exact Content-Length, quoted strong content-hash ETags, Last-Modified <= Date, Date in
IMF-fixdate, Cache-Control (HTML no-cache, hashed names immutable), Accept-Ranges; HEAD
= GET without the body; keep-alive by default in HTTP/1.1, close in HTTP/1.0 unless
keep-alive; Connection: close; --workers 2; SIGTERM with clients connected exits 0;
a missing or corrupt pack is refused at startup with a message naming the file."""
import os
import re
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servdtest as st  # noqa: E402
from servdtest import eq, ok  # noqa: E402

HASHED = re.compile(r"\.[0-9a-f]{8,}\.[A-Za-z0-9]+$")
IMMUTABLE = "public, max-age=31536000, immutable"
MIME = {".html": "text/html", ".css": "text/css", ".txt": "text/plain", ".json": "application/json",
        ".png": "image/png", ".svg": "image/svg+xml", ".woff2": "font/woff2"}
SINGLE = ("Content-Type", "Content-Length", "ETag", "Last-Modified", "Date", "Cache-Control",
          "Accept-Ranges", "Vary", "Content-Encoding", "Connection")


def check_200(r, path, data, what, ae=None):
    eq(r.status, 200, what + ": status")
    for h in SINGLE:
        r.get(h)  # raises when the header appears twice
    ce = st.content_encoding(r)
    eq(st.decode(r.body, ce), data, what + ": decoded body")
    eq(r.need("Content-Length"), str(len(r.body)), what + ": Content-Length")
    ctype = r.need("Content-Type")
    base, _, params = ctype.partition(";")
    base = base.strip().lower()
    ext = os.path.splitext(path)[1].lower()
    if ext == ".js":
        ok(base in ("text/javascript", "application/javascript"), what + ": JS type %r" % ctype)
    elif ext in MIME:
        eq(base, MIME[ext], what + ": Content-Type")
    if base.startswith("text/") or ext == ".js":
        eq(params.strip().lower().replace(" ", ""), "charset=utf-8", what + ": charset of %r" % ctype)
    etag = r.need("ETag")
    ok(st.ETAG_STRONG.match(etag), what + ": ETag %r is not quoted and strong" % etag)
    ok(len(etag) >= 10, what + ": ETag %r too short to be a content hash" % etag)
    date = st.http_date(r.get("Date"), what + ": Date")
    ok(abs(date - time.time()) < 120, what + ": Date %r is not now" % r.get("Date"))
    lm = st.http_date(r.get("Last-Modified"), what + ": Last-Modified")
    ok(lm <= date, what + ": Last-Modified %r later than Date %r" % (r.get("Last-Modified"),
                                                                    r.get("Date")))
    cc = r.need("Cache-Control")
    if ext == ".html":
        eq(cc, "no-cache", what + ": Cache-Control of HTML")
    elif HASHED.search(path):
        eq(cc, IMMUTABLE, what + ": Cache-Control of a hashed name")
    else:
        ok("immutable" not in cc, what + ": %r on a name without a hash" % cc)
    eq(r.get("Accept-Ranges"), "bytes", what + ": Accept-Ranges")
    ok(r.get("Content-Range") is None, what + ": Content-Range on a 200")
    ok(r.get("Connection") is None or r.get("Connection").lower() in ("keep-alive",),
       what + ": Connection %r on a keep-alive response" % r.get("Connection"))


def t_every_200_has_full_headers(S):
    for path, data in sorted(S.fixture.files.items()):
        for ae in (None, "gzip", "br", "zstd"):
            r = st.get(S.port, st.url(path), [] if ae is None else [("Accept-Encoding", ae)])
            check_200(r, path, data, "GET %s (Accept-Encoding %r)" % (path, ae))


def t_cache_control_rules(S):
    eq(st.get(S.port, "/index.html").need("Cache-Control"), "no-cache", "HTML")
    eq(st.get(S.port, "/docs/").need("Cache-Control"), "no-cache", "directory index HTML")
    eq(st.get(S.port, "/js/app.3f9a1c2e.js").need("Cache-Control"), IMMUTABLE, "hashed JS")
    eq(st.get(S.port, "/js/app.3f9a1c2e.js", [("Accept-Encoding", "br")]).need("Cache-Control"),
       IMMUTABLE, "hashed JS, br variant")


def t_head_equals_get_without_body(S):
    for path in ("/index.html", "/data/big.txt", "/img/dot.png", "/empty.txt", "/nope", "/docs"):
        for ae in (None, "gzip", "br, zstd"):
            hdrs = [] if ae is None else [("Accept-Encoding", ae)]
            with st.Conn(S.port) as c:
                c.send(st.req("HEAD", path, hdrs) + st.req("GET", path, hdrs))
                h = c.read_response("HEAD")
                g = c.read_response("GET")
                c.nothing_more()
            what = "HEAD %s (%r)" % (path, ae)
            eq(h.status, g.status, what + ": status")
            eq([x for x in h.headers if x[0].lower() != "date"],
               [x for x in g.headers if x[0].lower() != "date"], what + ": headers = GET's")
            if g.body:
                ok(h.get("Content-Length") == str(len(g.body)), what + ": Content-Length")


def t_etags_are_content_hashes(S):
    e1 = st.get(S.port, "/dup1.txt").need("ETag")
    e2 = st.get(S.port, "/dup2.txt").need("ETag")
    eq(e1, e2, "identical files share their identity ETag")
    g1 = st.get(S.port, "/dup1.txt", [("Accept-Encoding", "gzip")])
    g2 = st.get(S.port, "/dup2.txt", [("Accept-Encoding", "gzip")])
    eq(g1.need("ETag"), g2.need("ETag"), "identical files share their gzip ETag")
    seen = {}
    for path, data in S.fixture.files.items():
        et = st.get(S.port, st.url(path)).need("ETag")
        if et in seen:
            eq(S.fixture.files[seen[et]], data, "%s and %s share ETag %s" % (path, seen[et], et))
        seen[et] = path
    # Reproducible: the same site packed again gives the same ETags.
    p2 = st.pack(st.FIXTURE_SITE, "fixture-again.lmdb")
    with st.Servd(p2) as s2:
        for path in ("/index.html", "/data/big.txt", "/img/dot.png"):
            for ae in (None, "gzip", "br", "zstd"):
                h = [] if ae is None else [("Accept-Encoding", ae)]
                eq(st.get(s2.port, path, h).need("ETag"), st.get(S.port, path, h).need("ETag"),
                   "ETag of %s (%r) after re-packing" % (path, ae))


def t_date_advances(S):
    d1 = st.http_date(st.get(S.port, "/tiny.txt").get("Date"), "Date")
    time.sleep(2.1)
    d2 = st.http_date(st.get(S.port, "/tiny.txt").get("Date"), "Date")
    ok(d2 - d1 >= 2, "Date did not advance over 2.1 s: %d -> %d" % (d1, d2))


def t_date_follows_a_clock_step_that_timers_do_not(S):
    """The wall clock of a running servd steps (an NTP step, a VM resumed): the Date
    follows it within a second (RFC 9110 §6.6.1: the time of message origination), a
    Last-Modified now ahead of it goes out as the Date (§8.8.2.1: an origin server "MUST
    NOT generate a Last-Modified date that is later than the server's time of message
    origination"), and idle timeouts, which run on the monotonic clock, neither fire
    nor wait because of the step. clock_ahead.so's CLOCK_STEP_FILE moves time() and
    CLOCK_REALTIME only."""
    year = 365 * 86400
    stepf = os.path.join(st.tmpdir(), "clock-step")

    def set_step(sec):
        with open(stepf + ".tmp", "w") as f:
            f.write("%d\n" % sec)
        os.replace(stepf + ".tmp", stepf)

    def date_and_lm(port):
        r = st.get(port, "/tiny.txt")
        eq(r.status, 200, "status")
        return (st.http_date(r.need("Date"), "Date"),
                st.http_date(r.need("Last-Modified"), "Last-Modified"))

    set_step(0)
    env = st.preload_env(os.path.join(st.BUILD_DIR, "clock_ahead.so"), CLOCK_STEP_FILE=stepf)
    with st.Servd(S.fixture.pack, env=env, extra=["--idle-timeout", "3"]) as s:
        date, lm = date_and_lm(s.port)
        ok(abs(date - time.time()) < 60 and lm <= date, "before the step: %d, %d" % (date, lm))
        idle = st.Conn(s.port)  # keep-alive, idle after its first response
        idle.send(st.req("GET", "/tiny.txt"))
        eq(idle.read_response().status, 200, "the idle connection's request")
        t0 = time.monotonic()
        set_step(-2 * year)  # back two years: the file's date is now in the future
        time.sleep(1.2)
        date, lm2 = date_and_lm(s.port)
        ok(abs(date - (time.time() - 2 * year)) < 60, "Date after a step back: %d" % date)
        eq(lm2, date, "a Last-Modified ahead of the stepped clock goes out as the Date")
        set_step(3 * year)
        time.sleep(1.2)
        date, lm3 = date_and_lm(s.port)
        ok(abs(date - (time.time() + 3 * year)) < 60, "Date after a step ahead: %d" % date)
        eq(lm3, lm, "the file's own Last-Modified once the clock is past it")
        # the connection idle since before the steps closes 3 s after its response, not at
        # once (3 years ahead) nor never (2 years back)
        # (the steps took about 2.5 s; on a slow machine they may have taken the whole
        # timeout, and the close after it proves nothing then)
        left = 2.9 - (time.monotonic() - t0)
        ok(left <= 0 or not idle.closed_after(left),
           "idle connection closed by a clock step after %.1f s" % (time.monotonic() - t0))
        ok(idle.closed_after(5.0), "idle connection still open %.1f s after its response"
           % (time.monotonic() - t0))
        ok(time.monotonic() - t0 < 5.5, "idle timeout of 3 s took %.1f s"
           % (time.monotonic() - t0))
        idle.close()


def t_keep_alive_default_http11(S):
    with st.Conn(S.port) as c:
        for i in range(5):
            c.send(st.req("GET", "/tiny.txt"))
            r = c.read_response()
            eq((r.status, r.body), (200, S.fixture.files["/tiny.txt"]), "keep-alive request %d" % i)
            ok(r.get("Connection") is None or r.get("Connection").lower() != "close",
               "HTTP/1.1 response %d says Connection: close" % i)
        eq(c.closed_after(0.5), False, "HTTP/1.1 connection stays open")


def t_connection_close(S):
    for value in ("close", "Close", "CLOSE", "foo, close", "close , bar"):
        with st.Conn(S.port) as c:
            c.send(st.req("GET", "/tiny.txt", [("Connection", value)]) + st.req("GET", "/A.txt"))
            r = c.read_response()
            eq(r.status, 200, "Connection: %s status" % value)
            eq((r.get("Connection") or "").lower(), "close", "Connection: %s -> header" % value)
            c.expect_closed("HTTP/1.1 Connection: %s (pipelined request must not be answered)"
                            % value)


def t_http10(S):
    with st.Conn(S.port) as c:
        c.send(st.req("GET", "/tiny.txt", version="HTTP/1.0", host=None))
        r = c.read_response()
        eq((r.status, r.body), (200, S.fixture.files["/tiny.txt"]), "HTTP/1.0 GET")
        c.expect_closed("HTTP/1.0 without keep-alive")
    for value in ("keep-alive", "Keep-Alive"):
        with st.Conn(S.port) as c:
            for i in range(3):
                c.send(st.req("GET", "/tiny.txt", [("Connection", value)], version="HTTP/1.0"))
                r = c.read_response()
                eq(r.status, 200, "HTTP/1.0 Connection: %s request %d" % (value, i))
                # RFC 9112 Appendix C.2.2: an HTTP/1.0 client keeps the connection only
                # when the response says keep-alive.
                eq((r.get("Connection") or "").lower(), "keep-alive",
                   "HTTP/1.0 Connection: %s -> response Connection header" % value)
            eq(c.closed_after(0.5), False, "HTTP/1.0 Connection: %s stays open" % value)
    with st.Conn(S.port) as c:
        c.send(st.req("HEAD", "/index.html", version="HTTP/1.0"))
        r = c.read_response("HEAD")
        eq(r.get("Content-Length"), str(len(S.fixture.files["/index.html"])), "HTTP/1.0 HEAD CL")
        c.expect_closed("HTTP/1.0 HEAD")


def t_header_names_case_insensitive(S):
    big = S.fixture.files["/data/big.txt"]
    etag = st.get(S.port, "/data/big.txt", [("accept-encoding", "gzip")]).need("ETag")
    r = st.get(S.port, "/data/big.txt", [("ACCEPT-ENCODING", "gzip")])
    eq(st.content_encoding(r), "gzip", "ACCEPT-ENCODING")
    r = st.get(S.port, "/data/big.txt", [("accept-encoding", "gzip"), ("if-none-match", etag)])
    eq(r.status, 304, "if-none-match in lowercase")
    r = st.get(S.port, "/data/big.txt", [("rAnGe", "bytes=0-3")])
    eq((r.status, r.body), (206, big[:4]), "rAnGe")
    with st.Conn(S.port) as c:
        c.send(st.req("GET", "/tiny.txt", [("CONNECTION", "CLOSE")]))
        c.read_response()
        c.expect_closed("CONNECTION: CLOSE")


def t_error_responses_are_well_formed(S):
    for path, want in (("/nope", 404), ("/../x", 400), ("/docs", 301)):
        r = st.get(S.port, path)
        eq(r.status, want, "GET %s status" % path)
        st.http_date(r.get("Date"), "GET %s Date" % path)
        eq(r.need("Content-Length"), str(len(r.body)), "GET %s Content-Length" % path)
        ok(r.get("Content-Type") is not None or not r.body, "GET %s: body without type" % path)


def t_two_workers(S):
    with st.Servd(S.fixture.pack, workers=2) as srv:
        errors = []
        paths = ["/tiny.txt", "/index.html", "/data/big.txt", "/img/dot.png"]

        def client(i):
            try:
                with st.Conn(srv.port) as c:
                    for j in range(4):
                        p = paths[(i + j) % len(paths)]
                        c.send(st.req("GET", p, [("Accept-Encoding", "gzip")]))
                        r = c.read_response()
                        if r.status != 200 or st.decode(r.body, st.content_encoding(r)) != \
                                S.fixture.files[p]:
                            errors.append("client %d %s: %d" % (i, p, r.status))
            except Exception as e:  # noqa: BLE001 - collected and reported below
                errors.append("client %d: %s" % (i, e))

        threads = [threading.Thread(target=client, args=(i,)) for i in range(40)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        eq([i for i, t in enumerate(threads) if t.is_alive()], [],
           "--workers 2: clients still waiting after 30 s")
        eq(errors, [], "--workers 2 with 40 concurrent clients")


def t_sigterm_with_idle_and_busy_clients_exits_0(S):
    srv = st.Servd(S.fixture.pack, workers=2).start()
    conns = []
    try:
        for i in range(5):
            c = st.Conn(srv.port)
            c.send(st.req("GET", "/tiny.txt"))
            c.read_response()
            conns.append(c)  # idle keep-alive connections
        half = st.Conn(srv.port)
        half.send(b"GET /index.html HTTP/1.1\r\nHo")  # a request in progress
        conns.append(half)
        t0 = time.time()
        srv.stop(check=True)  # SIGTERM; must exit 0 within STOP_TIMEOUT
        ok(time.time() - t0 < st.STOP_TIMEOUT, "SIGTERM took too long")
    finally:
        for c in conns:
            c.close()
        srv.stop(check=False)


def t_startup_refuses_bad_packs(S):
    missing = os.path.join(st.tmpdir(), "no-such-pack.lmdb")
    garbage = os.path.join(st.tmpdir(), "garbage.lmdb")
    with open(garbage, "wb") as f:
        f.write(b"this is not an lmdb file\n" * 1000)
    empty = os.path.join(st.tmpdir(), "empty.lmdb")
    open(empty, "wb").close()
    for pack in (missing, garbage, empty):
        p = subprocess.run([st.SERVD, "--pack", pack, "--listen", "127.0.0.1:%d" % st.free_port(),
                            "--workers", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=30)
        ok(p.returncode != 0, "servd --pack %s exited 0" % pack)
        msg = (p.stderr + p.stdout).decode(errors="replace")
        ok(os.path.basename(pack) in msg, "servd --pack %s: message does not name the file: %r"
           % (pack, msg))


def t_www_headers(S):
    if S.www is None:
        raise st.Skip("www/ is not present")
    for path, data in sorted(S.www.files.items()):
        for ae in (None, "br, gzip"):
            r = st.get(S.www.port, st.url(path), [] if ae is None else [("Accept-Encoding", ae)])
            check_200(r, path, data, "www GET %s (%r)" % (path, ae))


if __name__ == "__main__":
    st.run(st.collect(globals()), lambda: st.Sites(workers=1))
