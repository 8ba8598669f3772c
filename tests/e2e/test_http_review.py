#!/usr/bin/env python3
"""Findings of the RFC 9110 / 9112 review of servd's HTTP layer, against a real servd:
- CONNECT with its authority-form target (RFC 9112 §3.2.3) is a known method servd does
  not allow: 405 with "Allow: GET, HEAD, OPTIONS", not 400; with another target, or
  another method with the asterisk-form, 400;
- the parts of a multipart/byteranges 206 follow the order of the range-specs
  (RFC 9110 §15.3.7.2), a coalesced range standing where its first spec was;
- a HEAD request that fails to parse gets its error head without the error body
  (RFC 9110 §9.3.2)."""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servdtest as st  # noqa: E402
from servdtest import eq, ok  # noqa: E402

TINY = "/tiny.txt"
BIG = "/data/big.txt"


def t_connect_is_405(S):
    with st.Conn(S.port) as c:
        c.send(b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n"
               + st.req("GET", TINY))
        r = c.read_response()
        eq(r.status, 405, "CONNECT example.com:443: status")
        eq(r.get("Allow"), "GET, HEAD, OPTIONS", "CONNECT: Allow")
        eq(int(r.need("Content-Length")), len(r.body), "CONNECT: Content-Length")
        st.http_date(r.get("Date"), "CONNECT: Date")
        r2 = c.read_response()
        eq((r2.status, r2.body), (200, S.fixture.files[TINY]), "GET pipelined after CONNECT")
    # authority-form with any other method stays malformed
    r, closed = st.raw_outcome(S.port, b"GET example.com:443 HTTP/1.1\r\nHost: a\r\n\r\n")
    eq((r.status, closed), (400, True), "GET with an authority-form target")
    # and CONNECT takes no other form (RFC 9110 §9.3.6), the asterisk-form is
    # only a server-wide OPTIONS's (RFC 9112 §3.2.4)
    for raw in (b"CONNECT /tiny.txt HTTP/1.1\r\nHost: a\r\n\r\n",
                b"POST * HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n"):
        r, closed = st.raw_outcome(S.port, raw)
        eq((r.status, closed), (400, True), raw.split(b"\r\n")[0].decode())


def t_head_parse_error_has_no_body(S):
    """RFC 9110 §9.3.2: a response to HEAD has no content, errors included."""
    import socket
    for raw in (b"HEAD /x HTTP/1.1\r\n\r\n",                       # no Host: 400
                b"HEAD /x HTTP/1.1\r\nHost: a\r\nBad Name: x\r\n\r\n"):  # 400
        s = socket.create_connection(("127.0.0.1", S.port), timeout=5)
        s.sendall(raw)
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        s.close()
        head, sep, rest = data.partition(b"\r\n\r\n")
        ok(sep == b"\r\n\r\n" and head.startswith(b"HTTP/1.1 400 "),
           f"HEAD parse error: a 400 head (got {data[:60]!r})")
        eq(rest, b"", f"HEAD parse error {raw[:30]!r}: bytes after the head")


def parts_of(r, what):
    m = re.match(r'^multipart/byteranges;\s*boundary=("?)([^";]+)\1\s*$', r.need("Content-Type"))
    ok(m is not None, what + ": not multipart/byteranges: %r" % r.get("Content-Type"))
    eq(int(r.need("Content-Length")), len(r.body), what + ": Content-Length")
    return [tuple(int(x) for x in p) for p in
            re.findall(rb"Content-Range: bytes (\d+)-(\d+)/\d+\r\n", r.body)]


def t_multipart_parts_in_request_order(S):
    data = S.fixture.files[BIG]
    n = len(data)
    for rng, want in (("bytes=5000-5009,0-9", [(5000, 5009), (0, 9)]),
                      ("bytes=-10,100-109,%d-" % (n - 20), [(n - 20, n - 1), (100, 109)]),
                      ("bytes=300-309,100-109,200-209", [(300, 309), (100, 109), (200, 209)])):
        r = st.get(S.port, BIG, [("Range", rng)])
        eq(r.status, 206, "Range %r: status" % rng)
        parts = parts_of(r, "Range %r" % rng)
        eq(parts, want, "Range %r: parts in request order" % rng)
        for a, b in parts:
            ok(data[a:b + 1] in r.body, "Range %r: part %d-%d bytes" % (rng, a, b))


def t_options_carries_long_cors_lines(S):
    """The Access-Control-* lines of a path reach its OPTIONS answer whole, however long:
    a rules value may be 4096 bytes, and copying them into servd's 4 KiB scratch buffer
    answered 500 to two 3000-byte lines that every GET carried."""
    import json
    import os
    root = os.path.join(st.tmpdir(), "cors-site")
    os.makedirs(root, exist_ok=True)
    with open(os.path.join(root, "api.json"), "w") as f:
        f.write('{"ok": true}\n')
    allow = ", ".join("X-H%04d" % i for i in range(380))[:3000]
    expose = ", ".join("X-E%04d" % i for i in range(380))[:3000]
    rules = os.path.join(st.tmpdir(), "cors-rules.json")
    with open(rules, "w") as f:
        json.dump({"headers": [
            {"match": "/api.json", "name": "Access-Control-Allow-Origin", "value": "*"},
            {"match": "/api.json", "name": "X-Between", "value": "1"},
            {"match": "/api.json", "name": "Access-Control-Allow-Headers", "value": allow},
            {"match": "/api.json", "name": "Access-Control-Expose-Headers",
             "value": expose}]}, f)
    with st.Servd(st.pack(root, "cors.lmdb", extra=["--rules", rules])) as s:
        r = st.get(s.port, "/api.json", method="OPTIONS")
        eq(r.status, 200, "OPTIONS with 6 KB of CORS lines: status")
        eq((r.get("Access-Control-Allow-Origin"), r.get("Access-Control-Allow-Headers"),
            r.get("Access-Control-Expose-Headers"), r.get("X-Between")),
           ("*", allow, expose, None), "OPTIONS: the Access-Control-* lines, only those")
        eq((r.need("Content-Length"), r.body), ("0", b""), "OPTIONS: no content")
        g = st.get(s.port, "/api.json")
        eq(g.get("Access-Control-Allow-Headers"), allow, "GET carries the same line")


if __name__ == "__main__":
    st.run(st.collect(globals()), lambda: st.Sites(workers=1, with_www=False))
