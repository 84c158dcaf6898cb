"""The request-stream scenario's charts (charts.py) and report section (report.py), over the selections of stream
rows both read (selections.py)."""
