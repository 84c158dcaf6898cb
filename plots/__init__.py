"""Charts and a markdown report from benchmark.py results folders (results.csv + manifest.json, and
requests.csv for stream points; nothing else).

    from plots import make_report, PlotError
    report_md = make_report([Path("results/run")], Path("results/run/plots"))
"""

from plots.errors import PlotError
from plots.report import make_report

__all__ = ["PlotError", "make_report"]
