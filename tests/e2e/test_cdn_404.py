#!/usr/bin/env python3
"""servd's built-in 404 (a pack without /404.html) behind Varnish. 404 is heuristically
cacheable (RFC 9111 §4.2.2), and Varnish's built-in VCL stores a 404 without Cache-Control
for default_ttl (120 s): after a deploy that added the path, clients would keep getting
the 404 until it expired or was purged. servd sends the built-in 404 with
`Cache-Control: no-cache`, as the site's own 404 page (status:404 in the pack; see
servd-pack(1), RESPONSE HEADERS), which Varnish does not store: the deploy works at once.

Run alone: SERVD_BUILD_DIR=build python3 tests/e2e/test_cdn_404.py"""
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cdntest as ct  # noqa: E402
import servdtest as st  # noqa: E402
from servdtest import eq  # noqa: E402


def site(name, files):
    return st.pack(st.write_tree(os.path.join(st.tmpdir(), name), files), name + ".lmdb")


def deploy_adds_path(with_404_page):
    """Through Varnish: GET /later.txt (404), deploy a pack that has it, GET again."""
    base = {"/index.html": b"<p>home</p>\n"}
    if with_404_page:
        base["/404.html"] = b"<p>our own 404 page</p>\n"
    tag = "page" if with_404_page else "builtin"
    p1 = site("v1-" + tag, base)
    p2 = site("v2-" + tag, dict(base, **{"/later.txt": b"added by the deploy\n"}))
    live = os.path.join(st.tmpdir(), "live-%s.lmdb" % tag)
    with open(p1, "rb") as src, open(live + ".new", "wb") as dst:
        dst.write(src.read())
    os.replace(live + ".new", live)
    with st.Servd(live) as s, ct.Varnish(s.port) as v:
        r = ct.fetch(v.port, "/later.txt")
        eq(r.status, 404, "%s: before the deploy" % tag)
        direct = st.get(s.port, "/later.txt")
        with open(p2, "rb") as src, open(live + ".new", "wb") as dst:
            dst.write(src.read())
        os.replace(live + ".new", live)
        s.proc.send_signal(signal.SIGHUP)
        deadline = time.time() + 5
        while st.get(s.port, "/later.txt").status != 200 and time.time() < deadline:
            time.sleep(0.05)
        eq(st.get(s.port, "/later.txt").status, 200, "%s: servd after the swap" % tag)
        r = ct.fetch(v.port, "/later.txt")
        eq((r.status, r.body), (200, b"added by the deploy\n"),
           "%s: through Varnish right after the deploy (the 404 servd sent before had "
           "Cache-Control %r; Varnish answered with Age %s)" % (
               tag, direct.get("Cache-Control"), r.get("Age")))


def t_site_404_page_is_not_cached():
    deploy_adds_path(with_404_page=True)


def t_builtin_404_is_not_cached():
    deploy_adds_path(with_404_page=False)


if __name__ == "__main__":
    st.run(st.collect(globals()))
