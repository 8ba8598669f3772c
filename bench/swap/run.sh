#!/usr/bin/env bash
# bench/swap/run.sh - pack swaps under load, for longer than CI can afford.
#
#   1. tests/e2e/test_swap_under_load.py for --seconds (default 60): keep-alive clients
#      check every body byte for byte against the version its ETag names while the pack
#      is swapped every 200 ms (rename + watch, symlink flip + watch, rename + SIGHUP);
#   2. bench/swap/wrk_swaps.py: wrk at full speed for --seconds / 2 without swaps, then as
#      long with a swap every 200 ms: throughput, latency, socket errors, non-2xx, memory,
#      and the packs still mapped afterwards.
# Prints the markdown report (bench/swap/report.py).
#
# Usage: bench/swap/run.sh [--build-dir DIR] [--seconds N] [--results FILE]
#   --build-dir DIR   where servd and servd-pack were built (default: build/)
#   --seconds N       length of the checked run (default 60); each wrk phase runs N/2
#   --results FILE    also put the report into FILE (e.g. bench/RESULTS.md) under
#                     "## Swaps under load", replacing that section
#
# Needs: python3 (stdlib only), wrk, and what the e2e tests need (brotli, zstd).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
build_dir="$root/build"
seconds=60
results=""
cmdline="bench/swap/run.sh $*"

while [ $# -gt 0 ]; do
    case "$1" in
    --build-dir) build_dir=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --results) results=$2; shift 2 ;;
    -h | --help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
    esac
done
build_dir=$(cd "$build_dir" && pwd)
for b in servd servd-pack; do
    [ -x "$build_dir/$b" ] || { echo "run.sh: $build_dir/$b not built" >&2; exit 1; }
done
command -v wrk >/dev/null || { echo "run.sh: wrk is not installed (apt-get install wrk)" >&2; exit 1; }

work=$(mktemp -d /tmp/servd-swap-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
export SERVD_SOURCE_DIR="$root" SERVD_BUILD_DIR="$build_dir"

echo "run.sh: byte-exact check for $seconds s ..." >&2
SWAP_LOAD_SECONDS=$seconds SWAP_RESULT_JSON="$work/check.json" \
    python3 "$root/tests/e2e/test_swap_under_load.py" >&2
echo "run.sh: wrk, $((seconds / 2)) s without and $((seconds / 2)) s with swaps ..." >&2
python3 "$here/wrk_swaps.py" "$((seconds / 2))" >"$work/wrk.json"

args=(--check "$work/check.json" --wrk "$work/wrk.json" --cmdline "$cmdline")
[ -n "$results" ] && args+=(--results "$results")
python3 "$here/report.py" "${args[@]}"
