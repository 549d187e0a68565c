#!/usr/bin/env bash
# The test command: installs what is missing, builds the optimised preset
# with warnings as errors, and runs the whole test suite (unit, stress,
# consumer-of-the-installed-package, examples).
set -euo pipefail
cd "$(dirname "$0")/.."
# The test presets leave parallelism to the machine: one test per core
# unless CTEST_PARALLEL_LEVEL says otherwise.
export CTEST_PARALLEL_LEVEL="${CTEST_PARALLEL_LEVEL:-$(nproc)}"
scripts/install-deps.sh
cmake --workflow --preset release
