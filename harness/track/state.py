"""tracking.json in the results folder: the runs a sweep made in each tracker and the points each run was sent, so
that a resumed sweep (or `python -m plots --track DIR` after it) continues the same runs and sends every point once.

Written whole, through a temporary file and a rename, after each change: a sweep killed at any instant leaves the
last state or the one before, never half of one. A file that does not parse is refused with one line, never
guessed at (a second set of runs would follow)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict

from harness.errors import UserError
from harness.files import read_utf8, write_whole

STATE_FILE = "tracking.json"


def read_state(folder: Path) -> Dict[str, Any]:
    path = Path(folder) / STATE_FILE
    if not path.exists():
        return {}
    try:
        state = json.loads(read_utf8(path, "tracking state"))
    except ValueError as e:
        raise UserError(f"{path}: not JSON ({e}); it names the runs this sweep made: restore it, or remove it to "
                        "start new runs") from None
    if not isinstance(state, dict) or not all(isinstance(v, dict) for v in state.values()):
        raise UserError(f"{path}: expected an object of trackers, each an object; restore it, or remove it to start "
                        "new runs")
    return state


def write_state(folder: Path, state: Dict[str, Any]) -> None:
    write_whole(Path(folder) / STATE_FILE, (json.dumps(state, indent=1, sort_keys=True) + "\n").encode())
