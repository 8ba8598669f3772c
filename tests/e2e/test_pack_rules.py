"""Rules (--rules) end to end: Cache-Control by glob, extra headers on 200 and 404
blocks, excludes counted in the summary, MIME overrides (which also decide compression);
the manifest agrees with the pack; the example rules in manifests/examples build."""
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "pack"))
import packtest as T  # noqa: E402

RULES = {
    "cache_control": [
        {"match": "/js/**", "value": "public, max-age=60"},
        {"match": "*.css", "value": "no-store"},
    ],
    "headers": [
        {"match": "**", "name": "X-Content-Type-Options", "value": "nosniff"},
        {"match": "*.html", "name": "Link", "value": "</css/site.css>; rel=preload; as=style"},
    ],
    "exclude": ["/dup/**", "*.wasm"],
    "mime": [
        {"match": "/LICENSE", "type": "application/octet-stream"},
        {"match": "*.txt", "type": "text/x-custom; charset=utf-8"},
    ],
}


def headers(pack, path, enc="identity"):
    return T.parse_headers(T.cat(pack, path, enc, headers=True))[1]


def main():
    with T.TempDir() as work:
        root = os.path.join(work, "site")
        T.make_site(root)
        rules = os.path.join(work, "rules.json")
        with open(rules, "w") as f:
            json.dump(RULES, f)
        pack = os.path.join(work, "site.lmdb")
        man = os.path.join(work, "manifest.json")
        p = T.run(["build", root, "-o", pack, "--rules", rules, "--manifest", man])
        T.eq(p.returncode, 0, "build with rules: " + p.stderr.decode())
        summary = p.stderr.decode()
        m = re.search(r"(\d+) excluded", summary)
        T.eq(m and int(m.group(1)), 2, "excluded count in the summary (dup/ once, app.wasm)")

        T.check("warning" not in summary, "no warning when every rule is used: " + summary)

        # An exclude that names a directory but skips nothing is pointed out: "/img"
        # (or "img/") publishes the directory it was meant to hide. One that finds
        # nothing at all ("*.map" in a shared rules file) is normal and not mentioned.
        bad_rules = os.path.join(work, "unused.json")
        with open(bad_rules, "w") as f:
            json.dump({"exclude": ["/img", "*.nothing-has-this", "*.wasm", "docs/"]}, f)
        p = T.run(["build", root, "-o", os.path.join(work, "unused.lmdb"), "--rules", bad_rules,
                   "-q"])
        T.eq(p.returncode, 0, "build with unused excludes")
        err = p.stderr.decode()
        T.check('%s: /exclude/0 "/img" names a directory but skips nothing in it; to exclude the '
                'directory and all it holds, write "/img/**"' % bad_rules in err,
                "directory named without /**: " + err)
        T.check('/exclude/3 "docs/" names a directory' in err and 'write "docs/**"' in err,
                "directory named with a trailing slash: " + err)
        T.check("/exclude/1" not in err and "/exclude/2" not in err,
                "an exclude that found nothing, or that was used, is not named: " + err)

        # A rule that does nothing is a mistake the build would otherwise hide:
        # "/asset/**" for "/assets/**" leaves every asset on the default policy.
        # Named: a glob that matched no file, a first-match rule that every file
        # it matches is taken from by an earlier one, an anchored exclude that
        # matched nothing. The rules that did something are not named.
        idle_rules = os.path.join(work, "idle.json")
        with open(idle_rules, "w") as f:
            json.dump({
                "cache_control": [{"match": "/j/**", "value": "no-store"},
                                  {"match": "*.js", "value": "public, max-age=60"},
                                  {"match": "/js/app.js", "value": "public, max-age=5"}],
                "headers": [{"match": "*.gif", "name": "X-A", "value": "a"},
                            {"match": "*.css", "name": "X-B", "value": "b"}],
                "mime": [{"match": "*.txt", "type": "text/plain"},
                         {"match": "/tiny.txt", "type": "text/markdown"},
                         {"match": "/LICENSE.md", "type": "text/markdown"}],
                # "/app.wasm" only matches what "*.wasm" took, and the walk skips
                # "/.git" before it asks: neither is worth a warning
                "exclude": ["/dupe/**", "*.nothing-has-this", "*.wasm", "/app.wasm",
                            "/.git/**"]}, f)
        p = T.run(["build", root, "-o", os.path.join(work, "idle.lmdb"), "--rules", idle_rules,
                   "-q"])
        T.eq(p.returncode, 0, "a build with idle rules still succeeds: " + p.stderr.decode())
        err = p.stderr.decode()
        warned = sorted(re.findall(r"warning: .*?: (/\w+/\d+) ", err))
        T.eq(warned, ["/cache_control/0", "/cache_control/2", "/exclude/0", "/headers/0",
                      "/mime/1", "/mime/2"], "the idle rules are named, and only they: " + err)
        T.check('/cache_control/0 "/j/**" matched no file\n' in err,
                "a glob that matched nothing: " + err)
        T.check('/cache_control/2 "/js/app.js" is used for no file: every file it matches is taken '
                'by an earlier rule' in err, "a rule behind an earlier one: " + err)
        T.check('/exclude/0 "/dupe/**" matched no path the walk reached' in err,
                "an anchored exclude that matched nothing: " + err)

        # Excludes that name what another one takes with its whole directory, before
        # it or after it, are behind it as at file level: no warning, and --strict
        # builds. They were "matched no path the walk reached" (the walk does not
        # enter a skipped directory).
        behind_rules = os.path.join(work, "behind.json")
        with open(behind_rules, "w") as f:
            json.dump({"exclude": ["/dup/one.txt", "/dup/**", "/dup/two.txt", "/dup/*.txt",
                                   "/dup/**"]}, f)
        p = T.run(["build", root, "-o", os.path.join(work, "behind.lmdb"), "--rules",
                   behind_rules, "-q", "--strict"])
        T.eq((p.returncode, p.stderr.decode()), (0, ""),
             "excludes behind a directory's exclude: no warning, --strict builds")

        # A rules file shared by many sites may hold thousands of rules one site does not
        # use: ten warnings, then a count (an audit of 2026-12-05 got 100,000 lines).
        many_rules = os.path.join(work, "many-idle.json")
        with open(many_rules, "w") as f:
            json.dump({"cache_control": [{"match": "/none%d/**" % i, "value": "no-store"}
                                         for i in range(25)]}, f)
        p = T.run(["build", root, "-o", os.path.join(work, "idle.lmdb"), "--rules", many_rules,
                   "-q"])
        T.eq(p.returncode, 0, "a build with 25 idle rules: " + p.stderr.decode())
        err = p.stderr.decode()
        T.eq(re.findall(r"/cache_control/(\d+) ", err), [str(i) for i in range(10)],
             "the first ten idle rules are named: " + err)
        T.check(err.endswith("warning: %s: and 15 more rules like those above\n" % many_rules),
                "then a count of the rest: " + err)

        # The rules from a pipe (`--rules <(jq ...)` in a pipeline): the same pack.
        piped = os.path.join(work, "piped.lmdb")
        p = subprocess.run(["bash", "-c", 'exec "$0" build "$1" -o "$2" -q --rules <(cat "$3")',
                            T.PACK, root, piped, rules], stderr=subprocess.PIPE, timeout=120)
        T.eq(p.returncode, 0, "build with the rules from a pipe: " + p.stderr.decode())
        T.eq(T.ls_json(piped), T.ls_json(pack), "the rules from a pipe give the same pack")

        listing = {e["path"]: e for e in T.ls_json(pack)}
        for gone in ("/dup/one.txt", "/dup/two.txt", "/app.wasm"):
            T.check(gone not in listing, "%s excluded" % gone)

        T.eq(listing["/js/app.js"]["cache_control"], "public, max-age=60", "first match: /js/**")
        T.eq(listing["/js/app.3f9a1c2e.js"]["cache_control"], "public, max-age=60",
             "a rule beats the hashed-name default")
        T.eq(listing["/css/site.css"]["cache_control"], "no-store", "*.css rule")
        T.eq(listing["/index.html"]["cache_control"], "no-cache", "default for HTML without a rule")

        T.eq(listing["/LICENSE"]["mime"], "application/octet-stream", "MIME override")
        T.eq([v["encoding"] for v in listing["/LICENSE"]["variants"]], ["identity"],
             "an octet-stream override is not compressed")
        T.eq(listing["/with space/a b.txt"]["mime"], "text/x-custom; charset=utf-8", "*.txt override")
        T.check(len(listing["/with space/a b.txt"]["variants"]) > 1, "a text/* override is compressed")

        # Extra headers: after Accept-Ranges, in rule order, on every variant and on the 404.
        for enc in [v["encoding"] for v in listing["/index.html"]["variants"]]:
            h = headers(pack, "/index.html", enc)
            names = [n for n, _ in h]
            T.eq(names[-3:], ["Accept-Ranges", "X-Content-Type-Options", "Link"],
                 "/index.html %s: extras last, in order" % enc)
            T.eq(dict(h)["Link"], "</css/site.css>; rel=preload; as=style", "Link value")
        h = headers(pack, "/img/photo.png")
        T.eq([n for n, _ in h][-1], "X-Content-Type-Options", "** header on a PNG")
        T.check("Link" not in dict(h), "*.html header not on a PNG")
        h404 = headers(pack, "status:404")
        T.eq([n for n, _ in h404][-2:], ["X-Content-Type-Options", "Link"], "extras on the 404 block")

        # The manifest agrees with the pack.
        with open(man, encoding="utf-8") as f:
            doc = json.load(f)
        for key in ("servd_manifest", "pack_id", "packer", "profile", "not_found", "totals", "paths"):
            T.check(key in doc, "manifest has %s" % key)
        T.eq(doc["not_found"], "/404.html", "manifest not_found")
        T.eq(list(doc["paths"]), sorted(listing, key=lambda k: k.encode()), "manifest paths, in byte order")
        T.eq(doc["totals"]["paths"], len(listing), "manifest totals.paths")
        for path, e in listing.items():
            mp = doc["paths"].get(path, {})
            T.eq([(v["encoding"], v["size"], v["etag"]) for v in mp.get("variants", [])],
                 [(v["encoding"], v["size"], v["etag"]) for v in e["variants"]],
                 "manifest variants of %s" % path)
            T.eq(mp.get("mime"), e["mime"], "manifest mime of %s" % path)
            T.eq(mp.get("cache_control"), e["cache_control"], "manifest cache_control of %s" % path)
            for v in mp.get("variants", []):
                T.check(re.fullmatch(r'"[A-Za-z0-9_-]{22}"', v["etag"]), "ETag format %r" % v["etag"])
        T.eq([h["name"] for h in doc["paths"]["/index.html"]["headers"]],
             ["X-Content-Type-Options", "Link"], "manifest headers of /index.html")
        T.eq(T.run(["verify", pack]).returncode, 0, "verify of the rules pack")

        # The ETag covers the type and the extra headers (docs/format.md 6.3): a
        # browser keeps the Content-Type it cached, whatever a 304 says, so a type
        # fixed by a rule must not revalidate to the old one. Same bytes, same rules:
        # same ETags; a different type or header: a different one.
        plain = os.path.join(work, "plain.lmdb")
        T.eq(T.run(["build", root, "-o", plain, "-q"]).returncode, 0, "build without rules")
        again = os.path.join(work, "plain2.lmdb")
        T.eq(T.run(["build", root, "-o", again, "-q"]).returncode, 0, "build without rules again")
        plain_l = {e["path"]: e for e in T.ls_json(plain)}
        again_l = {e["path"]: e for e in T.ls_json(again)}
        for path, e in plain_l.items():
            T.eq([v["etag"] for v in again_l[path]["variants"]], [v["etag"] for v in e["variants"]],
                 "%s: same tree, same ETags" % path)
        T.check(plain_l["/LICENSE"]["variants"][0]["etag"] != listing["/LICENSE"]["variants"][0]["etag"],
                "/LICENSE: a MIME rule changes its ETag")
        T.check(plain_l["/img/photo.png"]["variants"][0]["etag"]
                != listing["/img/photo.png"]["variants"][0]["etag"],
                "/img/photo.png: an extra header changes its ETag")
        T.eq(T.run(["verify", plain]).returncode, 0, "verify of the plain pack")

        # Two rules giving one path a field it may carry once (here the CORS origin,
        # which a browser refuses twice): the build fails naming both rules and the
        # path, and the pack already at -o stays as it was.
        twice = os.path.join(work, "twice.json")
        with open(twice, "w") as f:
            json.dump({"headers": [
                {"match": "**", "name": "Access-Control-Allow-Origin", "value": "*"},
                {"match": "*.html", "name": "access-control-allow-origin", "value": "https://a.example"}]}, f)
        before = open(plain, "rb").read()
        p = T.run(["build", root, "-o", plain, "--rules", twice, "-q"])
        err = p.stderr.decode()
        T.eq(p.returncode, 1, "two Access-Control-Allow-Origin rules on one path: exit status (%s)" % err)
        T.check(twice in err and "/headers/0 and /headers/1" in err and ".html" in err and
                "only once" in err, "the message names the rules, the path and why: %r" % err)
        T.eq(open(plain, "rb").read(), before, "the pack at -o is untouched")

        # Every example rules file builds (and is valid JSON for the schema's sake), and
        # verify renders its header blocks again, the 404's too.
        exdir = os.path.join(T.SOURCE_DIR, "manifests", "examples")
        examples = sorted(f for f in os.listdir(exdir) if f.endswith(".json"))
        T.check(len(examples) >= 3, "at least three example rules files")
        for name in examples:
            out = os.path.join(work, name + ".lmdb")
            p = T.run(["build", root, "-o", out, "--rules", os.path.join(exdir, name), "-q"])
            T.eq(p.returncode, 0, "example %s builds: %s" % (name, p.stderr.decode()))
            p = T.run(["verify", out, "-q"])
            T.eq(p.returncode, 0, "example %s verifies: %s" % (name, p.stderr.decode()))
        # The 404 is no-cache whatever the rules say (a deploy that adds the path must
        # reach caches at once), but keeps the no-transform Cloudflare's rules ask for:
        # without it Cloudflare may recompress the page and weaken its ETag.
        cf = os.path.join(work, "cloudflare.json.lmdb")
        T.eq(dict(headers(cf, "status:404"))["Cache-Control"], "no-cache, no-transform",
             "cloudflare.json: the 404's Cache-Control")
        T.eq(dict(headers(cf, "/404.html"))["Cache-Control"],
             "public, max-age=0, s-maxage=60, must-revalidate, no-transform",
             "cloudflare.json: /404.html's own Cache-Control")
        T.eq(dict(headers(pack, "status:404"))["Cache-Control"], "no-cache",
             "without no-transform in the rules: the 404's Cache-Control")
        for schema in ("rules.schema.json", "manifest.schema.json"):
            with open(os.path.join(T.SOURCE_DIR, "manifests", schema), encoding="utf-8") as f:
                T.check("$schema" in json.load(f), "%s is a JSON schema" % schema)
        schema_agrees_with_packer(work, root)
    T.finish("test_pack_rules")


def schema_agrees_with_packer(work, root):
    """An editor or a CI step that checks a rules file against rules.schema.json must not
    pass what servd-pack then refuses: for Cache-Control values, header names and values
    and media types, the schema's patterns (ECMA-262 regexes; these use nothing Python's
    re reads otherwise) give servd-pack's verdict."""
    with open(os.path.join(T.SOURCE_DIR, "manifests", "rules.schema.json"), encoding="utf-8") as f:
        schema = json.load(f)
    props = schema["properties"]
    cc = props["cache_control"]["items"]["properties"]["value"]
    name = props["headers"]["items"]["properties"]["name"]

    def cc_ok(v):
        return bool(re.search(cc["pattern"], v)) and not any(
            re.search(a["pattern"], v) for a in cc["not"]["anyOf"])

    def name_ok(n):
        return bool(re.search(name["pattern"], n)) and not re.search(name["not"]["pattern"], n)

    field_value = schema["$defs"]["field_value"]
    mime = props["mime"]["items"]["properties"]["type"]

    def value_ok(v):
        return bool(re.search(field_value["pattern"], v))

    def mime_ok(t):
        return (value_ok(t) and bool(re.search(mime["pattern"], t))
                and not re.search(mime["not"]["pattern"], t))

    out = os.path.join(work, "schema-agrees.lmdb")
    rules = os.path.join(work, "schema-agrees.json")

    def agrees(what, values, schema_ok, rules_of):
        for v in values:
            with open(rules, "w") as f:
                json.dump(rules_of(v), f)
            p = T.run(["build", root, "-o", out, "--rules", rules, "-q"])
            T.eq(schema_ok(v), p.returncode == 0, "%s %r: the schema says %s, servd-pack %s (%s)"
                 % (what, v, schema_ok(v), p.returncode, p.stderr.decode().strip()))

    agrees("Cache-Control",
           ["public, max-age=3600", "max-age=abc", "max-age", "MAX-AGE=60", "s-maxage=",
            "public=1", "Immutable=yes", "no-cache=\"Set-Cookie, X-A\"", "private, max-age=0",
            ",", "public,,max-age=1", "max-age = 1", "stale-while-revalidate=30, public",
            "no-store, no-cache", "x-ext=\"a\\\"b\"", "public max-age=1", "max-age=1;",
            "x=\"a,public=1\"", "x-note=\"see,max-age=abc\", public", "a=\"q\", max-age"],
           cc_ok, lambda v: {"cache_control": [{"match": "**", "value": v}]})
    agrees("header",
           ["X-Robots-Tag", "content-type", "CACHE-CONTROL", "Vary", "Age", "age-x",
            "Content-Digest", "repr-digest", "Link", "TE", "Te-X", "ETag", "etag",
            "Content-Security-Policy", "Last-Modified"],
           name_ok, lambda n: {"headers": [{"match": "**", "name": n, "value": "v"}]})
    agrees("header value",
           ["v", "a b", "a\u00a0", "\u00a0a", " a", "a\t", "caf\u00e9", "a\u0085b", "a\u2028",
            "a\u009f", "\u20ac", "a\u3000"],
           value_ok, lambda v: {"headers": [{"match": "**", "name": "X-A", "value": v}]})
    agrees("mime type",
           ["text/plain", "text/plain; ", "text/plain;", "text/plain; foo", "text/*", "*/*",
            "*/plain", "text/plain; charset=\"utf-8\"", "text/plain;a=b;c=d", "text/plain ; a=b",
            "text/plain; a=\"x", "text/a/b", "text/plain; a=\u00e9", "text/plain; a=\"\u00e9\"",
            "text/plain; a=\"q\\\"\"", "text/plain;;", "text/plain; =b", "text/x*"],
           mime_ok, lambda t: {"mime": [{"match": "**", "type": t}]})


if __name__ == "__main__":
    main()
