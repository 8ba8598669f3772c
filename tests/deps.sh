#!/bin/sh
# Installs the Debian 12 packages servd needs, and only those missing.
#   tests/deps.sh          build dependencies (enough to build and run)
#   tests/deps.sh test     also what the test suite drives (curl, python3,
#                          clang for sanitizers and fuzzers, compressors, ...)
set -eu
pkgs="build-essential cmake pkg-config liblmdb-dev libuv1-dev zlib1g-dev libzstd-dev
      libbrotli-dev libmagic-dev libdeflate-dev libjansson-dev libutf8proc-dev libssl-dev"
if [ "${1:-}" = test ]; then
    pkgs="$pkgs clang libclang-rt-14-dev curl python3 gzip brotli zstd lmdb-utils"
    # the client test (tests/e2e/test_http_clients.py) drives wget as users do
    pkgs="$pkgs wget"
    # the hardening tests (tests/e2e/test_harden_*.py): slow-client attacks and
    # the leak check across pack swaps
    pkgs="$pkgs slowhttptest valgrind"
    # the browser test (tests/e2e/test_browser.py): Debian's Chromium driven by
    # playwright-core from npm (1.60, which runs on Debian's Node.js 18, as
    # releases before 1.62 do; 1.62 and later need 20); never a downloaded browser
    pkgs="$pkgs chromium nodejs"
    # the CDN tests (tests/e2e/test_cdn_*.py) start these caches in front of servd
    pkgs="$pkgs varnish trafficserver"
    # the reverse-proxy test (tests/e2e/test_proxy_reverse.py) starts these in front of
    # servd (each is skipped when missing; none is left running as a service here)
    pkgs="$pkgs haproxy nginx-light apache2 caddy"
    # the socket-activation test (tests/e2e/test_activation.py) also runs servd
    # under systemd's own systemd-socket-activate
    pkgs="$pkgs systemd"
fi
missing=""
for p in $pkgs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
        missing="$missing $p"
done
# npm may come with nodejs (NodeSource builds) instead of as Debian's own package
if [ "${1:-}" = test ] && ! command -v npm >/dev/null 2>&1; then
    missing="$missing npm"
fi
if [ -n "$missing" ]; then
    echo "deps: installing$missing" >&2
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
fi
