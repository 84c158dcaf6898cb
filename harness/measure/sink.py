"""Where a finished point goes: its figures derived once, its annotations, its one results.csv row composed from
both and the record, then written with its samples or requests (docs/architecture.md, "A point's data").

The session only wires a sink to its workers; every row is built here, in one place.
"""

from __future__ import annotations

from typing import Dict, Mapping, Optional

from harness.measure.annotations import Annotations, PointAnnotations
from harness.measure.gpu_validity import validity_columns
from harness.measure.metrics import point_figures
from harness.measure.quality import accuracy_cells
from harness.measure.records import PointResult
from harness.measure.columns.results import ENGINE_STAT_COLUMNS
from harness.measure.writers import ResultsDir, key_cells, profile_trace_file, server_series_file

Figures = Dict[str, Optional[float]]


class PointSink:
    """Per model label, its annotators; `accept` turns each finished point into its row, written."""

    def __init__(self, out: ResultsDir, annotations: Mapping[str, PointAnnotations]):
        self.out, self.annotations = out, annotations

    def accept(self, result: PointResult) -> Dict[str, object]:
        figures = point_figures(result)
        notes = self.annotations[result.context.model].annotate(result, figures)
        row = result_row(result, figures, notes)
        self.out.write_point(result, row)
        return row


def result_row(result: PointResult, figures: Optional[Figures] = None,
               notes: Optional[Annotations] = None) -> Dict[str, object]:
    """The point's results.csv row: its keys, what the record holds, its figures (computed here unless the caller
    has them) and what the annotators said (nothing, for a point no annotator saw: `notes` None)."""
    row = key_cells(result)
    row.update(status=result.status, error=result.error, peak_memory_bytes=result.peak_memory_bytes,
               peak_host_memory_bytes=result.peak_host_memory_bytes,
               estimated_memory_bytes=result.estimated_memory_bytes, load_time_s=result.load_time_s,
               memory_before_load_bytes=result.memory_before_load_bytes if result.measured else None,
               spec_method=result.spec_method, spec_tokens=result.spec_tokens, search=result.search,
               search_probes=result.search_probes, quantization=result.quantization, perplexity=result.perplexity,
               grid_options=result.grid_options)
    row.update(accuracy_cells(result.accuracy))
    if result.point.scenario == "batch":
        row.update(num_batches=len(result.samples), num_warmup_batches=result.num_warmup_batches,
                   profile_trace=profile_trace_file(result),
                   max_batch_size_found=result.max_batch_size_found,
                   converged=None if result.converged is None else str(result.converged).lower())
    else:
        slo = result.slo  # None on a point its worker never ran (it died or hung first): no SLO was applied
        row.update(num_warmup_requests=result.num_warmup_batches, slo_ttft_ms=slo.ttft_ms if slo else None,
                   slo_tpot_ms=slo.tpot_ms if slo else None, slo_percentile=slo.percentile if slo else None,
                   max_rate_within_slo=result.max_rate_within_slo,
                   saturated=None if result.saturated is None else str(result.saturated).lower(),
                   saturation_reason=result.saturation_reason)
        if result.stream is not None:
            sources = sorted({r.output_tokens_source for r in result.stream.requests if r.ok})
            row["output_tokens_source"] = "+".join(sources) or None
            row["server_metrics_file"] = server_series_file(result)
    row.update({k: v for k, v in result.engine_stats.items() if k in ENGINE_STAT_COLUMNS})
    row.update(point_figures(result) if figures is None else figures)
    row.update(validity_columns(result.gpu_validity))
    row.update((notes or Annotations()).columns())
    return row
