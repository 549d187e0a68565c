#!/usr/bin/env bash
# The whole suite with the other toolchains CI proves (README: Supported
# toolchains): Clang 16 with libstdc++ (preset clang) and Clang 19 with
# libc++ 19 (preset libcxx: GoogleTest built from Debian's sources, {fmt}
# header-only, no benchmarks). Both at -O1 (the GCC release build is the -O3
# one; -O1 keeps CI within its time), warnings as errors.
set -euo pipefail
cd "$(dirname "$0")/.."
# The test presets leave parallelism to the machine: one test per core
# unless CTEST_PARALLEL_LEVEL says otherwise.
export CTEST_PARALLEL_LEVEL="${CTEST_PARALLEL_LEVEL:-$(nproc)}"
scripts/install-deps.sh --with-clang
echo "== toolchains: Clang 16 + libstdc++ (preset clang)"
cmake --workflow --preset clang
echo "== toolchains: Clang 19 + libc++ (preset libcxx)"
cmake --workflow --preset libcxx
