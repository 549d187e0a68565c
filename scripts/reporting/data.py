"""The measurements: Google Benchmark JSON files read into one `Runs`.

Every repetition is kept (aggregates are ignored and recomputed here), keyed by
the benchmark's name without the parts that do not identify a configuration
(`real_time`, `iterations:N`, ...). `Runs.stat(key, field)` gives
(median, min, max, n) over the repetitions; rendering and goals read only that.
"""

import json
import os
import re
import statistics

# Name parts that do not identify a configuration. round:N: the monitoring
# binary's interleaved rounds, which are its repetitions.
NOISE = re.compile(r"^(manual_time|real_time|iterations:\d+|repeats:\d+|round:\d+)$")


def load_json(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


class Runs:
    """Individual repetitions, keyed by the normalised benchmark name."""

    def __init__(self):
        self.reps = {}  # key -> [entry, ...]
        self.errors = {}
        self.context = {}
        self.unreadable = []  # raw files that were missing or not JSON (load_runs)

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
    """A field of one repetition; "real_ns" is real_time converted to ns."""
    if field == "real_ns":
        scale = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}[entry.get("time_unit", "ns")]
        return float(entry["real_time"]) * scale
    v = entry.get(field)
    return None if v is None else float(v)


def load_runs(raw, names):
    """Reads raw/<name> for each name in order into one Runs; returns it and
    {name: path} of the files that held JSON. A file missing or not JSON (a
    binary that crashed mid-run leaves it cut off) is in runs.unreadable."""
    runs = Runs()
    loaded = {}
    for name in names:
        path = os.path.join(raw, name)
        data = load_json(path)
        runs.add(data)
        if data:
            loaded[name] = path
        else:
            runs.unreadable.append(name)
    return runs, loaded
