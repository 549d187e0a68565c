#!/usr/bin/env python3
"""Benchmark report driver: runs the already-built benchmark binaries of the
`bench` preset and writes OUTDIR/REPORT.md plus PNG plots (gnuplot).

    python3 scripts/report.py            # quick (default): < 5 min on 2 cores
    python3 scripts/report.py --full     # 5 repetitions, longer min_time, whole matrix
    python3 scripts/report.py --smoke    # 1 repetition, tiny min_time, small filter (CI)

Options: --build-dir DIR (default build/bench), --out DIR (default report).

It builds nothing: run `cmake --workflow --preset bench` first (scripts/run-report.sh
does both). Binaries: the core, queue, peer-report and logger benchmarks, and
the typed pool, control (cancellation, backpressure, resize, timers) and
monitoring (latency sampling overhead) benchmarks, whose sections compare
variants of Thread System with their own baselines (cost ratios, goals). Every figure in the report is the median over the repetitions
with min-max, and a ratio against Thread System measured in the same run.
Ratios are oriented so that > 1 means "the peer is better" (more jobs/s, fewer
ns, fewer bytes). Standard library only.
"""

import argparse
import datetime
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

LIBS = ["thread_system", "onetbb", "boost_asio", "openmp", "std_async", "naive"]
LIB_LABEL = {
    "thread_system": "Thread System",
    "onetbb": "oneTBB",
    "boost_asio": "Boost.Asio",
    "openmp": "OpenMP (libgomp)",
    "std_async": "std::async",
    "naive": "naive mutex+condvar",
    # logger section (thread_system_logger_benchmarks)
    "spdlog_async": "spdlog async",
    "spdlog_sync": "spdlog sync",
}
LIB_PACKAGE = {"onetbb": "libtbb-dev", "boost_asio": "libboost-dev", "openmp": "g++ (libgomp)"}
LIB_CONTEXT = {"onetbb": "have_onetbb", "boost_asio": "have_boost_asio", "openmp": "have_openmp"}

MODES = {
    # repetitions, min_time (s), per-binary filters (None = everything)
    "smoke": dict(
        reps=1,
        min_time=0.01,
        core=r"^BM_(PoolCreateStartStop/(1|2)/|SubmitToStartLatency/queued:(0|1000)/|IdleLatency)",
        queue=r"^(latency_pair/|pc/[^/]+/P:(1|2)/C:[0-9]+/ops:10000/|memory/[^/]+/jobs:10000/|"
        r"adaptive_paired/(pair/|pc/P:2/C:2/ops:10000/))",
        report=r"^(throughput|latency|create/[^/]+/workers:(1|2)/)",
        logger=r"^logger_(single/[^/]+/chars:123|threads/[^/]+/threads:4|latency)/",
        typed=r"^BM_(StandardPool/job_ns:1000/|TypedPoolTypeMix/types:(1|3)/queue:2/job_ns:1000/|"
        r"PriorityScheduling/100/|TypedRouting(Universal)?/50/|RoutingStandardPool/)",
        control=r"^BM_(TokenIsCancelled|RegisterUnregister|CancelJobs/(plain|token)/|Backpressure/(unbounded|block_1024)/job_ns:0/|"
        r"Resize(Grow|Shrink)/|TimerLateness1K/via_pool:0/)",
        # the monitoring binary repeats by interleaved rounds (--rounds) instead of repetitions
        monitoring=r"^empty_jobs/sampling:(off|default)/",
        monitoring_rounds=2,
        monitoring_min_time=0.01,
    ),
    "quick": dict(
        reps=5,
        min_time=0.02,
        core=r"^BM_(PoolCreateStartStop|SubmitToStartLatency|NestedFib|ParallelFor|IdleLatency|ExternalSubmit)",
        queue=r"^(latency_(enqueue|dequeue|pair)/|batch/[^/]+/batch:128/|pc/[^/]+/P:[0-9]+/C:[0-9]+/ops:10000/|"
        r"contention/[^/]+/real_time/threads:(1|2|4)$|memory/[^/]+/jobs:100000/|"
        r"adaptive_paired/(pair/|pc/P:[0-9]+/C:[0-9]+/ops:10000/|contention/threads:(1|2|4)/))",
        report=r"^(throughput|latency|create)/",
        logger=r"^logger_",
        typed=None,
        control=None,
        monitoring=r"^(empty_jobs/|BM_histogram_record$)",
        monitoring_rounds=11,
        monitoring_min_time=0.1,
    ),
    "full": dict(
        reps=5,
        min_time=0.2,
        core=None,
        queue=None,
        report=r"^(throughput|latency|create)/",
        logger=r"^logger_",
        typed=None,
        control=None,
        monitoring=r"^(empty_jobs/|BM_histogram_record$)",
        monitoring_rounds=15,
        monitoring_min_time=0.2,
    ),
}
ISOLATED = r"^(memory_per_worker|idle_cpu|queued_bytes)/"  # one process per benchmark

# Name parts that do not identify a configuration. round:N: the monitoring
# binary's interleaved rounds, which are its repetitions.
ANSI = re.compile(r"\x1b\[[0-9;]*m")
NOISE = re.compile(r"^(manual_time|real_time|iterations:\d+|repeats:\d+|round:\d+)$")


# ---------------------------------------------------------------------------
# running
# ---------------------------------------------------------------------------


class Progress:
    def __init__(self, total):
        self.total = max(total, 1)
        self.done = 0
        self.start = time.monotonic()

    def tick(self, what):
        self.done += 1
        elapsed = time.monotonic() - self.start
        eta = elapsed / self.done * (self.total - self.done)
        line = f"[{self.done:4d}/{self.total}] {elapsed:6.1f}s elapsed, ETA {eta:5.0f}s  {what[:70]}"
        if sys.stdout.isatty():
            print(f"\r{line:<110}", end="", flush=True)
        elif self.done % 10 == 0 or self.done == self.total:
            print(line, flush=True)

    def finish(self):
        print(f"\nall benchmarks done in {time.monotonic() - self.start:.1f}s", flush=True)


def list_tests(binary, flt, env, extra=()):
    cmd = [binary, *extra, "--benchmark_list_tests"]
    if flt:
        cmd.append(f"--benchmark_filter={flt}")
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    return [line.strip() for line in out.stdout.splitlines() if line.strip()]


def run_binary(binary, flt, reps, min_time, json_out, log, env, progress, interleave=True, extra=()):
    cmd = [
        binary,
        *extra,
        f"--benchmark_repetitions={reps}",
        f"--benchmark_min_time={min_time}",
        f"--benchmark_out={json_out}",
        "--benchmark_out_format=json",
        "--benchmark_counters_tabular=false",
    ]
    if flt:
        cmd.append(f"--benchmark_filter={flt}")
    if interleave and reps > 1:
        cmd.append("--benchmark_enable_random_interleaving=true")
    log.write("$ " + " ".join(cmd) + "\n")
    log.flush()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    for line in proc.stdout:
        line = ANSI.sub("", line)  # a binary with its own console reporter may colour its output
        log.write(line)
        name = line.split(" ", 1)[0]
        if ("/" in name or name.startswith("BM_")) and re.search(r"\s(ns|us|ms|s)\s", line):
            if not re.search(r"_(mean|median|stddev|cv)$", name):
                progress.tick(name)
    proc.wait()
    if proc.returncode != 0:
        print(f"\nwarning: {os.path.basename(binary)} exited with {proc.returncode} (see the log)", flush=True)
    return proc.returncode


def load_json(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


# ---------------------------------------------------------------------------
# data
# ---------------------------------------------------------------------------


class Runs:
    """Individual repetitions, keyed by the normalised benchmark name."""

    def __init__(self):
        self.reps = {}  # key -> [entry, ...]
        self.errors = {}
        self.context = {}

    def add(self, data):
        if not data:
            return
        self.context.update(data.get("context", {}))
        for e in data.get("benchmarks", []):
            if e.get("run_type") == "aggregate":
                continue
            key = normalise(e.get("run_name", e["name"]))
            if e.get("error_occurred"):
                self.errors[key] = e.get("error_message", "error")
                continue
            self.reps.setdefault(key, []).append(e)

    def stat(self, key, field):
        """(median, min, max, n) of `field` over the repetitions, or None."""
        entries = self.reps.get(key)
        if not entries:
            return None
        values = []
        for e in entries:
            v = value_of(e, field)
            if v is not None:
                values.append(v)
        if not values:
            return None
        return (statistics.median(values), min(values), max(values), len(values))


def normalise(name):
    return "/".join(p for p in name.split("/") if not NOISE.match(p))


def value_of(entry, field):
    if field == "real_ns":
        scale = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}[entry.get("time_unit", "ns")]
        return float(entry["real_time"]) * scale
    v = entry.get(field)
    return None if v is None else float(v)


def fmt(v, unit=""):
    if v is None:
        return "n/a"
    a = abs(v)
    if unit == "rate":
        if a >= 1e6:
            return f"{v / 1e6:.2f} M/s"
        if a >= 1e3:
            return f"{v / 1e3:.1f} K/s"
        return f"{v:.0f} /s"
    if unit == "ns":
        if a >= 1e6:
            return f"{v / 1e6:.2f} ms"
        if a >= 1e3:
            return f"{v / 1e3:.2f} µs"
        if a < 10:
            return f"{v:.2f} ns"
        return f"{v:.0f} ns"
    if unit == "bytes":
        if a >= 1024 * 1024:
            return f"{v / 1048576:.2f} MiB"
        if a >= 1024:
            return f"{v / 1024:.1f} KiB"
        return f"{v:.0f} B"
    if a >= 100:
        return f"{v:.0f}"
    if a >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def cell(s, unit):
    if s is None:
        return "n/a"
    med, lo, hi, n = s
    if n > 1:
        return f"{fmt(med, unit)} ({fmt(lo, unit)}–{fmt(hi, unit)})"
    return fmt(med, unit)


def ratio(peer, ours, higher_better):
    """> 1: the peer is better."""
    if peer is None or ours is None or peer[0] == 0 or ours[0] == 0:
        return None
    return peer[0] / ours[0] if higher_better else ours[0] / peer[0]


def fmt_ratio(r):
    return "n/a" if r is None else f"{r:.2f}×"


def per_workers_table(out, runs, libs, ws, prefix, counter, unit, table, config_fmt, metric, header_ratio=False):
    """One row per worker count, one column per library; lower is better.
    Peers' cells carry their ratio vs Thread System (recorded for the losses list)."""
    out.append("| workers | " + " | ".join(
        LIB_LABEL[l] + (" (ratio)" if header_ratio and l != "thread_system" else "") for l in libs) + " |")
    out.append("|---:|" + "---:|" * len(libs))
    for w in ws:
        ours = runs.stat(f"{prefix}/thread_system/workers:{w}", counter)
        row = [str(w)]
        for lib in libs:
            st = runs.stat(f"{prefix}/{lib}/workers:{w}", counter)
            if lib == "thread_system":
                row.append(cell(st, unit))
            else:
                r = compare(table, config_fmt.format(w=w), lib, metric, st, ours, False)
                row.append(f"{cell(st, unit)} {fmt_ratio(r)}")
        out.append("| " + " | ".join(row) + " |")
    out.append("")


# Every peer-vs-us comparison made in a table is recorded here; "Where Thread
# System loses" lists those where the peer is better.
COMPARISONS = []


def compare(table, config, lib, metric, peer, ours, higher_better):
    r = ratio(peer, ours, higher_better)
    if r is not None:
        # clear: the peer's whole range is better than ours
        if peer[3] < 2 or ours[3] < 2:
            clear = None  # one repetition: no spread to compare
        elif higher_better:
            clear = peer[1] > ours[2]
        else:
            clear = peer[2] < ours[1]
        COMPARISONS.append(dict(table=table, config=config, lib=lib, metric=metric, peer=peer, ours=ours, r=r, clear=clear))
    return r


# ---------------------------------------------------------------------------
# machine
# ---------------------------------------------------------------------------


def machine_section(build_dir):
    cpu = "?"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    cache = {}
    try:
        with open(os.path.join(build_dir, "CMakeCache.txt"), encoding="utf-8") as f:
            for line in f:
                m = re.match(r"^(CMAKE_CXX_COMPILER|CMAKE_CXX_FLAGS|CMAKE_BUILD_TYPE|CMAKE_CXX_FLAGS_RELEASE):[A-Z]+=(.*)$", line)
                if m:
                    cache[m.group(1)] = m.group(2)
    except OSError:
        pass
    compiler = cache.get("CMAKE_CXX_COMPILER", "c++")
    try:
        version = subprocess.run([compiler, "--version"], capture_output=True, text=True, check=False).stdout.splitlines()[0]
    except (OSError, IndexError):
        version = "?"
    try:
        load = os.getloadavg()
        load_s = f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    except OSError:
        load_s = "?"
    build_type = cache.get("CMAKE_BUILD_TYPE", "?")
    flags = (cache.get("CMAKE_CXX_FLAGS", "") + " " + (cache.get("CMAKE_CXX_FLAGS_RELEASE", "") if build_type == "Release" else "")).strip()
    lines = [
        "| | |",
        "|---|---|",
        f"| CPU | {cpu} |",
        f"| cores (logical, `os.cpu_count`) | {os.cpu_count()} |",
        f"| kernel | {platform.system()} {platform.release()} |",
        f"| compiler | `{compiler}`: {version} |",
        f"| build type, flags | {build_type}, `{flags or '(none)'}` |",
        f"| date | {datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')} |",
        f"| load average at the end of the run | {load_s} (the machine may be shared: other processes add noise) |",
    ]
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# tables
# ---------------------------------------------------------------------------


def parse_key(key):
    parts = key.split("/")
    params = {}
    for p in parts[2:]:
        if ":" in p:
            k, v = p.split(":", 1)
            params[k] = v
    return parts[0], (parts[1] if len(parts) > 1 else ""), params


def keys_of(runs, family):
    out = []
    for key in runs.reps:
        fam, lib, params = parse_key(key)
        if fam == family:
            out.append((lib, params, key))
    return out


def values(runs, family, param):
    vs = set()
    for _, params, _ in keys_of(runs, family):
        if param in params:
            vs.add(int(params[param]))
    return sorted(vs)


def present_libs(runs, family):
    libs = {lib for lib, _, _ in keys_of(runs, family)}
    return [lib for lib in LIBS if lib in libs]


def tkey(job_ns, workers, producers, lib):
    return f"throughput/{lib}/job_ns:{job_ns}/workers:{workers}/producers:{producers}"


def job_label(job_ns):
    return "empty job" if job_ns == 0 else f"~{fmt(job_ns, 'ns')} busy spin"


def oversub(workers, cores):
    return " (oversubscribed)" if workers > cores else ""


def table_creation(runs, out):
    out.append("## Thread pool creation\n")
    out.append("Mirrors the seed's *Thread Pool Creation Performance*. One iteration = construct the pool, start its N "
               "threads, stop and join them (wall clock). Only pools that own their threads: oneTBB and OpenMP keep a "
               "process-wide thread pool, std::async has none.\n")
    libs = present_libs(runs, "create")
    ws = values(runs, "create", "workers")
    if not ws:
        out.append("_No data (create/ benchmarks not run in this mode)._\n")
        return
    per_workers_table(out, runs, libs, ws, "create", "real_ns", "ns", "creation", "workers:{w}", "create+join time",
                      header_ratio=True)


def table_queue_depth_latency(runs, out):
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


def table_idle_latency(runs, out, plots):
    out.append("## Submit→start latency on an idle pool, per library\n")
    out.append("Mirrors the seed's *Job Submission Latency* (empty-queue row), for every library: the pool has "
               "`workers` threads, parked (500 µs sleep before each sample); the job stores a steady_clock stamp. "
               "Percentiles are over the samples of one repetition; the table shows their median over repetitions "
               "(min–max). OpenMP's figure includes forking the team (`parallel`/`single`/`task`); std::async's "
               "includes creating a thread. Ratio on p50: > 1 means the peer starts jobs sooner.\n")
    libs = present_libs(runs, "latency")
    if not libs:
        out.append("_No data._\n")
        return
    w = values(runs, "latency", "workers")
    w = w[0] if w else 2
    out.append(f"| library (workers: {w}) | p50 | p95 | p99 | max | p50 ratio |")
    out.append("|---|---:|---:|---:|---:|---:|")
    ours = runs.stat(f"latency/thread_system/workers:{w}", "p50_ns")
    dat = []
    for lib in libs:
        key = f"latency/{lib}/workers:{w}"
        stats = [runs.stat(key, f) for f in ("p50_ns", "p95_ns", "p99_ns", "max_ns")]
        r = None if lib == "thread_system" else compare("idle latency", f"workers:{w}", lib, "p50 submit→start", stats[0], ours, False)
        out.append(f"| {LIB_LABEL[lib]} | " + " | ".join(cell(s, "ns") for s in stats) + f" | {fmt_ratio(r) if lib != 'thread_system' else '1.00×'} |")
        if all(s is not None for s in stats[:3]):
            dat.append((lib, [s[0] / 1e3 for s in stats[:3]]))
    out.append("")
    if dat:
        plots.append(("latency", dat))
        out.append("![submit→start latency percentiles per library](latency.png)\n")


def table_throughput(runs, out, plots, cores):
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
                    r = compare("throughput", config, lib, "jobs/s", s, ours, True)
                    mark = "†" if inline else ""
                    row.append(f"{cell(s, 'rate')} **{fmt_ratio(r)}**{mark}")
                series.setdefault((j, lib), []).append((w, s))
            out.append("| " + " | ".join(row) + " |")
        if "openmp" in libs:
            out.append("")
            out.append("† OpenMP ran these tasks inline in the producing thread (team of 1, or task throttling with empty "
                       "tasks): the figure measures calling the job, not handing it to another thread.")
        out.append("")
    plots.append(("throughput", (job_sizes, series)))
    out.append("![throughput vs workers, one panel per job size](throughput.png)\n")


def table_scaling(runs, out, plots, cores):
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
    plots.append(("scaling", (j, dat)))
    out.append("![scaling efficiency vs workers](scaling.png)\n")


def table_producer_matrix(runs, out, plots, cores):
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
                        r = compare("producers × workers", f"empty job, {p} producers, {w} workers", lib, "jobs/s", s, ours, True)
                    else:
                        r = ratio(s, ours, True)
                    row.append(f"{cell(s, 'rate')} **{fmt_ratio(r)}**")
            out.append("| " + " | ".join(row) + " |")
        out.append("")
    plots.append(("heatmap", (libs, ps, ws, heat)))
    out.append("![producers × workers heat map, M jobs/s](heatmap.png)\n")


def table_injector(runs, out):
    out.append("## Injector queues under producer/consumer load (seed 004, first table)\n")
    out.append("Seed 004 compares a mutex queue, a bounded DVyukov MPMC ring and a sharded ring as the pool's "
               "injector. Here: `thread_system_queue_benchmarks` `pc/` (P producers, C consumers, P = C = the "
               "thread count), mutex+deque vs bounded_queue (Vyukov) vs sharded_queue (and job_queue, the pool's "
               "injector). Median M jobs/s consumed (min–max); ratio vs mutex+deque.\n")
    rows = {}
    for key in runs.reps:
        m = re.match(r"^pc/([^/]+)/P:(\d+)/C:(\d+)/ops:(\d+)$", key)
        if m:
            rows.setdefault((int(m.group(4)), int(m.group(2))), {})[m.group(1)] = key
    if not rows:
        out.append("_No data (queue benchmarks not run or `pc/` filtered out)._\n")
        return
    queues = [q for q in ("mutex_deque", "job_queue", "bounded_queue", "sharded_queue") if any(q in r for r in rows.values())]
    if "sharded_queue" not in queues:
        out.append("_sharded_queue not in this build's queue benchmarks._\n")
    out.append("| threads (P = C) | tasks | " + " | ".join(queues) + " |")
    out.append("|---:|---:|" + "---:|" * len(queues))
    for (ops, threads) in sorted(rows, key=lambda t: (t[1], t[0])):
        r = rows[(ops, threads)]
        base = runs.stat(r.get("mutex_deque", ""), "items_per_second")
        row = [str(threads), f"{ops:,}"]
        for q in queues:
            s = runs.stat(r.get(q, ""), "items_per_second")
            row.append(cell(s, "rate") + ("" if q == "mutex_deque" else f" {fmt_ratio(ratio(s, base, True))}"))
        out.append("| " + " | ".join(row) + " |")
    out.append("")


def table_memory(runs, out):
    out.append("## Memory usage\n")
    out.append("Mirrors the seed's *Memory Usage by Configuration* and *Memory Allocation Impact*. Each figure comes "
               "from its own process (threads and heap left by other benchmarks do not count). **RSS per worker**: "
               "VmRSS after creating a pool of N threads with all N running a job (malloc_trim first) minus VmRSS "
               "before, divided by N — thread stacks (the touched pages) and per-thread malloc arenas are included. "
               "oneTBB's arena and OpenMP's team come from a process-wide pool created on first use, so their "
               "figure is the first use. Ratio: > 1 means the peer uses less.\n")
    libs = present_libs(runs, "memory_per_worker")
    ws = values(runs, "memory_per_worker", "workers")
    if not libs:
        out.append("_No data._\n")
    else:
        per_workers_table(out, runs, libs, ws, "memory_per_worker", "rss_per_worker_bytes", "bytes", "memory",
                          "{w} workers", "RSS per worker")

    out.append("### Bytes per queued job\n")
    out.append("100 000 empty jobs (an 8-byte capture) queued behind the only worker, which is blocked; VmRSS delta / "
               "100 000 (includes the queue's own growth). Thread System packs such a job into 24 bytes of its "
               "injector's ring, which doubles as it grows: the smaller rings it left behind are freed but may stay "
               "in the process's RSS (glibc keeps them for reuse), which the delta counts; the bare queue's figure "
               "is in the queue-level memory rows. The naive pool stores std::function in a std::deque.\n")
    libs = present_libs(runs, "queued_bytes")
    if not libs:
        out.append("_No data._\n")
    else:
        ours = runs.stat("queued_bytes/thread_system/jobs:100000", "bytes_per_job")
        out.append("| library | bytes/job | ratio |")
        out.append("|---|---:|---:|")
        for lib in libs:
            s = runs.stat(f"queued_bytes/{lib}/jobs:100000", "bytes_per_job")
            r = "1.00×" if lib == "thread_system" else fmt_ratio(compare("memory", "100K queued jobs", lib, "bytes per queued job", s, ours, False))
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


def table_comparison(runs, out, cores):
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


def table_scheduler(runs, out):
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
                r = compare("scheduler", label.split(":")[0], lib, label, s, ours, higher)
                row.append(f"{cell(s, unit)} **{fmt_ratio(r)}**")
        lines.append("| " + " | ".join(row) + " |")
    if not any_row:
        out.append("_No data (these benchmarks are not run in this mode)._\n")
        return
    out.extend(lines)
    out.append("")
    scheduler_goals(runs)


def scheduler_goals(runs):
    """The work-stealing scheduler's goals (issue #4), judged on the medians above."""
    def stat(bm, field):
        s = runs.stat(bm, field)
        return None if s is None or s[0] == 0 else s[0]

    ours = stat("BM_NestedFib_ThreadSystem", "thread_ns_per_task")
    tbb = stat("BM_NestedFib_oneTBB", "thread_ns_per_task")
    if ours and tbb:
        r = ours / tbb
        goal("scheduler", "nested fib: thread-ns per task ≤ oneTBB's (aim ≤ 0.7×)",
             f"{ours:.1f} vs {tbb:.1f} ns ({r:.2f}×)", r <= 1.0)
    for producers in (1, 2):
        ours = stat(f"BM_ExternalSubmit_ThreadSystem/producers:{producers}", "items_per_second")
        for peer, label, limit in (("oneTBB", "oneTBB", 0.8), ("BoostAsio", "Boost.Asio", 0.6)):
            theirs = stat(f"BM_ExternalSubmit_{peer}/producers:{producers}", "items_per_second")
            if ours and theirs:
                r = theirs / ours  # our ns per job / theirs
                goal("scheduler", f"external submit, {producers} producer{'s' if producers > 1 else ''}: "
                     f"ns per job ≤ {limit}× {label}'s", f"{1e9 / ours:.0f} vs {1e9 / theirs:.0f} ns ({r:.2f}×)",
                     r <= limit)
    ours = stat("BM_ParallelFor_ThreadSystem", "items_per_second")
    tbb = stat("BM_ParallelFor_oneTBB", "items_per_second")
    if ours and tbb:
        r = ours / tbb
        goal("scheduler", "parallel_for within 10% of tbb::parallel_for", f"{r:.2f}× oneTBB's elements/s", r >= 0.9)


QUEUE_PC = [f"P:{n}/C:{n}/ops:{ops}" for ops in (10000, 1000000) for n in (1, 2, 4, 8)]


def queue_goals(runs):
    """The job queues' goals (issue #3), from the queue benchmarks of this run."""
    def rate(key):
        s = runs.stat(key, "items_per_second")
        return None if s is None or s[0] == 0 else s[0]

    for ops in (10000, 1000000):
        cfg = f"P:2/C:2/ops:{ops}"
        best, best_name = None, None
        for q in ("sharded_queue", "lockfree_queue"):
            v = rate(f"pc/{q}/{cfg}")
            if v and (best is None or v > best):
                best, best_name = v, q
        mood = rate(f"pc/moodycamel/{cfg}")
        mutex = rate(f"pc/mutex_deque/{cfg}")
        if best and mood:
            goal("queues", f"lock-free or sharded at 2P/2C ({ops:,} jobs) ≥ 0.8× moodycamel",
                 f"{best_name}: {best / mood:.2f}×", best / mood >= 0.8)
        if best and mutex:
            goal("queues", f"lock-free or sharded at 2P/2C ({ops:,} jobs) ≥ 2× the mutex+deque queue",
                 f"{best_name}: {best / mutex:.2f}×", best / mutex >= 2.0)
    # Adaptive against the better of its two strategies, workload by workload,
    # from the paired benchmark (adaptive_paired_benchmarks.cpp): per-round
    # ratios, median over rounds, then the median over repetitions.
    ratios = []
    raw = []
    for key in paired_keys(runs):
        st = runs.stat(key, "vs_better_mode")
        if st is not None and st[0] > 0:
            ratios.append((st[0], key))
        st = runs.stat(key, "vs_better_queue")
        if st is not None and st[0] > 0:
            raw.append((st[0], key))
    if ratios:
        worst = min(ratios)
        below = [w for r, w in ratios if r < 0.9]
        median = statistics.median(r for r, _ in ratios)
        goal("queues", "adaptive queue ≥ 0.9× the better of its two strategies (FORCE_MUTEX / FORCE_LOCKFREE), "
             "every workload, paired rounds",
             f"median {median:.2f}×, worst {worst[0]:.2f}× ({worst[1]}); {len(ratios) - len(below)} of {len(ratios)} "
             "workloads at ≥ 0.9×", not below)
    if raw:
        worst = min(raw)
        median = statistics.median(r for r, _ in raw)
        goal("queues", "(not a goal) adaptive queue against the better of the bare job_queue / lockfree_queue, "
             "paired rounds", f"median {median:.2f}×, worst {worst[0]:.2f}× ({worst[1]}); "
             f"{sum(1 for r, _ in raw if r >= 0.9)} of {len(raw)} workloads at ≥ 0.9×", None)
    # The controls: two instances of one queue type, measured like the rest.
    twins = []
    for key in paired_keys(runs):
        for field in ("twin_job_queue", "twin_adaptive"):
            st = runs.stat(key, field)
            if st is not None and st[0] > 0:
                twins.append(st[0])
    if twins:
        goal("queues", "(resolution) paired rounds between two instances of one queue (job_queue, adaptive), "
             "every workload", f"{min(twins):.2f}–{max(twins):.2f}×, median {statistics.median(twins):.2f}×", None)
    for q in ("job_queue", "sharded_queue", "adaptive_job_queue", "lockfree_queue", "bounded_queue"):
        st = runs.stat(f"memory/{q}/jobs:100000", "bytes_per_job")
        if st is not None:
            goal("queues", f"memory per queued small job ≤ 64 B at 100K jobs: {q}", f"{st[0]:.1f} B", st[0] <= 64)


def paired_keys(runs):
    """The adaptive_paired workloads of this run, in registration order."""
    keys = [k for k in runs.reps if k.startswith("adaptive_paired/")]

    def order(key):
        parts = key.split("/")
        kind = ["pair", "pc", "contention"].index(parts[1]) if parts[1] in ("pair", "pc", "contention") else 3
        nums = [int(p.split(":")[1]) for p in parts[2:] if ":" in p and p.split(":")[1].isdigit()]
        return (kind, list(reversed(nums)))

    return sorted(set(keys), key=order)


def table_adaptive_paired(runs, out):
    out.append("### The adaptive queue against its strategies, in paired rounds\n")
    out.append("`adaptive_paired/` in `thread_system_queue_benchmarks` (`benchmarks/queues/adaptive_paired_benchmarks.cpp`): "
               "every round runs the workload on `adaptive_job_queue` in ADAPTIVE mode, in FORCE_MUTEX and "
               "FORCE_LOCKFREE mode, and on the bare `job_queue` and `lockfree_queue`, back to back in a rotating "
               "order; each cell is the median over rounds of the per-round throughput ratio adaptive / other "
               "(> 1: ADAPTIVE moved jobs faster), then the median over repetitions (min–max). *better mode* is "
               "the goal's ratio (against the faster of the two forced modes in each round); *better queue* adds "
               "what routing through `adaptive_job_queue` costs over the bare queues. The *twin* columns are controls: "
               "a second `job_queue` against the first, a second ADAPTIVE queue against the first (same code, same "
               "page offset; > 1: the second was faster): how far from 1.00× the method reads when nothing "
               "differs. (The two ADAPTIVE queues learn on their own: they compare alike only while both make "
               "the same switches, hence the twin's switch count.)\n")
    keys = paired_keys(runs)
    if not keys:
        out.append("_No data (not run in this mode)._\n")
        return
    fields = [("vs_better_mode", "vs better mode"), ("vs_mutex_mode", "vs FORCE_MUTEX"),
              ("vs_lockfree_mode", "vs FORCE_LOCKFREE"), ("vs_better_queue", "vs better queue"),
              ("vs_job_queue", "vs job_queue"), ("vs_lockfree_queue", "vs lockfree_queue"),
              ("twin_job_queue", "twin job_queue"), ("twin_adaptive", "twin adaptive")]
    out.append("| workload | " + " | ".join(label for _, label in fields) + " | switches | twin switches |")
    out.append("|---|" + "---:|" * (len(fields) + 2))
    for key in keys:
        row = [key[len("adaptive_paired/"):]]
        for field, _ in fields:
            st = runs.stat(key, field)
            row.append("n/a" if st is None else f"{st[0]:.2f}× ({st[1]:.2f}–{st[2]:.2f})")
        for field in ("switches", "twin_switches"):
            st = runs.stat(key, field)
            row.append("n/a" if st is None else f"{st[0]:.0f}")
        out.append("| " + " | ".join(row) + " |")
    out.append("")


def table_queues(queue_json, out):
    out.append("## Queue-level operations and contention\n")
    out.append("Mirrors the seed's *Queue Level Benchmarks* (basic operations, batch, contention, memory). Produced by "
               "`scripts/queue-ratios.py` from the `thread_system_queue_benchmarks` run of this report; ratios > 1: "
               "the row's queue is better than the reference.\n")
    if not queue_json or not os.path.exists(queue_json):
        out.append("_No data (queue benchmarks not built or not run)._\n")
        return
    res = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "queue-ratios.py"), queue_json],
                         capture_output=True, text=True, check=False)
    if res.returncode != 0:
        out.append(f"_queue-ratios.py failed: {res.stderr.strip()[:300]}_\n")
        return
    table = [l for l in res.stdout.splitlines() if l.startswith("|")]
    out.extend(table)
    out.append("")


LOGGER_PEERS = ["spdlog_async", "spdlog_sync"]


def table_logger(runs, out, not_built, cores):
    """The async logger (thread_system::logger) against spdlog, from thread_system_logger_benchmarks."""
    out.append("## Async logger vs spdlog\n")
    out.append("Mirrors the seed's logger tables (*Single-Threaded Performance*, *Multi-Threaded Scalability*, "
               "*Formatted Logging*, *Burst Logging*, *Latency Characteristics*). `thread_system::logger` "
               "(block policy) against spdlog 1.10's `async_logger` (block policy, one worker) and its synchronous "
               "`logger`. Same buffer on both async sides (8192 entries; ours: 128-byte slots, a 123-char message "
               "takes two); counting sinks that neither format nor write, so neither disk nor line formatting "
               "dominates (the /dev/null row adds a real file sink on both sides). Wall clock from the first call "
               "until the sink has counted every message; 20000 messages per iteration (bursts: one burst, then "
               "wait). Cells: median messages/s (min–max) and ratio vs Thread System (> 1: the peer is faster). "
               "Source and method: `logger/benchmarks/logger_benchmarks.cpp`, docs/LOGGER.md.\n")
    if not_built:
        out.append("_thread_system_logger_benchmarks not built ({fmt} missing?): no data._\n")
        return
    if not keys_of(runs, "logger_single"):
        out.append("_No data (logger benchmarks not run in this mode)._\n")
        return
    if runs.context.get("have_spdlog") != "1":
        out.append("spdlog was not found when building (apt-get install libspdlog-dev): Thread System only.\n")
    measured = {lib for fam in ("logger_single", "logger_threads", "logger_latency") for lib, _, _ in keys_of(runs, fam)}
    libs = ["thread_system"] + [l for l in LOGGER_PEERS if l in measured]

    def rate_row(label, family, suffix, config):
        ours = runs.stat(f"{family}/thread_system{suffix}", "items_per_second")
        if ours is None:
            return None
        row = [label, cell(ours, "rate")]
        for lib in libs[1:]:
            st = runs.stat(f"{family}/{lib}{suffix}", "items_per_second")
            r = compare("logger", config, lib, "msgs/s", st, ours, True)
            row.append("–" if st is None else f"{cell(st, 'rate')} **{fmt_ratio(r)}**")
        return "| " + " | ".join(row) + " |"

    header = "| workload | Thread System | " + " | ".join(LIB_LABEL[l] for l in libs[1:]) + " |"
    rule = "|---|---:|" + "---:|" * (len(libs) - 1)
    rows = []
    for chars in values(runs, "logger_single", "chars"):
        rows.append(rate_row(f"1 thread, {chars}-char messages", "logger_single", f"/chars:{chars}", f"1 thread, {chars} chars"))
    for chars in values(runs, "logger_devnull", "chars"):
        rows.append(rate_row(f"1 thread, {chars} chars, + file sink on /dev/null", "logger_devnull", f"/chars:{chars}",
                             f"1 thread, {chars} chars, /dev/null file"))
    if runs.stat("logger_formatted/thread_system", "items_per_second"):
        rows.append(rate_row("1 thread, formatted (int, string, int, double)", "logger_formatted", "", "formatted"))
    for t in values(runs, "logger_threads", "threads"):
        rows.append(rate_row(f"{t} producer thread{'s' if t > 1 else ''}{oversub(t + 1, cores)}, 123 chars",
                             "logger_threads", f"/threads:{t}", f"{t} producers"))
    for b in values(runs, "logger_burst", "burst"):
        rows.append(rate_row(f"bursts of {b}, then wait until written", "logger_burst", f"/burst:{b}", f"burst {b}"))
    rows = [r for r in rows if r]
    if rows:
        out.append("### Throughput (messages/s)\n")
        out.append("Producer threads + the writer share the machine's cores (oversubscribed when producers + writer > "
                   f"{cores}). spdlog sync does the sink call on the calling thread (nothing queued).\n")
        out.extend([header, rule] + rows)
        out.append("")
    ours_mean = runs.stat("logger_latency/thread_system", "mean_ns")
    if ours_mean:
        out.append("### Per-call latency (123 chars, buffer never full)\n")
        out.append("Each call timed with steady_clock on the producer (1000 calls per iteration, then the writer "
                   "drains untimed); percentiles over all calls of a repetition, median over repetitions.\n")
        out.append("| library | mean | p50 | p99 | mean ratio | p99 ratio |")
        out.append("|---|---:|---:|---:|---:|---:|")
        ours_p99 = runs.stat("logger_latency/thread_system", "p99_ns")
        for lib in libs:
            key = f"logger_latency/{lib}"
            st = [runs.stat(key, f) for f in ("mean_ns", "p50_ns", "p99_ns")]
            if st[0] is None:
                continue
            if lib == "thread_system":
                ratios = ["1.00×", "1.00×"]
            else:
                ratios = [fmt_ratio(compare("logger latency", "per call", lib, "mean call latency", st[0], ours_mean, False)),
                          fmt_ratio(compare("logger latency", "per call", lib, "p99 call latency", st[2], ours_p99, False))]
            out.append(f"| {LIB_LABEL[lib]} | " + " | ".join(cell(x, "ns") for x in st) + " | " + " | ".join(ratios) + " |")
        out.append("")


# ---------------------------------------------------------------------------
# the newer components: typed pool, control APIs, monitoring
# ---------------------------------------------------------------------------

# Goals of the new components (filled by the tables below, listed near the
# top) and every comparison where a variant is slower than its baseline.
GOALS = []
SLOWER = []


def cost_ratio(section, what, variant, base, higher_better):
    """variant cost / base cost (> 1: the variant is slower), recorded in SLOWER when > 1."""
    if variant is None or base is None or variant[0] == 0 or base[0] == 0:
        return None
    r = base[0] / variant[0] if higher_better else variant[0] / base[0]
    if r > 1.0:
        if variant[3] < 2 or base[3] < 2:
            clear = None
        elif higher_better:
            clear = variant[2] < base[1]
        else:
            clear = variant[1] > base[2]
        SLOWER.append(dict(section=section, what=what, r=r, clear=clear))
    return r


def goal(section, text, measured, met):
    GOALS.append(dict(section=section, goal=text, measured=measured, met=met))
    return "n/a" if met is None else ("met" if met else "**not met**")


def ns_per_item(st):
    """items_per_second stat -> ns per item stat (min/max swap)."""
    if st is None or st[0] == 0 or st[1] == 0 or st[2] == 0:
        return None
    return (1e9 / st[0], 1e9 / st[2], 1e9 / st[1], st[3])


def fmt_pct(r):
    return "n/a" if r is None else f"{(r - 1) * 100:+.1f}%"


def table_typed(runs, out, not_built, cores):
    out.append("## Typed thread pool vs the standard pool\n")
    out.append("Mirrors the seed's *Type Thread Pool Performance*, *Priority Scheduling Performance* and *Job Type "
               "Routing* tables, measured side by side in one process (`thread_system_typed_benchmarks`, "
               "`benchmarks/typed/typed_benchmarks.cpp`); repetitions interleaved with the standard pool's.\n")
    if not_built:
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
               "Goals: 1 type ≥ 0.95×, 3 types ≥ 0.85× (default per-type queue).\n")
    out.append("| pool | per-type queue | ~1 µs job: jobs/s | ratio | empty job: jobs/s | ratio | goal |")
    out.append("|---|---|---:|---:|---:|---:|---|")
    out.append(f"| standard thread_pool | – | {cell(base_1us, 'rate')} | 1.00× | {cell(base_empty, 'rate')} | "
               f"{'1.00×' if base_empty else 'n/a'} | |")
    mix = {}
    for key in runs.reps:
        m = re.match(r"^BM_TypedPoolTypeMix/types:(\d+)/queue:(\d+)/job_ns:(\d+)$", key)
        if m:
            mix.setdefault((m.group(2) != "2", int(m.group(1)), m.group(2)), {})[int(m.group(3))] = key
    goals = {1: 0.95, 3: 0.85}
    for (_, types, q) in sorted(mix):
        keys = mix[(q != "2", types, q)]
        s1 = runs.stat(keys.get(1000, ""), "items_per_second")
        s0 = runs.stat(keys.get(0, ""), "items_per_second")
        r1 = None if s1 is None else s1[0] / base_1us[0]
        r0 = None if (s0 is None or base_empty is None) else s0[0] / base_empty[0]
        cost_ratio("typed pool", f"{types} type{'s' if types > 1 else ''}, {queue_name.get(q, q)} queue, ~1 µs jobs, vs standard pool",
                   s1, base_1us, True)
        cost_ratio("typed pool", f"{types} type{'s' if types > 1 else ''}, {queue_name.get(q, q)} queue, empty jobs, vs standard pool",
                   s0, base_empty, True)
        verdict = ""
        if q == "2" and types in goals and r1 is not None:
            verdict = goal("typed pool", f"{types} type{'s' if types > 1 else ''} ≥ {goals[types]:.2f}× the standard pool (~1 µs jobs)",
                           f"{r1:.2f}×", r1 >= goals[types]) + f" (≥ {goals[types]:.2f}×)"
        out.append(f"| typed, {types} type{'s' if types > 1 else ''} | {queue_name.get(q, q)} | "
                   f"{cell(s1, 'rate') if s1 else '–'} | {fmt_ratio(r1) if s1 else '–'} | "
                   f"{cell(s0, 'rate') if s0 else '–'} | {fmt_ratio(r0) if s0 else '–'} | {verdict} |")
    out.append("")

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
            verdict = "n/a" if acc is None else goal("typed pool", f"priority accuracy 100%, {n} jobs per type",
                                                       f"{acc[1]:.1f}% (lowest repetition)", acc[1] >= 100.0)
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
            r = cost_ratio("typed pool", f"routing, {pct}% RealTime, specialists + universal vs standard pool", st,
                           base_route, False)
            ru = cost_ratio("typed pool", f"routing, {pct}% RealTime, 4 universal vs standard pool", uni, base_route, False)
            out.append(f"| {pct}% | {cell(st, 'ns')} | {fmt_ratio(r)} | {cell(uni, 'ns')} | {fmt_ratio(ru)} | "
                       f"{cell(base_route, 'ns')} |")
        out.append("")


def table_control(runs, out, not_built, cores):
    out.append("## Control: cancellation, backpressure, resize, timers\n")
    out.append("From `thread_system_control_benchmarks` (`benchmarks/control/control_benchmarks.cpp`), one process, "
               "repetitions interleaved. Pool workloads: one producer, a 2-worker pool, wall clock from the first "
               "submission until the last job finished. Every ratio here is a **cost ratio: the variant's time "
               "(per job, per call) ÷ its baseline's in the same run; > 1 means the variant is slower**.\n")
    if not_built:
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
        ("`pool.enqueue(f)`, f captures a token and checks it itself",
         ns_per_item(runs.stat("BM_CancelJobs/captured_token", "items_per_second")), plain, "token captured in the job vs none"),
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
            r = cost_ratio("control", what, st, base, False) if base is not None else None
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
                r = None if kind == "unbounded" else cost_ratio("control", f"{label} vs unbounded, {job_label(j)}", st, base, True)
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
            r = cost_ratio("control", "resize 1→8 vs a new 8-worker pool", grow, fresh, False)
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
        r = cost_ratio("control", "wait_group round trip vs future round trip", wg, fut, False)
        out.append(f"| `wait_group` add/done/wait | {cell(wg, 'ns')} | {fmt_ratio(r)} |")
        out.append("")


def ordinal(n):
    """1st, 2nd, 3rd, 4th, ..., 11th-13th, ..., 21st, 32nd."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def table_monitoring(runs, out, not_built, cores):
    out.append("## Monitoring: latency sampling overhead\n")
    out.append("From `thread_system_monitoring_benchmarks`: empty jobs, 100 000 per batch from one producer into a "
               "2-worker pool, wall clock until `wait_idle()` returns; one pool per setting of "
               "`pool_options::latency_sample_every` (0 = off, N = the default, 1 = every job), the settings "
               "interleaved round by round (off, default, every job, off, …; the rounds are the repetitions). "
               "Overhead = 1 − jobs/s(setting) ÷ jobs/s(off), from the medians. Goal: default ≤ 5%.\n")
    if not_built:
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
        cost_ratio("monitoring", f"latency sampling {label} vs off", st, off, True)
        verdict = ""
        if name == "default":
            verdict = goal("monitoring", "latency sampling overhead (default vs off) ≤ 5%", f"{100 * overhead:+.1f}%",
                           overhead <= 0.05)
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


def section_new_goals(out):
    out.append("## Performance goals, and where variants are slower\n")
    out.append("The goals the issues set, judged on this run's medians: scheduler and queue goals from the tables "
               "below, then the typed pool, control and monitoring sections (same run). Then every "
               "comparison there in which a variant is slower than its baseline: *clear* = the whole min–max ranges "
               "are apart, otherwise they overlap and the difference may be noise.\n")
    if not GOALS and not SLOWER:
        out.append("_No data (their benchmarks were not built or not run)._\n")
        return
    if GOALS:
        out.append("| section | goal | measured | met? |")
        out.append("|---|---|---:|---|")
        for g in GOALS:
            met = "n/a" if g["met"] is None else ("yes" if g["met"] else "**no**")
            out.append(f"| {g['section']} | {g['goal']} | {g['measured']} | {met} |")
        out.append("")
    slower = sorted(SLOWER, key=lambda c: (c["clear"] is not True, -c["r"]))
    if slower:
        out.append(f"{len(slower)} comparisons where the variant is slower (cost ratio > 1), clear ones first:\n")
        out.append("| section | comparison | cost ratio | clear? |")
        out.append("|---|---|---:|---|")
        for c in slower:
            out.append(f"| {c['section']} | {c['what']} | {c['r']:.2f}× | { {True: 'clear', False: 'overlapping', None: 'n=1'}[c['clear']] } |")
        out.append("")


def section_losses(out):
    out.append("## Where Thread System loses\n")
    out.append("Computed from the tables above: every comparison where a peer's median beats Thread System's. "
               "*clear* = the peer's whole min–max range is better than ours; otherwise the ranges overlap and "
               "the difference may be noise. Clear losses first, then by size.\n")
    losses = [c for c in COMPARISONS if c["r"] > 1.0]
    losses.sort(key=lambda c: (c["clear"] is not True, -c["r"]))
    if not losses:
        out.append(f"_None: Thread System's median is the best in all {len(COMPARISONS)} comparisons._\n")
        return
    units = {"jobs/s": "rate", "RSS per worker": "bytes", "bytes per queued job": "bytes", "create+join time": "ns",
             "p50 submit→start": "ns", "mean call latency": "ns", "p99 call latency": "ns"}
    out.append(f"{len(losses)} of {len(COMPARISONS)} comparisons, worst first.\n")
    out.append("| table | configuration | peer | metric | peer | Thread System | peer better by | clear? |")
    out.append("|---|---|---|---|---:|---:|---:|---|")
    for c in losses:
        unit = units.get(c["metric"], "rate" if "/s" in c["metric"] else ("ns" if "p50" in c["metric"] else ""))
        out.append(f"| {c['table']} | {c['config']} | {LIB_LABEL[c['lib']]} | {c['metric']} | {fmt(c['peer'][0], unit)} | "
                   f"{fmt(c['ours'][0], unit)} | {c['r']:.2f}× | { {True: 'clear', False: 'overlapping', None: 'n=1'}[c['clear']] } |")
    out.append("")


# ---------------------------------------------------------------------------
# plots
# ---------------------------------------------------------------------------

GP_HEAD = "set terminal pngcairo size {w},{h} font 'DejaVu Sans,10'\nset output '{png}'\nset grid\nset key below\n"


def gp_escape(s):
    # '~' is gnuplot's enhanced-text overprint operator.
    return s.replace("'", "''").replace("~", "about ")


def make_plots(plots, outdir, cores):
    gnuplot = shutil.which("gnuplot")
    if not gnuplot:
        return "gnuplot not found (apt-get install gnuplot-nox): plots skipped."
    # pngcairo is in gnuplot-nox; fall back to the plain png terminal.
    terms = subprocess.run([gnuplot, "-e", "set terminal"], capture_output=True, text=True, check=False)
    head = GP_HEAD if "pngcairo" in (terms.stdout + terms.stderr) else GP_HEAD.replace("pngcairo", "png").replace(" font 'DejaVu Sans,10'", "")
    made, failed = [], []
    for kind, data in plots:
        dat = os.path.join(outdir, f"{kind}.dat")
        gp = os.path.join(outdir, f"{kind}.gp")
        png = f"{kind}.png"
        script = []
        with open(dat, "w", encoding="utf-8") as f:
            if kind == "throughput":
                job_sizes, series = data
                script.append(head.format(w=1200, h=900, png=png))
                script.append(f"set multiplot layout {(len(job_sizes) + 1) // 2},2 title 'Jobs/s vs workers (median, bars: min-max; {cores} cores)'")
                script.append("set logscale x 2\nset logscale y\nset xlabel 'workers'\nset ylabel 'jobs/s'\nset xrange [0.8:10]")
                idx = 0
                for j in job_sizes:
                    plotcmds = []
                    for lib in LIBS:
                        pts = series.get((j, lib))
                        if not pts:
                            continue
                        f.write(f"# {j} {lib}\n")
                        for w, s in pts:
                            f.write(f"{w} {s[0]} {s[1]} {s[2]}\n")
                        f.write("\n\n")
                        plotcmds.append(f"'{kind}.dat' index {idx} using 1:2:3:4 with yerrorlines title '{gp_escape(LIB_LABEL[lib])}'")
                        idx += 1
                    script.append(f"set title '{gp_escape(job_label(j))}'")
                    script.append("plot " + ", ".join(plotcmds) if plotcmds else "")
                script.append("unset multiplot")
            elif kind == "latency":
                script.append(head.format(w=1000, h=600, png=png))
                script.append("set title 'Submit-to-start latency on an idle pool (median of repetitions)'")
                script.append("set style data histogram\nset style histogram clustered gap 1\nset style fill solid 0.8 border -1")
                script.append("set logscale y\nset ylabel 'microseconds (log)'\nset xtics rotate by -20")
                for lib, (p50, p95, p99) in data:
                    f.write(f"\"{LIB_LABEL[lib]}\" {p50} {p95} {p99}\n")
                script.append(f"plot '{kind}.dat' using 2:xtic(1) title 'p50', '' using 3 title 'p95', '' using 4 title 'p99'")
            elif kind == "scaling":
                j, series = data
                script.append(head.format(w=1000, h=600, png=png))
                script.append(f"set title 'Scaling efficiency, {gp_escape(job_label(j))}: speedup / min(workers, {cores} cores)'")
                script.append("set logscale x 2\nset xlabel 'workers'\nset ylabel 'efficiency %'\nset yrange [0:*]\nset xrange [0.8:10]")
                plotcmds = []
                for idx, (lib, pts) in enumerate(series):
                    for w, e in pts:
                        f.write(f"{w} {e}\n")
                    f.write("\n\n")
                    plotcmds.append(f"'{kind}.dat' index {idx} using 1:2 with linespoints title '{gp_escape(LIB_LABEL[lib])}'")
                script.append("plot " + ", ".join(plotcmds))
            elif kind == "heatmap":
                libs, ps, ws, heat = data
                cols = 2 if len(libs) > 1 else 1
                rows = (len(libs) + cols - 1) // cols
                script.append(head.format(w=1100, h=450 * rows, png=png))
                script.append(f"set multiplot layout {rows},{cols} title 'Empty jobs: M jobs/s by producers x workers'")
                script.append("unset grid\nset view map\nset palette rgbformulae 22,13,-31\nset xlabel 'workers'\nset ylabel 'producers'")
                script.append("set xtics (" + ", ".join(f"'{w}' {i}" for i, w in enumerate(ws)) + ")")
                script.append("set ytics (" + ", ".join(f"'{p}' {i}" for i, p in enumerate(ps)) + ")")
                script.append(f"set xrange [-0.5:{len(ws) - 0.5}]\nset yrange [-0.5:{len(ps) - 0.5}]")
                vmax = max(heat.values()) / 1e6 if heat else 1
                script.append(f"set cbrange [0:{vmax}]")
                for idx, lib in enumerate(libs):
                    for pi, p in enumerate(ps):
                        for wi, w in enumerate(ws):
                            v = heat.get((lib, p, w))
                            f.write(f"{wi} {pi} {'NaN' if v is None else v / 1e6}\n")
                    f.write("\n\n")
                    script.append(f"set title '{gp_escape(LIB_LABEL[lib])}'")
                    script.append(f"plot '{kind}.dat' index {idx} using 1:2:3 with image notitle, "
                                  f"'' index {idx} using 1:2:(sprintf('%.2f', $3)) with labels notitle")
                script.append("unset multiplot")
        with open(gp, "w", encoding="utf-8") as g:
            g.write("\n".join(script) + "\n")
        res = subprocess.run([gnuplot, os.path.basename(gp)], cwd=outdir, capture_output=True, text=True, check=False)
        if res.returncode == 0 and os.path.exists(os.path.join(outdir, png)):
            made.append(png)
        else:
            failed.append(f"{png}: {res.stderr.strip()[:200]}")
    msg = f"Plots made with {gnuplot}: {', '.join(made) or 'none'}."
    if failed:
        msg += " Failed: " + "; ".join(failed)
    return msg


# ---------------------------------------------------------------------------
# main
# ---------------------------------------------------------------------------


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
    cfg = MODES[mode]
    build = os.path.join(ROOT, args.build_dir) if not os.path.isabs(args.build_dir) else args.build_dir
    outdir = os.path.join(ROOT, args.out) if not os.path.isabs(args.out) else args.out
    os.makedirs(outdir, exist_ok=True)
    raw = os.path.join(outdir, "raw")
    os.makedirs(raw, exist_ok=True)

    binaries = {
        "core": os.path.join(build, "benchmarks", "thread_system_benchmarks"),
        "queue": os.path.join(build, "benchmarks", "queues", "thread_system_queue_benchmarks"),
        "report": os.path.join(build, "benchmarks", "report", "thread_system_report_benchmarks"),
        "logger": os.path.join(build, "logger", "benchmarks", "thread_system_logger_benchmarks"),
        "typed": os.path.join(build, "benchmarks", "typed", "thread_system_typed_benchmarks"),
        "control": os.path.join(build, "benchmarks", "control", "thread_system_control_benchmarks"),
        "monitoring": os.path.join(build, "monitoring", "thread_system_monitoring_benchmarks"),
    }
    missing = [k for k, b in binaries.items() if not os.access(b, os.X_OK)]
    for k in missing:
        print(f"warning: {binaries[k]} not built; its tables will say so", file=sys.stderr)

    env = dict(os.environ)
    env["THREAD_SYSTEM_REPORT_MODE"] = mode
    # In the shared runs libgomp's idle spinning would steal cores from the
    # library measured next; the isolated idle-CPU runs keep the caller's setting.
    env_shared = dict(env)
    env_shared.setdefault("OMP_WAIT_POLICY", "passive")

    # Plan: (label, binary, filter, reps, json, interleave, env, min_time, extra arguments)
    steps = []
    mt = cfg["min_time"]
    if "core" not in missing:
        steps.append(("thread_system_benchmarks", binaries["core"], cfg["core"], cfg["reps"], "core.json", True, env_shared, mt, ()))
    if "queue" not in missing:
        steps.append(("thread_system_queue_benchmarks", binaries["queue"], cfg["queue"], cfg["reps"], "queue.json", True, env_shared, mt, ()))
    if "report" not in missing:
        steps.append(("thread_system_report_benchmarks", binaries["report"], cfg["report"], cfg["reps"], "peers.json", True, env_shared, mt, ()))
        isolated = list_tests(binaries["report"], ISOLATED, env)
        for i, name in enumerate(isolated):
            flt = "^" + re.escape(name) + "$"
            steps.append((name, binaries["report"], flt, cfg["reps"], f"isolated_{i:03d}.json", False, env, mt, ()))

    if "logger" not in missing:
        steps.append(("thread_system_logger_benchmarks", binaries["logger"], cfg["logger"], cfg["reps"], "logger.json", True, env_shared, mt, ()))
    if "typed" not in missing:
        steps.append(("thread_system_typed_benchmarks", binaries["typed"], cfg["typed"], cfg["reps"], "typed.json", True, env_shared, mt, ()))
    if "control" not in missing:
        steps.append(("thread_system_control_benchmarks", binaries["control"], cfg["control"], cfg["reps"], "control.json", True, env_shared, mt, ()))
    if "monitoring" not in missing:
        # Its rounds (off, default, every job, off, ...) are the repetitions.
        steps.append(("thread_system_monitoring_benchmarks", binaries["monitoring"], cfg["monitoring"], 1, "monitoring.json", False,
                      env_shared, cfg["monitoring_min_time"], (f"--rounds={cfg['monitoring_rounds']}",)))

    total = 0
    counts = []
    for label, binary, flt, reps, _, _, e, _, extra in steps:
        n = len(list_tests(binary, flt, e, extra)) * reps
        counts.append(n)
        total += n
    runs = Runs()
    queue_json = None
    info_path = os.path.join(raw, "run_info.json")
    if args.render_only:
        for (_, _, _, _, json_name, _, _, _, _), n in zip(steps, counts):
            path = os.path.join(raw, json_name)
            data = load_json(path)
            runs.add(data)
            if json_name == "queue.json" and data:
                queue_json = path
        info = load_json(info_path) or {}
        wall = float(info.get("wall_s", 0))
        print(f"mode {mode}: rendering from {raw}/ (run of {info.get('date', 'unknown date')})", flush=True)
    else:
        print(f"mode {mode}: {len(steps)} runs, {total} benchmark repetitions; raw output in {raw}/", flush=True)
        progress = Progress(total)
        started = time.monotonic()
        with open(os.path.join(raw, "benchmarks.log"), "w", encoding="utf-8") as log:
            for (label, binary, flt, reps, json_name, interleave, e, min_time, extra), n in zip(steps, counts):
                if n == 0:
                    continue
                path = os.path.join(raw, json_name)
                if os.path.exists(path):
                    os.remove(path)
                run_binary(binary, flt, reps, min_time, path, log, e, progress, interleave, extra)
                data = load_json(path)
                runs.add(data)
                if json_name == "queue.json" and data:
                    queue_json = path
        progress.finish()
        wall = time.monotonic() - started
        with open(info_path, "w", encoding="utf-8") as f:
            json.dump({"mode": mode, "wall_s": wall, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}, f)

    cores = os.cpu_count() or 2
    out = []
    plots = []
    out.append("# Thread System benchmark report\n")
    out.append(f"Generated by `scripts/report.py --{mode}` in {wall:.0f} s. Repetitions: {cfg['reps']}, "
               f"min_time {cfg['min_time']} s, repetitions randomly interleaved within each binary. "
               "Every figure: median over repetitions (min–max); ratios are against Thread System in the same run "
               "and oriented so that **> 1 means the peer is better**. Raw JSON and the console log: `raw/`.\n")
    out.append("## Machine\n")
    out.append(machine_section(build))
    out.append("")
    out.append("## Libraries\n")
    ctx = runs.context
    out.append("| library | status |")
    out.append("|---|---|")
    for lib in LIBS:
        if lib in LIB_CONTEXT and "report" not in missing and ctx.get(LIB_CONTEXT[lib]) != "1":
            out.append(f"| {LIB_LABEL[lib]} | skipped: install {LIB_PACKAGE[lib]} |")
        elif "report" in missing:
            out.append(f"| {LIB_LABEL[lib]} | not measured: thread_system_report_benchmarks not built |")
        else:
            out.append(f"| {LIB_LABEL[lib]} | measured |")
    out.append("")
    out.append("Same number of worker threads for every library. oneTBB: `task_arena(n, 0).enqueue` with "
               "`global_control(max_allowed_parallelism, n + 1)`; Boost.Asio: `thread_pool(n)` + `post`; OpenMP: "
               "`parallel num_threads(n)` / `single` / `task` (shared runs with OMP_WAIT_POLICY="
               f"{env_shared.get('OMP_WAIT_POLICY')}); std::async: `std::launch::async`, a thread per job; naive: "
               "std::mutex + std::condition_variable + std::deque<std::function>, notify_one per job.\n")
    if missing:
        out.append("Binaries not built (tables that need them say so): " + ", ".join(binaries[k] for k in missing) + "\n")

    table_comparison(runs, out, cores)
    table_throughput(runs, out, plots, cores)
    table_scaling(runs, out, plots, cores)
    table_producer_matrix(runs, out, plots, cores)
    table_idle_latency(runs, out, plots)
    table_queue_depth_latency(runs, out)
    table_creation(runs, out)
    table_memory(runs, out)
    table_scheduler(runs, out)
    table_injector(runs, out)
    table_queues(queue_json, out)
    table_adaptive_paired(runs, out)
    queue_goals(runs)
    table_logger(runs, out, "logger" in missing, cores)
    table_typed(runs, out, "typed" in missing, cores)
    table_control(runs, out, "control" in missing, cores)
    table_monitoring(runs, out, "monitoring" in missing, cores)
    if runs.errors:
        out.append("## Benchmarks that reported errors\n")
        for k, v in sorted(runs.errors.items()):
            out.append(f"- `{k}`: {v}")
        out.append("")
    # "Where Thread System loses" goes near the top, after the machine.
    losses = []
    section_losses(losses)
    section_new_goals(losses)
    plot_msg = make_plots(plots, outdir, cores)
    head_end = out.index("## Libraries\n")
    out[head_end:head_end] = losses
    out.append("## Plots\n")
    out.append(plot_msg + " The .dat and .gp files next to the PNGs regenerate them (`cd report && gnuplot latency.gp`).\n")

    path = os.path.join(outdir, "REPORT.md")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(out) + "\n")
    print(f"wrote {path} ({plot_msg})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
