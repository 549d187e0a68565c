#!/usr/bin/env python3
"""Benchmark report driver: runs the already-built benchmark binaries of the
`bench` preset and writes OUTDIR/REPORT.md plus PNG plots (gnuplot).

    python3 scripts/report.py            # quick (default): < 5 min on 2 cores
    python3 scripts/report.py --full     # 5 repetitions, longer min_time, whole matrix
    python3 scripts/report.py --smoke    # 1 repetition, tiny min_time, small filter (CI)

Options: --build-dir DIR (default build/bench), --out DIR (default report),
--render-only (run nothing: render again from OUT/raw/).

It builds nothing: run `cmake --workflow --preset bench` first (scripts/run-report.sh
does both). Binaries: the core, queue, peer-report and logger benchmarks, and
the typed pool, control (cancellation, backpressure, resize, timers) and
monitoring (latency sampling overhead) benchmarks, whose sections compare
variants of Thread System with their own baselines (cost ratios, goals). Every
figure in the report is the median over the repetitions with min-max, and a
ratio against Thread System measured in the same run. Ratios are oriented so
that > 1 means "the peer is better" (more jobs/s, fewer ns, fewer bytes).

The work is in scripts/reporting/: run.py (running: binaries, modes, raw JSON
in OUT/raw/), data.py (reading it back), goals.py (the goals, as data) and
render/ (the sections, plots and goal verdicts). Standard library only.
"""

import argparse
import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ in scripts/reporting/
from reporting import data, run
from reporting.render import Context, render

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def measured_cores(runs):
    """The core count the report binary planned its comparison rows for (its
    worker counts; at least 2), so a report rendered elsewhere (--render-only)
    or on one core finds its rows. This machine's count for older raw data."""
    try:
        return int(runs.context["hardware_threads"])
    except (KeyError, ValueError):
        return max(2, os.cpu_count() or 2)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--smoke", action="store_const", dest="mode", const="smoke", help="seconds; for CI")
    g.add_argument("--quick", action="store_const", dest="mode", const="quick", help="default; < 5 min on 2 cores")
    g.add_argument("--full", action="store_const", dest="mode", const="full", help="the whole matrix, longer runs")
    ap.add_argument("--build-dir", default="build/bench", help="the bench preset's build directory (default build/bench)")
    ap.add_argument("--out", default="report", help="output directory (default report/)")
    ap.add_argument("--render-only", action="store_true",
                    help="run nothing: rewrite REPORT.md and the plots from the raw JSON of the last run in OUT/raw "
                         "(give the same mode)")
    args = ap.parse_args()
    mode = args.mode or "quick"
    build = os.path.join(ROOT, args.build_dir) if not os.path.isabs(args.build_dir) else args.build_dir
    outdir = os.path.join(ROOT, args.out) if not os.path.isabs(args.out) else args.out
    raw = os.path.join(outdir, "raw")
    os.makedirs(raw, exist_ok=True)

    paths, missing = run.binaries(build)
    for k in missing:
        print(f"warning: {paths[k]} not built; its tables will say so", file=sys.stderr)
    steps = run.plan(mode, paths, missing)

    if args.render_only:
        info = data.load_json(os.path.join(raw, run.RUN_INFO)) or {}
        print(f"mode {mode}: rendering from {raw}/ (run of {info.get('date', 'unknown date')})", flush=True)
    else:
        info = run.run(mode, steps, raw)

    runs, loaded = data.load_runs(raw, run.raw_files(steps, info))
    omp = info.get("omp_wait_policy") or run.environments(mode)[1].get("OMP_WAIT_POLICY")
    ctx = Context(runs=runs, mode=mode, cfg=run.MODES[mode], build=build, outdir=outdir, paths=paths,
                  missing=missing, info=info, queue_json=loaded.get("queue.json"), cores=measured_cores(runs),
                  omp_wait_policy=omp)
    text = render(ctx)
    path = os.path.join(outdir, "REPORT.md")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"wrote {path} ({ctx.plot_msg})")
    if ctx.problems:
        print("error: the report is incomplete (its section *Runs that failed*):", file=sys.stderr)
        for p in ctx.problems:
            print(f"  {p}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
