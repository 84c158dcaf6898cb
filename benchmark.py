#!/usr/bin/env python
"""Benchmark LLM inference latency and throughput over a YAML sweep.

    python benchmark.py yamls/cpu-tiny.yaml [key=value ...] [--output-dir DIR] [--resume] [--dry-run]
"""

import sys

from app.cli import main

if __name__ == "__main__":  # engines such as vLLM spawn processes that re-import this file
    sys.exit(main())
