"""`--plan --charts DIR`: the headline charts of a plan, drawn from floors and forecasts, never measurements.

Per model and (input, output) pair: output tokens/s per GPU against per user (plots/headline_chart.py's axes) and
latency against throughput (plots/batch_charts.py's), a curve per entry through its batch sizes. Every line is
dashed (forecast) or dotted (floor) and says so in its legend and title, so that no one takes them for measurements,
which the measured charts draw solid. matplotlib is imported here only, and only for --charts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Optional, Tuple

from harness.plan.outlook import PlanPoint

FORECAST_STYLE = "--"
FLOOR_STYLE = ":"


def _curves(points: List[PlanPoint]) -> Dict[str, List[PlanPoint]]:
    out: Dict[str, List[PlanPoint]] = {}
    for p in points:
        if p.floors is not None and p.fits:
            out.setdefault(p.capacity.label, []).append(p)
    return {label: sorted(curve, key=lambda p: p.batch_size) for label, curve in out.items()}


def _xy(p: PlanPoint, chart: str, forecast: bool) -> Optional[Tuple[float, float]]:
    """(x, y) of a point on `chart`: from the forecast, or from the floors (the ceiling on the speeds)."""
    fl, f, out = p.floors, p.forecast, p.capacity.output_length
    assert fl is not None
    if forecast and f is None:
        return None
    latency_ms = f.latency_ms(out) if forecast and f else fl.latency_floor_ms
    tokens_per_s = p.batch_size * out / (latency_ms / 1e3)
    if chart == "latency":
        return latency_ms, tokens_per_s
    tpot_ms = f.tpot_ms if forecast and f else fl.tpot_floor_ms
    if not tpot_ms:
        return None
    return 1e3 / tpot_ms, tokens_per_s / fl.num_devices


def draw(points: List[PlanPoint], model_label: str, where: str, out_dir: Path, prefix: bool = False) -> List[Path]:
    """One PNG per chart and length pair; returns the paths written. `prefix`: file names start with the model's
    (a sweep over several models)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths: List[Path] = []
    pairs = dict.fromkeys((p.capacity.input_length, p.capacity.output_length) for p in points)
    for input_length, output_length in pairs:
        here = [p for p in points if (p.capacity.input_length, p.capacity.output_length) == (input_length,
                                                                                              output_length)]
        for chart in ("per_gpu_vs_per_user", "latency"):
            path = _one(here, chart, model_label, where, (input_length, output_length), out_dir, prefix)
            if path is not None:
                paths.append(path)
    return paths


def _one(points: List[PlanPoint], chart: str, model_label: str, where: str, pair: Tuple[int, int],
         out_dir: Path, prefix: bool) -> Optional[Path]:
    from plots import style

    curves = _curves(points)
    fig, ax = style.new_figure()
    xs: List[float] = []
    ys: List[float] = []
    palette = style.Palette.build(list(curves))
    for label, curve in curves.items():
        color = palette.series_colors[label]
        for forecast, line, what in ((True, FORECAST_STYLE, "forecast"), (False, FLOOR_STYLE, "floor")):
            found = [(xy, p.batch_size) for p in curve if (xy := _xy(p, chart, forecast)) is not None]
            if not found:
                continue
            ax.plot([x for (x, _), _ in found], [y for (_, y), _ in found], color=color, linestyle=line,
                    marker="o" if forecast else None, label=f"{label} ({what})", zorder=3)
            for (x, y), batch in found:
                ax.annotate(str(batch), (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8, color=color)
            xs += [x for (x, _), _ in found]
            ys += [y for (_, y), _ in found]
    if not xs:
        return None
    style.set_value_axis(ax, "x", xs)
    style.set_value_axis(ax, "y", ys)
    ax.margins(0.08)
    input_length, output_length = pair
    if chart == "latency":
        what, x_label, y_label = "latency vs throughput", "latency per batch (ms)", "output throughput (tokens/s)"
    else:
        what, x_label, y_label = ("throughput per GPU vs speed per user", "output tokens/s per user (1 / TPOT)",
                                  "output tokens/s per GPU")
    ax.set_title(f"FORECAST, not measured: {model_label} on {where}: {what}, input {input_length} / output "
                 f"{output_length}", fontsize=11)
    ax.set_xlabel(x_label)
    ax.set_ylabel(y_label)
    ax.legend(loc="center left", bbox_to_anchor=(1.02, 0.5), title="dashed: forecast, dotted: floor",
              fontsize=9, title_fontsize=9)
    fig.text(0.01, -0.02, "numbers at points: batch size; floor = the roofline bound (fastest possible); forecast = "
             "floor / the engine's calibrated fraction", fontsize=8, color="0.35")
    stem = f"forecast_{chart}_in{input_length}_out{output_length}"
    if prefix:
        stem = f"{_slug(model_label)}_{stem}"
    return style.save(fig, out_dir, stem, ("png",))[0]


def _slug(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in text)[:60]
