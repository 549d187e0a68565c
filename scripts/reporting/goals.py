"""The performance goals the issues set, as data. Rendering judges them on a
run's medians (reporting/render/verdicts.py) and lists them in the report's
goals table, in this order; a table whose row a goal is judged on (its `x` row,
or `row`) shows the verdict in its own "goal" column.

A goal is a dict:

  section   the report section it belongs to (first column of the goals table)
  goal      the text; with `each`, {name} is a named group of the match
  kind      the computation, one of
              ratio       r = x / y
              best_ratio  r = x / y, x the largest of `candidates` ({label: [row, field]})
              overhead    overhead = 1 - x / y
              value       x alone (`stat`: "median" (default), "min" or "max" over the repetitions)
              over_rows   the median of `fields` on every row matching `rows` (values > 0):
                          their median, min, max, the worst row; `per_row` = (op, threshold)
                          counts the rows that pass (n_ok)
  x, y      [benchmark row, field]: the row is the normalised benchmark name
            (no real_time, iterations:N, round:N); the field a JSON field
            (items_per_second, a counter) or "real_ns" (real_time in ns)
  met       (op, threshold), op ">=" or "<=", applied to r (ratio, best_ratio),
            overhead, x (value); "all" for over_rows (every row passes
            `per_row`); None: a figure listed for context, not a goal
  measured  str.format template of the "measured" column; fields: x, y, r,
            x_ns_per_item / y_ns_per_item (1e9 / x, for rates), best (best_ratio),
            overhead and pct (= 100 * overhead), n, n_ok, median, min, max,
            worst, worst_row (over_rows), and the groups of `each`
  each      optional regex over the benchmark rows: the goal is judged once per
            matching row (in the order of its numeric groups); `x` and `row`
            may then use {row} and the groups
  requires  optional [[row, field], ...] that must have data for the goal to be judged
  row       optional: the benchmark row whose table shows the verdict (default: x's row)

A ratio or overhead whose x or y median is missing or zero is not judged (the
goal is left out of the table); so is a value whose row is missing.
"""

_EXTERNAL_SUBMIT_PEERS = (("oneTBB", "oneTBB", 0.8), ("BoostAsio", "Boost.Asio", 0.6))
_MEMORY_QUEUES = ("job_queue", "sharded_queue", "adaptive_job_queue", "lockfree_queue", "bounded_queue")
_RATE = "items_per_second"

GOALS = [
    # -- the work-stealing scheduler (issue #4), thread_system_benchmarks
    # (#20: at 1 and 2 workers; the rows exist for every core count where there are more)
    dict(section="scheduler", goal="nested fib, {w}-worker pool: thread-ns per task ≤ 0.5× oneTBB's", kind="ratio",
         each=r"^BM_NestedFib_ThreadSystem/workers:(?P<w>\d+)$",
         x=["{row}", "thread_ns_per_task"], y=["BM_NestedFib_oneTBB/workers:{w}", "thread_ns_per_task"],
         met=("<=", 0.5), measured="{x:.1f} vs {y:.1f} ns ({r:.2f}×)"),
    *[dict(section="scheduler",
           goal=f"external submit, {p} producer{'s' if p > 1 else ''}: ns per job ≤ {limit}× {label}'s",
           kind="ratio",  # their jobs/s over ours = our ns per job over theirs
           x=[f"BM_ExternalSubmit_{peer}/producers:{p}", _RATE], y=[f"BM_ExternalSubmit_ThreadSystem/producers:{p}", _RATE],
           met=("<=", limit), measured="{y_ns_per_item:.0f} vs {x_ns_per_item:.0f} ns ({r:.2f}×)")
      for p in (1, 2) for peer, label, limit in _EXTERNAL_SUBMIT_PEERS],
    # #20: in every full run, not on average (the 10⁵-float row is shown, not judged)
    dict(section="scheduler", goal="parallel_for ≥ 1.0× tbb::parallel_for", kind="ratio",
         x=["BM_ParallelFor_ThreadSystem", _RATE], y=["BM_ParallelFor_oneTBB", _RATE],
         met=(">=", 1.0), measured="{r:.2f}× oneTBB's elements/s"),
    # What bounds that ratio: the speed-up of each over the loop on one thread
    # (both at the machine's limit leave the ratio at 1.0 within noise).
    *[dict(section="scheduler", goal=f"(context) parallel_for: {label}'s speed-up over the loop on one thread",
           kind="ratio", x=[f"BM_ParallelFor_{bm}", _RATE], y=["BM_ParallelFor_Serial", _RATE], met=None,
           measured="{r:.2f}×")
      for bm, label in (("ThreadSystem", "Thread System"), ("oneTBB", "oneTBB"))],

    # -- the job queues (issue #3), thread_system_queue_benchmarks
    *[g for ops in (10000, 1000000) for g in (
        dict(section="queues", goal=f"lock-free or sharded at 2P/2C ({ops:,} jobs) ≥ 0.8× moodycamel", kind="best_ratio",
             candidates={q: [f"pc/{q}/P:2/C:2/ops:{ops}", _RATE] for q in ("sharded_queue", "lockfree_queue")},
             y=[f"pc/moodycamel/P:2/C:2/ops:{ops}", _RATE], met=(">=", 0.8), measured="{best}: {r:.2f}×"),
        dict(section="queues", goal=f"lock-free or sharded at 2P/2C ({ops:,} jobs) ≥ 2× the mutex+deque queue",
             kind="best_ratio",
             candidates={q: [f"pc/{q}/P:2/C:2/ops:{ops}", _RATE] for q in ("sharded_queue", "lockfree_queue")},
             y=[f"pc/mutex_deque/P:2/C:2/ops:{ops}", _RATE], met=(">=", 2.0), measured="{best}: {r:.2f}×"),
    )],
    # The adaptive queue against the better of its two strategies, workload by
    # workload, from the paired benchmark (adaptive_paired_benchmarks.cpp):
    # per-round ratios, median over rounds, then the median over repetitions.
    dict(section="queues", goal="adaptive queue ≥ 0.9× the better of its two strategies (FORCE_MUTEX / FORCE_LOCKFREE), "
         "every workload, paired rounds", kind="over_rows", rows=r"^adaptive_paired/", fields=["vs_better_mode"],
         per_row=(">=", 0.9), met="all",
         measured="median {median:.2f}×, worst {worst:.2f}× ({worst_row}); {n_ok} of {n} workloads at ≥ 0.9×"),
    dict(section="queues", goal="(not a goal) adaptive queue against the better of the bare job_queue / lockfree_queue, "
         "paired rounds", kind="over_rows", rows=r"^adaptive_paired/", fields=["vs_better_queue"],
         per_row=(">=", 0.9), met=None,
         measured="median {median:.2f}×, worst {worst:.2f}× ({worst_row}); {n_ok} of {n} workloads at ≥ 0.9×"),
    # The controls: two instances of one queue type, measured like the rest.
    dict(section="queues", goal="(resolution) paired rounds between two instances of one queue (job_queue, adaptive), "
         "every workload", kind="over_rows", rows=r"^adaptive_paired/", fields=["twin_job_queue", "twin_adaptive"],
         met=None, measured="{min:.2f}–{max:.2f}×, median {median:.2f}×"),
    *[dict(section="queues", goal=f"memory per queued small job ≤ 64 B at 100K jobs: {q}", kind="value",
           x=[f"memory/{q}/jobs:100000", "bytes_per_job"], met=("<=", 64), measured="{x:.1f} B")
      for q in _MEMORY_QUEUES],

    # -- the typed pool, thread_system_typed_benchmarks (~1 µs jobs, default per-type queue = queue:2)
    *[dict(section="typed pool",
           goal=f"{types} type{'s' if types > 1 else ''} ≥ {limit:.2f}× the standard pool (~1 µs jobs)", kind="ratio",
           x=[f"BM_TypedPoolTypeMix/types:{types}/queue:2/job_ns:1000", _RATE], y=["BM_StandardPool/job_ns:1000", _RATE],
           met=(">=", limit), measured="{r:.2f}×")
      for types, limit in ((1, 0.98), (3, 0.85))],
    dict(section="typed pool", goal="priority accuracy 100%, {n} jobs per type", kind="value",
         each=r"^BM_PriorityScheduling/(?P<n>\d+)$", x=["{row}", "accuracy_pct"], stat="min", met=(">=", 100.0),
         measured="{x:.1f}% (lowest repetition)", requires=[["BM_StandardPool/job_ns:1000", _RATE]]),

    # -- coroutines (issue #21), thread_system_coro_benchmarks
    dict(section="coroutines", goal="`co_await pool.schedule()` round trip ≤ 0.5× Asio's `co_await post(ex, use_awaitable)`",
         kind="ratio", x=["coro_schedule/thread_system", "ns_per_hop"], y=["coro_schedule/boost_asio", "ns_per_hop"],
         met=("<=", 0.5), measured="{x:.0f} vs {y:.0f} ns ({r:.2f}×)"),
    dict(section="coroutines", goal="fib(27), task + when_all: thread-ns per fork ≤ 2× task_group's", kind="ratio",
         x=["coro_fib/thread_system_task", "thread_ns_per_fork"], y=["coro_fib/thread_system_task_group", "thread_ns_per_fork"],
         met=("<=", 2.0), measured="{x:.0f} vs {y:.0f} ns ({r:.2f}×)"),
    dict(section="coroutines", goal="fib(27), task + when_all: thread-ns per fork ≤ 0.3× Asio awaitables'", kind="ratio",
         x=["coro_fib/thread_system_task", "thread_ns_per_fork"], y=["coro_fib/boost_asio", "thread_ns_per_fork"],
         met=("<=", 0.3), measured="{x:.0f} vs {y:.0f} ns ({r:.3f}×)", row="coro_fib/boost_asio"),
    dict(section="coroutines", goal="100 000 concurrent sleep_for(1 ms): memory a sleep adds per suspended task ≤ 256 B",
         kind="value", x=["coro_sleep/thread_system/tasks:100000", "sleep_adds_B"], met=("<=", 256),
         measured="{x:.0f} B"),

    # -- monitoring, thread_system_monitoring_benchmarks
    dict(section="monitoring", goal="latency sampling overhead (default vs off) ≤ 5%", kind="overhead",
         x=["empty_jobs/sampling:default", _RATE], y=["empty_jobs/sampling:off", _RATE], met=("<=", 0.05),
         measured="{pct:+.1f}%"),
]
