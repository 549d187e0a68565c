#!/usr/bin/env bash
# Builds the Debian packages (CPack, cmake/packaging.cmake), installs them
# with dpkg -i, and builds and runs tests/consumer against the installed
# system packages the way a user of the packages would: a plain
# find_package(thread_system CONFIG REQUIRED COMPONENTS monitoring logger)
# and a plain `c++ $(pkg-config --cflags --libs ...)`, with no prefix hints.
# Then removes the packages it installed (--keep leaves them installed).
#
# Needs root (dpkg). Run from anywhere; uses build/package.
# Usage: scripts/check-packages.sh [--keep]
set -euo pipefail
cd "$(dirname "$0")/.."

keep=0
for arg in "$@"; do
  case "$arg" in
    --keep) keep=1 ;;
    *) echo "check-packages.sh: unknown option $arg" >&2; exit 2 ;;
  esac
done
if [[ $(id -u) -ne 0 ]]; then
  echo "check-packages.sh: needs root to install the packages with dpkg" >&2
  exit 1
fi

build=build/package
work=$build/consumer
packages=(libthread-system-dev libthread-system-monitoring-dev libthread-system-logger-dev)

echo "== packages: build (Release, CMAKE_INSTALL_PREFIX=/usr)"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr \
  -DTHREAD_SYSTEM_BUILD_TESTS=OFF -DTHREAD_SYSTEM_BUILD_BENCHMARKS=OFF -DTHREAD_SYSTEM_BUILD_EXAMPLES=OFF \
  -DTHREAD_SYSTEM_WARNINGS_AS_ERRORS=ON
cmake --build "$build"
rm -f "$build"/*.deb
(cd "$build" && cpack -G DEB)
debs=()
for p in "${packages[@]}"; do
  deb=$(find "$build" -maxdepth 1 -name "${p}_*.deb" -print -quit)
  [[ -n $deb ]] || { echo "check-packages.sh: CPack made no $p package" >&2; exit 1; }
  debs+=("$deb")
  dpkg-deb --info "$deb" | sed -n 's/^ \(Package\|Version\|Depends\): /  \1: /p'
done

# Remove afterwards only what was not installed before.
remove=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || remove+=("$p")
done
cleanup() {
  if ((keep == 0 && ${#remove[@]} > 0)); then
    echo "== packages: removing ${remove[*]}"
    dpkg -r "${remove[@]}" >/dev/null
  fi
}
trap cleanup EXIT

echo "== packages: dpkg -i"
dpkg -i "${debs[@]}"

echo "== packages: CMake consumer, plain find_package (COMPONENTS monitoring logger)"
rm -rf "$work"
# No CMAKE_PREFIX_PATH, no thread_system_DIR: only the system's own locations.
env -u CMAKE_PREFIX_PATH cmake -S tests/consumer -B "$work/cmake" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  "-DCONSUMER_COMPONENTS=monitoring;logger" | tee "$work.log"
grep -q "from /usr/lib/[^ ]*cmake/thread_system" "$work.log" ||
  { echo "check-packages.sh: the consumer did not find the installed package under /usr/lib" >&2; exit 1; }
cmake --build "$work/cmake"
"$work/cmake/consumer"

echo "== packages: pkg-config consumer (thread_system, then thread_system-monitoring thread_system-logger)"
unset PKG_CONFIG_PATH
[[ $(pkg-config --variable=prefix thread_system) == /usr ]] ||
  { echo "check-packages.sh: pkg-config did not find the installed thread_system.pc" >&2; exit 1; }
# shellcheck disable=SC2046  # word splitting of the flags is intended
c++ -std=c++20 -o "$work/pkg-config-core" tests/consumer/main.cpp $(pkg-config --cflags --libs thread_system)
"$work/pkg-config-core"
# shellcheck disable=SC2046
c++ -std=c++20 -DCONSUMER_HAS_MONITORING=1 -DCONSUMER_HAS_LOGGER=1 -o "$work/pkg-config-components" \
  tests/consumer/main.cpp $(pkg-config --cflags --libs thread_system-monitoring thread_system-logger)
"$work/pkg-config-components"

echo "== packages: all checks passed"
