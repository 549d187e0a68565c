#!/usr/bin/env bash
# Checks that every C++ file git tracks (or would track) is formatted by .clang-format with
# clang-format 16 (Debian's clang-format-16; version 14 mangles C++20
# requires-clauses, so no older one is accepted). Lists the files that are
# not and exits non-zero. To fix: scripts/check-format.sh --fix
set -euo pipefail
cd "$(dirname "$0")/.."
tool="${CLANG_FORMAT:-clang-format-16}"
command -v "$tool" >/dev/null || { echo "check-format.sh: $tool not found (scripts/install-deps.sh --with-clang)" >&2; exit 1; }
# Tracked files and new ones not yet added (not the ignored ones), so a
# file is checked before its first commit.
mapfile -t files < <(git ls-files --cached --others --exclude-standard '*.cpp' '*.hpp' '*.h' '*.cc')
if [[ "${1:-}" == "--fix" ]]; then
  "$tool" -i "${files[@]}"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  "$tool" --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if ((${#bad[@]} > 0)); then
  echo "not formatted with $tool (scripts/check-format.sh --fix):" >&2
  printf '  %s\n' "${bad[@]}" >&2
  exit 1
fi
echo "format: ${#files[@]} files formatted with $tool"
