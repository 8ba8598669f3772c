#!/usr/bin/env python3
"""Accept-Encoding negotiation against a real servd (HTTP.md "Accept-Encoding",
"Representations and validators"): q-values, q=0 exclusion, "*", identity;q=0,
case-insensitive tokens, x-gzip not gzip, ties to the smallest body, 406, Vary on every
response of a negotiable file and never on a file without variants, one strong
ETag per encoding, and decoded bodies equal to the original bytes (python gzip,
`brotli -dc`, `zstd -dc`, and curl --compressed as a real client)."""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servdtest as st  # noqa: E402
from servdtest import eq, ok  # noqa: E402

BIG = "/data/big.txt"  # 64 KiB of text: gzip, br and zstd variants are all far smaller
CODINGS = ("gzip", "br", "zstd")


def ae_get(S, path, ae, method="GET"):
    hdrs = [] if ae is None else [("Accept-Encoding", ae)]
    return st.get(S.port, st.url(path), hdrs, method=method)


def sizes(S, path):
    """{coding: (Content-Length, ETag)} asking for each coding alone; identity included."""
    out = {}
    r = ae_get(S, path, None)
    eq(r.status, 200, "GET %s status" % path)
    out["identity"] = (len(r.body), r.need("ETag"))
    for c in CODINGS:
        r = ae_get(S, path, c)
        eq(r.status, 200, "GET %s with Accept-Encoding: %s status" % (path, c))
        ce = st.content_encoding(r) or "identity"
        if ce == c:
            out[c] = (len(r.body), r.need("ETag"))
    return out


def expect(S, path, ae, want_coding, what=None):
    """GET path with ae; checks the chosen coding, that the body decodes to the
    file, exact Content-Length and exactly one Vary."""
    what = what or "GET %s Accept-Encoding: %r" % (path, ae)
    r = ae_get(S, path, ae)
    eq(r.status, 200, what + ": status")
    eq(st.content_encoding(r) or "identity", want_coding, what + ": Content-Encoding")
    eq(int(r.need("Content-Length")), len(r.body), what + ": Content-Length")
    eq(st.decode(r.body, st.content_encoding(r)), S.fixture.files[path], what + ": decoded body")
    st.vary_accept_encoding(r, True, what)
    return r


def smallest(sz, among):
    return min(among, key=lambda c: sz[c][0])


def t_identity_without_accept_encoding(S):
    r = expect(S, BIG, None, "identity")
    eq(r.body, S.fixture.files[BIG], "identity body")
    ok(r.get("Content-Encoding") is None, "no Content-Encoding on identity")


def t_each_coding_alone_decodes_with_own_etag(S):
    sz = sizes(S, BIG)
    eq(sorted(sz), sorted(("identity",) + CODINGS),
       "variants of %s (a 64 KiB text file must get gzip, br and zstd)" % BIG)
    types = set()
    for c in CODINGS:
        r = expect(S, BIG, c, c)
        ok(st.ETAG_STRONG.match(r.need("ETag")), "%s ETag not strong+quoted: %r" % (c, r.get("ETag")))
        ok(len(r.body) < len(S.fixture.files[BIG]), "%s body not smaller than identity" % c)
        types.add(r.need("Content-Type"))
    r = ae_get(S, BIG, None)
    types.add(r.need("Content-Type"))
    eq(len(types), 1, "Content-Type the same on every variant: %s" % types)
    etags = [v[1] for v in sz.values()]
    eq(len(set(etags)), len(etags), "one distinct ETag per encoding: %s" % sz)


def t_ties_go_to_smallest(S):
    sz = sizes(S, BIG)
    best = smallest(sz, CODINGS)
    for ae in ("gzip, br, zstd", "zstd, br, gzip", "br,gzip,zstd", "gzip;q=1, br;q=1.0, zstd;q=1.000"):
        expect(S, BIG, ae, best)
    expect(S, BIG, "*", best)
    # identity at the same q as a coding loses the tie: it is always the largest body
    expect(S, BIG, "identity, gzip", "gzip")
    expect(S, BIG, "identity;q=0.5, br;q=0.5", "br")
    # Two codings at the same q: the smaller of those two, whatever the third.
    for a, b in (("gzip", "br"), ("gzip", "zstd"), ("br", "zstd")):
        expect(S, BIG, "%s;q=0.5, %s;q=0.5" % (a, b), smallest(sz, (a, b)))


def t_highest_q_wins(S):
    for c in CODINGS:
        others = [o for o in CODINGS if o != c]
        ae = "%s;q=0.4, %s;q=0.9, %s;q=0.3" % (others[0], c, others[1])
        expect(S, BIG, ae, c)
    expect(S, BIG, "gzip;q=0.001, br;q=0.002", "br")
    # identity preferred explicitly over everything
    expect(S, BIG, "gzip;q=0.5, br;q=0.5, zstd;q=0.5, identity;q=1", "identity")


def t_q0_excludes(S):
    sz = sizes(S, BIG)
    expect(S, BIG, "gzip;q=0", "identity")
    expect(S, BIG, "gzip;q=0.000", "identity")
    expect(S, BIG, "gzip;q=0, br;q=0, zstd;q=0", "identity")
    expect(S, BIG, "br;q=0, gzip, zstd", smallest(sz, ("gzip", "zstd")))
    expect(S, BIG, "*, gzip;q=0", smallest(sz, ("br", "zstd")))
    expect(S, BIG, "gzip;q=0.001", "gzip")


def t_q_parameter_name_case_insensitive(S):
    # RFC 9110 §12.4.2: "q" is case-insensitive like every ABNF literal.
    expect(S, BIG, "gzip;Q=0", "identity")


def t_tokens_case_insensitive(S):
    expect(S, BIG, "GZIP", "gzip")
    expect(S, BIG, "Br", "br")
    expect(S, BIG, "ZStd", "zstd")
    expect(S, BIG, "IDENTITY;q=0, GZip", "gzip")


def t_x_gzip_is_not_gzip(S):
    """HTTP.md names "x-gzip" among the tokens a substring search mistakes for gzip;
    nginx 1.22 and h2o 2.2 send identity for it (RFC 9110 8.4.1.3 would allow gzip).
    Its weight says nothing of gzip's."""
    expect(S, BIG, "x-gzip", "identity")
    expect(S, BIG, "X-Gzip, br;q=0.5", "br")
    expect(S, BIG, "x-gzip;q=0, gzip", "gzip")


def t_no_substring_match(S):
    for ae in ("gzipx", "notbr", "zstd2", "xbr, agzip", "gzip2;q=1"):
        expect(S, BIG, ae, "identity")


def t_whitespace_around_tokens(S):
    expect(S, BIG, " gzip ; q=0.5 ,br ;q=0.4", "gzip")
    expect(S, BIG, "gzip;q=0.5,\tbr;q=0.6", "br")
    expect(S, BIG, "  zstd  ", "zstd")


def t_empty_list_elements(S):
    # RFC 9110 §5.6.1: a recipient MUST accept (and ignore) empty list elements.
    expect(S, BIG, ",,gzip,,", "gzip")
    expect(S, BIG, " , br ,", "br")


def t_star(S):
    sz = sizes(S, BIG)
    expect(S, BIG, "*", smallest(sz, CODINGS))
    expect(S, BIG, "*;q=0, identity", "identity")
    expect(S, BIG, "identity;q=0, *", smallest(sz, CODINGS))
    expect(S, BIG, "br;q=0.1, *;q=0.5", smallest(sz, ("gzip", "zstd")))


def t_unknown_codings_and_empty_mean_identity(S):
    expect(S, BIG, "compress, deflate", "identity")
    expect(S, BIG, "", "identity")


def t_nothing_acceptable_406(S):
    for ae in ("*;q=0", "identity;q=0", "identity;q=0, compress", "gzip;q=0, identity;q=0"):
        r = ae_get(S, BIG, ae)
        eq(r.status, 406, "Accept-Encoding: %r status" % ae)
        eq(int(r.need("Content-Length")), len(r.body), "406 Content-Length")
        h = ae_get(S, BIG, ae, method="HEAD")
        eq((h.status, h.body, h.need("Content-Length")), (406, b"", r.need("Content-Length")),
           "HEAD with Accept-Encoding %r: the GET's head" % ae)
    # The body lists the codings the file has (RFC 9110 15.5.7), which are exactly
    # those servd sends when asked for each alone.
    lines = r.body.decode().split("\n")
    eq((lines[0], lines[2:]), ("406 Not Acceptable", [""]), "406 body: %r" % r.body)
    ok(lines[1].startswith("Available encodings: "), "406 body: %r" % r.body)
    listed = lines[1][len("Available encodings: "):].split(", ")
    served = ["identity"] + [c for c in ("gzip", "br", "zstd")
                             if st.content_encoding(ae_get(S, BIG, c + ", identity;q=0")) == c]
    eq(listed, served, "the 406's list against the codings served")
    # A file stored in one representation is not negotiated (RFC 9110 §12.1): its
    # 200 has no Vary, so a cache in front gives it to such a client anyway.
    png = S.fixture.files["/img/dot.png"]
    for ae in ("gzip, identity;q=0", "*;q=0"):
        r = ae_get(S, "/img/dot.png", ae)
        eq((r.status, r.body, r.get("Vary"), st.content_encoding(r)), (200, png, None, None),
           "PNG with Accept-Encoding %r" % ae)


def t_multiple_accept_encoding_lines_combine(S):
    # RFC 9110 §5.3: several lines of a list field mean the same as one comma-joined line.
    r = st.get(S.port, BIG, [("Accept-Encoding", "gzip;q=0"), ("Accept-Encoding", "br")])
    eq(st.content_encoding(r), "br", "two Accept-Encoding lines (gzip;q=0 then br)")


def t_png_never_encoded_never_varies(S):
    png = S.fixture.files["/img/dot.png"]
    for ae in (None, "gzip, br, zstd", "*", "gzip"):
        r = ae_get(S, "/img/dot.png", ae)
        what = "PNG Accept-Encoding %r" % ae
        eq(r.status, 200, what + " status")
        eq(r.get("Content-Encoding"), None, what + ": Content-Encoding")
        st.vary_accept_encoding(r, False, what)
        eq(r.need("Content-Type").split(";")[0].strip(), "image/png", what + ": Content-Type")
        eq(r.body, png, what + ": body")


def t_head_matches_get_per_coding(S):
    for ae in (None,) + CODINGS:
        g = ae_get(S, BIG, ae)
        h = ae_get(S, BIG, ae, method="HEAD")
        what = "HEAD vs GET Accept-Encoding %r" % ae
        eq(h.status, 200, what + " status")
        for name in ("Content-Length", "Content-Encoding", "ETag", "Content-Type", "Cache-Control",
                     "Last-Modified"):
            eq(h.get(name), g.get(name), what + ": " + name)
        st.vary_accept_encoding(h, True, what)


def t_404_page_negotiated(S):
    page = S.fixture.files["/404.html"]
    for ae, want in ((None, "identity"), ("gzip", "gzip"), ("br", "br"), ("zstd", "zstd")):
        r = st.get(S.port, "/no/such/page", [] if ae is None else [("Accept-Encoding", ae)])
        what = "404 Accept-Encoding %r" % ae
        eq(r.status, 404, what + " status")
        eq(st.content_encoding(r) or "identity", want, what + ": Content-Encoding")
        eq(st.decode(r.body, st.content_encoding(r)), page, what + ": decoded body is 404.html")
        st.vary_accept_encoding(r, True, what)


def sweep(site, label):
    """Every file of a site, under several Accept-Encoding values: 200, decodes to the
    file, and Vary on all responses exactly when some response is encoded."""
    for path, data in sorted(site.files.items()):
        seen_encoded = False
        resps = []
        for ae in (None, "gzip", "br", "zstd", "gzip, br, zstd", "br, gzip", "*"):
            r = st.get(site.port, st.url(path), [] if ae is None else [("Accept-Encoding", ae)])
            what = "%s %s Accept-Encoding %r" % (label, path, ae)
            eq(r.status, 200, what + ": status")
            ce = st.content_encoding(r)
            if ae is None:
                eq(ce, None, what + ": Content-Encoding")
            elif ce is not None:
                ok(ce in [t.strip() for t in ae.split(",")] or ae == "*",
                   what + ": Content-Encoding %r was not offered" % ce)
                seen_encoded = True
            eq(st.decode(r.body, ce), data, what + ": decoded body")
            resps.append((what, r))
        for what, r in resps:
            st.vary_accept_encoding(r, seen_encoded, what)


def t_sweep_fixture_site(S):
    sweep(S.fixture, "fixture")


def t_sweep_www(S):
    if S.www is None:
        raise st.Skip("www/ is not present")
    sweep(S.www, "www")
    # The sample site's text assets must be offered compressed.
    for path in S.www.files:
        if path.endswith((".html", ".css", ".js")) and len(S.www.files[path]) > 2048:
            r = st.get(S.www.port, st.url(path), [("Accept-Encoding", "gzip")])
            eq(st.content_encoding(r), "gzip", "www %s (>2 KiB text) gzip offered" % path)


def curl(args):
    p = subprocess.run(["curl", "-sS", "--http1.1"] + args, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=60)
    eq(p.returncode, 0, "curl %s exit (stderr %s)" % (" ".join(args), p.stderr.decode()))
    return p.stdout


def t_curl_compressed_is_byte_identical(S):
    for path in (BIG, "/css/site.css", "/index.html", "/img/dot.png"):
        out = os.path.join(st.tmpdir(), "curl.out")
        hdr = curl(["--compressed", "-D", "-", "-o", out, "http://127.0.0.1:%d%s" % (S.port, path)])
        with open(out, "rb") as f:
            body = f.read()
        eq(body, S.fixture.files[path], "curl --compressed %s decoded body" % path)
        if path != "/img/dot.png":
            ok(b"content-encoding:" in hdr.lower(), "curl --compressed %s got no Content-Encoding:"
               " %s" % (path, hdr.decode(errors="replace")))
    for ae in CODINGS:
        out = os.path.join(st.tmpdir(), "curl.out")
        curl(["--compressed", "-H", "Accept-Encoding: " + ae, "-o", out,
              "http://127.0.0.1:%d%s" % (S.port, BIG)])
        with open(out, "rb") as f:
            eq(f.read(), S.fixture.files[BIG], "curl --compressed (%s only) decoded body" % ae)


if __name__ == "__main__":
    st.run(st.collect(globals()), lambda: st.Sites(workers=1))
