#!/bin/sh
# The whole test suite, as the README and CI run it: installs what is
# missing, then builds and runs every test twice - a normal optimised build
# and an AddressSanitizer + UndefinedBehaviorSanitizer build - and the tests
# of servd's threads (a pack swap's load on libuv's pool, the workers, the
# stop, the access log's thread) and of servd-pack's (the reads and the
# compression on its pool, and its wait for memory under --memory) once more
# under ThreadSanitizer.
set -eu
cd "$(dirname "$0")/.."
tests/deps.sh test
jobs=$(nproc)

cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$jobs"
ctest --test-dir build --output-on-failure -j "$jobs"

CC=clang cmake -S . -B build-san -DCMAKE_BUILD_TYPE=Debug -DSERVD_ASAN=ON -DSERVD_UBSAN=ON \
    -DSERVD_FUZZ=ON >/dev/null
cmake --build build-san -j "$jobs"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir build-san --output-on-failure -j "$jobs"

CC=clang cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSERVD_TSAN=ON >/dev/null
cmake --build build-tsan -j "$jobs" --target servd servd-pack swap_open
# Without address randomisation where the system allows it (a container's
# seccomp profile may not): clang 14's ThreadSanitizer aborts at random on
# kernels that randomise more bits than its memory layout expects (above
# Debian 12's 28, as newer hosts of a Debian 12 container do).
norand=""
if setarch "$(uname -m)" -R true 2>/dev/null; then
    norand="setarch $(uname -m) -R"
fi
TSAN_OPTIONS=halt_on_error=1:abort_on_error=1 $norand \
    ctest --test-dir build-tsan --output-on-failure -j "$jobs" \
    -R '^e2e\.test_(server_swap|swap_watch|swap_under_load|server_ops|server_connections|pack_repro|pack_space|pack_base|pack_memory)$'
