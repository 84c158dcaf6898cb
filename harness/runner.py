"""Run one backend entry over its planned points: load once, warm up, time, record.

Every point ends as exactly one `PointResult` handed to `events.finished`, whatever
happens: ok, skipped (memory guard, the engine's own limits, or after a smaller batch ran
out of memory), oom, or error. Ctrl-C (KeyboardInterrupt) is not caught here: the point in
flight is dropped and the caller keeps everything already reported.
The runner is the same in-process and in a worker process; only `events` differ.
"""

from __future__ import annotations

import gc
import time
from typing import Callable, Dict, List, Optional, Set, Tuple

from harness.config import SweepConfig
from harness.errors import ShortOutputError
from harness.models import ModelSpec
from harness.records import BatchSample, PointResult, RunContext, point_key
from harness.sweep import EntryPlan, PlannedPoint, SweepPoint
from harness.timing import BatchSpec, BatchTiming

class RunEvents:
    """What a runner reports as it goes. In-process, only results matter; a worker forwards all of it."""

    def __init__(self, emit: Callable[[PointResult], None]):
        self.emit = emit

    def loading(self) -> None:
        pass

    def loaded(self, info: dict) -> None:
        pass

    def started(self, point: SweepPoint) -> None:
        pass

    def finished(self, result: PointResult) -> None:
        self.emit(result)


class EntryRunner:
    def __init__(self, plan: EntryPlan, model: ModelSpec, config: SweepConfig, context: RunContext,
                 events: RunEvents):
        self.plan, self.model, self.config, self.context, self.events = plan, model, config, context, events
        self.workload = plan.workload
        self.smallest_oom: Dict[Tuple[int, int], int] = {}
        self.backend = None
        self.load_time_s: Optional[float] = None
        self.load_error: Optional[Tuple[str, str]] = None  # (status, message) for every point
        self.engine_stats: Dict[str, object] = {}
        self.first_token_ids = None  # of the point's first timed batch, for cross-checking engines

    def run(self, done: Set[tuple]) -> None:
        todo = [pp for pp in self.plan.points if point_key(self.context.backend, pp.point) not in done]
        try:
            for pp in todo:
                self.events.finished(self._run_point(pp))
        finally:
            if self.backend is not None:
                self.backend.close()

    def _run_point(self, pp: PlannedPoint) -> PointResult:
        reason = pp.skip_reason or self._oom_skip_reason(pp.point)
        if reason:
            return self._result(pp, "skipped", reason)
        if self.backend is None and self.load_error is None:
            self._load()
        if self.load_error is not None:
            return self._result(pp, *self.load_error)
        p = pp.point
        reason = self.backend.cannot_run(p.batch_size, self.workload.longest_input(p), p.output_length)
        if reason:
            return self._result(pp, "skipped", reason)
        return self._measure(pp)

    def _load(self) -> None:
        self.events.loading()
        start = time.perf_counter()
        try:
            backend = self.plan.backend_cls(self.plan.options, self.model, self.plan.shape)
            backend.load()
        except Exception as e:
            status = "oom" if is_oom(e) else "error"
            self.load_error = (status, f"loading failed: {one_line(e)}")
            return
        self.backend, self.load_time_s = backend, time.perf_counter() - start
        self.engine_stats = backend.engine_stats()
        self.events.loaded({"load_time_s": self.load_time_s, **backend.runtime_info()})

    def _measure(self, pp: PlannedPoint) -> PointResult:
        self.events.started(pp.point)
        self.first_token_ids = None
        self.backend.peak_memory.reset()
        try:
            samples = self._time_point(pp.point)
            result = self._result(pp, "ok", samples=samples)
        except Exception as e:
            if not is_oom(e):
                return self._result(pp, "error", one_line(e))
            result = self._result(pp, "oom", one_line(e))
            self._note_oom(pp.point)
        result.peak_memory_bytes = self.backend.peak_memory.read()
        result.engine_stats = self.engine_stats
        result.token_ids = self.first_token_ids if result.status == "ok" else None
        return result

    def _time_point(self, point: SweepPoint) -> List[BatchSample]:
        for i in range(self.config.num_warmup_batches):
            batch = self.workload.batch(point, "warmup", i)
            check_output(self.backend.run(batch), batch)
        samples = []
        for i in range(self.config.num_batches):
            batch = self.workload.batch(point, "timed", i)
            timing = self.backend.run(batch)
            check_output(timing, batch)
            samples.append(to_sample(i, timing, batch))
            if i == 0:
                self.first_token_ids = timing.token_ids
        return samples

    def _oom_skip_reason(self, point: SweepPoint) -> Optional[str]:
        smallest = self.smallest_oom.get((point.input_length, point.output_length))
        if smallest is None or point.batch_size <= smallest:
            return None
        return f"batch size {smallest} ran out of memory at these lengths (skip_larger_batches_after_oom)"

    def _note_oom(self, point: SweepPoint) -> None:
        gc.collect()  # drop the failed batch's tensors before the next point allocates
        if self.config.skip_larger_batches_after_oom:
            key = (point.input_length, point.output_length)
            self.smallest_oom[key] = min(point.batch_size, self.smallest_oom.get(key, point.batch_size))

    def _result(self, pp: PlannedPoint, status: str, error: str = "", samples=()) -> PointResult:
        return PointResult(
            self.context, pp.point, status, error, list(samples),
            num_warmup_batches=self.config.num_warmup_batches if samples else 0,
            load_time_s=self.load_time_s,
            estimated_memory_bytes=pp.estimate.total_bytes,
        )


def check_output(timing: BatchTiming, batch: BatchSpec) -> None:
    """A forced sequence that came back short, or any sequence over its budget, makes the point's numbers
    meaningless: fail the point rather than report them."""
    if len(timing.output_tokens) != batch.batch_size:
        raise ShortOutputError(f"got {len(timing.output_tokens)} outputs for a batch of {batch.batch_size}")
    for got, budget in zip(timing.output_tokens, batch.max_tokens):
        if batch.forced and got != budget:
            raise ShortOutputError(f"a sequence produced {got} tokens, {budget} were forced")
        if not 1 <= got <= budget:
            raise ShortOutputError(f"a sequence produced {got} tokens, outside 1..{budget}")


def to_sample(index: int, timing: BatchTiming, batch: BatchSpec) -> BatchSample:
    return BatchSample(index, timing.latency_ms, timing.ttft_ms, timing.tpot_ms, batch.input_tokens,
                       timing.output_tokens, timing.request_ttfts_ms(), timing.request_latencies_ms())


def is_oom(e: BaseException) -> bool:
    """Device OOM, or the host allocator failing (PyTorch's CPU allocator raises a RuntimeError)."""
    import torch

    if isinstance(e, (torch.OutOfMemoryError, MemoryError)):
        return True
    return isinstance(e, RuntimeError) and "can't allocate memory" in str(e)


def one_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return f"{type(e).__name__}: {text}"[:500] if text else type(e).__name__
