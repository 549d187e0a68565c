#!/usr/bin/env bash
# The main job: installs the dependencies (with the comparison peers and
# gnuplot), builds the optimised benchmark preset, runs the examples, then
# scripts/report.py runs every benchmark binary and writes report/REPORT.md
# with PNG plots (raw JSON in report/raw/).
# Usage: scripts/run-report.sh [--smoke | --quick | --full] [--build-dir DIR] [--out DIR]
#   quick (default) takes a few minutes on 2 cores; --smoke seconds (CI);
#   --full the whole matrix with longer runs.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$SECONDS
scripts/install-deps.sh --with-peers
cmake --workflow --preset bench

echo "== examples"
build/bench/examples/example_quick_start
build/bench/examples/example_seed_style | tail -n 2

echo "== benchmarks and report"
python3 scripts/report.py "$@"
echo "run-report: $((SECONDS - started)) s in total (dependencies, build, examples, benchmarks, report)"
