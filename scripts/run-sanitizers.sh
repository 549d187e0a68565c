#!/usr/bin/env bash
# The full test suite under ASan+UBSan+LSan, then under TSan.
# The ASan build is Clang 16's with libstdc++ and warnings as errors (preset
# asan-clang): one build proves both the sanitizers and that Clang 16
# compiles and passes the suite; the TSan build is GCC's (preset tsan).
# The GCC ASan build is preset asan (`cmake --workflow --preset asan`).
# ThreadSanitizer needs a fixed address layout on kernels with high mmap
# randomisation; setarch -R provides it where allowed.
set -euo pipefail
cd "$(dirname "$0")/.."
# The test presets leave parallelism to the machine: one test per core
# unless CTEST_PARALLEL_LEVEL says otherwise.
export CTEST_PARALLEL_LEVEL="${CTEST_PARALLEL_LEVEL:-$(nproc)}"
scripts/install-deps.sh --with-clang
echo "== sanitizers: ASan+UBSan+LSan, Clang 16 + libstdc++ (preset asan-clang)"
cmake --workflow --preset asan-clang
echo "== sanitizers: TSan, GCC (preset tsan)"
if setarch "$(uname -m)" -R true 2>/dev/null; then
  setarch "$(uname -m)" -R cmake --workflow --preset tsan
else
  cmake --workflow --preset tsan
fi
