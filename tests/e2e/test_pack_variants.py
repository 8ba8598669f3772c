"""Every variant of every file decodes to the original bytes, and every stored header
block follows the contract with servd (docs/format.md section 6).

Runs on www/ (the sample site) and on a generated fixture tree that covers the
packer's cases (unicode names, no extension, duplicates, sidecars, dotfiles, fonts,
images, wasm, tiny and empty files)."""
import base64
import hashlib
import os
import random
import re
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "pack"))
import packtest as T  # noqa: E402

NEVER_COMPRESSED = ("image/png", "image/webp", "font/woff2", "application/x-brotli")
TEXT_PREFIXES = ("text/", "application/json", "image/svg+xml", "application/manifest+json")


def etag_of(data, mime, block):
    """docs/format.md 6.3: b64url of SHA-256(SHA-256(bytes) || type || CRLF || extra
    header lines)[:16]; the extra lines are those after the 200 block's Accept-Ranges."""
    extras = block.split(b"\r\nAccept-Ranges: bytes\r\n", 1)[1]
    d = hashlib.sha256(hashlib.sha256(data).digest() + mime.encode() + b"\r\n" + extras)
    return '"%s"' % base64.urlsafe_b64encode(d.digest()[:16]).decode().rstrip("=")


def check_site(name, root, work):
    pack = os.path.join(work, name + ".lmdb")
    T.build(root, pack)
    want = T.source_files(root)
    listing = T.ls_json(pack)
    got_paths = [e["path"] for e in listing]
    T.eq(got_paths, sorted(want, key=lambda k: k.encode()), "%s: packed paths (byte order)" % name)

    for e in listing:
        path = e["path"]
        src = want.get(path)
        if src is None:
            continue
        encs = [v["encoding"] for v in e["variants"]]
        T.eq(encs[0], "identity", "%s %s: variants[0]" % (name, path))
        T.eq(e["size"], len(src), "%s %s: identity size" % (name, path))
        negotiable = len(encs) > 1
        mime = e["mime"]
        if mime.startswith(NEVER_COMPRESSED):
            T.eq(encs, ["identity"], "%s %s (%s): already-compressed type" % (name, path, mime))
        if mime.startswith(TEXT_PREFIXES) and path.endswith((".html", ".css", ".js", ".svg")):
            T.check(mime.endswith("; charset=utf-8"), "%s %s: text type without charset: %s"
                    % (name, path, mime))
        if path.endswith(".json"):  # RFC 8259 defines no charset parameter
            T.eq(mime, "application/json", "%s %s: JSON type" % (name, path))
        for v in e["variants"]:
            enc = v["encoding"]
            stored = T.cat(pack, path, enc)
            T.eq(len(stored), v["size"], "%s %s %s: stored length" % (name, path, enc))
            block = T.cat(pack, path, enc, headers=True)
            T.eq(v["etag"], etag_of(stored, mime, block),
                 "%s %s %s: ETag derived from the bytes, type and extra headers" % (name, path, enc))
            try:
                back = T.decode(enc, stored)
            except Exception as ex:  # noqa: BLE001 - report any decoder failure
                T.fail("%s %s %s: does not decode: %s" % (name, path, enc, ex))
                continue
            T.check(back == src, "%s %s %s: decodes to %d bytes that differ from the %d source bytes"
                    % (name, path, enc, len(back), len(src)))
            if enc != "identity":
                # keep rule: at least 5% and 64 bytes smaller
                saved = len(src) - len(stored)
                T.check(saved >= 64 and saved * 100 >= 5 * len(src),
                        "%s %s %s: kept although it saves only %d of %d bytes"
                        % (name, path, enc, saved, len(src)))
            status, hdrs = T.parse_headers(T.cat(pack, path, enc, headers=True))
            T.eq(status, "HTTP/1.1 200 OK", "%s %s %s: status line" % (name, path, enc))
            names = [h[0] for h in hdrs]
            want_names = ["Content-Length", "Content-Type"] + \
                (["Content-Encoding"] if enc != "identity" else []) + \
                ["ETag", "Last-Modified", "Cache-Control"] + \
                (["Vary"] if negotiable else []) + ["Accept-Ranges"]
            T.eq(names[:len(want_names)], want_names, "%s %s %s: header order" % (name, path, enc))
            h = dict(hdrs)
            T.eq(h.get("Content-Length"), str(len(stored)), "%s %s %s: Content-Length" % (name, path, enc))
            T.eq(h.get("Content-Type"), mime, "%s %s %s: Content-Type" % (name, path, enc))
            T.eq(h.get("ETag"), v["etag"], "%s %s %s: ETag header" % (name, path, enc))
            if enc != "identity":
                T.eq(h.get("Content-Encoding"), enc, "%s %s %s: Content-Encoding" % (name, path, enc))
            if negotiable:
                T.eq(h.get("Vary"), "Accept-Encoding", "%s %s %s: Vary" % (name, path, enc))
            T.eq(names.count("Vary"), 1 if negotiable else 0, "%s %s %s: Vary lines" % (name, path, enc))
            T.check(h.get("Last-Modified", "").endswith(" GMT"), "%s %s: Last-Modified %r"
                    % (name, path, h.get("Last-Modified")))

    if "/404.html" in want:
        # The special status:404 entry: same bodies, 404 blocks without validators.
        for v in next(e for e in listing if e["path"] == "/404.html")["variants"]:
            enc = v["encoding"]
            T.eq(T.cat(pack, "status:404", enc), T.cat(pack, "/404.html", enc),
                 "%s status:404 %s: same body as /404.html" % (name, enc))
            status, hdrs = T.parse_headers(T.cat(pack, "status:404", enc, headers=True))
            T.eq(status, "HTTP/1.1 404 Not Found", "%s status:404 %s: status" % (name, enc))
            names = [h[0] for h in hdrs]
            for absent in ("ETag", "Last-Modified", "Accept-Ranges"):
                T.check(absent not in names, "%s status:404 %s: has %s" % (name, enc, absent))
            T.eq(dict(hdrs).get("Cache-Control"), "no-cache", "%s status:404 %s: Cache-Control" % (name, enc))
    return pack, listing


def check_copies(work):
    """Copies (the same page under several versions of a documentation site): a file
    with the bytes and class of an earlier one takes that file's variants instead of
    being compressed again, and the summary counts it. A copy named .txt is text too, so
    it is one; a font with the same bytes is compressed as a font (brotli's FONT mode),
    so it is not. Every copy still has every encoding, each decoding to its bytes."""
    root = os.path.join(work, "copies")
    script = T._text(random.Random(3), 40000, T.WORDS).encode()
    other = T._text(random.Random(4), 40000, T.WORDS).encode()
    for rel, data in (("app.js", script), ("v1/app.js", script), ("v2/app.js", script),
                      ("v2/app.txt", script), ("fonts/app.ttf", script), ("other.js", other)):
        os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
        with open(os.path.join(root, rel), "wb") as f:
            f.write(data)
    out = os.path.join(work, "copies-summary.lmdb")
    p = T.run(["build", root, "-o", out, "--jobs", "2"])
    T.eq(p.returncode, 0, "build of the copies: " + p.stderr.decode(errors="replace"))
    m = re.search(rb"from an identical file: (\d+)", p.stderr)
    T.check(m is not None, "the summary counts the copies: " + p.stderr.decode(errors="replace"))
    T.eq(int(m.group(1)) if m else None, 3, "files that took an identical file's variants")
    _, listing = check_site("copies", root, work)
    sizes = {e["path"]: [(v["encoding"], v["size"]) for v in e["variants"]] for e in listing}
    T.eq(len(sizes["/app.js"]), len(T.ENCODINGS), "the first copy has every encoding")
    for path in ("/v1/app.js", "/v2/app.js", "/v2/app.txt"):
        T.eq(sizes[path], sizes["/app.js"], "%s: the variants of /app.js" % path)


def main():
    with T.TempDir() as work:
        root = os.path.join(work, "site")
        T.make_site(root)
        pack, listing = check_site("fixture", root, work)
        by_path = {e["path"]: e for e in listing}
        # Specific expectations on the fixture.
        for p in ("/index.html", "/css/site.css", "/js/app.3f9a1c2e.js", "/data/site.json",
                  "/img/logo.svg", "/app.wasm", "/fonts/b.ttf", "/LICENSE"):
            encs = [v["encoding"] for v in by_path[p]["variants"]]
            T.eq(encs, list(T.ENCODINGS), "fixture %s: all three encodings kept" % p)
        T.eq(by_path["/LICENSE"]["mime"], "text/plain; charset=utf-8", "libmagic text")
        T.eq(by_path["/blob"]["mime"], "application/octet-stream", "libmagic binary")
        T.eq(by_path["/js/lone.js.br"]["mime"], "application/x-brotli", "lone sidecar type")
        T.eq(by_path["/tiny.txt"]["variants"][1:], [], "tiny file: identity only")
        T.eq(by_path["/empty.txt"]["size"], 0, "empty file")
        T.eq(by_path["/dup/one.txt"]["etag"], by_path["/dup/two.txt"]["etag"], "duplicates share ETag")
        T.eq(by_path["/js/app.js.gz"]["mime"], "application/gzip", "js/app.js.gz packed as a file")
        T.eq([v["encoding"] for v in by_path["/js/app.js.gz"]["variants"]], ["identity"],
             "a precompressed copy is served as it is")
        T.check("/.well-known/security.txt" in by_path, ".well-known packed")
        T.eq(by_path["/js/app.3f9a1c2e.js"]["cache_control"], "public, max-age=31536000, immutable",
             "hashed name immutable")
        T.eq(by_path["/index.html"]["cache_control"], "no-cache", "HTML no-cache")
        T.eq(by_path["/css/site.css"]["cache_control"], "public, max-age=3600", "default Cache-Control")
        # dedup: the meta body count is smaller than the number of variants
        v = T.run(["verify", pack])
        T.eq(v.returncode, 0, "verify of the fixture pack: " + v.stderr.decode())

        # Files of no known type: compressed when a sample shrinks (a glTF-like
        # buffer), stored once when it does not (random bytes) or when a rule
        # chose the type.
        blobs = os.path.join(work, "blobs")
        os.makedirs(blobs)
        floats = b"".join(struct.pack("<f", (i % 97) * 0.25) for i in range(30000))
        with open(os.path.join(blobs, "scene.bin"), "wb") as f:
            f.write(floats)
        with open(os.path.join(blobs, "noise.bin"), "wb") as f:
            f.write(random.Random(7).randbytes(50000))
        _, bl = check_site("blobs", blobs, work)
        bp = {e["path"]: e for e in bl}
        T.eq(bp["/scene.bin"]["mime"], "application/octet-stream", "scene.bin type")
        T.eq([v["encoding"] for v in bp["/scene.bin"]["variants"]], list(T.ENCODINGS),
             "a compressible file of no known type gets every encoding")
        T.eq([v["encoding"] for v in bp["/noise.bin"]["variants"]], ["identity"],
             "random bytes of no known type: identity only")

        check_copies(work)

        if os.path.isdir(T.WWW) and T.source_files(T.WWW):
            check_site("www", T.WWW, work)
        else:
            print("www/ is missing or empty: only the fixture was checked")
    T.finish("test_pack_variants")


if __name__ == "__main__":
    main()
