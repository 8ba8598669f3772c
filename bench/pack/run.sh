#!/usr/bin/env bash
# bench/pack/run.sh - how well and how fast servd-pack packs a site.
#
# Measures, for www/ and for a larger real site assembled from the published
# dist/ and build/ folders of a few npm packages:
#   - servd-pack build time: a full pack, and a re-pack with --base after one
#     file changed (the site's own js/app.js, and the largest compressible file);
#   - the bytes of every encoding in the pack against gzip -9 -n, brotli -q 11,
#     zstd -19 (and libdeflate-gzip -12, zopfli when installed) run on the same files.
# and prints a markdown report (measure.py does the measuring).
#
# Usage: bench/pack/run.sh [--build-dir DIR] [--runs N] [--jobs N] [--results FILE]
#   --build-dir DIR   where servd-pack was built (default: build/ at the top of the repo;
#                     or set SERVD_PACK to the binary)
#   --runs N          timed repetitions of each build, median reported (default 3)
#   --jobs N          passed to servd-pack --jobs (default: its own default, all cores)
#   --results FILE    also write the report into FILE (e.g. bench/RESULTS.md) under the
#                     heading "## Pack: compression and build time", replacing that section
#
# Needs: bash, python3 (stdlib only), npm (downloads the packages once into
# bench/pack/.cache/, which git ignores), gzip, brotli, zstd; libdeflate-gzip and zopfli optional.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
build_dir="$root/build"
runs=3
jobs=""
results=""
cmdline="bench/pack/run.sh $*"

while [ $# -gt 0 ]; do
    case "$1" in
    --build-dir) build_dir=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --results) results=$2; shift 2 ;;
    -h | --help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
    esac
done

pack=${SERVD_PACK:-$build_dir/servd-pack}
if [ ! -x "$pack" ]; then
    echo "run.sh: $pack: no servd-pack binary (build it: cmake --build $build_dir --target servd-pack)" >&2
    exit 1
fi
for tool in python3 npm gzip brotli zstd tar; do
    command -v "$tool" >/dev/null || { echo "run.sh: $tool is needed (tests/deps.sh test)" >&2; exit 1; }
done

# ---- the larger site: www/ as its pages, vendor libraries as their assets ----
# Pinned versions so that every run measures the same bytes. Source maps are left
# out (they are not served to browsers by default), and so are the CommonJS /
# server builds that a browser never loads.
packages="vue@2.7.16 bootstrap@5.3.3 jquery@3.7.1 lodash@4.17.21 d3@7.9.0 three@0.160.0"
cache="$here/.cache"
npm_dir="$cache/npm"
site="$cache/site-npm"
mkdir -p "$npm_dir"

fetch() { # name version -> extracted package dir on stdout
    local name=$1 version=$2 tgz="$npm_dir/$1-$2.tgz" dir="$npm_dir/$1-$2"
    if [ ! -s "$tgz" ]; then
        echo "run.sh: fetching $name@$version from the npm registry" >&2
        (cd "$npm_dir" && npm pack "$name@$version" --silent >/dev/null)
    fi
    if [ ! -d "$dir/package" ]; then
        rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
        tar xzf "$tgz" -C "$dir.tmp"
        mv "$dir.tmp" "$dir"
    fi
    echo "$dir/package"
}

# copy SRC_DIR DEST_DIR [find predicates...]: copies the selected regular files,
# keeping their relative paths and mtimes.
copy() {
    local src=$1 dest=$2
    shift 2
    mkdir -p "$dest"
    (cd "$src" && find . -type f "$@" -print0 | sort -z |
        while IFS= read -r -d '' f; do
            mkdir -p "$dest/$(dirname "$f")"
            cp -p "$f" "$dest/$f"
        done)
}

rm -rf "$site.tmp"
mkdir -p "$site.tmp"
copy "$root/www" "$site.tmp"
for spec in $packages; do
    name=${spec%@*}
    version=${spec##*@}
    pkg=$(fetch "$name" "$version")
    dest="$site.tmp/vendor/$name-$version"
    case $name in
    vue) # the browser builds (UMD and ES module), not the CommonJS ones
        copy "$pkg/dist" "$dest" \( -name 'vue.js' -o -name 'vue.min.js' -o -name 'vue.runtime.js' \
            -o -name 'vue.runtime.min.js' -o -name 'vue.esm.browser*.js' \) ;;
    bootstrap | jquery | d3) copy "$pkg/dist" "$dest" ! -name '*.map' ;;
    lodash) # its browser bundles, at the top of the package
        copy "$pkg" "$dest" ! -path './*/*' \( -name 'lodash.js' -o -name 'lodash.min.js' \
            -o -name 'core.js' -o -name 'core.min.js' \) ;;
    three) # the minified ES module and three folders of its add-on modules (many small files)
        copy "$pkg/build" "$dest/build" -name 'three.module.min.js'
        for sub in controls postprocessing shaders; do
            copy "$pkg/examples/jsm/$sub" "$dest/jsm/$sub" -name '*.js'
        done ;;
    esac
done
rm -rf "$site"
mv "$site.tmp" "$site"

work=$(mktemp -d /tmp/servd-bench-pack.XXXXXX)
trap 'rm -rf "$work"' EXIT

args=(--pack "$pack" --work "$work" --runs "$runs" --cmdline "$cmdline"
      --site-note "npm=www/ plus the dist/ or build/ folders of $packages (see bench/pack/run.sh for the selection)"
      --site "www=$root/www" --site "npm=$site")
[ -n "$jobs" ] && args+=(--jobs "$jobs")
[ -n "$results" ] && args+=(--results "$results")
# Not exec: the EXIT trap must still remove the scratch packs.
python3 "$here/measure.py" "${args[@]}"
