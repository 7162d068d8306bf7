#!/usr/bin/env bash
# Install everything airlock needs to build and test on Debian 12, then
# build it into ./build. Run as root (or with sudo available).
#   scripts/setup.sh            build dependencies + test programs + build
#   scripts/setup.sh --no-build only install packages
set -euo pipefail
cd "$(dirname "$0")/.."

build_deps=(
	build-essential clang meson ninja-build pkg-config
	libevent-dev libssl-dev libnftnl-dev libmnl-dev libyaml-dev
	libcmocka-dev libseccomp-dev libclang-rt-14-dev
)
# Real programs for the end-to-end tests and the test lab (DESIGN.md).
test_deps=(
	iproute2 nftables util-linux uidmap procps psmisc ca-certificates
	curl dnsutils netcat-openbsd openssl git python3 python3-pip python3-venv
	dnsmasq-base nginx-light fcgiwrap
	man-db groff-base zsh openjdk-17-jre-headless
	cargo
	apt-utils # apt-ftparchive: the local apt repository of tests/lab/test_apt.sh
	# contrib/seccomp: the runtime default it is made from; the container
	# harness (tests/sandbox/container.py) applies it with libseccomp.
	golang-github-containers-common python3-seccomp
)
# What the benchmarks compare against.
bench_deps=(squid tinyproxy bubblewrap dnsperf hyperfine)

sudo=()
[ "$(id -u)" -eq 0 ] || sudo=(sudo)

missing=()
for p in "${build_deps[@]}" "${test_deps[@]}" "${bench_deps[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
done
command -v npm >/dev/null || missing+=(npm)
if [ "${#missing[@]}" -gt 0 ]; then
	echo "setup: installing ${missing[*]}"
	"${sudo[@]}" apt-get update -qq
	DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq \
		--no-install-recommends "${missing[@]}" >/dev/null
fi

[ "${1:-}" = "--no-build" ] && exit 0
[ -d build ] || meson setup build
ninja -C build
echo "setup: built ./build/cli/airlock; run the tests with: meson test -C build"
