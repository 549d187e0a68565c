"""Thread System against the peer libraries (thread_system_report_benchmarks),
and the seed's pool-level tables: throughput, scaling, producers x workers,
submit-to-start latency, creation, memory."""

import re

from .common import (LIB_LABEL, cell, fmt_ratio, job_label, oversub, per_workers_table, present_libs, ratio,
                     section, tkey, values)


@section
def table_comparison(ctx, out):
    runs, cores = ctx.runs, ctx.cores
    out.append("## Comparison with other libraries\n")
    out.append(f"Mirrors the seed's *Comparison with Other Libraries* (whose figures were not measured side by side). "
               f"Here every library runs in this run on this machine with {cores} workers and one producer; ratios vs "
               "Thread System (> 1: the peer is faster).\n")
    job_sizes = [j for j in (0, 1000, 10000) if runs.stat(tkey(j, cores, 1, "thread_system"), "items_per_second")]
    if not job_sizes:
        out.append("_No data._\n")
        return
    out.append("| library | " + " | ".join(f"{job_label(j)}: jobs/s | ratio" for j in job_sizes) + " |")
    out.append("|---|" + "---:|---:|" * len(job_sizes))
    for lib in present_libs(runs, "throughput"):
        row = [LIB_LABEL[lib]]
        for j in job_sizes:
            s = runs.stat(tkey(j, cores, 1, lib), "items_per_second")
            ours = runs.stat(tkey(j, cores, 1, "thread_system"), "items_per_second")
            row += [cell(s, "rate"), fmt_ratio(ratio(s, ours, True))]
        out.append("| " + " | ".join(row) + " |")
    out.append("")


@section
def table_throughput(ctx, out):
    runs, cores = ctx.runs, ctx.cores
    out.append("## Throughput by job complexity × workers\n")
    out.append("Mirrors the seed's *Throughput by Job Complexity* and *Real-World Measurements*. One producer (the "
               "benchmark thread) submits the jobs; wall clock from the first submit until the last job finished "
               "(a counter the jobs increment, the producer yields until it is reached — the same for every "
               "library); jobs/s counts jobs that ran. OpenMP with a team of 1 runs each task inline in the creating thread (no hand-off at all), so its 1-worker figures are not a queue measurement; with more threads libgomp also runs a new task inline once many are pending (task throttling), so for empty jobs much of OpenMP's figure is the creating thread calling the jobs directly. Cells: median jobs/s (min–max) and ratio vs Thread System "
               f"(> 1: the peer is faster). This machine has {cores} cores: more workers than that is "
               "oversubscribed. OpenMP: the producing thread is one of the team. std::async: a thread per job "
               "(1000 jobs at most per iteration), shown in the column of the core count.\n")
    job_sizes = values(runs, "throughput", "job_ns")
    ws = values(runs, "throughput", "workers")
    if not job_sizes:
        out.append("_No data._\n")
        return
    libs = present_libs(runs, "throughput")
    series = {}
    for j in job_sizes:
        out.append(f"### {job_label(j)}\n")
        out.append("| library | " + " | ".join(f"{w} worker{'s' if w > 1 else ''}{oversub(w, cores)}" for w in ws) + " |")
        out.append("|---|" + "---:|" * len(ws))
        for lib in libs:
            row = [LIB_LABEL[lib]]
            for w in ws:
                s = runs.stat(tkey(j, w, 1, lib), "items_per_second")
                ours = runs.stat(tkey(j, w, 1, "thread_system"), "items_per_second")
                if s is None:
                    row.append("–")
                    continue
                if lib == "thread_system":
                    row.append(cell(s, "rate"))
                else:
                    config = f"{job_label(j)}, {w} workers{oversub(w, cores)}, 1 producer"
                    # OpenMP runs tasks inline in the producing thread with a
                    # team of 1, and throttles to inline execution when many
                    # empty tasks are pending: not a hand-off, so say so
                    # wherever the comparison is listed.
                    inline = lib == "openmp" and (w == 1 or j == 0)
                    if inline:
                        config += " (OpenMP runs these tasks inline: not a queue hand-off)"
                    r = ctx.compare("throughput", config, lib, "jobs/s", s, ours, True)
                    mark = "†" if inline else ""
                    row.append(f"{cell(s, 'rate')} **{fmt_ratio(r)}**{mark}")
                series.setdefault((j, lib), []).append((w, s))
            out.append("| " + " | ".join(row) + " |")
        if "openmp" in libs:
            out.append("")
            out.append("† OpenMP ran these tasks inline in the producing thread (team of 1, or task throttling with empty "
                       "tasks): the figure measures calling the job, not handing it to another thread.")
        out.append("")
    ctx.plot("throughput", (job_sizes, series))
    out.append("![throughput vs workers, one panel per job size](throughput.png)\n")


@section
def table_scaling(ctx, out):
    runs, cores = ctx.runs, ctx.cores
    out.append("## Worker scaling efficiency\n")
    out.append("Mirrors the seed's *Worker Thread Scaling Efficiency*, from the throughput runs above with the largest "
               "job size measured (one producer): speedup = jobs/s(N workers) / jobs/s(1 worker); efficiency = "
               f"speedup / N, and speedup / min(N, {cores} cores) (the most this machine can give).\n")
    job_sizes = values(runs, "throughput", "job_ns")
    ws = values(runs, "throughput", "workers")
    if not job_sizes or len(ws) < 2:
        out.append("_Not enough data._\n")
        return
    j = max(job_sizes)
    libs = [l for l in present_libs(runs, "throughput") if runs.stat(tkey(j, 1, 1, l), "items_per_second")]
    out.append(f"Job: {job_label(j)}.\n")
    out.append("| library | " + " | ".join(f"{w} workers{oversub(w, cores)}: speedup / eff. / eff. vs cores" for w in ws) + " |")
    out.append("|---|" + "---:|" * len(ws))
    dat = []
    for lib in libs:
        base = runs.stat(tkey(j, 1, 1, lib), "items_per_second")[0]
        row = [LIB_LABEL[lib]]
        pts = []
        for w in ws:
            s = runs.stat(tkey(j, w, 1, lib), "items_per_second")
            if s is None:
                row.append("–")
                continue
            sp = s[0] / base
            row.append(f"{sp:.2f}× / {100 * sp / w:.0f}% / {100 * sp / min(w, cores):.0f}%")
            pts.append((w, 100 * sp / min(w, cores)))
        dat.append((lib, pts))
        out.append("| " + " | ".join(row) + " |")
    out.append("")
    ctx.plot("scaling", (j, dat))
    out.append("![scaling efficiency vs workers](scaling.png)\n")


@section
def table_producer_matrix(ctx, out):
    runs, cores = ctx.runs, ctx.cores
    out.append("## Producers × workers (seed 004)\n")
    out.append("Mirrors seed 004's producer × worker table: empty jobs, P producer threads (parked on a barrier "
               "between iterations) each submitting 1/P of the jobs into a pool of W workers; median jobs/s (min–max) "
               "and, for peers, the ratio vs Thread System in the same cell. OpenMP has no external producers (not "
               f"measured); std::async is left out (a thread per job, one worker count). {cores} cores: P + W > {cores} is oversubscribed.\n")
    ps = values(runs, "throughput", "producers")
    ws = values(runs, "throughput", "workers")
    if len(ps) < 2:
        out.append("_Only one producer count measured in this mode._\n")
        return
    libs = [l for l in present_libs(runs, "throughput") if l != "std_async" and any(runs.stat(tkey(0, w, p, l), "items_per_second") for w in ws for p in ps if p > 1)]
    heat = {}
    for lib in libs:
        out.append(f"### {LIB_LABEL[lib]}\n")
        out.append("| producers \\ workers | " + " | ".join(str(w) for w in ws) + " |")
        out.append("|---:|" + "---:|" * len(ws))
        for p in ps:
            row = [str(p)]
            for w in ws:
                s = runs.stat(tkey(0, w, p, lib), "items_per_second")
                if s is None:
                    row.append("–")
                    continue
                heat[(lib, p, w)] = s[0]
                if lib == "thread_system":
                    row.append(cell(s, "rate"))
                else:
                    ours = runs.stat(tkey(0, w, p, "thread_system"), "items_per_second")
                    if p > 1:  # p == 1 is already in the throughput table
                        r = ctx.compare("producers × workers", f"empty job, {p} producers, {w} workers", lib, "jobs/s", s, ours, True)
                    else:
                        r = ratio(s, ours, True)
                    row.append(f"{cell(s, 'rate')} **{fmt_ratio(r)}**")
            out.append("| " + " | ".join(row) + " |")
        out.append("")
    ctx.plot("heatmap", (libs, ps, ws, heat))
    out.append("![producers × workers heat map, M jobs/s](heatmap.png)\n")


@section
def table_idle_latency(ctx, out):
    runs = ctx.runs
    out.append("## Submit→start latency on an idle pool, per library\n")
    out.append("Mirrors the seed's *Job Submission Latency* (empty-queue row), for every library: the pool has "
               "`workers` threads, parked (500 µs sleep before each sample); the job stores a steady_clock stamp. "
               "Percentiles are over the samples of one repetition; the table shows their median over repetitions "
               "(min–max). OpenMP's figure includes forking the team (`parallel`/`single`/`task`); std::async's "
               "includes creating a thread. Ratio on p50: > 1 means the peer starts jobs sooner. CPU: the whole "
               "process's CPU time over the test (sleeps included), in % of one core: what keeping workers awake "
               "between samples costs. The last row is Thread System with `pool_options::idle_wait` = 1 ms "
               "instead of the default 100 µs: its workers still poll (yielding) when the next sample comes, "
               "the trade OpenMP's spinning team makes (ratio: against the default).\n")
    libs = present_libs(runs, "latency")
    if not libs:
        out.append("_No data._\n")
        return
    w = values(runs, "latency", "workers")
    w = w[0] if w else 2
    out.append(f"| library (workers: {w}) | p50 | p95 | p99 | max | CPU | p50 ratio |")
    out.append("|---|---:|---:|---:|---:|---:|---:|")
    ours = runs.stat(f"latency/thread_system/workers:{w}", "p50_ns")
    dat = []

    def row(label, key, ratio):
        stats = [runs.stat(key, f) for f in ("p50_ns", "p95_ns", "p99_ns", "max_ns")]
        cpu = runs.stat(key, "cpu_percent")
        cpu_cell = f"{cpu[0]:.0f}%" if cpu is not None else "—"
        r = ratio(stats[0])
        out.append(f"| {label} | " + " | ".join(cell(s, "ns") for s in stats) + f" | {cpu_cell} | {r} |")
        return stats

    for lib in libs:
        key = f"latency/{lib}/workers:{w}"
        if lib == "thread_system":
            stats = row(LIB_LABEL[lib], key, lambda s: "1.00×")
        else:
            stats = row(LIB_LABEL[lib], key, lambda s, lib=lib: fmt_ratio(
                ctx.compare("idle latency", f"workers:{w}", lib, "p50 submit→start", s, ours, False)))
        if all(s is not None for s in stats[:3]):
            dat.append((lib, [s[0] / 1e3 for s in stats[:3]]))
    awake_key = f"latency/thread_system_idle_wait/workers:{w}"
    if runs.stat(awake_key, "p50_ns") is not None:
        row("Thread System, `idle_wait` 1 ms", awake_key,
            lambda s: fmt_ratio(ours[0] / s[0]) if ours is not None and s is not None and s[0] > 0 else "—")
    out.append("")
    if dat:
        ctx.plot("latency", dat)
        out.append("![submit→start latency percentiles per library](latency.png)\n")


@section
def table_queue_depth_latency(ctx, out):
    runs = ctx.runs
    out.append("## Job submission latency by queue depth (Thread System)\n")
    out.append("Mirrors the seed's *Job Submission Latency*: submit→start of one job with N empty jobs queued ahead of "
               "it (2 workers held while the queue is filled; 0 = idle pool, parked workers). From "
               "`thread_system_benchmarks` `BM_SubmitToStartLatency`; Thread System only (peers: see the idle-pool "
               "latency table).\n")
    rows = []
    for key in sorted(runs.reps):
        m = re.match(r"^BM_SubmitToStartLatency/queued:(\d+)$", key)
        if m:
            rows.append((int(m.group(1)), key))
    if not rows:
        out.append("_No data (BM_SubmitToStartLatency not run)._\n")
        return
    out.append("| queued ahead | p50 | p95 | p99 |")
    out.append("|---:|---:|---:|---:|")
    for depth, key in sorted(rows):
        out.append(f"| {depth} | " + " | ".join(cell(runs.stat(key, f), "ns") for f in ("p50_ns", "p95_ns", "p99_ns")) + " |")
    out.append("")


@section
def table_batching(ctx, out):
    runs = ctx.runs
    out.append("## Batching overhead by batch size (Thread System)\n")
    out.append("Mirrors the guides' *Batching reduces scheduling overhead* (overhead per job by batch size): one "
               "producer submits 100,000 empty jobs as `enqueue_batch()` calls of B jobs into 2 workers and waits "
               "(`BM_SubmitBatchOverhead`); overhead per job = wall time / jobs, everything included (submission, "
               "waking, running, waiting). Then the workers' side, the guides' `set_batch_processing(true, n)`: each "
               "worker takes up to n jobs per visit to the pool's queue (`BM_WorkerInjectorBatch`, 2 workers, one "
               "producer submitting one job at a time): a larger n costs fewer visits to the queue's lock, but a "
               "worker may hold jobs another idle worker could have started (then stolen: the steals column). "
               "Median (min–max).\n")
    sub = []
    for key in runs.reps:
        m = re.match(r"^BM_SubmitBatchOverhead/batch:(\d+)$", key)
        if m:
            sub.append((int(m.group(1)), key))
    if sub:
        out.append("| submission batch B | jobs/s | overhead per job |")
        out.append("|---:|---:|---:|")
        for b, key in sorted(sub):
            s = runs.stat(key, "items_per_second")
            per_job = None if s is None else tuple(1e9 / v if v else 0 for v in (s[0], s[2], s[1])) + (s[3],)
            out.append(f"| {b:,} | {cell(s, 'rate')} | {cell(per_job, 'ns')} |")
        out.append("")
    else:
        out.append("_No data (BM_SubmitBatchOverhead not run in this mode)._\n")
    wrk = {}
    for key in runs.reps:
        m = re.match(r"^BM_WorkerInjectorBatch/batch:(\d+)/job_ns:(\d+)$", key)
        if m:
            wrk.setdefault(int(m.group(1)), {})[int(m.group(2))] = key
    if wrk:
        job_ns = sorted({j for r in wrk.values() for j in r})
        out.append("| worker batch n | " + " | ".join(f"{job_label(j)} jobs/s | steals" for j in job_ns) + " |")
        out.append("|---:|" + "---:|---:|" * len(job_ns))
        for n in sorted(wrk):
            row = [str(n)]
            for j in job_ns:
                key = wrk[n].get(j, "")
                steals = runs.stat(key, "steals")
                row += [cell(runs.stat(key, "items_per_second"), "rate"), "n/a" if steals is None else f"{steals[0]:,.0f}"]
            out.append("| " + " | ".join(row) + " |")
        out.append("")
    else:
        out.append("_No data (BM_WorkerInjectorBatch not run in this mode)._\n")


@section
def table_waiting_jobs(ctx, out):
    runs = ctx.runs
    out.append("## I/O-bound and mixed scaling: workers ≫ cores (Thread System)\n")
    out.append("Mirrors the guides' I/O-bound and mixed workloads, where more workers than cores pay off. "
               "`BM_WaitingJobs`: each job sleeps 200 µs (an I/O wait, no CPU); in the mixed workload it first spins "
               "100 µs. One producer submits 16 jobs per worker and waits. Ideal: workers / (spin + sleep), capped "
               f"at cores / spin ({ctx.cores} cores); efficiency = measured / ideal. Sleeps overshoot by the OS's timer "
               "slack (about 50 µs on Linux), which bounds the I/O efficiency below 1. Median (min–max).\n")
    rows = {}
    for key in runs.reps:
        m = re.match(r"^BM_WaitingJobs/workers:(\d+)/cpu_us:(\d+)$", key)
        if m:
            rows.setdefault(int(m.group(1)), {})[int(m.group(2))] = key
    if not rows:
        out.append("_No data (BM_WaitingJobs not run in this mode)._\n")
        return
    kinds = sorted({c for r in rows.values() for c in r})
    label = {0: "I/O (sleep 200 µs)", 100: "mixed (spin 100 µs + sleep 200 µs)"}
    out.append("| workers | " + " | ".join(f"{label.get(c, f'cpu {c} µs')} jobs/s | efficiency" for c in kinds) + " |")
    out.append("|---:|" + "---:|---:|" * len(kinds))
    for w in sorted(rows):
        row = [f"{w}{oversub(w, ctx.cores)}"]
        for c in kinds:
            key = rows[w].get(c, "")
            st = runs.stat(key, "items_per_second")
            ideal = runs.stat(key, "ideal_per_second")
            eff = None if st is None or ideal is None or not ideal[0] else st[0] / ideal[0]
            row += [cell(st, "rate"), "n/a" if eff is None else f"{eff * 100:.0f}%"]
        out.append("| " + " | ".join(row) + " |")
    out.append("")


@section
def table_creation(ctx, out):
    runs = ctx.runs
    out.append("## Thread pool creation\n")
    out.append("Mirrors the seed's *Thread Pool Creation Performance*. One iteration = construct the pool, start its N "
               "threads, stop and join them (wall clock). Only pools that own their threads: oneTBB and OpenMP keep a "
               "process-wide thread pool, std::async has none.\n")
    libs = present_libs(runs, "create")
    ws = values(runs, "create", "workers")
    if not ws:
        out.append("_No data (create/ benchmarks not run in this mode)._\n")
        return
    per_workers_table(ctx, out, libs, ws, "create", "real_ns", "ns", "creation", "workers:{w}", "create+join time",
                      header_ratio=True)


@section
def table_memory(ctx, out):
    runs = ctx.runs
    out.append("## Memory usage\n")
    out.append("Mirrors the seed's *Memory Usage by Configuration* (its *Memory Allocation Impact* is the table of jobs that allocate). Each repetition "
               "is its own process (threads, heap and cached thread stacks left by other benchmarks, or by an earlier "
               "repetition, do not count). **RSS per worker**: "
               "resident memory (RSS, from /proc/self/smaps_rollup, a walk of the page tables; VmRSS is approximate on "
               "current kernels) after creating a pool of N threads with all N running a job (malloc_trim first) minus "
               "RSS before, divided by N — thread stacks (the touched pages) and per-thread malloc arenas are included. Pools "
               "that own their threads are warmed up first (a 1-worker pool of the same library runs a job and is "
               "destroyed; its job blocks on the same kind of gate as the measured jobs), so code pages and one-time "
               "initialisation are not counted per worker. A glibc thread touches two pages of its stack (8 KiB) "
               "before it runs a job: the floor for every library that owns its threads. "
               "oneTBB's arena and OpenMP's team come from a process-wide pool created on first use, so their "
               "figure is the first use. Ratio: > 1 means the peer uses less.\n")
    libs = present_libs(runs, "memory_per_worker")
    ws = values(runs, "memory_per_worker", "workers")
    if not libs:
        out.append("_No data._\n")
    else:
        per_workers_table(ctx, out, libs, ws, "memory_per_worker", "rss_per_worker_bytes", "bytes", "memory",
                          "{w} workers", "RSS per worker")

    out.append("### Whole pool, idle\n")
    out.append("The guides' claim: an idle pool of N workers takes under 1 MB. RSS of the same process 50 ms after "
               "the N jobs above finished (the workers idle, their stacks touched) minus RSS before the pool was "
               "created: the pool object, its queues, its threads' stacks and malloc arenas. Ratio: > 1 means the "
               "peer uses less.\n")
    libs = present_libs(runs, "memory_per_worker")
    if not libs or not ws or runs.stat(f"memory_per_worker/{libs[0]}/workers:{ws[0]}", "idle_pool_bytes") is None:
        out.append("_No data._\n")
    else:
        per_workers_table(ctx, out, libs, ws, "memory_per_worker", "idle_pool_bytes", "bytes", "memory",
                          "{w} workers, idle pool", "whole idle pool")

    out.append("### Bytes per queued job\n")
    out.append("100 000 empty jobs (an 8-byte capture) queued behind the only worker, which is blocked; RSS delta / "
               "100 000 (includes the queue's own growth). Thread System packs such a job into 24 bytes of its "
               "injector's storage, a list of 32 KiB segments that grows one segment at a time and copies nothing, "
               "so the figure is the jobs' own bytes plus at most a segment; the bare queue's figure is in the "
               "queue-level memory rows. The naive pool stores std::function in a std::deque.\n")
    libs = present_libs(runs, "queued_bytes")
    if not libs:
        out.append("_No data._\n")
    else:
        ours = runs.stat("queued_bytes/thread_system/jobs:100000", "bytes_per_job")
        out.append("| library | bytes/job | ratio |")
        out.append("|---|---:|---:|")
        for lib in libs:
            s = runs.stat(f"queued_bytes/{lib}/jobs:100000", "bytes_per_job")
            r = "1.00×" if lib == "thread_system" else fmt_ratio(ctx.compare("memory", "100K queued jobs", lib, "bytes per queued job", s, ours, False))
            out.append(f"| {LIB_LABEL[lib]} | {cell(s, 'bytes')} | {r} |")
        out.append("")

    out.append("### Idle CPU\n")
    out.append("CPU time of the whole process (getrusage) over 0.5 s with an idle pool of N workers, after every "
               "worker ran a job; in percent of one core. OpenMP runs with the environment's OMP_WAIT_POLICY "
               "(unset: libgomp's default, spin then sleep).\n")
    libs = present_libs(runs, "idle_cpu")
    ws = values(runs, "idle_cpu", "workers")
    if not libs:
        out.append("_No data._\n")
    else:
        out.append("| workers | " + " | ".join(LIB_LABEL[l] for l in libs) + " |")
        out.append("|---:|" + "---:|" * len(libs))
        for w in ws:
            row = [str(w)]
            for lib in libs:
                s = runs.stat(f"idle_cpu/{lib}/workers:{w}", "cpu_percent")
                row.append("n/a" if s is None else f"{s[0]:.2f}% ({s[1]:.2f}–{s[2]:.2f})")
            out.append("| " + " | ".join(row) + " |")
        out.append("")
