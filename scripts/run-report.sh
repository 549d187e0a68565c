#!/usr/bin/env bash
# The main job: builds the optimised benchmark preset, runs the examples and
# the thread-pool benchmarks (quick mode: short repetitions), and writes the
# results to report/ (benchmarks.json and benchmarks.txt).
# Usage: scripts/run-report.sh [--full]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --with-peers
cmake --workflow --preset bench

out=report
mkdir -p "$out"
echo "== examples"
build/bench/examples/example_quick_start
build/bench/examples/example_seed_style | tail -n 2

reps=3
min_time=0.05
if [[ "${1:-}" == "--full" ]]; then
  reps=5
  min_time=0.5
fi
echo "== thread_system_benchmarks (repetitions: $reps; medians reported)"
build/bench/benchmarks/thread_system_benchmarks \
  --benchmark_repetitions="$reps" \
  --benchmark_min_time="$min_time" \
  --benchmark_report_aggregates_only=true \
  --benchmark_out="$out/benchmarks.json" --benchmark_out_format=json \
  | tee "$out/benchmarks.txt"
echo "results: $out/benchmarks.txt, $out/benchmarks.json"
