#!/usr/bin/env bash
# Installs the Debian packages Thread System needs to build, test and
# benchmark. Idempotent: packages already present are not reinstalled.
# Usage: scripts/install-deps.sh [--with-peers]
#   --with-peers  also the comparison peers of the benchmark report
#                 (oneTBB, Boost.Asio, moodycamel::ConcurrentQueue, spdlog; OpenMP is
#                 GCC's libgomp, installed with g++) and gnuplot for its plots.
set -euo pipefail

packages=(g++ cmake ninja-build libgtest-dev libgmock-dev libbenchmark-dev python3 libfmt-dev)
if [[ "${1:-}" == "--with-peers" ]]; then
  packages+=(libtbb-dev libboost-dev libconcurrentqueue-dev libspdlog-dev gnuplot-nox)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  exit 0
fi

SUDO=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
  SUDO=sudo
fi
echo "installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq "${missing[@]}"
