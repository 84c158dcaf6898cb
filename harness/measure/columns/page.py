"""The reference page: every file's columns in the order they are written (the declarations' order, which the
writers take as their headers)."""

from __future__ import annotations

from typing import Dict, List

from harness.markdown import cell
from harness.measure.columns.base import Column
from harness.measure.columns.results import RESULTS
from harness.measure.columns.rows import ACCURACY_TASKS, REQUESTS, SAMPLES, SERVER_METRICS

FILES: Dict[str, Dict[str, Column]] = {
    "results.csv": RESULTS,
    "samples.csv": SAMPLES,
    "requests.csv": REQUESTS,
    "server_metrics/*.csv": SERVER_METRICS,
    "accuracy.csv": ACCURACY_TASKS,
}


# --- The reference page -----------------------------------------------------------------------------------------

FILE_INTROS = {
    "results.csv": "One row per point: a batch point's figures over its timed batches, a stream point's over its "
                   "timed requests. A search (`batch_sizes: auto`, `request_rates: auto`) writes each probe as a "
                   "point, then a row of its own with its answer.",
    "samples.csv": "One row per timed batch of every batch point.",
    "requests.csv": "One row per timed request of every stream point, failed requests included; times in seconds "
                    "from the stream's start.",
    "server_metrics/*.csv": "One file per stream point of an entry that scrapes its server's Prometheus endpoint "
                            "(named in that point's `server_metrics_file`), one row per scrape.",
    "accuracy.csv": "One row per entry and `accuracy.tasks` task, as the manifest's `runtime.accuracy` gives it "
                    "(rewritten with the manifest; an entry that loads again on resume answers again). Only with "
                    "`accuracy.tasks`.",
}


def file_table(file: str) -> List[str]:
    """The file's table rows, in the order its columns are written."""
    lines = ["| column | unit | filled for | meaning |", "|---|---|---|---|"]
    for c in FILES[file].values():
        lines.append(f"| `{c.name}` | {cell(c.unit)} | {cell(c.where)} | {cell(c.meaning)} |")
    return lines


def reference_markdown() -> str:
    """The whole text of docs/reference/columns.md."""
    lines = [
        "# Results columns",
        "",
        "Generated from `harness/measure/columns/` and held to the code that writes the columns by "
        "`tests/test_columns.py`; regenerate with `python scripts/gen_docs.py`.",
        "",
        "*filled for*: `all` is every row the point's status allows (a point that is not `ok` has no figures); "
        "`batch` and `stream` are that scenario's rows only; anything narrower names the entries or settings that "
        "fill the column. Elsewhere the cell is empty. Percentiles interpolate linearly. The measurement contract, "
        "[docs/measurement.md](../measurement.md), is the authority on each definition.",
    ]
    for file in FILES:
        lines += ["", f"## {file}", "", FILE_INTROS[file], "", *file_table(file)]
    return "\n".join(lines) + "\n"
