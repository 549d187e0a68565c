"""The async logger against spdlog (thread_system_logger_benchmarks)."""

from .common import LIB_LABEL, cell, fmt_ratio, keys_of, oversub, section, values

LOGGER_PEERS = ["spdlog_async", "spdlog_sync"]


@section
def table_logger(ctx, out):
    """The async logger (thread_system::logger) against spdlog, from thread_system_logger_benchmarks."""
    runs, cores = ctx.runs, ctx.cores
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
    if ctx.not_built("logger"):
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
                ratios = [fmt_ratio(ctx.compare("logger latency", "per call", lib, "mean call latency", st[0], ours_mean, False)),
                          fmt_ratio(ctx.compare("logger latency", "per call", lib, "p99 call latency", st[2], ours_p99, False))]
            out.append(f"| {LIB_LABEL[lib]} | " + " | ".join(cell(x, "ns") for x in st) + " | " + " | ".join(ratios) + " |")
        out.append("")
