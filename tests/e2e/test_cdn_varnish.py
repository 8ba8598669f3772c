#!/usr/bin/env python3
"""servd behind a real Varnish (Debian's varnishd), started by this test on 127.0.0.1.

Two Varnish instances share one servd (through a relay that records what reaches the
origin and what servd answered):
  vd  Varnish as shipped (http_gzip_support on): it normalises Accept-Encoding to "gzip"
      or nothing, always asks the origin for gzip, stores the gzip object once and gunzips
      it for clients that do not accept gzip (weakening the ETag to W/"...");
  vr  the same with http_gzip_support off: Accept-Encoding goes to the origin as the client
      sent it, and Vary: Accept-Encoding makes each value its own cached object;
  vn  gzip support off plus the VCL normalisation docs/cdn.md recommends (br, else gzip,
      else nothing): three objects per URL, whatever the spelling.
What is checked: each encoding variant cached separately through Vary (and what the
normalisation does instead); revalidation of a stale object reaches servd as If-None-Match
with that variant's ETag and is answered 304 with the 200's validators while the client
still gets the whole body; Range through the cache is byte-exact on the identity, gzip and
br representations, from the cache and passed through to servd; a Via header never changes
what servd sends. Figures are printed as NOTE lines. docs/cdn.md describes the behaviour."""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cdntest as ct  # noqa: E402
import servdtest as st  # noqa: E402
from servdtest import eq, ok  # noqa: E402


class Ctx:
    def __init__(self):
        self.o = ct.Origin("varnish")
        self.vd = None
        self.vr = None
        self.vn = None

    def __enter__(self):
        self.o.__enter__()
        try:
            self.vd = ct.Varnish(self.o.port).start()
            self.vr = ct.Varnish(self.o.port, ["http_gzip_support=off"]).start()
            self.vn = ct.Varnish(self.o.port, ["http_gzip_support=off"],
                                 recv=ct.NORMALISE_AE).start()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, et, ev, tb):
        for v in (self.vn, self.vr, self.vd):
            if v:
                v.stop(check=False)
        self.o.__exit__(et, ev, tb)
        return False


def t_default_normalises_to_one_gzip_object(c):
    """Shipped Varnish: one origin fetch (gzip) serves every client; gzip clients get the
    stored gzip bytes with servd's strong ETag, the others the identity bytes, gunzipped by
    Varnish, with the gzip ETag weakened."""
    path = "/vary/1.txt"
    v = c.o.variants(path)
    clients = ["gzip", "br", None, "gzip, deflate, br", "zstd", "br;q=1, gzip;q=0.5",
               "gzip", "br", None]
    for a in clients:
        r = ct.fetch(c.vd.port, path, ct.ae(a))
        what = "varnish (default) AE=%r" % a
        if a is not None and "gzip" in a:
            ct.expect_full(r, v, "gzip", what)
        else:
            ct.expect_full(r, v, "identity", what, etag="W/" + v.etag("gzip"))
        st.vary_accept_encoding(r, True, what)
    reqs = c.o.requests_for(path)
    eq([(q.get("Accept-Encoding"), q.response.status, q.response.get("Content-Encoding"))
        for q in reqs], [("gzip", 200, "gzip")], "origin requests for %s" % path)
    eq([(e.status, e.encoding) for e in c.o.log_for(path)], [(200, "gzip")],
       "servd access log for %s" % path)
    ct.note("varnish default: %d client requests (AE gzip/br/none/zstd/...), %d origin request "
            "(Accept-Encoding: gzip), clients without gzip get gunzipped bytes and ETag W/%s"
            % (len(clients), len(reqs), v.etag("gzip")))


def t_vary_caches_each_variant(c):
    """http_gzip_support off: gzip, br and no Accept-Encoding are three cached objects,
    each fetched once, each with its own bytes and strong ETag."""
    path = "/vary/2.txt"
    v = c.o.variants(path)
    want = [("gzip", "gzip"), ("br", "br"), (None, "identity")]
    for rnd in (1, 2, 3):
        for a, coding in want:
            r = ct.fetch(c.vr.port, path, ct.ae(a))
            what = "varnish (gzip off) round %d AE=%r" % (rnd, a)
            ct.expect_full(r, v, coding, what)
            st.vary_accept_encoding(r, True, what)
            if rnd > 1:
                ok(r.get("Age") is not None, what + ": no Age header on a cache hit")
    reqs = c.o.requests_for(path)
    eq([(q.get("Accept-Encoding"), q.response.status, q.response.get("ETag")) for q in reqs],
       [("gzip", 200, v.etag("gzip")), ("br", 200, v.etag("br")),
        (None, 200, v.etag("identity"))], "origin requests for %s" % path)
    eq([(e.status, e.encoding) for e in c.o.log_for(path)],
       [(200, "gzip"), (200, "br"), (200, "identity")], "servd access log for %s" % path)
    # Vary works on the header's value as sent: another spelling is another object.
    r = ct.fetch(c.vr.port, path, ct.ae("gzip, br"))
    ct.expect_full(r, v, "br", "varnish (gzip off) AE='gzip, br'")
    eq(len(c.o.requests_for(path)), 4, "origin requests after a 4th Accept-Encoding value")
    ct.note("varnish gzip off: 9 client requests over 3 Accept-Encoding values -> 3 origin "
            "requests (gzip %d B, br %d B, identity %d B), then 0; a new spelling ('gzip, br') "
            "is a 4th object" % (len(v.body("gzip")), len(v.body("br")),
                                  len(v.body("identity"))))


def t_vcl_normalised_br_gzip_identity(c):
    """gzip off + NORMALISE_AE: browsers' many spellings collapse to br, gzip or nothing;
    three origin fetches per URL, servd's bytes and strong ETags for every client."""
    path = "/vary/5.txt"
    v = c.o.variants(path)
    clients = [("gzip, deflate, br, zstd", "br"), ("br", "br"), ("gzip, deflate", "gzip"),
               ("deflate", "identity"), ("br;q=0, gzip", "gzip"), (None, "identity"),
               ("GZIP", "gzip"), ("gzip, br", "br"), ("identity", "identity")]
    for rnd in (1, 2):
        for a, coding in clients:
            ct.expect_full(ct.fetch(c.vn.port, path, ct.ae(a)), v, coding,
                           "varnish (normalised) round %d AE=%r" % (rnd, a))
    reqs = c.o.requests_for(path)
    eq([(q.get("Accept-Encoding"), q.response.status, q.response.get("ETag")) for q in reqs],
       [("br", 200, v.etag("br")), ("gzip", 200, v.etag("gzip")),
        (None, 200, v.etag("identity"))], "origin requests for %s" % path)
    ct.note("varnish gzip off + VCL normalisation: %d client requests in %d spellings -> 3 "
            "origin requests (br, gzip, identity)" % (2 * len(clients), len(clients)))


def t_stale_revalidates_with_if_none_match(c):
    """Default Varnish: the stale gzip object is revalidated with the gzip ETag; servd
    answers 304; gzip and identity clients keep getting the full body."""
    path = "/stale/1.json"
    v = c.o.variants(path)
    reqs = ct.revalidate(c.o, c.vd, path, [("gzip", "gzip", v.etag("gzip")),
                                      (None, "identity", "W/" + v.etag("gzip"))],
                      "varnish (default)", objects=1)
    # Both clients share the one gzip object: one fetch, then one 304 per staleness.
    eq(reqs[0].get("Accept-Encoding"), "gzip", "the one origin fetch asks for gzip")
    ct.note("varnish default revalidation: origin saw %s" % [
        (q.get("If-None-Match"), q.response.status) for q in reqs])


def t_stale_revalidates_each_variant(c):
    """gzip off: the gzip and br objects are revalidated separately, each with its own
    ETag, and servd compares each with the variant it would select (304 for both)."""
    path = "/stale/2.json"
    v = c.o.variants(path)
    reqs = ct.revalidate(c.o, c.vr, path, [("gzip", "gzip", v.etag("gzip")),
                                      ("br", "br", v.etag("br")),
                                      (None, "identity", v.etag("identity"))],
                      "varnish (gzip off)")
    ct.note("varnish gzip off revalidation: origin saw %s" % [
        (q.get("Accept-Encoding"), q.get("If-None-Match"), q.response.status) for q in reqs])


def t_html_revalidation(c):
    """HTML: servd's default no-cache is not stored by Varnish's built-in VCL (every request
    is a full fetch); with s-maxage (the rules in /page/**) Varnish stores the page and
    revalidates it with 304s."""
    path = "/index.html"
    v = c.o.variants(path)
    for _ in range(3):
        ct.expect_full(ct.fetch(c.vd.port, path, ct.ae("gzip")), v, "gzip", "no-cache page")
    log = c.o.log_for(path)
    eq([(e.status, e.encoding) for e in log], [(200, "gzip")] * 3,
       "servd access log for a no-cache page behind Varnish (the built-in VCL does not "
       "store no-cache responses)")
    page = "/page/1.html"
    reqs = ct.revalidate(c.o, c.vd, page, [("gzip", "gzip", c.o.variants(page).etag("gzip"))],
                      "varnish (default) s-maxage page")
    ct.note("varnish HTML: Cache-Control no-cache -> every request fetched in full (%d of 3); "
            "max-age=0, s-maxage=1, must-revalidate -> %s" % (
                len(log), [q.response.status for q in reqs]))


def t_range_from_cache_default(c):
    """Default Varnish fetches the whole object for a Range miss and cuts ranges itself:
    from the gzip bytes for gzip clients, from the gunzipped bytes for the others."""
    path = "/range/1.txt"
    v = c.o.variants(path)
    glen = len(v.body("gzip"))
    ilen = len(v.body("identity"))
    cases = [("gzip", "bytes=100-199", "gzip", 100, 199),  # the miss
             (None, "bytes=100-199", "identity", 100, 199),
             ("br", "bytes=-20", "identity", ilen - 20, ilen - 1),
             ("gzip", "bytes=%d-" % (glen - 50), "gzip", glen - 50, glen - 1),
             (None, "bytes=0-0", "identity", 0, 0),
             ("gzip", "bytes=0-%d" % (glen + 1000), "gzip", 0, glen - 1)]
    for i, (a, rng, coding, first, last) in enumerate(cases):
        r = ct.fetch(c.vd.port, path, ct.ae(a) + [("Range", rng)])
        ct.expect_part(r, v, coding, first, last, "varnish (default) AE=%r Range %s" % (a, rng))
        if i == 0:
            # The miss may still be streaming into the cache; while it is, Varnish
            # answers a range it must gunzip with a 200. Read the whole object once
            # so that the next cases meet a complete object.
            ct.expect_full(ct.fetch(c.vd.port, path, ct.ae("gzip")), v, "gzip", "after the miss")
            time.sleep(0.2)
    # If-Range: the gzip ETag matches the stored object; the identity ETag does not.
    r = ct.fetch(c.vd.port, path, ct.ae("gzip") + [("Range", "bytes=5-9"),
                                                     ("If-Range", v.etag("gzip"))])
    ct.expect_part(r, v, "gzip", 5, 9, "If-Range with the gzip ETag")
    r = ct.fetch(c.vd.port, path, ct.ae("gzip") + [("Range", "bytes=5-9"),
                                                     ("If-Range", v.etag("identity"))])
    ct.expect_full(r, v, "gzip", "If-Range with another variant's ETag")
    # Several ranges: Varnish 7.1 does not do multipart; whatever it answers, the bytes
    # must be right.
    r = ct.fetch(c.vd.port, path, ct.ae("gzip") + [("Range", "bytes=0-9,50-59")])
    if r.status == 416:
        eq(r.get("Content-Range"), "bytes */%d" % glen, "Varnish's 416 for two ranges")
        multi = "416 (Varnish does not serve multipart/byteranges)"
    elif r.status == 200:
        ct.expect_full(r, v, "gzip", "two ranges answered in full")
        multi = "200 full"
    else:
        eq(r.status, 206, "two ranges")
        eq(ct.multipart_parts(r), [("bytes 0-9/%d" % glen, v.body("gzip")[0:10]),
                                   ("bytes 50-59/%d" % glen, v.body("gzip")[50:60])],
           "multipart parts")
        multi = "206 multipart"
    reqs = c.o.requests_for(path)
    eq([(q.get("Range"), q.get("Accept-Encoding"), q.response.status) for q in reqs],
       [(None, "gzip", 200)], "origin requests for %s (Varnish strips Range on a miss)" % path)
    ct.note("varnish default Range: %d range requests, 1 origin fetch (200 gzip, %d B, no "
            "Range); ranges cut from gzip (%d B) or gunzipped identity (%d B) bytes; two "
            "ranges -> %s" % (len(cases) + 3, glen, glen, ilen, multi))


def t_range_from_cache_br(c):
    """gzip off: a br client's range is cut from the cached br bytes."""
    path = "/range/2.txt"
    v = c.o.variants(path)
    blen = len(v.body("br"))
    for a, coding in (("br", "br"), ("gzip", "gzip"), (None, "identity")):
        n = len(v.body(coding))
        for rng, first, last in (("bytes=0-99", 0, 99), ("bytes=-7", n - 7, n - 1),
                                 ("bytes=1000-", 1000, n - 1)):
            r = ct.fetch(c.vr.port, path, ct.ae(a) + [("Range", rng)])
            ct.expect_part(r, v, coding, first, last, "varnish (gzip off) AE=%r %s" % (a, rng))
    eq(sorted((q.get("Accept-Encoding") or "", q.get("Range"), q.response.status)
              for q in c.o.requests_for(path)),
       [("", None, 200), ("br", None, 200), ("gzip", None, 200)],
       "origin requests for %s: one full fetch per variant" % path)
    ct.note("varnish gzip off Range: br ranges cut from the %d B br object" % blen)


def t_range_passed_to_servd(c):
    """A pass (the test VCL passes '?pass') forwards Range to servd; servd's 206 comes back
    through Varnish byte-exact, for each representation."""
    path = "/range/3.txt"
    v = c.o.variants(path)
    for cache, a, coding in ((c.vd, "gzip", "gzip"), (c.vd, "br", "br"),
                             (c.vd, None, "identity"), (c.vr, "br", "br")):
        r = ct.fetch(cache.port, path + "?pass", ct.ae(a) + [("Range", "bytes=300-1299")])
        ct.expect_part(r, v, coding, 300, 1299, "pass AE=%r" % a)
    reqs = c.o.requests_for(path)
    eq([(q.get("Accept-Encoding"), q.get("Range"), q.response.status,
         q.response.get("Content-Encoding")) for q in reqs],
       [("gzip", "bytes=300-1299", 206, "gzip"), ("br", "bytes=300-1299", 206, "br"),
        (None, "bytes=300-1299", 206, None), ("br", "bytes=300-1299", 206, "br")],
       "origin requests for the passed ranges")
    ct.note("varnish pass: Range and the client's Accept-Encoding reach servd unchanged; "
            "servd's 206 (gzip/br/identity) arrives byte-exact")


def t_range_no_variants(c):
    """A file stored once (incompressible) has no Vary and no Content-Encoding; its ranges
    are identity bytes whatever the client accepts."""
    path = "/blob.bin"
    v = c.o.variants(path)
    eq(sorted(v.enc), ["identity"], "variants of an incompressible file")
    for a in ("gzip", "br", None):
        r = ct.fetch(c.vd.port, path, ct.ae(a) + [("Range", "bytes=39990-")])
        ct.expect_part(r, v, "identity", 39990, 39999, "blob AE=%r" % a)
        st.vary_accept_encoding(r, False, "blob AE=%r" % a)
    eq(len(c.o.requests_for(path)), 1, "origin requests for a file without variants")


def t_via_never_changes_servd(c):
    """servd answers exactly the same (but for Date) with and without Via, and Varnish
    itself sends no Via to the origin (7.1)."""
    for path in ("/vary/3.txt", "/blob.bin", "/index.html", "/missing"):
        for coding in ("gzip", "br", None):
            ct.check_via_ignored(c.o, path, coding)
    v = c.o.variants("/vary/3.txt")
    for a, etag in (("gzip", v.etag("gzip")), (None, v.etag("identity"))):
        hdrs = ct.ae(a) + [("If-None-Match", etag)]
        r0 = st.get(c.o.direct, "/vary/3.txt", hdrs)
        r1 = st.get(c.o.direct, "/vary/3.txt", hdrs + [("Via", "1.1 varnish (Varnish/7.1)")])
        eq((r0.status, r1.status), (304, 304), "If-None-Match with and without Via")
        ok(ct.same_except_date(r0.headers, r1.headers), "304 headers differ with Via")
    # A client's Via goes through Varnish to servd and changes nothing there.
    r0 = ct.fetch(c.vd.port, "/vary/4.txt?pass", ct.ae("gzip"))
    r1 = ct.fetch(c.vd.port, "/vary/4.txt?pass", ct.ae("gzip") + [("Via", "1.1 upstream")])
    q0, q1 = c.o.requests_for("/vary/4.txt")
    eq((q0.get("Via"), q1.get("Via")), (None, "1.1 upstream"), "Via as it reached the origin")
    ok(ct.same_except_date(q0.response.headers, q1.response.headers),
       "servd answered Varnish differently with Via: %r vs %r" % (q0.response, q1.response))
    eq(r0.body, r1.body, "bodies with and without Via")


def t_post_body_keeps_origin_connection(c):
    """A chunked POST that Varnish passes to servd does not cost the origin connection."""
    v = ct.Varnish(c.o.direct).start()
    try:
        ct.check_post_body_keeps_connection(c.o, v, "varnish")
    finally:
        v.stop(check=False)


if __name__ == "__main__":
    st.run(st.collect(globals()), setup=Ctx)
