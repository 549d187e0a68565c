#!/usr/bin/env bash
# The test command: installs what is missing, builds the optimised preset
# with warnings as errors, and runs the whole test suite (unit, stress,
# consumer-of-the-installed-package, examples).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --workflow --preset release
