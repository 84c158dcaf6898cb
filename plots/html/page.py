"""report.html: the report's charts as plotly figures (hover shows each point's row), filters by model, engine,
hardware and lengths, and the summary tables sortable; it opens from file:// with no network.

plotly.js is written once per folder as plotly.min.js beside the page (about 4.8 MB), and every figure is drawn from
it (`include_plotlyjs=False`); the page itself holds only the figures' data, the tables, and report.js (the filters
and sorting, no charting) with report.css inline. `standalone` (`python -m plots --html-standalone`) puts plotly.js
inside the page instead: one file to attach or mail, about 4.9 MB, that opens anywhere with nothing beside it.
"""

from __future__ import annotations

import html
import json
import os
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import pandas as pd
import plotly.io as pio
from plotly.offline import get_plotlyjs

from plots import data, headline, load, style
from plots.charts import model_and_dtype
import plots.html.rows as row_data
import plots.html.tables as tables
from plots.html.figures import HtmlFigure, batch_figures, stream_figures
from plots.html.headline_figures import headline_figures

HTML_NAME = "report.html"
PLOTLY_JS = "plotly.min.js"
ASSETS = Path(__file__).resolve().parent
PLOT_CONFIG = {"displaylogo": False, "responsive": True, "modeBarButtonsToRemove": ["select2d", "lasso2d"]}


def write_html_report(table: pd.DataFrame, sources: Sequence[Path], out_dir: Path, palette: style.Palette,
                      slo_tpot_ms: Optional[float] = None, answer: str = "", accuracy: str = "",
                      standalone: bool = False) -> Path:
    """report.html (and plotly.min.js, where the folder lacks this version of it and the page is not `standalone`)
    in `out_dir`; returns its path.

    `table` is make_report's: every row, numbers converted, with its series; `slo_tpot_ms` the headline's SLO line
    (headline.slo_per_user); `answer` the best configuration's panel (plots/best/render.py), first after the header;
    `accuracy` the accuracy-against-throughput section (plots/accuracy/report.py), after the summary."""
    table = headline.with_speeds(table)
    figures = headline_figures(table, palette, slo_tpot_ms) + batch_figures(table, palette) + stream_figures(table, palette)
    if not standalone:
        write_plotly_js(Path(out_dir))
    path = Path(out_dir) / HTML_NAME
    page = render_page(table, sources, figures, answer, Path(out_dir), accuracy, standalone)
    path.write_text(page, encoding="utf-8")
    return path


def write_plotly_js(out_dir: Path) -> Path:
    """plotly.js as shipped with the plotly package, written only when the folder's copy differs."""
    path = out_dir / PLOTLY_JS
    script = get_plotlyjs()
    if not (path.is_file() and path.stat().st_size == len(script.encode()) and path.read_text() == script):
        path.write_text(script, encoding="utf-8")
    return path


def render_page(table: pd.DataFrame, sources: Sequence[Path], figures: List[HtmlFigure], answer: str = "",
                out_dir: Path = Path("."), accuracy: str = "", standalone: bool = False) -> str:
    ok = data.plotted(table)
    title = f"{model_and_dtype(ok)}: inference benchmark"
    where = " (in the folder this page was written to)" if standalone else ""  # a mailed page has no folder
    body = [f"<header><h1>{html.escape(title)}</h1>{_sources_html(sources, out_dir)}"
            f'<p class="note">The static charts and every section of the report: <a href="report.md">report.md</a>'
            f"{where}. "
            "Hover a point for its row; click a legend entry to hide a series; drag to zoom.</p></header>",
            answer, _filters_html(table), *_figure_sections(figures),
            '<section><h2>Summary</h2><p class="note">Per series and length pair, at its peak throughput. '
            f"Click a column to sort.</p>{tables.summary_table(table)}</section>", accuracy,
            f"<section><h2>Every point</h2>{tables.points_table(table)}</section>"]
    rows_json = json.dumps(row_data.rows_json(table)).replace("</", "<\\/")
    return "\n".join([
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">',
        f"<title>{html.escape(title)}</title>", _plotly_script(standalone),
        f"<style>\n{(ASSETS / 'report.css').read_text()}</style>\n</head>\n<body>", *body,
        f'<script type="application/json" id="report-rows">{rows_json}</script>',
        f"<script>\n{(ASSETS / 'report.js').read_text()}</script>\n</body>\n</html>\n"])


def _plotly_script(standalone: bool) -> str:
    """plotly.js by reference to the folder's copy, or inside the page (plotly's own to_html inlines it the same
    way: the minified bundle holds no closing script tag)."""
    return f"<script>{get_plotlyjs()}</script>" if standalone else f'<script src="{PLOTLY_JS}"></script>'


def _sources_html(sources: Sequence[Path], out_dir: Path) -> str:
    """Each results folder from the report's own folder (as report.md names it), with its hardware."""
    items = []
    for source in sources:
        csv_path = load.results_csv_path(Path(source))
        hardware = load.manifest_hardware_label(load.read_manifest(csv_path))
        folder = os.path.relpath(csv_path.parent.resolve(), out_dir.resolve())
        items.append(f"<li><code>{html.escape(folder)}</code>"
                     f"{': ' + html.escape(hardware) if hardware else ''}</li>")
    return f'<ul class="sources">{"".join(items)}</ul>'


def _filters_html(table: pd.DataFrame) -> str:
    """A fieldset of checkboxes per filter, every value checked; report.js reads them on each change."""
    values: Dict[str, List[str]] = row_data.filter_values(table)
    sets = []
    for key, label in row_data.FILTERS:
        boxes = "".join(f'<label><input type="checkbox" value="{html.escape(v)}" checked> {html.escape(v)}</label>'
                        for v in values[key])
        sets.append(f'<fieldset data-key="{html.escape(key)}"><legend>{html.escape(label)}</legend>{boxes}</fieldset>')
    return (f'<form id="filters" class="filters">{"".join(sets)}<div class="filter-actions">'
            '<button type="button" id="filters-reset">show all</button> <span id="shown-count"></span></div></form>')


def _figure_sections(figures: List[HtmlFigure]) -> List[str]:
    """The figures under their section headings, in order; each figure's data is inline, plotly.js is not."""
    sections: Dict[str, List[str]] = {}
    for number, item in enumerate(figures, start=1):
        div = pio.to_html(item.figure, include_plotlyjs=False, full_html=False, div_id=f"figure-{number}",
                          config=PLOT_CONFIG)
        sections.setdefault(item.section, []).append(f'<div class="figure" data-kind="{item.kind}">{div}</div>')
    return [f"<section><h2>{html.escape(name)}</h2>{''.join(divs)}</section>" for name, divs in sections.items()]
