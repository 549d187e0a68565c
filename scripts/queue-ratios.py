#!/usr/bin/env python3
"""Turn thread_system_queue_benchmarks JSON output into a Markdown table.

For each workload (benchmark name minus the queue segment) and each queue it
prints the median of the workload's metric, the min-max across repetitions
and the ratios against moodycamel and against mutex+deque.

Run the benchmarks so that the JSON holds every repetition (this script
computes min and max from them) plus Google Benchmark's aggregates:

    thread_system_queue_benchmarks --benchmark_repetitions=5 \\
        --benchmark_display_aggregates_only=true \\
        --benchmark_enable_random_interleaving=true \\
        --benchmark_out=queue_results.json --benchmark_out_format=json
    python3 scripts/queue-ratios.py queue_results.json > queue_results.md

Choice made: the median is Google Benchmark's "_median" aggregate when present
(otherwise the median of the repetitions found); min-max comes from the
individual repetitions, so use --benchmark_display_aggregates_only (console
only), not --benchmark_report_aggregates_only (which drops the repetitions
from the JSON too; the table then says "n/a" for min-max).

Ratios are oriented so that > 1 always means "this queue is better than the
reference": for throughput (higher is better) queue / reference, for
nanoseconds and bytes (lower is better) reference / queue.

Standard library only.
"""

import argparse
import json
import re
import statistics
import sys

# workload prefix -> (JSON field, label, higher_is_better, scale, unit)
METRICS = {
    "latency_enqueue": ("ns_per_op", "ns/op", False, 1.0, "ns"),
    "latency_dequeue": ("ns_per_op", "ns/op", False, 1.0, "ns"),
    "latency_pair": ("ns_per_op", "ns/(push+pop)", False, 1.0, "ns"),
    "batch": ("ns_per_job", "ns/job (push+pop)", False, 1.0, "ns"),
    "pc": ("items_per_second", "M jobs/s consumed", True, 1e-6, "M/s"),
    "contention": ("items_per_second", "M pairs/s", True, 1e-6, "M/s"),
    "memory": ("bytes_per_job", "bytes/job (RSS)", False, 1.0, "B"),
}
DEFAULT_METRIC = ("real_time", "real time", False, 1.0, "")

REFERENCES = ("moodycamel", "mutex+deque")
FAMILY_ORDER = ["latency_enqueue", "latency_dequeue", "latency_pair", "batch", "pc", "contention", "memory"]
QUEUE_ORDER = [
    "job_queue",
    "two_lock_job_queue",
    "bounded_queue",
    "lockfree_queue",
    "sharded_queue",
    "adaptive_job_queue",
    "moodycamel",
    "mutex+deque",
]
DISPLAY = {"mutex_deque": "mutex+deque"}
NOISE = re.compile(r"^(manual_time|real_time|iterations:\d+|repeats:\d+)$")


def split_name(run_name):
    """'pc/job_queue/P:2/C:2/ops:10000/manual_time' -> ('pc/P:2/C:2/ops:10000', 'pc', 'job_queue')."""
    parts = run_name.split("/")
    if len(parts) < 2:
        return run_name, parts[0], "?"
    family, queue = parts[0], parts[1]
    rest = [p for p in parts[2:] if not NOISE.match(p)]
    return "/".join([family] + rest), family, DISPLAY.get(queue, queue)


def workload_sort_key(key):
    """Families in FAMILY_ORDER, then numerically by their arguments (random
    interleaving shuffles the JSON order)."""
    parts = key.split("/")
    family = parts[0]
    rank = FAMILY_ORDER.index(family) if family in FAMILY_ORDER else len(FAMILY_ORDER)
    args = []
    for part in reversed(parts[1:]):  # last argument varies slowest in registration (ops before threads)
        value = part.split(":")[-1]
        args.append(int(value) if value.isdigit() else 0)
    return (rank, family, args)


def queue_sort_key(queue):
    return (QUEUE_ORDER.index(queue) if queue in QUEUE_ORDER else len(QUEUE_ORDER), queue)


def fmt(value):
    if value is None:
        return "n/a"
    magnitude = abs(value)
    if magnitude >= 100:
        return f"{value:.0f}"
    if magnitude >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def ratio(value, reference, higher_is_better):
    if value is None or reference is None or value == 0 or reference == 0:
        return "n/a"
    r = value / reference if higher_is_better else reference / value
    return f"{r:.2f}×"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("json_file", help="Google Benchmark JSON output (--benchmark_out_format=json)")
    args = parser.parse_args()

    with open(args.json_file, encoding="utf-8") as f:
        data = json.load(f)

    order = []  # workload keys in first-seen order
    queues_of = {}  # key -> [queue, ...] in first-seen order
    family_of = {}
    runs = {}  # (key, queue) -> [values of the individual repetitions]
    medians = {}  # (key, queue) -> median aggregate
    errors = {}

    for entry in data.get("benchmarks", []):
        run_name = entry.get("run_name", entry["name"])
        key, family, queue = split_name(run_name)
        if family == "adaptive_paired":  # ratios of its own (scripts/report.py, adaptive_paired_benchmarks.cpp)
            continue
        field, _, _, scale, _ = METRICS.get(family, DEFAULT_METRIC)
        if key not in queues_of:
            order.append(key)
            queues_of[key] = []
            family_of[key] = family
        if queue not in queues_of[key]:
            queues_of[key].append(queue)
        if entry.get("error_occurred"):
            errors[(key, queue)] = entry.get("error_message", "error")
            continue
        value = entry.get(field)
        if value is None:
            continue
        value = float(value) * scale
        if entry.get("run_type") == "aggregate":
            if entry.get("aggregate_name") == "median":
                medians[(key, queue)] = value
        else:
            runs.setdefault((key, queue), []).append(value)

    context = data.get("context", {})
    print("# Queue benchmarks: medians and ratios\n")
    print(
        f"Host: {context.get('host_name', '?')}, {context.get('num_cpus', '?')} CPUs, "
        f"{context.get('mhz_per_cpu', '?')} MHz; run {context.get('date', '?')}; "
        f"Google Benchmark library build: {context.get('library_build_type', '?')} (Debian's package; the queues themselves are built Release).\n"
    )
    print(
        "Median of the repetitions (Google Benchmark's _median aggregate), min–max over the individual "
        "repetitions, n = repetitions found. Ratios: > 1 means the row's queue is better than the reference "
        "(faster, more throughput or fewer bytes); < 1 means worse. Jobs are thread_system::job_function "
        "(64 bytes) holding an 8-byte callable, for every queue.\n"
    )
    print("| workload | queue | metric | median | min–max | n | vs moodycamel | vs mutex+deque |")
    print("|---|---|---|---:|---:|---:|---:|---:|")

    for key in sorted(order, key=workload_sort_key):
        queues_of[key].sort(key=queue_sort_key)
        family = family_of[key]
        _, label, higher, _, _ = METRICS.get(family, DEFAULT_METRIC)
        best = {}
        for queue in queues_of[key]:
            values = runs.get((key, queue), [])
            median = medians.get((key, queue))
            if median is None and values:
                median = statistics.median(values)
            best[queue] = median
        for queue in queues_of[key]:
            if (key, queue) in errors:
                print(f"| {key} | {queue} | {label} | error: {errors[(key, queue)]} | | | | |")
                continue
            values = runs.get((key, queue), [])
            spread = f"{fmt(min(values))}–{fmt(max(values))}" if values else "n/a"
            refs = [ratio(best[queue], best.get(ref), higher) for ref in REFERENCES]
            print(
                f"| {key} | {queue} | {label} | {fmt(best[queue])} | {spread} | {len(values)} | "
                f"{refs[0]} | {refs[1]} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
