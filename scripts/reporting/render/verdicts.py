"""Judges the goals of reporting/goals.py on a run (see that file for the
format). Sections read the verdicts through `ctx.verdict(row)` /
`ctx.verdicts.judged_for(row)`; render/summary.py lists them all."""

import re
import statistics

OPS = {">=": (lambda a, b: a >= b, "≥"), "<=": (lambda a, b: a <= b, "≤")}


class Judged:
    """One goal judged on one run."""

    def __init__(self, spec, section, goal, measured, met, row):
        self.spec = spec
        self.section = section
        self.goal = goal
        self.measured = measured
        self.met = met  # True, False, or None (listed, not a goal)
        self.row = row

    @property
    def verdict(self):
        return "n/a" if self.met is None else ("met" if self.met else "**not met**")


def criterion(spec, fmt=""):
    """"≥ 0.95" for met=(">=", 0.95) and fmt ".2f"; None when the goal has no threshold."""
    met = spec.get("met")
    if not isinstance(met, (tuple, list)):
        return None
    op, threshold = met
    return f"{OPS[op][1]} {threshold:{fmt}}"


def expand(spec, runs):
    """[(spec with {row} and the groups filled, the groups)]: one per matching row with `each`, else [(spec, {})]."""
    if "each" not in spec:
        return [(spec, {})]
    rx = re.compile(spec["each"])
    found = []
    for key in runs.reps:
        m = rx.match(key)
        if m:
            groups = m.groupdict()
            order = tuple(int(g) if g is not None and g.isdigit() else 0 for g in m.groups())
            found.append((order, key, groups))
    out = []
    for _, key, groups in sorted(found, key=lambda t: (t[0], t[1])):
        names = dict(groups, row=key)
        filled = dict(spec)
        filled["goal"] = spec["goal"].format(**names)
        for k in ("x", "y"):
            if k in spec:
                filled[k] = [spec[k][0].format(**names), spec[k][1]]
        if "row" in spec:
            filled["row"] = spec["row"].format(**names)
        out.append((filled, names))
    return out


def _median(runs, ref, stat="median"):
    s = runs.stat(ref[0], ref[1])
    if s is None:
        return None
    return {"median": s[0], "min": s[1], "max": s[2]}[stat]


def _judge(spec, runs, names):
    """(measured, met, row) or None when the data is missing."""
    for ref in spec.get("requires", ()):
        if runs.stat(ref[0], ref[1]) is None:
            return None
    kind = spec["kind"]
    met_spec = spec.get("met")
    fields = dict(names)
    row = spec.get("row")
    if kind in ("ratio", "overhead", "best_ratio"):
        y = _median(runs, spec["y"])
        if kind == "best_ratio":
            x, best = None, None
            for label, ref in spec["candidates"].items():
                v = _median(runs, ref)
                if v and (x is None or v > x):
                    x, best = v, label
            fields["best"] = best
        else:
            x = _median(runs, spec["x"])
            row = row or spec["x"][0]
        if not x or not y:
            return None
        r = x / y
        fields.update(x=x, y=y, r=r, x_ns_per_item=1e9 / x, y_ns_per_item=1e9 / y)
        subject = r
        if kind == "overhead":
            overhead = 1.0 - x / y
            fields.update(overhead=overhead, pct=100 * overhead)
            subject = overhead
    elif kind == "value":
        x = _median(runs, spec["x"], spec.get("stat", "median"))
        if x is None:
            return None
        fields["x"] = x
        subject = x
        row = row or spec["x"][0]
    elif kind == "over_rows":
        rx = re.compile(spec["rows"])
        vals = []
        for key in runs.reps:
            if not rx.match(key):
                continue
            for field in spec["fields"]:
                s = runs.stat(key, field)
                if s is not None and s[0] > 0:
                    vals.append((s[0], key))
        if not vals:
            return None
        worst = min(vals)
        per_row = spec.get("per_row")
        n_ok = None
        if per_row:
            test = OPS[per_row[0]][0]
            n_ok = sum(1 for v, _ in vals if test(v, per_row[1]))
        fields.update(n=len(vals), n_ok=n_ok, median=statistics.median(v for v, _ in vals), min=worst[0],
                      max=max(v for v, _ in vals), worst=worst[0], worst_row=worst[1])
        subject = None
    else:
        raise ValueError(f"goal {spec['goal']!r}: unknown kind {kind!r}")

    if met_spec is None:
        met = None
    elif met_spec == "all":
        met = fields["n_ok"] == fields["n"]
    else:
        op, threshold = met_spec
        met = OPS[op][0](subject, threshold)
    return spec["measured"].format(**fields), met, row


class Verdicts:
    """The goals judged on one run, in the order of the goals data."""

    def __init__(self, specs, runs, mode="full"):
        self.specs = list(specs)
        self.judged = []
        self.unjudged = []  # (section, goal) of goals with no data in this run: listed, never dropped silently
        for spec in self.specs:
            any_judged = False
            for filled, names in expand(spec, runs):
                res = _judge(filled, runs, names)
                if res is not None:
                    measured, met, row = res
                    if mode != "full" and filled["kind"] == "over_rows" and filled.get("met") == "all":
                        # "Every workload" means the full run's set; a shorter run has fewer.
                        measured += f" (a {mode} run: only the workloads it ran; the goal is judged on a full run)"
                    self.judged.append(Judged(filled, filled["section"], filled["goal"], measured, met, row))
                    any_judged = True
            if not any_judged and spec.get("met") is not None:
                self.unjudged.append((spec["section"], re.sub(r"\{[^}]*\}", "N", spec["goal"])))

    def judged_for(self, row):
        """The goal judged on benchmark `row`, or None."""
        for j in self.judged:
            if j.row == row:
                return j
        return None

    def verdict(self, row):
        j = self.judged_for(row)
        return None if j is None else j.verdict

    def declared(self, pattern):
        """(match, spec) for every goal (judged or not) whose row matches the regex `pattern`."""
        rx = re.compile(pattern)
        out = []
        for spec in self.specs:
            row = spec.get("row") or (spec["x"][0] if "x" in spec else None)
            m = rx.match(row) if row else None
            if m:
                out.append((m, spec))
        return out
