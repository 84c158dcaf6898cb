"""Releasing a stream's requests on time, by default without busy-waiting (docs/measurement.md, "Request streams").

asyncio's own timers wake late: the loop waits in epoll, whose timeout is whole milliseconds (rounded up), so a
request due between two wake-ups leaves up to a millisecond late, which at 1,000 requests/s is the whole gap between
two. Yielding until the request is due (a spin) is on time but keeps a core busy, and where the engine computes on
the same CPU it slowed the engine 1.2-1.5x. A kernel timer (`timerfd`, armed at the absolute due time on
CLOCK_MONOTONIC, the clock of `time.perf_counter` on Linux) wakes the loop through the same epoll with nanosecond
resolution and no timer slack, so the loop sleeps until the request is due, then runs it at once: about 0.05-0.2 ms
late on an idle core, with no CPU spent between releases. A thread sleeping in `time.sleep` and waking the loop with
`call_soon_threadsafe` came out later (its own wake-up, then the GIL and the self-pipe) and costs more CPU per release.

`stream.release` picks the policy (`POLICIES`): `timerfd`, the kernel timer (the default: the best measured);
`timer`, asyncio's own, as other clients wait (for comparing with them); `spin`, woken SPIN_S early by the kernel
timer (asyncio's where there is none), then yielding to the loop until due: the most precise where a core is free
to burn (p99 about 0.06 ms against timerfd's 0.2-0.4 ms at 1,000 requests/s), but it burns it, slowing an engine
that computes on the same CPU. Where the kernel or libc has no timerfd (not Linux), `timerfd` and `spin` wake on
asyncio's timer instead (`mechanism` says which one runs; the manifest records the policy and the mechanism).
"""

from __future__ import annotations

import asyncio
import ctypes
import heapq
import itertools
import os
import sys
import time
from typing import Any, Dict, List, Optional, Set, Tuple

from harness.config.stream import RELEASE_POLICIES

_CLOCK_MONOTONIC = 1
# timerfd_create takes the open(2) flags for these (the kernel defines TFD_NONBLOCK, TFD_CLOEXEC as them).
_TFD_NONBLOCK, _TFD_CLOEXEC, _TFD_TIMER_ABSTIME = os.O_NONBLOCK, os.O_CLOEXEC, 1


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


def _libc_timerfd() -> Optional[Any]:
    """libc, where it has a working timerfd and perf_counter reads CLOCK_MONOTONIC (the timer's clock); else None.
    Python 3.11 has no os.timerfd_create (3.13 does), hence ctypes."""
    if not sys.platform.startswith("linux"):
        return None
    if time.get_clock_info("perf_counter").implementation != "clock_gettime(CLOCK_MONOTONIC)":
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
    if not (hasattr(libc, "timerfd_create") and hasattr(libc, "timerfd_settime")):
        return None
    fd = libc.timerfd_create(_CLOCK_MONOTONIC, _TFD_NONBLOCK | _TFD_CLOEXEC)  # a sandbox may refuse it
    if fd < 0:
        return None
    os.close(fd)
    return libc


_LIBC = _libc_timerfd()
# What the kernel timer policies wake on here: timerfd (on time, to within the kernel's wake-up) or asyncio's timer
# (up to about a millisecond late).
MECHANISM = "timerfd" if _LIBC is not None else "timer"

# The values of `stream.release`, the default first (the config owns them: it checks a YAML's value against them).
POLICIES = RELEASE_POLICIES
DEFAULT_POLICY = POLICIES[0]
# With `spin`, how long before its due time a release wakes to yield until then: more than asyncio's timer is late
# (about a millisecond), so that even woken by it the spin starts before the request is due.
SPIN_S = 0.002


def mechanism(policy: str) -> str:
    """What wakes the loop under `policy` on this machine: asyncio's timer when asked for or when there is no timerfd,
    else the kernel timer (`spin` too: it is woken early by it)."""
    return "timer" if policy == "timer" else MECHANISM


def release_record(policy: str) -> Dict[str, str]:
    """The manifest's `stream_release`: the policy the sweep asked for and the mechanism that woke its releases."""
    return {"policy": policy, "mechanism": mechanism(policy)}


class ReleaseClock:
    """Wakes the tasks of one event loop at their due times (`until`), any number waiting at once, under `policy`
    (POLICIES): on the kernel timer, one armed at the earliest wake-up, or asyncio's; with `spin`, SPIN_S early, then
    yielding until due. Never wakes a task early: a due time the timer reached before perf_counter did is re-armed,
    and every policy checks perf_counter before it returns. `close()` releases the timer; make one per stream, on the
    loop that runs it."""

    def __init__(self, loop: asyncio.AbstractEventLoop, policy: str = DEFAULT_POLICY):
        if policy not in POLICIES:  # the config refuses others (harness/config/stream/section.py): a caller's mistake
            raise ValueError(f"release policy {policy!r} is not one of {', '.join(POLICIES)}")
        self.policy = policy
        self._loop = loop
        # Read here rather than bound as a default argument, so that a test can stretch the spin over a whole gap.
        self._spin_s = SPIN_S if policy == "spin" else 0.0
        self._due: List[Tuple[float, int, asyncio.Future]] = []  # (wake-up time, order of arrival, its waiter)
        self._waiting: Set[asyncio.Task] = set()  # the tasks in `until`, whichever way they wait: `close` ends them
        self._order = itertools.count()
        self._armed_s: Optional[float] = None
        self._fd: Optional[int] = None
        libc = _LIBC if mechanism(policy) == "timerfd" else None
        if libc is not None:
            fd = libc.timerfd_create(_CLOCK_MONOTONIC, _TFD_NONBLOCK | _TFD_CLOEXEC)
            if fd < 0:  # it worked at import (MECHANISM says so): out of file descriptors
                err = ctypes.get_errno()
                raise OSError(err, f"timerfd_create: {os.strerror(err)}")
            self._fd = fd
            loop.add_reader(fd, self._fired)

    async def until(self, deadline_s: float) -> None:
        """Return at `deadline_s` (perf_counter) or just after, other tasks running meanwhile; at once if it passed."""
        task = asyncio.current_task()
        assert task is not None  # a coroutine awaited on the loop runs in a task
        self._waiting.add(task)
        try:
            await self._wake(deadline_s - self._spin_s)
            # The spin: each turn yields to the loop, so other tasks (responses, other releases) still run. Under the
            # other policies the wake-up was the due time itself and this loop never turns.
            while time.perf_counter() < deadline_s:
                await asyncio.sleep(0)
        finally:
            self._waiting.discard(task)

    async def _wake(self, wake_s: float) -> None:
        """Sleep until `wake_s` on the timer this clock watches, or on asyncio's where it watches none."""
        if self._fd is None:
            while (left := wake_s - time.perf_counter()) > 0:
                await asyncio.sleep(left)
            return
        if wake_s <= time.perf_counter():
            return
        waiter = self._loop.create_future()
        heapq.heappush(self._due, (wake_s, next(self._order), waiter))
        if self._armed_s is None or wake_s < self._armed_s:
            self._arm(wake_s)
        await waiter

    def _fired(self) -> None:
        """The timer expired (or a stale expiry was left readable): wake every waiter now due, re-arm for the next."""
        assert self._fd is not None
        try:
            os.read(self._fd, 8)  # the expiry count; reading it clears the readiness
        except BlockingIOError:
            pass
        self._armed_s = None
        now = time.perf_counter()
        while self._due and self._due[0][0] <= now:
            waiter = heapq.heappop(self._due)[2]
            if not waiter.done():  # a cancelled waiter's task is gone
                waiter.set_result(None)
        if self._due:
            self._arm(self._due[0][0])

    def _arm(self, deadline_s: float) -> None:
        assert _LIBC is not None and self._fd is not None
        seconds = int(deadline_s)
        # Rounded up to the next nanosecond: the timer then never fires before perf_counter reads the due time.
        nanos = min(int((deadline_s - seconds) * 1e9) + 1, 999_999_999)
        value = _Itimerspec(_Timespec(0, 0), _Timespec(seconds, nanos))
        if _LIBC.timerfd_settime(self._fd, _TFD_TIMER_ABSTIME, ctypes.byref(value), None) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"timerfd_settime: {os.strerror(err)}")
        self._armed_s = deadline_s

    def close(self) -> None:
        """Stop watching the timer and close it; tasks still waiting are cancelled (their stream is over), whichever
        way they wait: on the kernel timer, asyncio's, or spinning."""
        for task in self._waiting:
            task.cancel()
        self._waiting.clear()
        self._due.clear()
        if self._fd is not None:
            self._loop.remove_reader(self._fd)
            os.close(self._fd)
            self._fd = None


def block_until(deadline_s: float) -> None:
    """`ReleaseClock.until` for a thread without an event loop: `time.sleep` is clock_nanosleep, which wakes within
    the kernel's timer slack (50 us by default), so there is nothing to gain from yielding a core."""
    while (left := deadline_s - time.perf_counter()) > 0:
        time.sleep(left)
