#!/usr/bin/env python3
"""The deploy recipe of docs/deploy.md, run verbatim against a real servd.

The shell block between `<!-- recipe:begin -->` and `<!-- recipe:end -->` in docs/deploy.md
is extracted and sourced by /bin/sh, so what the document tells operators to run is what
is tested: build_pack builds two versions of a site (the second with --base) with
manifests/examples/surrogate-keys.json; activate switches servd from one to the other
(verify, diff --json and the URL purge list, symlink + mv -T, SIGHUP, /healthz and
/metrics); the purge lists name exactly what changed, percent-encoded, with directory
URLs for index.html; a corrupt release is refused before anything changes; rollback
with and without a name; keep N deletes all but the newest N releases and never the live
one; the Surrogate-Key and Cache-Tag headers of the rules are served on 200 and 304."""
import json
import os
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servdtest as st  # noqa: E402
from servdtest import eq, ok  # noqa: E402

DEPLOY_MD = os.path.join(st.SOURCE_DIR, "docs", "deploy.md")
RULES = os.path.join(st.SOURCE_DIR, "manifests", "examples", "surrogate-keys.json")
# Unchanged files keep this mtime in every version (docs/deploy.md: stable mtimes give a
# purge list of only what changed); changed files get CHANGED_MTIME.
STABLE_MTIME = 1700000000
CHANGED_MTIME = 1700086400

V1 = {
    "/index.html": b"<!doctype html><title>home</title><p>version 1 of the home page</p>\n",
    "/docs/index.html": b"<!doctype html><title>docs</title><p>docs, version 1</p>\n",
    "/docs/guide.html": b"<!doctype html><title>guide</title><p>the same in both</p>\n",
    "/assets/app.3f9a1c2e.js": b"console.log('the same hashed asset in both versions');\n" * 8,
    "/a b.txt": b"a file with a space, unchanged\n",
    "/old.txt": b"only in version 1\n",
}
V2 = dict(V1)
V2.update({
    "/index.html": b"<!doctype html><title>home</title><p>version 2 of the home page</p>\n",
    "/docs/index.html": b"<!doctype html><title>docs</title><p>docs, version 2</p>\n",
    "/new file.txt": b"added in version 2\n",
    "/caf\u00e9.txt".encode("utf-8").decode("latin-1"): b"added in version 2, UTF-8 name\n",
})
del V2["/old.txt"]


def fs_path(root, url_path):
    """The file of a site path (site paths of V1/V2 are latin-1 strings of UTF-8 bytes)."""
    return os.path.join(root.encode(), url_path.encode("latin-1").lstrip(b"/"))


def write_site(root, files, changed=()):
    for path, data in files.items():
        full = fs_path(root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb") as f:
            f.write(data)
        t = CHANGED_MTIME if path in changed else STABLE_MTIME
        os.utime(full, (t, t))


def recipe_script():
    with open(DEPLOY_MD, encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"<!-- recipe:begin -->\s*```sh\n(.*?)```\s*<!-- recipe:end -->", text, re.S)
    ok(m is not None, "docs/deploy.md has no ```sh block between the recipe markers")
    path = os.path.join(st.tmpdir(), "deploy-recipe.sh")
    with open(path, "w") as f:
        f.write(m.group(1))
    return path


class Deploy:
    """A CI directory, an origin's SERVD_HOME and a servd serving SERVD_HOME/site.lmdb."""

    def __init__(self):
        st.ensure_binaries()
        self.recipe = recipe_script()
        self.root = os.path.join(st.tmpdir(), "deploy")
        self.ci = os.path.join(self.root, "ci")
        self.home = os.path.join(self.root, "srv")
        for d in (self.ci, os.path.join(self.home, "releases")):
            os.makedirs(d)
        self.adm = st.free_port()
        self.servd = None
        self.ids = {}

    def sh(self, script, check=True, cwd=None, reload=None):
        env = dict(os.environ)
        env.update({
            "SERVD_HOME": self.home,
            "SERVD_ADMIN": "127.0.0.1:%d" % self.adm,
            "SERVD_PACK_BIN": st.SERVD_PACK,
            "SERVD_RELOAD": reload or ("kill -HUP %d" % self.servd.proc.pid if self.servd
                                       else "false"),
            "LC_ALL": "C",
        })
        env.pop("SOURCE_DATE_EPOCH", None)
        p = subprocess.run(["sh", "-c", '. "$0"; ' + script, self.recipe], cwd=cwd or self.home,
                           env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
        if check and p.returncode != 0:
            raise st.Fail("recipe `%s` failed (exit %d)\nstdout: %s\nstderr: %s" % (
                script, p.returncode, p.stdout.decode(errors="replace"),
                p.stderr.decode(errors="replace")))
        return p

    def build(self, sha, files, changed=()):
        """CI: write the site and run the recipe's build_pack; returns the pack id."""
        web = os.path.join(self.root, "public-" + sha)
        write_site(web, files, changed)
        self.sh('build_pack "%s" "%s" "%s"' % (sha, web, RULES), cwd=self.ci)
        with open(os.path.join(self.ci, "site-%s.json" % sha)) as f:
            self.ids[sha] = json.load(f)["pack_id"]
        return self.ids[sha]

    def ship(self, sha, mtime):
        """Copy a release to the origin as `rsync -t` would (the build's mtime kept)."""
        for ext in (".lmdb", ".json"):
            dst = os.path.join(self.home, "releases", "site-%s%s" % (sha, ext))
            shutil.copyfile(os.path.join(self.ci, "site-%s%s" % (sha, ext)), dst)
            os.utime(dst, (mtime, mtime))

    def start(self, sha):
        os.symlink("releases/site-%s.lmdb" % sha, os.path.join(self.home, "site.lmdb"))
        self.servd = st.Servd(os.path.join(self.home, "site.lmdb"), workers=2,
                              extra=["--admin", "127.0.0.1:%d" % self.adm]).start()

    def live(self):
        return os.readlink(os.path.join(self.home, "site.lmdb"))

    def healthz(self):
        return st.get(self.adm, "/healthz").body.decode().rstrip("\n")

    def metrics(self):
        return st.get(self.adm, "/metrics").body.decode()

    def releases(self):
        return sorted(os.listdir(os.path.join(self.home, "releases")))

    def serves(self, files, what):
        for path, data in files.items():
            r = st.get(self.servd.port, st.url(path.encode("latin-1").decode("utf-8")))
            eq((r.status, r.body), (200, data), "%s: GET %s" % (what, path))

    def read(self, name):
        with open(os.path.join(self.home, name), "rb") as f:
            return f.read()


def t_recipe(d):
    id1 = d.build("v1", V1)
    id2 = d.build("v2", V2, changed={"/index.html", "/docs/index.html", "/new file.txt",
                                     "/caf\u00e9.txt".encode("utf-8").decode("latin-1")})
    ok(id1 != id2, "two versions, two pack ids")
    # A warning about the tree fails build_pack (--strict), and nothing is written.
    bad = os.path.join(d.root, "public-warned")
    write_site(bad, dict(V2, **{"/old/index.htm": b"<p>an index servd never serves</p>\n"}))
    p = d.sh('build_pack warned "%s" "%s"' % (bad, RULES), check=False, cwd=d.ci)
    err = p.stderr.decode(errors="replace")
    ok(p.returncode == 1 and "index.htm" in err and "--strict: 1 warning above about" in err,
       "build_pack of a tree with a warning: exit %d, %r" % (p.returncode, err))
    ok(not os.path.exists(os.path.join(d.ci, "site-warned.lmdb")) and
       not os.path.exists(os.path.join(d.ci, "site-warned.json")),
       "build_pack of a tree with a warning wrote something")
    now = time.time()
    d.ship("v1", now - 300)
    d.ship("v2", now - 200)
    d.start("v1")
    d.sh('wait_for_pack "%s"' % id1)
    d.serves(V1, "v1 live")

    # Switch to v2.
    d.sh("activate v2")
    eq(d.live(), "releases/site-v2.lmdb", "the served link after activate v2")
    ok(not os.path.lexists(os.path.join(d.home, ".site.lmdb.new")), "leftover .site.lmdb.new")
    eq(d.healthz(), "ok " + id2, "/healthz after activate v2")
    ok('servd_pack_info{pack_id="%s",path="%s"} 1' % (id2, os.path.join(d.home, "site.lmdb"))
       in d.metrics(), "/metrics does not name pack %s:\n%s" % (id2, d.metrics()))
    ok("servd_pack_swaps_total 1" in d.metrics(), "servd_pack_swaps_total after one switch")
    d.serves(V2, "v2 live")
    eq(st.get(d.servd.port, "/old.txt").status, 404, "a path removed in v2")
    cafe = "/caf\u00e9.txt".encode("utf-8").decode("latin-1")
    eq({k: v for k, v in json.loads(d.read("purge-v2.json")).items()
        if k in ("added", "changed", "removed")},
       {"added": [cafe.encode("latin-1").decode("utf-8"), "/new file.txt"],
        "changed": ["/docs/index.html", "/index.html"], "removed": ["/old.txt"]},
       "purge-v2.json (servd-pack diff --json)")
    # /docs/index.html changed, not added: /docs still answers the same 301, so it is not
    # purged; the files' URLs are percent-encoded by servd-pack diff itself.
    eq(d.read("purge-v2.txt").decode().splitlines(),
       ["/", "/caf%C3%A9.txt", "/docs/", "/docs/index.html", "/index.html",
        "/new%20file.txt", "/old.txt"], "purge-v2.txt (URL paths)")
    # Every URL of the purge list is one a client uses: the kept ones answer 200.
    for u in d.read("purge-v2.txt").decode().splitlines():
        want = 404 if u == "/old.txt" else 200
        eq(st.get(d.servd.port, u).status, want, "GET %s from the purge list" % u)

    # The surrogate keys of the rules, on 200 and 304.
    for path, key, tag in (("/index.html", "site html", "site,html"),
                           ("/docs/", "site html", "site,html"),
                           ("/assets/app.3f9a1c2e.js", "site assets", "site,assets")):
        for coding in (None, "gzip"):
            r = st.get(d.servd.port, path, [("Accept-Encoding", coding)] if coding else [])
            eq((r.status, r.all("Surrogate-Key"), r.all("Cache-Tag")), (200, [key], [tag]),
               "surrogate keys of %s (%s)" % (path, coding))
            r304 = st.get(d.servd.port, path, ([("Accept-Encoding", coding)] if coding else [])
                          + [("If-None-Match", r.need("ETag"))])
            eq((r304.status, r304.all("Surrogate-Key"), r304.all("Cache-Tag")),
               (304, [key], [tag]), "surrogate keys of the 304 of %s (%s)" % (path, coding))
    eq(st.get(d.servd.port, "/a%20b.txt").all("Surrogate-Key"), [],
       "a path no header rule matches")

    # A corrupt release is refused before the link moves.
    bad = os.path.join(d.home, "releases", "site-bad.lmdb")
    with open(os.path.join(d.home, "releases", "site-v1.lmdb"), "rb") as f:
        data = bytearray(f.read())
    data[len(data) // 2] ^= 0xFF
    data[len(data) // 2 + 4096] ^= 0xFF
    with open(bad, "wb") as f:
        f.write(data[:len(data) - 4096])
    shutil.copyfile(os.path.join(d.home, "releases", "site-v1.json"),
                    os.path.join(d.home, "releases", "site-bad.json"))
    p = d.sh("activate bad", check=False)
    err = p.stderr.decode(errors="replace")
    ok(p.returncode == 1 and err.startswith("servd-pack: ") and "site-bad.lmdb" in err,
       "activate of a corrupt release: refused by servd-pack verify (exit %d, %r)"
       % (p.returncode, err))
    eq(d.live(), "releases/site-v2.lmdb", "the served link after a refused release")
    eq(d.healthz(), "ok " + id2, "/healthz after a refused release")
    os.unlink(bad)
    os.unlink(os.path.join(d.home, "releases", "site-bad.json"))

    # Rollback to the newest other release, then forward by name.
    d.sh("rollback")
    eq(d.live(), "releases/site-v1.lmdb", "the served link after rollback")
    eq(d.healthz(), "ok " + id1, "/healthz after rollback")
    d.serves(V1, "after rollback")
    eq(d.read("purge-v1.txt").decode().splitlines(),
       ["/", "/caf%C3%A9.txt", "/docs/", "/docs/index.html", "/index.html",
        "/new%20file.txt", "/old.txt"], "purge list of the rollback")
    eq(json.loads(d.read("purge-v1.json"))["removed"],
       [cafe.encode("latin-1").decode("utf-8"), "/new file.txt"], "removed by the rollback")
    d.sh("rollback v2")
    eq(d.healthz(), "ok " + id2, "/healthz after rollback v2")
    ok("servd_pack_swaps_total 3" in d.metrics(), "servd_pack_swaps_total after three switches")

    # A reload command that fails (servd started by hand, the default systemctl): the
    # link has moved, servd's watch loads the release anyway, and activate says so and
    # succeeds once servd serves it, rather than failing with the new release live.
    p = d.sh("activate v1", reload="false")
    ok("the reload command failed" in p.stderr.decode(), "activate says: %r" % p.stderr)
    eq(d.healthz(), "ok " + id1, "/healthz after an activation whose reload failed")
    d.sh("rollback v2")
    eq(d.healthz(), "ok " + id2, "/healthz after rollback v2, again")

    # keep N: two newer releases arrive; the live one (v2) is older than both.
    for n, sha in enumerate(("v3", "v4")):
        files = dict(V2, **{"/index.html": b"<p>%s</p>\n" % sha.encode()})
        d.build(sha, files, changed={"/index.html"})
        d.ship(sha, now - 100 + 50 * n)
    eq(d.releases(), ["site-v%d.%s" % (i, e) for i in range(1, 5) for e in ("json", "lmdb")],
       "releases before keep")
    purge_v1 = [os.path.join(d.home, "purge-v1." + e) for e in ("txt", "json")]
    ok(all(os.path.exists(f) for f in purge_v1), "activate v1 wrote its purge lists")
    d.sh("keep 2")
    ok(not any(os.path.exists(f) for f in purge_v1), "keep deleted v1's purge lists too")
    eq(d.releases(), ["site-v%d.%s" % (i, e) for i in (2, 3, 4) for e in ("json", "lmdb")],
       "releases after keep 2 (v4, v3 and the live v2)")
    d.sh("keep 1")
    eq(d.releases(), ["site-v%d.%s" % (i, e) for i in (2, 4) for e in ("json", "lmdb")],
       "releases after keep 1 (v4 and the live v2)")
    eq(d.healthz(), "ok " + id2, "/healthz after keep")
    d.serves(V2, "after keep")

    # A release that passes verify and is then refused by servd (here: cut short
    # between verify and the reload, by a reload command that needs the shell): the
    # link points at it, servd still serves v2. keep spares both; rollback goes back
    # to v2 although the refused file can no longer be compared with anything.
    p = d.sh("activate v4", check=False,
             reload='truncate -s 8192 "$SERVD_HOME/releases/site-v4.lmdb"; kill -HUP %d'
             % d.servd.proc.pid)
    ok(p.returncode != 0, "activate of a release servd refuses succeeded")
    ok("servd does not serve pack" in p.stderr.decode(), "activate says why: %r" % p.stderr)
    eq((d.live(), d.healthz()), ("releases/site-v4.lmdb", "ok " + id2),
       "link and pack after the refused activation")
    # servd's log names the release the link led to, not only the link
    site = os.path.join(d.home, "site.lmdb")
    rel = os.path.realpath(os.path.join(d.home, "releases"))
    ok("refused %s (-> %s): " % (site, os.path.join(rel, "site-v4.lmdb")) in d.servd.read_log(),
       "the refusal names the release: %s" % d.servd.read_log()[-1500:])
    ok(re.search(r"now serving pack %s \(\d+ paths\) from %s \(-> %s\)$"
                 % (id2, re.escape(site), re.escape(os.path.join(rel, "site-v2.lmdb"))),
                 d.servd.read_log(), re.M),
       "a swap names the release: %s" % d.servd.read_log()[-1500:])
    d.sh("keep 0")
    eq(d.releases(), ["site-v%d.%s" % (i, e) for i in (2, 4) for e in ("json", "lmdb")],
       "keep spares the release servd serves and the link's")
    d.sh("rollback")
    eq((d.live(), d.healthz()), ("releases/site-v2.lmdb", "ok " + id2),
       "link and pack after rolling back from the refused release")
    d.serves(V2, "after the rollback from a refused release")
    st.get(d.servd.port, "/")  # still answering
    ok(d.servd.alive(), "servd died: %s" % d.servd.read_log())


class Setup:
    def __enter__(self):
        self.d = Deploy()
        return self.d

    def __exit__(self, et, ev, tb):
        if self.d.servd:
            self.d.servd.stop(check=et is None)
        return False


if __name__ == "__main__":
    st.run([t_recipe], setup=Setup)
