"""A full disk is named as such: servd-pack refuses to start writing when the output's file
system clearly cannot hold the pack ("not enough space: need about N MiB, have M MiB"), and
a write that fails later says how much space is free instead of a bare "Input/output error".
So does the compression, which writes the compressed variants to a temporary file beside
the pack until the write: a site whose files fit but whose variants do not. Each leaves
nothing behind. And the write gives that file's room back as it copies each variant into
the pack: a pack that fits is built, though it and the variants would not fit together. Needs a small tmpfs (mount, as root); skipped without one."""
import os
import random
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "pack"))
import packtest as T  # noqa: E402

# Size of the scratch file system: small enough to fill quickly.
FS_BYTES = 2 * 1024 * 1024


def random_files(root, count, size, seed):
    rng = random.Random(seed)
    os.makedirs(root)
    for i in range(count):
        with open(os.path.join(root, "f%04d.png" % i), "wb") as f:  # .png: stored once, as is
            f.write(bytes(rng.randrange(256) for _ in range(size)))


def text_files(root, count, seed, text, exts=("txt",)):
    """Writes count texts text(rng), of a generator seeded with seed, each as root/tNN.EXT
    for every EXT in exts."""
    rng = random.Random(seed)
    os.makedirs(root)
    for i in range(count):
        t = text(rng)
        for ext in exts:
            with open(os.path.join(root, "t%02d.%s" % (i, ext)), "w") as f:
                f.write(t)


def main():
    with T.TempDir() as work:
        mnt = os.path.join(work, "small")
        os.mkdir(mnt)
        p = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%d" % FS_BYTES, "tmpfs", mnt],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if p.returncode != 0:
            print("test_pack_space: skipped: cannot mount a tmpfs (%s)" % p.stderr.decode().strip())
            sys.exit(77)
        try:
            out = os.path.join(mnt, "site.lmdb")
            # 3 MiB of incompressible data: clearly more than 2 MiB.
            big = os.path.join(work, "big")
            random_files(big, 60, 50000, 1)
            p = T.run(["build", big, "-o", out, "-q"])
            err = p.stderr.decode()
            T.eq(p.returncode, 1, "build onto a too small file system: exit status (%s)" % err.strip())
            T.check("not enough space" in err and "need about 2.9 MiB, have 2.0 MiB" in err,
                    "message names the space needed and free: %r" % err)
            T.eq(os.listdir(mnt), [], "nothing left on the small file system")

            # 1.2 MiB of bodies that LMDB lays out in 2 pages each (8 KiB for 4.2 KB):
            # the estimate fits, the real file does not.
            tight = os.path.join(work, "tight")
            random_files(tight, 300, 4200, 2)
            p = T.run(["build", tight, "-o", out, "-q"])
            err = p.stderr.decode()
            T.eq(p.returncode, 1, "build that fills the disk while writing: exit status (%s)" % err.strip())
            T.check("disk full? 2.0 MiB free on the output's file system" in err,
                    "message mentions the free space: %r" % err)
            T.eq(os.listdir(mnt), [], "nothing left after a write failure")

            # 1.6 MB of text (hexadecimal digits: each encoding halves it) fits; its three
            # compressed variants, 2.4 MB, do not.
            hexsite = os.path.join(work, "hex")
            text_files(hexsite, 16, 3,
                       lambda rng: "".join(rng.choice("0123456789abcdef") for _ in range(100000)))
            p = T.run(["build", hexsite, "-o", out, "-q"])
            err = p.stderr.decode()
            T.eq(p.returncode, 1, "build whose variants fill the disk: exit status (%s)"
                 % err.strip())
            T.check("cannot write the compressed variants to a temporary file in %s: No space "
                    "left on device (disk full? 2.0 MiB free on the output's file system once "
                    "the temporary file is removed)" % mnt in err,
                    "message names the temporary file's directory and the free space: %r" % err)
            T.eq(os.listdir(mnt), [], "nothing left after the variants filled the disk")

            # A pack that fits (1.9 MB), whose variants (0.8 MB) would not fit beside it:
            # the write gives the temporary file's room back as it copies the variants
            # out, and the check before it counts that room as free.
            words = os.path.join(work, "words")
            text_files(words, 10, 4, lambda rng: " ".join(
                rng.choice(T.WORDS) + str(rng.randrange(100)) for _ in range(15000))[:100000])
            p = T.run(["build", words, "-o", out, "-q"])
            T.eq(p.returncode, 0, "build of a pack that fits only without its temporary file: %s"
                 % p.stderr.decode().strip())
            T.eq(sorted(os.listdir(mnt)), ["site.lmdb"], "the pack, and nothing else, is left")
            T.eq(T.run(["verify", out]).returncode, 0, "the pack verifies")
            if os.path.exists(out):
                os.unlink(out)

            # The same: each text also as a font and as WebAssembly, three classes, so
            # compressed three times, and the gzip and zstd bodies of the three are the
            # same bytes (stored once). The copies never read back are given back too.
            classes = os.path.join(work, "classes")
            text_files(classes, 24, 5, lambda rng: " ".join(
                rng.choice(T.WORDS) + str(rng.randrange(100)) for _ in range(4000))[:24000],
                exts=("txt", "ttf", "wasm"))
            p = T.run(["build", classes, "-o", out, "-q"])
            T.eq(p.returncode, 0, "build of one text in three classes, fitting only without its "
                 "temporary file: %s" % p.stderr.decode().strip())
            T.eq(sorted(os.listdir(mnt)), ["site.lmdb"], "three classes: the pack is left")
            if os.path.exists(out):
                os.unlink(out)

            # A file size limit far above the pack is no cause: the hint is the disk's.
            import resource
            def fsize():
                resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 30, 1 << 30))
            err = subprocess.run([T.PACK, "build", tight, "-o", out, "-q"], stderr=subprocess.PIPE,
                                 preexec_fn=fsize).stderr.decode()
            T.check("disk full? 2.0 MiB free" in err and "file size limit" not in err,
                    "a 1 GiB file size limit is not named for a full disk: %r" % err)

            # A file system that gives no size (ramfs: 0 blocks, as some FUSE ones) is not
            # full: it was refused as "need about 1.2 MiB, have 0 B".
            ram = os.path.join(work, "ram")
            os.mkdir(ram)
            if subprocess.run(["mount", "-t", "ramfs", "ramfs", ram], stderr=subprocess.PIPE,
                              stdout=subprocess.PIPE).returncode != 0:
                print("test_pack_space: the ramfs part skipped: cannot mount one")
            else:
                try:
                    rout = os.path.join(ram, "site.lmdb")
                    p = T.run(["build", tight, "-o", rout, "-q"])
                    T.eq(p.returncode, 0, "build onto a file system without a size (ramfs): %s"
                         % p.stderr.decode().strip())
                    T.eq(T.run(["verify", rout]).returncode, 0, "the ramfs pack verifies")
                finally:
                    subprocess.run(["umount", ram])
        finally:
            subprocess.run(["umount", mnt])
    T.finish("test_pack_space")


if __name__ == "__main__":
    main()
