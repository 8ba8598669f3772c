#!/usr/bin/env python3
"""memory.py - how much memory and time `servd-pack build` needs on big sites.

Generates two deterministic synthetic sites (cached in bench/pack/.cache/, which
git ignores), then builds each with one or two servd-pack binaries, in
interleaved rounds, and reports per (site, binary): the peak RSS of the build
(ru_maxrss of the child, from wait4), its wall time and the size of the pack:

  media  30 incompressible files of 10 MB (random bytes, as JPEG or video) and
         40 HTML files of about 1.7 MB of words: 368 MB in all;
  small  20,000 text files of 0.2 to 6 KB in 40 directories (a docs site).

Usage: bench/pack/memory.py --pack PATH [--base-pack PATH] [--rounds N]
                             [--sites media,small] [--results FILE]
  --pack PATH       the servd-pack to measure (e.g. build/servd-pack)
  --base-pack PATH  another one to compare with (e.g. a build of an earlier commit)
  --rounds N        builds of each site by each binary (default 2); medians reported
  --results FILE    also put the report into FILE under "## Pack: memory"

python3 stdlib only. The builds write their packs to a temporary directory.
"""
import argparse
import datetime
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time

SECTION = "## Pack: memory"
HERE = os.path.dirname(os.path.abspath(__file__))
CACHE = os.path.join(HERE, ".cache", "memory")
WORDS = ("static site origin server cache edge node page style script layout header "
         "footer content article section figure image video stream deploy pack build "
         "request response encoding brotli gzip zstd etag range vary control").split()


def text(rng, nwords):
    return " ".join(rng.choice(WORDS) + str(rng.randrange(1000)) for _ in range(nwords))


def make_media(root):
    rng = random.Random(1)
    os.makedirs(os.path.join(root, "img"))
    for i in range(30):
        with open(os.path.join(root, "img", "r%d.jpg" % i), "wb") as f:
            f.write(rng.randbytes(10_000_000))
    for i in range(40):
        with open(os.path.join(root, "p%d.html" % i), "w") as f:
            f.write("<!doctype html><title>p%d</title><p>" % i + text(rng, 200_000))


def make_small(root):
    rng = random.Random(2)
    exts = ("html", "css", "js", "txt", "json")
    for d in range(40):
        os.makedirs(os.path.join(root, "d%d" % d))
        for i in range(500):
            name = "f%d.%s" % (i, rng.choice(exts))
            with open(os.path.join(root, "d%d" % d, name), "w") as f:
                f.write(text(rng, rng.randint(30, 600)))


SITES = {"media": make_media, "small": make_small}


def site_dir(name):
    root = os.path.join(CACHE, name)
    done = root + ".done"
    if not os.path.exists(done):
        if os.path.exists(root):
            subprocess.run(["rm", "-rf", root], check=True)
        print("memory.py: generating the %s site in %s" % (name, root), file=sys.stderr)
        SITES[name](root)
        open(done, "w").close()
    return root


def build(pack, root, out):
    """One build: (peak RSS in bytes, wall seconds, pack file bytes)."""
    if os.path.exists(out):
        os.unlink(out)
    t0 = time.monotonic()
    p = subprocess.Popen([pack, "build", root, "-o", out, "-q"])
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        sys.exit("memory.py: %s build %s failed (exit %d)" % (pack, root, p.returncode))
    return ru.ru_maxrss * 1024, wall, os.path.getsize(out)


def version(pack):
    p = subprocess.run([pack, "--version"], capture_output=True, text=True)
    return (p.stdout or p.stderr).strip().splitlines()[0]


def du(root):
    total = files = 0
    for d, _, names in os.walk(root):
        for n in names:
            total += os.path.getsize(os.path.join(d, n))
            files += 1
    return files, total


def mb(n):
    return "%.1f MB" % (n / 1e6)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pack", required=True)
    ap.add_argument("--base-pack")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--sites", default="media,small")
    ap.add_argument("--results")
    a = ap.parse_args()
    packs = [("this", os.path.abspath(a.pack))]
    if a.base_pack:
        packs.append(("base", os.path.abspath(a.base_pack)))
    sites = [s for s in a.sites.split(",") if s]
    for s in sites:
        if s not in SITES:
            sys.exit("memory.py: unknown site %r (media, small)" % s)
    roots = {s: site_dir(s) for s in sites}
    got = {}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(a.rounds):
            for s in sites:
                order = packs if r % 2 == 0 else packs[::-1]
                for label, pack in order:
                    res = build(pack, roots[s], os.path.join(tmp, "%s-%s.lmdb" % (s, label)))
                    got.setdefault((s, label), []).append(res)
                    print("memory.py: round %d %s %s: %s peak, %.1f s, pack %s" %
                          (r + 1, s, label, mb(res[0]), res[1], mb(res[2])), file=sys.stderr)
    lines = [SECTION, ""]
    lines.append("- Date: %s UTC" % datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M"))
    cpu = platform.processor() or "?"
    try:
        for ln in open("/proc/cpuinfo"):
            if ln.startswith("model name"):
                cpu = ln.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    lines.append("- Machine: %d cores, %s, Linux %s" % (os.cpu_count(), cpu, platform.release()))
    lines.append("- Command: `bench/pack/memory.py %s`" % " ".join(sys.argv[1:]))
    for label, pack in packs:
        lines.append("- %s: %s (%s)" % (label, pack, version(pack)))
    lines.append("- Medians of %d interleaved rounds; peak RSS is the build's ru_maxrss." %
                 a.rounds)
    lines.append("")
    lines.append("| site | files | site bytes | binary | peak RSS | peak / site | wall | pack file |")
    lines.append("|---|---:|---:|---|---:|---:|---:|---:|")
    for s in sites:
        files, total = du(roots[s])
        for label, _ in packs:
            runs = got[(s, label)]
            rss = statistics.median(x[0] for x in runs)
            wall = statistics.median(x[1] for x in runs)
            size = statistics.median(x[2] for x in runs)
            lines.append("| %s | %d | %s | %s | %s | %.2f | %.1f s | %s |" %
                         (s, files, mb(total), label, mb(rss), rss / total, wall, mb(size)))
    lines.append("")
    report = "\n".join(lines) + "\n"
    print(report)
    if a.results:
        old = open(a.results).read() if os.path.exists(a.results) else ""
        start = old.find(SECTION + "\n")
        if start < 0:
            new = old.rstrip("\n") + "\n\n" + report
        else:
            end = old.find("\n## ", start + len(SECTION))
            new = old[:start] + report + ("\n" + old[end + 1:] if end >= 0 else "")
        with open(a.results, "w") as f:
            f.write(new)


if __name__ == "__main__":
    main()
