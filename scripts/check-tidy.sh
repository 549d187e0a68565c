#!/usr/bin/env bash
# clang-tidy 16 with the repository's .clang-tidy over the library sources
# (core, monitoring, logger) and, through them, the public headers
# (HeaderFilterRegex). Zero findings or it fails. Needs a configured build
# tree with compile_commands.json (default build/release: the test
# command's); usage: scripts/check-tidy.sh [build-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
tool="${CLANG_TIDY:-clang-tidy-16}"
build="${1:-build/release}"
command -v "$tool" >/dev/null || { echo "check-tidy.sh: $tool not found (scripts/install-deps.sh --with-clang)" >&2; exit 1; }
[[ -f "$build/compile_commands.json" ]] || { echo "check-tidy.sh: no $build/compile_commands.json (configure first)" >&2; exit 1; }
mapfile -t sources < <(git ls-files 'src/*.cpp' 'monitoring/src/*.cpp' 'logger/src/*.cpp')
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
status=0
printf '%s\n' "${sources[@]}" | xargs -P "$(nproc)" -n 1 "$tool" -p "$build" --quiet >"$log" 2>/dev/null || status=$?
findings=$(grep -c ': warning: \|: error: ' "$log" || true)
if ((findings > 0 || status != 0)); then
  echo "clang-tidy: $findings findings (exit $status) in ${#sources[@]} sources:" >&2
  grep -A3 ': warning: \|: error: ' "$log" >&2 || cat "$log" >&2
  exit 1
fi
echo "tidy: ${#sources[@]} sources and the headers they include, no findings ($tool)"
