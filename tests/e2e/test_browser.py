#!/usr/bin/env python3
"""A real browser against a real servd: packs www/, starts servd, and runs
tests/e2e/browser/run.mjs, which drives Debian's headless Chromium with playwright-core
(executablePath /usr/bin/chromium; no browser is ever downloaded). It checks that every
resource arrives 200/304 with an encoding Chromium offered, decodes to the packed bytes,
that the page's script ran and rendered /data/site.json, and that a cross-origin fetch
with a custom header passes its CORS preflight (OPTIONS) where rules allow it, and that
such a fetch sees the 412 of a failing If-Match and the 416 of a range past the end, and
follows the 301 from /docs to /docs/.

Installs nothing itself except the pinned npm dependency (`npm ci`, when node_modules is
missing); tests/deps.sh test installs chromium and nodejs. A missing chromium, node or
npm is a failure, never a skip."""
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servdtest as st  # noqa: E402

BROWSER_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "browser")
CHROMIUM = "/usr/bin/chromium"
# The whole browser run (launch, six pages, a 404 and a reload) must end within this.
RUN_TIMEOUT = 180


def main():
    missing = [what for what, ok in (("chromium (%s)" % CHROMIUM, os.access(CHROMIUM, os.X_OK)),
                                     ("node", shutil.which("node")), ("npm", shutil.which("npm")))
               if not ok]
    if missing:
        print("FAIL missing: %s (run tests/deps.sh test)" % ", ".join(missing))
        return 1
    if not st.www_exists():
        print("FAIL %s/index.html does not exist: nothing to load" % st.WWW)
        return 1
    if not os.path.isdir(os.path.join(BROWSER_DIR, "node_modules", "playwright-core")):
        p = subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=BROWSER_DIR,
                           env=dict(os.environ, PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD="1"),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
        if p.returncode != 0:
            print("FAIL npm ci in %s:\n%s" % (BROWSER_DIR, p.stdout.decode(errors="replace")))
            return 1
    # CORS for /data/site.json, as a rules file sets it up: run.mjs fetches it from the
    # other origin with a custom header, which takes a preflight (OPTIONS) first.
    rules = os.path.join(st.tmpdir(), "browser-rules.json")
    with open(rules, "w") as f:
        json.dump({"headers": [
            {"match": "/data/site.json", "name": "Access-Control-Allow-Origin", "value": "*"},
            {"match": "/data/site.json", "name": "Access-Control-Allow-Headers",
             "value": "X-Client, If-Match, Range"},
            {"match": "/docs/index.html", "name": "Access-Control-Allow-Origin", "value": "*"},
            {"match": "/docs/index.html", "name": "Access-Control-Allow-Headers",
             "value": "X-Client"}]}, f)
    pack = st.pack(st.WWW, "www-browser.lmdb", extra=["--rules", rules])
    with st.Servd(pack, workers=2) as srv:
        cmd = ["node", os.path.join(BROWSER_DIR, "run.mjs"), "--base",
               "http://127.0.0.1:%d" % srv.port, "--root", st.WWW, "--chromium", CHROMIUM]
        try:
            p = subprocess.run(cmd, cwd=BROWSER_DIR, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, timeout=RUN_TIMEOUT)
        except subprocess.TimeoutExpired as e:
            print((e.stdout or b"").decode(errors="replace"))
            print("FAIL the browser run took longer than %ds" % RUN_TIMEOUT)
            return 1
        print(p.stdout.decode(errors="replace"))
        if p.returncode != 0:
            print("FAIL browser run exited %d" % p.returncode)
            return 1
        if not srv.alive():
            print("FAIL servd died during the browser run:\n" + srv.read_log())
            return 1
    print("1 passed, 0 failed")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except st.Fail as e:
        print("FAIL %s" % e)
        sys.exit(1)
