#!/usr/bin/env python3
"""Range requests against a real servd (HTTP.md "Range", RFC 9110 §14): ranges index the
bytes of the SELECTED representation (gzip bytes when gzip is chosen); single, suffix and
open ranges; multiple ranges as multipart/byteranges with an exact Content-Length (every
part parsed and checked against the slice); overlapping ranges merged; unsatisfiable ->
416 with "Content-Range: bytes */len"; malformed -> ignored (200); If-Range strong only;
Range ignored on HEAD; curl -r as a real client."""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servdtest as st  # noqa: E402
from servdtest import eq, ok  # noqa: E402

BIG = "/data/big.txt"
PNG = "/img/dot.png"


def rget(S, path, rng, extra=(), method="GET", ae=None):
    hdrs = [("Range", rng)] if rng is not None else []
    if ae is not None:
        hdrs.append(("Accept-Encoding", ae))
    # Pipeline a second request: a wrong Content-Length on the first would garble it.
    with st.Conn(S.port) as c:
        c.send(st.req(method, path, hdrs + list(extra)) + st.req("GET", "/tiny.txt"))
        r = c.read_response(method)
        r2 = c.read_response("GET")
        eq((r2.status, r2.body), (200, S.fixture.files["/tiny.txt"]),
           "request pipelined after Range %r (framing of the first response)" % rng)
        return r


def full_bytes(S, path, ae=None):
    r = st.get(S.port, path, [] if ae is None else [("Accept-Encoding", ae)])
    eq(r.status, 200, "GET %s %r status" % (path, ae))
    return r


def content_range(r, what):
    m = re.match(r"^bytes (\d+)-(\d+)/(\d+)$", r.need("Content-Range"))
    ok(m is not None, "%s: bad Content-Range %r" % (what, r.get("Content-Range")))
    return tuple(int(x) for x in m.groups())


def check_206(r, data, first, last, what, negotiable=True, full=None):
    eq(r.status, 206, what + ": status")
    eq(content_range(r, what), (first, last, len(data)), what + ": Content-Range")
    eq(int(r.need("Content-Length")), last - first + 1, what + ": Content-Length")
    eq(r.body, data[first:last + 1], what + ": body")
    st.vary_accept_encoding(r, negotiable, what)
    if full is not None:
        for name in ("ETag", "Cache-Control", "Content-Type", "Content-Encoding", "Last-Modified"):
            eq(r.get(name), full.get(name), what + ": %s same as on the 200" % name)
    st.http_date(r.get("Date"), what + ": Date")


def check_full_200(r, data, what):
    eq(r.status, 200, what + ": status")
    eq(r.body, data, what + ": body")
    eq(r.get("Content-Range"), None, what + ": Content-Range on a 200")


def parse_multipart(r, data, what, ptype=None):
    """[(first, last)] of the parts of a multipart/byteranges body, each checked; ptype is
    the Content-Type every part must carry (the representation's)."""
    ctype = r.need("Content-Type")
    m = re.match(r'^multipart/byteranges;\s*boundary=("?)([^";]+)\1\s*$', ctype)
    ok(m is not None, "%s: Content-Type %r is not multipart/byteranges with a boundary"
       % (what, ctype))
    ok(r.get("Content-Range") is None, what + ": Content-Range on a multipart response")
    eq(int(r.need("Content-Length")), len(r.body), what + ": Content-Length")
    delim = b"--" + m.group(2).encode()
    body = r.body
    pos = body.find(delim)
    ok(pos >= 0, what + ": no boundary in body")
    parts = []
    while True:
        pos += len(delim)
        if body[pos:pos + 2] == b"--":
            ok(body[pos + 2:].strip(b"\r\n") == b"", what + ": bytes after the close delimiter")
            break
        ok(body[pos:pos + 2] == b"\r\n", what + ": no CRLF after a boundary")
        hend = body.index(b"\r\n\r\n", pos)
        hdrs = {}
        for line in body[pos + 2:hend].split(b"\r\n"):
            k, _, v = line.decode("latin-1").partition(":")
            hdrs[k.strip().lower()] = v.strip()
        cr = re.match(r"^bytes (\d+)-(\d+)/(\d+)$", hdrs.get("content-range", ""))
        ok(cr is not None, "%s: part without a valid Content-Range: %s" % (what, hdrs))
        a, b, n = (int(x) for x in cr.groups())
        eq(n, len(data), what + ": part Content-Range length")
        ok("content-type" in hdrs, what + ": part without Content-Type")
        if ptype is not None:
            eq(hdrs["content-type"], ptype, what + ": part Content-Type")
        start = hend + 4
        eq(body[start:start + b - a + 1], data[a:b + 1], what + ": part %d-%d bytes" % (a, b))
        pos = start + b - a + 1
        ok(body[pos:pos + 2 + len(delim)] == b"\r\n" + delim,
           what + ": part %d-%d not followed by CRLF and the boundary" % (a, b))
        pos += 2
        parts.append((a, b))
    return parts


def t_single_suffix_open(S):
    data = S.fixture.files[BIG]
    n = len(data)
    full = full_bytes(S, BIG)
    check_206(rget(S, BIG, "bytes=0-99"), data, 0, 99, "bytes=0-99", full=full)
    check_206(rget(S, BIG, "bytes=1000-1000"), data, 1000, 1000, "bytes=1000-1000")
    check_206(rget(S, BIG, "bytes=-100"), data, n - 100, n - 1, "bytes=-100")
    check_206(rget(S, BIG, "bytes=100-"), data, 100, n - 1, "bytes=100-")
    check_206(rget(S, BIG, "bytes=0-"), data, 0, n - 1, "bytes=0-")
    check_206(rget(S, BIG, "bytes=%d-%d" % (n - 10, n + 5000)), data, n - 10, n - 1,
              "last-pos past the end is clipped")
    check_206(rget(S, BIG, "bytes=-%d" % (n + 5000)), data, 0, n - 1,
              "suffix longer than the file")
    check_206(rget(S, BIG, "bytes=%d-" % (n - 1)), data, n - 1, n - 1, "last byte")


def t_range_whitespace_and_case(S):
    data = S.fixture.files[BIG]
    check_206(rget(S, BIG, "bytes=5-9 "), data, 5, 9, "trailing OWS")
    check_206(rget(S, BIG, "Bytes=5-9"), data, 5, 9, "range unit is case-insensitive")


def t_unsatisfiable_416(S):
    data = S.fixture.files[BIG]
    n = len(data)
    for rng in ("bytes=%d-" % n, "bytes=%d-%d" % (n + 5, n + 10), "bytes=-0",
                "bytes=%d-,%d-%d" % (n, n + 1, n + 9)):
        r = rget(S, BIG, rng)
        eq(r.status, 416, "Range %r status" % rng)
        eq(r.get("Content-Range"), "bytes */%d" % n, "Range %r Content-Range" % rng)
        eq(int(r.need("Content-Length")), len(r.body), "416 Content-Length")
        # RFC 9110 §15.5: a 4xx SHOULD carry a representation explaining the error
        eq((r.get("Content-Type"), r.body), ("text/plain; charset=utf-8",
                                             b"416 Range Not Satisfiable\n"), "416 body")
        st.vary_accept_encoding(r, True, "416 of a negotiable file")
    r = rget(S, PNG, "bytes=999999-")
    eq(r.status, 416, "PNG unsatisfiable status")
    st.vary_accept_encoding(r, False, "416 of a file without variants")
    # An empty file ignores Range: a cache fetching in slices (nginx's slice module
    # asks bytes=0-N for a plain GET) would otherwise hand a 416 to its client.
    for rng in ("bytes=0-", "bytes=0-65535", "bytes=-5"):
        r = rget(S, "/empty.txt", rng)
        eq((r.status, r.get("Content-Range"), r.body), (200, None, b""), "%s of an empty file" % rng)
        eq(r.get("Content-Length"), "0", "%s of an empty file: Content-Length" % rng)


def t_malformed_ignored(S):
    data = S.fixture.files[BIG]
    for rng in ("bytes=abc", "bytes=5-2", "items=0-5", "bytes 0-5", "bytes=", "bytes=--5",
                "bytes=1-2-3", "bytes=0x10-0x20", "bytes=+5-9", "bytes=5-9,abc", "=0-5",
                "bytes=-", "bytes=0-9;x"):
        check_full_200(rget(S, BIG, rng), data, "malformed Range %r (must be ignored)" % rng)


def t_multiple_ranges(S):
    data = S.fixture.files[BIG]
    n = len(data)
    for rng, want in (("bytes=0-9,20-29,-5", [(0, 9), (20, 29), (n - 5, n - 1)]),
                      ("bytes=100-199, 1000-1099", [(100, 199), (1000, 1099)]),
                      ("bytes=500-509,%d-" % (n - 3), [(500, 509), (n - 3, n - 1)])):
        r = rget(S, BIG, rng)
        eq(r.status, 206, "Range %r status" % rng)
        parts = parse_multipart(r, data, "Range %r" % rng, full_bytes(S, BIG).need("Content-Type"))
        eq(sorted(parts), want, "Range %r parts" % rng)
        st.vary_accept_encoding(r, True, "multipart 206")
        ok(r.get("ETag") is not None, "multipart 206 without ETag")


def t_overlapping_ranges_merged(S):
    data = S.fixture.files[BIG]
    for rng, want in (("bytes=0-50,40-99", (0, 99)), ("bytes=0-9,10-19", (0, 19)),
                      ("bytes=10-20,0-100,50-60", (0, 100)), ("bytes=0-9,0-9,0-9", (0, 9))):
        r = rget(S, BIG, rng)
        what = "Range %r" % rng
        eq(r.status, 206, what + ": status")
        if r.get("Content-Range") is not None:
            check_206(r, data, want[0], want[1], what)
        else:
            parts = parse_multipart(r, data, what)
            eq(len(parts), 1, what + ": overlapping parts were not merged: %s" % parts)
            eq(parts[0], want, what + ": merged part")


def t_unsorted_ranges(S):
    data = S.fixture.files[BIG]
    r = rget(S, BIG, "bytes=5000-5009,0-9")
    eq(r.status, 206, "unsorted ranges status")
    parts = parse_multipart(r, data, "unsorted ranges")
    eq(sorted(parts), [(0, 9), (5000, 5009)], "unsorted ranges parts")


def t_ranges_on_encoded_bytes(S):
    for c in ("gzip", "br", "zstd"):
        full = full_bytes(S, BIG, c)
        eq(st.content_encoding(full), c, "%s variant exists" % c)
        enc = full.body
        n = len(enc)
        r = rget(S, BIG, "bytes=0-99", ae=c)
        check_206(r, enc, 0, 99, "%s bytes=0-99 (slice of the %s bytes)" % (c, c), full=full)
        eq(st.content_encoding(r), c, "%s range Content-Encoding" % c)
        check_206(rget(S, BIG, "bytes=-50", ae=c), enc, n - 50, n - 1, "%s bytes=-50" % c)
        # Several ranges of an encoded variant: the whole variant (RFC 9110 §14.2 lets a
        # server ignore Range). A multipart body would carry Content-Encoding, which then
        # applies to the multipart envelope: curl --compressed fails on it.
        r = rget(S, BIG, "bytes=0-9,%d-%d" % (n - 20, n - 11), ae=c)
        eq((r.status, st.content_encoding(r), r.get("Content-Range")), (200, c, None),
           "%s: several ranges of an encoded variant" % c)
        eq(r.body, enc, "%s: several ranges give the whole encoded body" % c)
        # Past the end of an encoded variant: 416 with the encoded length (HTTP.md:
        # unsatisfiable -> 416 with bytes */len of the selected representation).
        r = rget(S, BIG, "bytes=%d-" % n, ae=c)
        eq((r.status, r.get("Content-Range"), r.get("Content-Encoding"), r.body),
           (416, "bytes */%d" % n, None, b"416 Range Not Satisfiable\n"),
           "%s: a range past the encoded end" % c)
        st.vary_accept_encoding(r, True, "%s: the 416 of a range past the encoded end" % c)
    # Reassembling gzip slices gives a stream that decodes to the file.
    enc = full_bytes(S, BIG, "gzip").body
    pieces = b"".join(rget(S, BIG, "bytes=%d-%d" % (i, min(i + 9999, len(enc) - 1)), ae="gzip").body
                      for i in range(0, len(enc), 10000))
    eq(st.decode(pieces, "gzip"), S.fixture.files[BIG], "gzip slices reassembled and decoded")


def t_if_range(S):
    data = S.fixture.files[BIG]
    full = full_bytes(S, BIG)
    et = full.need("ETag")
    check_206(rget(S, BIG, "bytes=0-9", [("If-Range", et)]), data, 0, 9, "If-Range current ETag")
    check_full_200(rget(S, BIG, "bytes=0-9", [("If-Range", '"other"')]), data,
                   "If-Range other ETag")
    check_full_200(rget(S, BIG, "bytes=0-9", [("If-Range", "W/" + et)]), data,
                   "If-Range weak ETag (strong comparison only)")
    lm = st.http_date(full.need("Last-Modified"), "Last-Modified")
    check_full_200(rget(S, BIG, "bytes=0-9", [("If-Range", st.fmt_date(lm - 86400))]), data,
                   "If-Range date before Last-Modified")
    check_206(rget(S, BIG, "bytes=0-9", [("If-Range", st.fmt_date(lm))]), data, 0, 9,
              "If-Range with the Last-Modified, identity selected")
    # "exactly matches the Last-Modified field value" (RFC 9110 §13.1.5): the same
    # second in the obsolete forms, or under another day name, is no match
    import time
    tm = time.gmtime(lm)
    other_day = ("Mon, " if not full.need("Last-Modified").startswith("Mon") else "Tue, ")
    for d in (time.strftime("%A, %d-%b-%y %H:%M:%S GMT", tm),
              time.strftime("%a %b ", tm) + ("%2d" % tm.tm_mday) + time.strftime(" %H:%M:%S %Y", tm),
              other_day + full.need("Last-Modified")[5:]):
        check_full_200(rget(S, BIG, "bytes=0-9", [("If-Range", d)]), data, "If-Range %r" % d)
    # A date validates only the identity representation: a compressed one can change
    # under the same Last-Modified (another encoder or level at the next pack), so a
    # resumed download could splice two encodings (RFC 9110 §13.1.5 step 2).
    gz = full_bytes(S, BIG, "gzip")
    check_full_200(rget(S, BIG, "bytes=0-9", [("If-Range", st.fmt_date(lm))], ae="gzip"),
                   gz.body, "If-Range with the Last-Modified, gzip selected")
    # The validator must be the SELECTED variant's: identity ETag while gzip is chosen
    r = rget(S, BIG, "bytes=0-9", [("If-Range", et)], ae="gzip")
    check_full_200(r, gz.body, "If-Range identity ETag while gzip selected")
    check_206(rget(S, BIG, "bytes=0-9", [("If-Range", gz.need("ETag"))], ae="gzip"), gz.body, 0, 9,
              "If-Range gzip ETag while gzip selected")


def t_range_ignored_on_head(S):
    full = full_bytes(S, BIG)
    r = rget(S, BIG, "bytes=0-9", method="HEAD")
    eq(r.status, 200, "HEAD with Range: status")
    eq(r.get("Content-Length"), full.get("Content-Length"), "HEAD with Range: Content-Length")
    eq(r.get("Content-Range"), None, "HEAD with Range: Content-Range")


def t_conditionals_before_range(S):
    full = full_bytes(S, BIG)
    r = rget(S, BIG, "bytes=0-9", [("If-None-Match", full.need("ETag"))])
    eq(r.status, 304, "Range + matching If-None-Match: status")
    r = rget(S, BIG, "bytes=0-9", [("If-Match", '"nope"')])
    eq(r.status, 412, "Range + failing If-Match: status")


def t_png_ranges_no_vary(S):
    data = S.fixture.files[PNG]
    full = full_bytes(S, PNG, "gzip, br")
    check_206(rget(S, PNG, "bytes=8-23", ae="gzip, br"), data, 8, 23, "PNG range",
              negotiable=False, full=full)
    r = rget(S, PNG, "bytes=0-0,-1")
    eq(sorted(parse_multipart(r, data, "PNG multipart")), [(0, 0), (len(data) - 1, len(data) - 1)],
       "PNG multipart parts")
    st.vary_accept_encoding(r, False, "PNG multipart")


def t_range_ignored_on_non_200(S):
    r = rget(S, "/no/such/file", "bytes=0-5")
    eq((r.status, r.body), (404, S.fixture.files["/404.html"]), "Range on a missing path")
    eq(r.get("Content-Range"), None, "Range on a missing path: Content-Range")
    eq(rget(S, "/docs", "bytes=0-5").status, 301, "Range on a directory redirect")


def t_partly_unsatisfiable_set(S):
    # Unsatisfiable members of a range set are dropped; the rest is served.
    data = S.fixture.files[BIG]
    r = rget(S, BIG, "bytes=0-9,%d-" % (len(data) + 100))
    what = "bytes=0-9 plus an unsatisfiable range"
    eq(r.status, 206, what + ": status")
    if r.get("Content-Range") is not None:
        check_206(r, data, 0, 9, what)
    else:
        eq(parse_multipart(r, data, what), [(0, 9)], what + ": parts")
    r = rget(S, BIG, "bytes=0-9,5-")
    eq(r.status, 206, "bytes=0-9,5-: status")
    if r.get("Content-Range") is not None:
        check_206(r, data, 0, len(data) - 1, "bytes=0-9,5- merged")
    else:
        eq(parse_multipart(r, data, "bytes=0-9,5-"), [(0, len(data) - 1)], "bytes=0-9,5- parts")


def t_range_abuse(S):
    data = S.fixture.files[BIG]
    many = "bytes=" + ",".join("%d-%d" % (i * 2, i * 2) for i in range(1000))  # ~8 KB value
    r = rget(S, BIG, many)
    # more than SV_MAX_RANGES (16) disjoint ranges: the Range is ignored (servd(1))
    eq(r.status, 200, "1000 disjoint ranges: status (ignored)")
    eq(r.body, data, "1000 ranges ignored: full body")
    many_overlap = "bytes=" + ",".join("0-%d" % i for i in range(1, 500))
    r = rget(S, BIG, many_overlap)
    eq(r.status, 206, "499 overlapping ranges, merged as they are read: status")
    check_206(r, data, 0, 499, "499 overlapping ranges merged")
    # Positions past the representation or past 64 bits: a last-pos or suffix that large
    # means "to the end" (RFC 9110 14.1.2), a first-pos that large is unsatisfiable.
    whole, unsatisfiable = (0, len(data) - 1), None
    for rng, want in (("bytes=0-99999999999999999999999999", whole),
                      ("bytes=99999999999999999999999999-", unsatisfiable),
                      ("bytes=-99999999999999999999999999", whole),
                      ("bytes=18446744073709551615-", unsatisfiable),
                      ("bytes=0-18446744073709551615", whole),
                      ("bytes=18446744073709551614-18446744073709551615", unsatisfiable)):
        r = rget(S, BIG, rng)
        if want is unsatisfiable:
            eq((r.status, r.get("Content-Range")), (416, "bytes */%d" % len(data)),
               "Range %r" % rng)
        else:
            eq(r.status, 206, "Range %r: status" % rng)
            check_206(r, data, *want, what="Range %r" % rng)
    S.check_alive()


def t_curl_range(S):
    data = S.fixture.files[BIG]
    for spec, want in (("0-99", data[:100]), ("-100", data[-100:]), ("65000-", data[65000:])):
        p = subprocess.run(["curl", "-sS", "--http1.1", "-r", spec,
                            "http://127.0.0.1:%d%s" % (S.port, BIG)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
        eq(p.returncode, 0, "curl -r %s exit (%s)" % (spec, p.stderr.decode()))
        eq(p.stdout, want, "curl -r %s body" % spec)


def t_boundary_never_in_the_body(S):
    """A file can hold any fixed boundary, and fake parts after it; the boundary servd uses
    is derived from the variant's ETag, a hash of the very bytes the parts are cut from."""
    root = os.path.join(st.tmpdir(), "boundary-site")
    os.makedirs(root, exist_ok=True)
    fake = (b"\r\n--SERVD-BYTERANGES-7d3f09c1a5e2b864\r\nContent-Type: text/html\r\n"
            b"Content-Range: bytes 0-3/9\r\n\r\nEVIL\r\n--SERVD-BYTERANGES-7d3f09c1a5e2b864--"
            b"\r\n--servd-\r\n")
    data = b"A" * 40 + fake * 4 + b"Z" * 40
    with open(os.path.join(root, "evil.bin"), "wb") as f:
        f.write(data)
    with st.Servd(st.pack(root, "boundary.lmdb")) as srv:
        r = st.get(srv.port, "/evil.bin", [("Range", "bytes=0-0,50-250")])
        eq(r.status, 206, "two ranges of a file holding fake parts")
        etag = r.need("ETag")
        m = re.match(r"^multipart/byteranges; boundary=(\S+)$", r.need("Content-Type"))
        ok(m is not None, "multipart Content-Type: %r" % r.need("Content-Type"))
        eq(m.group(1), "servd-" + etag.strip('"'), "the boundary is derived from the ETag")
        ok(("--" + m.group(1)).encode() not in data, "the delimiter is not in the file")
        eq(parse_multipart(r, data, "fake parts in the body"), [(0, 0), (50, 250)],
           "exactly the requested parts")
        eq(r.body.count(("--" + m.group(1)).encode()), 3, "two parts and the close delimiter")


def t_curl_several_ranges_compressed(S):
    """curl --compressed with several ranges: it asks for gzip, gets the whole gzip
    variant (200) and decodes it; a multipart body labelled gzip would make it fail."""
    data = S.fixture.files[BIG]
    p = subprocess.run(["curl", "-sS", "--http1.1", "--compressed", "-r", "0-1,10-11",
                        "-w", "%{http_code}", "http://127.0.0.1:%d%s" % (S.port, BIG)],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    eq(p.returncode, 0, "curl --compressed -r 0-1,10-11 exit (%s)" % p.stderr.decode())
    eq((p.stdout[-3:], p.stdout[:-3]), (b"200", data), "curl --compressed several ranges")


def t_www_ranges(S):
    if S.www is None:
        raise st.Skip("www/ is not present")
    for path, data in sorted(S.www.files.items()):
        if len(data) < 2:
            continue
        r = st.get(S.www.port, st.url(path), [("Range", "bytes=1-1"), ("Accept-Encoding", "br")])
        full = st.get(S.www.port, st.url(path), [("Accept-Encoding", "br")])
        eq(r.status, 206, "www %s bytes=1-1 status" % path)
        eq(r.body, full.body[1:2], "www %s bytes=1-1 body" % path)


if __name__ == "__main__":
    st.run(st.collect(globals()), lambda: st.Sites(workers=1))
