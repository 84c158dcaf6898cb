"""What the sweep is waiting for, said while it waits: a worker starting, an engine loading or a server coming up,
the previous entry's engine closing. Silence for minutes reads as a hang, on a terminal and in a log alike.

The launcher says a wait has begun and ticks while it lasts; once it has lasted NOTICE_AFTER_S, a line goes to
`say` every NOTICE_EVERY_S, with the latest line of the worker's log where it has one (the openai backend writes
what it polls there).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable, Optional

NOTICE_AFTER_S = 5.0
NOTICE_EVERY_S = 10.0
LOG_TAIL_BYTES = 4096
DETAIL_CHARS = 160


class WaitNotices:
    """`clock`: seconds from any fixed origin (time.monotonic; a test hands in its own)."""

    def __init__(self, label: str, say: Callable[[str], None], log_path: Optional[Path] = None,
                 clock: Callable[[], float] = time.monotonic):
        self.label, self.say, self.log_path, self.clock = label, say, log_path, clock
        self.what: Optional[str] = None
        self.since = self.next_at = 0.0

    def begin(self, what: str) -> None:
        """A wait for `what` starts now (it replaces any wait in progress)."""
        now = self.clock()
        self.what, self.since, self.next_at = what, now, now + NOTICE_AFTER_S

    def end(self) -> None:
        self.what = None

    def tick(self) -> None:
        """Called while waiting: says so when it is time."""
        now = self.clock()
        if self.what is None or now < self.next_at:
            return
        self.next_at = now + NOTICE_EVERY_S
        latest = last_log_line(self.log_path) if self.log_path else ""
        self.say(f"{self.label}: waiting {now - self.since:.0f} s for {self.what}"
                 + (f" (its log: {latest})" if latest else ""))


def last_log_line(path: Path) -> str:
    """The last non-empty line of a log (progress bars redraw with carriage returns: the last redraw counts)."""
    try:
        with open(path, "rb") as f:
            f.seek(max(0, f.seek(0, 2) - LOG_TAIL_BYTES))
            text = f.read().decode(errors="replace")
    except OSError:
        return ""
    lines = [" ".join(line.split()) for line in text.replace("\r", "\n").splitlines() if line.strip()]
    return lines[-1][:DETAIL_CHARS] if lines else ""
