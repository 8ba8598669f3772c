#!/usr/bin/env python3
"""Message framing and request-smuggling shapes against a real servd, over raw sockets
(HTTP.md "Message framing", RFC 9112): CL+TE, differing or invalid Content-Length and
non-chunked Transfer-Encoding -> 400 and close; missing or duplicate Host, whitespace
before the colon, obs-fold, bare CR/LF, NUL and control bytes -> 400; 414 for a long
request line, 431 for a large head or too many fields, 505 for HTTP/2.0, 405 with
"Allow: GET, HEAD, OPTIONS" for every method but GET, HEAD and OPTIONS; OPTIONS answered 200; a request pipelined after a framing error is never
answered; a small body on GET is drained and the next request answered; pipelined
requests answered in order, however the bytes are split, and all of them after the client
half-closes; Date on every status; Via, Max-Forwards, Forwarded and Upgrade from a proxy
change nothing."""
import os
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servdtest as st  # noqa: E402
from servdtest import eq, ok  # noqa: E402

TINY = "/tiny.txt"
MAX_HEADERS = 100  # SV_MAX_HEADERS: Host counts as one
# The request pipelined after a bad one: answering it would mean smuggling succeeded.
SMUGGLED = st.req("GET", TINY)


def H(*lines):
    """A request head from raw lines (bytes or str), with the final blank line."""
    return b"".join((x if isinstance(x, bytes) else x.encode("latin-1")) + b"\r\n"
                    for x in lines) + b"\r\n"


def outcome(S, data, method="GET"):
    """read_quick() with a longer wait, for requests whose follower must be answered."""
    return read_quick(S, data, wait=st.IO_TIMEOUT, method=method)


def read_quick(S, data, wait=3.0, method="GET"):
    """Sends data + SMUGGLED in one write. Returns (first response or None, what followed,
    second response): 'closed' when the server closed with nothing more, 'answered' when it
    answered the pipelined request, 'open' when it did neither within `wait` seconds."""
    with st.Conn(S.port, timeout=wait) as c:
        try:
            c.send(data + SMUGGLED)
        except (BrokenPipeError, ConnectionResetError):
            pass
        try:
            r = c.read_response(method)
        except st.Closed:
            return None, "closed", None
        try:
            r2 = c.read_response()
            return r, "answered", r2
        except st.Closed:
            return r, "closed", None
        except st.Fail as e:
            if "timed out" in str(e):
                return r, "open", None
            raise


def framing_error(S, data, want, what):
    """The bad request gets `want` (a status or a tuple of allowed statuses), an exact
    Content-Length, and then the connection is closed: the pipelined request is never
    answered."""
    r, after, r2 = read_quick(S, data)
    ok(r is not None, "%s: connection closed without any response\nsent: %r" % (what, data))
    wants = want if isinstance(want, tuple) else (want,)
    ok(r.status in wants, "%s: status %d, want %s\nsent: %r\ngot:\n%s" % (
        what, r.status, "/".join(map(str, wants)), data, r.dump()))
    eq(int(r.need("Content-Length")), len(r.body), what + ": Content-Length of the error")
    ok(after == "closed", "%s: after the %d the connection was %s (want closed)%s\nsent: %r" % (
        what, r.status, after, "" if r2 is None else "; the pipelined request got %d" % r2.status,
        data))
    return r


def served_ok(S, data, what, path=TINY):
    """The request is answered 200 with the file, and the connection keeps serving."""
    r, after, r2 = outcome(S, data)
    ok(r is not None, what + ": no response")
    eq(r.status, 200, what + ": status (sent %r)" % data)
    eq(r.body, S.fixture.files[path], what + ": body")
    eq(after, "answered", what + ": the pipelined request after it")
    eq((r2.status, r2.body), (200, S.fixture.files[TINY]), what + ": pipelined response")


# ---- Content-Length / Transfer-Encoding ----

def t_cl_and_te_together(S):
    framing_error(S, H("POST / HTTP/1.1", "Host: x", "Content-Length: 5",
                       "Transfer-Encoding: chunked") + b"0\r\n\r\n", 400, "CL then TE")
    framing_error(S, H("GET / HTTP/1.1", "Host: x", "Transfer-Encoding: chunked",
                       "Content-Length: 5") + b"0\r\n\r\n", 400, "TE then CL (GET)")
    framing_error(S, H("GET / HTTP/1.1", "Host: x", "Content-Length: 0",
                       "Transfer-Encoding: chunked") + b"0\r\n\r\n", 400, "CL 0 + TE")


def t_differing_content_length(S):
    framing_error(S, H("GET / HTTP/1.1", "Host: x", "Content-Length: 5", "Content-Length: 6")
                  + b"hello!", 400, "two differing Content-Length lines")
    framing_error(S, H("GET / HTTP/1.1", "Host: x", "Content-Length: 5, 6") + b"hello!", 400,
                  "Content-Length list with differing values")


def t_invalid_content_length(S):
    for v in ("abc", "-1", "+5", "0x10", "1 2", "5.0", "99999999999999999999999", "", " ",
              "5a", "\xb3"):
        framing_error(S, H("GET / HTTP/1.1", "Host: x", "Content-Length: " + v), 400,
                      "Content-Length %r" % v)


def t_transfer_encoding_not_chunked_last(S):
    for v in ("gzip", "chunked, gzip", "identity", "chunked, identity", "xchunked", "chunkedx"):
        framing_error(S, H("GET / HTTP/1.1", "Host: x", "Transfer-Encoding: " + v)
                      + b"0\r\n\r\n", 400, "Transfer-Encoding %r" % v)


def t_transfer_encoding_unsupported_coding_before_chunked(S):
    # Final coding chunked but gzip before it: a coding servd does not implement
    # (RFC 9112 §6.1 suggests 501); either way the framing is in doubt: close.
    framing_error(S, H("GET / HTTP/1.1", "Host: x", "Transfer-Encoding: gzip, chunked")
                  + b"0\r\n\r\n", (400, 501), "Transfer-Encoding 'gzip, chunked'")


def t_transfer_encoding_on_http10(S):
    # RFC 9112 §6.1: TE in an HTTP/1.0 message means faulty framing: close after responding.
    framing_error(S, H("GET / HTTP/1.0", "Host: x", "Transfer-Encoding: chunked")
                  + b"0\r\n\r\n", (400, 501), "Transfer-Encoding in HTTP/1.0")


def t_chunked_body_drained_or_refused(S):
    """A chunked body on GET (RFC 9112 7.1) that arrives with its head is skipped and the
    next request answered; nothing inside it is answered as a request. A malformed one is
    a 400, and the connection closes; one with a chunk too large to skip is answered and
    the connection closed."""
    inner = st.req("GET", "/index.html")  # hidden in the chunk data
    bodies = [
        b"0\r\n\r\n",
        b"5\r\nhello\r\n0\r\n\r\n",
        b"%x\r\n" % len(inner) + inner + b"\r\n0\r\n\r\n",
        b"5;ext=1\r\nhello\r\n0\r\n\r\n",
        b"5;a=\"q;\\\"\"\r\nhello\r\n0\r\nX-Trailer: 1\r\n\r\n",
    ]
    for body in bodies:
        data = H("GET /docs/guide.txt HTTP/1.1", "Host: x", "Transfer-Encoding: chunked") + body
        r, after, r2 = read_quick(S, data)
        what = "chunked body %r" % body[:40]
        ok(r is not None, what + ": no response")
        eq((r.status, r.body), (200, S.fixture.files["/docs/guide.txt"]), what)
        eq(r.get("Connection"), None, what + ": Connection")
        eq(after, "answered", what + ": after the 200 (was the body skipped?)")
        eq((r2.status, r2.body), (200, S.fixture.files[TINY]),
           what + ": the pipelined response (was the chunk data parsed as a request?)")
    for body in (b"-1\r\n\r\n", b"0x5\r\nhello\r\n0\r\n\r\n", b"5 \r\nhello\r\n0\r\n\r\n",
                 b"\r\n\r\n", b"5\r\nhelloXX0\r\n\r\n", b"5\nhello\n0\n\n",
                 b"0\r\nGET /index.html HTTP/1.1\r\n\r\n"):
        framing_error(S, H("GET / HTTP/1.1", "Host: x", "Transfer-Encoding: chunked") + body, 400,
                      "bad chunked body %r" % body[:30])
    data = H("GET / HTTP/1.1", "Host: x", "Transfer-Encoding: chunked") + \
        b"ffffffffffffffffffff\r\nx\r\n0\r\n\r\n"
    r, after, _ = read_quick(S, data)
    ok(r is not None, "a chunk too large to skip: closed without a response")
    eq((r.status, r.get("Connection"), after), (200, "close", "closed"),
       "a chunk too large to skip: answered, then closed")
    S.check_alive()


def t_get_with_small_body_is_drained(S):
    served_ok(S, H("GET /tiny.txt HTTP/1.1", "Host: x", "Content-Length: 5") + b"hello",
              "GET with a 5-byte body")
    body = b"GET /index.html HTTP/1.1\r\nHost: x\r\n\r\n"  # a request hidden in the body
    served_ok(S, H("GET /tiny.txt HTTP/1.1", "Host: x", "Content-Length: %d" % len(body)) + body,
              "GET whose body looks like a request")
    r, after, r2 = outcome(S, H("HEAD /tiny.txt HTTP/1.1", "Host: x", "Content-Length: 3") + b"abc",
                           "HEAD")
    eq((r.status, after), (200, "answered"), "HEAD with a body then a pipelined GET")
    eq(r2.body, S.fixture.files[TINY], "pipelined GET after HEAD with a body")


def t_get_with_large_body_answered_then_closed(S):
    # Only the head is sent: servd must not wait for 10 MB before deciding.
    with st.Conn(S.port) as c:
        c.send(H("GET /tiny.txt HTTP/1.1", "Host: x", "Content-Length: 10000000"))
        try:
            r = c.read_response()
        except st.Closed:
            raise st.Fail("GET with Content-Length 10000000: closed without a response")
        ok(r.status in (200, 413), "GET with a 10 MB body: status %d (want 200 or 413)" % r.status)
        c.expect_closed("GET with a body larger than servd drains")


def t_large_body_read_while_closing(S):
    """A client that writes its whole request before it reads: a body servd does not drain
    (over 64 KiB, by Content-Length or in chunks) ends the connection after the response,
    and servd must go on reading (and dropping) the body while it writes a response
    larger than the socket buffers hold, or both sides block in their writes until the
    send timeout (RFC 9112 §9.6). The response arrives whole, with Connection: close,
    then the end."""
    root = os.path.join(st.tmpdir(), "large-body-site")
    os.makedirs(root, exist_ok=True)
    big = os.urandom(6 << 20)  # more than the server's send buffer and the client's receive
    with open(os.path.join(root, "big.bin"), "wb") as f:
        f.write(big)
    pack = st.pack(root, "large-body.lmdb")
    chunk = b"z" * (1 << 20)
    bodies = {
        "Content-Length": (["Content-Length: %d" % (24 * len(chunk))], chunk * 24),
        "chunked": (["Transfer-Encoding: chunked"],
                    (b"%x\r\n" % len(chunk) + chunk + b"\r\n") * 24 + b"0\r\n\r\n"),
    }
    with st.Servd(pack) as srv:
        for what, (fields, body) in bodies.items():
            with st.Conn(srv.port, timeout=20) as c:
                try:
                    c.send(H("GET /big.bin HTTP/1.1", "Host: x", *fields) + body)
                except (socket.timeout, OSError) as e:
                    raise st.Fail("%s body of 24 MB: the request could not be sent whole (%s): "
                                  "servd stopped reading" % (what, e))
                r = c.read_response()
                eq(r.status, 200, what + ": status")
                eq(r.need("Connection").lower(), "close", what + ": Connection")
                ok(r.body == big, "%s: the 6 MB body arrived whole (%d bytes)" % (what, len(r.body)))
                c.expect_closed(what + ": closed after the response")


def t_answer_before_the_body_closes(S):
    """A request answered before its whole body has arrived closes its connection after
    the answer (Connection: close), rather than staying open to read the rest. Kept
    open, a front end that takes the answer and reuses the connection without sending
    the body (Apache Traffic Server 9.2) got its next request read as that body, and
    bytes of the sender's choosing answered as a request of their own: a smuggled
    request, cached under another URL. A body that arrives with its head is drained
    and the connection kept, as before."""
    tiny = S.fixture.files[TINY]
    with st.Conn(S.port) as c:
        c.send(H("GET /tiny.txt HTTP/1.1", "Host: x", "Content-Length: 5"))
        r = c.read_response()
        eq((r.status, r.body, r.get("Connection")), (200, tiny, "close"),
           "a body still to come: the answer, with Connection: close")
        try:
            c.send(H("GET /index.html HTTP/1.1", "Host: x"))
        except (BrokenPipeError, ConnectionResetError):
            pass
        c.expect_closed("after the answer to a request whose body had not come")
    # the body half there: the same, with a Content-Length or chunked
    for fields, part in ((["Content-Length: 10"], b"hello"),
                         (["Transfer-Encoding: chunked"], b""),
                         (["Transfer-Encoding: chunked"], b"5\r\nhello\r\n"),
                         (["Transfer-Encoding: chunked"], b"0\r\nX-Trailer: 1\r\n")):
        what = "%s, %r sent" % (fields[0], part)
        with st.Conn(S.port) as c:
            c.send(H("GET /tiny.txt HTTP/1.1", "Host: x", *fields) + part)
            r = c.read_response()
            eq((r.status, r.get("Connection")), (200, "close"), what + ": Connection: close")
            c.expect_closed(what + ": after the answer to a request whose body was not all there")
    # Expect: 100-continue: no 100; the answer at once, and the client need not send it
    for method, status in (("GET", 200), ("POST", 405)):
        with st.Conn(S.port) as c:
            c.send(H("%s /tiny.txt HTTP/1.1" % method, "Host: x", "Expect: 100-continue",
                     "Content-Length: 5"))
            r = c.read_response()
            eq((r.status, r.get("Connection")), (status, "close"),
               "%s with Expect: 100-continue: the answer, no 100" % method)
            c.expect_closed("after the answer to %s with Expect: 100-continue" % method)
    # a body that came with its head is drained, and the connection goes on
    with st.Conn(S.port) as c:
        c.send(H("GET /tiny.txt HTTP/1.1", "Host: x", "Content-Length: 5") + b"hello" +
               H("GET /tiny.txt HTTP/1.1", "Host: x"))
        for i in range(2):
            r = c.read_response()
            eq((r.status, r.body, r.get("Connection")), (200, tiny, None),
               "request %d, the body with its head: kept alive" % i)
        c.nothing_more()
    # curl with Expect: 100-continue gets its answers, on a new connection each time
    url = "http://127.0.0.1:%d/tiny.txt" % S.port
    p = subprocess.run(["curl", "-sS", "--http1.1", "-H", "Expect: 100-continue", "--data-binary",
                        "hello", "-X", "GET", "-w", "%{http_code} %{num_connects}\\n",
                        "-o", "/dev/null", url, "-o", "/dev/null", url],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    eq((p.returncode, p.stdout.decode().split("\n")[:2]), (0, ["200 1", "200 1"]),
       "curl: two requests with Expect: 100-continue (%s)" % p.stderr.decode())
    # and a refused POST: the 405 at once, no error from curl, a new connection after it
    w = "%{http_code} %{num_connects}\n"
    p = subprocess.run(["curl", "-sS", "--http1.1", "-H", "Expect: 100-continue", "--data-binary",
                        "@-", "-w", w, "-o", "/dev/null", url,
                        "--next", "-sS", "--http1.1", "-w", w, "-o", "/dev/null", url],
                       input=b"x" * 3000,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    eq((p.returncode, p.stdout.decode().split("\n")[:2]), (0, ["405 1", "200 1"]),
       "curl: a POST refused before its body, then a GET (%s)" % p.stderr.decode())


def t_host_rules(S):
    framing_error(S, H("GET / HTTP/1.1"), 400, "HTTP/1.1 without Host")
    framing_error(S, H("GET / HTTP/1.1", "Host: a", "Host: b"), 400, "two Host lines")
    framing_error(S, H("GET / HTTP/1.1", "Host: a", "Host: a"), 400, "two identical Host lines")
    r = st.exchange(S.port, H("GET /tiny.txt HTTP/1.0"))
    eq((r.status, r.body), (200, S.fixture.files[TINY]), "HTTP/1.0 without Host is fine")


def t_whitespace_before_colon(S):
    framing_error(S, H("GET / HTTP/1.1", "Host : x"), 400, "'Host : x'")
    framing_error(S, H("GET / HTTP/1.1", "Host: x", "X-Foo : bar"), 400, "'X-Foo : bar'")
    framing_error(S, H("GET / HTTP/1.1", "Host: x", "X-Foo\t: bar"), 400, "'X-Foo<TAB>: bar'")
    framing_error(S, H("GET / HTTP/1.1", "Host: x", "Content-Length : 5") + b"hello", 400,
                  "'Content-Length : 5'")


def t_obs_fold(S):
    framing_error(S, H("GET / HTTP/1.1", "Host: x", "X-Foo: a", " b"), 400, "obs-fold (space)")
    framing_error(S, H("GET / HTTP/1.1", "Host: x", "X-Foo: a", "\tb"), 400, "obs-fold (tab)")
    framing_error(S, H("GET / HTTP/1.1", " Host: x"), 400, "whitespace-led first field line")
    framing_error(S, H("GET / HTTP/1.1", "Host: x", "Content-Length: 0", " 5"), 400,
                  "folded Content-Length")


def t_bare_cr_lf_nul_ctl(S):
    cases = [
        (b"GET / HTTP/1.1\r\nHost: x\r\nX-Foo: a\rb\r\n\r\n", "bare CR in a value"),
        (b"GET / HTTP/1.1\r\nHost: x\r\nX-Foo: a\r\r\n\r\n", "CR CR LF"),
        (b"GET / HTTP/1.1\r\nHost: x\r\nX-Foo: a\nb\r\n\r\n", "bare LF in a value"),
        (b"GET / HTTP/1.1\r\nHost: x\r\nX-Foo: a\x00b\r\n\r\n", "NUL in a value"),
        (b"GET / HTTP/1.1\r\nHost: x\r\nX-F\x00o: b\r\n\r\n", "NUL in a name"),
        (b"GET / HTTP/1.1\r\nHost: x\x00\r\n\r\n", "NUL in Host"),
        (b"GET / HTTP/1.1\r\nHost: x\r\nX-Foo: a\x01b\r\n\r\n", "control byte 0x01 in a value"),
        (b"GET / HTTP/1.1\r\nHost: x\r\nX-Foo: a\x7fb\r\n\r\n", "DEL in a value"),
        (b"GET / HTTP/1.1\r\nHost: x\r\nX-Foo: a\x1bb\r\n\r\n", "ESC in a value"),
        (b"GET /\x00 HTTP/1.1\r\nHost: x\r\n\r\n", "NUL in the request line"),
        (b"GET / HTTP/1.1\rHost: x\r\n\r\n", "bare CR after the request line"),
    ]
    for data, what in cases:
        framing_error(S, data, 400, what)


def t_bad_field_lines(S):
    for line, what in (("X-Foo bar", "a line without a colon"), (": value", "an empty name"),
                       ("X(Foo): 1", "'(' in a name"), ("X Foo: 1", "a space in a name"),
                       ("X-Foo\x80: 1", "a high byte in a name"), ("X-\"a\": 1", "quote in a name")):
        framing_error(S, H("GET / HTTP/1.1", "Host: x", line), 400, what)


def t_bad_request_lines(S):
    for line in ("GET / HTTP/1.1 x", "GET / http/1.1", "GET / HTTP/1", "GET / HTTP/1.1.1",
                 "GET / HTTP/11", "GET /", "GET", "GET / HTTPS/1.1", "GET / HTTP/a.b",
                 "GET /tiny.txt\x0bHTTP/1.1", "GET /a b HTTP/1.1"):
        framing_error(S, H(line, "Host: x"), (400, 505), "request line %r" % line)
    # RFC 9112 §3 lets a server either refuse extra whitespace in the request line (400)
    # or split on whitespace; serving anything but the named file would be wrong.
    for line in ("GET  /tiny.txt HTTP/1.1", "GET /tiny.txt  HTTP/1.1", " GET /tiny.txt HTTP/1.1",
                 "GET /tiny.txt HTTP/1.1 ", "GET\t/tiny.txt\tHTTP/1.1"):
        r, after, r2 = read_quick(S, H(line, "Host: x"))
        what = "request line %r" % line
        ok(r is not None, what + ": no response")
        if r.status == 400:
            eq(after, "closed", what + ": after 400")
        else:
            eq((r.status, r.body), (200, S.fixture.files[TINY]), what + ": lenient parse")


def t_leading_empty_line_tolerated(S):
    # RFC 9112 §2.2: a server SHOULD ignore at least one empty line before the request-line.
    r, after, r2 = outcome(S, b"\r\n" + H("GET /tiny.txt HTTP/1.1", "Host: x"))
    eq((r.status, r.body), (200, S.fixture.files[TINY]), "CRLF before the request line")


def t_versions(S):
    for v in ("HTTP/2.0", "HTTP/3.0", "HTTP/2", "HTTP/9.9"):
        framing_error(S, H("GET / " + v, "Host: x"), (505, 400) if v == "HTTP/2" else 505,
                      "version %s" % v)
    framing_error(S, H("GET / HTTP/0.9", "Host: x"), (400, 505), "HTTP/0.9")
    # RFC 9110 §15.6.6: the 505's representation SHOULD say what the server supports.
    r = framing_error(S, H("GET / HTTP/2.0", "Host: x"), 505, "version HTTP/2.0")
    ok(b"HTTP/1.1" in r.body and b"HTTP/1.0" in r.body, "505 body names the versions: %r" % r.body)
    # A higher minor version of HTTP/1 is answered as HTTP/1.1 (RFC 9110 §2.5) or refused.
    r = st.exchange(S.port, H("GET /tiny.txt HTTP/1.2", "Host: x"))
    ok(r.status in (200, 505), "HTTP/1.2: status %d" % r.status)
    # The response's own version is HTTP/1.1, also to HTTP/1.0 clients.
    r = st.exchange(S.port, H("GET /tiny.txt HTTP/1.0"))
    eq(r.version, "HTTP/1.1", "response version to an HTTP/1.0 request")


# ---- limits ----

def t_request_line_too_long_414(S):
    framing_error(S, H("GET /" + "a" * 9000 + " HTTP/1.1", "Host: x"), 414,
                  "9 KB request line")
    framing_error(S, H("GET /" + "a" * 8200 + " HTTP/1.1", "Host: x"), 414,
                  "8.2 KB request line")
    # An 8000-byte request line is within the limit: a normal 404.
    r = st.exchange(S.port, H("GET /" + "b" * 7980 + " HTTP/1.1", "Host: x"))
    eq(r.status, 404, "an 8000-byte request line: status")
    # A long request line sent without its CRLF yet: 414 without waiting for the rest.
    with st.Conn(S.port) as c:
        c.send(b"GET /" + b"c" * 20000)
        r = c.read_response()
        eq(r.status, 414, "20 KB of request line without CRLF")
        c.expect_closed("after 414")


def t_head_too_large_431(S):
    big = ["X-Big-%d: %s" % (i, "v" * 1000) for i in range(36)]  # ~36 KB, 37 fields
    framing_error(S, H("GET / HTTP/1.1", "Host: x", *big), 431, "36 KB of header fields")
    one = "Cookie: " + "c" * 33000
    framing_error(S, H("GET / HTTP/1.1", "Host: x", one), 431, "one 33 KB field")
    many = ["X-N-%d: 1" % i for i in range(MAX_HEADERS + 6)]
    framing_error(S, H("GET / HTTP/1.1", "Host: x", *many), 431, "107 header fields")
    ok_fields = ["X-N-%d: 1" % i for i in range(MAX_HEADERS - 4)]
    r = st.exchange(S.port, H("GET /tiny.txt HTTP/1.1", "Host: x", *ok_fields))
    eq(r.status, 200, "97 header fields (within 100)")
    r = st.exchange(S.port, H("GET /tiny.txt HTTP/1.1", "Host: x", "X-Big: " + "v" * 12000))
    eq(r.status, 200, "a 12 KB header field")


def t_long_heads_served(S):
    """Heads past the 16 KiB first buffer, up to 32 KiB (nginx's default total, the header
    total Cloudflare forwards): large cookies. Each is answered, however it arrives, and the
    connection goes on with the requests behind it."""
    big = ["X-Big-%d: %s" % (i, "v" * 1000) for i in range(20)]  # ~20 KB
    r = st.exchange(S.port, H("GET /tiny.txt HTTP/1.1", "Host: x", *big))
    eq((r.status, r.body), (200, S.fixture.files[TINY]), "20 KB of header fields")
    cookie = "Cookie: " + "; ".join("c%d=%s" % (i, "z" * 4000) for i in range(7))  # ~28 KB
    r = st.exchange(S.port, H("GET /tiny.txt HTTP/1.1", "Host: x", cookie))
    eq((r.status, r.body), (200, S.fixture.files[TINY]), "a 28 KB Cookie")
    long_head = H("GET /tiny.txt HTTP/1.1", "Host: x", "X-Pad: " + "p" * 24000)
    short = st.req("GET", "/A.txt")
    # whole with a request behind it; split at, before and after the 16 KiB buffer's end;
    # in pieces smaller than a line; a body behind it that the connection drains
    cases = [("in one write with a request behind it", [long_head + short]),
             ("split at 16384", [long_head[:16384], long_head[16384:] + short]),
             ("split at 16383 and 16385", [long_head[:16383], long_head[16383:16385],
                                          long_head[16385:] + short]),
             ("in 3000-byte pieces", [(long_head + short)[i:i + 3000]
                                      for i in range(0, len(long_head + short), 3000)])]
    with_body = H("GET /tiny.txt HTTP/1.1", "Host: x", "Content-Length: 5",
                  "X-Pad: " + "p" * 20000) + b"hello"
    cases.append(("with a 5-byte body", [with_body + short]))
    for what, pieces in cases:
        with st.Conn(S.port) as c:
            for p in pieces:
                c.send(p)
                time.sleep(0.02)
            r = c.read_response()
            eq((r.status, r.body), (200, S.fixture.files[TINY]), "a 24 KB head %s" % what)
            r = c.read_response()
            eq((r.status, r.body), (200, S.fixture.files["/A.txt"]),
               "the request after a 24 KB head %s" % what)
    # twice on one connection: the larger buffer is given back and taken again
    with st.Conn(S.port) as c:
        for i in range(2):
            c.send(long_head[:20000])
            time.sleep(0.02)
            c.send(long_head[20000:])
            eq(c.read_response().status, 200, "a 24 KB head in two writes, #%d" % (i + 1))


# ---- methods ----

def t_unknown_methods_405(S):
    """A method servd does not know, or a known one in other letters' case (methods are
    case-sensitive), is not allowed: 405 with Allow, as HTTP.md asks for every method
    but GET and HEAD (RFC 9110 allows 501 for an unknown one; nginx 1.22 answers
    405 too for one in capitals, and 400 for "get")."""
    for m in ("FOO", "get", "Get", "GETT", "BREW", "PRI", "PROPFIND", "M-SEARCH"):
        r, after, r2 = read_quick(S, H("%s /tiny.txt HTTP/1.1" % m, "Host: x"))
        what = "method %s" % m
        ok(r is not None, what + ": no response")
        eq(r.status, 405, what + ": status")
        eq(sorted(t.strip() for t in r.need("Allow").split(",")), ["GET", "HEAD", "OPTIONS"],
           what + ": Allow")
        eq(int(r.need("Content-Length")), len(r.body), what + ": Content-Length")
        # the request is whole (no body): the connection goes on (RFC 9112 §9.3)
        eq(after, "answered", what + ": what followed the 405")
        eq((r2.status, r2.body), (200, S.fixture.files[TINY]), what + ": next response")


def t_disallowed_methods_405(S):
    for m in ("POST", "PUT", "DELETE", "TRACE"):
        r, after, r2 = read_quick(S, H("%s /tiny.txt HTTP/1.1" % m, "Host: x"))
        what = "method %s" % m
        ok(r is not None, what + ": no response")
        eq(r.status, 405, what + ": status")
        allow = r.need("Allow")
        eq(sorted(t.strip() for t in allow.split(",")), ["GET", "HEAD", "OPTIONS"],
           what + ": Allow")
        eq(int(r.need("Content-Length")), len(r.body), what + ": Content-Length")
        eq(after, "answered", what + ": what followed the 405")
        eq((r2.status, r2.body), (200, S.fixture.files[TINY]), what + ": next response")
    # A POST with a body: the body is not parsed as the next request.
    body = b"GET /index.html HTTP/1.1\r\nHost: x\r\n\r\n"
    r, after, r2 = read_quick(S, H("POST /tiny.txt HTTP/1.1", "Host: x",
                                   "Content-Length: %d" % len(body)) + body)
    eq(r.status, 405, "POST with a body: status")
    eq(after, "answered", "POST with a body: what followed the 405 (the body was read past)")
    eq((r2.status, r2.body), (200, S.fixture.files[TINY]),
       "after POST with a body, the next response (must be the pipelined GET /tiny.txt)")


def t_options_200(S):
    """RFC 9110 §9.3.7: 200 with Allow and Content-Length: 0, and the connection goes on."""
    r, after, r2 = read_quick(S, H("OPTIONS /tiny.txt HTTP/1.1", "Host: x"))
    eq(r.status, 200, "OPTIONS: status")
    eq(sorted(t.strip() for t in r.need("Allow").split(",")), ["GET", "HEAD", "OPTIONS"],
       "OPTIONS Allow")
    eq((r.need("Content-Length"), r.body), ("0", b""), "OPTIONS: no content")
    eq(after, "answered", "OPTIONS: what followed (a preflight keeps its connection)")
    eq((r2.status, r2.body), (200, S.fixture.files[TINY]), "OPTIONS: next response")
    eq(read_quick(S, H("OPTIONS /nope HTTP/1.1", "Host: x"))[0].status, 404, "OPTIONS /nope")


# ---- pipelining ----

def t_pipelined_in_order(S):
    files = S.fixture.files
    seq = [("GET", "/tiny.txt"), ("HEAD", "/index.html"), ("GET", "/css/site.css"),
           ("GET", "/nope"), ("GET", "/docs"), ("GET", "/data/big.txt"), ("HEAD", "/nope"),
           ("GET", "/img/dot.png"), ("GET", "/docs/")]
    data = b"".join(st.req(m, p) for m, p in seq)
    with st.Conn(S.port) as c:
        c.send(data)
        for m, p in seq:
            r = c.read_response(m)
            what = "pipelined %s %s" % (m, p)
            if p == "/nope":
                eq(r.status, 404, what)
            elif p == "/docs":
                eq(r.status, 301, what)
            else:
                eq(r.status, 200, what)
                want = files["/docs/index.html" if p == "/docs/" else p]
                eq(r.body, b"" if m == "HEAD" else want, what + ": body")
        eq(c.closed_after(0.5), False, "connection stays open after pipelined requests")


def t_connection_kept_after_responder_errors(S):
    # 416, 406, 412, 405 and 404 are ordinary answers: the connection keeps serving.
    seq = [(st.req("GET", "/data/big.txt", [("Range", "bytes=999999-")]), 416),
           (st.req("GET", "/data/big.txt", [("Accept-Encoding", "identity;q=0")]), 406),
           (st.req("GET", "/data/big.txt", [("If-Match", '"x"')]), 412),
           (st.req("POST", "/tiny.txt"), 405),
           (st.req("GET", "/nope"), 404),
           (st.req("GET", TINY), 200)]
    with st.Conn(S.port) as c:
        c.send(b"".join(d for d, _ in seq))
        for i, (d, want) in enumerate(seq):
            eq(c.read_response().status, want, "pipelined response %d" % i)
        eq(c.closed_after(0.5), False, "connection open after ordinary errors")


def t_body_arriving_in_pieces_is_not_waited_for(S):
    """A body that arrives after its answer is dropped, not read as the next request:
    the answer said Connection: close, and nothing after it is answered."""
    with st.Conn(S.port) as c:
        c.send(H("GET /tiny.txt HTTP/1.1", "Host: x", "Content-Length: 10"))
        r = c.read_response()
        eq((r.status, r.get("Connection")), (200, "close"), "GET with a 10-byte body not yet sent")
        time.sleep(0.1)
        try:
            c.send(b"hello")
            time.sleep(0.1)
            c.send(b"world" + st.req("GET", "/A.txt"))
        except (BrokenPipeError, ConnectionResetError):
            pass
        c.expect_closed("a request after a split body")


def t_limits_hold_for_slow_clients(S):
    with st.Conn(S.port) as c:
        data = H("GET /" + "s" * 9000 + " HTTP/1.1", "Host: x")
        for i in range(0, 9100, 100):
            c.send(data[i:i + 100])
        eq(c.read_response().status, 414, "a long request line sent 100 bytes at a time")
    with st.Conn(S.port) as c:
        c.send(b"GET / HTTP/1.1\r\nHost: x\r\n")
        try:
            for i in range(MAX_HEADERS + 10):
                c.send(b"X-%d: 1\r\n" % i)
            c.send(b"\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass
        eq(c.read_response().status, 431, "111 fields sent one line at a time")


def t_long_head_in_pieces(S):
    # A head near the limits sent in small pieces: the bytes that only go on
    # with its last line are judged alone (conn.c, consume_held), and the
    # answer is the one the whole head gets, at the byte that decides it.
    cookie = "a=b; " * 6000
    data = st.req("GET", "/tiny.txt", [("Cookie", cookie)])
    target = st.req("GET", "/tiny.txt?" + "q" * 8000)
    for what, d, step in (("cookie", data, 1), ("cookie", data, 7), ("target", target, 1)):
        with st.Conn(S.port) as c:
            for i in range(0, len(d), step):
                c.send(d[i:i + step])
            r = c.read_response()
            eq((r.status, r.body), (200, S.fixture.files[TINY]),
               "a %d-byte head with a long %s sent %d bytes at a time" % (len(d), what, step))
    # a control byte in the cookie is refused as soon as it arrives, the rest unsent
    bad = data[:20000] + b"\x01"
    with st.Conn(S.port) as c:
        for i in range(len(bad)):
            c.send(bad[i:i + 1])
        r = c.read_response()
        eq(r.status, 400, "a control byte 20,000 bytes into a head sent a byte at a time")
        c.expect_closed("after the 400")
    # a name running on past the colon's place, then a space before it: 400
    name = b"GET /tiny.txt HTTP/1.1\r\nHost: localhost\r\nX-" + b"n" * 5000 + b" :"
    with st.Conn(S.port) as c:
        for i in range(len(name)):
            c.send(name[i:i + 1])
        eq(c.read_response().status, 400, "whitespace before the colon of a 5,000-byte name")


def t_many_pipelined(S):
    n = 300
    paths = ["/tiny.txt", "/A.txt", "/dup1.txt"]
    data = b"".join(st.req("GET", paths[i % 3]) for i in range(n))
    with st.Conn(S.port) as c:
        c.send(data)
        for i in range(n):
            r = c.read_response()
            eq((r.status, r.body), (200, S.fixture.files[paths[i % 3]]),
               "pipelined response %d of %d" % (i + 1, n))


def t_split_anywhere(S):
    data = st.req("GET", "/css/site.css") + st.req("GET", "/tiny.txt")
    want = [S.fixture.files["/css/site.css"], S.fixture.files[TINY]]
    # one byte at a time
    with st.Conn(S.port) as c:
        for i in range(len(data)):
            c.send(data[i:i + 1])
        for w in want:
            eq(c.read_response().body, w, "requests sent one byte at a time")
    # split at every interesting boundary of the first request
    first = st.req("GET", "/css/site.css")
    for cut in (1, 3, 4, 5, first.index(b"\r\n"), first.index(b"\r\n") + 1, len(first) - 2,
                len(first) - 1):
        with st.Conn(S.port) as c:
            c.send(data[:cut])
            time.sleep(0.02)
            c.send(data[cut:])
            for w in want:
                eq(c.read_response().body, w, "request split at byte %d" % cut)


def t_error_then_pipelined_never_answered(S):
    # After each kind of 4xx/5xx from the parser, the pipelined request gets nothing.
    for bad, want in ((H("GET / HTTP/1.1", "Host: x", "X: a\x00"), 400),
                      (H("GET / HTTP/2.0", "Host: x"), 505),
                      (H("GET /" + "x" * 9000 + " HTTP/1.1", "Host: x"), 414),
                      (H("GET / HTTP/1.1", "Host: x", *["X-%d: 1" % i for i in range(MAX_HEADERS + 10)]), 431),
                      (H("GET / HTTP/1.1", "Host: x", "Content-Length: 1, 2"), 400)):
        framing_error(S, bad, want, "error %d then a pipelined request" % want)


def t_host_value_rules(S):
    # RFC 9112 §3.2: a Host with an invalid field value -> 400; an empty one is valid.
    for v in ("a b", "x/y", "[::1", "x@y", "x:8080:1"):
        framing_error(S, H("GET /tiny.txt HTTP/1.1", "Host: " + v), 400, "Host %r" % v)
    for v in ("", "localhost:8080", "[::1]:80", "127.0.0.1", "EXAMPLE.com"):
        served_ok(S, H("GET /tiny.txt HTTP/1.1", "Host: " + v), "Host %r" % v)


def t_valid_field_shapes_accepted(S):
    served_ok(S, H("GET /tiny.txt HTTP/1.1", "host: x"), "lowercase host")
    served_ok(S, H("GET /tiny.txt HTTP/1.1", "HOST: x", "X-Empty:"), "empty value")
    served_ok(S, H("GET /tiny.txt HTTP/1.1", "Host: x", "X-Obs: caf\xe9 \xff"),
              "obs-text in a value (RFC 9110 §5.5)")
    served_ok(S, H("GET /tiny.txt HTTP/1.1", "Host: x", "X-Tab:\tv\tw\t"), "tabs in a value")
    served_ok(S, H("GET /tiny.txt HTTP/1.1", "Host: x", "X-Weird-!#$%&'*+.^_`|~: 1"),
              "every tchar in a name")
    served_ok(S, H("GET /tiny.txt HTTP/1.1", "Host: x", "Expect: 100-continue",
                   "Content-Length: 5") + b"hello", "Expect: 100-continue with a small body")


def t_transfer_encoding_over_several_lines(S):
    framing_error(S, H("GET / HTTP/1.1", "Host: x", "Transfer-Encoding: chunked",
                       "Transfer-Encoding: gzip") + b"0\r\n\r\n", 400,
                  "TE chunked then TE gzip (final coding gzip)")
    framing_error(S, H("GET / HTTP/1.1", "Host: x", "Transfer-Encoding: chunked, chunked")
                  + b"0\r\n\r\n", 400, "chunked applied twice")


def t_same_content_length_twice(S):
    # RFC 9110 §8.6: identical repeated values may be accepted as one, or refused.
    data = H("GET /tiny.txt HTTP/1.1", "Host: x", "Content-Length: 5", "Content-Length: 5")
    r, after, r2 = read_quick(S, data + b"hello")
    ok(r is not None, "repeated identical Content-Length: no response")
    if r.status == 400:
        eq(after, "closed", "repeated identical Content-Length: after 400")
    else:
        eq((r.status, after), (200, "answered"), "repeated identical Content-Length accepted")
        eq(r2.body, S.fixture.files[TINY], "after the drained body, the pipelined response")


def t_exact_limits(S):
    def line(total):  # a request line of exactly `total` bytes with its CRLF
        pre, suf = "GET /", " HTTP/1.1"
        return pre + "a" * (total - len(pre) - len(suf) - 2) + suf
    r = st.exchange(S.port, H(line(8192), "Host: x"))
    eq(r.status, 404, "a request line of exactly 8192 bytes (CRLF included): status")
    framing_error(S, H(line(8193), "Host: x"), 414, "a request line of 8193 bytes")

    def head(total):  # a head of exactly `total` bytes, blank line included
        base = H("GET /tiny.txt HTTP/1.1", "Host: x", "X-Pad: ")
        return base[:-4] + b"p" * (total - len(base)) + b"\r\n\r\n"
    eq(len(head(32768)), 32768, "test helper: head length")
    for n in (16383, 16384, 16385, 32767, 32768):
        r = st.exchange(S.port, head(n))
        eq(r.status, 200, "a head of exactly %d bytes: status" % n)
    framing_error(S, head(32769), 431, "a head of 32769 bytes")
    fields = ["X-%d: 1" % i for i in range(MAX_HEADERS - 1)]
    r = st.exchange(S.port, H("GET /tiny.txt HTTP/1.1", "Host: x", *fields))
    eq(r.status, 200, "100 header fields: status")
    framing_error(S, H("GET /tiny.txt HTTP/1.1", "Host: x", *fields, "X-One-More: 1"), 431,
                  "101 header fields")


def t_long_path_never_500(S):
    for n in (4090, 4100, 5000, 8100):
        r = st.exchange(S.port, H("GET /" + "d" * n + " HTTP/1.1", "Host: x"))
        ok(r.status in (404, 414), "a %d-byte path: status %d (want 404, or 414)" % (n, r.status))


def t_pipeline_beyond_read_buffer(S):
    # ~37 KB of requests in one write: more than the 16 KiB read buffer holds at once.
    n = 1000
    data = b"".join(st.req("GET", "/A.txt" if i % 2 else TINY) for i in range(n))
    with st.Conn(S.port) as c:
        c.send(data)
        for i in range(n):
            r = c.read_response()
            eq((r.status, r.body), (200, S.fixture.files["/A.txt" if i % 2 else TINY]),
               "pipelined response %d of %d" % (i + 1, n))


def t_pipeline_large_responses_slow_reader(S):
    # ~2.5 MB of responses (far more than the socket buffers hold) to a client that reads
    # nothing for a second: servd must queue what the socket does not take and finish
    # every body, in order.
    seq = ["/data/big.txt", "/img/dot.png", "/data/big.txt", "/tiny.txt"] * 15
    with st.Conn(S.port) as c:
        c.send(b"".join(st.req("GET", p) for p in seq))
        time.sleep(1.0)
        for i, p in enumerate(seq):
            r = c.read_response()
            eq((r.status, len(r.body)), (200, len(S.fixture.files[p])), "response %d (%s)" % (i, p))
            eq(r.body, S.fixture.files[p], "response %d (%s) body" % (i, p))
        eq(sum(len(S.fixture.files[p]) for p in seq) > 2000000, True, "test writes > 2 MB")
    S.check_alive()


def t_half_close_does_not_end_requests(S):
    """RFC 9112 §9.6: a connection the client half-closed (shutdown(SHUT_WR), as `nc -N`
    and some proxies do once their requests are written) does not delimit a request nor
    say the client is not interested in the answers: every request sent before the FIN is
    answered in order, those held back by the per-turn cap too, and only then does the
    connection close. A head cut short by the FIN gets no answer."""
    big = "/data/big.txt"
    paths = [TINY, big] * 12 + ["/nope", "/docs", TINY]  # > SV_CONN_TURN_BYTES of answers
    data = b"".join(st.req("GET", p) for p in paths)
    for tail in (b"", b"GET /tiny.txt HTTP/1.1\r\nHo"):
        what = "half-close after %d requests%s" % (len(paths), " and a partial head" if tail else "")
        with st.Conn(S.port) as c:
            c.send(data + tail)
            c.sock.shutdown(socket.SHUT_WR)
            for i, p in enumerate(paths):
                r = c.read_response()
                want = 404 if p == "/nope" else 301 if p == "/docs" else 200
                eq(r.status, want, "%s: response %d (%s)" % (what, i, p))
                if want == 200:
                    eq(r.body, S.fixture.files[p], "%s: response %d (%s) body" % (what, i, p))
            c.expect_closed(what + ": after the last answer")


def t_date_on_every_status(S):
    """RFC 9110 §6.6.1: an origin server with a clock MUST send Date in every 2xx, 3xx and
    4xx response (servd sends it on its 5xx too), an IMF-fixdate of about now."""
    big = "/data/big.txt"
    etag = st.get(S.port, big).need("ETag")
    cases = [(st.req("GET", big), 200), (st.req("OPTIONS", "*"), 200),
             (st.req("GET", big, [("Range", "bytes=0-1")]), 206),
             (st.req("GET", "/docs"), 301), (st.req("GET", big, [("If-None-Match", etag)]), 304),
             (st.req("GET", "/../x"), 400), (st.req("GET", "/nope"), 404),
             (st.req("POST", big), 405),
             (st.req("GET", big, [("Accept-Encoding", "identity;q=0")]), 406),
             (st.req("GET", big, [("If-Match", '"x"')]), 412),
             (st.req("GET", "/" + "x" * 9000), 414),
             (st.req("GET", big, [("Range", "bytes=999999-")]), 416),
             (st.req("GET", "https://x/tiny.txt"), 421),
             (st.req("GET", "/", ["X-%d: 1" % i for i in range(MAX_HEADERS + 1)]), 431),
             (st.req("GET", "/", [("Transfer-Encoding", "gzip, chunked")]), 501),
             (H("GET / HTTP/2.0", "Host: x"), 505)]
    for data, want in cases:
        method = data[:data.index(b" ")].decode()
        methods = [method]
        if method == "GET" and want not in (206, 416):  # HEAD ignores Range
            methods.append("HEAD")
        for method in methods:
            sent = method.encode() + data[data.index(b" "):]
            r = st.exchange(S.port, sent, method)
            what = "%s %d" % (method, want)
            eq(r.status, want, what + ": status (sent %r)" % sent[:60])
            eq(len(r.all("Date")), 1, what + ": Date lines")
            d = st.http_date(r.get("Date"), what + ": Date")
            ok(abs(d - time.time()) < 120, what + ": Date %r is not now" % r.get("Date"))


def t_proxy_routing_fields_do_not_change_the_answer(S):
    """Fields a proxy in front adds or forwards (RFC 9110 §7.6.2 Max-Forwards, §7.6.3 Via,
    §7.8 Upgrade, which a server may ignore and MUST ignore in HTTP/1.0; RFC 7239
    Forwarded) change nothing an origin answers: CloudFront sends Via on every request."""
    fields = [("Via", "1.1 abc.cloudfront.net (CloudFront), 1.0 fred"), ("Max-Forwards", "0"),
              ("Forwarded", "for=192.0.2.60;proto=http;by=203.0.113.43")]
    served_ok(S, st.req("GET", TINY, fields), "GET with Via, Max-Forwards: 0 and Forwarded")
    r = st.exchange(S.port, st.req("OPTIONS", "*", fields))
    eq((r.status, r.need("Content-Length")), (200, "0"), "OPTIONS * with Max-Forwards: 0")
    with st.Conn(S.port) as c:
        c.send(st.req("GET", TINY, [("Connection", "Upgrade"), ("Upgrade", "websocket")],
                      version="HTTP/1.0", host=None))
        r = c.read_response()
        eq((r.status, r.body, r.get("Upgrade")), (200, S.fixture.files[TINY], None),
           "HTTP/1.0 with Upgrade: ignored")
        c.expect_closed("HTTP/1.0 without keep-alive")


def t_server_still_serves(S):
    # After all of the above (run last), servd is alive and answers normally.
    S.check_alive()
    r = st.get(S.port, TINY)
    eq((r.status, r.body), (200, S.fixture.files[TINY]), "GET after the abuse")
    # a client that sends garbage and disconnects mid-request
    for junk in (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", b"GET / HT", b"\xff" * 100):
        s = socket.create_connection(("127.0.0.1", S.port), timeout=5)
        s.sendall(junk)
        s.close()
    r = st.get(S.port, TINY)
    eq(r.status, 200, "GET after clients that vanished mid-request")
    S.check_alive()


if __name__ == "__main__":
    st.run(st.collect(globals()), lambda: st.Sites(workers=1, with_www=False))
