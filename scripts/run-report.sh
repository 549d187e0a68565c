#!/usr/bin/env bash
# The main job: installs the dependencies (with the comparison peers and
# gnuplot), builds the optimised benchmark preset, runs the examples, then
# scripts/report.py runs every benchmark binary and writes report/REPORT.md
# with PNG plots (raw JSON in report/raw/).
# Usage: scripts/run-report.sh [--smoke | --quick | --full] [--build-dir DIR] [--out DIR]
#   quick (default) takes a few minutes on 2 cores; --smoke seconds (CI);
#   --full the whole matrix with longer runs.
#   --build-dir DIR: use (and bring up to date) an existing optimised tree
#   that builds benchmarks and examples, e.g. build/release, instead of the
#   bench preset's build/bench (CI reuses its release tree this way).
set -euo pipefail
cd "$(dirname "$0")/.."
started=$SECONDS
scripts/install-deps.sh --with-peers
build_dir=build/bench
args=("$@")
for ((i = 0; i < ${#args[@]}; ++i)); do
  if [[ ${args[i]} == --build-dir ]] && ((i + 1 < ${#args[@]})); then build_dir=${args[i + 1]}; fi
  if [[ ${args[i]} == --build-dir=* ]]; then build_dir=${args[i]#--build-dir=}; fi
done
if [[ $build_dir == build/bench ]]; then
  cmake --workflow --preset bench
else
  if ! grep -qx 'CMAKE_BUILD_TYPE:STRING=Release' "$build_dir/CMakeCache.txt" 2>/dev/null; then
    echo "run-report: $build_dir is not a configured Release tree (configure it first, or drop --build-dir)" >&2
    exit 2
  fi
  cmake --build "$build_dir"
fi

echo "== examples"
"$build_dir"/examples/example_quick_start
"$build_dir"/examples/example_seed_style | tail -n 2

echo "== benchmarks and report"
python3 scripts/report.py "$@"
echo "run-report: $((SECONDS - started)) s in total (dependencies, build, examples, benchmarks, report)"
