"""What every section shares: the render context, the section registry,
formatting, and the helpers that read benchmark keys.

A section is a function `f(ctx, out)` that appends Markdown lines to `out`,
decorated with `@section` (or `@section(place=...)`); sections appear in the
report in registration order (module import order in render/__init__.py, then
definition order in the module).
"""

import os
import re

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
    "console": "plain console (stdio)",
}
LIB_PACKAGE = {"onetbb": "libtbb-dev", "boost_asio": "libboost-dev", "openmp": "g++ (libgomp)"}
LIB_CONTEXT = {"onetbb": "have_onetbb", "boost_asio": "have_boost_asio", "openmp": "have_openmp"}

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


# ---------------------------------------------------------------------------
# the section registry
# ---------------------------------------------------------------------------

# Where a section goes: "head" (title, machine), "summary" (after the machine;
# rendered after the body because it lists what the body recorded), "body"
# (the tables), "tail" (after the plots are made).
PLACES = ("head", "summary", "body", "tail")
SECTIONS = []  # (place, function), in registration order


def section(fn=None, *, place="body"):
    """Registers a section function `f(ctx, out)`."""
    if place not in PLACES:
        raise ValueError(f"unknown place {place!r}")

    def register(f):
        SECTIONS.append((place, f))
        return f

    return register(fn) if fn is not None else register


# ---------------------------------------------------------------------------
# the context a section renders from
# ---------------------------------------------------------------------------


def problems_of(info, runs):
    """One line per run whose figures are missing or incomplete."""
    problems = []
    for f in (info or {}).get("failed") or []:
        problems.append(f"`{f['binary']}` exited with status {f['rc']}: the rows of `raw/{f['file']}` are missing "
                        "or incomplete (see `raw/benchmarks.log`)")
    failed_files = {f["file"] for f in (info or {}).get("failed") or []}
    for name in getattr(runs, "unreadable", []):
        if name not in failed_files:
            problems.append(f"`raw/{name}` is missing or not JSON: none of its rows are in this report")
    return problems


class Context:
    """The data of one render and what sections record for the summary."""

    def __init__(self, runs, mode, cfg, build, outdir, paths, missing, info, queue_json, cores, omp_wait_policy):
        self.runs = runs
        self.mode = mode
        self.cfg = cfg  # the mode's settings (reporting.run.MODES)
        self.build = build
        self.outdir = outdir
        self.paths = paths  # binary key -> path
        self.missing = missing  # keys of the binaries not built
        self.info = info  # run_info.json of the run
        self.queue_json = queue_json  # raw queue benchmarks' JSON, or None
        self.cores = cores
        self.omp_wait_policy = omp_wait_policy
        self.plots = []  # (kind, data): render/plots.py draws them
        self.comparisons = []  # peer vs Thread System: "Where Thread System loses"
        self.slower = []  # variant vs its baseline where the variant is slower
        self.verdicts = None  # render/verdicts.Verdicts: the goals judged on this run
        self.plot_msg = None  # what render/plots.py says about the plots it drew
        # Runs whose figures are missing or incomplete: a binary that exited
        # non-zero (run_info's "failed"), a raw file that is not JSON.
        self.problems = problems_of(info, runs)

    def not_built(self, key):
        return key in self.missing

    def plot(self, kind, data):
        self.plots.append((kind, data))

    def compare(self, table, config, lib, metric, peer, ours, higher_better):
        """Peer vs Thread System (> 1: the peer is better), recorded for the losses list."""
        r = ratio(peer, ours, higher_better)
        if r is not None:
            # clear: the peer's whole range is better than ours
            if peer[3] < 2 or ours[3] < 2:
                clear = None  # one repetition: no spread to compare
            elif higher_better:
                clear = peer[1] > ours[2]
            else:
                clear = peer[2] < ours[1]
            self.comparisons.append(dict(table=table, config=config, lib=lib, metric=metric, peer=peer, ours=ours, r=r,
                                         clear=clear))
        return r

    def cost_ratio(self, section, what, variant, base, higher_better):
        """variant cost / base cost (> 1: the variant is slower), recorded when > 1."""
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
            self.slower.append(dict(section=section, what=what, r=r, clear=clear))
        return r

    def verdict(self, row):
        """"met", "**not met**" or "n/a" for the goal judged on benchmark `row`, None if none was."""
        return self.verdicts.verdict(row) if self.verdicts is not None else None


# ---------------------------------------------------------------------------
# formatting
# ---------------------------------------------------------------------------


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


def fmt_pct(r):
    return "n/a" if r is None else f"{(r - 1) * 100:+.1f}%"


def ns_per_item(st):
    """items_per_second stat -> ns per item stat (min/max swap)."""
    if st is None or st[0] == 0 or st[1] == 0 or st[2] == 0:
        return None
    return (1e9 / st[0], 1e9 / st[2], 1e9 / st[1], st[3])


def ordinal(n):
    """1st, 2nd, 3rd, 4th, ..., 11th-13th, ..., 21st, 32nd."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def clear_label(clear):
    return {True: "clear", False: "overlapping", None: "n=1"}[clear]


# ---------------------------------------------------------------------------
# benchmark keys: "<family>/<library>/<param>:<value>/..."
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



def per_workers_table(ctx, out, libs, ws, prefix, counter, unit, table, config_fmt, metric, header_ratio=False):
    """One row per worker count, one column per library; lower is better.
    Peers' cells carry their ratio vs Thread System (recorded for the losses list)."""
    runs = ctx.runs
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
                r = ctx.compare(table, config_fmt.format(w=w), lib, metric, st, ours, False)
                row.append(f"{cell(st, unit)} {fmt_ratio(r)}")
        out.append("| " + " | ".join(row) + " |")
    out.append("")


def matching(runs, pattern):
    """(match, key) for every key matching the regex `pattern`, in the order of the runs."""
    rx = re.compile(pattern)
    return [(m, key) for key in runs.reps for m in [rx.match(key)] if m]
