"""What the tables recorded, listed near the top of the report: where a peer
beats Thread System, the goals (reporting/goals.py) and where a variant is
slower than its baseline; and, at the end, the benchmarks that reported errors."""

from .common import LIB_LABEL, clear_label, fmt, section


@section(place="summary")
def section_losses(ctx, out):
    out.append("## Where Thread System loses\n")
    out.append("Computed from the tables above: every comparison where a peer's median beats Thread System's. "
               "*clear* = the peer's whole min–max range is better than ours; otherwise the ranges overlap and "
               "the difference may be noise. Clear losses first, then by size.\n")
    comparisons = ctx.comparisons
    losses = [c for c in comparisons if c["r"] > 1.0]
    losses.sort(key=lambda c: (c["clear"] is not True, -c["r"]))
    if not comparisons:
        out.append("_No comparisons: no peer was measured in this run._\n")
        return
    if not losses:
        out.append(f"_None: Thread System's median is the best in all {len(comparisons)} comparisons._\n")
        return
    units = {"jobs/s": "rate", "RSS per worker": "bytes", "bytes per queued job": "bytes", "create+join time": "ns",
             "p50 submit→start": "ns", "mean call latency": "ns", "p99 call latency": "ns",
             "p50 call latency": "ns", "p99.9 call latency": "ns", "writer ns per record": "ns"}
    out.append(f"{len(losses)} of {len(comparisons)} comparisons, worst first.\n")
    out.append("| table | configuration | peer | metric | peer | Thread System | peer better by | clear? |")
    out.append("|---|---|---|---|---:|---:|---:|---|")
    for c in losses:
        unit = units.get(c["metric"], "rate" if "/s" in c["metric"] else ("ns" if "p50" in c["metric"] else ""))
        out.append(f"| {c['table']} | {c['config']} | {LIB_LABEL[c['lib']]} | {c['metric']} | {fmt(c['peer'][0], unit)} | "
                   f"{fmt(c['ours'][0], unit)} | {c['r']:.2f}× | {clear_label(c['clear'])} |")
    out.append("")


@section(place="summary")
def section_goals(ctx, out):
    out.append("## Performance goals, and where variants are slower\n")
    out.append("The goals the issues set, judged on this run's medians: scheduler and queue goals from the tables "
               "below, then the typed pool, control and monitoring sections (same run). Then every "
               "comparison there in which a variant is slower than its baseline: *clear* = the whole min–max ranges "
               "are apart, otherwise they overlap and the difference may be noise.\n")
    judged = ctx.verdicts.judged
    unjudged = ctx.verdicts.unjudged
    if not judged and not unjudged and not ctx.slower:
        out.append("_No data (their benchmarks were not built or not run)._\n")
        return
    if judged or unjudged:
        out.append("| section | goal | measured | met? |")
        out.append("|---|---|---:|---|")
        for g in judged:
            met = "n/a" if g.met is None else ("yes" if g.met else "**no**")
            out.append(f"| {g.section} | {g.goal} | {g.measured} | {met} |")
        # A goal whose rows this run lacks (the mode does not run them, a peer
        # or a binary is missing, a run failed) is listed, not left out.
        for section_name, goal in unjudged:
            out.append(f"| {section_name} | {goal} | not measured in this run | not judged |")
        out.append("")
    slower = sorted(ctx.slower, key=lambda c: (c["clear"] is not True, -c["r"]))
    if slower:
        out.append(f"{len(slower)} comparisons where the variant is slower (cost ratio > 1), clear ones first:\n")
        out.append("| section | comparison | cost ratio | clear? |")
        out.append("|---|---|---:|---|")
        for c in slower:
            out.append(f"| {c['section']} | {c['what']} | {c['r']:.2f}× | {clear_label(c['clear'])} |")
        out.append("")


@section
def section_errors(ctx, out):
    errors = ctx.runs.errors
    if errors:
        out.append("## Benchmarks that reported errors\n")
        for k, v in sorted(errors.items()):
            out.append(f"- `{k}`: {v}")
        out.append("")
