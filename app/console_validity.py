"""A GPU sweep's validity on the console (docs/measurement.md, "A valid GPU point"): the count of valid points and
each other one with its reason, and the note on a point's own log line."""

from __future__ import annotations

from typing import Dict, List

from rich.console import Console


def validity_text(row: Dict[str, object]) -> str:
    """A point that was not valid says so on its log line; a valid one, or one without NVML, says nothing."""
    verdict = row.get("validity")
    return f"  {verdict}: {row.get('validity_reason')}" if verdict in ("suspect", "invalid") else ""


def print_validity(console: Console, rows: List[Dict[str, str]], load) -> None:
    """How many GPU points were timed on GPUs nothing else slowed or shared, and what the others saw. `load`
    names a point's load (`bs 8`, `4/s`)."""
    judged = [r for r in rows if r.get("validity")]
    if not judged:
        return
    valid = sum(r["validity"] == "valid" for r in judged)
    console.print(f"GPU validity: {valid} of {len(judged)} timed points valid (clocks, slowdowns, other processes: "
                  "results.csv's validity columns)", style=None if valid == len(judged) else "yellow")
    for r in judged:
        if r["validity"] != "valid":
            console.print(f"  {r['backend']} at {load(r.get('batch_size'), r.get('request_rate'), r.get('max_concurrency'))} "
                          f"in={r['input_length']} out={r['output_length']}: {r['validity']}: {r['validity_reason']}",
                          style="yellow")
