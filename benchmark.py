#!/usr/bin/env python
"""Benchmark LLM inference latency and throughput over a YAML sweep.

    python benchmark.py yamls/cpu-tiny.yaml [key=value ...] [--output-dir DIR] [--resume] [--dry-run]
"""

import sys

# The harness's own packages; a missing module that is not one of them is a dependency this interpreter lacks.
OWN_PACKAGES = {"app", "backends", "harness", "mosaic", "plots", "slurm", "workloads"}

try:
    from app.cli import main
except ModuleNotFoundError as e:
    if (e.name or "").split(".")[0] in OWN_PACKAGES:
        raise
    print(f"error: {sys.executable} has no module {e.name!r}: run the harness with the environment `make setup` "
          "builds, e.g. .venv/bin/python benchmark.py yamls/cpu-tiny.yaml", file=sys.stderr)
    sys.exit(2)

if __name__ == "__main__":  # engines such as vLLM spawn processes that re-import this file
    sys.exit(main())
