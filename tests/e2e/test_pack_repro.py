"""Reproducibility: the same tree gives the same `ls` output, `ls --json` and manifest
(and so the same pack id and ETags) and the same pack file, whatever the mtimes when SOURCE_DATE_EPOCH is set,
whatever the directory the tree sits in, and whatever the number of threads."""
import json
import os
import shutil
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "pack"))
import packtest as T  # noqa: E402

SDE = "1700000000"


def set_mtimes(root, t):
    for dirpath, _, files in os.walk(root):
        for f in files:
            os.utime(os.path.join(dirpath, f), (t, t), follow_symlinks=False)


def same_bytes(p, q):
    with open(p, "rb") as f, open(q, "rb") as g:
        return f.read() == g.read()


def pack_and_describe(root, out, *extra, env=None):
    man = out + ".json"
    T.build(root, out, "--manifest", man, *extra, env=env)
    with open(man, encoding="utf-8") as f:
        manifest = json.load(f)
    return T.ls(out), T.ls_json(out), manifest


def main():
    with T.TempDir() as work:
        a = os.path.join(work, "a")
        T.make_site(a)
        b = os.path.join(work, "elsewhere", "b")
        shutil.copytree(a, b, symlinks=True)
        set_mtimes(a, 1000000000)
        set_mtimes(b, 1600000000)
        env = {"SOURCE_DATE_EPOCH": SDE}
        la, ja, ma = pack_and_describe(a, os.path.join(work, "a.lmdb"), env=env)
        lb, jb, mb = pack_and_describe(b, os.path.join(work, "b.lmdb"), "--jobs", "1", env=env)
        T.eq(lb, la, "ls output of the same tree with other mtimes, place and --jobs")
        T.eq(jb, ja, "ls --json of the same tree")
        T.eq(mb, ma, "manifest of the same tree")
        T.check(all(e["last_modified"] == int(SDE) for e in ja), "Last-Modified = SOURCE_DATE_EPOCH")
        h = dict(T.parse_headers(T.cat(os.path.join(work, "a.lmdb"), "/index.html", headers=True))[1])
        T.eq(h.get("Last-Modified"), "Tue, 14 Nov 2023 22:13:20 GMT", "Last-Modified header")

        # The pack files themselves: same records, so the same pack id, and the
        # same bytes.
        with open(os.path.join(work, "a.lmdb.json")) as f:
            ida = json.load(f)["pack_id"]
        T.eq(len(ida), 32, "pack id is 16 bytes of hex")
        T.check(same_bytes(os.path.join(work, "a.lmdb"), os.path.join(work, "b.lmdb")),
                "the packs of the same tree with SOURCE_DATE_EPOCH are byte-identical")

        # Without SOURCE_DATE_EPOCH: packing the same tree twice is still identical.
        l1, _, m1 = pack_and_describe(a, os.path.join(work, "a1.lmdb"))
        l2, _, m2 = pack_and_describe(a, os.path.join(work, "a2.lmdb"))
        T.eq(l2, l1, "ls output of two packs of the same tree (no SOURCE_DATE_EPOCH)")
        T.eq(m2, m1, "manifests of two packs of the same tree (no SOURCE_DATE_EPOCH)")
        j1 = T.ls_json(os.path.join(work, "a1.lmdb"))
        T.check(all(e["last_modified"] == 1000000000 for e in j1), "Last-Modified = mtime")
        # and byte-identical, a deploy pipeline's checksum of its output too, in
        # another second of packing
        time.sleep(1.05 - time.time() % 1)
        T.build(a, os.path.join(work, "a3.lmdb"))
        T.check(same_bytes(os.path.join(work, "a1.lmdb"), os.path.join(work, "a3.lmdb")),
                "two packs of the same tree, a second apart (no SOURCE_DATE_EPOCH), are "
                "byte-identical")

        # A file from the future (clock skew) cannot keep its mtime: its Last-Modified
        # is the time of packing, so builds differ, and servd-pack says so.
        fut = os.path.join(a, "css", "site.css")
        os.utime(fut, (4102444800, 4102444800))  # 2100-01-01
        p = T.run(["build", a, "-o", os.path.join(work, "fut.lmdb"), "-q"])
        T.eq(p.returncode, 0, "build with a future mtime")
        T.check("warning: " + fut + " has a modification time in the future" in p.stderr.decode(),
                "future mtime warning: %r" % p.stderr.decode())
        os.utime(fut, (1000000000, 1000000000))

        # A changed byte changes that file's ETags and the pack id, nothing else.
        with open(os.path.join(b, "css", "site.css"), "ab") as f:
            f.write(b"/* changed */\n")
        lc, jc, mc = pack_and_describe(b, os.path.join(work, "c.lmdb"), env=env)
        T.check(mc["pack_id"] != ma["pack_id"], "pack id changes with the content")
        changed = [x["path"] for x, y in zip(ja, jc) if x != y]
        T.eq(changed, ["/css/site.css"], "entries that differ after changing one file")
    T.finish("test_pack_repro")


if __name__ == "__main__":
    main()
