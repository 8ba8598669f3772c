#!/usr/bin/env python3
"""Conditional requests against a real servd, in RFC 9110 §13.2.2 order (HTTP.md
"Conditional requests"): If-Match (strong, 412) -> If-Unmodified-Since (only without
If-Match) -> If-None-Match (weak, lists, "*", 304) -> If-Modified-Since (only without
If-None-Match). If-None-Match is compared with the ETag of the variant that WOULD be
selected for the request's Accept-Encoding. A 304 carries ETag, Vary, Cache-Control,
Last-Modified and Date, and no body; a 412 of a negotiable file carries Vary."""
import hashlib
import os
import re
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servdtest as st  # noqa: E402
from servdtest import eq, ok  # noqa: E402

BIG = "/data/big.txt"
HTML = "/index.html"
PNG = "/img/dot.png"
DAY = 86400


def base(S, path, ae=None):
    r = st.get(S.port, path, [] if ae is None else [("Accept-Encoding", ae)])
    eq(r.status, 200, "GET %s (%r) status" % (path, ae))
    return r


def cond(S, path, headers, method="GET"):
    """Sends the request, then a pipelined GET /tiny.txt on the same connection: a 304
    or HEAD that leaked a body would corrupt the second response."""
    with st.Conn(S.port) as c:
        c.send(st.req(method, path, headers) + st.req("GET", "/tiny.txt"))
        r = c.read_response(method)
        r2 = c.read_response("GET")
        eq((r2.status, r2.body), (200, S.fixture.files["/tiny.txt"]),
           "pipelined request after %s %s %s (did a body leak?)" % (method, path, headers))
        return r


def check_304(S, r, full, what, negotiable=True):
    eq(r.status, 304, what + ": status")
    eq(r.body, b"", what + ": body")
    for name in ("ETag", "Cache-Control", "Last-Modified", "Expires", "Content-Location"):
        eq(r.get(name), full.get(name), what + ": %s same as on the 200" % name)
    st.http_date(r.get("Date"), what + ": Date")
    st.vary_accept_encoding(r, negotiable, what)
    cl = r.get("Content-Length")
    if cl is not None:  # RFC 9110 §8.6: only the length the 200 would have had
        eq(cl, full.get("Content-Length"), what + ": Content-Length on 304")


def check_412(r, what, negotiable=True, head=False):
    eq(r.status, 412, what + ": status")
    if not head:  # (a HEAD's body is absent; cond() checked that none leaked)
        eq(int(r.need("Content-Length")), len(r.body), what + ": Content-Length")
    st.vary_accept_encoding(r, negotiable, what)


def t_if_none_match_identity(S):
    full = base(S, BIG)
    et = full.need("ETag")
    check_304(S, cond(S, BIG, [("If-None-Match", et)]), full, "INM identity ETag")
    check_304(S, cond(S, BIG, [("If-None-Match", et)], "HEAD"), full, "HEAD INM identity ETag")
    r = cond(S, BIG, [("If-None-Match", '"not-it"')])
    eq(r.status, 200, "INM with another ETag: status")
    eq(r.body, S.fixture.files[BIG], "INM with another ETag: body")


def t_if_none_match_weak_list_star(S):
    full = base(S, BIG)
    et = full.need("ETag")
    check_304(S, cond(S, BIG, [("If-None-Match", "W/" + et)]), full, "INM weak form (W/)")
    check_304(S, cond(S, BIG, [("If-None-Match", '"a", "b",' + et + ', "c"')]), full, "INM list")
    check_304(S, cond(S, BIG, [("If-None-Match", '"a",' + et)]), full, "INM list without space")
    check_304(S, cond(S, BIG, [("If-None-Match", "*")]), full, "INM *")


def t_if_none_match_several_lines(S):
    full = base(S, BIG)
    r = cond(S, BIG, [("If-None-Match", '"nope"'), ("If-None-Match", full.need("ETag"))])
    check_304(S, r, full, "INM on two lines")


def t_if_none_match_uses_selected_variant(S):
    ident = base(S, BIG)
    gz = base(S, BIG, "gzip")
    eq(st.content_encoding(gz), "gzip", "gzip variant exists")
    ok(ident.need("ETag") != gz.need("ETag"), "identity and gzip ETags differ")
    # identity ETag, but gzip would be selected: no match, full gzip 200
    r = cond(S, BIG, [("Accept-Encoding", "gzip"), ("If-None-Match", ident.need("ETag"))])
    eq(r.status, 200, "INM identity ETag with Accept-Encoding gzip: status")
    eq(st.content_encoding(r), "gzip", "INM identity ETag with gzip: Content-Encoding")
    # gzip ETag with gzip selected: 304 carrying the gzip ETag
    r = cond(S, BIG, [("Accept-Encoding", "gzip"), ("If-None-Match", gz.need("ETag"))])
    check_304(S, r, gz, "INM gzip ETag with Accept-Encoding gzip")
    # gzip ETag without Accept-Encoding (identity selected): 200 identity
    r = cond(S, BIG, [("If-None-Match", gz.need("ETag"))])
    eq(r.status, 200, "INM gzip ETag without Accept-Encoding: status")
    eq(r.get("Content-Encoding"), None, "INM gzip ETag without Accept-Encoding: Content-Encoding")
    # each coding's own ETag revalidates it
    for c in ("br", "zstd"):
        full = base(S, BIG, c)
        eq(st.content_encoding(full), c, "%s variant exists" % c)
        check_304(S, cond(S, BIG, [("Accept-Encoding", c), ("If-None-Match", full.need("ETag"))]),
                  full, "INM %s ETag with Accept-Encoding %s" % (c, c))
    # a list holding every variant's ETag matches whatever is selected
    allt = ", ".join(base(S, BIG, c).need("ETag") for c in ("identity", "gzip", "br", "zstd"))
    check_304(S, cond(S, BIG, [("Accept-Encoding", "br"), ("If-None-Match", allt)]),
              base(S, BIG, "br"), "INM list of all variant ETags")


def t_if_modified_since(S):
    full = base(S, BIG)
    lm = st.http_date(full.need("Last-Modified"), "Last-Modified")
    check_304(S, cond(S, BIG, [("If-Modified-Since", st.fmt_date(lm))]), full, "IMS == LM")
    check_304(S, cond(S, BIG, [("If-Modified-Since", st.fmt_date(lm + DAY))]), full, "IMS > LM")
    r = cond(S, BIG, [("If-Modified-Since", st.fmt_date(lm - DAY))])
    eq(r.status, 200, "IMS a day before LM: status")
    eq(r.body, S.fixture.files[BIG], "IMS a day before LM: body")
    r = cond(S, BIG, [("If-Modified-Since", "not a date")])
    eq(r.status, 200, "IMS invalid date (ignored): status")


def t_if_modified_since_obsolete_date_forms(S):
    # RFC 9110 §5.6.7: recipients MUST accept RFC 850 and asctime dates too.
    import time
    full = base(S, BIG)
    lm = st.http_date(full.need("Last-Modified"), "Last-Modified") + DAY
    tm = time.gmtime(lm)
    rfc850 = time.strftime("%A, %d-%b-%y %H:%M:%S GMT", tm)
    asctime = time.strftime("%a %b ", tm) + ("%2d" % tm.tm_mday) + time.strftime(" %H:%M:%S %Y", tm)
    check_304(S, cond(S, BIG, [("If-Modified-Since", rfc850)]), full, "IMS RFC 850 %r" % rfc850)
    check_304(S, cond(S, BIG, [("If-Modified-Since", asctime)]), full, "IMS asctime %r" % asctime)


def t_rfc850_date_more_than_50_years_ahead_is_past(S):
    # RFC 9110 §5.6.7: an rfc850 timestamp that "appears to be more than 50 years in the
    # future" is in the most recent past year with its two digits. 31 December of the year
    # 50 years from now, at 23:59:59, is always more than 50 years ahead, though its year is
    # only 50 ahead: it is 100 years earlier, before the file's date, so no 304.
    import calendar
    full = base(S, BIG)
    y = time.gmtime().tm_year - 50
    tm = time.gmtime(calendar.timegm((y, 12, 31, 23, 59, 59, 0, 0, 0)))
    rfc850 = time.strftime("%A, %d-%b-%y %H:%M:%S GMT", tm)
    r = cond(S, BIG, [("If-Modified-Since", rfc850)])
    eq((r.status, r.body), (200, S.fixture.files[BIG]), "IMS %r (year %d)" % (rfc850, y))


def t_if_none_match_overrides_if_modified_since(S):
    full = base(S, BIG)
    lm = st.http_date(full.need("Last-Modified"), "Last-Modified")
    r = cond(S, BIG, [("If-None-Match", '"other"'), ("If-Modified-Since", st.fmt_date(lm + DAY))])
    eq(r.status, 200, "INM no match + IMS that would match: IMS ignored, status")
    r = cond(S, BIG, [("If-None-Match", full.need("ETag")),
                      ("If-Modified-Since", st.fmt_date(lm - DAY))])
    check_304(S, r, full, "INM match + IMS that would not match")


def t_if_match(S):
    full = base(S, BIG)
    et = full.need("ETag")
    r = cond(S, BIG, [("If-Match", et)])
    eq((r.status, r.body), (200, S.fixture.files[BIG]), "If-Match current ETag")
    r = cond(S, BIG, [("If-Match", '"x", ' + et)])
    eq(r.status, 200, "If-Match list containing the ETag: status")
    eq(cond(S, BIG, [("If-Match", "*")]).status, 200, "If-Match *: status")
    check_412(cond(S, BIG, [("If-Match", '"nope"')]), "If-Match other ETag")
    check_412(cond(S, BIG, [("If-Match", "W/" + et)]), "If-Match weak (strong comparison)")
    get412 = cond(S, BIG, [("If-Match", '"nope"')])
    head412 = cond(S, BIG, [("If-Match", '"nope"')], "HEAD")
    check_412(head412, "HEAD If-Match other ETag", head=True)
    eq(head412.get("Content-Length"), get412.get("Content-Length"), "HEAD 412 Content-Length")


def t_if_match_uses_selected_variant(S):
    ident = base(S, BIG)
    gz = base(S, BIG, "gzip")
    r = cond(S, BIG, [("Accept-Encoding", "gzip"), ("If-Match", gz.need("ETag"))])
    eq((r.status, st.content_encoding(r)), (200, "gzip"), "If-Match gzip ETag, gzip selected")
    check_412(cond(S, BIG, [("Accept-Encoding", "gzip"), ("If-Match", ident.need("ETag"))]),
              "If-Match identity ETag, gzip selected")


def t_if_unmodified_since(S):
    full = base(S, BIG)
    lm = st.http_date(full.need("Last-Modified"), "Last-Modified")
    eq(cond(S, BIG, [("If-Unmodified-Since", st.fmt_date(lm))]).status, 200, "IUS == LM")
    eq(cond(S, BIG, [("If-Unmodified-Since", st.fmt_date(lm + DAY))]).status, 200, "IUS > LM")
    check_412(cond(S, BIG, [("If-Unmodified-Since", st.fmt_date(lm - DAY))]), "IUS < LM")
    eq(cond(S, BIG, [("If-Unmodified-Since", "garbage")]).status, 200, "IUS invalid (ignored)")


def t_order_if_match_before_everything(S):
    full = base(S, BIG)
    et = full.need("ETag")
    lm = st.http_date(full.need("Last-Modified"), "Last-Modified")
    # If-Match passes: If-Unmodified-Since (failing) is not evaluated
    r = cond(S, BIG, [("If-Match", et), ("If-Unmodified-Since", st.fmt_date(lm - DAY))])
    eq(r.status, 200, "If-Match ok + IUS failing: status")
    # If-Match fails: 412 even though If-None-Match would give 304
    check_412(cond(S, BIG, [("If-Match", '"nope"'), ("If-None-Match", et)]),
              "If-Match failing + INM matching")
    # IUS fails (no If-Match): 412 before If-None-Match
    check_412(cond(S, BIG, [("If-Unmodified-Since", st.fmt_date(lm - DAY)),
                            ("If-None-Match", et)]), "IUS failing + INM matching")
    # If-Match passes, If-None-Match matches: 304
    check_304(S, cond(S, BIG, [("If-Match", et), ("If-None-Match", et)]), full,
              "If-Match ok + INM matching")


def t_options_ignores_preconditions(S):
    """OPTIONS selects no representation, so it ignores every conditional header field
    (RFC 9110 §13.2.1: a server MUST ignore them with "a request method that does not
    involve the selection or modification of a selected representation, such as CONNECT,
    OPTIONS, or TRACE"): the 200 with Allow and no body, whatever they say."""
    full = base(S, BIG)
    et = full.need("ETag")
    lm = st.http_date(full.need("Last-Modified"), "Last-Modified")
    for h in ([("If-None-Match", et)], [("If-None-Match", "*")], [("If-None-Match", '"nope"')],
              [("If-Match", '"nope"')], [("If-Match", et)],
              [("If-Unmodified-Since", st.fmt_date(lm - DAY))],
              [("If-Modified-Since", st.fmt_date(lm + DAY))],
              [("Accept-Encoding", "identity;q=0, *;q=0"), ("If-Match", '"nope"')]):
        r = cond(S, BIG, h, "OPTIONS")
        eq((r.status, r.body, r.get("Content-Length")), (200, b"", "0"), "OPTIONS %s" % h)
        ok(r.get("Allow") is not None, "OPTIONS %s: Allow (%s)" % (h, r.dump()))
    eq(cond(S, BIG, [("If-Match", '"nope"')]).status, 412, "GET with the same If-Match")


def t_304_and_206_keep_expires_and_content_location(S):
    """RFC 9110 §15.4.5: a 304 MUST carry the Content-Location, Date, ETag, Vary,
    Cache-Control and Expires a 200 would; §15.3.7: so MUST a 206, single or multipart.
    Expires and Content-Location come only from a rules file: a cache that freshens its
    copy from a 304 without them keeps a stale Expires (RFC 9111 §4.3.4)."""
    data = b"".join(b"line %05d of a text long enough for gzip\n" % i for i in range(200))
    root = st.write_tree(os.path.join(st.tmpdir(), "expires-cl"), {"/doc.txt": data})
    rules = os.path.join(st.tmpdir(), "expires-cl.json")
    with open(rules, "w") as f:
        f.write('{"headers": [{"match": "/doc.txt", "name": "Expires", '
                '"value": "Thu, 01 Jan 2037 00:00:00 GMT"}, {"match": "/doc.txt", '
                '"name": "Content-Location", "value": "/doc.txt"}]}')
    want = ("Thu, 01 Jan 2037 00:00:00 GMT", "/doc.txt")
    with st.Servd(st.pack(root, extra=["--rules", rules])) as s:
        for ae in ("identity", "gzip"):
            full = st.get(s.port, "/doc.txt", [("Accept-Encoding", ae)])
            eq((full.status, full.get("Expires"), full.get("Content-Location")), (200,) + want,
               "%s: the 200" % ae)
            r = st.get(s.port, "/doc.txt", [("Accept-Encoding", ae),
                                            ("If-None-Match", full.need("ETag"))])
            eq((r.status, r.get("Expires"), r.get("Content-Location"), r.get("ETag"),
                r.get("Cache-Control")),
               (304,) + want + (full.get("ETag"), full.get("Cache-Control")), "%s: the 304" % ae)
            st.vary_accept_encoding(r, True, "%s: the 304" % ae)
            r = st.get(s.port, "/doc.txt", [("Accept-Encoding", ae), ("Range", "bytes=0-9")])
            eq((r.status, r.get("Expires"), r.get("Content-Location"), r.get("ETag")),
               (206,) + want + (full.get("ETag"),), "%s: the 206" % ae)
        r = st.get(s.port, "/doc.txt", [("Range", "bytes=0-9,20-29")])
        eq((r.status, r.get("Expires"), r.get("Content-Location"), r.get("Content-Range")),
           (206,) + want + (None,), "the multipart 206")


def t_html_304_keeps_no_cache(S):
    full = base(S, HTML)
    eq(full.need("Cache-Control"), "no-cache", "HTML Cache-Control")
    r = cond(S, HTML, [("If-None-Match", full.need("ETag"))])
    check_304(S, r, full, "HTML INM")


def t_png_304_and_412_without_vary(S):
    full = base(S, PNG)
    check_304(S, cond(S, PNG, [("If-None-Match", full.need("ETag"))]), full, "PNG INM",
              negotiable=False)
    check_412(cond(S, PNG, [("If-Match", '"nope"')]), "PNG If-Match other", negotiable=False)


def t_hashed_asset_304_keeps_immutable(S):
    path = "/js/app.3f9a1c2e.js"
    full = base(S, path, "br")
    eq(full.need("Cache-Control"), "public, max-age=31536000, immutable", "hashed Cache-Control")
    check_304(S, cond(S, path, [("Accept-Encoding", "br"), ("If-None-Match", full.need("ETag"))]),
              full, "hashed asset INM br")


def t_preconditions_ignored_unless_2xx(S):
    # RFC 9110 §13.2.1: preconditions are ignored when the response without them would
    # not be a 2xx (a 404 page, a directory redirect).
    for hdrs in ([("If-Match", '"x"')], [("If-None-Match", "*")],
                 [("If-Unmodified-Since", "Sun, 06 Nov 1994 08:49:37 GMT")]):
        r = cond(S, "/no/such/file", hdrs)
        eq(r.status, 404, "missing path with %s: status" % hdrs)
        eq(r.body, S.fixture.files["/404.html"], "missing path with %s: body" % hdrs)
        eq(cond(S, "/docs", hdrs).status, 301, "directory redirect with %s: status" % hdrs)


def t_head_if_modified_since(S):
    full = base(S, BIG)
    r = cond(S, BIG, [("If-Modified-Since", full.need("Last-Modified"))], "HEAD")
    check_304(S, r, full, "HEAD If-Modified-Since == Last-Modified")


def t_www_revalidates(S):
    if S.www is None:
        raise st.Skip("www/ is not present")
    for path in sorted(S.www.files):
        for ae in (None, "br, gzip"):
            hdrs = [] if ae is None else [("Accept-Encoding", ae)]
            full = st.get(S.www.port, st.url(path), hdrs)
            eq(full.status, 200, "www %s status" % path)
            r = st.get(S.www.port, st.url(path), hdrs + [("If-None-Match", full.need("ETag"))])
            eq(r.status, 304, "www %s (%r) INM own ETag: status" % (path, ae))
            eq(r.get("ETag"), full.get("ETag"), "www %s 304 ETag" % path)
            eq(len(r.all("Vary")), len(full.all("Vary")), "www %s 304 Vary lines as on 200" % path)


def t_last_modified_ahead_of_the_clock_is_sent_as_date(S):
    """A pack built where the clock runs ahead (CI builds, the origin serves) stores a
    Last-Modified later than servd's clock. RFC 9110 §8.8.2.1: an origin MUST NOT send a
    Last-Modified later than its Date, and replaces it by the Date; the conditionals
    compare with that value. Here servd-pack's clock runs 2 h ahead (an LD_PRELOAD shim
    on servd-pack only) and SOURCE_DATE_EPOCH is 1 h ahead of the real time."""
    shim = os.path.join(st.BUILD_DIR, "clock_ahead.so")
    text = b"".join(b"line %d of a text long enough to compress\n" % i for i in range(400))
    root = st.write_tree(os.path.join(st.tmpdir(), "ahead-site"), {"/t.txt": text})
    out = os.path.join(st.tmpdir(), "ahead.lmdb")
    ahead = int(time.time()) + 3600
    env = st.preload_env(shim, CLOCK_AHEAD="7200", SOURCE_DATE_EPOCH=str(ahead))
    p = subprocess.run([st.SERVD_PACK, "build", root, "-o", out], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    eq(p.returncode, 0, "servd-pack with its clock ahead: %s" % p.stderr.decode())
    with st.Servd(out) as s:
        for ae, rng in ((None, None), ("gzip", None), (None, "bytes=0-9"), ("br", "bytes=5-9")):
            h = [] if ae is None else [("Accept-Encoding", ae)]
            if rng:
                h.append(("Range", rng))
            r = st.get(s.port, "/t.txt", h)
            eq(r.status, 206 if rng else 200, "status (%r, %r)" % (ae, rng))
            what = "GET (%r, %r)" % (ae, rng)
            eq(r.get("Last-Modified"), r.get("Date"), what + ": Last-Modified is the Date")
            r304 = st.get(s.port, "/t.txt", h + [("If-None-Match", r.need("ETag"))])
            eq(r304.status, 304, what + ": If-None-Match")
            eq(r304.get("Last-Modified"), r304.get("Date"), what + ": on the 304")
        now = int(time.time())
        r = st.get(s.port, "/t.txt", [("If-Modified-Since", st.fmt_date(ahead))])
        eq(r.status, 304, "If-Modified-Since the stored (future) date: not modified since")
        r = st.get(s.port, "/t.txt", [("If-Modified-Since", st.fmt_date(now - 60))])
        eq(r.status, 200, "If-Modified-Since a minute ago: the Last-Modified is now")
        r = st.get(s.port, "/t.txt", [("If-Unmodified-Since", st.fmt_date(now - 60))])
        eq(r.status, 412, "If-Unmodified-Since a minute ago")
        r = st.get(s.port, "/t.txt", [("Range", "bytes=0-3"), ("If-Range", st.fmt_date(ahead))])
        eq(r.status, 200, "If-Range with the stored date: not the Last-Modified sent")



def pack_one_file(name, fname, data, mtime=None, env_extra=None, base=None):
    """Packs a tree of the one file fname (mtime when given), with env_extra in the
    environment (SOURCE_DATE_EPOCH only from there) and --base base; the pack's path."""
    root = os.path.join(st.tmpdir(), name)
    os.makedirs(root, exist_ok=True)
    path = os.path.join(root, fname)
    with open(path, "wb") as f:
        f.write(data)
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    env = dict(os.environ)
    env.pop("SOURCE_DATE_EPOCH", None)
    env.update(env_extra or {})
    out = os.path.join(st.tmpdir(), name + ".lmdb")
    p = subprocess.run([st.SERVD_PACK, "build", root, "-o", out, "-q"] +
                       (["--base", base] if base else []), env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    eq(p.returncode, 0, "build %s: %s" % (name, p.stderr.decode()))
    return out


def t_if_range_takes_only_a_date_that_is_the_files_own(S):
    """If-Range with a date resumes a download only when the date is a strong validator
    (RFC 9110 §13.1.5, §8.8.2.2). A date the file's content did not give, such as
    SOURCE_DATE_EPOCH (every version of every file gets it) or an mtime a build
    normalised (Nix's 1 s), was taken as one: after a deploy, a resume with the old date
    got a 206 of the new file, and the client spliced two versions. servd-pack now marks
    such dates and servd sends the whole file; the ETag still resumes."""
    def build(name, data, mtime=None, env_extra=None, base=None):
        return pack_one_file(name, "f.bin", data, mtime, env_extra, base)

    def resume(pack, date, data, what, want):
        with st.Servd(pack) as s:
            full = st.get(s.port, "/f.bin")
            eq(full.body, data, what + ": the file")
            r = st.get(s.port, "/f.bin", [("Range", "bytes=1000-"), ("If-Range", date)])
            eq(r.status, want, what + ": If-Range " + date)
            eq(r.body, data[1000:] if want == 206 else data, what + ": body")
            r = st.get(s.port, "/f.bin", [("Range", "bytes=1000-"),
                                          ("If-Range", full.need("ETag"))])
            eq((r.status, r.body), (206, data[1000:]), what + ": If-Range with the ETag")
            return full.need("Last-Modified")

    v1, v2 = os.urandom(50000), os.urandom(50000)
    sde = {"SOURCE_DATE_EPOCH": "1700000000"}
    # SOURCE_DATE_EPOCH: two versions of the file, one date
    p1 = build("sde-v1", v1, env_extra=sde)
    date = resume(p1, "Tue, 14 Nov 2023 22:13:20 GMT", v1, "SOURCE_DATE_EPOCH v1", 200)
    eq(date, "Tue, 14 Nov 2023 22:13:20 GMT", "Last-Modified from SOURCE_DATE_EPOCH")
    resume(build("sde-v2", v2, env_extra=sde), date, v2, "SOURCE_DATE_EPOCH v2", 200)
    # a normalised mtime (Nix)
    resume(build("nix", v1, mtime=1), "Thu, 01 Jan 1970 00:00:01 GMT", v1, "mtime 1", 200)
    # the file's own mtime, a day old: a strong validator
    day_ago = int(time.time()) - 86400
    own = build("own", v1, mtime=day_ago)
    resume(own, st.fmt_date(day_ago), v1, "the file's own mtime", 206)
    # --base: unchanged keeps its strong date; a change under the same mtime gets a
    # made-up later date, which is weak
    resume(build("own-again", v1, mtime=day_ago, base=own), st.fmt_date(day_ago), v1,
           "unchanged, with --base", 206)
    resume(build("changed", v2, mtime=day_ago, base=own), st.fmt_date(day_ago + 1), v2,
           "changed under the same mtime, with --base", 200)
    # ... and when the clock has not passed the base's date (a base packed the same
    # second; here servd-pack's clock stands at the file's mtime), the change keeps the
    # base's date: two versions, one date, which is weak too
    shim = st.preload_env(os.path.join(st.BUILD_DIR, "clock_ahead.so"))
    same = {"LD_PRELOAD": shim["LD_PRELOAD"], "ASAN_OPTIONS": shim["ASAN_OPTIONS"],
            "CLOCK_AT": str(day_ago)}
    date = resume(build("changed-same-second", v2, mtime=day_ago, env_extra=same, base=own),
                  st.fmt_date(day_ago), v2, "changed under the base's date, with --base", 200)
    eq(date, st.fmt_date(day_ago), "the changed file keeps the base's date")
    # A file whose mtime is in the future gets the time of packing, weak. A base of a
    # minor before 3 (format.md §9) marked no such date: a --base build that keeps it
    # must mark it itself, or an If-Range with it got a 206 of whatever the file holds.
    ahead = int(time.time()) + 365 * DAY
    new_base = build("future-v1", v1, mtime=ahead, env_extra=same)
    older = as_minor_2(new_base, "/f.bin", day_ago)
    resume(build("future-again", v1, mtime=ahead, base=new_base), st.fmt_date(day_ago), v1,
           "a packing time kept from a minor 3 base", 200)
    resume(build("future-again-older", v1, mtime=ahead, base=older), st.fmt_date(day_ago), v1,
           "a packing time kept from a minor 2 base", 200)
    # ... and once the clock has passed that mtime: the kept date is still the time of
    # that base's packing, not the file's mtime, and no strong validator
    passed = day_ago + 3600
    older = as_minor_2(build("passed-v1", v1, mtime=passed, env_extra=same), "/f.bin", day_ago)
    resume(build("passed-again-older", v1, mtime=passed, base=older), st.fmt_date(day_ago), v1,
           "a packing time kept from a minor 2 base, the mtime now past", 200)


def as_minor_2(pack, key, date):
    """A copy of a one-path pack as a writer of format minor 2 left it: the minor, the
    path's record with its weak-date bit (minor 3's) clear, and the pack id over it."""
    with open(pack, "rb") as f:
        data = bytearray(f.read())
    meta = data.find(b"SERVDPK1")
    ok(meta >= 0 and data.find(b"SERVDPK1", meta + 1) < 0, "one meta record in the pack")
    head = re.compile(re.escape(struct.pack("<BBH", 1, 1, 2)) + b"(.{4})" +
                      re.escape(struct.pack("<q", date)), re.S)
    hits = list(head.finditer(data))
    eq(len(hits), 1, "one record of one variant with a weak date of %d" % date)
    at = hits[0].start()
    rec_len = 32 + 72 + struct.unpack("<I", hits[0].group(1))[0]
    data[at + 2] = 0
    struct.pack_into("<H", data, meta + 10, 2)
    key = key.encode()
    data[meta + 56:meta + 72] = hashlib.sha256(key + b"\0" + data[at:at + rec_len]).digest()[:16]
    out = pack[:-len(".lmdb")] + "-minor2.lmdb"
    with open(out, "wb") as f:
        f.write(data)
    p = subprocess.run([st.SERVD_PACK, "verify", out], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=60)
    eq(p.returncode, 0, "verify of the pack made minor 2: %s" % p.stderr.decode())
    return out

def t_normalised_dates_answer_no_if_modified_since(S):
    """A tree whose mtimes a build normalised (Nix's 1 s, or its SOURCE_DATE_EPOCH of
    1980-01-01, zip's 1980) gives every version of every file one date. A cache that
    revalidates with If-Modified-Since alone got a 304 for a changed file after a deploy
    without --base, and kept serving the old version. Such a date is no modification date
    (RFC 9110 §13.1.3-4): servd answers 200; the ETag still gets a 304."""
    def build(name, data, mtime, env_extra=None):
        return pack_one_file(name, "app.js", data, mtime, env_extra)

    v1, v2 = b"var version = 1;\n" * 40, b"var version = 2;\n" * 40
    cases = (("mtime 1 (Nix)", 1, None, "Thu, 01 Jan 1970 00:00:01 GMT"),
             ("zip's 1980-01-01", 315532800, None, "Tue, 01 Jan 1980 00:00:00 GMT"),
             ("SOURCE_DATE_EPOCH 1980 (Nix)", int(time.time()) - 86400,
              {"SOURCE_DATE_EPOCH": "315532800"}, "Tue, 01 Jan 1980 00:00:00 GMT"))
    for i, (what, mtime, env, date) in enumerate(cases):
        old = build("norm%d-v1" % i, v1, mtime, env)
        with st.Servd(old) as s:
            first = st.get(s.port, "/app.js")
            eq(first.need("Last-Modified"), date, what + ": Last-Modified")
            old_etag = first.need("ETag")
        with st.Servd(build("norm%d-v2" % i, v2, mtime, env)) as s:
            for d in (date, st.fmt_date(time.time())):
                r = st.get(s.port, "/app.js", [("If-Modified-Since", d)])
                eq((r.status, r.body), (200, v2), what + ": If-Modified-Since " + d)
            r = st.get(s.port, "/app.js", [("If-Unmodified-Since", "Thu, 01 Jan 1970 00:00:00 GMT")])
            eq((r.status, r.body), (200, v2), what + ": If-Unmodified-Since before the date")
            r = st.get(s.port, "/app.js", [("If-None-Match", old_etag)])
            eq((r.status, r.body), (200, v2), what + ": the old ETag")
            r = st.get(s.port, "/app.js")
            r2 = st.get(s.port, "/app.js", [("If-None-Match", r.need("ETag")),
                                             ("If-Modified-Since", date)])
            eq(r2.status, 304, what + ": the new ETag")
    # a date from 2000-01-02 on is compared as before
    with st.Servd(build("norm-own", v2, 946771200)) as s:
        r = st.get(s.port, "/app.js", [("If-Modified-Since", "Sun, 02 Jan 2000 00:00:00 GMT")])
        eq(r.status, 304, "an mtime of 2000-01-02: If-Modified-Since that date")


if __name__ == "__main__":
    st.run(st.collect(globals()), lambda: st.Sites(workers=1))
