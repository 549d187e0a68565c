"""The work-stealing scheduler against oneTBB and Boost.Asio
(thread_system_benchmarks: nested fork-join, parallel_for, external submission).
Its goals are in reporting/goals.py."""

import re

from .common import LIB_LABEL, cell, fmt_ratio, section


@section
def table_scheduler(ctx, out):
    runs = ctx.runs
    out.append("## Nested fork-join, parallel_for, external submission (scheduler benchmarks)\n")
    out.append("From `thread_system_benchmarks` (scheduler_benchmarks.cpp): every library with hardware_concurrency "
               "threads (where the calling thread takes part - parallel_for, parallel_reduce - it is one of them "
               "for every library: a Thread System pool of one worker fewer). *fib(27), a task per call*, at 1 and 2 workers (and every core where there are more): thread-ns per "
               "task = workers × wall time / tasks (lower is better; oneTBB's arena of as many threads, its "
               "external thread included). *parallel_for* over 10⁷ floats, and over 10⁵ (tens of microseconds a call, where the per-call costs weigh): elements/s, and each library's speed-up over the same loop run on one thread (`BM_ParallelFor*_Serial`: near W× with W threads when they share one cache; above it when each thread's part of the array stays in a cache of its own between calls); *parallel_reduce*, the sum of 10⁶ floats: elements/s. *A task_group from outside the pool*: a thread that is not a worker runs 8 jobs in a group and waits (oneTBB: the same thread in an arena, a slot kept for it), empty ones and ones that spin for ~1 µs and ~10 µs: jobs/s. *External submit*: 10⁶ empty jobs from 1 or 2 "
               "producer threads: jobs/s.\n")
    fib_workers = sorted({int(m.group(1)) for key in runs.reps
                          if (m := re.match(r"^BM_NestedFib_ThreadSystem/workers:(\d+)$", key))})
    specs = [
        *[(f"nested fib, {w} worker{'s' if w > 1 else ''}: thread-ns per task", f"BM_NestedFib_{{}}/workers:{w}",
           "thread_ns_per_task", False, "") for w in fib_workers],
        ("parallel_for: elements/s", "BM_ParallelFor_{}", "items_per_second", True, "rate"),
        ("parallel_for, 10⁵ floats: elements/s", "BM_ParallelForShort_{}", "items_per_second", True, "rate"),
        ("parallel_reduce, sum of 10⁶ floats: elements/s", "BM_ParallelReduce_{}", "items_per_second", True, "rate"),
        ("a task_group of 8 jobs from outside the pool: jobs/s", "BM_GroupFromOutside_{}", "items_per_second", True,
         "rate"),
        ("a task_group of 8 jobs of ~1 µs from outside the pool: jobs/s", "BM_GroupOfWorkFromOutside_{}/job_ns:1000",
         "items_per_second", True, "rate"),
        ("a task_group of 8 jobs of ~10 µs from outside the pool: jobs/s", "BM_GroupOfWorkFromOutside_{}/job_ns:10000",
         "items_per_second", True, "rate"),
        ("external submit, 1 producer: jobs/s", "BM_ExternalSubmit_{}/producers:1", "items_per_second", True, "rate"),
        ("external submit, 2 producers: jobs/s", "BM_ExternalSubmit_{}/producers:2", "items_per_second", True, "rate"),
        ("idle submit→start p50", "BM_IdleLatency_{}", "p50_ns", False, "ns"),
    ]
    names = [("ThreadSystem", "thread_system"), ("oneTBB", "onetbb"), ("BoostAsio", "boost_asio")]
    any_row = False
    lines = ["| workload | " + " | ".join(LIB_LABEL[l] for _, l in names) + " |", "|---|" + "---:|" * len(names)]
    for label, pattern, field, higher, unit in specs:
        ours = runs.stat(pattern.format("ThreadSystem"), field)
        if ours is None:
            continue
        any_row = True
        row = [label]
        for bm, lib in names:
            s = runs.stat(pattern.format(bm), field)
            if lib == "thread_system":
                row.append(cell(s, unit))
            elif s is None:
                row.append("–")
            else:
                r = ctx.compare("scheduler", label.split(":")[0], lib, label, s, ours, higher)
                row.append(f"{cell(s, unit)} **{fmt_ratio(r)}**")
        lines.append("| " + " | ".join(row) + " |")
    # Each library's speed-up over the loop on one thread
    # (BM_ParallelFor*_Serial): what bounds the ratio between them.
    for label, pattern in (("parallel_for", "BM_ParallelFor_{}"), ("parallel_for, 10⁵ floats", "BM_ParallelForShort_{}")):
        serial = runs.stat(pattern.format("Serial"), "items_per_second")
        if serial is None or serial[0] == 0:
            continue
        row = [f"{label}: speed-up over the same loop on one thread ({cell(serial, 'rate')} elements/s)"]
        for bm, _ in names:
            s = runs.stat(pattern.format(bm), "items_per_second")
            row.append("–" if s is None else f"{s[0] / serial[0]:.2f}×")
        lines.append("| " + " | ".join(row) + " |")
    if not any_row:
        out.append("_No data (these benchmarks are not run in this mode)._\n")
        return
    out.extend(lines)
    out.append("")
