#!/usr/bin/env bash
# Builds the API reference of the public headers with Doxygen (Debian's
# doxygen) into build/docs/html and fails on any warning: every public
# symbol is documented. The CMake target `docs` runs the same.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v doxygen >/dev/null || { echo "check-docs.sh: doxygen not found (apt-get install doxygen)" >&2; exit 1; }
out="${1:-build/docs}"
mkdir -p "$out"
log="$out/warnings.log"
DOXYGEN_OUTPUT="$out" doxygen docs/Doxyfile 2>"$log" >/dev/null
if [[ -s "$log" ]]; then
  echo "doxygen: $(wc -l <"$log") warning lines (full list: $log); the first:" >&2
  head -20 "$log" >&2
  exit 1
fi
echo "docs: API reference in $out/html, no warnings"
