"""servd-pack build does not hold a site of images in memory: a file nothing compresses
keeps only its digest after the read, and is read again (and its SHA-256 checked) when it
is written. A site of 16 incompressible 12 MB files (192 MB) is built with a peak RSS well
under its size; before, the build held every file (peak 1.1 times the site). The bytes in
the pack are the files' own, duplicates are stored once, and the gzip files beside an image
and beside a page are files of their own (a link to them works).

Nor does a build of a site of text: the read drops each file's bytes, and the first of
its compression jobs reads it again (the variants go to a temporary file). 256 text files
of 800 KB (205 MB) build with a peak of anonymous memory well under their size (0.27 of
it: 0.38 before servd-pack had glibc map every block of 1 MiB or more); before, every
file was held from its read to the end of its compression (1.27).
A re-pack with --base of the unchanged site does not hold it in memory either: a
file whose variants the base has takes them at its read and drops its bytes (0.19 of the
site; before, every file was held until the end of the reads: 1.06 times the site of 64
files of 2 MB this test used then). Anonymous memory,
polled from /proc, because the peak RSS also counts the pages of the base that the
kernel maps around each variant read from it (whole large folios of the page cache:
80 MB of this base here), which are the file's cache, not the build's memory.

Under --memory, the reads and the compression keep to the limit: 8 text files of 1.5 MB
built on 4 threads peaked at 137 MB of anonymous memory with no limit, 55 MB with
--memory 80M (which leaves 2 threads compressing, one file's brotli at a time), and the
pack is the same; before the blocks were mapped, the build under 80M peaked at 86 to 92
MB: glibc's heaps kept the pages of the encoders' freed tables. (The test now builds 4
files of 1 MB under 72M, for time.) Reads wait for room too: each holds its file whole,
and 4 videos of 24 MB read on 4 threads under --memory 40M are read one at a time.

A file read again for the write goes straight into the pages LMDB reserves for its
body: a 120 MB video is held once while it is written (peak RSS 1.0 times the file), not
also in a buffer of servd-pack's own that LMDB copied (2.0 times).

`servd-pack ls --json` writes one path at a time: on a pack of 20,000 paths its peak of
anonymous memory is a few MB; it built the whole array first (87 MB, 4 KB a path).

The image build's peak is read from the kernel (wait4's ru_maxrss). Neither peak is
checked under the sanitizers, whose allocator keeps freed memory in quarantine."""
import gzip
import hashlib
import json
import os
import random
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "pack"))
import packtest as T  # noqa: E402

NFILES = 16
FILE_BYTES = 12 * 1000 * 1000
# Peak RSS allowed, as a share of the site: LMDB's write batch (64 MiB), one file held
# twice while it is written, one file per reading thread, and the allocator's slack
# stay under it; a build that holds every file cannot.
MAX_SHARE = 0.8
# Reading threads (each holds the file it reads): fixed, so the limit holds on
# machines with many CPUs.
JOBS = 2


def make_site(root):
    """Writes the site; returns {key: (SHA-256, size)}. One file at a time: the peak RSS
    the kernel gives for the build counts this process's own peak too (posix_spawn's
    child runs in this process's memory until its exec)."""
    rng = random.Random(7)
    os.makedirs(os.path.join(root, "img"))
    files = {}

    def put(key, data):
        with open(root + key, "wb") as f:
            f.write(data)
        files[key] = (hashlib.sha256(data).digest(), len(data))
    for i in range(NFILES):
        put("/img/v%02d.jpg" % i, b"\xff\xd8\xff\xe0" + rng.randbytes(FILE_BYTES - 4))
    with open(root + "/img/v03.jpg", "rb") as f:
        put("/img/copy.jpg", f.read())  # the same body as another file
    small = b"\x89PNG\r\n\x1a\n" + rng.randbytes(3000)
    put("/logo.png", small)
    put("/logo.png.gz", gzip.compress(small, mtime=0))  # beside an image: a file
    page = b"<!doctype html><title>memory</title><p>images</p>\n" * 50
    put("/index.html", page)
    put("/index.html.gz", gzip.compress(page, mtime=0))  # a precompressed copy: a file too
    return files


def build_peak(root, out):
    """Builds root into out; returns (exit status, stderr, peak RSS in bytes)."""
    err_path = out + ".stderr"
    with open(err_path, "wb") as err:
        pid = os.posix_spawn(T.PACK, [T.PACK, "build", root, "-o", out, "-q", "--jobs",
                                      str(JOBS)], os.environ,
                             file_actions=[(os.POSIX_SPAWN_DUP2, err.fileno(), 2)])
    _, status, usage = os.wait4(pid, 0)
    with open(err_path, "rb") as f:
        return os.waitstatus_to_exitcode(status), f.read(), usage.ru_maxrss * 1024


# The text site: files of 800 KB, each of its own block of words repeated, so that it
# compresses fast (into variants of a few KB).
NTEXT = 256
TEXT_BYTES = 800 * 1000
# Under the sanitizers, whose peaks are not checked, a quarter of the files: the same
# paths through the reads, the re-reads and the base, in a quarter of the time.
if T.sanitized():
    NTEXT = 64
# Peak anonymous memory allowed for its build and its re-pack, as a share of the site:
# LMDB's write batch (32 MiB of pages), a file per thread, each thread's encoders (zstd's
# tables at level 19 are about 20 times the file) and the allocator's slack stay under it.
MAX_BASE_SHARE = 0.5


def anon_peak(args, stdout=None):
    """Runs servd-pack with args (its output into the file stdout, if given); returns
    (exit status, stderr, the highest RssAnon seen in bytes, polled every 10 ms)."""
    with tempfile.TemporaryFile() as err:
        p = subprocess.Popen([T.PACK] + args, stdout=stdout, stderr=err)
        peak = 0
        while p.poll() is None:
            try:
                with open("/proc/%d/status" % p.pid) as f:
                    for line in f:
                        if line.startswith("RssAnon:"):
                            peak = max(peak, int(line.split()[1]) * 1024)
            except OSError:
                pass
            time.sleep(0.01)
        err.seek(0)
        return p.returncode, err.read(), peak


def check_base_repack(work):
    root = os.path.join(work, "text")
    os.makedirs(root)
    rng = random.Random(11)
    for i in range(NTEXT):
        block = "".join(rng.choice(T.WORDS) for _ in range(400))
        text = "page %d\n" % i + block * (TEXT_BYTES // len(block) + 1)
        with open(os.path.join(root, "page%03d.txt" % i), "w") as f:
            f.write(text[:TEXT_BYTES])
    base = os.path.join(work, "text-base.lmdb")
    rc, err, peak = anon_peak(["build", root, "-o", base, "-q", "--jobs", str(JOBS)])
    T.eq(rc, 0, "build of the text site: %s" % err.decode(errors="replace"))
    site_bytes = NTEXT * TEXT_BYTES
    print("  MEASURE build of %d x %d KB text files, --jobs %d: peak anonymous memory %.1f MB, "
          "%.2f of the site's %.1f MB" % (NTEXT, TEXT_BYTES // 1000, JOBS, peak / 1e6,
                                          peak / site_bytes, site_bytes / 1e6), flush=True)
    if not T.sanitized():
        T.check(peak < MAX_BASE_SHARE * site_bytes,
                "peak anonymous memory %.1f MB is %.2f of the site (at most %.2f): the "
                "build held the files to compress in memory"
                % (peak / 1e6, peak / site_bytes, MAX_BASE_SHARE))
    out = os.path.join(work, "text-again.lmdb")
    rc, err, peak = anon_peak(["build", root, "-o", out, "-q", "--jobs", str(JOBS), "--base",
                               base])
    T.eq(rc, 0, "re-pack with --base: %s" % err.decode(errors="replace"))
    print("  MEASURE re-pack with --base of %d x %d KB text files, nothing changed, --jobs %d: "
          "peak anonymous memory %.1f MB, %.2f of the site's %.1f MB"
          % (NTEXT, TEXT_BYTES // 1000, JOBS, peak / 1e6, peak / site_bytes,
             site_bytes / 1e6), flush=True)
    if not T.sanitized():
        T.check(peak < MAX_BASE_SHARE * site_bytes,
                "peak anonymous memory %.1f MB is %.2f of the site (at most %.2f): the "
                "re-pack held the files the base had in memory"
                % (peak / 1e6, peak / site_bytes, MAX_BASE_SHARE))
    T.eq(T.ls(out), T.ls(base), "the re-pack's listing is the first build's")
    for i in (0, NTEXT - 1):
        key = "/page%03d.txt" % i
        with open(os.path.join(root, key[1:]), "rb") as f:
            want = f.read()
        for enc in T.ENCODINGS:
            T.check(T.decode(enc, T.cat(out, key, enc)) == want,
                    "%s: the %s variant taken from the base decodes to the file" % (key, enc))


# --memory: text files of 1 MB each (brotli's tables at quality 11 hold some 22 MiB
# for one, zstd's 17), built on 4 threads with no limit and with a limit that leaves 2
# threads compressing (34 MiB of encoder state each) and room for one brotli at a time;
# smaller under the sanitizers, where only what is built is checked.
NLIMIT = 4
LIMIT_BYTES = 1000 * 1000
LIMIT = 72 << 20
LIMIT_JOBS = 4


def check_memory_limit(work):
    root = os.path.join(work, "limit")
    os.makedirs(root)
    rng = random.Random(13)
    n, size = (4, 200 * 1000) if T.sanitized() else (NLIMIT, LIMIT_BYTES)
    for i in range(n):
        text = "".join(rng.choice(T.WORDS) + str(rng.randrange(10000)) + " "
                       for _ in range(size // 8))
        with open(os.path.join(root, "page%d.txt" % i), "w") as f:
            f.write(text[:size])
    free = os.path.join(work, "limit-free.lmdb")
    rc, err, free_peak = anon_peak(["build", root, "-o", free, "-q", "--jobs", str(LIMIT_JOBS),
                                    "--memory", "0"])
    T.eq(rc, 0, "build with no limit: %s" % err.decode(errors="replace"))
    out = os.path.join(work, "limit.lmdb")
    rc, err, peak = anon_peak(["build", root, "-o", out, "--jobs", str(LIMIT_JOBS),
                               "--memory", "%dM" % (LIMIT >> 20)])
    err = err.decode(errors="replace")
    T.eq(rc, 0, "build with --memory: %s" % err)
    print("  MEASURE build of %d x %d KB text files, --jobs %d: peak anonymous memory %.1f MB "
          "with no limit, %.1f MB with --memory %dM"
          % (n, size // 1000, LIMIT_JOBS, free_peak / 1e6, peak / 1e6, LIMIT >> 20), flush=True)
    T.eq(T.ls(out), T.ls(free), "the pack built under --memory is the pack built without")
    # 72 MiB: two compressing threads (34 MiB each for their encoders' state)
    T.check("memory: compressed on 2 of %d threads" % LIMIT_JOBS in err,
            "the summary says how many threads compressed: %s" % err)
    if not T.sanitized():
        T.check(peak < LIMIT, "peak anonymous memory %.1f MB over the limit of %d MiB"
                % (peak / 1e6, LIMIT >> 20))
        T.check(peak < 0.6 * free_peak,
                "peak anonymous memory %.1f MB under --memory, %.1f MB without: the limit "
                "held nothing back" % (peak / 1e6, free_peak / 1e6))


# Reads under --memory: incompressible files of which two do not fit in --memory (the
# reads come before the compressing threads' state is counted), so each read runs alone.
NREAD = 4
READ_BYTES = 24 * 1000 * 1000
READ_LIMIT = 40 << 20


def check_read_budget(work):
    """A read holds its file whole (for the digest and the type): under --memory, reads
    too wait for room, so 4 threads do not hold 4 large files at once."""
    root = os.path.join(work, "reads")
    os.makedirs(root)
    rng = random.Random(17)
    for i in range(NREAD):
        with open(os.path.join(root, "clip%d.mp4" % i), "wb") as f:
            for _ in range(READ_BYTES // 1000000):
                f.write(rng.randbytes(1000000))
    out = os.path.join(work, "reads.lmdb")
    rc, err, peak = anon_peak(["build", root, "-o", out, "--jobs", str(NREAD),
                               "--memory", "%dM" % (READ_LIMIT >> 20)])
    err = err.decode(errors="replace")
    T.eq(rc, 0, "build of the large files with --memory: %s" % err)
    print("  MEASURE build of %d x %d MB video, --jobs %d, --memory %dM: peak anonymous "
          "memory %.1f MB" % (NREAD, READ_BYTES // 1000000, NREAD, READ_LIMIT >> 20,
                              peak / 1e6), flush=True)
    # the first read is over the limit, alone: the next ones wait for it (a read takes
    # tens of ms; the threads start within one)
    waits = [int(line.split("threads, ")[1].split()[0]) for line in err.splitlines()
             if "memory: compressed on" in line]
    T.check(waits and waits[0] >= 1, "no read waited for room under --memory: %s" % err)
    if not T.sanitized():
        # one read at a time, or the write's batch (two files before it commits)
        T.check(peak < 2.5 * READ_BYTES, "peak anonymous memory %.1f MB: reads ran together "
                "under --memory" % (peak / 1e6))
    T.eq(len(T.ls(out).splitlines()), NREAD, "the pack's paths")


# The large file, and the peak RSS allowed for its build as a share of it: the file
# once, the program and LMDB's other pages; not the file twice.
LARGE_BYTES = 120 * 1000 * 1000
MAX_LARGE_SHARE = 1.4


def check_large_file(work):
    root = os.path.join(work, "large")
    os.makedirs(root)
    # written a MB at a time: this process's memory counts in the build's peak (see
    # make_site)
    rng = random.Random(5)
    digest = hashlib.sha256()
    with open(os.path.join(root, "movie.mp4"), "wb") as f:
        for i in range(LARGE_BYTES // 1000000):
            chunk = (b"\x00\x00\x00\x18ftypmp42" if i == 0 else b"") + rng.randbytes(
                1000000 - (12 if i == 0 else 0))
            digest.update(chunk)
            f.write(chunk)
    out = os.path.join(work, "large.lmdb")
    rc, err, peak = build_peak(root, out)
    T.eq(rc, 0, "build of a %d MB file: %s" % (LARGE_BYTES // 1000000,
                                               err.decode(errors="replace")))
    print("  MEASURE build of one %d MB video: peak RSS %.1f MB, %.2f of the file"
          % (LARGE_BYTES // 1000000, peak / 1e6, peak / LARGE_BYTES), flush=True)
    if not T.sanitized():
        T.check(peak < MAX_LARGE_SHARE * LARGE_BYTES,
                "peak RSS %.1f MB is %.2f of the file (at most %.2f): the write held it twice"
                % (peak / 1e6, peak / LARGE_BYTES, MAX_LARGE_SHARE))
    T.check(hashlib.sha256(T.cat(out, "/movie.mp4")).digest() == digest.digest(),
            "the stored video is the file")


# Paths of the site listed by ls --json, and the most anonymous memory the listing may
# take: a few MB of libraries and buffers, where the whole array took 4 KB a path.
NLIST = 20000
MAX_LIST_ANON = 30 * 1000 * 1000


def check_listing(work):
    root = os.path.join(work, "many")
    for d in range(NLIST // 200):
        os.makedirs(os.path.join(root, "d%03d" % d))
        for i in range(200):
            with open(os.path.join(root, "d%03d" % d, "p%03d.html" % i), "w") as f:
                f.write("<!doctype html><title>x</title><p>" + ("word %d " % (i % 7)) * 300)
    pack = os.path.join(work, "many.lmdb")
    rc, err, _ = build_peak(root, pack)
    T.eq(rc, 0, "build of %d pages: %s" % (NLIST, err.decode(errors="replace")))
    out = os.path.join(work, "many.json")
    with open(out, "wb") as f:
        rc, err, peak = anon_peak(["ls", pack, "--json"], stdout=f)
    T.eq(rc, 0, "ls --json: %s" % err.decode(errors="replace"))
    print("  MEASURE ls --json of %d paths: peak anonymous memory %.1f MB"
          % (NLIST, peak / 1e6), flush=True)
    if not T.sanitized():
        T.check(peak < MAX_LIST_ANON, "ls --json of %d paths took %.1f MB of anonymous memory "
                "(at most %.0f): it held the whole listing" % (NLIST, peak / 1e6,
                                                                MAX_LIST_ANON / 1e6))
    with open(out) as f:
        listing = json.load(f)
    T.eq(len(listing), NLIST, "paths listed")
    T.eq(listing[0]["path"], "/d000/p000.html", "the first path")
    T.eq([v["encoding"] for v in listing[-1]["variants"]], list(T.ENCODINGS),
         "the last path's encodings")


def main():
    with T.TempDir() as work:
        root = os.path.join(work, "site")
        files = make_site(root)
        out = os.path.join(work, "site.lmdb")
        rc, err, peak = build_peak(root, out)
        T.eq(rc, 0, "build: %s" % err.decode(errors="replace"))
        site_bytes = sum(n for k, (_, n) in files.items() if k != "/img/copy.jpg")
        print("  MEASURE build of %d x %d MB incompressible files, --jobs %d: peak RSS %.1f MB, "
              "%.2f of the site's %.1f MB" % (NFILES, FILE_BYTES // 1000000, JOBS, peak / 1e6,
                                              peak / site_bytes, site_bytes / 1e6), flush=True)
        if T.sanitized():
            print("  (peak not checked under the sanitizers)")
        else:
            T.check(peak < MAX_SHARE * site_bytes,
                    "peak RSS %.1f MB is %.2f of the site (at most %.2f): the build held the "
                    "images in memory" % (peak / 1e6, peak / site_bytes, MAX_SHARE))

        listing = {e["path"]: e for e in T.ls_json(out)}
        T.eq(sorted(listing), sorted(files), "packed paths")
        for key, (digest, n) in files.items():
            got = T.cat(out, key)
            T.check(hashlib.sha256(got).digest() == digest,
                    "%s: the stored bytes are the file's (%d bytes, want %d)" % (key, len(got), n))
        T.eq(listing["/img/copy.jpg"]["variants"][0]["etag"],
             listing["/img/v03.jpg"]["variants"][0]["etag"], "a duplicate's ETag")
        v = T.run(["verify", out])
        T.eq(v.returncode, 0, "verify: %s" % v.stderr.decode(errors="replace"))
        check_base_repack(work)
        check_memory_limit(work)
        check_read_budget(work)
        check_large_file(work)
        check_listing(work)
    T.finish("test_pack_memory")


if __name__ == "__main__":
    main()
