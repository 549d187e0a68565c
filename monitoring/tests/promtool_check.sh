#!/bin/sh
# monitoring.promtool.<scenario>: Prometheus' own linter on the exposition
# of one scenario (exposition_scenarios.hpp). Fails on any finding.
#
#   promtool_check.sh DUMP_PROGRAM SCENARIO PROMTOOL OUT_DIR
set -eu
dump=$1 scenario=$2 promtool=$3 out_dir=$4
mkdir -p "$out_dir"
out="$out_dir/$scenario.prom"
"$dump" "$scenario" >"$out"
# An empty or truncated text would pass the linter: make sure it is there.
grep -q '^thread_system_pool_jobs_executed_total{' "$out"
grep -q '^thread_system_pool_job_wait_seconds_bucket{.*le="+Inf"}' "$out"
echo "$(wc -l <"$out") lines in $out"
"$promtool" check metrics <"$out"
echo "promtool check metrics: no findings for $scenario"
