#!/usr/bin/env python3
"""servd behind a real Apache Traffic Server (Debian's traffic_server), started by this test
on 127.0.0.1 with a runroot of its own in a temp dir (config, cache file, logs).

Three instances share one servd (through a relay that records what reaches the origin and
what servd answered), differing only in proxy.config.http.normalize_ae:
  a1  1, the default: Accept-Encoding becomes "gzip" when the client accepts gzip, else it
      is removed; two alternates per URL (gzip, identity);
  a2  2: "br" when the client accepts br, else "gzip", else nothing; three alternates;
  a0  0: Accept-Encoding is forwarded as sent; ATS then picks a stored alternate whose
      Content-Encoding the client accepts, whatever the spelling of its header.
ATS never transforms a body, so every client gets servd's bytes and strong ETags.
What is checked: each encoding variant is cached separately through Vary; revalidation of
a stale object reaches servd as If-None-Match with that alternate's ETag and gets a 304
with the 200's validators, while the client still gets the whole body; Range is byte-exact
whether ATS serves it from the cache or forwards it to servd; a Via header (ATS adds one to
every origin request) never changes what servd sends. Figures are printed as NOTE lines;
docs/cdn.md describes the behaviour."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cdntest as ct  # noqa: E402
import servdtest as st  # noqa: E402
from servdtest import eq, ok  # noqa: E402

AE = "CONFIG proxy.config.http.normalize_ae INT %d"


class Ctx:
    def __init__(self):
        self.o = ct.Origin("ats")
        self.a1 = self.a2 = self.a0 = None

    def __enter__(self):
        self.o.__enter__()
        try:
            self.a1 = ct.TrafficServer(self.o.port, [AE % 1]).start()
            self.a2 = ct.TrafficServer(self.o.port, [AE % 2]).start()
            self.a0 = ct.TrafficServer(self.o.port, [AE % 0]).start()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, et, ev, tb):
        for a in (self.a0, self.a2, self.a1):
            if a:
                a.stop(check=False)
        self.o.__exit__(et, ev, tb)
        return False


CLIENTS = ["gzip", "br", None, "gzip, deflate, br", "zstd", "br;q=1, gzip;q=0.5"]


def t_default_gzip_or_identity(c):
    """normalize_ae=1: gzip clients share the gzip alternate, every other client the
    identity one; two origin fetches in all."""
    path = "/vary/1.txt"
    v = c.o.variants(path)
    for rnd in (1, 2):
        for a in CLIENTS:
            r = ct.fetch(c.a1.port, path, ct.ae(a))
            what = "ats ae=1 round %d AE=%r" % (rnd, a)
            ct.expect_full(r, v, "gzip" if a and "gzip" in a else "identity", what)
            st.vary_accept_encoding(r, True, what)
    reqs = c.o.requests_for(path)
    eq([(q.get("Accept-Encoding"), q.response.status, q.response.get("ETag")) for q in reqs],
       [("gzip", 200, v.etag("gzip")), (None, 200, v.etag("identity"))],
       "origin requests for %s" % path)
    eq([(e.status, e.encoding) for e in c.o.log_for(path)], [(200, "gzip"), (200, "identity")],
       "servd access log for %s" % path)
    ct.note("ats normalize_ae=1: %d client requests -> %d origin requests (gzip %d B, "
            "identity %d B); br clients get identity" % (
                2 * len(CLIENTS), len(reqs), len(v.body("gzip")), len(v.body("identity"))))


def t_vary_br_gzip_identity(c):
    """normalize_ae=2: br, gzip and identity alternates, each fetched once."""
    path = "/vary/2.txt"
    v = c.o.variants(path)
    want = {"gzip": "gzip", "br": "br", None: "identity", "gzip, deflate, br": "br",
            "zstd": "identity", "br;q=1, gzip;q=0.5": "br"}
    for rnd in (1, 2):
        for a in CLIENTS:
            r = ct.fetch(c.a2.port, path, ct.ae(a))
            what = "ats ae=2 round %d AE=%r" % (rnd, a)
            ct.expect_full(r, v, want[a], what)
            st.vary_accept_encoding(r, True, what)
    reqs = c.o.requests_for(path)
    eq([(q.get("Accept-Encoding"), q.response.status, q.response.get("ETag")) for q in reqs],
       [("gzip", 200, v.etag("gzip")), ("br", 200, v.etag("br")),
        (None, 200, v.etag("identity"))], "origin requests for %s" % path)
    eq([(e.status, e.encoding) for e in c.o.log_for(path)],
       [(200, "gzip"), (200, "br"), (200, "identity")], "servd access log for %s" % path)
    ct.note("ats normalize_ae=2: %d client requests -> 3 origin requests (gzip %d B, br %d B, "
            "identity %d B), then 0" % (2 * len(CLIENTS), len(v.body("gzip")),
                                         len(v.body("br")), len(v.body("identity"))))


def t_vary_raw_accept_encoding(c):
    """normalize_ae=0: the first four values are four fetches (gzip, br, identity, zstd);
    a later client gets a stored alternate it accepts, without a fetch, bytes intact."""
    path = "/vary/3.txt"
    v = c.o.variants(path)
    for a, coding in (("gzip", "gzip"), ("br", "br"), (None, "identity"), ("zstd", "zstd")):
        ct.expect_full(ct.fetch(c.a0.port, path, ct.ae(a)), v, coding, "ats ae=0 AE=%r" % a)
    n = len(c.o.requests_for(path))
    eq(n, 4, "origin requests for four Accept-Encoding values")
    picked = []
    for a in ("gzip, deflate, br", "br;q=1, gzip;q=0.5", "gzip, zstd", "gzip", "br", None):
        r = ct.fetch(c.a0.port, path, ct.ae(a))
        ok(r.coding in v.enc, "ats ae=0 AE=%r: Content-Encoding %r not stored" % (a, r.coding))
        ok(r.coding == "identity" or (a is not None and r.coding in a),
           "ats ae=0 AE=%r: got %r, which the client does not accept" % (a, r.coding))
        ct.expect_full(r, v, r.coding, "ats ae=0 AE=%r" % a)
        picked.append((a, r.coding))
    eq(len(c.o.requests_for(path)), n, "origin requests after clients with other spellings")
    ct.note("ats normalize_ae=0: 4 origin fetches (gzip, br, identity, zstd); later spellings "
            "served from a stored alternate: %s" % picked)


def t_stale_revalidates_each_alternate(c):
    """Each stale alternate is revalidated with its own ETag; servd answers 304 to each
    (it compares with the variant it would select for that Accept-Encoding)."""
    path = "/stale/1.json"
    v = c.o.variants(path)
    reqs = ct.revalidate(c.o, c.a1, path, [("gzip", "gzip", v.etag("gzip")),
                                           (None, "identity", v.etag("identity"))],
                         "ats ae=1")
    path2 = "/stale/2.json"
    v2 = c.o.variants(path2)
    reqs2 = ct.revalidate(c.o, c.a2, path2, [("gzip", "gzip", v2.etag("gzip")),
                                             ("br", "br", v2.etag("br")),
                                             (None, "identity", v2.etag("identity"))],
                          "ats ae=2")
    ct.note("ats revalidation: ae=1 origin saw %s; ae=2 origin saw %s" % (
        [(q.get("Accept-Encoding"), q.get("If-None-Match"), q.response.status) for q in reqs],
        [(q.get("Accept-Encoding"), q.get("If-None-Match"), q.response.status) for q in reqs2]))


def t_html_revalidation(c):
    """HTML: ATS does not store servd's default no-cache pages (every request is a full
    fetch); with s-maxage (the rules in /page/**) it stores and revalidates them."""
    path = "/index.html"
    v = c.o.variants(path)
    for _ in range(3):
        ct.expect_full(ct.fetch(c.a1.port, path, ct.ae("gzip")), v, "gzip", "no-cache page")
    log = c.o.log_for(path)
    eq([(e.status, e.encoding) for e in log], [(200, "gzip")] * 3,
       "servd access log for a no-cache page behind ATS")
    page = "/page/1.html"
    pv = c.o.variants(page)
    reqs = ct.revalidate(c.o, c.a1, page, [("gzip", "gzip", pv.etag("gzip")),
                                           (None, "identity", pv.etag("identity"))],
                         "ats s-maxage page")
    ct.note("ats HTML: Cache-Control no-cache -> every request fetched in full (%d of 3); "
            "max-age=0, s-maxage=1, must-revalidate -> %s" % (
                len(log), [q.response.status for q in reqs]))


def t_range_miss_forwarded(c):
    """A Range request for an object ATS does not hold goes to servd with the Range header
    (and the normalised Accept-Encoding); servd's 206 reaches the client byte-exact, and
    ATS does not store it."""
    path = "/range/1.txt"
    v = c.o.variants(path)
    for a, coding in (("gzip", "gzip"), (None, "identity"), ("br", "identity")):
        for _ in range(2):
            r = ct.fetch(c.a1.port, path, ct.ae(a) + [("Range", "bytes=100-199")])
            ct.expect_part(r, v, coding, 100, 199, "ats ae=1 miss AE=%r" % a)
    r = ct.fetch(c.a2.port, path, ct.ae("br") + [("Range", "bytes=-30")])
    n = len(v.body("br"))
    ct.expect_part(r, v, "br", n - 30, n - 1, "ats ae=2 miss AE='br'")
    reqs = c.o.requests_for(path)
    eq([(q.get("Accept-Encoding"), q.get("Range"), q.response.status,
         q.response.get("Content-Encoding")) for q in reqs],
       [("gzip", "bytes=100-199", 206, "gzip")] * 2 + [(None, "bytes=100-199", 206, None)] * 4
       + [("br", "bytes=-30", 206, "br")], "origin requests for ranges of an uncached object")
    ct.note("ats Range on a miss: forwarded to servd with Range, servd's 206 passed through, "
            "not stored (%d client ranges -> %d origin 206s)" % (7, len(reqs)))


def t_range_from_cache(c):
    """Once ATS holds an alternate, it cuts ranges from it: the gzip bytes for gzip clients,
    the br bytes (ae=2) for br clients. A client whose alternate is missing goes to servd."""
    path = "/range/2.txt"
    v = c.o.variants(path)
    glen = len(v.body("gzip"))
    ilen = len(v.body("identity"))
    ct.expect_full(ct.fetch(c.a1.port, path, ct.ae("gzip")), v, "gzip", "ats ae=1 fill gzip")
    for rng, first, last in (("bytes=100-199", 100, 199), ("bytes=-20", glen - 20, glen - 1),
                             ("bytes=%d-" % (glen - 50), glen - 50, glen - 1),
                             ("bytes=0-0", 0, 0), ("bytes=0-%d" % (glen + 99), 0, glen - 1)):
        r = ct.fetch(c.a1.port, path, ct.ae("gzip") + [("Range", rng)])
        ct.expect_part(r, v, "gzip", first, last, "ats ae=1 cached gzip %s" % rng)
    r = ct.fetch(c.a1.port, path, ct.ae("gzip") + [("Range", "bytes=5-9"),
                                                     ("If-Range", v.etag("gzip"))])
    ct.expect_part(r, v, "gzip", 5, 9, "If-Range with the gzip ETag")
    r = ct.fetch(c.a1.port, path, ct.ae("gzip") + [("Range", "bytes=5-9"),
                                                     ("If-Range", v.etag("identity"))])
    ct.expect_full(r, v, "gzip", "If-Range with another variant's ETag")
    r = ct.fetch(c.a1.port, path, ct.ae("gzip") + [("Range", "bytes=0-9,50-59")])
    if r.status == 200:
        ct.expect_full(r, v, "gzip", "two ranges answered in full")
        multi = "200 full"
    elif r.status == 416:
        multi = "416"
    else:
        eq(r.status, 206, "two ranges")
        eq(ct.multipart_parts(r), [("bytes 0-9/%d" % glen, v.body("gzip")[0:10]),
                                   ("bytes 50-59/%d" % glen, v.body("gzip")[50:60])],
           "multipart parts")
        multi = "206 multipart"
    r = ct.fetch(c.a1.port, path, ct.ae("gzip") + [("Range", "bytes=%d-" % (glen + 10))])
    eq(r.status, 416, "unsatisfiable range of the cached gzip alternate")
    unsat = "416 Content-Range=%r (%s)" % (r.get("Content-Range"), r.get("Content-Type"))
    eq([(q.get("Accept-Encoding"), q.get("Range")) for q in c.o.requests_for(path)],
       [("gzip", None)], "origin requests while ranges come from the cache")
    # The identity alternate is not stored yet: that range goes to servd.
    r = ct.fetch(c.a1.port, path, [("Range", "bytes=1000-1999")])
    ct.expect_part(r, v, "identity", 1000, 1999, "ats ae=1 identity range, not cached")
    eq(c.o.requests_for(path)[-1].response.status, 206, "servd answered the identity range")
    # br through ae=2, from the cached br alternate.
    blen = len(v.body("br"))
    ct.expect_full(ct.fetch(c.a2.port, path, ct.ae("br")), v, "br", "ats ae=2 fill br")
    for rng, first, last in (("bytes=0-99", 0, 99), ("bytes=-7", blen - 7, blen - 1)):
        r = ct.fetch(c.a2.port, path, ct.ae("br") + [("Range", rng)])
        ct.expect_part(r, v, "br", first, last, "ats ae=2 cached br %s" % rng)
    eq([(q.get("Accept-Encoding"), q.get("Range")) for q in c.o.requests_for(path)],
       [("gzip", None), (None, "bytes=1000-1999"), ("br", None)], "origin requests for %s" % path)
    ct.note("ats Range from cache: gzip (%d B) and br (%d B) alternates sliced by ATS; "
            "identity %d B; two ranges -> %s; unsatisfiable -> %s" % (
                glen, blen, ilen, multi, unsat))


def t_via_never_changes_servd(c):
    """ATS adds a Via header to every origin request: servd answers exactly as without it
    (but for Date). Checked directly and on what servd sent ATS."""
    for path in ("/vary/4.txt", "/blob.bin", "/index.html", "/missing"):
        for coding in ("gzip", "br", None):
            ct.check_via_ignored(c.o, path, coding)
    path = "/vary/5.txt"
    for a in ("gzip", None):
        ct.fetch(c.a1.port, path, ct.ae(a))
    vias = set()
    for q in c.o.requests_for(path):
        via = q.get("Via")
        ok(via is not None and "ApacheTrafficServer" in via,
           "ATS sent no Via to the origin: %r" % q)
        vias.add(via.split("[")[0])
        hdrs = [(k, val) for k, val in q.headers if k.lower() in ("accept-encoding",)]
        direct = st.get(c.o.direct, path, hdrs)
        ok(ct.same_except_date(direct.headers, q.response.headers),
           "servd answered ATS (with Via) differently from a direct request without Via:\n"
           "%r\n%r" % (q.response.headers, direct.headers))
    ct.note("ats adds Via to origin requests (%s...); servd's answers identical but Date"
            % sorted(vias))


def t_post_body_keeps_origin_connection(c):
    """A chunked POST that ATS passes to servd does not cost the origin connection."""
    a = ct.TrafficServer(c.o.direct, [AE % 1]).start()
    try:
        ct.check_post_body_keeps_connection(c.o, a, "ats")
    finally:
        a.stop(check=False)


if __name__ == "__main__":
    st.run(st.collect(globals()), setup=Ctx)
