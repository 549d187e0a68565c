"""The async logger against spdlog (thread_system_logger_benchmarks)."""

from .common import LIB_LABEL, cell, fmt, fmt_ratio, keys_of, oversub, section, values

LOGGER_PEERS = ["spdlog_async", "spdlog_sync", "console"]
LOGGER_FAMILIES = ("logger_single", "logger_devnull", "logger_threads", "logger_burst", "logger_formatted",
                   "logger_latency", "logger_latency_formatted", "logger_writer")
LATENCY_CALLS = [("logger_latency", "123-char text"),
                 ("logger_latency_formatted", "formatted (int, string, int, double)")]
WRITER_KINDS = {0: "123-char text", 1: "formatted (int, string, int, double)"}
WRITER_SINKS = {0: "counts only", 1: "formats the text line"}


@section
def table_logger(ctx, out):
    """The async logger (thread_system::logger) against spdlog, from thread_system_logger_benchmarks."""
    runs, cores = ctx.runs, ctx.cores
    out.append("## Async logger vs spdlog\n")
    out.append("Mirrors the seed's logger tables (*Single-Threaded Performance*, *Multi-Threaded Scalability*, "
               "*Formatted Logging*, *Burst Logging*, *Latency Characteristics*). `thread_system::logger` "
               "(block policy) against spdlog 1.10's `async_logger` (block policy, one worker) and its synchronous "
               "`logger`. Buffers: ours one 1 MiB buffer per producer thread, spdlog's one queue of 8192 messages shared by its producers; counting sinks that neither "
               "format nor write, so neither disk nor line formatting "
               "dominates (the /dev/null row adds a real file sink on both sides). Wall clock from the first call "
               "until the sink has counted every message; 20000 messages per iteration (bursts: one burst, then "
               "wait until written: by `flush()` for Thread System, which then writes them on the caller's thread; "
               "by polling the sink's count for the others, spdlog's async `flush()` only queuing a flush). Cells: median messages/s (min–max) and ratio vs Thread System (> 1: the peer is faster). "
               "*Plain console* is the guides' *Console Output* baseline, no logger at all: each call formats the "
               "line (time, level, text) on the caller with {fmt} and writes it to a line-buffered stdio stream on "
               "/dev/null (one write(2) per line, as on a terminal; a real terminal costs more). "
               "Source and method: `logger/benchmarks/logger_benchmarks.cpp`, docs/LOGGER.md.\n")
    if ctx.not_built("logger"):
        out.append("_thread_system_logger_benchmarks not built ({fmt} missing?): no data._\n")
        return
    if not any(keys_of(runs, fam) for fam in LOGGER_FAMILIES):
        out.append("_No data (logger benchmarks not run in this mode)._\n")
        return
    if runs.context.get("have_spdlog") != "1":
        out.append("spdlog was not found when building (apt-get install libspdlog-dev): Thread System and plain "
                   "console only.\n")
    measured = {lib for fam in LOGGER_FAMILIES for lib, _, _ in keys_of(runs, fam)}
    libs = ["thread_system"] + [l for l in LOGGER_PEERS if l in measured]

    def rate_row(label, family, suffix, config):
        ours = runs.stat(f"{family}/thread_system{suffix}", "items_per_second")
        if ours is None:
            return None
        row = [label, cell(ours, "rate")]
        for lib in libs[1:]:
            st = runs.stat(f"{family}/{lib}{suffix}", "items_per_second")
            r = ctx.compare("logger", config, lib, "msgs/s", st, ours, True)
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
    latency_table(ctx, out, libs)
    writer_table(ctx, out, libs)


def latency_table(ctx, out, libs):
    """Per-call latency of the text and the formatted call (logger_latency/, logger_latency_formatted/)."""
    runs = ctx.runs
    calls = [(fam, label) for fam, label in LATENCY_CALLS if runs.stat(f"{fam}/thread_system", "mean_ns")]
    if not calls:
        return
    timers = [st for fam, _ in calls for lib in libs for st in [runs.stat(f"{fam}/{lib}", "timer_ns")] if st]
    steps = [st for fam, _ in calls for lib in libs for st in [runs.stat(f"{fam}/{lib}", "timer_step_ns")] if st]
    out.append("### Per-call latency (1 thread, buffer never full)\n")
    if timers:
        lo, hi = fmt(min(t[1] for t in timers), "ns"), fmt(max(t[2] for t in timers), "ns")
        timer_range = lo if lo == hi else f"{lo}–{hi}"
        step = ""
        if steps:
            step = f"; its resolution {fmt(max(t[0] for t in steps), 'ns')}, the samples are multiples of it"
        out.append("Each call timed on the producer with the TSC (`lfence; rdtsc; lfence` at both ends, converted to "
                   "ns against steady_clock over the run; steady_clock itself off x86-64), the same timer on every "
                   "side. The timer's own cost, the median of empty timed pairs measured in the same run "
                   f"({timer_range} over the runs below{step}), is **subtracted** from every call (clamped at 0); "
                   "column *timer (subtracted)*. 1000 calls per iteration, then the writer drains untimed; an untimed "
                   "warm-up first writes through each buffer once. Percentiles over the calls of a repetition's "
                   "first 128 iterations, median over repetitions. The formatted call is the throughput table's "
                   "(int, string, int, double). spdlog sync makes the sink call (counting) on the caller. Ratios: "
                   "Thread System / peer (> 1: the peer is faster).\n")
    else:
        out.append("Each call timed with steady_clock on the producer, the clock's own cost included (a run made "
                   "before the TSC timer); 1000 calls per iteration, then the writer drains untimed; percentiles over "
                   "all calls of a repetition, median over repetitions.\n")
    out.append("| call | library | p50 | p99 | p99.9 | mean | timer (subtracted) | p50 ratio | p99.9 ratio | "
               "mean ratio |")
    out.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    fields = ("p50_ns", "p99_ns", "p999_ns", "mean_ns")
    metrics = ("p50 call latency", None, "p99.9 call latency", "mean call latency")
    for fam, label in calls:
        ours = [runs.stat(f"{fam}/thread_system", f) for f in fields]
        for lib in libs:
            st = [runs.stat(f"{fam}/{lib}", f) for f in fields]
            if st[3] is None:
                continue
            if lib == "thread_system":
                ratios = ["1.00×"] * 3
            else:
                ratios = [fmt_ratio(ctx.compare("logger latency", f"per call, {label}", lib, m, p, o, False))
                          for m, p, o in zip(metrics, st, ours) if m]
            timer = runs.stat(f"{fam}/{lib}", "timer_ns")
            out.append(f"| {label} | {LIB_LABEL[lib]} | " + " | ".join(cell(x, "ns") for x in st) + " | "
                       + cell(timer, "ns") + " | " + " | ".join(ratios) + " |")
    out.append("")


def writer_table(ctx, out, libs):
    """The writer thread's cost per record (logger_writer/)."""
    runs = ctx.runs
    keys = keys_of(runs, "logger_writer")
    if not keys:
        return
    wlibs = [l for l in libs if l != "spdlog_sync" and any(lib == l for lib, _, _ in keys)]
    if "thread_system" not in wlibs:
        return
    out.append("### Writer thread: cost per record\n")
    out.append("How fast the background thread turns queued records into sink calls (decode + format + sink call). "
               "Per iteration the sink holds the writer thread on its first record (a gate), the benchmark thread "
               "queues 4000 more records (untimed), opens the gate and times, with steady_clock, until the sink has "
               "counted all 4001: only the writer works in that window. spdlog: its async worker, the same gated "
               "sink (a `base_sink` whose `sink_it_` waits on the gate once, then counts). Sink *counts only*: as the "
               "throughput rows; *formats the text line*: the sink also formats the full output line "
               "(ours: `log_entry::line()`; spdlog: its pattern formatter with a pattern mirroring our line, UTC "
               "time with microseconds, level, thread id, file:line, message). Cells: median ns per record "
               "(min–max) and ratio vs Thread System (> 1: the peer is faster).\n")
    out.append("| record | sink | Thread System | " + " | ".join(LIB_LABEL[l] for l in wlibs[1:]) + " |")
    out.append("|---|---|---:|" + "---:|" * (len(wlibs) - 1))
    for line in sorted({int(p.get("line", 0)) for _, p, _ in keys}):
        for kind in sorted({int(p.get("kind", 0)) for _, p, _ in keys}):
            suffix = f"/kind:{kind}/line:{line}"
            ours = runs.stat(f"logger_writer/thread_system{suffix}", "ns_per_record")
            if ours is None:
                continue
            label, sink = WRITER_KINDS.get(kind, f"kind {kind}"), WRITER_SINKS.get(line, f"line {line}")
            row = [label, sink, cell(ours, "ns")]
            for lib in wlibs[1:]:
                st = runs.stat(f"logger_writer/{lib}{suffix}", "ns_per_record")
                r = ctx.compare("logger writer", f"{label}, sink {sink}", lib, "writer ns per record", st, ours, False)
                row.append("–" if st is None else f"{cell(st, 'ns')} **{fmt_ratio(r)}**")
            out.append("| " + " | ".join(row) + " |")
    out.append("")
