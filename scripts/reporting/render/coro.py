"""Coroutines on the pools against Boost.Asio's awaitables
(thread_system_coro_benchmarks): schedule round trip, fib(27) fork-join, and
100 000 concurrently sleeping tasks."""

from .common import cell, section
from .plots import gp_escape, plot_writer

_ROWS = [
    ("coro_schedule/thread_system", "ns_per_hop", "`co_await pool.schedule()` (2 workers)"),
    ("coro_schedule/boost_asio", "ns_per_hop", "Asio `co_await post(ex, use_awaitable)` (asio::thread_pool, 2 threads)"),
    ("coro_fib/thread_system_task", "thread_ns_per_fork", "fib(27): `task<T>` + `when_all` (2 workers)"),
    ("coro_fib/thread_system_task_group", "thread_ns_per_fork", "fib(27): `task_group` (blocking fork-join, helping wait)"),
    ("coro_fib/boost_asio", "thread_ns_per_fork", "fib(27): Asio awaitables, `co_spawn` + join (2 threads)"),
]


@section
def table_coro(ctx, out):
    runs = ctx.runs
    out.append("## Coroutines\n")
    out.append("From `thread_system_coro_benchmarks` (`benchmarks/coro/coro_benchmarks.cpp`), one process, repetitions "
               "interleaved; both libraries with 2 threads. A round trip is one coroutine hopping onto its own pool "
               "again (100 000 hops per iteration): ns per hop = wall / hops. Fork-join is fib(27) with a fork per "
               "internal call: thread-ns per fork = threads × wall / forks. docs/COROUTINES.md describes the model.\n")
    if ctx.not_built("coro"):
        out.append("_thread_system_coro_benchmarks not built: no data._\n")
        return
    rows = [(label, field, row, runs.stat(row, field)) for row, field, label in _ROWS]
    rows = [r for r in rows if r[3] is not None]
    if not rows:
        out.append("_No data (coroutine benchmarks not run in this mode)._\n")
        return
    out.append("| workload | ns (median, min–max) | goal |")
    out.append("|---|---:|---|")
    for label, field, row, st in rows:
        out.append(f"| {label} | {cell(st, 'ns')} | {ctx.verdict(row) or '–'} |")
    out.append("")
    ctx.plot("coro", [(label, st[0]) for label, _, _, st in rows])

    sleep = "coro_sleep/thread_system/tasks:100000"
    fields = [("lateness_p50_us", "lateness p50 (µs)"), ("lateness_p99_us", "lateness p99 (µs)"),
              ("rss_per_parked_task_B", "resident bytes per task suspended in `schedule()` (frame + queued resumption)"),
              ("rss_per_sleeping_task_B", "resident bytes per sleeping task"),
              ("sleep_adds_B", "what a sleep adds per task (its timer), bytes")]
    got = [(label, runs.stat(sleep, f)) for f, label in fields]
    got = [g for g in got if g[1] is not None]
    if got:
        out.append("### 100 000 concurrent `sleep_for(1 ms)`\n")
        out.append("100 000 tasks spawned into a paused pool, then released together: each computes its due time and "
                   "sleeps, so all 100 000 come due within a few ms of each other and two workers resume them one "
                   "after another (lateness = resumed − due, the queueing of that burst). Memory: resident set growth "
                   "while all are suspended, per task; each repetition runs in its own process (in one process a "
                   "later repetition reuses the frames and heap the first one left, and the suspended row reads "
                   "near 0).\n")
        out.append("| measure | value (median, min–max) | goal |")
        out.append("|---|---:|---|")
        for label, st in got:
            goal = ctx.verdict(sleep) if label.startswith("what a sleep adds") else None
            out.append(f"| {label} | {cell(st, '')} | {goal or '–'} |")
        out.append("")


@plot_writer("coro")
def plot_coro(f, data, head, ctx):
    kind, png = "coro", "coro.png"
    script = [head.format(w=1000, h=500, png=png)]
    script.append("set title 'Coroutines: ns per hop / thread-ns per fork (median; lower is better)'")
    script.append("set style data histograms\nset style fill solid 0.8\nset logscale y\nset ylabel 'ns'")
    script.append("set xtics rotate by -20 scale 0 font ',8'\nset key off")
    for i, (label, v) in enumerate(data):
        f.write(f"{i} \"{gp_escape(label.replace('`', ''))}\" {v}\n")
    script.append(f"plot '{kind}.dat' using 3:xtic(2) title ''")
    return script
