#!/usr/bin/env python3
"""Connection handling of a real servd (servd(1) "CONNECTIONS"): bodies byte-exact from
the map, keep-alive, pipelining (20 requests in one write answered in order; any split
of the bytes; large responses pipelined past the per-turn write cap), request bodies
drained, Connection: close and half-closed clients, heads near and over SV_MAX_HEAD,
and the three timeouts: header (slowloris), keep-alive idle and send (a client that
stops reading)."""
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servdtest as st  # noqa: E402
from servdtest import eq, ok  # noqa: E402

FILES = {}


def site():
    root = os.path.join(st.tmpdir(), "conn-site")
    rnd = random.Random(7)
    FILES["/index.html"] = b"<html><body><h1>It works!!</h1></body></html>\n"
    FILES["/small.txt"] = b"small file\n"
    FILES["/mid.txt"] = b"".join(b"mid line %07d\n" % i for i in range(70000))  # ~1.1 MB
    FILES["/big.bin"] = rnd.randbytes(16 * 1024 * 1024)  # stored once: not compressible
    if not os.path.isdir(root):
        os.makedirs(root)
        for path, data in FILES.items():
            with open(os.path.join(root, path.lstrip("/")), "wb") as f:
                f.write(data)
    return root


def pack():
    p = os.path.join(st.tmpdir(), "conn.lmdb")
    if not os.path.exists(p):
        st.pack(site(), "conn.lmdb")
    else:
        site()
    return p


def t_bodies_byte_exact():
    with st.Servd(pack()) as s:
        for path in ("/index.html", "/small.txt", "/mid.txt", "/big.bin"):
            want = st.pack_cat(s.pack, path)
            eq(len(want), len(FILES[path]), "servd-pack cat %s length" % path)
            r = st.get(s.port, path)
            eq(r.status, 200, "%s status" % path)
            ok(r.body == want, "%s: body differs from the packed bytes (%d vs %d bytes)"
               % (path, len(r.body), len(want)))


def t_keep_alive_many_requests():
    with st.Servd(pack()) as s, st.Conn(s.port) as c:
        for i in range(200):
            path = ("/index.html", "/small.txt", "/mid.txt")[i % 3]
            c.send(st.req("GET", path))
            r = c.read_response()
            eq((r.status, r.body == FILES[path]), (200, True), "request %d on one connection" % i)
        ok(not c.closed_after(0.3), "keep-alive connection closed after 200 requests")


def t_pipelined_20_in_one_write():
    with st.Servd(pack()) as s, st.Conn(s.port) as c:
        paths = [("/index.html", "/small.txt", "/nope", "/mid.txt")[i % 4] for i in range(20)]
        methods = ["HEAD" if i % 5 == 3 else "GET" for i in range(20)]
        c.send(b"".join(st.req(m, p) for m, p in zip(methods, paths)))
        for i, (m, p) in enumerate(zip(methods, paths)):
            r = c.read_response(m)
            if p == "/nope":
                eq(r.status, 404, "pipelined %d (%s %s) status" % (i, m, p))
            else:
                eq(r.status, 200, "pipelined %d (%s %s) status" % (i, m, p))
                eq(int(r.need("Content-Length")), len(FILES[p]), "pipelined %d length" % i)
                if m == "GET":
                    ok(r.body == FILES[p], "pipelined %d (%s) body" % (i, p))
        c.nothing_more()


def t_pipelined_any_split():
    """The same 20 requests cut at random places, including inside CRLFs."""
    rnd = random.Random(3)
    data = b"".join(st.req("GET", ("/index.html", "/small.txt")[i % 2],
                           headers=[("X-Pad", "p" * rnd.randrange(0, 300))])
                    for i in range(20))
    with st.Servd(pack()) as s:
        for trial in range(4):
            with st.Conn(s.port) as c:
                i = 0
                while i < len(data):
                    n = 1 if trial == 0 else rnd.randrange(1, 120)
                    c.send(data[i:i + n])
                    i += n
                    if trial == 1:
                        time.sleep(0.001)
                for k in range(20):
                    r = c.read_response()
                    eq(r.body, FILES[("/index.html", "/small.txt")[k % 2]],
                       "split trial %d, response %d" % (trial, k))


def t_pipelined_large_responses_in_order():
    """40 x 1.1 MB pipelined: far past SV_CONN_TURN_BYTES, so servd pauses and resumes
    this connection many times. Meanwhile a second connection is answered promptly."""
    with st.Servd(pack()) as s, st.Conn(s.port, timeout=30) as c:
        n = 40
        c.send(b"".join(st.req("GET", "/mid.txt" if i % 2 == 0 else "/small.txt")
                        for i in range(n)))
        got = []
        lat = []
        errors = []

        def other():
            try:
                for _ in range(5):
                    t0 = time.time()
                    r = st.get(s.port, "/index.html")
                    lat.append((time.time() - t0, r.status))
                    time.sleep(0.05)
            except Exception as e:  # noqa: BLE001 - reported below, not by the thread
                errors.append(repr(e))
        th = threading.Thread(target=other)
        th.start()
        for i in range(n):
            r = c.read_response()
            got.append(r.body == FILES["/mid.txt" if i % 2 == 0 else "/small.txt"])
        th.join()
        eq(got, [True] * n, "bodies of 40 pipelined responses, in order")
        eq(errors, [], "the other connection's requests")
        eq(len(lat), 5, "the other connection's answers")
        ok(all(st_ == 200 for _, st_ in lat), "other connection statuses %r" % lat)
        ok(max(t for t, _ in lat) < 2.0, "other connection waited %r s" % lat)


def t_small_body_drained():
    with st.Servd(pack()) as s, st.Conn(s.port) as c:
        body = b"x" * 1000
        c.send(st.req("GET", "/small.txt", [("Content-Length", str(len(body)))]) + body
               + st.req("GET", "/index.html"))
        r = c.read_response()
        eq((r.status, r.body), (200, FILES["/small.txt"]), "GET with a body")
        r = c.read_response()
        eq((r.status, r.body), (200, FILES["/index.html"]), "request after the drained body")
        # A body still to come when the request is answered is not waited for: the
        # answer closes the connection, and the body is dropped (never a request).
        c.send(st.req("GET", "/small.txt", [("Content-Length", "3000")]))
        r = c.read_response()
        eq((r.status, r.get("Connection")), (200, "close"), "GET with a body still to come")
        try:
            for _ in range(3):
                c.send(b"y" * 1000)
                time.sleep(0.05)
            c.send(st.req("GET", "/index.html"))
        except (BrokenPipeError, ConnectionResetError):
            pass
        c.expect_closed("after the answer to a request whose body came later")


def t_connection_close_and_http10():
    with st.Servd(pack()) as s:
        with st.Conn(s.port) as c:
            c.send(st.req("GET", "/small.txt", [("Connection", "close")])
                   + st.req("GET", "/index.html"))
            r = c.read_response()
            eq((r.status, r.body), (200, FILES["/small.txt"]), "Connection: close response")
            c.expect_closed("after Connection: close (the pipelined request must not be "
                            "answered)")
        with st.Conn(s.port) as c:
            c.send(st.req("GET", "/small.txt", version="HTTP/1.0"))
            r = c.read_response()
            eq(r.status, 200, "HTTP/1.0 status")
            c.expect_closed("after an HTTP/1.0 request")


def t_half_closed_client_gets_every_response():
    """A client that sends its requests and shuts down its write side (like
    `printf ... | nc`) still receives every response, then the close."""
    with st.Servd(pack()) as s, st.Conn(s.port, timeout=30) as c:
        c.send(b"".join(st.req("GET", p) for p in ("/mid.txt", "/small.txt", "/big.bin")))
        c.sock.shutdown(socket.SHUT_WR)
        for p in ("/mid.txt", "/small.txt", "/big.bin"):
            r = c.read_response()
            ok(r.body == FILES[p], "half-closed client: body of %s" % p)
        c.expect_closed("after the last response to a half-closed client")


def t_heads_near_and_over_the_limit():
    with st.Servd(pack()) as s:
        # ~15 KB of header fields sent in pieces: held in a connection buffer and answered;
        # ~28 KB: outgrows that 16 KiB buffer, moves to a 32 KiB one, answered too.
        for width, what in ((230, "15 KB"), (460, "28 KB")):
            hdrs = [("X-Big-%02d" % i, "v" * width) for i in range(60)]
            data = st.req("GET", "/small.txt", hdrs)
            ok(16384 * (width // 230 - 1) < len(data) < 16384 * (width // 230),
               "test head is %d bytes" % len(data))
            with st.Conn(s.port) as c:
                for i in range(0, len(data), 1000):
                    c.send(data[i:i + 1000])
                    time.sleep(0.01)
                r = c.read_response()
                eq((r.status, r.body), (200, FILES["/small.txt"]), "%s head in pieces" % what)
        # More than 32 KiB of head: 431 and close, however it is split.
        hdrs = [("X-Big-%02d" % i, "v" * 600) for i in range(60)]
        data = st.req("GET", "/small.txt", hdrs)
        for step in (len(data), 1000):
            with st.Conn(s.port) as c:
                try:
                    for i in range(0, len(data), step):
                        c.send(data[i:i + step])
                except (BrokenPipeError, ConnectionResetError):
                    pass
                r = c.read_response()
                eq(r.status, 431, "36 KB head in pieces of %d" % step)
                c.expect_closed("after 431")


def closed_within(c, limit):
    """Seconds until the server closes c (reading and discarding), or None."""
    t0 = time.time()
    c.sock.settimeout(0.2)
    while time.time() - t0 < limit:
        try:
            chunk = c.sock.recv(65536)
        except socket.timeout:
            continue
        except ConnectionResetError:
            return time.time() - t0
        if not chunk:
            return time.time() - t0
    return None


def t_header_timeout_slowloris():
    adm = st.free_port()
    with st.Servd(pack(), extra=["--header-timeout", "1", "--idle-timeout", "30",
                                 "--admin", "127.0.0.1:%d" % adm]) as s:
        # A client trickling a head, one byte every 100 ms, never finishing it.
        with st.Conn(s.port) as c:
            c.send(b"GET /small.txt HTTP/1.1\r\nHost: x\r\n")
            t0 = time.time()
            closed = None
            while time.time() - t0 < 5:
                try:
                    c.send(b"X")
                except (BrokenPipeError, ConnectionResetError):
                    closed = time.time() - t0
                    break
                c.sock.settimeout(0.1)
                try:
                    if c.sock.recv(100) == b"":
                        closed = time.time() - t0
                        break
                except socket.timeout:
                    pass
                except ConnectionResetError:
                    closed = time.time() - t0
                    break
            ok(closed is not None, "a trickled head was not cut within 5 s (header timeout 1 s)")
            ok(0.7 <= closed <= 4.0, "trickled head closed after %.2f s (header timeout 1 s)"
               % closed)
        # A connection that never sends anything is cut by the same timeout.
        with st.Conn(s.port) as c:
            t = closed_within(c, 5)
            ok(t is not None and 0.7 <= t <= 4.0, "silent new connection closed after %r s" % t)
        # A client sending complete requests slowly is not affected.
        with st.Conn(s.port) as c:
            for i in range(5):
                c.send(st.req("GET", "/small.txt"))
                eq(c.read_response().status, 200, "request %d of a slow but complete client" % i)
                time.sleep(0.5)
        m = st.metrics(adm)
        ok(m['servd_timeouts_total{kind="header"}'] >= 2,
           "header timeouts counted: %r" % m['servd_timeouts_total{kind="header"}'])


def t_idle_timeout():
    adm = st.free_port()
    with st.Servd(pack(), extra=["--idle-timeout", "1", "--admin", "127.0.0.1:%d" % adm]) as s:
        with st.Conn(s.port) as c:
            c.send(st.req("GET", "/small.txt"))
            eq(c.read_response().status, 200, "first request")
            t = closed_within(c, 5)
            ok(t is not None and 0.7 <= t <= 4.0, "idle keep-alive closed after %r s "
               "(idle timeout 1 s)" % t)
        # Requests every 0.4 s keep the connection alive for well past the timeout.
        with st.Conn(s.port) as c:
            for i in range(8):
                c.send(st.req("GET", "/small.txt"))
                eq(c.read_response().status, 200, "request %d of an active connection" % i)
                time.sleep(0.4)
        m = st.metrics(adm)
        ok(m['servd_timeouts_total{kind="idle"}'] >= 1, "idle timeouts counted")


def t_an_empty_line_after_a_request_is_not_a_head():
    """A CRLF after a request (RFC 9112 §2.2: old clients send one after a body) is
    skipped, not taken for the start of a head: the connection is idle, under the idle
    timeout, not cut by the header timeout with a 408 in the log. servd did cut it
    (at 10 s by default, where a CDN's pool keeps idle connections for 60)."""
    adm = st.free_port()
    with st.Servd(pack(), extra=["--header-timeout", "1", "--idle-timeout", "30",
                                 "--admin", "127.0.0.1:%d" % adm]) as s:
        with st.Conn(s.port) as c:
            c.send(st.req("GET", "/small.txt") + b"\r\n")
            eq(c.read_response().status, 200, "the request")
            c.send(b"\r\n\r\n")  # in a read of their own
            ok(closed_within(c, 2.5) is None, "cut with only empty lines after a request")
            c.sock.settimeout(st.IO_TIMEOUT)
            c.send(b"\r\n" + st.req("GET", "/small.txt"))
            eq(c.read_response().status, 200, "a request after the empty lines")
        eq(st.metrics(adm)['servd_timeouts_total{kind="header"}'], 0, "header timeouts")


def t_empty_lines_count_however_they_arrive():
    """SV_MAX_LEADING_CRLF (16) empty lines are skipped before a request line, and the
    17th gets a 400 and a close, whether they arrive with the request, alone, or a few
    at a time: the empty lines servd drops on their own count towards the next head.
    A head with 17 was refused whole and answered 200 when sent in pieces, and 17 sent
    alone were refused where 16 were dropped."""
    with st.Servd(pack()) as s:
        def pieces(c, data, size):
            for i in range(0, len(data), size):
                c.send(data[i:i + size])
                time.sleep(0.02)  # a read each

        request = st.req("GET", "/small.txt")
        cases = [  # (what, the bytes, the size of each send, the status)
            ("16 and the request whole", b"\r\n" * 16 + request, None, 200),
            ("17 and the request whole", b"\r\n" * 17 + request, None, 400),
            ("16 and the request 2 bytes at a time", b"\r\n" * 16 + request, 2, 200),
            ("17 and the request 2 bytes at a time", b"\r\n" * 17 + request, 2, 400),
            ("17 and the request 1 byte at a time", b"\r\n" * 17 + request, 1, 400),
            ("10 alone, then 7 and the request", b"\r\n" * 10, None, None),
            ("17 alone", b"\r\n" * 17, None, 400),
        ]
        for what, data, size, status in cases:
            with st.Conn(s.port) as c:
                if size:
                    pieces(c, data, size)
                else:
                    c.send(data)
                if status is None:  # the rest of the case in a later read
                    time.sleep(0.1)
                    c.send(b"\r\n" * 7 + request)
                    status = 400
                eq(c.read_response().status, status, what)
                if status == 400:
                    c.expect_closed(what)
        with st.Conn(s.port) as c:
            c.send(b"\r\n" * 16)
            ok(not c.closed_after(0.3), "16 alone: the connection stays open")
            c.send(request)
            eq(c.read_response().status, 200, "16 alone, then the request")
            # 16 dropped alone and 16 before the request
            c.send(b"\r\n" * 16)
            time.sleep(0.1)
            c.send(b"\r\n" * 16 + request)
            eq(c.read_response().status, 400, "32 before the second request")
            c.expect_closed("32 before the second request")
        with st.Conn(s.port) as c:
            # refused for its empty lines before anything else, as when whole: not a 505
            pieces(c, b"\r\n" * 16, 2)
            c.send(b"\r\nGET / HTTP/0.1\r\nHost: a\r\n\r\n")
            eq(c.read_response().status, 400, "16 alone, then 1 and an HTTP/0.1 request")
            c.expect_closed("16 alone, then 1 and an HTTP/0.1 request")
        with st.Conn(s.port) as c:
            # the 400 is no answer to the HEAD before it: it has its body
            c.send(st.req("HEAD", "/small.txt"))
            eq(c.read_response("HEAD").status, 200, "a HEAD request")
            c.send(b"\r\n" * 17)
            r = c.read_response()
            eq(r.status, 400, "17 alone after a HEAD request")
            ok(len(r.body) > 0, "the 400 after a HEAD request has its body")
            c.expect_closed("17 alone after a HEAD request")
        with st.Conn(s.port) as c:  # the count starts again after each head
            for _ in range(3):
                c.send(b"\r\n" * 12)
                time.sleep(0.05)
                c.send(request)
                eq(c.read_response().status, 200, "12 alone before each of three requests")


def t_empty_lines_alone_extend_no_timeout():
    """Empty lines start no head and are no activity: a client that sends a CRLF every
    0.3 s and never a request is cut by the header timeout (counted from the accept) on
    a fresh connection, and by the idle timeout after a response. Each CRLF restarted
    both, and such a client held its connection, and its --max-conns slot, for good."""
    adm = st.free_port()
    with st.Servd(pack(), extra=["--header-timeout", "1", "--idle-timeout", "2",
                                 "--admin", "127.0.0.1:%d" % adm]) as s:
        def keep_sending_crlf(c, limit, parts=(b"\r\n",)):
            t0 = time.time()
            c.sock.settimeout(0.3)
            while time.time() - t0 < limit:
                try:
                    c.send(parts[0])
                    parts = parts[1:] + parts[:1]
                    if c.sock.recv(100) == b"":
                        return time.time() - t0
                except socket.timeout:
                    pass
                except (BrokenPipeError, ConnectionResetError):
                    return time.time() - t0
            return None

        with st.Conn(s.port) as c:
            t = keep_sending_crlf(c, 6)
            ok(t is not None and t <= 4.0, "CRLFs from the accept: cut after %r s "
               "(header timeout 1 s)" % t)
        with st.Conn(s.port) as c:
            c.send(st.req("GET", "/small.txt"))
            eq(c.read_response().status, 200, "the request")
            t = keep_sending_crlf(c, 8)
            ok(t is not None and 1.5 <= t <= 5.0, "CRLFs after a response: cut after %r s "
               "(idle timeout 2 s)" % t)
        # the CR and the LF apart: the CR is the start of a head, which the LF does not end
        with st.Conn(s.port) as c:
            c.send(st.req("GET", "/small.txt"))
            eq(c.read_response().status, 200, "the request")
            t = keep_sending_crlf(c, 8, (b"\r", b"\n"))
            ok(t is not None and t <= 4.0, "CR and LF apart after a response: cut after %r s "
               "(header timeout 1 s)" % t)
        m = st.metrics(adm)
        ok(m['servd_timeouts_total{kind="header"}'] >= 1 and
           m['servd_timeouts_total{kind="idle"}'] >= 1, "both timeouts counted: %r" % m)


def half_closed_clients(port, n=3):
    """n clients that each ask for 2 MB of /big.bin (a response the kernel takes whole,
    so that servd's writes are done), close their side and read nothing."""
    socks = []
    for _ in range(n):
        c = socket.socket()
        c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        c.connect(("127.0.0.1", port))
        c.sendall(st.req("GET", "/big.bin", [("Range", "bytes=0-1999999")]))
        c.shutdown(socket.SHUT_WR)
        socks.append(c)
    return socks


def t_half_closed_client_that_stops_reading_is_reset():
    """A client that sends its request, closes its side (shutdown(SHUT_WR)) and reads
    nothing: servd keeps the connection, under --max-conns, until the client has taken
    the response or the send timeout resets it. servd closed it as soon as its writes
    were done, and the kernel kept the unread response in an orphaned socket for
    minutes (LAST-ACK, megabytes of send queue each), out of every bound of servd's."""
    adm = st.free_port()
    with st.Servd(pack(), extra=["--send-timeout", "1", "--admin", "127.0.0.1:%d" % adm]) as s:
        socks = half_closed_clients(s.port)
        m = st.wait_metrics(adm, lambda m: m['servd_timeouts_total{kind="send"}'] >= 3)
        eq(m['servd_timeouts_total{kind="send"}'], 3, "the three were reset by the send timeout")
        # nothing of them is left in the kernel: no orphan holding the rest of /big.bin
        t0 = time.time()
        while True:
            held = subprocess.run(["ss", "-tnH", "state", "all", "( sport = :%d )" % s.port],
                                  capture_output=True, text=True).stdout.split("\n")
            held = [x for x in held if x.strip() and "LISTEN" not in x]
            if not held or time.time() - t0 > 5:
                break
            time.sleep(0.2)
        eq(held, [], "no socket of servd's left for the half-closed clients")
        for c in socks:
            c.close()
        # Half-closed clients that then close for good, the response unread (their kernel
        # resets): servd lets them go at once, not at the send timeout (SIOCOUTQ still
        # counts what the reset dropped).
        adm2 = st.free_port()
        with st.Servd(pack(), extra=["--send-timeout", "30", "--admin",
                                     "127.0.0.1:%d" % adm2]) as s2:
            socks = half_closed_clients(s2.port)
            time.sleep(1.5)  # servd has written all; it waits for the clients to read
            for c in socks:
                c.close()
            t0 = time.time()
            m = st.wait_metrics(adm2, lambda m: m["servd_connections_open"] == 0, limit=10)
            took = time.time() - t0
            print("  MEASURE half-closed clients that reset: let go after %.1f s" % took)
            eq(m["servd_connections_open"], 0, "servd let go of the clients that closed")
            ok(took < 3, "let go after %.1f s (send timeout 30 s)" % took)
        # a half-closed client that reads gets its whole response, then the close
        with st.Conn(s.port) as c:
            c.send(st.req("GET", "/small.txt"))
            c.sock.shutdown(socket.SHUT_WR)
            r = c.read_response()
            eq((r.status, r.body), (200, FILES["/small.txt"]), "a half-closed client that reads")
            c.expect_closed("a half-closed client after its response")


def t_idle_timeout_serves_a_request_that_just_arrived():
    """A request that arrives as the idle timeout passes, before servd's loop has read
    it, is answered: the sweep (a timer, run before the loop polls) looks for input
    first. Closed with that request unread, the client got a RST (7 in 1,000 such
    races). Here servd is stopped while the request arrives, so that its loop wakes
    with the timeout passed and the request unread."""
    with st.Servd(pack(), extra=["--idle-timeout", "1"]) as s:
        with st.Conn(s.port) as c:
            c.send(st.req("GET", "/small.txt"))
            eq(c.read_response().status, 200, "first request")
            s.proc.send_signal(signal.SIGSTOP)
            try:
                time.sleep(1.5)
                c.send(st.req("GET", "/small.txt"))
                time.sleep(0.1)
            finally:
                s.proc.send_signal(signal.SIGCONT)
            try:
                r = c.read_response()
            except (st.Closed, ConnectionResetError) as e:
                ok(False, "the request that came at the idle timeout was not answered: %r" % e)
            eq(r.status, 200, "the request that came at the idle timeout")


def tcp_states(local_port, remote_port):
    """The TCP states (hex, as /proc/net/tcp writes them: 04 is FIN-WAIT-1) of the
    sockets from 127.0.0.1:local_port to remote_port."""
    states = []
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            local, remote, state = fields[1], fields[2], fields[3]
            if (int(local.split(":")[1], 16) == local_port and
                    int(remote.split(":")[1], 16) == remote_port):
                states.append(state)
    return states


def t_send_timeout_client_stops_reading():
    adm = st.free_port()
    with st.Servd(pack(), extra=["--send-timeout", "1", "--admin", "127.0.0.1:%d" % adm]) as s:
        c = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        c.settimeout(st.IO_TIMEOUT)
        c.connect(("127.0.0.1", s.port))
        c.sendall(st.req("GET", "/big.bin"))
        time.sleep(3.5)  # read nothing: servd's writes stall
        # servd reset the connection: after a FIN the kernel kept the bytes the client
        # never took in an orphaned socket in FIN-WAIT-1 (state 04), probing a closed
        # window for minutes; a slow-read attack piles them up.
        t0, cport = time.time(), c.getsockname()[1]
        while tcp_states(s.port, cport) and "04" not in tcp_states(s.port, cport) and \
                time.time() - t0 < 10:
            time.sleep(0.1)  # not cut yet (a loaded machine)
        eq(tcp_states(s.port, cport), [], "servd's end of the connection after the send timeout")
        got = 0
        reset = False
        c.settimeout(5)
        try:
            while True:
                chunk = c.recv(1 << 20)
                if not chunk:
                    break
                got += len(chunk)
        except ConnectionResetError:
            reset = True
        except socket.timeout:
            raise st.Fail("the connection of a client that stopped reading was still open "
                          "after the send timeout (%d bytes read)" % got)
        c.close()
        ok(got < len(FILES["/big.bin"]), "the whole 16 MB arrived (%d bytes): the test did "
           "not stall servd's writes" % got)
        m = st.metrics(adm)
        eq(m['servd_timeouts_total{kind="send"}'], 1.0, "send timeouts counted (reset=%s)"
           % reset)
        # A slow but steady reader is not cut: 16 MB in 64 KiB sips for more than the
        # timeout, with progress every few milliseconds.
        c2 = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        c2.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        c2.settimeout(st.IO_TIMEOUT)
        c2.connect(("127.0.0.1", s.port))
        c2.sendall(st.req("GET", "/big.bin"))
        t0 = time.time()
        data = b""
        want = len(FILES["/big.bin"])
        while True:
            chunk = c2.recv(65536)
            if not chunk:
                break
            data += chunk
            if len(data) > want and data.find(b"\r\n\r\n") + 4 + want <= len(data):
                break
            time.sleep(0.004)
        c2.close()
        took = time.time() - t0
        ok(data.endswith(FILES["/big.bin"]), "steady reader: body (%d bytes in %.1f s)"
           % (len(data), took))
        ok(took > 1.2, "the steady reader took only %.1f s: not slower than the timeout" % took)
        eq(st.metrics(adm)['servd_timeouts_total{kind="send"}'], 1.0,
           "send timeouts after a steady reader")


if __name__ == "__main__":
    st.run(st.collect(globals()))
