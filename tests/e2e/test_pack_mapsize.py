"""The LMDB map is sized from the real record lengths: long Cache-Control and extra
values (repeated in every header block of every variant) on thousands of files
must not run out of map ("pack map full"), and the pack verifies."""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "pack"))
import packtest as T  # noqa: E402

# Compressible files, so that each has four variants: eight header blocks per record.
FILES = 3000


def main():
    with T.TempDir() as work:
        root = os.path.join(work, "site")
        os.makedirs(root)
        for i in range(FILES):
            d = os.path.join(root, "d%02d" % (i % 50))
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, "f%04d.txt" % i), "w") as f:
                f.write(("file %d: servd packs a site into one file. " % i) * 6)
        with open(os.path.join(root, "big.css"), "w") as f:
            f.write("".join(".c%d{margin:%dpx}\n" % (i, i) for i in range(2000)))
        rules = os.path.join(work, "rules.json")
        cc = "public, max-age=60, " + ", ".join("x-ext-%04d=1" % i for i in range(330))
        cc = cc[:4000].rstrip(", ")
        with open(rules, "w") as f:
            json.dump({"cache_control": [{"match": "**", "value": cc}]}, f)
        out = os.path.join(work, "site.lmdb")
        p = T.run(["build", root, "-o", out, "--rules", rules, "-q"])
        T.eq(p.returncode, 0, "build with a %d-byte Cache-Control on %d files (stderr: %s)"
             % (len(cc), FILES, p.stderr.decode().strip()))
        if p.returncode == 0:
            T.eq(T.run(["verify", out, "-q"]).returncode, 0, "verify")
            block = T.cat(out, "/big.css", "br", headers=True).decode()
            T.check(cc in block, "the long value is stored")
    T.finish("test_pack_mapsize")


if __name__ == "__main__":
    main()
