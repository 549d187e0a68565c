"""Rendering: REPORT.md and its plots from a run's measurements (a Context).

The report is the sections registered with `@section` (render/common.py), in
the order of MODULES below, then of their definition in each module.

To add a table: write `@section def table_x(ctx, out)` in the module it belongs
to (or in a new module, added to MODULES). Read ctx.runs.stat(row, field);
record peer comparisons with ctx.compare, variant-vs-baseline costs with
ctx.cost_ratio, plots with ctx.plot (a writer in render/plots.py). Goals go in
reporting/goals.py; a table shows a goal's verdict with ctx.verdict(row).
"""

from ..goals import GOALS
from . import control, coro, document, logger, monitoring, peers, plots, queues, scheduler, summary, typed, workloads
from .common import PLACES, SECTIONS, Context
from .verdicts import Verdicts

# The section modules, in the order their sections appear in the report
# (importing a module registers its sections; this tuple fixes the order).
MODULES = (document, peers, workloads, scheduler, queues, logger, typed, control, coro, monitoring, summary, plots)
__all__ = ["Context", "MODULES", "render"]

# The body first (it records comparisons, costs and plots), then the summary
# that lists them, then the head; the tail (plots) last.
RENDER_ORDER = ("body", "summary", "head", "tail")


def render(ctx, goals=GOALS):
    """The Markdown of the report (plots are drawn into ctx.outdir on the way)."""
    ctx.verdicts = Verdicts(goals, ctx.runs, mode=ctx.mode)
    rank = {m.__name__: i for i, m in enumerate(MODULES)}
    ordered = sorted(enumerate(SECTIONS), key=lambda t: (rank[t[1][1].__module__], t[0]))
    parts = {place: [] for place in PLACES}
    for place in RENDER_ORDER:
        for _, (where, fn) in ordered:
            if where == place:
                fn(ctx, parts[place])
    lines = [line for place in PLACES for line in parts[place]]
    return "\n".join(lines) + "\n"
