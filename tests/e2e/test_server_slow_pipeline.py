#!/usr/bin/env python3
"""A slow but steady reader of pipelined responses is not cut by a timeout (servd(1)
"TIMEOUTS", docs/architecture.md "Timeouts").

The client of a review: a 4 KB receive buffer (SO_RCVBUF 4096 before connect), many
pipelined GETs of an 18 KB file sent in one write, then reads of up to 4 KB with a short
sleep after each. Its kernel holds megabytes of servd's responses (the send buffer grows
to net.ipv4.tcp_wmem's maximum) and drains them at the client's pace, so for seconds at a
time servd's own write queue does not move, or is empty while the kernel still sends.
servd used to judge only its own queue: the send timeout cut such a client in the middle
of a response, and the idle timeout closed the connection while responses were still on
their way. Both must count the bytes the kernel still holds as a response in flight.

The timeouts are short here so that the test runs in seconds; the reader's pace is what
makes the kernel hold more than a timeout's worth of bytes. A client that stops reading
must still be cut, by the send timeout."""
import os
import random
import re
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servdtest as st  # noqa: E402
from servdtest import eq, ok  # noqa: E402

# Random, so that servd-pack stores it uncompressed: one 18 KB body (written from the map:
# a batch of several large bodies is one writev).
BODY = random.Random(18).randbytes(18000)
# Short timeouts, so that the test runs in seconds: each steady reader below needs longer
# than them to drain what the kernel holds (about 3 MB here).
SEND_TIMEOUT = "1"
IDLE_TIMEOUT = "1"
# The slow reader: 4 KB receive buffer, reads of up to 4 KB, a pause after each.
RCVBUF = 4096
# (requests, pause after each read, --idle-timeout, what servd used to do to it)
READERS = (
    # 5.5 MB at about 2 MB/s: servd's queue empties while the kernel still holds over a
    # second of responses; the idle timeout closed the connection under them.
    (300, 0.002, IDLE_TIMEOUT, "idle timeout while responses were in flight"),
    # 3.6 MB at about 0.8 MB/s: servd's queue stands still while the kernel drains; the
    # send timeout cut the connection after 163 of the 200 responses.
    (200, 0.005, "30", "send timeout while the client was reading"),
)


def pack():
    p = os.path.join(st.tmpdir(), "slow.lmdb")
    if not os.path.exists(p):
        root = os.path.join(st.tmpdir(), "slow-site")
        os.makedirs(root)
        with open(os.path.join(root, "f.bin"), "wb") as f:
            f.write(BODY)
        st.pack(root, "slow.lmdb")
    return p


def timeouts(m):
    return {k: m['servd_timeouts_total{kind="%s"}' % k] for k in ("header", "idle", "send")}


def slow_socket(port):
    c = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF)
    c.settimeout(st.IO_TIMEOUT)
    c.connect(("127.0.0.1", port))
    return c


def read_slowly(c, n, pause):
    """Reads n responses 4 KB at a time with a pause after each read; checks every body.
    @return (responses read, bytes read, seconds, longest wait for a read)."""
    buf = bytearray()
    got = total = 0
    t0 = last = time.time()
    gap = 0.0
    while got < n:
        d = c.recv(4096)
        now = time.time()
        if not d:
            break
        gap = max(gap, now - last)
        last = now
        total += len(d)
        buf += d
        while True:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                break
            head = bytes(buf[:end])
            ok(head.startswith(b"HTTP/1.1 200 "), "response %d: head %r" % (got, head[:80]))
            m = re.search(rb"\r\ncontent-length: *(\d+)", head, re.I)
            ok(m is not None, "response %d has no Content-Length: %r" % (got, head))
            size = int(m.group(1))
            if len(buf) < end + 4 + size:
                break
            ok(bytes(buf[end + 4:end + 4 + size]) == BODY, "response %d: body differs" % got)
            del buf[:end + 4 + size]
            got += 1
        time.sleep(pause)
    return got, total, time.time() - t0, gap


def t_slow_steady_reader_gets_every_response():
    for n, pause, idle, was in READERS:
        adm = st.free_port()
        extra = ["--send-timeout", SEND_TIMEOUT, "--idle-timeout", idle,
                 "--admin", "127.0.0.1:%d" % adm]
        what = "%d pipelined, %.0f ms per read (was: %s)" % (n, pause * 1000, was)
        with st.Servd(pack(), extra=extra) as s:
            c = slow_socket(s.port)
            c.sendall(st.req("GET", "/f.bin") * n)
            got, total, took, gap = read_slowly(c, n, pause)
            t = timeouts(st.metrics(adm))
            print("  %s: %d responses, %d bytes in %.2f s (longest wait %.2f s); timeouts %s"
                  % (what, got, total, took, gap, t))
            eq(got, n, "responses read by a steady reader, %s (%d bytes in %.2f s, longest "
               "wait for a read %.2f s, timeouts %s)" % (what, total, took, gap, t))
            eq(t, {"header": 0, "idle": 0, "send": 0}, "timeouts after a steady reader, " + what)
            # Still a keep-alive connection: one more request is answered on it.
            c.sendall(st.req("GET", "/f.bin"))
            eq(read_slowly(c, 1, pause)[0], 1, "a request after the pipelined ones on the "
               "same connection, " + what)
            c.close()


def t_reader_that_stops_is_cut_by_send_timeout():
    """The same client stops reading after a few responses: servd closes it once nothing
    has moved for the send timeout, counted as a send timeout (not idle), although all
    that is left of the responses may sit in the kernel rather than in servd's queue."""
    adm = st.free_port()
    extra = ["--send-timeout", SEND_TIMEOUT, "--idle-timeout", "30",
             "--admin", "127.0.0.1:%d" % adm]
    for n, what in ((40, "responses that fit in the kernel's buffer"),
                    (300, "more than the kernel takes")):
        with st.Servd(pack(), extra=extra) as s:
            c = slow_socket(s.port)
            c.sendall(st.req("GET", "/f.bin") * n)
            eq(read_slowly(c, 3, 0.002)[0], 3, "first responses (%s)" % what)
            t0 = time.time()
            m = st.metrics(adm)
            while m["servd_connections_open"] > 0 and time.time() - t0 < 5:
                time.sleep(0.1)
                m = st.metrics(adm)
            took = time.time() - t0
            eq(m["servd_connections_open"], 0.0, "connections open %.1f s after the client "
               "stopped reading (%s)" % (took, what))
            eq(timeouts(m), {"header": 0, "idle": 0, "send": 1},
               "timeouts after a client stopped reading (%s)" % what)
            print("  %s: closed %.2f s after the reader stopped" % (what, took))
            c.close()


def t_head_behind_a_slow_response_is_cut_after_delivery():
    """12 pipelined GETs (216 KB, under the per-turn cap, so all are answered at once)
    followed by the start of a 13th head that never ends, read slowly for about 2 s with
    --header-timeout 1: the header timer of that head runs out while the responses are
    still on their way. servd must deliver all 12 (the send timeout governs while bytes
    are in flight) and then close at once, counted as a header timeout."""
    adm = st.free_port()
    extra = ["--header-timeout", "1", "--send-timeout", "5", "--idle-timeout", "30",
             "--admin", "127.0.0.1:%d" % adm]
    with st.Servd(pack(), extra=extra) as s:
        c = slow_socket(s.port)
        c.sendall(st.req("GET", "/f.bin") * 12 + b"GET /f.bin HTTP/1.1\r\nHo")
        got, total, took, gap = read_slowly(c, 12, 0.04)
        eq(got, 12, "responses delivered before the header timeout may act (%.2f s)" % took)
        ok(took > 1.2, "the reader took %.2f s: longer than --header-timeout" % took)
        t_end = time.time()
        c.settimeout(5)
        try:
            rest = c.recv(4096)
        except OSError:
            rest = b""
        waited = time.time() - t_end
        eq(rest, b"", "bytes after the 12 responses (none: the 13th head never ended)")
        ok(waited < 2.0, "servd closed %.2f s after the last response was read" % waited)
        eq(timeouts(st.metrics(adm)), {"header": 1, "idle": 0, "send": 0},
           "timeouts after a head that never ended behind slow responses")
        print("  12 responses in %.2f s, then closed %.2f s later" % (took, waited))
        c.close()


def t_requests_without_reading_are_not_progress():
    """A client that never reads but keeps sending a HEAD every 50 ms: each adds
    a response to the bytes in flight, which servd used to count as progress, so the send
    timeout never fired while the kernel's send buffer and then servd's queue (up to
    SV_CONN_TURN_BYTES) still took them: about a minute at this pace. Progress is the
    client acknowledging bytes, which stops once its 4 KB receive buffer is full (a few
    seconds): it must then be cut after about the send timeout."""
    adm = st.free_port()
    extra = ["--send-timeout", SEND_TIMEOUT, "--idle-timeout", "30",
             "--admin", "127.0.0.1:%d" % adm]
    with st.Servd(pack(), extra=extra) as s:
        c = slow_socket(s.port)
        t0 = time.time()
        closed = None
        while time.time() - t0 < 10:
            try:
                c.sendall(st.req("HEAD", "/f.bin"))
            except OSError:  # reset by servd's close
                closed = time.time() - t0
                break
            if timeouts(st.metrics(adm))["send"] > 0:
                closed = time.time() - t0
                break
            time.sleep(0.05)
        m = st.metrics(adm)
        ok(closed is not None, "a client asking every 50 ms and reading nothing was still "
           "connected after 10 s (timeouts %s)" % timeouts(m))
        eq(timeouts(m)["send"], 1, "send timeouts after a client that never read")
        print("  never reading, a request every 50 ms: closed after %.2f s" % closed)
        c.close()


if __name__ == "__main__":
    st.run(st.collect(globals()))
