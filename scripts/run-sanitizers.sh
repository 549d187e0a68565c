#!/usr/bin/env bash
# The full test suite under ASan+UBSan+LSan, then under TSan.
# ThreadSanitizer needs a fixed address layout on kernels with high mmap
# randomisation; setarch -R provides it where allowed.
set -euo pipefail
cd "$(dirname "$0")/.."
# The test presets leave parallelism to the machine: one test per core
# unless CTEST_PARALLEL_LEVEL says otherwise.
export CTEST_PARALLEL_LEVEL="${CTEST_PARALLEL_LEVEL:-$(nproc)}"
scripts/install-deps.sh
echo "== sanitizers: ASan+UBSan+LSan (preset asan)"
cmake --workflow --preset asan
echo "== sanitizers: TSan (preset tsan)"
if setarch "$(uname -m)" -R true 2>/dev/null; then
  setarch "$(uname -m)" -R cmake --workflow --preset tsan
else
  cmake --workflow --preset tsan
fi
