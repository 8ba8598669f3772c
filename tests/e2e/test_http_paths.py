#!/usr/bin/env python3
"""Request-target handling against a real servd (HTTP.md "Paths"): percent-decoding
exactly once, encoded "/", "\\" and NUL, overlong UTF-8 and ".." above the root refused
with 400 (never 200), "/a/../b" == "/b", "/dir" -> 301 "/dir/" keeping the query,
"/dir/" serves dir/index.html, queries do not change the lookup, 404 with the site's
404.html and an exact Content-Length, dotfiles never packed, absolute-form targets, and
--spa (index.html for missing extension-less paths, still 404 for "x.css")."""
import os
import subprocess
import sys
from urllib.parse import unquote, urlsplit

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servdtest as st  # noqa: E402
from servdtest import eq, ok  # noqa: E402


def raw_get(port, target, headers=()):
    """GET with the target sent byte for byte (no client-side normalisation)."""
    return st.exchange(port, st.req("GET", target, headers))


def expect_file(S, target, path, what=None):
    r = raw_get(S.port, target)
    what = what or "GET %s" % target
    eq(r.status, 200, what + ": status")
    eq(r.body, S.fixture.files[path], what + ": body is %s" % path)
    return r


def expect_404(S, target, files=None):
    files = files or S.fixture.files
    r = raw_get(S.port, target)
    eq(r.status, 404, "GET %s: status" % target)
    eq(r.body, files["/404.html"], "GET %s: body is the site's 404.html" % target)
    eq(int(r.need("Content-Length")), len(r.body), "GET %s: 404 Content-Length" % target)
    ok(r.need("Content-Type").startswith("text/html"), "404 Content-Type %r" % r.get("Content-Type"))
    return r


def expect_400(S, target):
    r = raw_get(S.port, target)
    eq(r.status, 400, "GET %r: status" % target)
    eq(int(r.need("Content-Length")), len(r.body), "GET %r: 400 Content-Length" % target)


def t_plain_and_index(S):
    expect_file(S, "/", "/index.html")
    expect_file(S, "/index.html", "/index.html")
    expect_file(S, "/docs/", "/docs/index.html")
    expect_file(S, "/docs/index.html", "/docs/index.html")
    expect_file(S, "/docs/guide.txt", "/docs/guide.txt")
    expect_file(S, "/deep/a/b/c.txt", "/deep/a/b/c.txt")


def t_query_does_not_change_lookup(S):
    expect_file(S, "/index.html?x=1", "/index.html")
    expect_file(S, "/?a=b&c=d", "/index.html")
    expect_file(S, "/?", "/index.html")
    expect_file(S, "/docs/?v=2", "/docs/index.html")
    expect_file(S, "/css/site.css?v=../../etc/passwd", "/css/site.css")
    expect_file(S, "/data/big.txt?%2F%00", "/data/big.txt")
    expect_404(S, "/nope?x=/index.html")


def t_percent_decoding_once(S):
    expect_file(S, "/caf%C3%A9.txt", "/café.txt")
    expect_file(S, "/caf%c3%a9.txt", "/café.txt", "lowercase hex")
    expect_file(S, "/a%20b.txt", "/a b.txt")
    expect_file(S, "/%41.txt", "/A.txt", "/%41.txt decodes to /A.txt")
    expect_file(S, "/%2541.txt", "/%41.txt", "/%2541.txt decodes ONCE to the file named %41.txt")
    expect_file(S, "/d%6fcs/guide.txt", "/docs/guide.txt", "encoded letter in a directory")
    r = raw_get(S.port, "/%252e%252e/index.html")
    eq(r.status, 404, "double-encoded dot-dot decodes once to a literal %2e%2e segment: status")


def t_dot_segments(S):
    expect_file(S, "/docs/../index.html", "/index.html", "/docs/../index.html")
    expect_file(S, "/deep/a/../a/b/c.txt", "/deep/a/b/c.txt")
    expect_file(S, "/deep/./a/./b/c.txt", "/deep/a/b/c.txt")
    expect_file(S, "/deep/a/b/../../a/b/c.txt", "/deep/a/b/c.txt")
    expect_file(S, "/docs/%2e%2e/index.html", "/index.html", "encoded dot-dot inside the root")
    expect_file(S, "/docs/%2E/guide.txt", "/docs/guide.txt", "encoded single dot")
    expect_file(S, "//docs//guide.txt", "/docs/guide.txt", "repeated slashes")
    expect_file(S, "/docs/.", "/docs/index.html", "a final '.' segment names the directory")
    expect_file(S, "/docs/..", "/index.html", "a final '..' segment")
    expect_file(S, "/.", "/index.html", "'/.'")
    expect_file(S, "/docs/guide.txt/..", "/docs/index.html", "'..' after a file name")


def t_reserved_characters_are_not_split(S):
    # An encoded '?' is part of the path, not a query; ';' is not a parameter separator.
    expect_404(S, "/index.html%3Fx=1")
    expect_404(S, "/index.html;x")
    expect_404(S, "/index.html%23frag")


def t_climbing_above_root_is_400(S):
    for t in ("/../index.html", "/..", "/docs/../../index.html", "/%2e%2e/index.html",
              "/%2E%2E/%2E%2E/etc/passwd", "/./../index.html", "/deep/a/../../../../index.html"):
        expect_400(S, t)


def t_encoded_separators_nul_and_overlong_are_400(S):
    for t in ("/docs%2Fguide.txt", "/docs%2fguide.txt", "/%2F", "/docs%5Cguide.txt",
              "/docs%5cguide.txt", "/index.html%00", "/%00", "/index.html%00.txt",
              "/%C0%AE%C0%AE/index.html", "/%C0%AF", "/%E0%80%AF", "/%C1%9C", "/caf%C3.txt",
              "/%ED%A0%80.txt", "/%F4%90%80%80.txt", "/%FF.txt"):
        expect_400(S, t)


def t_bad_percent_escapes_never_200(S):
    for t in ("/%zz", "/index.html%", "/index.html%4", "/%G1.txt"):
        r = raw_get(S.port, t)
        ok(r.status in (400, 404), "GET %r: status %d (want 400)" % (t, r.status))


def t_raw_utf8_target_is_led_to_its_encoding(S):
    """Bytes above 0x7E are not request-target syntax (RFC 9112 3.2: answer 400, or 301
    to the target properly encoded). curl sends a URL's raw UTF-8 query, scripts a raw
    path: servd answers the 301, whose Location serves, and 400 when the bytes are not
    UTF-8 (no encoding of them names a file)."""
    raw = "/caf\u00e9.txt?v=\u00e9".encode("utf-8").decode("latin-1")  # bytes as sent
    r = raw_get(S.port, raw)
    eq((r.status, r.get("Location")), (301, "/caf%C3%A9.txt?v=%C3%A9"), "GET raw UTF-8")
    eq(r.body, b"", "the 301 has no body")
    expect_file(S, r.get("Location"), "/caf\u00e9.txt", "the Location of the 301")
    expect_400(S, "/caf\u00e9.txt")  # Latin-1 \xe9 alone: not UTF-8
    url = "http://127.0.0.1:%d/caf\u00e9.txt?v=\u00e9" % S.port
    p = subprocess.run(["curl", "-sSL", "--http1.1", url], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=30)
    eq((p.returncode, p.stdout), (0, S.fixture.files["/caf\u00e9.txt"]),
       "curl -L of a URL with raw UTF-8 (%s)" % p.stderr.decode())


def t_backslash_and_controls_never_200(S):
    # A raw backslash or DEL in the target is not valid request-target syntax.
    for t in (b"/docs\\guide.txt", b"/index.html\x7f"):
        with st.Conn(S.port) as c:
            c.send(b"GET " + t + b" HTTP/1.1\r\nHost: x\r\n\r\n")
            try:
                r = c.read_response()
            except st.Closed:
                continue
            ok(r.status in (400, 404, 301),
               "raw target %r: status %d (want 400, or 404/301)" % (t, r.status))


def t_directory_redirect_keeps_query(S):
    for target, want in (("/docs", "/docs/"), ("/docs?x=1&y=2", "/docs/?x=1&y=2"),
                         ("/docs?q", "/docs/?q"), ("/d%6fcs?a=%2F", "/docs/?a=%2F")):
        r = raw_get(S.port, target)
        eq(r.status, 301, "GET %s: status" % target)
        loc = r.need("Location")
        u = urlsplit(loc)
        got = unquote(u.path) + ("?" + u.query if u.query or loc.endswith("?") else "")
        eq(got, want, "GET %s: Location %r" % (target, loc))
        eq(int(r.need("Content-Length")), len(r.body), "301 Content-Length")
    # A 301 without Cache-Control is kept by browsers for as long as they like; it
    # is cached like the index page it leads to (HTML: no-cache by default).
    eq(r.get("Cache-Control"), "no-cache", "301 to an HTML index: Cache-Control")
    r = st.get(S.port, "/docs", method="HEAD")
    eq((r.status, r.body), (301, b""), "HEAD /docs")
    # a directory WITHOUT index.html is not redirected: it does not exist as a page
    expect_404(S, "/deep/a")
    expect_404(S, "/deep/a/")


def t_missing_is_404_with_page(S):
    for t in ("/nope", "/nope.html", "/docs/nope/", "/docs/guide.txt/", "/index.html/x",
              "/.hidden", "/img/", "/404"):
        expect_404(S, t)
    # HEAD of a missing path: same Content-Length, no body
    g = expect_404(S, "/nope")
    h = st.get(S.port, "/nope", method="HEAD")
    eq(h.status, 404, "HEAD /nope status")
    eq(h.get("Content-Length"), g.get("Content-Length"), "HEAD /nope Content-Length")
    r = st.get(S.port, "/nope", [("Accept-Encoding", "gzip")])
    eq((r.status, st.content_encoding(r)), (404, "gzip"), "404 page negotiated to gzip")
    eq(st.decode(r.body, "gzip"), S.fixture.files["/404.html"], "gzip 404 decodes to 404.html")


def t_dotfiles_not_packed(S):
    expect_404(S, "/.hidden")
    expect_404(S, "/%2ehidden")


def t_absolute_form_target(S):
    # RFC 9112 §3.2.2: a server MUST accept the absolute-form.
    r = raw_get(S.port, "http://localhost/docs/guide.txt")
    eq(r.status, 200, "absolute-form target: status")
    eq(r.body, S.fixture.files["/docs/guide.txt"], "absolute-form target: body")


def t_asterisk_form_only_for_options(S):
    r = raw_get(S.port, "*")
    ok(r.status == 400, "GET * : status %d (want 400)" % r.status)


def t_relative_target_is_400(S):
    for t in ("index.html", "docs/", "?x=1"):
        expect_400(S, t)


def t_spa_fallback(S):
    with st.Servd(S.fixture.pack, spa=True) as spa:
        for t in ("/app/route", "/some/deep/client/route", "/login", "/users/42?tab=1",
                  "/user/jane.doe", "/blog/v1.2", "/about.html", "/u/a.b.c?x=1",
                  "/.well-knownish/route", "/app/.well-known/x"):
            r = raw_get(spa.port, t)
            eq(r.status, 200, "--spa GET %s: status" % t)
            eq(r.body, S.fixture.files["/index.html"], "--spa GET %s: body is /index.html" % t)
        for t in ("/x.css", "/missing.js", "/img/nope.png", "/data/gone.json", "/f/x.WOFF2",
                  "/Build/game.data", "/wp-login.php",
                  # RFC 8615 names: documents, not routes, whatever their extension
                  "/.well-known/apple-app-site-association", "/.well-known/acme-challenge/t0k3n",
                  "/.well-known/openid-configuration", "/.well-known"):
            r = raw_get(spa.port, t)
            eq(r.status, 404, "--spa GET %s (not a route of the application): status" % t)
            eq(r.body, S.fixture.files["/404.html"], "--spa GET %s: 404 page" % t)
        expect_file_on = raw_get(spa.port, "/docs/guide.txt")
        eq(expect_file_on.body, S.fixture.files["/docs/guide.txt"], "--spa: real files still served")
        r = raw_get(spa.port, "/docs")
        eq(r.status, 301, "--spa: directory redirect still happens")
        r = raw_get(spa.port, "/../x")
        eq(r.status, 400, "--spa: bad paths still 400")
    # without --spa the same path is a 404
    expect_404(S, "/app/route")


def t_www_paths(S):
    if S.www is None:
        raise st.Skip("www/ is not present")
    files = S.www.files
    r = st.get(S.www.port, "/")
    eq((r.status, r.body), (200, files["/index.html"]), "www /")
    for path in files:
        if path.endswith("/index.html") and path != "/index.html":
            d = path[:-len("index.html")]
            r = st.get(S.www.port, st.url(d))
            eq((r.status, r.body), (200, files[path]), "www %s" % d)
            r = st.get(S.www.port, st.url(d[:-1]) + "?k=v")
            eq(r.status, 301, "www %s without slash" % d)
            eq(urlsplit(r.need("Location")).path, d, "www %s Location" % d)
    r = st.get(S.www.port, "/definitely/not/here")
    eq(r.status, 404, "www missing path status")
    if "/404.html" in files:
        eq(r.body, files["/404.html"], "www missing path body is www/404.html")


def t_directory_redirect_is_cached_like_its_page(S):
    root = os.path.join(st.tmpdir(), "redirect-cc")
    os.makedirs(os.path.join(root, "guide"), exist_ok=True)
    with open(os.path.join(root, "guide", "index.html"), "wb") as f:
        f.write(b"<p>guide</p>\n")
    os.makedirs(os.path.join(root, "long"), exist_ok=True)
    with open(os.path.join(root, "long", "index.html"), "wb") as f:
        f.write(b"<p>long</p>\n")
    long_cc = "public, max-age=60, x-pad=" + "p" * 4000  # near the rules' value limit
    rules = os.path.join(st.tmpdir(), "redirect-cc.json")
    with open(rules, "w") as f:
        f.write('{"cache_control": [{"match": "/guide/**", "value": "public, max-age=600"}, '
                '{"match": "/long/**", "value": "%s"}]}' % long_cc)
    with st.Servd(st.pack(root, extra=["--rules", rules])) as s:
        r = raw_get(s.port, "/guide")
        eq((r.status, r.get("Cache-Control")), (301, "public, max-age=600"),
           "301 to /guide/: the Cache-Control of /guide/index.html")
        eq(st.get(s.port, "/guide/").get("Cache-Control"), "public, max-age=600", "the page")
        r = raw_get(s.port, "/long?q=1")
        eq((r.status, r.get("Location"), r.get("Cache-Control")), (301, "/long/?q=1", long_cc),
           "301 with a 4 KB Cache-Control (not a 414)")


if __name__ == "__main__":
    st.run(st.collect(globals()), lambda: st.Sites(workers=1))
