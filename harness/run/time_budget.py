"""Where a sweep's time goes (docs/measurement.md, "Where a sweep's time goes").

Each entry's budget comes from its launcher (harness/run/launcher.py, `Supervision.time_budget`); the sweep's
adds what happens around the entries: start-up (imports, config, planning), the CPU peak probe, charts.
Work is what a sweep is for: the engines' import and load, warm-up and timed batches. The rest is overhead.
"""

from __future__ import annotations

import os
from typing import Dict, List, Optional

WORK_PARTS = ("engine_import_s", "load_s", "warmup_s", "timed_s")
ENTRY_PARTS = ("worker_start_s", "engine_import_s", "waiting_s", "load_s", "warmup_s", "timed_s", "shutdown_s",
               "other_s", "total_s")


def process_age_s() -> float:
    """Seconds since this process started (the kernel's start time), so interpreter start-up and imports count."""
    with open("/proc/self/stat") as f:
        started_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/uptime") as f:
        uptime_s = float(f.read().split()[0])
    return uptime_s - started_ticks / os.sysconf("SC_CLK_TCK")


def sweep_budget(entries: List[Dict[str, float]], startup_s: float, peaks_s: float, charts_s: float,
                 wall_s: float) -> Dict[str, Optional[float]]:
    work_s = sum(entry.get(part, 0.0) for entry in entries for part in WORK_PARTS)
    # An entry's start may run beside the previous one's shutdown: that stretch of wall time counts once.
    overlap_s = sum(entry.get("overlap_s", 0.0) for entry in entries)
    entries_s = sum(entry["total_s"] for entry in entries) - overlap_s
    return {"wall_s": wall_s, "startup_s": startup_s, "peaks_probe_s": peaks_s, "entries_s": entries_s,
            "entries_overlap_s": overlap_s,
            "charts_s": charts_s, "other_s": wall_s - startup_s - peaks_s - entries_s - charts_s, "work_s": work_s,
            "wall_over_work": wall_s / work_s if work_s else None}
