"""report.html: the report's interactive page (plotly), written beside report.md with plotly.min.js once per folder.

page.py assembles the page; figures.py and headline.py build the plotly figures, rows.py what each result row shows
(hover text, filter keys), tables.py the sortable tables, and report.js the page's filters and sorting.
"""

from plots.html.page import write_html_report

__all__ = ["write_html_report"]
