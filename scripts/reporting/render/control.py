"""Cancellation, backpressure, resize, timers and wait_group against their own
baselines (thread_system_control_benchmarks): cost ratios."""

from .common import cell, fmt_pct, fmt_ratio, job_label, ns_per_item, section, values


@section
def table_control(ctx, out):
    runs, cores = ctx.runs, ctx.cores
    out.append("## Control: cancellation, backpressure, resize, timers\n")
    out.append("From `thread_system_control_benchmarks` (`benchmarks/control/control_benchmarks.cpp`), one process, "
               "repetitions interleaved. Pool workloads: one producer, a 2-worker pool, wall clock from the first "
               "submission until the last job finished. Every ratio here is a **cost ratio: the variant's time "
               "(per job, per call) ÷ its baseline's in the same run; > 1 means the variant is slower**.\n")
    if ctx.not_built("control"):
        out.append("_thread_system_control_benchmarks not built: no data._\n")
        return
    if not any(k.startswith("BM_") for k in runs.reps if k.split("/")[0] in (
            "BM_TokenIsCancelled", "BM_CancelJobs", "BM_Backpressure", "BM_ResizeGrow", "BM_TimerLateness1K")):
        out.append("_No data (control benchmarks not run in this mode)._\n")
        return

    # -- cancellation
    plain = ns_per_item(runs.stat("BM_CancelJobs/plain", "items_per_second"))
    sub_plain = ns_per_item(runs.stat("BM_CancelSubmit/plain", "items_per_second"))
    rows = [
        ("`is_cancelled()` on a live token (single thread)", runs.stat("BM_TokenIsCancelled", "real_ns"), None, None),
        ("`register_callback` + `unregister` (single thread)", runs.stat("BM_RegisterUnregister", "real_ns"), None, None),
        ("`pool.enqueue(f)`, empty job — baseline", plain, None, None),
        ("`pool.enqueue(token, f)`, live token (the pool checks it)",
         ns_per_item(runs.stat("BM_CancelJobs/token", "items_per_second")), plain, "token attached vs not"),
        ("`pool.enqueue(f)`, f captures a const token (`[tok]`) and checks it itself",
         ns_per_item(runs.stat("BM_CancelJobs/captured_token", "items_per_second")), plain, "token captured in the job vs none"),
        ("`pool.enqueue(f)`, f captures a movable copy (`[t = tok]`) and checks it itself",
         ns_per_item(runs.stat("BM_CancelJobs/captured_movable_token", "items_per_second")), plain,
         "movable token captured in the job vs none"),
        ("`pool.enqueue(token, f)`, token already cancelled (job skipped)",
         ns_per_item(runs.stat("BM_CancelJobs/cancelled_token", "items_per_second")), plain, "skipped (cancelled) job vs a job that runs"),
        ("`pool.submit(f)` + `future::get()`, empty job — baseline", sub_plain, None, None),
        ("`pool.submit(token, f)` + `future::get()`, live token",
         ns_per_item(runs.stat("BM_CancelSubmit/token", "items_per_second")), sub_plain, "submit with token vs without"),
    ]
    rows = [r for r in rows if r[1] is not None]
    if rows:
        out.append("### Cancellation overhead per job\n")
        out.append("Empty jobs (100 000 per iteration; 20 000 futures for submit) end to end; ns per job = wall time / "
                   "jobs. The first two rows are single-thread call costs.\n")
        out.append("| operation | time | cost ratio | overhead |")
        out.append("|---|---:|---:|---:|")
        for label, st, base, what in rows:
            r = ctx.cost_ratio("control", what, st, base, False) if base is not None else None
            out.append(f"| {label} | {cell(st, 'ns')} | {fmt_ratio(r) if base is not None else '–'} | "
                       f"{fmt_pct(r) if base is not None else '–'} |")
        out.append("")

    # -- backpressure
    kinds = [("unbounded", "unbounded (default)"), ("block_1024", "`block(1024)`"),
             ("reject_1024", "`reject(1024)`, producer yields and retries"), ("caller_runs_1024", "`caller_runs(1024)`")]
    sizes = values(runs, "BM_Backpressure", "job_ns")
    if sizes:
        out.append("### Bounded vs unbounded enqueue\n")
        out.append("`pool_options::backpressure`, side by side: 100 000 empty jobs or 20 000 ~1 µs jobs per iteration "
                   f"from one producer into 2 workers ({cores} cores: producer + workers are oversubscribed), wall clock "
                   "until `wait_idle()` returns; jobs/s = jobs that ran. Cost ratio vs unbounded = unbounded jobs/s ÷ "
                   "this policy's jobs/s. *retries/job*: refusals (`queue_full`) per job for reject; *caller ran*: "
                   "share of jobs caller_runs ran on the producer.\n")
        header = "| policy | " + " | ".join(f"{job_label(j)}: jobs/s | cost ratio | retries/job | caller ran" for j in sizes) + " |"
        out.append(header)
        out.append("|---|" + "---:|---:|---:|---:|" * len(sizes))
        for kind, label in kinds:
            row = [label]
            have = False
            for j in sizes:
                key = f"BM_Backpressure/{kind}/job_ns:{j}"
                st = runs.stat(key, "items_per_second")
                base = runs.stat(f"BM_Backpressure/unbounded/job_ns:{j}", "items_per_second")
                if st is None:
                    row += ["–", "–", "–", "–"]
                    continue
                have = True
                r = None if kind == "unbounded" else ctx.cost_ratio("control", f"{label} vs unbounded, {job_label(j)}", st, base, True)
                retries = runs.stat(key, "retries_per_job")
                caller = runs.stat(key, "caller_ran_pct")
                row += [cell(st, "rate"), "1.00×" if kind == "unbounded" else fmt_ratio(r),
                        "–" if retries is None else f"{retries[0]:.3g}", "–" if caller is None else f"{caller[0]:.1f}%"]
            if have:
                out.append("| " + " | ".join(row) + " |")
        out.append("")

    # -- resize
    grow = runs.stat("BM_ResizeGrow", "real_ns")
    fresh = runs.stat("BM_ResizeFreshPool", "real_ns")
    shrink = runs.stat("BM_ResizeShrink", "real_ns")
    if grow or shrink:
        out.append("### Resize latency\n")
        out.append("*Grow 1 → 8*: from the `resize(8)` call until 8 distinct workers have each run a job (8 jobs that "
                   "wait for each other), on a pool that was shrunk to 1 worker 2 ms earlier (so the grow restarts "
                   "threads). Reference: a new `thread_pool{8}` from its constructor until the same. *Shrink 8 → 1*: "
                   "the `resize(1)` call alone on an idle pool whose 8 workers all ran a job (the leavers exit after "
                   f"it returns). 8 workers on {cores} cores: oversubscribed.\n")
        out.append("| operation | time | reference | cost ratio |")
        out.append("|---|---:|---:|---:|")
        if grow:
            r = ctx.cost_ratio("control", "resize 1→8 vs a new 8-worker pool", grow, fresh, False)
            out.append(f"| grow 1 → 8, until the new workers ran a job | {cell(grow, 'ns')} | new 8-worker pool: "
                       f"{cell(fresh, 'ns')} | {fmt_ratio(r)} |")
        if shrink:
            out.append(f"| shrink 8 → 1, the call | {cell(shrink, 'ns')} | – | – |")
        out.append("")

    # -- timers, wait_group
    timer_rows = [(0, "on the timer thread"), (1, "dispatched to a 2-worker pool")]
    trs = [(label, f"BM_TimerLateness1K/via_pool:{v}") for v, label in timer_rows if runs.stat(f"BM_TimerLateness1K/via_pool:{v}", "p50_ns")]
    if trs:
        out.append("### Timer lateness (1000 one-shot timers over 20 ms)\n")
        out.append("Lateness = the job's start − its due time (steady_clock), percentiles over the 5 × 1000 timers of a "
                   "repetition; median over repetitions (min–max).\n")
        out.append("| timers run | p50 | p99 | max |")
        out.append("|---|---:|---:|---:|")
        for label, key in trs:
            out.append(f"| {label} | " + " | ".join(cell(runs.stat(key, f), "ns") for f in ("p50_ns", "p99_ns", "max_ns")) + " |")
        out.append("")
    wg = runs.stat("BM_WaitGroupRoundTrip", "real_ns")
    fut = runs.stat("BM_FutureRoundTrip", "real_ns")
    if wg or fut:
        out.append("### wait_group round trip\n")
        out.append("`add(1)`, a job on a 1-worker idle pool calls `done()`, the caller's `wait()` returns (includes the "
                   "worker's wake-up); the same with `submit()` + `future::get()` as the baseline.\n")
        out.append("| round trip | time | cost ratio |")
        out.append("|---|---:|---:|")
        out.append(f"| `submit` + `future::get()` — baseline | {cell(fut, 'ns')} | 1.00× |")
        r = ctx.cost_ratio("control", "wait_group round trip vs future round trip", wg, fut, False)
        out.append(f"| `wait_group` add/done/wait | {cell(wg, 'ns')} | {fmt_ratio(r)} |")
        out.append("")


COMPONENT_QUEUES = (("two_lock_job_queue", "`two_lock_job_queue` (the mutex injector)"), ("job_queue", "`job_queue`"),
                    ("lockfree_queue", "`lockfree_queue`"),
                    ("adaptive_job_queue", "`adaptive_job_queue`"), ("sharded_queue", "`sharded_queue`"))


@section
def table_components(ctx, out):
    """The guides' *Component Overhead* table, gathered from several binaries of this run."""
    runs = ctx.runs
    rows = [("thread_base", "`start()` + `stop()`: its OS thread created, run, joined",
             runs.stat("BM_ThreadBaseStartStop", "real_ns"), "control"),
            ("thread_base", "`get_wake_interval()`", runs.stat("BM_WakeIntervalRead", "real_ns"), "control"),
            ("thread_base", "`set_wake_interval()`", runs.stat("BM_WakeIntervalWrite", "real_ns"), "control")]
    for w in values(runs, "create", "workers"):
        rows.append(("thread_pool", f"creation, {w} worker{'s' if w > 1 else ''}: construct, start, stop, join",
                     runs.stat(f"create/thread_system/workers:{w}", "real_ns"), "report `create/`"))
    rows.append(("thread_pool", "`enqueue(f)`, empty job, one producer → 2 workers, end to end per job",
                 ns_per_item(runs.stat("BM_CancelJobs/plain", "items_per_second")), "control"))
    for q, label in COMPONENT_QUEUES:
        for op in ("enqueue", "dequeue"):
            rows.append(("queues", f"{label} {op}, one thread", runs.stat(f"latency_{op}/{q}", "ns_per_op"),
                         "queue `latency_*`"))
    rows += [("sync", "`std::scoped_lock` on an uncontended `spin_lock`", runs.stat("BM_SpinLockScoped", "real_ns"),
              "control"),
             ("sync", "the same on a `std::mutex` (reference)", runs.stat("BM_MutexScoped", "real_ns"), "control"),
             ("cancellation", "`is_cancelled()` on a live token", runs.stat("BM_TokenIsCancelled", "real_ns"), "control"),
             ("cancellation", "`register_callback` + `unregister`", runs.stat("BM_RegisterUnregister", "real_ns"),
              "control"),
             ("services", "`service_registry::resolve<I>()` of an instance",
              runs.stat("BM_ServiceResolve", "real_ns"), "control"),
             ("services", "the same through a child registry (falls back to its parent)",
              runs.stat("BM_ServiceResolveChild", "real_ns"), "control"),
             ("logger", "a 123-char text call on the caller, p50", runs.stat("logger_latency/thread_system", "p50_ns"),
              "logger `logger_latency/`"),
             ("logger", "the same, mean", runs.stat("logger_latency/thread_system", "mean_ns"),
              "logger `logger_latency/`")]
    rows = [r for r in rows if r[2] is not None]
    out.append("## Component overheads\n")
    out.append("Mirrors the guides' *Component Overhead* table: one operation of each component, on one thread and "
               "uncontended unless the row says otherwise, gathered from the binaries of this run (column *from*; "
               "`benchmarks/control/component_benchmarks.cpp` has the rows of its own). Median (min–max).\n")
    if not rows:
        out.append("_No data (component benchmarks not run in this mode)._\n")
        return
    out.append("| component | operation | time | from |")
    out.append("|---|---|---:|---|")
    for comp, op, st, src in rows:
        out.append(f"| {comp} | {op} | {cell(st, 'ns')} | {src} |")
    out.append("")
