"""The guides' workload tables measured against the peers (thread_system_report_benchmarks):
long jobs (1 ms, 10 ms), the 1M-job run with CPU utilisation, jobs that
allocate, and the start-up profile."""

from .common import LIB_LABEL, cell, fmt, fmt_ratio, present_libs, section, values


def _libs_table(ctx, out, rows, libs, unit, table, metric, higher_better, extra=None):
    """rows: [(label, config, key of lib)], one column per library; peers carry
    their ratio vs Thread System (> 1: the peer is better). `extra(lib, key)`
    adds text after a cell."""
    runs = ctx.runs
    out.append("| workload | " + " | ".join(LIB_LABEL[l] for l in libs) + " |")
    out.append("|---|" + "---:|" * len(libs))
    for label, config, key_of in rows:
        ours = runs.stat(key_of("thread_system"), "items_per_second" if unit == "rate" else metric)
        row = [label]
        for lib in libs:
            st = runs.stat(key_of(lib), "items_per_second" if unit == "rate" else metric)
            text = cell(st, unit)
            if lib != "thread_system" and st is not None:
                text += f" **{fmt_ratio(ctx.compare(table, config, lib, metric, st, ours, higher_better))}**"
            if extra is not None and st is not None:
                text += extra(lib, key_of(lib))
            row.append(text)
        out.append("| " + " | ".join(row) + " |")
    out.append("")


@section
def table_long_jobs(ctx, out):
    runs = ctx.runs
    out.append("## Long jobs: 1 ms and 10 ms\n")
    out.append("Mirrors the guides' *1ms-10ms: individual jobs* range. Each worker's share is 4 jobs of J (a busy "
               "spin); one producer submits them all and then sleeps on the count (an atomic wait: it takes no core "
               "from the workers). **Efficiency** = the ideal time (4 × J) / the measured time; **CPU** = the "
               "process's CPU time minus the submitting thread's, over the wall time, in percent of one core (the "
               "workers' utilisation; 100% per worker is the ceiling). Median (min–max); ratio > 1: the peer is "
               "better. OpenMP and std::async are not in these tables.\n")
    libs = present_libs(runs, "long_jobs")
    if not libs:
        out.append("_No data (long_jobs/ benchmarks not run in this mode)._\n")
        return
    ws = values(runs, "long_jobs", "workers")
    out.append("| job | workers | " + " | ".join(f"{LIB_LABEL[l]} efficiency | CPU" for l in libs) + " |")
    out.append("|---|---:|" + "---:|---:|" * len(libs))
    for j in values(runs, "long_jobs", "job_us"):
        for w in ws:
            key = lambda lib: f"long_jobs/{lib}/job_us:{j}/workers:{w}"  # noqa: E731
            ours = runs.stat(key("thread_system"), "efficiency")
            row = [f"{j // 1000} ms", str(w)]
            for lib in libs:
                eff = runs.stat(key(lib), "efficiency")
                cpu = runs.stat(key(lib), "cpu_percent")
                text = "n/a" if eff is None else f"{eff[0] * 100:.1f}% ({eff[1] * 100:.1f}–{eff[2] * 100:.1f})"
                if lib != "thread_system" and eff is not None:
                    text += f" **{fmt_ratio(ctx.compare('long jobs', f'{j // 1000} ms, {w} workers', lib, 'efficiency', eff, ours, True))}**"
                row += [text, "n/a" if cpu is None else f"{cpu[0]:.0f}%"]
            out.append("| " + " | ".join(row) + " |")
    out.append("")


@section
def table_million(ctx, out):
    runs = ctx.runs
    out.append("## One million jobs: time and CPU utilisation\n")
    out.append("Mirrors the guides' *Real-World Measurements* (*Time (1M jobs)*, *CPU Usage*). One producer submits "
               "1 000 000 empty jobs (100 000 in smoke mode) to a pool of as many workers as cores and yields until "
               "the last one ran; one timed run per repetition. **CPU** = the process's CPU time minus the submitting "
               "thread's, over the wall time (the workers; percent of one core): a pool whose workers sleep while "
               "jobs arrive shows less. Median (min–max); ratio > 1: the peer is better.\n")
    libs = present_libs(runs, "million")
    if not libs:
        out.append("_No data (million/ benchmarks not run in this mode)._\n")
        return
    out.append("| library | workers | jobs | time | jobs/s | CPU (workers) |")
    out.append("|---|---:|---:|---:|---:|---:|")
    for w in values(runs, "million", "workers"):
        ours = runs.stat(f"million/thread_system/workers:{w}", "run_ns")
        for lib in libs:
            key = f"million/{lib}/workers:{w}"
            ms = runs.stat(key, "run_ns")
            jobs = runs.stat(key, "jobs")
            cpu = runs.stat(key, "cpu_percent")
            text = cell(ms, "ns")
            if lib != "thread_system" and ms is not None:
                text += f" **{fmt_ratio(ctx.compare('1M jobs', f'{w} workers', lib, 'time', ms, ours, False))}**"
            out.append(f"| {LIB_LABEL[lib]} | {w} | {'n/a' if jobs is None else f'{jobs[0]:,.0f}'} | {text} | "
                       f"{cell(runs.stat(key, 'items_per_second'), 'rate')} | "
                       f"{'n/a' if cpu is None else f'{cpu[0]:.0f}% ({cpu[1]:.0f}–{cpu[2]:.0f})'} |")
    out.append("")


ALLOC_LABEL = {0: "none", 512: "small (512 B)", 64 << 10: "medium (64 KiB)", 512 << 10: "large (512 KiB)",
               2 << 20: "very large (2 MiB)"}


@section
def table_alloc_jobs(ctx, out):
    runs = ctx.runs
    out.append("## Jobs that allocate\n")
    out.append("Mirrors the guides' *Memory Allocation Impact on Performance*. Each job mallocs B bytes, writes one "
               "byte per 4 KiB page and frees them; one producer, as many workers as cores; one untimed round first "
               "(so every worker's malloc arena exists and glibc's dynamic mmap threshold has seen the size, for "
               "every library alike). Cells: median jobs/s (min–max), in parentheses the rate against the same "
               "library's jobs without allocation; ratio > 1: the peer is faster. The allocator dominates from "
               "64 KiB on: the pools differ little there.\n")
    libs = present_libs(runs, "alloc_jobs")
    if not libs:
        out.append("_No data (alloc_jobs/ benchmarks not run in this mode)._\n")
        return
    for w in values(runs, "alloc_jobs", "workers"):
        def none_rate(lib):
            st = runs.stat(f"alloc_jobs/{lib}/bytes:0/workers:{w}", "items_per_second")
            return None if st is None or not st[0] else st[0]

        def vs_none(lib, key):
            st, base = runs.stat(key, "items_per_second"), none_rate(lib)
            return "" if st is None or base is None else f" ({st[0] / base * 100:.0f}%)"

        rows = [(f"{ALLOC_LABEL.get(b, fmt(b, 'bytes'))}, {w} workers", f"{b} bytes, {w} workers",
                 (lambda b: lambda lib: f"alloc_jobs/{lib}/bytes:{b}/workers:{w}")(b))
                for b in values(runs, "alloc_jobs", "bytes")]
        _libs_table(ctx, out, rows, libs, "rate", "allocating jobs", "jobs/s", True, extra=vs_none)
    out.append("The guides' *P99 Latency* column: the run time of one allocating job (malloc to free, the page "
               "writes included), sampled on about 2000 jobs per round of the same runs; p99 of the samples, "
               "median (min–max) over the repetitions, in parentheses the p50; ratio > 1: the peer's tail is "
               "shorter. The pool's part is which thread runs the job (its malloc arena) and what runs beside "
               "it.\n")
    for w in values(runs, "alloc_jobs", "workers"):
        def p50(lib, key):
            st = runs.stat(key, "run_p50_ns")
            return "" if st is None else f" (p50 {fmt(st[0], 'ns')})"

        rows = [(f"{ALLOC_LABEL.get(b, fmt(b, 'bytes'))}, {w} workers", f"{b} bytes, {w} workers",
                 (lambda b: lambda lib: f"alloc_jobs/{lib}/bytes:{b}/workers:{w}")(b))
                for b in values(runs, "alloc_jobs", "bytes")]
        _libs_table(ctx, out, rows, libs, "ns", "allocating jobs", "run_p99_ns", False, extra=p50)


@section
def table_startup(ctx, out):
    runs = ctx.runs
    out.append("## Start-up profile: creation to first job\n")
    out.append("The guides' *Thread Startup* figure and start-up profile. From the constructor's call until the first "
               "job starts (**first job**), and until all N workers are inside a job at once (**all workers**: each "
               "job waits for the others, so N distinct threads ran one). Jobs are submitted right after "
               "construction. Medians over the iterations; destruction is not timed. Only pools that own their "
               "threads (oneTBB and OpenMP start a process-wide pool once). Ratio > 1: the peer is faster.\n")
    libs = present_libs(runs, "startup")
    if not libs:
        out.append("_No data (startup/ benchmarks not run in this mode)._\n")
        return
    for metric, label in (("first_job_ns", "first job"), ("all_workers_ns", "all workers")):
        out.append(f"**{label}**\n")
        rows = [(f"{w} worker{'s' if w > 1 else ''}", f"{w} workers, {label}",
                 (lambda w: lambda lib: f"startup/{lib}/workers:{w}")(w)) for w in values(runs, "startup", "workers")]
        _libs_table(ctx, out, rows, libs, "ns", "start-up", metric, False)


STARTUP_STAGES = (("created", "constructor returned"), ("first_job", "first job ran"),
                  ("all_workers", "all workers inside a job at once"), ("steady", "after 100 000 empty jobs"))


@section
def table_startup_memory(ctx, out):
    runs = ctx.runs
    out.append("## Start-up memory profile\n")
    out.append("Mirrors the guides' *Start-up Memory Profile*. One process per figure: RSS (smaps_rollup) minus RSS before the "
               "constructor's call (malloc_trim first), and the time since that call, at each stage. Jobs are "
               "submitted right after construction; the 100 000 empty jobs come from one producer as fast as it can "
               "submit them, so queue growth is in the last row. Only pools that own their threads. Cells: median "
               "RSS delta, time; ratio (RSS) > 1: the peer uses less.\n")
    libs = present_libs(runs, "startup_memory")
    if not libs:
        out.append("_No data (startup_memory/ benchmarks not run in this mode)._\n")
        return
    for w in values(runs, "startup_memory", "workers"):
        out.append(f"| stage, {w} workers | " + " | ".join(LIB_LABEL[l] for l in libs) + " |")
        out.append("|---|" + "---:|" * len(libs))
        for stage, label in STARTUP_STAGES:
            ours = runs.stat(f"startup_memory/thread_system/workers:{w}", f"{stage}_rss")
            row = [label]
            for lib in libs:
                key = f"startup_memory/{lib}/workers:{w}"
                rss, t = runs.stat(key, f"{stage}_rss"), runs.stat(key, f"{stage}_ns")
                text = f"{fmt(None if rss is None else rss[0], 'bytes')}, {fmt(None if t is None else t[0], 'ns')}"
                if lib != "thread_system" and rss is not None:
                    text += f" **{fmt_ratio(ctx.compare('start-up memory', f'{w} workers, {label}', lib, 'RSS', rss, ours, False))}**"
                row.append(text)
            out.append("| " + " | ".join(row) + " |")
        out.append("")
