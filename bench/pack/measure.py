#!/usr/bin/env python3
"""measure.py - the measuring half of bench/pack/run.sh (python3 stdlib only).

For each site (NAME=DIR):
  1. times `servd-pack build DIR` (median of --runs) and checks that every run
     gives the same `servd-pack ls` output (reproducibility);
  2. reads the manifest: which files got which encodings, and their sizes;
  3. runs gzip -9 -n, brotli -q 11, zstd -19 (and libdeflate-gzip -12 when
     installed) on every file servd-pack compressed, and compares, per encoding,
     the bytes servd-pack stored against the tool's bytes on the SAME files (the
     files that have that encoding in the pack);
  4. changes one file in a copy of the site (the site's own js/app.js, then the
     largest compressible file), times `build --base FULL.lmdb`, and checks that
     the result lists exactly like a full pack of the changed tree.
Prints a markdown report; with --results FILE also puts it into FILE under the
heading SECTION, replacing an earlier version of that section only.
"""
import argparse
import datetime
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import time

SECTION = "## Pack: compression and build time"
ENCODINGS = ("gzip", "br", "zstd")

# Reference compressors: (label, encoding compared against, command before the file name).
REFERENCES = [
    ("gzip -9 -n", "gzip", ["gzip", "-9", "-n", "-c"]),
    ("libdeflate-gzip -12", "gzip", ["libdeflate-gzip", "-12", "-c"]),
    ("zopfli", "gzip", ["zopfli", "-c"]),  # 15 iterations: the strongest common gzip encoder
    ("brotli -q 11", "br", ["brotli", "-q", "11", "-c"]),
    ("zstd -19", "zstd", ["zstd", "-19", "-q", "-c"]),
]

# The targets: servd-pack bytes <= factor x reference bytes.
TARGETS = {"gzip -9 -n": 0.96, "brotli -q 11": 1.00, "zstd -19": 1.00}
BASE_TARGET = 0.10  # --base re-pack time <= 0.1 x full pack time

# Sizes are looked up under any of these names in manifest / ls --json variants.
SIZE_KEYS = ("size", "bytes", "length", "body_len", "len", "stored_bytes")


def die(msg):
    print("measure.py: " + msg, file=sys.stderr)
    sys.exit(1)


def run(cmd, check=True):
    """Runs cmd; returns (wall seconds, child CPU seconds, stdout bytes)."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    if check and p.returncode != 0:
        die("command failed (exit %d): %s\n%s" % (p.returncode, " ".join(cmd),
                                                  p.stderr.decode(errors="replace")[-2000:]))
    return wall, cpu, p.stdout


def site_files(root):
    """Relative paths of the regular files servd-pack stores: no dotfiles or dot-dirs."""
    out = []
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if not x.startswith("."))
        for f in sorted(files):
            if not f.startswith("."):
                out.append(os.path.relpath(os.path.join(d, f), root))
    return sorted(out)


def variant_size(v):
    if isinstance(v, int):
        return v
    if isinstance(v, dict):
        for k in SIZE_KEYS:
            if isinstance(v.get(k), int):
                return v[k]
    return None


def entries_of(doc):
    """Finds the list of path entries in a manifest or `ls --json` document."""
    if isinstance(doc, list):
        return doc
    if isinstance(doc, dict):
        for key in ("files", "paths", "entries"):
            if key in doc:
                inner = doc[key]
                if isinstance(inner, dict):
                    return [dict(v, path=k) for k, v in inner.items()]
                return inner
        if doc and all(isinstance(k, str) and k.startswith("/") for k in doc):
            return [dict(v, path=k) for k, v in doc.items()]
    return None


def parse_listing(doc):
    """{path: {encoding: stored bytes}} from a manifest or `ls --json` document."""
    entries = entries_of(doc)
    if entries is None:
        return None
    out = {}
    for e in entries:
        if not isinstance(e, dict) or not isinstance(e.get("path"), str):
            continue
        vs = e.get("variants", e.get("encodings"))
        sizes = {}
        if isinstance(vs, dict):
            for enc, v in vs.items():
                n = variant_size(v)
                if n is not None:
                    sizes[enc] = n
        elif isinstance(vs, list):
            for v in vs:
                if isinstance(v, dict):
                    enc = v.get("encoding", v.get("name"))
                    n = variant_size(v)
                    if isinstance(enc, str) and n is not None:
                        sizes[enc] = n
        if sizes:
            out[e["path"]] = sizes
    return out or None


def listing(pack, lmdb, manifest):
    """Per-path variant sizes: from the manifest, else from `ls --json`."""
    tried = []
    if manifest and os.path.exists(manifest):
        with open(manifest, encoding="utf-8") as f:
            got = parse_listing(json.load(f))
        if got:
            return got
        tried.append(manifest)
    _, _, out = run([pack, "ls", lmdb, "--json"])
    got = parse_listing(json.loads(out))
    if got:
        return got
    tried.append("servd-pack ls --json")
    die("cannot find per-variant sizes in " + " or ".join(tried) +
        " (expected entries with a path and variants carrying an encoding and a size)")


def change_file(path):
    """Appends a comment in the file's own syntax, so the file stays valid."""
    ext = os.path.splitext(path)[1].lower()
    if ext in (".js", ".mjs", ".css"):
        extra = b"\n/* servd bench: changed */\n"
    elif ext in (".html", ".htm", ".svg", ".xml"):
        extra = b"\n<!-- servd bench: changed -->\n"
    else:
        extra = b"\n"
    with open(path, "ab") as f:
        f.write(extra)


def tool_version(cmd):
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    for line in p.stdout.decode(errors="replace").splitlines():
        if line.strip():
            return line.strip().strip("*").strip()
    return None


def fmt_bytes(n):
    return "{:,}".format(n)


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "unknown"


def measure_site(args, name, root):
    res = {"name": name, "root": root}
    files = site_files(root)
    res["files"] = len(files)
    res["identity_bytes"] = sum(os.path.getsize(os.path.join(root, f)) for f in files)
    jobs = ["--jobs", str(args.jobs)] if args.jobs else []

    # 1. full builds
    walls, cpus, listings = [], [], []
    for i in range(args.runs):
        out = os.path.join(args.work, "%s-full-%d.lmdb" % (name, i))
        man = os.path.join(args.work, "%s-full-%d.json" % (name, i))
        w, c, _ = run([args.pack, "build", root, "-o", out, "--manifest", man] + jobs)
        walls.append(w)
        cpus.append(c)
        listings.append(run([args.pack, "ls", out])[2])
    res["full_wall"] = statistics.median(walls)
    res["full_wall_range"] = (min(walls), max(walls))
    res["full_cpu"] = statistics.median(cpus)
    res["reproducible"] = all(x == listings[0] for x in listings)
    full = os.path.join(args.work, "%s-full-0.lmdb" % name)
    res["pack_bytes"] = os.path.getsize(full)

    # 2. what servd-pack stored
    sizes = listing(args.pack, full, os.path.join(args.work, "%s-full-0.json" % name))
    per_file = {}
    missing = []
    for f in files:
        key = "/" + f.replace(os.sep, "/")
        if key in sizes:
            per_file[f] = sizes[key]
        else:
            missing.append(key)
    res["missing"] = missing
    compressed = [f for f in files if f in per_file and any(e in per_file[f] for e in ENCODINGS)]
    res["compressed_files"] = len(compressed)
    res["compressed_identity"] = sum(os.path.getsize(os.path.join(root, f)) for f in compressed)

    # 3. reference compressors on the same files
    ref_sizes = {}
    ref_time = {}
    for label, enc, cmd in REFERENCES:
        if shutil.which(cmd[0]) is None:
            continue
        ref_sizes[label] = {}
        total = 0.0
        for f in compressed:
            w, _, out = run(cmd + [os.path.join(root, f)])
            total += w
            ref_sizes[label][f] = len(out)
        ref_time[label] = total
    res["ref_time"] = ref_time

    rows = []
    for label, enc, _ in REFERENCES:
        if label not in ref_sizes:
            continue
        have = [f for f in compressed if enc in per_file[f]]
        ours = sum(per_file[f][enc] for f in have)
        theirs = sum(ref_sizes[label][f] for f in have)
        ident = sum(os.path.getsize(os.path.join(root, f)) for f in have)
        # Files where servd-pack dropped this encoding (not worth it) are left out of both sums.
        rows.append({"label": label, "enc": enc, "files": len(have), "identity": ident,
                     "ours": ours, "theirs": theirs,
                     "ratio": ours / theirs if theirs else float("nan"),
                     "target": TARGETS.get(label)})
    res["rows"] = rows
    res["enc_totals"] = {e: sum(per_file[f][e] for f in per_file if e in per_file[f])
                         for e in ("identity",) + ENCODINGS}
    res["enc_counts"] = {e: sum(1 for f in per_file if e in per_file[f])
                         for e in ("identity",) + ENCODINGS}

    # 4. --base re-packs after changing one file
    copy = os.path.join(args.work, name + "-changed")
    shutil.copytree(root, copy, copy_function=shutil.copy2, symlinks=True)
    candidates = []
    if "js/app.js" in files:
        candidates.append(("the site's own script", "js/app.js"))
    if compressed:
        largest = max(compressed, key=lambda f: (os.path.getsize(os.path.join(root, f)), f))
        if largest != "js/app.js":
            candidates.append(("the largest compressible file", largest))
    res["base"] = []
    for why, rel in candidates:
        target = os.path.join(copy, rel)
        change_file(target)
        out = os.path.join(args.work, name + "-base.lmdb")
        bw, bc = [], []
        for _ in range(args.runs):
            w, c, _ = run([args.pack, "build", copy, "-o", out, "--base", full] + jobs)
            bw.append(w)
            bc.append(c)
        base_ls = run([args.pack, "ls", out])[2]
        ref_out = os.path.join(args.work, name + "-changed-full.lmdb")
        fw, _, _ = run([args.pack, "build", copy, "-o", ref_out] + jobs)
        same = base_ls == run([args.pack, "ls", ref_out])[2]
        res["base"].append({"why": why, "file": rel,
                            "size": os.path.getsize(os.path.join(root, rel)),
                            "wall": statistics.median(bw), "range": (min(bw), max(bw)),
                            "cpu": statistics.median(bc),
                            "changed_full_wall": fw, "same_as_full": same})
        shutil.copy2(os.path.join(root, rel), target)  # restore for the next case
    return res


def verdict(ratio, target):
    if ratio <= target:
        return "holds (%.4f <= %.2f)" % (ratio, target)
    return "**misses** (%.4f > %.2f: %.1f%% over)" % (ratio, target, (ratio / target - 1) * 100)


def report(args, sites):
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    versions = [("servd-pack", tool_version([args.pack, "--version"])),
                ("gzip", tool_version(["gzip", "--version"])),
                ("brotli", tool_version(["brotli", "--version"])),
                ("zstd", tool_version(["zstd", "--version"])),
                ("libdeflate-gzip", tool_version(["libdeflate-gzip", "-V"])),
                ("npm", tool_version(["npm", "--version"]))]
    L = [SECTION, ""]
    L.append("- Date: %s" % now)
    L.append("- Machine: %d cores (`nproc`), %s, %s %s" % (os.cpu_count() or 0, cpu,
                                                          platform.system(), platform.release()))
    L.append("- Tools: " + "; ".join("%s: %s" % (n, v) for n, v in versions if v))
    L.append("- Command: `%s`%s" % (args.cmdline.strip(),
                                     " (servd-pack --jobs %s)" % args.jobs if args.jobs else
                                     " (servd-pack --jobs default: all cores)"))
    L.append("- Times are wall-clock medians of %d runs (min-max in brackets); the machine is "
             "shared, so compare ratios within this run, not absolute times across runs. "
             "Load average (1, 5, 15 min) at the start: %s; at the end: %s." % (
                 args.runs, args.load_start, loadavg()))
    for s in sites:
        if s["name"] == "npm" and args.site_note:
            L.append("- Site `npm`: " + args.site_note.split("=", 1)[-1])
    L.append("")

    L.append("### Sites and what servd-pack stored")
    L.append("")
    L.append("| site | files | identity bytes | files compressed | identity variants | gzip variants | br variants | zstd variants | pack file |")
    L.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for s in sites:
        t, c = s["enc_totals"], s["enc_counts"]
        L.append("| %s | %d | %s | %d | %d: %s | %d: %s | %d: %s | %d: %s | %s |" % (
            s["name"], s["files"], fmt_bytes(s["identity_bytes"]), s["compressed_files"],
            c["identity"], fmt_bytes(t["identity"]), c["gzip"], fmt_bytes(t["gzip"]),
            c["br"], fmt_bytes(t["br"]), c["zstd"], fmt_bytes(t["zstd"]),
            fmt_bytes(s["pack_bytes"])))
    L.append("")
    L.append("Variants: count and total stored bytes. A compressed variant is kept only when "
             "servd-pack finds it worth it, so each comparison below sums, for one encoding, "
             "only the files that have that encoding in the pack, and runs the reference tool "
             "on exactly those files (one file at a time, as a `gzip_static` build would).")
    L.append("")

    L.append("### Bytes per encoding against the reference compressors")
    L.append("")
    L.append("| site | encoding | files | identity bytes | servd-pack bytes (of identity) | reference | reference bytes (of identity) | servd-pack / reference | target |")
    L.append("|---|---|---:|---:|---:|---|---:|---:|---|")
    for s in sites:
        for r in s["rows"]:
            if not r["files"]:
                L.append("| %s | %s | 0 | - | - | `%s` | - | - | no %s variants in the pack |" % (
                    s["name"], r["enc"], r["label"], r["enc"]))
                continue
            tgt = verdict(r["ratio"], r["target"]) if r["target"] else "(information)"
            L.append("| %s | %s | %d | %s | %s (%.3f) | `%s` | %s (%.3f) | %.4f | %s |" % (
                s["name"], r["enc"], r["files"], fmt_bytes(r["identity"]), fmt_bytes(r["ours"]),
                r["ours"] / r["identity"], r["label"], fmt_bytes(r["theirs"]),
                r["theirs"] / r["identity"], r["ratio"], tgt))
    L.append("")

    L.append("### Build time")
    L.append("")
    L.append("| site | full pack | full pack CPU | change | --base re-pack | --base CPU | --base / full (wall) | --base / full (CPU) | target, on wall time (<= %.2f) | same `ls` as a full pack of the changed tree |" % BASE_TARGET)
    L.append("|---|---:|---:|---|---:|---:|---:|---:|---|---|")
    for s in sites:
        full = "%.3f s [%.3f-%.3f]" % ((s["full_wall"],) + s["full_wall_range"])
        for b in s["base"]:
            ratio = b["wall"] / s["full_wall"]
            L.append("| %s | %s | %.2f s | %s `%s` (%s bytes) | %.3f s [%.3f-%.3f] | %.2f s | %.3f | %.3f | %s | %s |" % (
                s["name"], full, s["full_cpu"], b["why"], b["file"], fmt_bytes(b["size"]),
                b["wall"], b["range"][0], b["range"][1], b["cpu"], ratio,
                b["cpu"] / s["full_cpu"] if s["full_cpu"] else float("nan"),
                verdict(ratio, BASE_TARGET),
                "yes" if b["same_as_full"] else "**NO**"))
    L.append("")
    L.append("Reference tools, one process per file, run one after another (for scale): " + "; ".join(
        "%s: %s" % (s["name"], ", ".join("`%s` %.2f s" % (k, v) for k, v in s["ref_time"].items()))
        for s in sites) + ".")
    L.append("")

    L.append("### Targets")
    L.append("")
    for s in sites:
        for r in s["rows"]:
            if r["target"] and not r["files"]:
                L.append("- %s, %s <= %.2f x `%s`: not measured: the pack has no %s variants" % (
                    s["name"], r["enc"], r["target"], r["label"], r["enc"]))
            elif r["target"]:
                L.append("- %s, %s <= %.2f x `%s`: %s" % (s["name"], r["enc"], r["target"], r["label"],
                                                      verdict(r["ratio"], r["target"])))
        for b in s["base"]:
            L.append("- %s, `--base` re-pack after changing `%s` <= %.2f x full pack: %s" % (
                s["name"], b["file"], BASE_TARGET, verdict(b["wall"] / s["full_wall"], BASE_TARGET)))
        L.append("- %s, same tree packed %d times gives identical `servd-pack ls` output: %s" % (
            s["name"], args.runs, "yes" if s["reproducible"] else "**NO**"))
        gz = {r["label"]: r for r in s["rows"] if r["enc"] == "gzip" and r["files"]}
        if "gzip -9 -n" in gz and "zopfli" in gz:
            z = gz["zopfli"]["theirs"] / gz["gzip -9 -n"]["theirs"]
            if z > TARGETS["gzip -9 -n"]:
                L.append("  - %s: no DEFLATE encoder measured here reaches %.2f x `gzip -9 -n` on these "
                         "files: zopfli (15 iterations) gives %.4f, libdeflate -12 %.4f. On small files "
                         "the fixed gzip framing (18 bytes a file) and short matches leave little to win." % (
                             s["name"], TARGETS["gzip -9 -n"], z,
                             gz["libdeflate-gzip -12"]["theirs"] / gz["gzip -9 -n"]["theirs"]
                             if "libdeflate-gzip -12" in gz else float("nan")))
        if s["full_wall"] < 1.0 and any(b["wall"] / s["full_wall"] > BASE_TARGET for b in s["base"]):
            L.append("  - %s: its full pack takes %.0f ms, so a re-pack is dominated by fixed costs "
                     "(process start, loading libraries, hashing every file to find what changed, "
                     "writing and fsyncing the pack: %.0f ms of CPU here); the 0.1 target matters "
                     "for sites whose full pack takes seconds." % (
                         s["name"], s["full_wall"] * 1000, min(b["cpu"] for b in s["base"]) * 1000))
        for b in s["base"]:
            if s["full_wall"] >= 1.0 and b["wall"] / s["full_wall"] > BASE_TARGET:
                L.append("  - %s: re-packing after `%s` (%s bytes) changed costs %.2f s of CPU, almost all "
                         "of it the three encoders on that one file; its brotli 11 alone runs on one core "
                         "and sets the wall time. The full pack spreads %.2f s of CPU over %d cores. So "
                         "with one large file changed the ratio is bounded by that file's single-core "
                         "brotli time (and grows with the number of cores), not by what --base reuses." % (
                             s["name"], b["file"], fmt_bytes(b["size"]), b["cpu"], s["full_cpu"],
                             os.cpu_count() or 0))
        if s["missing"]:
            L.append("- %s: %d files not found in the manifest, e.g. `%s`" % (
                s["name"], len(s["missing"]), s["missing"][0]))
    L.append("")
    return "\n".join(L)


def write_section(path, text):
    """Replaces SECTION (up to the next level-2 heading) in path, or appends it."""
    old = ""
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            old = f.read()
    lines = old.splitlines(keepends=True)
    start = next((i for i, l in enumerate(lines) if l.rstrip("\n") == SECTION), None)
    if start is None:
        if not old:
            old = "# Benchmark results\n"
        new = old.rstrip("\n") + "\n\n" + text.rstrip("\n") + "\n"
    else:
        end = next((j for j in range(start + 1, len(lines)) if lines[j].startswith("## ")),
                   len(lines))
        tail = "".join(lines[end:])
        new = "".join(lines[:start]) + text.rstrip("\n") + "\n" + ("\n" + tail if tail else "")
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(new)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pack", required=True, help="the servd-pack binary")
    ap.add_argument("--work", required=True, help="scratch directory")
    ap.add_argument("--site", action="append", required=True, help="NAME=DIR")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--jobs", type=int)
    ap.add_argument("--results", help="markdown file to put the report into")
    ap.add_argument("--cmdline", default="bench/pack/measure.py")
    ap.add_argument("--site-note", default="")
    args = ap.parse_args()
    args.load_start = loadavg()
    if args.runs < 1:
        die("--runs must be at least 1")
    sites = []
    for spec in args.site:
        name, _, root = spec.partition("=")
        if not name or not os.path.isdir(root):
            die("--site %s: expected NAME=DIR with an existing directory" % spec)
        print("measure.py: measuring %s (%s)" % (name, root), file=sys.stderr)
        sites.append(measure_site(args, name, root))
    text = report(args, sites)
    print(text)
    if args.results:
        write_section(args.results, text)
        print("measure.py: wrote the section to " + args.results, file=sys.stderr)


if __name__ == "__main__":
    main()
