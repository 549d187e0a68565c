"""The PNG plots (gnuplot). A section asks for one with `ctx.plot(kind, data)`;
the writer registered for that kind here (`@plot_writer("kind")`) writes the
data file and returns the gnuplot script; kind.dat, kind.gp and kind.png land
next to REPORT.md. The section_plots tail section draws them and says which."""

import os
import shutil
import subprocess

from .common import LIB_LABEL, LIBS, job_label, section

GP_HEAD = "set terminal pngcairo size {w},{h} font 'DejaVu Sans,10'\nset output '{png}'\nset grid\nset key below\n"

WRITERS = {}  # kind -> writer(f, data, head, ctx) -> [gnuplot lines]


def plot_writer(kind):
    def register(fn):
        WRITERS[kind] = fn
        return fn

    return register


def gp_escape(s):
    # '~' is gnuplot's enhanced-text overprint operator.
    return s.replace("'", "''").replace("~", "about ")


@plot_writer("throughput")
def plot_throughput(f, data, head, ctx):
    kind, png, cores = "throughput", "throughput.png", ctx.cores
    job_sizes, series = data
    script = [head.format(w=1200, h=900, png=png)]
    script.append(f"set multiplot layout {(len(job_sizes) + 1) // 2},2 title 'Jobs/s vs workers (median, bars: min-max; {cores} cores)'")
    script.append("set logscale x 2\nset logscale y\nset xlabel 'workers'\nset ylabel 'jobs/s'\nset xrange [0.8:10]")
    idx = 0
    for j in job_sizes:
        plotcmds = []
        for lib in LIBS:
            pts = series.get((j, lib))
            if not pts:
                continue
            f.write(f"# {j} {lib}\n")
            for w, s in pts:
                f.write(f"{w} {s[0]} {s[1]} {s[2]}\n")
            f.write("\n\n")
            plotcmds.append(f"'{kind}.dat' index {idx} using 1:2:3:4 with yerrorlines title '{gp_escape(LIB_LABEL[lib])}'")
            idx += 1
        script.append(f"set title '{gp_escape(job_label(j))}'")
        script.append("plot " + ", ".join(plotcmds) if plotcmds else "")
    script.append("unset multiplot")
    return script


@plot_writer("latency")
def plot_latency(f, data, head, ctx):
    kind, png = "latency", "latency.png"
    script = [head.format(w=1000, h=600, png=png)]
    script.append("set title 'Submit-to-start latency on an idle pool (median of repetitions)'")
    script.append("set style data histogram\nset style histogram clustered gap 1\nset style fill solid 0.8 border -1")
    script.append("set logscale y\nset ylabel 'microseconds (log)'\nset xtics rotate by -20")
    for lib, (p50, p95, p99) in data:
        f.write(f"\"{LIB_LABEL[lib]}\" {p50} {p95} {p99}\n")
    script.append(f"plot '{kind}.dat' using 2:xtic(1) title 'p50', '' using 3 title 'p95', '' using 4 title 'p99'")
    return script


@plot_writer("scaling")
def plot_scaling(f, data, head, ctx):
    kind, png, cores = "scaling", "scaling.png", ctx.cores
    j, series = data
    script = [head.format(w=1000, h=600, png=png)]
    script.append(f"set title 'Scaling efficiency, {gp_escape(job_label(j))}: speedup / min(workers, {cores} cores)'")
    script.append("set logscale x 2\nset xlabel 'workers'\nset ylabel 'efficiency %'\nset yrange [0:*]\nset xrange [0.8:10]")
    plotcmds = []
    for idx, (lib, pts) in enumerate(series):
        for w, e in pts:
            f.write(f"{w} {e}\n")
        f.write("\n\n")
        plotcmds.append(f"'{kind}.dat' index {idx} using 1:2 with linespoints title '{gp_escape(LIB_LABEL[lib])}'")
    script.append("plot " + ", ".join(plotcmds))
    return script


@plot_writer("heatmap")
def plot_heatmap(f, data, head, ctx):
    kind, png = "heatmap", "heatmap.png"
    libs, ps, ws, heat = data
    cols = 2 if len(libs) > 1 else 1
    rows = (len(libs) + cols - 1) // cols
    script = [head.format(w=1100, h=450 * rows, png=png)]
    script.append(f"set multiplot layout {rows},{cols} title 'Empty jobs: M jobs/s by producers x workers'")
    script.append("unset grid\nset view map\nset palette rgbformulae 22,13,-31\nset xlabel 'workers'\nset ylabel 'producers'")
    script.append("set xtics (" + ", ".join(f"'{w}' {i}" for i, w in enumerate(ws)) + ")")
    script.append("set ytics (" + ", ".join(f"'{p}' {i}" for i, p in enumerate(ps)) + ")")
    script.append(f"set xrange [-0.5:{len(ws) - 0.5}]\nset yrange [-0.5:{len(ps) - 0.5}]")
    vmax = max(heat.values()) / 1e6 if heat else 1
    script.append(f"set cbrange [0:{vmax}]")
    for idx, lib in enumerate(libs):
        for pi, p in enumerate(ps):
            for wi, w in enumerate(ws):
                v = heat.get((lib, p, w))
                f.write(f"{wi} {pi} {'NaN' if v is None else v / 1e6}\n")
        f.write("\n\n")
        script.append(f"set title '{gp_escape(LIB_LABEL[lib])}'")
        script.append(f"plot '{kind}.dat' index {idx} using 1:2:3 with image notitle, "
                      f"'' index {idx} using 1:2:(sprintf('%.2f', $3)) with labels notitle")
    script.append("unset multiplot")
    return script


def make_plots(ctx):
    """Draws ctx.plots into ctx.outdir; returns the sentence the report prints about them."""
    outdir = ctx.outdir
    gnuplot = shutil.which("gnuplot")
    if not gnuplot:
        return "gnuplot not found (apt-get install gnuplot-nox): plots skipped."
    # pngcairo is in gnuplot-nox; fall back to the plain png terminal.
    terms = subprocess.run([gnuplot, "-e", "set terminal"], capture_output=True, text=True, check=False)
    head = GP_HEAD if "pngcairo" in (terms.stdout + terms.stderr) else GP_HEAD.replace("pngcairo", "png").replace(" font 'DejaVu Sans,10'", "")
    made, failed = [], []
    for kind, data in ctx.plots:
        dat = os.path.join(outdir, f"{kind}.dat")
        gp = os.path.join(outdir, f"{kind}.gp")
        png = f"{kind}.png"
        with open(dat, "w", encoding="utf-8") as f:
            script = WRITERS[kind](f, data, head, ctx)
        with open(gp, "w", encoding="utf-8") as g:
            g.write("\n".join(script) + "\n")
        res = subprocess.run([gnuplot, os.path.basename(gp)], cwd=outdir, capture_output=True, text=True, check=False)
        if res.returncode == 0 and os.path.exists(os.path.join(outdir, png)):
            made.append(png)
        else:
            failed.append(f"{png}: {res.stderr.strip()[:200]}")
    msg = f"Plots made with {gnuplot}: {', '.join(made) or 'none'}."
    if failed:
        msg += " Failed: " + "; ".join(failed)
    return msg


@section(place="tail")
def section_plots(ctx, out):
    plot_msg = make_plots(ctx)
    ctx.plot_msg = plot_msg
    out.append("## Plots\n")
    out.append(plot_msg + " The .dat and .gp files next to the PNGs regenerate them (`cd report && gnuplot latency.gp`).\n")
