#!/usr/bin/env bash
# Installs the Debian packages Thread System needs to build, test and
# benchmark. Idempotent: packages already present are not reinstalled.
# Usage: scripts/install-deps.sh [--with-peers] [--with-prometheus] [--with-clang] [--with-docs]
#   --with-peers       also the comparison peers of the benchmark report
#                      (oneTBB, Boost.Asio, moodycamel::ConcurrentQueue, spdlog; OpenMP is
#                      GCC's libgomp, installed with g++) and gnuplot for its plots.
#   --with-prometheus  also Prometheus (about 100 MB): promtool checks the
#                      metrics exposition and the server scrapes the HTTP
#                      example in the monitoring tests, which skip themselves
#                      without it. Its service is not started.
#   --with-clang       also the other toolchains CI proves: Clang 16 (with
#                      GCC's libstdc++) with its sanitizer runtimes, and
#                      Clang 19 with libc++ 19 (the clang, libcxx, asan-clang
#                      and chaos-libcxx presets; GoogleTest is rebuilt from
#                      the sources libgtest-dev installs in /usr/src/googletest),
#                      clang-format-16 and clang-tidy-16 (scripts/check-format.sh,
#                      scripts/check-tidy.sh).
#   --with-docs        also Doxygen, for the API reference (scripts/check-docs.sh).
set -euo pipefail

# locales: the sources a monitoring test builds a German locale from (localedef).
packages=(g++ cmake ninja-build libgtest-dev libgmock-dev libbenchmark-dev python3 libfmt-dev pkgconf locales)
# Installed without recommends (prometheus-node-exporter) and with service
# starts denied.
quiet_packages=()
for arg in "$@"; do
  case "$arg" in
    --with-peers) packages+=(libtbb-dev libboost-dev libconcurrentqueue-dev libspdlog-dev gnuplot-nox) ;;
    --with-prometheus) quiet_packages+=(prometheus) ;;
    --with-docs) packages+=(doxygen) ;;
    --with-clang) packages+=(clang-16 libclang-rt-16-dev clang-19 libc++-19-dev libc++abi-19-dev googletest clang-format-16 clang-tidy-16) ;;
    *) echo "install-deps.sh: unknown option $arg" >&2; exit 2 ;;
  esac
done

not_installed() {
  local p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || echo "$p"
  done
}
mapfile -t missing < <(not_installed "${packages[@]}")
mapfile -t missing_quiet < <(not_installed "${quiet_packages[@]}")
if ((${#missing[@]} == 0 && ${#missing_quiet[@]} == 0)); then
  exit 0
fi

SUDO=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "need root (or sudo) to install: ${missing[*]} ${missing_quiet[*]}" >&2; exit 1; }
  SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
if ((${#missing[@]} > 0)); then
  echo "installing: ${missing[*]}"
  $SUDO apt-get install -y -qq "${missing[@]}"
fi
if ((${#missing_quiet[@]} > 0)); then
  echo "installing (no recommends, no service start): ${missing_quiet[*]}"
  # A package's maintainer scripts start its service through invoke-rc.d,
  # which asks policy-rc.d; exit status 101 means "not allowed". Only when
  # the machine has no policy of its own, and only for this install.
  policy=/usr/sbin/policy-rc.d
  made_policy=0
  if [[ ! -e $policy ]]; then
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null
    $SUDO chmod 755 "$policy"
    made_policy=1
  fi
  status=0
  $SUDO apt-get install -y -qq --no-install-recommends "${missing_quiet[@]}" || status=$?
  if ((made_policy)); then
    $SUDO rm -f "$policy"
  fi
  exit "$status"
fi
