#!/usr/bin/env bash
# The whole suite with the other toolchains, without sanitizers or chaos:
# Clang 16 with libstdc++ (preset clang) and Clang 19 with libc++ 19
# (preset libcxx: GoogleTest built from Debian's sources, {fmt} header-only,
# no benchmarks). Both at -O1, warnings as errors. CI proves these
# toolchains with the same settings in its ASan build (preset asan-clang,
# scripts/run-sanitizers.sh) and its chaos build (preset chaos-libcxx)
# instead, one build each (README: Supported toolchains); this script is for
# a plain build with either.
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
