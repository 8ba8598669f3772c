"""servd-pack diff OLD NEW: added (+), changed (~) and removed (-) paths, sorted, as text
and JSON; a change of headers only (Cache-Control from the rules) counts as changed;
identical packs give an empty diff; exit status 0. An index also lists the URLs servd
derives from it (/dir/, and /dir - its 301 - when added or removed, or when the lines
the 301 carries changed), marked as derived;
--content ignores a change of Last-Modified alone."""
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "pack"))
import packtest as T  # noqa: E402


def copy_site(src, dst, files):
    """A copy of the site src at dst with files ({relative path: text}) added."""
    shutil.copytree(src, dst)
    for rel, text in files.items():
        full = os.path.join(dst, rel)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write(text)
    return dst


NOT_FOUND_NOTE = ("servd-pack: diff: status:404 %s: the 404 response, sent for every URL that "
                  "is not a path of the new pack, differs")


def not_found_response(work, a, old, env):
    """The status:404 entry answers every URL that is not a path: when it changes, every
    404 a cache stored is stale under URLs no list can name. diff says so, without a URL:
    "not_found" in --json, one line on stderr beside the text (whose lines stay URLs)."""
    def diff(x, y, *extra):
        p = T.run(["diff", x, y] + list(extra))
        T.eq(p.returncode, 0, "diff %s %s exit status (%s)" % (x, y, p.stderr.decode()))
        q = T.run(["diff", x, y, "--json"] + list(extra))
        T.eq(q.returncode, 0, "diff --json %s %s exit status" % (x, y))
        return p.stdout.decode().splitlines(), p.stderr.decode(), json.loads(q.stdout), q.stderr

    cases = []
    # the page's bytes
    with open(os.path.join(a, "404.html"), "rb") as f:
        page = f.read()
    i = page.index(b"not found")
    edited = copy_site(a, os.path.join(work, "nf-bytes"), {})
    with open(os.path.join(edited, "404.html"), "wb") as f:
        f.write(page[:i] + b"NOT FOUND" + page[i + 9:])
    cases.append(("the page's bytes", edited, [], "changed", ["~ /404.html"]))
    # a rule header of /404.html reaches the 404 answers (format.md §6.4)
    rules = os.path.join(work, "nf-rules.json")
    with open(rules, "w") as f:
        json.dump({"headers": [{"match": "/404.html", "name": "X-Robots-Tag",
                                "value": "noindex"}]}, f)
    cases.append(("a rule header", a, ["--rules", rules], "changed", ["~ /404.html"]))
    # /404.html's own Cache-Control changes, the 404's (no-cache) does not
    cc_rules = os.path.join(work, "nf-cc.json")
    with open(cc_rules, "w") as f:
        json.dump({"cache_control": [{"match": "/404.html", "value": "public, max-age=60"}]}, f)
    cases.append(("/404.html's Cache-Control", a, ["--rules", cc_rules], None, ["~ /404.html"]))
    gone = copy_site(a, os.path.join(work, "nf-gone"), {})
    os.unlink(os.path.join(gone, "404.html"))
    cases.append(("no 404.html", gone, [], "removed", ["- /404.html"]))
    for what, root, extra, change, lines in cases:
        pack = os.path.join(work, "nf.lmdb")
        T.build(root, pack, *extra, env=env)
        out, err, doc, jerr = diff(old, pack)
        T.eq(out, lines, "%s: the text lists URLs only" % what)
        T.eq(doc["urls"], [line[2:] for line in lines], "%s: --json urls" % what)
        T.eq(doc.get("not_found", "(absent)"), change, "%s: --json not_found" % what)
        T.eq(jerr, b"", "%s: --json says it in the JSON alone" % what)
        if change:
            T.check(err.startswith(NOT_FOUND_NOTE % change) and err.count("\n") == 1,
                    "%s: the text says the 404 response %s: %r" % (what, change, err))
        else:
            T.eq(err, "", "%s: nothing said of the 404 response" % what)
        if change == "changed":
            T.eq(diff(old, pack, "--content")[2].get("not_found"), "changed",
                 "%s: --content sees it too" % what)
        if change == "removed":
            out, err, doc, _ = diff(pack, old)
            T.eq((out, doc.get("not_found")), (["+ /404.html"], "added"), "%s, reversed" % what)
            T.check(err.startswith(NOT_FOUND_NOTE % "added"), "reversed: %r" % err)
    # a page too small to compress, changed at the same length: its one header block
    # is the same, and a 404 has no ETag; only its body tells
    small = []
    for text in ("missing\n", "MISSING\n"):
        root = os.path.join(work, "nf-small-%d" % len(small))
        os.makedirs(root)
        for name, content in (("index.html", "home\n"), ("404.html", text)):
            with open(os.path.join(root, name), "w") as f:
                f.write(content)
        small.append(os.path.join(work, "nf-small-%d.lmdb" % len(small)))
        T.build(root, small[-1], env=env)
    out, err, doc, _ = diff(small[0], small[1])
    T.eq((out, doc.get("not_found")), (["~ /404.html"], "changed"), "a small page's bytes")
    T.check(err.startswith(NOT_FOUND_NOTE % "changed"), "a small page's bytes: %r" % err)


def shared_url(work, env):
    """A directory's index replaced by a file of the directory's name (/guide/ become a
    page /guide): the added or removed path and the 301 its index took along share the
    URL /guide. The path of a pack comes first, then the derived line, whatever their
    signs; --json's urls hold /guide once."""
    with_dir = os.path.join(work, "shared-dir")
    with_file = os.path.join(work, "shared-file")
    for root, rel in ((with_dir, "guide/index.html"), (with_file, "guide")):
        os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
        with open(os.path.join(root, rel), "w") as f:
            f.write("<p>guide</p>\n")
    packs = []
    for root in (with_dir, with_file):
        packs.append(root + ".lmdb")
        T.build(root, packs[-1], env=env)
    p = T.run(["diff", packs[0], packs[1]])
    T.eq(p.returncode, 0, "diff exit status (stderr: %s)" % p.stderr.decode())
    T.eq(p.stdout.decode().splitlines(),
         ["+ /guide", "- /guide\tvia /guide/index.html (301)",
          "- /guide/\tvia /guide/index.html", "- /guide/index.html"],
         "diff from an index to a file of its directory's name")
    p = T.run(["diff", packs[1], packs[0]])
    T.eq(p.returncode, 0, "diff exit status (stderr: %s)" % p.stderr.decode())
    T.eq(p.stdout.decode().splitlines(),
         ["- /guide", "+ /guide\tvia /guide/index.html (301)",
          "+ /guide/\tvia /guide/index.html", "+ /guide/index.html"],
         "diff from a file to an index in a directory of its name")
    p = T.run(["diff", packs[1], packs[0], "--json"])
    T.eq(json.loads(p.stdout)["urls"], ["/guide", "/guide/", "/guide/index.html"],
         "diff --json's urls, each once")


def main():
    env = {"SOURCE_DATE_EPOCH": "1700000000"}
    with T.TempDir() as work:
        a = os.path.join(work, "a")
        T.make_site(a)
        old = os.path.join(work, "old.lmdb")
        T.build(a, old, env=env)

        b = os.path.join(work, "b")
        shutil.copytree(a, b)
        with open(os.path.join(b, "css", "site.css"), "ab") as f:
            f.write(b".new{}\n")
        os.unlink(os.path.join(b, "docs", "guide", "intro.html"))
        with open(os.path.join(b, "docs", "new.html"), "w") as f:
            f.write("<p>new page</p>\n")
        with open(os.path.join(b, "zzz.txt"), "w") as f:
            f.write("last\n")
        rules = os.path.join(work, "rules.json")
        with open(rules, "w") as f:
            json.dump({"cache_control": [{"match": "/data/site.json", "value": "no-store"}]}, f)
        new = os.path.join(work, "new.lmdb")
        T.build(b, new, "--rules", rules, env=env)

        p = T.run(["diff", old, new])
        T.eq(p.returncode, 0, "diff exit status (stderr: %s)" % p.stderr.decode())
        T.eq(p.stdout.decode().splitlines(),
             ["~ /css/site.css", "~ /data/site.json", "- /docs/guide/intro.html", "+ /docs/new.html",
              "+ /zzz.txt"],
             "diff lines, sorted by path")
        p = T.run(["diff", old, new, "--json"])
        T.eq(p.returncode, 0, "diff --json exit status")
        T.eq(json.loads(p.stdout), {"added": ["/docs/new.html", "/zzz.txt"],
                                    "changed": ["/css/site.css", "/data/site.json"],
                                    "removed": ["/docs/guide/intro.html"],
                                    "derived": [],
                                    "urls": ["/css/site.css", "/data/site.json",
                                             "/docs/guide/intro.html", "/docs/new.html",
                                             "/zzz.txt"],
                                    "not_found": None}, "diff --json")
        p = T.run(["diff", new, old])
        T.eq(sorted(p.stdout.decode().splitlines()),
             sorted(["~ /css/site.css", "~ /data/site.json", "- /docs/new.html",
                     "+ /docs/guide/intro.html", "- /zzz.txt"]), "reverse diff")

        # Same content, other mtimes, no SOURCE_DATE_EPOCH: Last-Modified differs -> changed.
        c = os.path.join(work, "c")
        shutil.copytree(a, c)
        t = 1500000000
        os.utime(os.path.join(c, "index.html"), (t, t))
        c1 = os.path.join(work, "c1.lmdb")
        c2 = os.path.join(work, "c2.lmdb")
        T.build(a, c1)
        T.build(c, c2)
        lines = T.run(["diff", c1, c2]).stdout.decode().splitlines()
        T.check("~ /index.html" in lines, "a new Last-Modified counts as changed: %r" % lines)
        # --content: a new Last-Modified alone is no change; a new body still is.
        p = T.run(["diff", c1, c2, "--content"])
        T.eq((p.returncode, p.stdout), (0, b""), "diff --content after a touch")
        with open(os.path.join(c, "index.html"), "a") as f:
            f.write("<!-- edited -->\n")
        c3 = os.path.join(work, "c3.lmdb")
        T.build(c, c3)
        T.eq(T.run(["diff", c1, c3, "--content"]).stdout.decode().splitlines(),
             ["~ /\tvia /index.html", "~ /index.html"], "diff --content after an edit")
        T.eq(T.run(["ls", c1, "--content"]).returncode, 2, "--content is an option of diff only")

        # A name with a bidirectional control (U+202E) is listed escaped, so a terminal
        # does not show it reordered; the JSON has it as a string, the URL encoded.
        b = copy_site(a, os.path.join(work, "bidi"), {"rtl\u202ex/index.html": "<p>rtl</p>\n",
                                                      "caf\u00e9.html": "<p>cafe</p>\n"})
        b1 = os.path.join(work, "b1.lmdb")
        T.build(b, b1)
        listing = T.run(["ls", b1]).stdout.decode()
        T.check("\n/rtl\\u202ex/index.html\t" in listing and "\u202e" not in listing,
                "ls escapes U+202E: %r" % listing)
        T.check("\n/caf\u00e9.html\t" in listing, "ls keeps other UTF-8 as it is: %r" % listing)
        T.check("/rtl\u202ex/index.html" in [e["path"] for e in
                                              json.loads(T.run(["ls", b1, "--json"]).stdout)],
                "ls --json has the name itself")
        lines = T.run(["diff", c1, b1]).stdout.decode().splitlines()
        T.check("+ /rtl%E2%80%AEx/\tvia /rtl\\u202ex/index.html" in lines,
                "diff: the URL encoded, the via path escaped: %r" % lines)

        # The same tree with the same dates, packed with and without SOURCE_DATE_EPOCH:
        # only the weak-date mark of the entries differs (servd takes no If-Range date
        # of the first), which changes no byte sent: no change to purge.
        d = os.path.join(work, "same-dates")
        shutil.copytree(a, d)
        for dirpath, _, names in os.walk(d):
            for n in names:
                os.utime(os.path.join(dirpath, n), (1700000000, 1700000000))
        d1 = os.path.join(work, "d1.lmdb")
        d2 = os.path.join(work, "d2.lmdb")
        T.build(d, d1, env=env)
        T.build(d, d2)
        T.eq(T.run(["ls", d1]).stdout, T.run(["ls", d2]).stdout, "the same paths, ETags, types")
        p = T.run(["diff", d1, d2])
        T.eq((p.returncode, p.stdout), (0, b""), "diff of packs that differ in weak dates only")

        # Indexes: the URLs servd derives from them, marked as derived.
        d = os.path.join(work, "d")
        shutil.copytree(a, d)
        with open(os.path.join(d, "docs", "index.html"), "a") as f:
            f.write("<p>more</p>\n")
        os.makedirs(os.path.join(d, "new"))
        with open(os.path.join(d, "new", "index.html"), "w") as f:
            f.write("<p>new section</p>\n")
        os.unlink(os.path.join(d, "copy", "index.html"))
        with open(os.path.join(d, "index.html"), "a") as f:
            f.write("<p>home</p>\n")
        dpack = os.path.join(work, "d.lmdb")
        T.build(d, dpack, env=env)
        T.eq(T.run(["diff", old, dpack]).stdout.decode().splitlines(),
             ["~ /\tvia /index.html",
              "- /copy\tvia /copy/index.html (301)",
              "- /copy/\tvia /copy/index.html",
              "- /copy/index.html",
              "~ /docs/\tvia /docs/index.html",
              "~ /docs/index.html",
              "~ /index.html",
              "+ /new\tvia /new/index.html (301)",
              "+ /new/\tvia /new/index.html",
              "+ /new/index.html"], "diff lines with derived URLs")
        doc = json.loads(T.run(["diff", old, dpack, "--json"]).stdout)
        T.eq(doc["added"], ["/new/index.html"], "--json added: paths only")
        T.eq(doc["changed"], ["/docs/index.html", "/index.html"], "--json changed: paths only")
        T.eq(doc["removed"], ["/copy/index.html"], "--json removed: paths only")
        T.eq(doc["derived"], [
            {"url": "/", "via": "/index.html", "change": "changed", "status": 200},
            {"url": "/copy", "via": "/copy/index.html", "change": "removed", "status": 301},
            {"url": "/copy/", "via": "/copy/index.html", "change": "removed", "status": 200},
            {"url": "/docs/", "via": "/docs/index.html", "change": "changed", "status": 200},
            {"url": "/new", "via": "/new/index.html", "change": "added", "status": 301},
            {"url": "/new/", "via": "/new/index.html", "change": "added", "status": 200}],
            "--json derived")
        T.eq(doc["urls"], ["/", "/copy", "/copy/", "/copy/index.html", "/docs/", "/docs/index.html",
                           "/index.html", "/new", "/new/", "/new/index.html"], "--json urls")

        # Names with '[', ']', '^' or '|' (a framework's "[slug]" route): a browser sends
        # them raw (WHATWG URL), a cache keyed on the target as received holds that
        # spelling, so both are listed; the browser's as derived "via" the path. With '^'
        # and another of them, as browsers wrote it before 2025 and as they do now (they
        # escape '^'): the latter was missing.
        e = copy_site(a, os.path.join(work, "e"), {"[slug]/index.html": "<p>a route</p>\n",
                                                   "pipe|x^y.txt": "odd\n"})
        epack = os.path.join(work, "e.lmdb")
        T.build(e, epack, env=env)
        T.eq(T.run(["diff", old, epack]).stdout.decode().splitlines(),
             ["+ /%5Bslug%5D\tvia /[slug]/index.html (301)",
              "+ /%5Bslug%5D/\tvia /[slug]/index.html",
              "+ /%5Bslug%5D/index.html",
              "+ /[slug]\tvia /[slug]/index.html (301, as browsers write it)",
              "+ /[slug]/\tvia /[slug]/index.html (as browsers write it)",
              "+ /[slug]/index.html\tvia /[slug]/index.html (as browsers write it)",
              "+ /pipe%7Cx%5Ey.txt",
              "+ /pipe|x%5Ey.txt\tvia /pipe|x^y.txt (as browsers write it)",
              "+ /pipe|x^y.txt\tvia /pipe|x^y.txt (as browsers write it)"],
             "diff lines of names a browser writes raw")
        doc = json.loads(T.run(["diff", old, epack, "--json"]).stdout)
        T.eq(doc["added"], ["/[slug]/index.html", "/pipe|x^y.txt"], "--json added: paths once")
        T.eq(doc["derived"][-1], {"url": "/pipe|x^y.txt", "via": "/pipe|x^y.txt",
                                  "change": "added", "status": 200, "browser": True},
             "--json: the browser's spelling")
        T.eq(len(doc["urls"]), 9, "--json urls: every spelling")

        # The 301 from a directory's name carries its page's Cache-Control and
        # Access-Control-* lines (servd/redirect.c): a change of those lists the 301
        # too, where a change of the page's bytes alone does not.
        for what, rules in (
                ("Access-Control-Allow-Origin", {"headers": [{
                    "match": "/docs/index.html", "name": "Access-Control-Allow-Origin",
                    "value": "*"}]}),
                ("Cache-Control", {"cache_control": [{
                    "match": "/docs/index.html", "value": "public, max-age=60"}]})):
            rules_file = os.path.join(work, "redirect-rules.json")
            with open(rules_file, "w") as f:
                json.dump(rules, f)
            rpack = os.path.join(work, "redirect.lmdb")
            T.build(a, rpack, "--rules", rules_file, env=env)
            T.eq(T.run(["diff", old, rpack]).stdout.decode().splitlines(),
                 ["~ /docs\tvia /docs/index.html (301)",
                  "~ /docs/\tvia /docs/index.html",
                  "~ /docs/index.html"], "a rule's %s on an index: its 301 listed" % what)

        not_found_response(work, a, old, env)
        shared_url(work, env)

        # Identical packs.
        again = os.path.join(work, "again.lmdb")
        T.build(a, again, env=env)
        p = T.run(["diff", old, again])
        T.eq((p.returncode, p.stdout), (0, b""), "diff of identical packs")
        T.eq(json.loads(T.run(["diff", old, again, "--json"]).stdout),
             {"added": [], "changed": [], "removed": [], "derived": [], "urls": [],
              "not_found": None}, "diff --json of identical packs")
        T.eq(T.run(["diff", old, again]).stderr, b"", "diff of identical packs: nothing said")
    T.finish("test_pack_diff")


if __name__ == "__main__":
    main()
