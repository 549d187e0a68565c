#!/usr/bin/env python3
"""monitoring.prometheus_scrape: a real Prometheus server scrapes the HTTP
example (monitoring/examples/prometheus_http_server.cpp) and its query API
returns the pool's counters and a percentile computed from the histogram.

    prometheus_scrape_test.py EXAMPLE_PROGRAM PROMETHEUS_PROGRAM WORK_DIR

Both servers listen on 127.0.0.1 only, on free ports; Prometheus keeps its
storage in a fresh temporary directory under WORK_DIR. Every wait has a
deadline (the whole test stays well under a minute when it passes), and both
processes are killed on every way out, including SIGTERM from ctest.
"""

import json
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

START_DEADLINE_S = 30  # Prometheus ready, the example serving
SCRAPE_DEADLINE_S = 45  # the counters visible through the query API


def free_port():
    """A port nothing listens on now (Prometheus cannot report the one it
    bound, so the small race with other processes is retried below)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(url, timeout=2.0):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.read().decode("utf-8", "replace")


def query(base, promql):
    """Instant query; the list of (labels, value) of the result vector."""
    url = base + "/api/v1/query?" + urllib.parse.urlencode({"query": promql})
    _, body = http_get(url)
    doc = json.loads(body)
    if doc.get("status") != "success":
        raise RuntimeError(f"query {promql!r}: {body}")
    return [(r["metric"], float(r["value"][1])) for r in doc["data"]["result"]]


def stop(proc):
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def main():
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    example, prometheus, work_root = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    work_root.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="prometheus-", dir=work_root))
    exporter = server = log = None

    def on_term(signum, _frame):
        raise SystemExit(f"killed by signal {signum}")

    signal.signal(signal.SIGTERM, on_term)
    try:
        # The example picks its own free port and prints it first.
        exporter = subprocess.Popen([example, "--port", "0"], stdout=subprocess.PIPE, text=True)
        first = exporter.stdout.readline()
        if "127.0.0.1:" not in first:
            raise RuntimeError(f"the example did not start: {first!r}")
        exporter_port = int(first.split("127.0.0.1:")[1].split("/")[0])
        print(f"example: {first.strip()}", flush=True)

        config = work / "prometheus.yml"
        config.write_text(
            "global:\n"
            "  scrape_interval: 1s\n"
            "  scrape_timeout: 1s\n"
            "scrape_configs:\n"
            "  - job_name: thread_system\n"
            "    static_configs:\n"
            f"      - targets: ['127.0.0.1:{exporter_port}']\n"
        )
        log = open(work / "prometheus.log", "w")
        base = None
        for attempt in range(3):
            port = free_port()
            server = subprocess.Popen(
                [
                    prometheus,
                    f"--config.file={config}",
                    f"--storage.tsdb.path={work / 'data'}",
                    f"--web.listen-address=127.0.0.1:{port}",
                    "--log.level=warn",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
            deadline = time.monotonic() + START_DEADLINE_S
            while time.monotonic() < deadline and server.poll() is None:
                try:
                    if http_get(f"http://127.0.0.1:{port}/-/ready")[0] == 200:
                        base = f"http://127.0.0.1:{port}"
                        break
                except (urllib.error.URLError, ConnectionError, OSError):
                    pass
                time.sleep(0.2)
            if base:
                break
            stop(server)
            print(f"prometheus did not come up on port {port} (attempt {attempt + 1})", flush=True)
        if not base:
            raise RuntimeError("prometheus never became ready:\n" + (work / "prometheus.log").read_text())
        print(f"prometheus: ready at {base}", flush=True)

        # Poll until a scrape has landed: the pool's counters through PromQL.
        selector = '{job="thread_system",pool="demo"}'
        deadline = time.monotonic() + SCRAPE_DEADLINE_S
        executed = []
        while time.monotonic() < deadline:
            executed = query(base, "thread_system_pool_jobs_executed_total" + selector)
            if executed and executed[0][1] > 0:
                break
            time.sleep(0.5)
        if not executed or executed[0][1] <= 0:
            _, targets = http_get(base + "/api/v1/targets")
            raise RuntimeError(f"no scraped counter within {SCRAPE_DEADLINE_S} s; targets: {targets}")

        up = query(base, 'up{job="thread_system"}')
        accepted = query(base, "thread_system_pool_jobs_accepted_total" + selector)
        failed = query(base, "thread_system_pool_jobs_failed_total" + selector)
        waits = query(base, "thread_system_pool_job_wait_seconds_count" + selector)
        p99 = query(base, "histogram_quantile(0.99, thread_system_pool_job_wait_seconds_bucket" + selector + ")")
        print(f"up={up} executed={executed[0][1]} accepted={accepted} failed={failed} "
              f"wait_count={waits} wait_p99={p99}", flush=True)
        checks = [
            (up and up[0][1] == 1.0, "up == 1"),
            (accepted and accepted[0][1] >= executed[0][1], "accepted >= executed"),
            (failed and failed[0][1] >= 0.0, "failed counter present"),
            (waits and waits[0][1] > 0.0, "the wait histogram has samples"),
            (p99 and p99[0][1] > 0.0 and p99[0][1] == p99[0][1], "histogram_quantile(0.99) is a positive number"),
        ]
        bad = [what for ok, what in checks if not ok]
        if bad:
            raise RuntimeError("failed: " + ", ".join(bad))
        print("monitoring.prometheus_scrape: passed", flush=True)
        return 0
    except RuntimeError as e:
        print(f"monitoring.prometheus_scrape: {e}", file=sys.stderr)
        if log is not None:
            log.flush()
            print("prometheus log:\n" + (work / "prometheus.log").read_text(), file=sys.stderr)
        return 1
    finally:
        stop(server)
        stop(exporter)
        if log is not None:
            log.close()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
