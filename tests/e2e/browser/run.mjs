// run.mjs - loads the sample site from a running servd in a real headless Chromium and
// checks what a browser actually receives (over the DevTools protocol, so the headers
// checked are the ones on the wire, and cached responses are told apart).
//
//   node run.mjs --base http://127.0.0.1:PORT --root /path/to/www [--chromium /usr/bin/chromium]
//
// The browser is Debian's chromium, driven by playwright-core over CDP: no browser is ever
// downloaded. For every response of every page visited it checks:
//   - the status is 200 (or 304 on revalidation; 404 only for the page meant to be missing);
//   - its Content-Encoding, if any, is one the browser offered in that request's
//     Accept-Encoding (Chromium offers zstd only over HTTPS, so br or gzip here);
//   - the body Chromium decoded is byte-identical to the file in the web root;
// and that the page's script ran: body[data-ready=yes], the vendor script was found,
// /data/site.json was fetched and rendered (every feature title appears in #features),
// and that a cross-origin fetch with a custom header passes its CORS preflight, sees
// the 412 and the 416 of a failing If-Match and of a range past the end, and follows
// the 301 from /docs to /docs/.
// Exits 0 when everything holds; otherwise prints each failure and exits 1.
import { chromium } from "playwright-core";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

function arg(name, dflt) {
  const i = process.argv.indexOf("--" + name);
  if (i >= 0 && i + 1 < process.argv.length) return process.argv[i + 1];
  if (dflt === undefined) {
    console.error(`run.mjs: --${name} is required`);
    process.exit(2);
  }
  return dflt;
}

const base = arg("base").replace(/\/$/, "");
const root = arg("root");
const executablePath = arg("chromium", "/usr/bin/chromium");
// Pages to visit: the pages of the sample site that exist, and one missing path.
const PAGES = ["/", "/docs/", "/docs/guide.html", "/blog/", "/blog/2026/hello.html", "/about/"];
const MISSING = "/no/such/page";
// Per-page limits: a page that has not finished loading in this time is a failure.
const NAV_TIMEOUT_MS = 20000;
const READY_TIMEOUT_MS = 10000;

const failures = [];
const fail = (msg) => {
  failures.push(msg);
  console.log("FAIL " + msg);
};

// The file a URL path names inside the web root (directory -> index.html).
function fileFor(urlPath) {
  let p = decodeURIComponent(urlPath);
  if (p.endsWith("/")) p += "index.html";
  const full = path.join(root, p);
  if (!full.startsWith(path.resolve(root) + path.sep)) return null;
  return fs.existsSync(full) && fs.statSync(full).isFile() ? full : null;
}

function offered(acceptEncoding) {
  return (acceptEncoding || "")
    .split(",")
    .map((t) => t.split(";"))
    .filter((parts) => !/q\s*=\s*0(\.0*)?\s*$/i.test(parts.slice(1).join(";")))
    .map((parts) => parts[0].trim().toLowerCase())
    .filter((t) => t.length > 0);
}

async function main() {
  for (const p of [executablePath, root]) {
    if (!fs.existsSync(p)) {
      console.log(`FAIL ${p} does not exist`);
      process.exit(1);
    }
  }
  const userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), "servd-chromium-"));
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath,
    headless: true,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
  const encodingsSeen = new Map();
  let wireCount = 0;
  let cachedCount = 0;
  try {
    const page = context.pages()[0] || (await context.newPage());
    // What Playwright reports (page.on('response')) ...
    const seen = [];
    page.on("response", (res) => seen.push({ url: res.url(), status: res.status() }));
    page.on("pageerror", (err) => fail(`page script error: ${err.message}`));
    // ... and what went over the wire, from the DevTools protocol: the request headers
    // Chromium really sent (Accept-Encoding), the response status and headers servd really
    // sent (a 304 stays a 304), whether a response came from the cache, and the body
    // Chromium decoded, read as soon as it finished loading.
    const cdp = await context.newCDPSession(page);
    await cdp.send("Network.enable");
    let net = new Map();
    const rec = (id) => {
      if (!net.has(id)) net.set(id, { id });
      return net.get(id);
    };
    cdp.on("Network.requestWillBeSent", (e) => {
      const r = rec(e.requestId);
      r.url = e.request.url;
      r.method = e.request.method;
    });
    cdp.on("Network.requestWillBeSentExtraInfo", (e) => { rec(e.requestId).wireReq = e.headers; });
    cdp.on("Network.responseReceivedExtraInfo", (e) => {
      const r = rec(e.requestId);
      r.wireStatus = e.statusCode;
      r.wireRes = e.headers;
    });
    cdp.on("Network.responseReceived", (e) => {
      const r = rec(e.requestId);
      r.url = e.response.url;
      r.status = e.response.status;
      r.headers = e.response.headers;
      r.fromCache = r.fromCache || e.response.fromDiskCache;
    });
    cdp.on("Network.requestServedFromCache", (e) => { rec(e.requestId).fromCache = true; });
    cdp.on("Network.loadingFailed", (e) => { rec(e.requestId).failed = e.errorText; });
    cdp.on("Network.loadingFinished", (e) => {
      const r = rec(e.requestId);
      r.body = cdp.send("Network.getResponseBody", { requestId: e.requestId }).then(
        (b) => ({ bytes: Buffer.from(b.body, b.base64Encoded ? "base64" : "utf8") }),
        (err) => ({ error: err.message }));
    });

    const header = (h, name) => {
      for (const k of Object.keys(h || {})) if (k.toLowerCase() === name) return h[k];
      return undefined;
    };

    // Checks every request since the last call; returns the records for extra checks.
    const checkResponses = async (label, allowMissing) => {
      await new Promise((r) => setTimeout(r, 300)); // let late ExtraInfo events land
      const batch = [...net.values()];
      net = new Map();
      const urls = seen.splice(0, seen.length).map((x) => x.url);
      if (batch.length === 0) fail(`${label}: no responses recorded`);
      for (const u of urls)
        if (!batch.some((r) => r.url === u)) fail(`${label}: ${u} seen by Playwright, not on CDP`);
      for (const r of batch) {
        if (!r.url || !/^https?:/.test(r.url)) continue;
        const url = new URL(r.url);
        const what = `${label}: ${url.pathname}${url.search}`;
        if (url.origin !== new URL(base).origin) {
          fail(`${what}: request to another origin ${r.url}`);
          continue;
        }
        if (r.failed) {
          fail(`${what}: loading failed: ${r.failed}`);
          continue;
        }
        const missingPage = allowMissing && url.pathname === MISSING;
        const onWire = r.wireStatus !== undefined;
        const status = onWire ? r.wireStatus : r.status;
        r.onWire = onWire;
        if (missingPage ? status !== 404 : !(status === 200 || status === 304)) {
          fail(`${what}: status ${status}${missingPage ? " (want 404)" : ""}`);
          continue;
        }
        if (onWire) {
          wireCount++;
          const ae = header(r.wireReq, "accept-encoding");
          const ce = (header(r.wireRes, "content-encoding") || "").trim().toLowerCase();
          if (r.wireReq === undefined) fail(`${what}: the request headers sent were not recorded`);
          if (ce) {
            if (!offered(ae).includes(ce))
              fail(`${what}: Content-Encoding ${ce} was not offered (Accept-Encoding: ${ae})`);
            encodingsSeen.set(ce, (encodingsSeen.get(ce) || 0) + 1);
          }
          r.ce = ce || (status === 304 ? "(304)" : "identity");
        } else {
          cachedCount++;
          r.ce = "(cache)";
        }
        const file = missingPage ? fileFor("/404.html") : fileFor(url.pathname);
        if (!file) {
          fail(`${what}: no file in ${root} for this path`);
          continue;
        }
        const body = r.body ? await r.body : { error: "loading never finished" };
        if (body.error) {
          // Chromium keeps no body for some memory-cache hits (a preloaded font); the
          // network fetch of that resource was checked when it happened.
          if (onWire) fail(`${what}: body unavailable: ${body.error}`);
          else console.log(`note ${what}: cached, body not kept by Chromium`);
          continue;
        }
        const want = fs.readFileSync(file);
        if (!body.bytes.equals(want))
          fail(`${what}: decoded body (${body.bytes.length} bytes, ${r.ce}) differs from ` +
               `${file} (${want.length} bytes)`);
        else
          console.log(`ok ${what} ${status} ${r.ce} ${want.length} bytes`);
      }
      return batch;
    };

    for (const p of PAGES) {
      if (!fileFor(p)) {
        console.log(`note: ${p} is not in ${root}; skipped`);
        continue;
      }
      const res = await page.goto(base + p, { waitUntil: "load", timeout: NAV_TIMEOUT_MS });
      if (!res || res.status() !== 200) fail(`${p}: navigation status ${res && res.status()}`);
      try {
        await page.waitForFunction(() => document.body && document.body.dataset.ready === "yes",
                                   null, { timeout: READY_TIMEOUT_MS });
      } catch (e) {
        fail(`${p}: the page script did not run (body[data-ready] is ` +
             `${await page.evaluate(() => document.body && document.body.dataset.ready)})`);
      }
      const vendor = await page.evaluate(() => document.body.dataset.vendor);
      if (vendor !== "yes") fail(`${p}: body[data-vendor] is ${vendor} (vendor script not run)`);
      if (await page.$("#site-data")) {
        try {
          await page.waitForFunction(() => document.body.dataset.json !== undefined, null,
                                     { timeout: READY_TIMEOUT_MS });
        } catch (e) { /* reported below */ }
        const state = await page.evaluate(() => ({
          json: document.body.dataset.json,
          text: document.getElementById("site-data").innerText,
          items: Array.from(document.querySelectorAll("#features li h3")).map((e) => e.textContent),
        }));
        const data = JSON.parse(fs.readFileSync(path.join(root, "data", "site.json"), "utf8"));
        if (state.json !== "loaded") fail(`${p}: body[data-json] is ${state.json}: ${state.text}`);
        const titles = data.features.map((f) => f.title);
        if (JSON.stringify(state.items) !== JSON.stringify(titles))
          fail(`${p}: rendered features ${JSON.stringify(state.items)} != site.json ${JSON.stringify(titles)}`);
        if (!state.text.includes(data.tagline)) fail(`${p}: tagline from site.json not rendered`);
      }
      // Let late requests (fonts, favicon) finish before checking the batch.
      await page.waitForLoadState("networkidle", { timeout: NAV_TIMEOUT_MS }).catch(() => {});
      await checkResponses(p, false);
    }

    // A missing page: 404 with the site's 404.html, still decoded correctly.
    const res404 = await page.goto(base + MISSING, { waitUntil: "load", timeout: NAV_TIMEOUT_MS });
    if (!res404 || res404.status() !== 404) fail(`${MISSING}: status ${res404 && res404.status()}`);
    await page.waitForLoadState("networkidle", { timeout: NAV_TIMEOUT_MS }).catch(() => {});
    await checkResponses(MISSING, true);

    // Reload the home page: the HTML is no-cache, so Chromium revalidates it with its
    // ETag and servd must answer 304; the page still renders from the cached bytes.
    await page.goto(base + "/", { waitUntil: "load", timeout: NAV_TIMEOUT_MS });
    await page.waitForLoadState("networkidle", { timeout: NAV_TIMEOUT_MS }).catch(() => {});
    await checkResponses("/ again", false);
    await page.reload({ waitUntil: "load", timeout: NAV_TIMEOUT_MS });
    await page.waitForLoadState("networkidle", { timeout: NAV_TIMEOUT_MS }).catch(() => {});
    const again = await checkResponses("reload /", false);
    const doc = again.find((r) => r.url === base + "/");
    if (!doc || doc.wireStatus !== 304)
      fail(`reload /: the revalidated page got ${doc ? doc.wireStatus : "no request"} (want 304)`);
    if ((await page.evaluate(() => document.body.dataset.ready)) !== "yes")
      fail("reload /: the page script did not run after the 304");

    // CORS: the same servd under another origin (localhost instead of 127.0.0.1). A fetch
    // with a header that is not CORS-safelisted makes Chromium send a preflight OPTIONS
    // first; the rules gave /data/site.json Access-Control-Allow-Origin and -Headers, and
    // the preflight must carry them too, or the fetch fails. /robots.txt has no CORS
    // headers: that fetch must fail.
    const other = base.replace("://127.0.0.1", "://localhost");
    const crossFetch = (url, headers = { "X-Client": "1" }) => page.evaluate(async ([u, h]) => {
      try {
        const r = await fetch(u, { headers: h, cache: "no-store" });
        return { status: r.status, url: r.url, text: await r.text() };
      } catch (e) {
        return { error: String(e) };
      }
    }, [url, headers]);
    const cors = await crossFetch(other + "/data/site.json");
    const want = fs.readFileSync(path.join(root, "data", "site.json"), "utf8");
    if (cors.error || cors.status !== 200 || cors.text !== want)
      fail(`cross-origin fetch of /data/site.json with X-Client: ${JSON.stringify(cors).slice(0, 200)}`);
    // A failed precondition, a range past the end, and the 301 from /docs to /docs/: the
    // script must see the 412 and the 416, and follow the 301, which it can only when they
    // carry the CORS headers too (a browser checks CORS on every status, and on every
    // response of a redirect chain).
    const failedIf = await crossFetch(other + "/data/site.json", { "If-Match": '"not-it"' });
    if (failedIf.error || failedIf.status !== 412)
      fail(`cross-origin fetch with a failing If-Match: ${JSON.stringify(failedIf).slice(0, 200)} (want 412)`);
    const pastEnd = await crossFetch(other + "/data/site.json", { "Range": "bytes=99999999-" });
    if (pastEnd.error || pastEnd.status !== 416)
      fail(`cross-origin fetch of a range past the end: ${JSON.stringify(pastEnd).slice(0, 200)} (want 416)`);
    const dir = await crossFetch(other + "/docs", {});
    const docs = fs.readFileSync(path.join(root, "docs", "index.html"), "utf8");
    if (dir.error || dir.status !== 200 || dir.url !== other + "/docs/" || dir.text !== docs)
      fail(`cross-origin fetch of /docs (301 to /docs/): ${JSON.stringify(dir).slice(0, 200)}`);
    // The same with a custom header: a preflight first, which must get a 200 (a
    // redirect fails a preflight), then the GET's 301 and the page.
    const dirPre = await crossFetch(other + "/docs");
    if (dirPre.error || dirPre.status !== 200 || dirPre.url !== other + "/docs/" || dirPre.text !== docs)
      fail(`preflighted cross-origin fetch of /docs: ${JSON.stringify(dirPre).slice(0, 200)}`);
    const denied = await crossFetch(other + "/robots.txt");
    if (!denied.error)
      fail(`cross-origin fetch of /robots.txt (no CORS rules) succeeded: ${denied.status}`);

    const compressed = (encodingsSeen.get("br") || 0) + (encodingsSeen.get("gzip") || 0) +
                       (encodingsSeen.get("zstd") || 0);
    if (compressed === 0) fail("no response arrived compressed: Chromium offered br/gzip");
    console.log(`encodings seen on the wire: ${JSON.stringify(Object.fromEntries(encodingsSeen))}; ` +
                `${wireCount} responses from servd, ${cachedCount} from Chromium's cache`);
  } finally {
    await context.close();
    fs.rmSync(userDataDir, { recursive: true, force: true });
  }
  if (failures.length) {
    console.log(`browser: ${failures.length} check(s) failed`);
    process.exit(1);
  }
  console.log("browser: all checks passed");
}

main().catch((e) => {
  console.log("FAIL " + (e && e.stack ? e.stack : e));
  process.exit(1);
});
