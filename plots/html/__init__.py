"""report.html: the report's interactive page (plotly), written beside report.md with plotly.min.js once per folder.

page.py assembles the page (`write_html_report`, which plots/report.py calls); figures.py and headline_figures.py
build the plotly figures, rows.py what each result row shows (hover text, filter keys), tables.py the sortable
tables, and report.js the page's filters and sorting. This file imports none of them, so the modules can import
each other without a loop through the package.
"""
