#!/usr/bin/env bash
# Every public header compiles on its own: a translation unit that includes
# only that header, with g++ -std=c++20 -fsyntax-only. The test binaries
# precompile GoogleTest and common standard headers
# (tests/support/test_pch.hpp), so a header that forgets an include of its
# own would still compile there; this check is what catches it.
#
#   scripts/check-headers-standalone.sh
set -euo pipefail
cd "$(dirname "$0")/.."

cxx="${CXX_FOR_HEADER_CHECK:-g++}"
mapfile -t headers < <(git ls-files 'include/*.hpp' 'logger/include/*.hpp' 'monitoring/include/*.hpp')
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

check_one() {
  local header="$1" include tu
  include="${header#*include/}"
  tu="$(mktemp -p "$TMPDIR_FOR_CHECK" XXXXXX.cpp)"
  echo "#include <${include}>" >"$tu"
  if ! "$CXX_FOR_CHECK" -std=c++20 -fsyntax-only -Iinclude -Ilogger/include -Imonitoring/include "$tu" \
    2>"$tu.err"; then
    echo "not self-contained: ${include}"
    sed 's/^/    /' "$tu.err" | head -20
    return 1
  fi
}
export -f check_one
export CXX_FOR_CHECK="$cxx" TMPDIR_FOR_CHECK="$tmp"

if printf '%s\n' "${headers[@]}" | xargs -P "$(nproc)" -n 1 bash -c 'check_one "$0"'; then
  echo "headers: ${#headers[@]} public headers each compile on their own ($cxx)"
else
  echo "check-headers-standalone.sh: a header needs what it does not include (above)" >&2
  exit 1
fi
