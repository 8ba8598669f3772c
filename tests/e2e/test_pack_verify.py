"""servd-pack verify: passes on a good pack; fails, naming what is wrong, on a flipped
byte in a stored body (identity or compressed), on a truncated file, and on a file that
is not a pack. Each damaged pack is a copy: the original keeps verifying."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "pack"))
import packtest as T  # noqa: E402


def damaged_copy(src, dst, body, delta=0x20):
    """Copies the pack src to dst with one byte flipped in the middle of body. LMDB may
    leave stale copies of a value in the free space of split pages, so every occurrence
    is flipped (the live one among them)."""
    with open(src, "rb") as f:
        data = bytearray(f.read())
    at = data.find(body)
    if at < 0:
        raise SystemExit("body of %d bytes not found in %s" % (len(body), src))
    while at >= 0:
        data[at + len(body) // 2] ^= delta
        at = data.find(body, at + 1)
    with open(dst, "wb") as f:
        f.write(data)


def verify(pack):
    p = T.run(["verify", pack])
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def main():
    with T.TempDir() as work:
        root = os.path.join(work, "site")
        T.make_site(root)
        good = os.path.join(work, "good.lmdb")
        T.build(root, good)
        rc, out, err = verify(good)
        T.eq(rc, 0, "verify of a good pack (stderr: %s)" % err)
        T.check("OK" in out, "verify reports OK: %r" % out)

        # A flipped byte in an identity body (a large one: stored in overflow pages).
        photo = T.cat(good, "/img/photo.png")
        bad = os.path.join(work, "flip-identity.lmdb")
        damaged_copy(good, bad, photo)
        rc, _, err = verify(bad)
        T.eq(rc, 1, "verify after flipping a byte of /img/photo.png")
        T.check("/img/photo.png" in err and "SHA-256" in err, "message names the path: " + err)
        T.check(bad in err, "message names the pack: " + err)

        # A flipped byte in a small compressed body (stored inside a leaf page).
        br = T.cat(good, "/index.html", "br")
        bad = os.path.join(work, "flip-br.lmdb")
        damaged_copy(good, bad, br)
        rc, _, err = verify(bad)
        T.eq(rc, 1, "verify after flipping a byte of the br body of /index.html")
        T.check("/index.html" in err and "br" in err, "message names the path and encoding: " + err)

        # Truncated files.
        size = os.path.getsize(good)
        with open(good, "rb") as f:
            data = f.read()
        for cut in (size // 2, size - 4096, size - 1):
            trunc = os.path.join(work, "trunc-%d.lmdb" % cut)
            with open(trunc, "wb") as f:
                f.write(data[:cut])
            rc, _, err = verify(trunc)
            T.eq(rc, 1, "verify of a pack cut to %d of %d bytes" % (cut, size))
            T.check(trunc in err, "message names the truncated pack: " + err)

        # The good pack is still good.
        T.eq(verify(good)[0], 0, "the original pack still verifies")

        # Not a pack at all.
        junk = os.path.join(work, "junk.lmdb")
        with open(junk, "wb") as f:
            f.write(b"\x00" * 8192)
        rc, _, err = verify(junk)
        T.eq(rc, 1, "verify of zeros")
        T.check(junk in err, "message names the file: " + err)
    T.finish("test_pack_verify")


if __name__ == "__main__":
    main()
