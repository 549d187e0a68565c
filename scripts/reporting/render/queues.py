"""The job queues (thread_system_queue_benchmarks): injectors under
producer/consumer load, the queue-level table of scripts/queue-ratios.py, and
the adaptive queue's paired rounds. Their goals are in reporting/goals.py."""

import os
import re
import subprocess
import sys

from .common import ROOT, cell, fmt_ratio, ratio, section


@section
def table_injector(ctx, out):
    runs = ctx.runs
    out.append("## Injector queues under producer/consumer load (seed 004, first table)\n")
    out.append("Seed 004 compares a mutex queue, a bounded DVyukov MPMC ring and a sharded ring as the pool's "
               "injector. Here: `thread_system_queue_benchmarks` `pc/` (P producers, C consumers, P = C = the "
               "thread count), mutex+deque vs bounded_queue (Vyukov) vs sharded_queue (and job_queue, one lock, and "
               "two_lock_job_queue, the pool's injector, a lock for each end). Median M jobs/s consumed (min–max); ratio vs mutex+deque.\n")
    rows = {}
    for key in runs.reps:
        m = re.match(r"^pc/([^/]+)/P:(\d+)/C:(\d+)/ops:(\d+)$", key)
        if m:
            rows.setdefault((int(m.group(4)), int(m.group(2))), {})[m.group(1)] = key
    if not rows:
        out.append("_No data (queue benchmarks not run or `pc/` filtered out)._\n")
        return
    queues = [q for q in ("mutex_deque", "job_queue", "two_lock_job_queue", "bounded_queue", "sharded_queue") if any(q in r for r in rows.values())]
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


@section
def table_injector_in_pool(ctx, out):
    runs = ctx.runs
    out.append("## The injector inside a pool (seed 004, first table)\n")
    out.append("Seed 004's table measured where it was measured: inside the pool. `thread_system_benchmarks` "
               "`BM_InjectorInPool`: one producer thread submits N empty jobs into a pool of W workers and waits for "
               "them; the pool's injector is the column's `pool_queue`. `bounded` is Vyukov's ring with the note's "
               "capacity (8192); a submission it refuses with `queue_full` is retried after a yield, and the "
               "retries per iteration are shown. Median M jobs/s (min–max); ratio vs the mutex injector (> 1: faster). "
               f"{ctx.cores} cores: W + 1 > {ctx.cores} is oversubscribed.\n")
    kinds = ["mutex", "lockfree", "adaptive", "sharded", "bounded"]
    rows = {}
    for key in runs.reps:
        m = re.match(r"^BM_InjectorInPool/queue:(\d+)/workers:(\d+)/tasks:(\d+)$", key)
        if m and int(m.group(1)) < len(kinds):
            rows.setdefault((int(m.group(2)), int(m.group(3))), {})[kinds[int(m.group(1))]] = key
    if not rows:
        out.append("_No data (BM_InjectorInPool not run in this mode)._\n")
        return
    present = [k for k in kinds if any(k in r for r in rows.values())]
    out.append("| workers | tasks | " + " | ".join(present) + " | bounded: full retries |")
    out.append("|---:|---:|" + "---:|" * (len(present) + 1))
    for (workers, tasks) in sorted(rows):
        r = rows[(workers, tasks)]
        base = runs.stat(r.get("mutex", ""), "items_per_second")
        row = [str(workers), f"{tasks:,}"]
        for k in present:
            st = runs.stat(r.get(k, ""), "items_per_second")
            row.append(cell(st, "rate") + ("" if k == "mutex" else f" {fmt_ratio(ratio(st, base, True))}"))
        retries = runs.stat(r.get("bounded", ""), "full_retries")
        row.append("n/a" if retries is None else f"{retries[0]:,.0f}")
        out.append("| " + " | ".join(row) + " |")
    out.append("")


INJECTOR_KINDS = ["mutex", "lockfree", "adaptive", "sharded", "bounded"]


def _injector_rows(runs, pattern):
    """{row key: {kind: benchmark key}} for keys matching `pattern` (groups: queue, row)."""
    rows = {}
    for key in runs.reps:
        m = re.match(pattern, key)
        if m and int(m.group(1)) < len(INJECTOR_KINDS):
            rows.setdefault(int(m.group(2)), {})[INJECTOR_KINDS[int(m.group(1))]] = key
    return rows


@section
def table_injector_producers(ctx, out):
    runs = ctx.runs
    out.append("## Each injector in a pool: 1–16 producers\n")
    out.append("The guides' high-contention tables at pool level, with each injector. `thread_system_benchmarks` "
               "`BM_InjectorProducers`: P producer threads (started once, released together) share 100 000 empty "
               "jobs into a pool of 2 workers; wall clock until every job ran. Median M jobs/s (min–max); ratio vs "
               "the mutex injector (> 1: faster). *switches*: the adaptive injector's queue switches over the "
               "run (`pool_statistics::queue_switches`, median over repetitions); *retries*: submissions the "
               f"bounded ring (capacity 8192) refused as full, retried after a yield. {ctx.cores} cores: every row is "
               "oversubscribed (2 workers + P producers).\n")
    rows = _injector_rows(runs, r"^BM_InjectorProducers/queue:(\d+)/producers:(\d+)$")
    if not rows:
        out.append("_No data (BM_InjectorProducers not run in this mode)._\n")
        return
    present = [k for k in INJECTOR_KINDS if any(k in r for r in rows.values())]
    out.append("| producers | " + " | ".join(present) + " | adaptive: switches | bounded: retries |")
    out.append("|---:|" + "---:|" * (len(present) + 2))
    for producers in sorted(rows):
        r = rows[producers]
        base = runs.stat(r.get("mutex", ""), "items_per_second")
        row = [str(producers)]
        for k in present:
            st = runs.stat(r.get(k, ""), "items_per_second")
            row.append(cell(st, "rate") + ("" if k == "mutex" else f" {fmt_ratio(ratio(st, base, True))}"))
        switches = runs.stat(r.get("adaptive", ""), "queue_switches")
        retries = runs.stat(r.get("bounded", ""), "full_retries")
        row.append("n/a" if switches is None else f"{switches[0]:,.0f}")
        row.append("n/a" if retries is None else f"{retries[0]:,.0f}")
        out.append("| " + " | ".join(row) + " |")
    out.append("")


@section
def table_injector_latency(ctx, out):
    runs = ctx.runs
    out.append("## Each injector in a pool: submission latency\n")
    out.append("The guides' *Job Submission Latency* per queue mode. `BM_InjectorLatency`: submit→start of one job "
               "on a 2-worker pool whose injector is the row's, with N empty jobs queued ahead of it (0: an idle pool, "
               "its workers parked for 200 µs first); 200 samples per repetition, median over repetitions. Idle "
               "wake-ups on this machine are bimodal (a few µs, or ~90 µs in some runs, for every kind alike), so "
               "p95/p99 swing between runs.\n")
    rows = _injector_rows(runs, r"^BM_InjectorLatency/queue:(\d+)/queued:(\d+)$")
    if not rows:
        out.append("_No data (BM_InjectorLatency not run in this mode)._\n")
        return
    out.append("| queued ahead | injector | p50 | p95 | p99 |")
    out.append("|---:|---|---:|---:|---:|")
    for queued in sorted(rows):
        for k in INJECTOR_KINDS:
            key = rows[queued].get(k)
            if key is None:
                continue
            cells = [cell(runs.stat(key, f), "ns") for f in ("p50_ns", "p95_ns", "p99_ns")]
            out.append(f"| {queued:,} | {k} | " + " | ".join(cells) + " |")
    out.append("")


@section
def table_queues(ctx, out):
    out.append("## Queue-level operations and contention\n")
    out.append("Mirrors the seed's *Queue Level Benchmarks* (basic operations, batch, contention, memory). Produced by "
               "`scripts/queue-ratios.py` from the `thread_system_queue_benchmarks` run of this report; ratios > 1: "
               "the row's queue is better than the reference.\n")
    queue_json = ctx.queue_json
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


def paired_keys(runs):
    """The adaptive_paired workloads of this run, in registration order."""
    keys = [k for k in runs.reps if k.startswith("adaptive_paired/")]

    def order(key):
        parts = key.split("/")
        kind = ["pair", "pc", "contention"].index(parts[1]) if parts[1] in ("pair", "pc", "contention") else 3
        nums = [int(p.split(":")[1]) for p in parts[2:] if ":" in p and p.split(":")[1].isdigit()]
        return (kind, list(reversed(nums)))

    return sorted(set(keys), key=order)


@section
def table_adaptive_paired(ctx, out):
    runs = ctx.runs
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
