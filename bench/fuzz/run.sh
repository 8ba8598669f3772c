#!/bin/sh
# Runs one libFuzzer target of tests/fuzz for a long time and keeps its log, for
# the record in bench/fuzz/RESULTS.md (the ctest runs are only 20 s each).
#   bench/fuzz/run.sh BUILD_DIR TARGET SECONDS [WORKDIR]
# BUILD_DIR is a clang build with -DSERVD_FUZZ=ON. The corpus grows in
# WORKDIR/<target>/corpus (seeded from tests/fuzz/corpus/<target>, which is not
# modified); crashes land in WORKDIR/<target>/ as crash-*; the log is
# WORKDIR/<target>/fuzz.log. Runs at nice 10 so it does not starve other work.
set -eu
[ $# -ge 3 ] || { echo "usage: $0 BUILD_DIR TARGET SECONDS [WORKDIR]" >&2; exit 2; }
build=$(cd "$1" && pwd) target=$2 secs=$3 work=${4:-/tmp/servd-fuzz}
src=$(cd "$(dirname "$0")/../.." && pwd)
bin=$build/tests/fuzz/$target
[ -x "$bin" ] || { echo "$0: $bin not built (cmake --build $build --target $target)" >&2; exit 1; }
dir=$work/$target
mkdir -p "$dir/corpus"
extra=""
seeds=$target
# the request parser's limits (32 KiB head) lie beyond libFuzzer's default 4 KiB
# inputs (the same -max_len as tests/fuzz/CMakeLists.txt gives the ctest runs)
case $target in
fuzz_http1) extra="-max_len=36000" ;;
fuzz_conn) extra="-max_len=40000" ;;
fuzz_pack) extra="-max_len=65536" ;;
fuzz_lmdb_walk) extra="-max_len=65536" seeds=fuzz_pack ;;
# whole packs, fuzz_pack's seeds; the commands print listings and refusals
fuzz_pack_readers) extra="-max_len=65536 -close_fd_mask=3" seeds=fuzz_pack ;;
esac
cd "$dir"
# -timeout: an input taking > 10 s is a hang; -rss_limit_mb: the default 2 GiB.
# shellcheck disable=SC2086
rc=0
nice -n 10 "$bin" -max_total_time="$secs" -timeout=10 -print_final_stats=1 $extra \
    -artifact_prefix="$dir/" -dict="$src/tests/fuzz/$target.dict" \
    "$dir/corpus" "$src/tests/fuzz/corpus/$seeds" >"$dir/fuzz.log" 2>&1 || rc=$?
echo "$target: exit $rc, corpus $(ls "$dir/corpus" | wc -l) files, log $dir/fuzz.log"
exit $rc
