"""Latency sampling overhead (thread_system_monitoring_benchmarks). Its goal is
in reporting/goals.py."""

from .common import cell, ordinal, section
from .verdicts import OPS

DEFAULT_ROW = "empty_jobs/sampling:default"


def goal_sentence(ctx):
    """"Goal: default ≤ 5%." from the goal judged on the default setting's row in reporting/goals.py."""
    for _, spec in ctx.verdicts.declared("^" + DEFAULT_ROW + "$"):
        op, threshold = spec["met"]
        return f" Goal: default {OPS[op][1]} {100 * threshold:g}%."
    return ""


@section
def table_monitoring(ctx, out):
    runs = ctx.runs
    out.append("## Monitoring: latency sampling overhead\n")
    out.append("From `thread_system_monitoring_benchmarks`: empty jobs, 100 000 per batch from one producer into a "
               "2-worker pool, wall clock until `wait_idle()` returns; one pool per setting of "
               "`pool_options::latency_sample_every` (0 = off, N = the default, 1 = every job), the settings "
               "interleaved round by round (off, default, every job, off, …; the rounds are the repetitions). "
               f"Overhead = 1 − jobs/s(setting) ÷ jobs/s(off), from the medians.{goal_sentence(ctx)}\n")
    if ctx.not_built("monitoring"):
        out.append("_thread_system_monitoring_benchmarks not built: no data._\n")
        return
    off = runs.stat("empty_jobs/sampling:off", "items_per_second")
    if off is None:
        out.append("_No data (monitoring benchmarks not run in this mode, or this core has no latency_sample_every)._\n")
        return
    out.append("| setting | jobs/s | rounds | overhead vs off | goal |")
    out.append("|---|---:|---:|---:|---|")
    out.append(f"| off (`latency_sample_every = 0`) | {cell(off, 'rate')} | {off[3]} | – | |")
    every = runs.stat("empty_jobs/sampling:default", "sample_every")
    default_label = f"default (every {ordinal(round(every[0]))} job)" if every else "default"
    for name, label in (("default", default_label), ("every_job", "every job (`= 1`)")):
        st = runs.stat(f"empty_jobs/sampling:{name}", "items_per_second")
        if st is None:
            continue
        overhead = 1.0 - st[0] / off[0]
        ctx.cost_ratio("monitoring", f"latency sampling {label} vs off", st, off, True)
        verdict = ""
        if name == "default":
            verdict = ctx.verdict(DEFAULT_ROW) or ""
            overlap = not (st[2] < off[1] or st[1] > off[2])
            if overlap and st[3] > 1:
                verdict += " (min–max ranges overlap: within this run's noise)"
        out.append(f"| {label} | {cell(st, 'rate')} | {st[3]} | {100 * overhead:+.1f}% | {verdict} |")
    out.append("")
    if off[3] > 1:
        out.append(f"Noise: the off setting alone spans {100 * (off[2] - off[1]) / off[0]:.0f}% of its median "
                   "(min to max over the rounds); differences smaller than that are not resolved by this run.\n")
    rec = runs.stat("BM_histogram_record", "real_ns")
    if rec:
        out.append(f"One `latency_histogram::record` (what a worker does per sampled job, twice: wait and run time): "
                   f"{cell(rec, 'ns')}, single thread.\n")
