"""The work-stealing scheduler against oneTBB and Boost.Asio
(thread_system_benchmarks: nested fork-join, parallel_for, external submission).
Its goals are in reporting/goals.py."""

from .common import LIB_LABEL, cell, fmt_ratio, section


@section
def table_scheduler(ctx, out):
    runs = ctx.runs
    out.append("## Nested fork-join, parallel_for, external submission (scheduler benchmarks)\n")
    out.append("From `thread_system_benchmarks` (scheduler_benchmarks.cpp): every library with hardware_concurrency "
               "threads. *fib(27), a task per call*: thread-ns per task = threads × wall time / tasks (lower is "
               "better). *parallel_for* over 10⁷ floats: elements/s. *External submit*: 10⁶ empty jobs from 1 or 2 "
               "producer threads: jobs/s.\n")
    specs = [
        ("nested fib: thread-ns per task", "BM_NestedFib_{}", "thread_ns_per_task", False, ""),
        ("parallel_for: elements/s", "BM_ParallelFor_{}", "items_per_second", True, "rate"),
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
    if not any_row:
        out.append("_No data (these benchmarks are not run in this mode)._\n")
        return
    out.extend(lines)
    out.append("")
