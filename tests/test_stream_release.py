"""Releasing a stream's requests (harness/scenarios/release.py) under each `stream.release` policy: in order, never
early; on the kernel timer or asyncio's with nothing running between two releases, and with `spin` yielding until
due; and the option's way from the YAML to the stream, the manifest and `--resume`. No timing bound: only "not early"
and CPU / loop-turn counts that a spin makes and a loaded machine would not."""

from __future__ import annotations

import asyncio
import selectors
import sys
import threading
import time
from typing import Dict

import pytest

from app.cli import main
from backends.registry import BACKENDS
from harness.config.sweep import load_config, to_plain
from harness.plan.points import SweepPoint
from harness.scenarios import release
from harness.scenarios.arrivals import arrival_times
from harness.scenarios.batch import BatchSpec
from harness.scenarios.release import POLICIES, ReleaseClock, block_until
from harness.scenarios.stream import StreamSpec, Submitted, run_stream
from harness.scenarios.time_bound import due_within
from workloads.random_ids import RandomOptions, RandomWorkload
from workloads.registry import WORKLOADS

GAP_S = 0.3  # the idle stretch between two releases
STREAM = "yamls/cpu-stream.yaml"


class CountingSelector(selectors.DefaultSelector):
    """Counts the event loop's turns: every turn of an asyncio loop waits in `select` once."""

    turns = 0

    def select(self, timeout=None):
        CountingSelector.turns += 1
        return super().select(timeout)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="timerfd is Linux's")
def test_linux_releases_on_timerfd():
    assert release.MECHANISM == "timerfd"  # else every stream falls back to asyncio's millisecond-late timer
    assert [release.mechanism(p) for p in POLICIES] == ["timerfd", "timer", "timerfd"]


@pytest.mark.parametrize("policy", POLICIES)
def test_waiters_wake_in_due_order_and_never_early(policy):
    woke = []

    async def wake_all():
        clock = ReleaseClock(asyncio.get_running_loop(), policy)
        start = time.perf_counter() + 0.01
        # Out of order, two at the same time, one already past.
        due = [start + offset for offset in (0.04, 0.0, 0.02, 0.02, 0.06, 0.01, -0.5)]

        async def wait(deadline_s: float):
            await clock.until(deadline_s)
            woke.append((deadline_s, time.perf_counter()))

        try:
            await asyncio.gather(*(wait(d) for d in due))
        finally:
            clock.close()

    asyncio.run(wake_all())
    assert len(woke) == 7
    assert [d for d, _ in woke] == sorted(d for d, _ in woke)
    assert all(at >= d for d, at in woke)


@pytest.mark.parametrize("policy", POLICIES)
def test_cancelled_waiter_leaves_the_others_on_time_and_close_cancels_the_rest(policy):
    async def wait_some():
        clock = ReleaseClock(asyncio.get_running_loop(), policy)
        start = time.perf_counter()
        cancelled = asyncio.ensure_future(clock.until(start + 0.01))
        kept = asyncio.ensure_future(clock.until(start + 0.02))
        pending = asyncio.ensure_future(clock.until(start + 60))
        await asyncio.sleep(0)
        cancelled.cancel()
        await kept
        kept_at = time.perf_counter()
        clock.close()
        with pytest.raises(asyncio.CancelledError):
            await pending
        return kept_at - start

    assert asyncio.run(wait_some()) >= 0.02


def _idle_stretch(loop: asyncio.AbstractEventLoop, policy: str):
    """Three requests GAP_S apart against an engine that answers at once; what each submit saw: the loop's turns so
    far, this thread's CPU time, the wall clock."""
    seen = {}

    async def engine(index: int) -> Submitted:
        seen[index] = (CountingSelector.turns, time.thread_time(), time.perf_counter())
        now = time.perf_counter()
        return Submitted(first_token_s=now, last_token_s=now, output_tokens=1)

    stream = StreamSpec(BatchSpec([[1]] * 3, (1,) * 3), (0.0, GAP_S, 2 * GAP_S), release=policy)
    return run_stream(stream, engine, loop=loop), seen


def _idle_gaps(policy: str):
    """(loop turns, CPU seconds, wall seconds) between consecutive releases of the idle stretch under `policy`."""
    loop = asyncio.SelectorEventLoop(CountingSelector())
    try:
        timing, seen = _idle_stretch(loop, policy)
    finally:
        loop.close()
    assert [r.index for r in sorted(timing.requests, key=lambda r: r.dispatched_s)] == [0, 1, 2]
    assert all(r.ok and r.dispatched_s >= r.scheduled_s and r.sent_s >= r.dispatched_s for r in timing.requests)
    gaps = [tuple(b - a for a, b in zip(before, after)) for before, after in ((seen[0], seen[1]), (seen[1], seen[2]))]
    assert all(wall_s >= GAP_S * 0.99 for _, _, wall_s in gaps)  # the schedule's gap (perf_counter's), not shortened
    return gaps


@pytest.mark.parametrize("policy", ["timerfd", "timer"])
def test_the_timers_release_on_an_idle_loop_without_busy_waiting(policy):
    for turns, cpu_s, wall_s in _idle_gaps(policy):
        # A yielding spin turns the loop thousands of times per millisecond; waiting on a timer turns it a few times.
        assert turns < 20, f"{turns} loop turns in an idle {wall_s:.3f} s"
        assert cpu_s < 0.5 * wall_s, f"{cpu_s:.3f} s of CPU in an idle {wall_s:.3f} s"


def test_spin_is_the_policy_that_busy_waits(monkeypatch):
    """`spin` yields to the loop from SPIN_S before each release; stretched here over half the gap, so that even a
    loaded machine, which gives the spin less of a core, turns the loop far more often than a timer ever does."""
    monkeypatch.setattr(release, "SPIN_S", GAP_S / 2)
    for turns, _, wall_s in _idle_gaps("spin"):
        assert turns > 200, f"only {turns} loop turns in {wall_s:.3f} s, half of it spinning"


@pytest.mark.parametrize("policy", POLICIES)
def test_drive_keeps_order_and_never_releases_early_at_a_high_rate(policy):
    count = 400

    async def engine(index: int) -> Submitted:
        now = time.perf_counter()
        return Submitted(first_token_s=now, last_token_s=now, output_tokens=1)

    stream = StreamSpec(BatchSpec([[1]] * count, (1,) * count), arrival_times("poisson", 4000.0, count, 0),
                        release=policy)
    timing = run_stream(stream, engine)
    assert all(r.dispatched_s >= r.scheduled_s for r in timing.requests)
    by_release = sorted(timing.requests, key=lambda r: (r.dispatched_s, r.index))
    assert [r.index for r in by_release] == list(range(count))


def test_block_until_sleeps_rather_than_spins():
    got: Dict[str, float] = {}

    def wait():
        cpu, deadline = time.thread_time(), time.perf_counter() + GAP_S
        block_until(deadline)
        got.update(at=time.perf_counter(), deadline=deadline, cpu_s=time.thread_time() - cpu)

    thread = threading.Thread(target=wait)
    thread.start()
    thread.join()
    assert got["at"] >= got["deadline"]
    assert got["cpu_s"] < 0.5 * GAP_S


def test_the_manifest_records_the_policy_and_the_mechanism():
    from harness.measure.manifest import build_manifest

    spin = build_manifest(to_plain(config("stream.release=spin")), [], {}, [])["stream_release"]
    assert spin == {"policy": "spin", "mechanism": release.MECHANISM}
    assert build_manifest({"scenario": "stream"}, [], {}, [])["stream_release"] == {
        "policy": "timerfd", "mechanism": release.MECHANISM}
    assert build_manifest({"scenario": "batch"}, [], {}, [])["stream_release"] is None  # no stream ran


def config(*overrides):
    return load_config(STREAM, list(overrides), BACKENDS, WORKLOADS)


def test_the_yamls_policy_reaches_every_stream_a_workload_builds(model, tmp_path):
    """Random prompts (warm-up and timed), a trace's window, a multi-turn stream, and a stream cut by duration_s."""
    from tests.replay import conversation_workload, trace_config, write_small_trace

    loaded = config("stream.release=spin")
    assert config().stream.release == "timerfd"
    random = RandomWorkload.build(RandomOptions(), loaded, model)
    point = SweepPoint(64, 32, None, random.name, 4.0)
    specs = [random.stream(point, phase, loaded.stream) for phase in ("warmup", "timed")]
    traced = trace_config(write_small_trace(tmp_path))
    traced.stream.release = "timer"
    specs.append(RandomWorkload.build(RandomOptions(), traced, model).stream(point, "timed", traced.stream))
    chats, chats_config = conversation_workload(model)
    chats_config.stream.release = "spin"
    specs.append(chats.stream(SweepPoint(chats.input_lengths()[0], 6, None, chats.name, 2.0), "timed",
                              chats_config.stream))
    specs.append(due_within(specs[1], specs[1].arrivals_s[1]))
    assert [s.release for s in specs] == ["spin", "spin", "timer", "spin", "spin"]
    assert specs[2].arrivals_s and specs[3].turns is not None and specs[4].num_requests < specs[1].num_requests


def test_a_bad_policy_is_one_line_naming_the_key_and_the_values(capsys):
    assert main([STREAM, "stream.release=busy", "--dry-run"]) == 2
    assert capsys.readouterr().err == "error: stream.release: 'busy' is not one of timerfd, timer, spin\n"


def test_resume_compares_the_policy_and_takes_a_folder_without_it_at_the_default(tmp_path):
    from app.resume import check_resumable
    from harness.errors import UserError

    older = to_plain(config())
    del older["stream"]["release"]  # measured before the key existed: by the kernel timer, the default
    check_resumable({"config": older}, config(), tmp_path)
    with pytest.raises(UserError, match=r"was measured with stream\.release='timerfd', this config has 'spin'"):
        check_resumable({"config": to_plain(config())}, config("stream.release=spin"), tmp_path)
