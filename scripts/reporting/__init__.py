"""The benchmark report behind scripts/report.py, in three parts:

  run.py      running: which binaries, filters and repetitions per mode; runs
              them and leaves raw JSON, the log and run_info.json in OUT/raw/
  data.py     the measurements: raw JSON read back into Runs (median, min, max, n)
  goals.py    the performance goals, as data
  render/     rendering: one module per group of sections, plots, goal verdicts

Standard library only (gnuplot for the plots).
"""
