"""One batch under torch.profiler (`profile: true`), for the engines timed through HF `generate`.

The batch runs after the point's timed batches, its peak memory and its logits probe were taken (harness/run/runner.py),
so no timed figure and no samples.csv row is ever taken under the profiler. Every rank runs it (a sharded model's
collectives must line up); only the first local rank, the one whose results are reported (harness/run/worker.py),
runs it under the profiler and exports the trace.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Callable, Optional


def reports() -> bool:
    """Whether this process's trace can reach the results: the worker reports only its first local rank's points."""
    return os.environ.get("LOCAL_RANK", "0") == "0"


def traced(run: Callable[[], object], device: str, name: str) -> Optional[bytes]:
    """`run()` once under torch.profiler (CPU activity, and CUDA's on a GPU; no shapes, which multiply the trace's
    size), inside a `record_function` span called `name`; its Chrome trace as gzipped JSON, which Perfetto and
    chrome://tracing open as they are. A rank that does not report runs it bare and returns None."""
    if not reports():
        run()
        return None
    from torch.profiler import ProfilerActivity, profile, record_function

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    with profile(activities=activities, record_shapes=False) as prof:
        with record_function(name):
            run()
    with tempfile.TemporaryDirectory(prefix="bench-profile-") as folder:
        path = Path(folder) / "trace.json.gz"
        prof.export_chrome_trace(str(path))  # torch gzips a path ending in .gz
        return path.read_bytes()
