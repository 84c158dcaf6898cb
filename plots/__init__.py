"""Charts and a markdown report from benchmark.py results folders (results.csv + manifest.json, and
requests.csv for stream points; nothing else).

    from plots.report import make_report       # raises plots.errors.PlotError when there is nothing to plot
    report_md = make_report([Path("results/run")], Path("results/run/plots"))

Nothing is imported here: a chart module importing a sibling does not pull in the whole report.
"""
