"""A sweep's trackers fed as it runs (the `tracking` section; docs/guides/tracking.md): after each point its new
rows are sent from the results folder on a thread of their own, so that a slow or unreachable tracker never holds
up a point; at the end, the last rows and the files, and the outcome in the manifest. The same folder is sent later
by `python -m plots --track DIR`, which picks up wherever this stopped."""

from __future__ import annotations

import queue
import threading
from pathlib import Path
from typing import Sequence

from app.console import console
from harness.config.sections import TrackingConfig
from harness.measure.writers import ResultsDir
from harness.track.sync import FolderTracking

SYNC, END = "sync", "end"  # what the thread is asked: new rows, or the last rows, the files and the runs' end
FINISH_WAIT_S = 120.0  # at the end, the files' upload may take this long before the sweep exits without it


class TrackingObserver:
    """The SweepObserver (app/session.py) that sends the folder to the trackers."""

    def __init__(self, tracking: TrackingConfig, folder: Path):
        self.tracking = FolderTracking(folder, tracking)  # a damaged tracking.json: UserError before the sweep runs
        self._asks: "queue.Queue[str]" = queue.Queue()
        self._done = threading.Event()

    def started(self, out: ResultsDir) -> None:
        threading.Thread(target=self._loop, name="tracking", daemon=True).start()
        self._asks.put(SYNC)

    def point_written(self) -> None:
        self._asks.put(SYNC)

    def finished(self) -> None:
        self._asks.put(END)
        if not self._done.wait(FINISH_WAIT_S):
            console.print(f"warning: the trackers did not finish within {FINISH_WAIT_S:g} s; send the folder with "
                          f"python -m plots --track {self.tracking.folder}", style="yellow")
        for name, outcome in self.tracking.record().items():
            if outcome["result"] == "sent":
                console.print(f"Tracked in {name}: {outcome['where']}")

    def _loop(self) -> None:
        try:
            self._serve()
        except Exception as e:  # noqa: BLE001 - a folder it cannot read (a damaged manifest): said, never raised
            _say([f"tracking: stopped ({type(e).__name__}: {e}); send the folder later with python -m plots --track "
                  f"{self.tracking.folder}"])
        finally:
            self._done.set()

    def _serve(self) -> None:
        while True:
            asks = [self._asks.get()]
            while not self._asks.empty():  # points written while the last send ran: one sync covers them all
                asks.append(self._asks.get_nowait())
            if END in asks:
                _say(self.tracking.finish())
                return
            _say(self.tracking.sync())


class Observers:
    """Several SweepObservers as one: a launcher's (log markers) and the trackers', each told everything in turn."""

    def __init__(self, *observers):
        self.observers = observers

    def started(self, out: ResultsDir) -> None:
        for observer in self.observers:
            observer.started(out)

    def point_written(self) -> None:
        for observer in self.observers:
            observer.point_written()

    def finished(self) -> None:
        for observer in self.observers:
            observer.finished()


def _say(lines: Sequence[str]) -> None:
    for line in lines:
        console.print(f"warning: {line}", style="yellow")
