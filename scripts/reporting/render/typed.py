"""The typed thread pool against the standard pool (thread_system_typed_benchmarks).
Its goals are in reporting/goals.py; the verdict cells come from them."""

import re

from .common import cell, fmt_ratio, ns_per_item, section
from .verdicts import criterion

# The rows of the job-type throughput table whose goals the table states.
TYPE_MIX_GOAL_ROWS = r"^BM_TypedPoolTypeMix/types:(\d+)/queue:2/job_ns:1000$"


def goals_sentence(ctx):
    """"Goals: 1 type ≥ 0.98×, 3 types ≥ 0.85× (default per-type queue)." from reporting/goals.py."""
    parts = []
    for m, spec in ctx.verdicts.declared(TYPE_MIX_GOAL_ROWS):
        types = int(m.group(1))
        parts.append(f"{types} type{'s' if types > 1 else ''} {criterion(spec, '.2f')}×")
    return f"Goals: {', '.join(parts)} (default per-type queue)." if parts else ""


@section
def table_typed(ctx, out):
    runs, cores = ctx.runs, ctx.cores
    out.append("## Typed thread pool vs the standard pool\n")
    out.append("Mirrors the seed's *Type Thread Pool Performance*, *Priority Scheduling Performance* and *Job Type "
               "Routing* tables, measured side by side in one process (`thread_system_typed_benchmarks`, "
               "`benchmarks/typed/typed_benchmarks.cpp`); repetitions interleaved with the standard pool's.\n")
    if ctx.not_built("typed"):
        out.append("_thread_system_typed_benchmarks not built: no data._\n")
        return
    base_1us = runs.stat("BM_StandardPool/job_ns:1000", "items_per_second")
    if base_1us is None:
        out.append("_No data (typed benchmarks not run in this mode)._\n")
        return
    base_empty = runs.stat("BM_StandardPool/job_ns:0", "items_per_second")
    queue_name = {"0": "mutex", "1": "lockfree", "2": "adaptive (default)", "3": "sharded"}

    out.append("### Throughput by number of job types\n")
    out.append(f"One producer enqueues 100 000 jobs round-robin over N job types into a typed pool of {cores} universal "
               f"workers; the standard `thread_pool` with {cores} workers gets the same jobs. Wall clock until "
               "`wait_idle()` returns; jobs/s = jobs that ran. *~1 µs job*: a calibrated busy spin (the seed's "
               "\"simple job\"; the goals are judged on it); *empty job*: the per-job overhead undiluted. "
               "Ratio = typed jobs/s ÷ standard pool jobs/s in the same run (**< 1: the typed pool is slower**). "
               f"{goals_sentence(ctx)}\n")
    out.append("| pool | per-type queue | ~1 µs job: jobs/s | ratio | empty job: jobs/s | ratio | goal |")
    out.append("|---|---|---:|---:|---:|---:|---|")
    out.append(f"| standard thread_pool | – | {cell(base_1us, 'rate')} | 1.00× | {cell(base_empty, 'rate')} | "
               f"{'1.00×' if base_empty else 'n/a'} | |")
    mix = {}
    for key in runs.reps:
        m = re.match(r"^BM_TypedPoolTypeMix/types:(\d+)/queue:(\d+)/job_ns:(\d+)$", key)
        if m:
            mix.setdefault((m.group(2) != "2", int(m.group(1)), m.group(2)), {})[int(m.group(3))] = key
    for (_, types, q) in sorted(mix):
        keys = mix[(q != "2", types, q)]
        s1 = runs.stat(keys.get(1000, ""), "items_per_second")
        s0 = runs.stat(keys.get(0, ""), "items_per_second")
        r1 = None if s1 is None else s1[0] / base_1us[0]
        r0 = None if (s0 is None or base_empty is None) else s0[0] / base_empty[0]
        ctx.cost_ratio("typed pool", f"{types} type{'s' if types > 1 else ''}, {queue_name.get(q, q)} queue, ~1 µs jobs, vs standard pool",
                       s1, base_1us, True)
        ctx.cost_ratio("typed pool", f"{types} type{'s' if types > 1 else ''}, {queue_name.get(q, q)} queue, empty jobs, vs standard pool",
                       s0, base_empty, True)
        judged = ctx.verdicts.judged_for(keys.get(1000, ""))
        verdict = "" if judged is None else f"{judged.verdict} ({criterion(judged.spec, '.2f')}×)"
        out.append(f"| typed, {types} type{'s' if types > 1 else ''} | {queue_name.get(q, q)} | "
                   f"{cell(s1, 'rate') if s1 else '–'} | {fmt_ratio(r1) if s1 else '–'} | "
                   f"{cell(s0, 'rate') if s0 else '–'} | {fmt_ratio(r0) if s0 else '–'} | {verdict} |")
    out.append("")
    paused_std = runs.stat("BM_EnqueueWhilePaused/typed:0", "items_per_second")
    paused_typed = runs.stat("BM_EnqueueWhilePaused/typed:1", "items_per_second")
    if paused_std and paused_typed:
        std_ns, typed_ns = ns_per_item(paused_std), ns_per_item(paused_typed)
        ctx.cost_ratio("typed pool", "1 type, enqueue while paused, vs standard pool", paused_typed, paused_std, True)
        out.append("*One enqueue on its own* (`BM_EnqueueWhilePaused`: the pool paused, so no worker shares a line "
                   "with the producer; only the 10 000 pushes are timed): standard pool "
                   f"{std_ns[0]:.1f} ns, typed pool with one type {typed_ns[0]:.1f} ns per job "
                   f"({fmt_ratio(paused_typed[0] / paused_std[0])}). The difference is what the typed pool adds per "
                   "job (the type's rank, the served check, the kind's queue); with empty jobs and busy workers it "
                   "weighs more, as the empty-job column shows.\n")

    rows = []
    for key in runs.reps:
        m = re.match(r"^BM_PriorityScheduling/(\d+)$", key)
        if m:
            rows.append((int(m.group(1)), key))
    if rows:
        out.append("### Priority scheduling\n")
        out.append("A one-worker typed pool is held busy while N jobs of each of RealTime, Batch and Background "
                   "(~1 µs each) are queued lowest priority first; then released. *Processing time*: release until "
                   "`wait_idle()` returns. *Accuracy*: share of jobs started in priority order (no job started while a "
                   "higher-priority one was queued). *RealTime first*: share of RealTime jobs among the first N "
                   "started. Goal: accuracy 100% in every repetition.\n")
        out.append("| jobs per type | jobs | processing time | accuracy | RealTime first | goal |")
        out.append("|---:|---:|---:|---:|---:|---|")
        for n, key in sorted(rows):
            t = runs.stat(key, "real_ns")
            acc = runs.stat(key, "accuracy_pct")
            rt = runs.stat(key, "realtime_first_pct")
            acc_s = "n/a" if acc is None else f"{acc[0]:.1f}% ({acc[1]:.1f}–{acc[2]:.1f})"
            rt_s = "n/a" if rt is None else f"{rt[0]:.1f}% ({rt[1]:.1f}–{rt[2]:.1f})"
            verdict = ctx.verdict(key) or "n/a"
            out.append(f"| {n} | {3 * n} | {cell(t, 'ns')} | {acc_s} | {rt_s} | {verdict} |")
        out.append("")

    base_route = ns_per_item(runs.stat("BM_RoutingStandardPool", "items_per_second"))
    rows = []
    for key in runs.reps:
        m = re.match(r"^BM_TypedRouting/(\d+)$", key)
        if m:
            rows.append((int(m.group(1)), key))
    if rows:
        out.append("### Job type routing\n")
        out.append("100 000 empty jobs per iteration, a share of them RealTime and the rest split between Batch and "
                   "Background, from one producer into a typed pool with one specialist worker per type plus one "
                   "universal worker (the seed's configuration: 4 workers, oversubscribed on "
                   f"{cores} cores); the same mixes into a typed pool of 4 universal workers (no specialists: "
                   "separates the cost of the specialists from that of the types); and the same number of empty "
                   "jobs into the standard pool with 4 workers (one figure for all mixes: it has no types). "
                   "ns per job = wall time / jobs. Cost ratio = typed ÷ standard (**> 1: the typed pool is slower**).\n")
        out.append("| high-priority share | typed, 3 specialists + 1 universal: ns per job | cost ratio | "
                   "typed, 4 universal: ns per job | cost ratio | standard pool: ns per job |")
        out.append("|---:|---:|---:|---:|---:|---:|")
        for pct, key in sorted(rows):
            st = ns_per_item(runs.stat(key, "items_per_second"))
            uni = ns_per_item(runs.stat(f"BM_TypedRoutingUniversal/{pct}", "items_per_second"))
            r = ctx.cost_ratio("typed pool", f"routing, {pct}% RealTime, specialists + universal vs standard pool", st,
                               base_route, False)
            ru = ctx.cost_ratio("typed pool", f"routing, {pct}% RealTime, 4 universal vs standard pool", uni, base_route, False)
            out.append(f"| {pct}% | {cell(st, 'ns')} | {fmt_ratio(r)} | {cell(uni, 'ns')} | {fmt_ratio(ru)} | "
                       f"{cell(base_route, 'ns')} |")
        out.append("")
