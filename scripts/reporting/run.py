"""Running: invokes the benchmark binaries of a build and leaves their raw
JSON (one file per run), the console log and run_info.json in OUT/raw/.

Nothing here renders: rendering reads the files back (reporting.render), so a
report can be rendered again from the same raw data (`--render-only`).
A new binary: one entry in BINARIES, a filter per mode in MODES, and one step
in `plan()`.
"""

import json
import os
import re
import subprocess
import sys
import time

MODES = {
    # repetitions, min_time (s), per-binary filters (None = everything)
    "smoke": dict(
        reps=1,
        min_time=0.01,
        core=r"^BM_(PoolCreateStartStop/(1|2)/|SubmitToStartLatency/queued:(0|1000)/|IdleLatency|"
        r"InjectorInPool/queue:(0|3|4)/workers:2/tasks:10000/|InjectorProducers/queue:[0-4]/producers:(1|8)/|"
        r"InjectorLatency/queue:[0-4]/queued:0/|SubmitBatchOverhead/batch:(1|1000)/|"
        r"WorkerInjectorBatch/batch:(1|32)/job_ns:0/|WaitingJobs/workers:(2|16)/)",
        queue=r"^(latency_(enqueue|dequeue|pair)/|pc/[^/]+/P:(1|2)/C:[0-9]+/ops:10000/|memory/[^/]+/jobs:10000/|"
        r"adaptive_paired/(pair/|pc/P:2/C:2/ops:10000/))",
        report=r"^(throughput|latency|create/[^/]+/workers:(1|2)/|long_jobs|million|startup|alloc_jobs)",
        logger=r"^logger_(single/[^/]+/chars:123|threads/[^/]+/threads:4|latency|latency_formatted|"
        r"writer/[^/]+/kind:[01]/line:0)/",
        typed=r"^BM_(StandardPool/job_ns:1000/|TypedPoolTypeMix/types:(1|3)/queue:2/job_ns:1000/|EnqueueWhilePaused/|"
        r"PriorityScheduling/100/|TypedRouting(Universal)?/50/|RoutingStandardPool/)",
        control=r"^BM_(TokenIsCancelled|RegisterUnregister|ThreadBaseStartStop|WakeInterval|SpinLockScoped|MutexScoped|"
        r"ServiceResolve|CancelJobs/(plain|token)/|Backpressure/(unbounded|block_1024)/job_ns:0/|"
        r"Resize(Grow|Shrink)/|TimerLateness1K/via_pool:0/)",
        coro=r"^coro_(schedule|fib)/",
        coro_isolated=None,
        # the monitoring binary repeats by interleaved rounds (--rounds) instead of repetitions
        monitoring=r"^empty_jobs/sampling:(off|default)/",
        monitoring_rounds=2,
        monitoring_min_time=0.01,
    ),
    "quick": dict(
        reps=5,
        min_time=0.02,
        core=r"^BM_(PoolCreateStartStop|SubmitToStartLatency|NestedFib|ParallelFor|ParallelReduce|IdleLatency|ExternalSubmit|"
        r"GroupFromOutside|GroupOfWorkFromOutside|"
        r"InjectorInPool/queue:[0-9]+/workers:(2|8)/tasks:(10000|100000)/|InjectorProducers/|InjectorLatency/|"
        r"SubmitBatchOverhead/|"
        r"WorkerInjectorBatch/batch:(1|16|64)/|WaitingJobs/)",
        queue=r"^(latency_(enqueue|dequeue|pair)/|batch/[^/]+/batch:128/|pc/[^/]+/P:[0-9]+/C:[0-9]+/ops:10000/|"
        r"contention/[^/]+/real_time/threads:(1|2|4)$|memory/[^/]+/jobs:100000/|"
        r"adaptive_paired/(pair/|pc/P:[0-9]+/C:[0-9]+/ops:10000/|contention/threads:(1|2|4)/))",
        report=r"^(throughput|latency|create|long_jobs|million|startup|alloc_jobs)/",
        logger=r"^logger_",
        typed=None,
        control=None,
        coro=r"^coro_(schedule|fib)/",
        coro_isolated=r"^coro_sleep/",
        monitoring=r"^(empty_jobs/|BM_histogram_record$)",
        monitoring_rounds=11,
        monitoring_min_time=0.1,
    ),
    "full": dict(
        reps=5,
        min_time=0.2,
        core=None,
        queue=None,
        report=r"^(throughput|latency|create|long_jobs|million|startup|alloc_jobs)/",
        logger=r"^logger_",
        typed=None,
        control=None,
        coro=r"^coro_(schedule|fib)/",
        coro_isolated=r"^coro_sleep/",
        monitoring=r"^(empty_jobs/|BM_histogram_record$)",
        monitoring_rounds=15,
        monitoring_min_time=0.2,
    ),
}

# Benchmarks that measure memory or idle CPU: one process per repetition
# (the report binary's here, the coroutine binary's per mode: coro_isolated).
ISOLATED = r"^(memory_per_worker|idle_cpu|queued_bytes|startup_memory)/"

ANSI = re.compile(r"\x1b\[[0-9;]*m")

# key -> the binary's path in the build directory. The keys name the binaries
# in the report ("typed" not built: the typed tables say so).
BINARIES = {
    "core": ("benchmarks", "thread_system_benchmarks"),
    "queue": ("benchmarks", "queues", "thread_system_queue_benchmarks"),
    "report": ("benchmarks", "report", "thread_system_report_benchmarks"),
    "logger": ("logger", "benchmarks", "thread_system_logger_benchmarks"),
    "typed": ("benchmarks", "typed", "thread_system_typed_benchmarks"),
    "control": ("benchmarks", "control", "thread_system_control_benchmarks"),
    "coro": ("benchmarks", "coro", "thread_system_coro_benchmarks"),
    "monitoring": ("monitoring", "thread_system_monitoring_benchmarks"),
}

# The raw files a render reads besides the benchmarks' JSON.
RUN_INFO = "run_info.json"
LOG = "benchmarks.log"


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



class Step:
    """One process: a binary, its filter and repetitions, and the JSON file it writes."""

    def __init__(self, label, key, binary, flt, reps, json_name, interleave, env, min_time, extra=()):
        self.label = label
        self.key = key  # the BINARIES key
        self.binary = binary
        self.flt = flt
        self.reps = reps
        self.json_name = json_name
        self.interleave = interleave
        self.env = env
        self.min_time = min_time
        self.extra = tuple(extra)


def binaries(build):
    """BINARIES key -> absolute path, and the keys whose binary is not built."""
    paths = {k: os.path.join(build, *parts) for k, parts in BINARIES.items()}
    missing = [k for k, b in paths.items() if not os.access(b, os.X_OK)]
    return paths, missing


def environments(mode):
    """(env, env_shared): the benchmarks' environment, and the one for the shared runs."""
    env = dict(os.environ)
    env["THREAD_SYSTEM_REPORT_MODE"] = mode
    # In the shared runs libgomp's idle spinning would steal cores from the
    # library measured next; the isolated idle-CPU runs keep the caller's setting.
    env_shared = dict(env)
    env_shared.setdefault("OMP_WAIT_POLICY", "passive")
    return env, env_shared


def plan(mode, paths, missing):
    """The runs of a mode, in order; the order is also the order rendering loads them."""
    cfg = MODES[mode]
    env, env_shared = environments(mode)
    mt = cfg["min_time"]
    steps = []

    def shared(key, json_name):
        if key not in missing:
            label = os.path.basename(paths[key])
            steps.append(Step(label, key, paths[key], cfg[key], cfg["reps"], json_name, True, env_shared, mt))

    shared("core", "core.json")
    shared("queue", "queue.json")
    shared("report", "peers.json")
    # One process per repetition, not only per benchmark: the second
    # repetition in a process would find the stacks of the first one's
    # threads in glibc's cache (already resident), a peer's process-wide pool
    # already created or freed coroutine frames, and measure ~0 bytes. Round
    # r runs every isolated benchmark once, so the repetitions interleave.
    isolated = []
    for key, flt in (("report", ISOLATED), ("coro", cfg["coro_isolated"])):
        if flt is not None and key not in missing:
            isolated += [(key, name) for name in list_tests(paths[key], flt, env)]
    for r in range(cfg["reps"]):
        for i, (key, name) in enumerate(isolated):
            flt = "^" + re.escape(name) + "$"
            steps.append(Step(name, key, paths[key], flt, 1, f"isolated_{i:03d}_r{r}.json", False, env, mt))
    shared("logger", "logger.json")
    shared("typed", "typed.json")
    shared("control", "control.json")
    shared("coro", "coro.json")
    if "monitoring" not in missing:
        # Its rounds (off, default, every job, off, ...) are the repetitions.
        steps.append(Step("thread_system_monitoring_benchmarks", "monitoring", paths["monitoring"], cfg["monitoring"], 1,
                          "monitoring.json", False, env_shared, cfg["monitoring_min_time"],
                          (f"--rounds={cfg['monitoring_rounds']}",)))
    return steps


def run(mode, steps, raw):
    """Runs every step, writing raw/<json_name>, raw/benchmarks.log and raw/run_info.json."""
    counts = [len(list_tests(s.binary, s.flt, s.env, s.extra)) * s.reps for s in steps]
    total = sum(counts)
    print(f"mode {mode}: {len(steps)} runs, {total} benchmark repetitions; raw output in {raw}/", flush=True)
    progress = Progress(total)
    started = time.monotonic()
    written = []
    failed = []  # {"file", "binary", "rc"} of every run that exited non-zero
    with open(os.path.join(raw, LOG), "w", encoding="utf-8") as log:
        for step, n in zip(steps, counts):
            path = os.path.join(raw, step.json_name)
            # A file left by an earlier run must not be read as this run's.
            if os.path.exists(path):
                os.remove(path)
            if n == 0:
                continue
            rc = run_binary(step.binary, step.flt, step.reps, step.min_time, path, log, step.env, progress,
                            step.interleave, step.extra)
            if rc != 0:
                failed.append({"file": step.json_name, "binary": os.path.basename(step.binary), "rc": rc})
            written.append(step.json_name)
    progress.finish()
    wall = time.monotonic() - started
    info = {
        "mode": mode,
        "wall_s": wall,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "load_average": "{:.2f} {:.2f} {:.2f}".format(*os.getloadavg()),
        "omp_wait_policy": environments(mode)[1].get("OMP_WAIT_POLICY"),
        "files": written,
        "failed": failed,
    }
    with open(os.path.join(raw, RUN_INFO), "w", encoding="utf-8") as f:
        json.dump(info, f)
    return info


def raw_files(steps, info):
    """The JSON files of a run, in the order they were run: run_info's list
    when it has one, else the plan's (a run made before the list existed)."""
    if info and isinstance(info.get("files"), list):
        return list(info["files"])
    return [s.json_name for s in steps]
