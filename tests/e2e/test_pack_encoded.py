#!/usr/bin/env python3
"""Files a build tool ships compressed (an "encoded" rule): Unity WebGL builds name
their files game.wasm.br, game.data.br, game.framework.js.br (or .gz) and their loader
fetches those URLs, expecting the server to send them with Content-Encoding and the
type of what they contain (application/wasm, or WebAssembly's streaming compile
refuses). servd-pack stores such a file as what it contains, typed by its name without
the suffix, under its own URL, with the usual variants: a client that accepts br gets
br, one that accepts nothing gets the decoded bytes, which the loader takes as well.
Without the rule, X.gz stays a file of its own type (a download).

Run alone: SERVD_BUILD_DIR=build python3 tests/e2e/test_pack_encoded.py"""
import gzip
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servdtest as st  # noqa: E402
from servdtest import eq, ok  # noqa: E402

WASM = b"\0asm\x01\0\0\0" + b"".join(bytes([1, i % 7, 0, i % 3]) * 8 for i in range(3000))
DATA = b"".join(b"UnityFS\0asset-%05d\0" % i + bytes(range(i % 40)) for i in range(2000))
FRAMEWORK = b"".join(b"function f%d(a){return a+%d}\n" % (i, i) for i in range(1500))
CONFIG = json.dumps({"levels": [{"n": i, "name": "level %d" % i} for i in range(300)]}).encode()
CSV = b"id,name\n" + b"".join(b"%d,item %d\n" % (i, i) for i in range(500))

RULES = {"encoded": ["/Build/*.br", "/Build/*.gz", "/Build/*.zst"]}


def compress(coding, data):
    if coding == "gzip":
        return gzip.compress(data, mtime=0)
    tool = {"br": ["brotli", "-c"], "zstd": ["zstd", "-cq"]}[coding]
    return subprocess.run(tool, input=data, stdout=subprocess.PIPE, check=True).stdout


def write_site(name, files):
    return st.write_tree(os.path.join(st.tmpdir(), name), files)


def write_rules(name, rules):
    path = os.path.join(st.tmpdir(), name)
    with open(path, "w") as f:
        json.dump(rules, f)
    return path


def unity_site(name):
    return write_site(name, {
        "/index.html": b"<!doctype html><title>game</title><script src=Build/g.loader.js></script>\n",
        "/Build/g.loader.js": b"function createUnityInstance(){}\n" * 40,
        "/Build/g.wasm.br": compress("br", WASM),
        "/Build/g.data.br": compress("br", DATA),
        "/Build/g.framework.js.gz": compress("gzip", FRAMEWORK),
        "/Build/config.json.zst": compress("zstd", CONFIG),
        "/dl/items.csv.gz": compress("gzip", CSV),
    })


def build(root, out, rules, extra=()):
    cmd = [st.SERVD_PACK, "build", root, "-o", out, "--rules", rules] + list(extra)
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=240)


def t_served_with_content_encoding():
    root = unity_site("unity")
    pack = st.pack(root, "unity.lmdb", ["--rules", write_rules("unity.json", RULES)])
    with st.Servd(pack) as s:
        for path, inner, ctype in (("/Build/g.wasm.br", WASM, "application/wasm"),
                                   ("/Build/g.framework.js.gz", FRAMEWORK,
                                    "text/javascript; charset=utf-8"),
                                   ("/Build/config.json.zst", CONFIG, "application/json")):
            for accept, want in (("br", "br"), ("gzip", "gzip"), ("zstd", "zstd"), (None, None),
                                 ("gzip, deflate, br, zstd", "br")):
                hdrs = [("Accept-Encoding", accept)] if accept else []
                r = st.get(s.port, path, headers=hdrs)
                what = "%s with Accept-Encoding %r" % (path, accept)
                eq(r.status, 200, what)
                eq(r.get("Content-Type"), ctype, what + ": the type of what the file holds")
                eq(st.content_encoding(r), want, what + ": Content-Encoding")
                st.vary_accept_encoding(r, True, what)
                eq(st.decode(r.body, want), inner, what + ": body")
        # Unity's .data is no known type, and compressed all the same (it was shipped so).
        r = st.get(s.port, "/Build/g.data.br", headers=[("Accept-Encoding", "gzip")])
        eq(st.content_encoding(r), "gzip", "g.data.br to a gzip client")
        eq(st.decode(r.body, "gzip"), DATA, "g.data.br gzip body")
        eq(st.get(s.port, "/Build/g.data.br").body, DATA, "g.data.br to a client of nothing")
        # Outside the rule, a .gz is a download of its own type, sent as it is.
        r = st.get(s.port, "/dl/items.csv.gz", headers=[("Accept-Encoding", "gzip, br")])
        eq((r.get("Content-Type"), st.content_encoding(r)), ("application/gzip", None),
           "a .gz the rule does not match")
        eq(gzip.decompress(r.body), CSV, "the .gz download is the file")
        eq(st.get(s.port, "/Build/g.loader.js").body, b"function createUnityInstance(){}\n" * 40,
           "a file of Build/ the rule does not match")
        # The suffix-less name is not made up.
        eq(st.get(s.port, "/Build/g.wasm").status, 404, "no /Build/g.wasm")


def t_bad_files_are_refused():
    cases = (
        ({"/Build/g.wasm.br": b"\0asm not brotli at all" * 10}, ["/Build/*.br"],
         ["g.wasm.br", "an encoded rule matches it, so by its name it is brotli: not valid"]),
        ({"/Build/g.js.gz": b"\x1f\x8b" + b"broken" * 10}, ["/Build/*.gz"],
         ["g.js.gz", "by its name it is gzip: "]),
        ({"/Build/g.js.gz": FRAMEWORK}, ["/Build/*.gz"], ["g.js.gz", "not valid gzip data"]),
        ({"/Build/g.js.br": compress("gzip", FRAMEWORK)}, ["/Build/*.br"],
         ["g.js.br", "it starts like gzip data: name it .gz"]),
        ({"/Build/g.loader.js": b"x()\n", "/Build/g.wasm.br": compress("br", WASM)},
         ["/Build/**"], ["g.loader.js", "does not end in .gz, .br or .zst"]),
    )
    for i, (files, globs, needles) in enumerate(cases):
        root = write_site("bad-%d" % i, files)
        out = os.path.join(st.tmpdir(), "bad-%d.lmdb" % i)
        p = build(root, out, write_rules("bad-%d.json" % i, {"encoded": globs}))
        err = p.stderr.decode()
        eq(p.returncode, 1, "case %d: exit status (%s)" % (i, err))
        for n in needles:
            ok(n in err, "case %d: %r not in the message: %s" % (i, n, err))
        ok(not os.path.exists(out), "case %d: no pack written" % i)


def t_summary_and_a_glob_that_matches_nothing():
    """The summary counts the files stored decompressed; an encoded glob that matched no
    file is pointed out: "/Build/*.br" misses a game in a subdirectory, whose loader then
    fails in the browser on application/x-brotli."""
    root = write_site("nested", {"/games/g1/Build/g.wasm.br": compress("br", WASM),
                                 "/index.html": b"<p>games</p>\n"})
    out = os.path.join(st.tmpdir(), "nested.lmdb")
    p = build(root, out, write_rules("anchored.json", {"encoded": ["/Build/*.br"]}))
    err = p.stderr.decode()
    eq(p.returncode, 0, "a glob that matches nothing is no error: " + err)
    ok('/encoded/0 "/Build/*.br" matched no file (a glob starting with / is anchored' in err,
       "the warning: " + err)
    p = build(root, out, write_rules("floating.json", {"encoded": ["Build/*.br"]}))
    err = p.stderr.decode()
    ok("matched no file" not in err, "no warning once it matches: " + err)
    ok("stored as what they contain (an encoded rule, .svgz): 1 files" in err,
       "the summary counts it: " + err)


def t_rules_file_checked():
    root = unity_site("unity-rules")
    out = os.path.join(st.tmpdir(), "rules-bad.lmdb")
    p = build(root, out, write_rules("typo.json", {"encoded": ["/Build/*.br", 3]}))
    eq(p.returncode, 1, "a number in encoded")
    ok("/encoded/1" in p.stderr.decode(), "names the pointer: %s" % p.stderr.decode())


def t_base_reuses_the_variants():
    root = unity_site("unity-base")
    rules = write_rules("unity-base.json", RULES)
    old = os.path.join(st.tmpdir(), "unity-old.lmdb")
    p = build(root, old, rules)
    eq(p.returncode, 0, p.stderr.decode())
    new = os.path.join(st.tmpdir(), "unity-new.lmdb")
    p = build(root, new, rules, ["--base", old])
    eq(p.returncode, 0, p.stderr.decode())
    m = re.search(r"compression reused from --base: (\d+) files", p.stderr.decode())
    ok(m is not None, "summary: %s" % p.stderr.decode())
    # every file but the .csv.gz download: the .data among them, of a type servd-pack
    # never compresses but compressed as a file of the rule
    eq(int(m.group(1)), 6, "files whose variants came from --base: %s" % p.stderr.decode())


if __name__ == "__main__":
    st.run(st.collect(globals()))
