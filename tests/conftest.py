import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def run_benchmark(*args, timeout=600, **kwargs) -> subprocess.CompletedProcess:
    """`python benchmark.py ARGS` as a user runs it: a fresh process, real exit code and streams."""
    return subprocess.run([sys.executable, str(REPO / "benchmark.py"), *map(str, args)], cwd=REPO,
                          capture_output=True, text=True, timeout=timeout, **kwargs)
