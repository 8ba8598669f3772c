#!/usr/bin/env python3
"""bench/swap/report.py - renders the swap benchmark's two JSON results as the markdown
section "## Swaps under load" and prints it; with --results FILE also replaces that
section in FILE (up to the next level-2 heading), or appends it.

Usage: report.py --check CHECK.json --wrk WRK.json --cmdline "..." [--results FILE]
"""
import argparse
import json
import os
import platform
import subprocess
import time

SECTION = "## Swaps under load"


def n(x):
    return "{:,}".format(x)


def render(chk, wrk, cmdline):
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    wrk_v = subprocess.run(["wrk", "-v"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    L = [SECTION, ""]
    L.append("- Date: %s" % time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()))
    L.append("- Machine: %d cores (`nproc`), %s, Linux %s; load average at the end: %s" % (
        os.cpu_count() or 0, cpu, platform.release(), load))
    L.append("- Command: `%s`" % cmdline)
    L.append("- Fixture: three versions of a 7-path site (pack %s bytes each) in which every "
             "file differs and embeds its version marker: five text files with gzip, br and "
             "zstd variants and a 3 MiB incompressible file. The swaps cycle through the "
             "versions, alternating a rename over the path (`mv -T`, seen by the watch), a "
             "symlink flip (seen by the watch) and a rename followed by SIGHUP." % n(
                 wrk["pack_bytes"]))
    L.append("")
    L.append("### Byte-exact check (tests/e2e/test_swap_under_load.py, run for %.0f s)" %
             chk["seconds"])
    L.append("")
    L.append("%d keep-alive Python clients against %d workers: mixed paths, every encoding, "
             "30%% ranges (single and suffix), 20%% pipelined pairs, 4%% `Connection: close`. "
             "Every body is compared with `servd-pack cat` of the version its ETag names; every "
             "206 must be that version's exact slice." % (chk["clients"], chk["workers"]))
    L.append("")
    L.append("| swaps (every %.1f s) | requests | body bytes | 200 / 206 | identity / gzip / br / "
             "zstd | failed requests | connection errors | ETags seen / with two bodies | "
             "swaps refused | packs mapped after |" % chk["swap_interval"])
    L.append("|---:|---:|---:|---|---|---:|---:|---|---:|---:|")
    e, s = chk["encodings"], chk["status"]
    L.append("| %d (%s) | %s | %s | %s / %s | %s / %s / %s / %s | **%d** | **%d** | %d / **%d** | "
             "%d | %d |" % (
                 chk["swaps_done"], ", ".join("%s %d" % kv for kv in sorted(
                     chk["swaps_by_method"].items())), n(chk["requests"]), n(chk["body_bytes"]),
                 n(s.get("200", 0)), n(s.get("206", 0)), n(e.get("identity", 0)),
                 n(e.get("gzip", 0)), n(e.get("br", 0)), n(e.get("zstd", 0)),
                 chk["failed_requests"], chk["connection_errors"], chk["etags"],
                 chk["etags_with_two_bodies"], chk["swap_refusals"], chk["packs_mapped_after"]))
    L.append("")
    L.append("Requests per version: %s. The clients, not servd, set the pace (%s requests/s "
             "in Python)." % (", ".join("v%s %s" % (k, n(v)) for k, v in sorted(
                 chk["versions"].items())), n(chk["req_per_s"])))
    L.append("")
    L.append("### Full speed (wrk, %d s per phase, %d connections, %d workers)" % (
        wrk["seconds"], wrk["wrk_connections"], wrk["workers"]))
    L.append("")
    L.append("`wrk -t%d -c%d --latency -s bench/swap/mix.lua` (%s): the same paths, every "
             "encoding, 25%% ranges valid in every version, 1%% the 3 MiB file. wrk does not "
             "check bodies; it counts socket errors and non-2xx answers." % (
                 wrk["wrk_threads"], wrk["wrk_connections"],
                 wrk_v.stdout.decode().split("\n")[0].strip()))
    L.append("")
    L.append("| phase | swaps | requests | requests/s | p50 / p90 / p99 latency | socket errors "
             "(connect, read, write, timeout) | non-2xx | swaps refused | servd VmRSS before "
             "→ after | RssAnon before → after | packs mapped after |")
    L.append("|---|---:|---:|---:|---|---|---:|---:|---|---|---|")
    for name, key in (("no swaps", "without_swaps"), ("swap every %.1f s" % wrk["interval"],
                                                       "with_swaps")):
        p = wrk[key]
        se = p["socket_errors"]
        L.append("| %s | %d | %s | %s | %s / %s / %s ms | %d, %d, %d, %d | **%d** | %d | %s → %s KiB "
                 "| %s → %s KiB | %s |" % (
                     name, p["swaps_done"], n(p["requests"]), n(p["req_per_s"]),
                     p.get("latency_p50_ms", "?"), p.get("latency_p90_ms", "?"),
                     p.get("latency_p99_ms", "?"), se["connect"], se["read"], se["write"],
                     se["timeout"], p["non_2xx_3xx"], p["swap_refusals"],
                     n(p["mem_before"]["VmRSS_kib"]), n(p["mem_after"]["VmRSS_kib"]),
                     n(p["mem_before"]["RssAnon_kib"]), n(p["mem_after"]["RssAnon_kib"]),
                     ", ".join("`%s`" % m for m in p["packs_mapped_after"])))
    ws, wo = wrk["with_swaps"], wrk["without_swaps"]
    L.append("")
    L.append("Swapping every %.1f s costs %.1f%% of the throughput here (each swap opens and "
             "validates a %s-byte pack on the main thread, and the two cores are shared with "
             "wrk and the swapping script). VmRSS includes the mapped pages of the current "
             "pack; RssAnon is servd's own heap and stacks." % (
                 wrk["interval"], 100.0 * (1 - ws["req_per_s"] / wo["req_per_s"]),
                 n(wrk["pack_bytes"])))
    L.append("")
    return "\n".join(L)


def write_section(path, text):
    old = ""
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            old = f.read()
    lines = old.splitlines(keepends=True)
    start = next((i for i, l in enumerate(lines) if l.rstrip("\n") == SECTION), None)
    if start is None:
        new = (old or "# Benchmark results\n").rstrip("\n") + "\n\n" + text.rstrip("\n") + "\n"
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
    ap.add_argument("--check", required=True)
    ap.add_argument("--wrk", required=True)
    ap.add_argument("--cmdline", default="bench/swap/run.sh")
    ap.add_argument("--results")
    a = ap.parse_args()
    with open(a.check) as f:
        chk = json.load(f)
    with open(a.wrk) as f:
        wrk = json.load(f)
    text = render(chk, wrk, a.cmdline)
    print(text)
    if a.results:
        write_section(a.results, text)


if __name__ == "__main__":
    main()
