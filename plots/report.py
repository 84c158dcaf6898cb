"""`make_report`: results folders in, charts and a report.md out. The one entry point of the package."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import pandas as pd

from harness.files import writable_folder
from harness.measure.columns.names import R
from harness.measure.manifest import HARNESS_PACKAGES
from plots import batch_charts, data, headline_chart, load, roofline_charts, style
from plots.accuracy import charts as accuracy_charts
from plots.accuracy.report import accuracy_html, accuracy_lines
from plots.best import render as best
from plots.best.targets import resolve as resolve_targets
from plots.charts import Chart, ChartContext, render_jobs
from plots.data import fmt
from plots.errors import PlotError
from plots.html.page import write_html_report
from plots.load import BATCH, STREAM
from plots.grid.report import grid_lines
from plots.memory_report import memory_lines
from plots.quantization import charts as quantization_charts
from plots.quantization.report import quantization_lines
from plots.speculative import charts as speculative_charts
from plots.speculative.report import spec_lines
from plots.stream import charts as stream_charts
from plots.stream.adapters import adapter_lines
from plots.stream.images import image_lines
from plots.stream.report import stream_lines

FORMATS = ("png", "svg", "pdf")
# Markdown viewers (GitHub included) show PNG and SVG inline but only link a PDF.
EMBEDDABLE = ("png", "svg")
REPORT_NAME = "report.md"


def make_report(sources: List[Path], out_dir: Path, series: Optional[List[str]] = None,
                where: Optional[Dict[str, str]] = None, formats: Tuple[str, ...] = ("png",),
                slo_tpot_ms: Optional[float] = None, targets: Optional[Dict[str, Optional[float]]] = None,
                html_standalone: bool = False) -> Path:
    """Draw every chart of the results in `sources` into `out_dir` and write report.md; returns its path. `targets`:
    --best's flags, over the sweeps' own targets, for report.md's first section (plots/best/); `html_standalone`:
    report.html with plotly.js inside it, one file to share (plots/html/page.py).

    Raises PlotError (one-line message) for a missing folder or results.csv, an unknown --series or
    --where column, or results with no `ok` point.
    """
    formats = check_formats(formats.split(",") if isinstance(formats, str) else formats)
    sources = [sources] if isinstance(sources, (str, Path)) else list(sources)
    table = data.results_table(sources, series, where)
    batch_sizes = data.of_scenario(table, BATCH)[R.batch_size].dropna().astype(int)  # none for streams
    palette = style.Palette.build(data.series_order(table), batch_sizes)
    out_dir = Path(out_dir)
    stated = resolve_targets(sources, targets or {})
    slo_tpot_ms = slo_tpot_ms or stated[0].tpot_ms  # the target drawn on the headline chart unless told otherwise
    try:
        writable_folder(out_dir, "--out")  # once the results are known to be readable
        ctx = ChartContext(table, palette, out_dir, formats, load.load_requests(sources), slo_tpot_ms)
        charts = render_jobs(ctx, headline_chart.chart_jobs(ctx) + batch_charts.chart_jobs(ctx)
                             + roofline_charts.chart_jobs(ctx)
                             + speculative_charts.chart_jobs(ctx) + quantization_charts.chart_jobs(ctx)
                             + stream_charts.chart_jobs(ctx) + accuracy_charts.chart_jobs(ctx))
        path = out_dir / REPORT_NAME
        path.write_text(render_markdown(table, charts, sources, where, out_dir, best.markdown_lines(table, *stated),
                                        adapter_lines(ctx)))
        write_html_report(table, sources, out_dir, palette, slo_tpot_ms,  # report.html: hover, filters, sorting
                          best.html_section(table, *stated), accuracy_html(table), html_standalone)
    except OSError as e:
        raise PlotError(f"{out_dir}: cannot write the charts ({e.strerror or e})") from None
    return path


def check_formats(formats: Sequence[str]) -> Tuple[str, ...]:
    cleaned = tuple(dict.fromkeys(f.strip().lower().lstrip(".") for f in formats if f.strip()))
    unknown = [f for f in cleaned if f not in FORMATS]
    if unknown or not cleaned:
        raise PlotError(f"--format {','.join(formats)}: choose one or more of {', '.join(FORMATS)}")
    return cleaned


# -- report.md --------------------------------------------------------------------------------------------

def render_markdown(table: pd.DataFrame, charts: List[Chart], sources: Sequence[Path],
                    where: Optional[Dict[str, str]], out_dir: Path, answer: Sequence[str] = (),
                    adapters: Sequence[str] = ()) -> str:
    ok = data.plotted(table)
    lines = [f"# {data.unique_text(ok, R.model)} ({data.unique_text(ok, R.dtype)}){data.prompts_text(ok)}: "
             "inference benchmark", ""]
    lines += source_lines(sources, where, out_dir)
    lines += ["Interactive version (hover a point for its row, filter, sort the tables; opens offline): "
              "[report.html](report.html)", ""]
    lines += answer
    batch = data.of_scenario(table, BATCH)
    if not batch.empty:
        lines += ["## Summary", "", *summary_table(batch), "", *unsettled_lines(batch)]
    lines += grid_lines(table)
    lines += quantization_lines(table, sources)
    lines += memory_lines(table)
    lines += stream_lines(data.of_scenario(table, STREAM))
    lines += adapters  # per LoRA adapter, from requests.csv (plots/stream/adapters.py)
    lines += image_lines(table)
    lines += spec_lines(table)
    lines += accuracy_lines(table)
    lines += validity_lines(table)
    lines += dropped_lines(table)
    lines += chart_lines(charts, out_dir)
    return "\n".join(lines).rstrip() + "\n"


def source_lines(sources: Sequence[Path], where: Optional[Dict[str, str]], out_dir: Path) -> List[str]:
    """Where each number came from: folder, hardware, software versions, commit, start time. The folder is given
    from the report's own folder, so a report copied or published with its results names no path of the machine
    that made it."""
    lines = ["Results:", ""]
    for source in sources:
        csv_path = load.results_csv_path(Path(source))
        manifest = load.read_manifest(csv_path)
        lines.append(f"- `{os.path.relpath(csv_path.parent.resolve(), Path(out_dir).resolve())}`: "
                     f"{describe_manifest(manifest)}")
    if where:
        lines.append(f"- filtered with {' '.join(f'`--where {k}={v}`' for k, v in where.items())}")
    return lines + [""]


def describe_manifest(manifest: dict) -> str:
    if not manifest:
        return "no manifest.json"
    software = load.manifest_section(manifest, "software")  # the engines' distributions, then the harness's
    versions = ", ".join(f"{k} {v}" for k, v in software.items() if k != "python" and k not in HARNESS_PACKAGES)
    parts = [load.manifest_hardware_label(manifest), versions,
             f"commit {str(manifest.get('git_commit') or '?')[:12]}", f"started {manifest.get('start_time', '?')}"]
    return "; ".join(p for p in parts if p)


SUMMARY_HEADER = ("| series | input | output | points ok | peak throughput (tokens/s) | at batch size "
                  "| latency there (ms, ±95%) | TPOT there (ms) | MBU there | MFU there | x roofline there "
                  "| cost per M output tokens there | smallest batch | its latency (ms) | its TTFT (ms) |")


def summary_table(table: pd.DataFrame) -> List[str]:
    """One row per series and length pair: the throughput end and the latency end of its curve."""
    rows = data.table_head(SUMMARY_HEADER, 3)
    for series in data.series_order(table):
        of_series = table[table[data.SERIES] == series]
        for input_length, output_length in data.length_pairs(of_series):
            same_lengths = (of_series[R.input_length] == input_length) & (of_series[R.output_length] == output_length)
            group = of_series[same_lengths]
            rows.append(_summary_row(series, input_length, output_length, group))
    return rows


def _summary_row(series: str, input_length: int, output_length: int, group: pd.DataFrame) -> str:
    ok = group[group[R.status] == data.PLOTTED_STATUS].sort_values(R.batch_size)
    cells = [series, str(input_length), str(output_length), f"{len(ok)} of {len(group)}"]
    if ok.empty:
        return "| " + " | ".join(cells + ["-"] * 11) + " |"
    peak = ok.loc[ok[R.throughput_tokens_per_s].idxmax()]
    small = ok.iloc[0]
    cells += [fmt(peak[R.throughput_tokens_per_s]), str(peak[R.batch_size]), data.latency_with_ci(peak),
              fmt(peak.get(R.tpot_ms_mean)), fmt(peak.get(R.mbu)), fmt(peak.get(R.mfu)), fmt(peak.get(R.roofline_ratio)),
              fmt(peak.get(R.cost_per_million_output_tokens)), str(small[R.batch_size]), fmt(small[R.latency_ms_mean]),
              fmt(small.get(R.ttft_ms_mean))]
    return "| " + " | ".join(cells) + " |"


def unsettled_lines(batch: pd.DataFrame) -> List[str]:
    """num_batches: auto points that reached stop.max_batches before their interval was narrow enough."""
    if R.converged not in batch:
        return []
    rows = batch[(batch[R.converged] == "false") & (batch[R.status] == data.PLOTTED_STATUS)]
    if rows.empty:
        return []
    items = [f"{r[data.SERIES]}: {data.load_text(r)} @ in {r[R.input_length]}/out {r[R.output_length]} "
             f"({int(r[R.num_batches])} batches)" for _, r in rows.iterrows()]
    return [f"**Not converged** (stop.max_batches reached before the mean latency's 95% interval was within "
            f"stop.target_ci_pct; marked * in the tables): {'; '.join(items)}", ""]


def validity_lines(table: pd.DataFrame) -> List[str]:
    """Whether the GPU points were timed on GPUs nothing slowed or shared (docs/measurement.md, "A valid GPU
    point"): one line when all were, each other point with its reason; nothing without NVML."""
    if R.validity not in table:
        return []
    judged = table[table[R.validity].astype(str).isin(["valid", "suspect", "invalid"])]
    if judged.empty:
        return []
    others = judged[judged[R.validity] != "valid"]
    clocks = pd.to_numeric(judged[R.gpu_sm_clock_median_mhz], errors="coerce")
    lines = ["## GPU validity", "",
             f"{len(judged) - len(others)} of {len(judged)} timed points valid: no hardware or thermal slowdown, no "
             "other process on the GPU, and no ECC error or XID where NVML reports them, while they ran (median SM "
             f"clock {clocks.min():.0f}-{clocks.max():.0f} MHz).", ""]
    for _, r in others.iterrows():
        lines.append(f"- **{r[R.validity]}** {r[data.SERIES]}: {data.load_text(r)} @ in {r[R.input_length]}/out "
                     f"{r[R.output_length]}: {r[R.validity_reason]}")
    return lines + ([""] if len(others) else [])


def dropped_lines(table: pd.DataFrame) -> List[str]:
    items = data.describe_dropped(data.dropped(table), with_lengths=True,
                                  with_series=table[data.SERIES].nunique() > 1)
    if not items:
        return []
    errors = data.dropped(table)[R.error].astype(str).str.strip()
    reasons = sorted(set(e.splitlines()[0][:160] for e in errors if e and e != "nan"))
    lines = ["## Points left out of the charts", "", *[f"- {item}" for item in items], ""]
    return lines + (["Reasons recorded:", "", *[f"- {r}" for r in reasons], ""] if reasons else [])


def chart_lines(charts: List[Chart], out_dir: Path) -> List[str]:
    """Every chart under its section heading, embedded by a path relative to report.md."""
    lines, section = [], None
    for chart in charts:
        if chart.section != section:
            section = chart.section
            lines += [f"## {section}", ""]
        if chart.paths:  # a chart that could not be drawn leaves only its caption, saying why
            lines += [_embed(chart, out_dir), ""]
        if chart.caption:
            lines += [f"*{chart.caption}*", ""]
    return lines


def _embed(chart: Chart, out_dir: Path) -> str:
    embeddable = [p for p in chart.paths if p.suffix.lstrip(".") in EMBEDDABLE]
    if embeddable:
        return f"![{chart.title}]({embeddable[0].relative_to(out_dir).as_posix()})"
    return " · ".join(f"[{chart.title} ({p.suffix[1:]})]({p.relative_to(out_dir).as_posix()})" for p in chart.paths)
