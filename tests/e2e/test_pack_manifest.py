"""--manifest: it may not name the output or the base (usage error, exit 2), and a
manifest that cannot be put in place fails the build without touching the pack
already at -o (the previous good pack, possibly the --base)."""
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "pack"))
import packtest as T  # noqa: E402

# Extra text so that the build runs long enough to turn the manifest path into a
# directory while it compresses.
BIG_BYTES = 1_500_000


def main():
    with T.TempDir() as work:
        root = os.path.join(work, "site")
        T.make_site(root, big=BIG_BYTES)
        out = os.path.join(work, "site.lmdb")

        # Same file under different spellings: refused before any work.
        os.mkdir(os.path.join(work, "sub"))
        for man, o in ((out, out), ("./site.lmdb", out), (os.path.join(work, "sub", "..", "site.lmdb"), out)):
            p = subprocess.run([T.PACK, "build", root, "-o", o, "--manifest", man, "-q"], cwd=work,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
            err = p.stderr.decode()
            T.eq(p.returncode, 2, "--manifest %s -o %s: exit status (%s)" % (man, o, err.strip()))
            T.check(err.startswith("servd-pack: --manifest") and "same file" in err,
                    "message names the clash: %r" % err)
            T.check(not os.path.exists(out), "nothing written for --manifest %s" % man)
        T.build(root, out, "-q")
        good = open(out, "rb").read()
        p = T.run(["build", root, "-o", os.path.join(work, "other.lmdb"), "--base", out,
                   "--manifest", out])
        T.eq(p.returncode, 2, "--manifest naming the base: exit status (%s)" % p.stderr.decode().strip())
        T.eq(open(out, "rb").read(), good, "the base is untouched")

        # A manifest that cannot be renamed into place (its path became a directory
        # during the build): the build fails and the previous pack stays as it was.
        man = os.path.join(work, "m.json")
        e = dict(os.environ)
        e.pop("SOURCE_DATE_EPOCH", None)
        proc = subprocess.Popen([T.PACK, "build", root, "-o", out, "--manifest", man,
                                 "-q", "--jobs", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=e)
        time.sleep(0.3)
        os.mkdir(man)
        with open(os.path.join(man, "keep"), "w") as f:
            f.write("x")  # a non-empty directory: rename(2) over it fails
        _, err = proc.communicate(timeout=280)
        T.eq(proc.returncode, 1, "manifest rename failure: exit status (%s)" % err.decode().strip())
        T.check(man in err.decode(), "message names the manifest: %r" % err.decode())
        T.check(os.path.exists(out), "the previous pack is still at -o")
        T.eq(open(out, "rb").read() == good, True, "the previous pack is unchanged")
        T.eq(T.run(["verify", out, "-q"]).returncode, 0, "the previous pack verifies")
        T.eq(sorted(f for f in os.listdir(work) if ".tmp-" in f or ".old-" in f), [],
             "no temporary files left")

        # The normal case: manifest and pack both in place, a previous manifest replaced.
        os.unlink(os.path.join(man, "keep"))
        os.rmdir(man)
        with open(man, "w") as f:
            f.write('{"servd_manifest": 1, "pack_id": "an earlier build"}\n')
        T.build(root, out, "--manifest", man)
        with open(man) as f:
            m = json.load(f)
        T.eq(m.get("servd_manifest"), 1, "the new manifest replaced the old one")
        T.eq(sorted(f for f in os.listdir(work) if ".tmp-" in f or ".old-" in f), [],
             "no temporary files left after a good build")
    T.finish("test_pack_manifest")


if __name__ == "__main__":
    main()
