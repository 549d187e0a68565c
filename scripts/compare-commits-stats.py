#!/usr/bin/env python3
"""Statistics of scripts/compare-commits.sh: reads the per-round JSON of both
commits and prints, per benchmark, the median over rounds of the per-round
ratio HEAD/BASE (> 1: HEAD is better) with the min-max of the per-round ratios.

    RUN_DIR/<base|head>/<binary>/round-<N>.json   (Google Benchmark --benchmark_out, JSON)

The metric: items_per_second when both commits report it for the benchmark
(ratio HEAD/BASE), else real time (ratio BASE/HEAD: less time is better).
Aggregate entries (mean, median, ...) are ignored; a benchmark with several
entries in one run (repetitions, or a binary's own rounds named .../round:N)
counts their median as that run's value. Names are compared without the parts
that do not identify a configuration (real_time, iterations:N, round:N), as in
scripts/report.py. A round where one side has no value is left out of that
benchmark's ratios; benchmarks found in only one commit, and those that
reported errors, are listed under the table.

With --counter NAME, a benchmark that reports the user counter NAME in both
commits gets a row of its own for it (metric: NAME): the median over rounds of
the per-round ratio as above, HEAD/BASE for a rate (a name ending in _per_s or
_per_second), BASE/HEAD for anything else (a latency percentile, a cost per
record), so > 1 is HEAD better either way.

With --control-row A=B, a benchmark whose name contains A is also compared
against the benchmark named with A replaced by B, run in the same rounds: per
round (HEAD row / HEAD control) / (BASE row / BASE control) for rates (the
inverse for times), so a slow phase of the host that hits both rows of one
run cancels out. Its median and min-max go in a column of their own.

Run by compare-commits.sh; standard library only.
"""

import argparse
import datetime
import glob
import os
import re
import statistics
import sys

sys.dont_write_bytecode = True  # no __pycache__ in scripts/reporting/
from reporting.data import Runs, load_json  # noqa: E402
from reporting.render.common import fmt  # noqa: E402

SIDES = ("base", "head")


def plural(n, word):
    return f"{n} {word}{'' if n == 1 else 's'}"


def read_binary(run_dir, side, binary):
    """{round: Runs} and the benchmark names in first-seen order."""
    rounds, order = {}, []
    for path in glob.glob(os.path.join(run_dir, side, binary, "round-*.json")):
        m = re.search(r"round-(\d+)\.json$", path)
        data = load_json(path)
        if not m or not data:
            continue
        runs = Runs()
        runs.add(data)
        rounds[int(m.group(1))] = runs
    for r in sorted(rounds):
        for key in list(rounds[r].reps) + list(rounds[r].errors):
            if key not in order:
                order.append(key)
    return rounds, order


def has_field(rounds, key, field):
    return any(e.get(field) is not None for runs in rounds.values() for e in runs.reps.get(key, []))


def control_of(key, controls):
    """The control row's name for benchmark `key` (the first A=B whose A it contains), or None."""
    for ours, control in controls:
        if ours in key:
            return key.replace(ours, control)
    return None


def counter_is_rate(name):
    """A user counter named ..._per_s or ..._per_second is a rate (higher is better); any other, a cost."""
    return name.endswith("_per_s") or name.endswith("_per_second")


def counter_unit(name):
    if counter_is_rate(name):
        return "rate"
    return "ns" if name.endswith("_ns") or name.startswith("ns_") else ""


def compare_field(base, head, key, field, higher_is_better, control):
    """One row's figures for `field` of benchmark `key` over the rounds both sides ran, or None."""
    ratios, bvals, hvals, controlled = [], [], [], []

    def oriented(b, h):  # > 1: HEAD is better
        return h / b if higher_is_better else b / h

    for r in sorted(set(base) & set(head)):
        b = base[r].stat(key, field)
        h = head[r].stat(key, field)
        if b is None or h is None or b[0] <= 0 or h[0] <= 0:
            continue
        bvals.append(b[0])
        hvals.append(h[0])
        ratio = oriented(b[0], h[0])
        ratios.append(ratio)
        if control is not None:
            bc = base[r].stat(control, field)
            hc = head[r].stat(control, field)
            if bc is not None and hc is not None and bc[0] > 0 and hc[0] > 0:
                # The control's own HEAD/BASE ratio, oriented the same way.
                controlled.append(ratio / oriented(bc[0], hc[0]))
    if not ratios:
        return None
    row = dict(base=statistics.median(bvals), head=statistics.median(hvals), ratio=statistics.median(ratios),
               lo=min(ratios), hi=max(ratios), n=len(ratios))
    if controlled:
        row.update(control=control, c_ratio=statistics.median(controlled), c_lo=min(controlled), c_hi=max(controlled))
    return row


def compare_binary(run_dir, binary, controls=(), counters=()):
    """Rows for the benchmarks both commits ran, and the names only one had."""
    base, base_order = read_binary(run_dir, "base", binary)
    head, head_order = read_binary(run_dir, "head", binary)
    errors = {}
    for side, rounds in (("BASE", base), ("HEAD", head)):
        for runs in rounds.values():
            for key, msg in runs.errors.items():
                errors.setdefault(key, f"{side}: {msg}")
    base_keys = {k for runs in base.values() for k in runs.reps}
    head_keys = {k for runs in head.values() for k in runs.reps}
    rows = []
    for key in base_order + [k for k in head_order if k not in base_order]:
        if key not in base_keys or key not in head_keys:
            continue
        rate = has_field(base, key, "items_per_second") and has_field(head, key, "items_per_second")
        fields = [("items_per_second", "items/s", "rate", True) if rate else ("real_ns", "real time", "ns", False)]
        for c in counters:
            if has_field(base, key, c) and has_field(head, key, c):
                fields.append((c, c, counter_unit(c), counter_is_rate(c)))
        for field, metric, unit, higher_is_better in fields:
            row = compare_field(base, head, key, field, higher_is_better, control_of(key, controls))
            if row is not None:
                row.update(binary=binary, name=key, metric=metric, unit=unit)
                rows.append(row)
    only_base = [k for k in base_order if k in base_keys and k not in head_keys]
    only_head = [k for k in head_order if k in head_keys and k not in base_keys]
    return rows, only_base, only_head, errors


def table(rows, labels, threshold, md):
    with_control = any("control" in r for r in rows)
    head = ["binary", "benchmark", "metric", "BASE", "HEAD", "HEAD/BASE", "per-round min–max", "rounds"]
    if with_control:
        head += ["against its control (min–max)"]
    head += ["flag"]
    body = []
    for r in rows:
        flag = f"below {threshold:g}" if r["ratio"] < threshold else ""
        cells = [labels[r["binary"]], f"`{r['name']}`" if md else r["name"], r["metric"], fmt(r["base"], r["unit"]),
                 fmt(r["head"], r["unit"]), f"{r['ratio']:.3f}×", f"{r['lo']:.3f}–{r['hi']:.3f}×", str(r["n"])]
        if with_control:
            cells.append(f"{r['c_ratio']:.3f}× ({r['c_lo']:.2f}–{r['c_hi']:.2f}×)" if "control" in r else "")
        cells.append(f"**{flag}**" if flag and md else flag)
        body.append(cells)
    if md:
        lines = ["| " + " | ".join(head) + " |", "|---|---|---|---:|---:|---:|---:|---:|" + ("---:|" if with_control else "") + "---|"]
        lines += ["| " + " | ".join(b) + " |" for b in body]
        return lines
    widths = [max(len(x) for x in col) for col in zip(head, *body)]
    right = {3, 4, 5, 6, 7, 8} if with_control else {3, 4, 5, 6, 7}

    def line(cells):
        return "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    return [line(head), line(["-" * w for w in widths])] + [line(b) for b in body]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run-dir", required=True)
    ap.add_argument("--base", required=True)
    ap.add_argument("--base-subject", default="")
    ap.add_argument("--head", required=True)
    ap.add_argument("--head-subject", default="")
    ap.add_argument("--rounds", type=int, required=True)
    ap.add_argument("--min-time", default="")
    ap.add_argument("--threshold", type=float, default=0.97)
    ap.add_argument("--binary", action="append", default=[], help="TARGET=SHORT=FILTER, in report order")
    ap.add_argument("--only-base-binary", action="append", default=[])
    ap.add_argument("--only-head-binary", action="append", default=[])
    ap.add_argument("--failed-binary", action="append", default=[])
    ap.add_argument("--failed-round", action="append", default=[],
                    help="a run that exited non-zero ('side binary round r'): its rows lack that round")
    ap.add_argument("--out", help="also write the Markdown here")
    ap.add_argument("--control-row", action="append", default=[], metavar="A=B",
                    help="compare benchmarks named with A also against those named with B (see above)")
    ap.add_argument("--counter", action="append", default=[], metavar="NAME",
                    help="also compare this user counter of every benchmark that reports it (see above)")
    args = ap.parse_args()

    controls = []
    for spec in args.control_row:
        ours, sep, control = spec.partition("=")
        if not sep or not ours or not control:
            ap.error(f"--control-row wants A=B, not '{spec}'")
        controls.append((ours, control))
    binaries, labels, filters = [], {}, {}
    for spec in args.binary:
        target, short, flt = spec.split("=", 2)
        binaries.append(target)
        labels[target] = short
        filters[short] = flt

    rows, only, errors = [], [], []
    for b in binaries:
        r, ob, oh, err = compare_binary(args.run_dir, b, controls, args.counter)
        rows += r
        only += [("BASE", labels[b], k) for k in ob] + [("HEAD", labels[b], k) for k in oh]
        errors += [(labels[b], k, v) for k, v in err.items()]
    below = [r for r in rows if r["ratio"] < args.threshold]

    try:
        load = "%.2f %.2f %.2f" % os.getloadavg()
    except OSError:
        load = "?"
    flt = sorted(set(filters.values()))
    filter_text = (f"`{flt[0]}`" if len(flt) == 1 else
                   ", ".join(f"{s}: `{f}`" for s, f in filters.items())) if filters else "none"
    intro = (f"HEAD `{args.head[:12]}` ({args.head_subject}) against BASE `{args.base[:12]}` ({args.base_subject}). "
             f"{plural(args.rounds, 'round')}, each running every binary of both commits back to back (BASE first in odd rounds, "
             f"HEAD first in even ones), one repetition per run, `--benchmark_min_time` {args.min_time} s; filter "
             f"{filter_text}. Ratio: HEAD/BASE of items/s, or BASE/HEAD of real time (> 1: HEAD is better); "
             "the median over rounds of the per-round ratio, with its min–max; BASE and HEAD columns: medians "
             f"over rounds. {os.cpu_count()} logical cores, load average {load} at the end "
             f"({datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}).")
    if args.counter:
        intro += (" Counters compared as rows of their own: " + ", ".join(f"`{c}`" for c in args.counter)
                  + " (HEAD/BASE for a rate, BASE/HEAD for a cost: > 1 is HEAD better).")
    if controls:
        intro += (" Against its control: the per-round ratio divided by that round's ratio of the control row, "
                  + ", ".join(f"`{o}` → `{c}`" for o, c in controls)
                  + " (> 1: the row gained on its control); median and min–max over rounds.")
    def row_name(r):
        main = r["metric"] in ("items/s", "real time")
        return f"{labels[r['binary']]} {r['name']}" + ("" if main else f" {r['metric']}") + f" ({r['ratio']:.3f}×)"

    compared = len({(r["binary"], r["name"]) for r in rows})
    summary = (f"{plural(compared, 'benchmark')} compared"
               + (f" ({plural(len(rows), 'row')} with the counters)" if len(rows) != compared else "")
               + f"; {len(below)} below {args.threshold:g}×"
               + (": " + ", ".join(row_name(r) for r in below) if below else "")
               + ".")
    notes = []
    for side, b, k in only:
        notes.append(f"only in {side}: {b} `{k}`")
    for b, k, v in errors:
        notes.append(f"error: {b} `{k}`: {v}")
    for t in args.only_base_binary:
        notes.append(f"binary only in BASE (not compared): {t}")
    for t in args.only_head_binary:
        notes.append(f"binary only in HEAD (not compared): {t}")
    for t in args.failed_binary:
        notes.append(f"binary failed to build in one commit (not compared): {t}")
    for f in args.failed_round:
        notes.append(f"FAILED RUN (its rows lack this round; the rounds column counts the rest): {f}")

    print()
    print(intro)
    print()
    for line in table(rows, labels, args.threshold, md=False):
        print(line)
    print()
    print(summary)
    for n in notes:
        print("  " + n.replace("`", ""))

    if args.out:
        md = ["### A/B: " + f"`{args.head[:12]}` vs `{args.base[:12]}`", "", intro, ""]
        md += table(rows, labels, args.threshold, md=True)
        md += ["", summary]
        if notes:
            md += [""] + [f"- {n}" for n in notes]
        with open(args.out, "w", encoding="utf-8") as f:
            f.write("\n".join(md) + "\n")
        print(f"\nwrote {args.out}")
    # A run that failed makes the comparison incomplete: say so by the exit status too.
    return 1 if args.failed_round else 0


if __name__ == "__main__":
    sys.exit(main())
