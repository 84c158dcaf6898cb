"""A server process the harness starts for a backend (`openai`'s `command`) and always stops: its whole group."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path
from typing import Dict, List, Optional

from harness.run.process_group import die_with_parent, end_group

STOP_GRACE_S = 20.0
LOG_TAIL_LINES = 5


def start_server(argv: List[str], log_path: Path, env: Optional[Dict[str, str]] = None) -> subprocess.Popen:
    """Start a server command as the leader of its own process group (so that `stop_group` ends all of it),
    its output into `log_path`, and SIGTERMed by the kernel when the thread that started it dies
    (PR_SET_PDEATHSIG fires when the forking *thread* exits: start it from one that lives as long as the
    backend, as the worker's main thread does). `env`: the server's environment (default: the harness's)."""
    with open(log_path, "wb") as log:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True, preexec_fn=die_with_parent)


def stop_group(proc: subprocess.Popen, grace_s: float = STOP_GRACE_S) -> None:
    """SIGTERM the server's whole process group (it leads it: start_new_session), wait up to `grace_s` for
    every member to end, then SIGKILL whatever is left. Reaps the leader."""
    end_group(proc, exit_s=0.0, term_s=grace_s)


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    """The last non-empty lines of a log, joined into one line."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    tail = [" ".join(line.split()) for line in text.splitlines() if line.strip()][-lines:]
    return " | ".join(tail)[-1500:]


def exit_wording(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"
