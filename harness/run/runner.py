"""Run one backend entry over its planned points: load once, warm up, time, record.

Every point ends as exactly one `PointResult` handed to `events.finished`, whatever
happens: ok, skipped (memory guard, the engine's own limits, or after a smaller batch ran
out of memory), oom, or error. Ctrl-C (KeyboardInterrupt) is not caught here: the point in
flight is dropped and the caller keeps everything already reported.
The runner is the same in-process and in a worker process; only `events` differ.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import importlib
import time
from typing import Any, Callable, ContextManager, Dict, List, Optional, Sequence, Set, Tuple

from harness.config.grid import grid_cell
from harness.config.sweep import SweepConfig
from harness.errors import is_oom, lost_peer, one_line
from harness.measure import stats
from harness.measure.energy import EnergyMeter
from harness.measure.gpu_validity import GpuMonitor
from harness.measure.metrics import slo_attainment, slo_met
from harness.measure.quality import score_entry
from harness.measure.records import SLO, BatchSample, PointResult, RunContext
from harness.model.spec import ModelSpec
from harness.plan.engine import Engine
from harness.plan.entry import EntryPlan
from harness.plan.points import PlannedPoint, SweepPoint, concurrency
from harness.scenarios.accuracy import TaskScore
from harness.scenarios.batch import BatchSpec, BatchTiming
from harness.run.output_checks import StreamFailed, check_output, judge_stream
from harness.scenarios.batch_search import BatchSearch
from harness.scenarios.rate_search import RateSearch
from harness.scenarios.saturation import SaturationStop, judge
from harness.scenarios.time_bound import due_within
from harness.scenarios.stream import StreamTiming


class RunEvents:
    """What a runner reports as it goes. In-process, only results matter; a worker forwards all of it."""

    def __init__(self, emit: Callable[[PointResult], None]):
        self.emit = emit

    def loading(self) -> None:
        pass

    def loaded(self, info: dict) -> None:
        pass

    def may_load(self) -> float:
        """Block until the engine may take memory (a worker waits for the previous entry's to end); seconds waited."""
        return 0.0

    def started(self, point: SweepPoint) -> None:
        pass

    def closing(self) -> None:
        pass

    def finished(self, result: PointResult) -> None:
        self.emit(result)


class EntryRunner:
    def __init__(self, plan: EntryPlan, model: ModelSpec, config: SweepConfig, context: RunContext,
                 events: RunEvents):
        self.plan, self.model, self.config, self.context, self.events = plan, model, config, context, events
        self.workload = plan.workload
        self.smallest_oom: Dict[Tuple[int, int], int] = {}
        self.backend: Optional[Engine] = None  # built by the first point that runs (`_load`)
        self.load_time_s: Optional[float] = None
        self.load_error: Optional[Tuple[str, str]] = None  # (status, message) for every point
        self.engine_stats: Dict[str, object] = {}
        # Of the point's first timed batch (a stream's requests), for cross-checking engines.
        self.first_token_ids: Optional[Tuple[Tuple[int, ...], ...]] = None
        self.first_inputs: Optional[BatchSpec] = None  # its prompts, or the timed stream's: what a probe looks at
        self.probing = plan.probe_logits
        self.perplexity: Optional[float] = None  # quality.text's, scored once after the load (score_text)
        self.accuracy: Optional[TaskScore] = None  # accuracy.tasks' examples pooled, answered once after the load
        self.energy_meter: Optional[EnergyMeter] = None  # the entry's GPUs' energy counters, where NVML has them
        self.gpu_monitor: Optional[GpuMonitor] = None  # their clocks, reasons and other processes, where NVML has them
        self.memory_before_load_bytes: Optional[int] = None  # what peak_memory's counter held before the engine
        self.phase_s: Dict[str, float] = {}  # the point in flight: warmup_s, timed_s (the manifest's time budget)
        self.saturation = SaturationStop(config.stream.stop_at_saturation)  # a rate sweep's saturated rates

    def run(self, done: Set[tuple]) -> None:
        todo = [pp for pp in self.plan.points if self.context.key(pp.point) not in done]
        try:
            for pp in todo:
                self.events.finished(self._run_point(pp))
        finally:
            if self.backend is not None:
                self.events.closing()
                self.backend.close()

    def _run_point(self, pp: PlannedPoint, announce: bool = True, search: str = "") -> PointResult:
        """`announce`: tell the parent which planned point is in flight; a search's probes are not planned (and
        are marked `search`: "probe")."""
        reason = (pp.skip_reason or self._oom_skip_reason(pp.point)
                  or self.saturation.skip_reason(_rateless(pp.point), pp.point.request_rate))
        if reason:
            return self._result(pp, "skipped", reason, search=search)
        if self.backend is None and self.load_error is None:
            self._load()
        if self.load_error is not None:
            return self._result(pp, *self.load_error, search=search)
        p = pp.point
        reason = self.engine.cannot_run(max(1, concurrency(p)), self.workload.longest_input(p), p.output_length)
        if reason:
            return self._result(pp, "skipped", reason, search=search)
        if p.rate_search:
            return self._search_rate(pp)
        if p.batch_search:
            return self._search_batch(pp)
        return self._measure(pp, announce, search)

    @property
    def engine(self) -> Engine:
        """The loaded engine: every caller runs after `_load` succeeded (`_run_point` checks load_error first)."""
        assert self.backend is not None, "the engine is used before it loaded"
        return self.backend

    def _load(self) -> None:
        self.events.loading()
        start = time.perf_counter()
        try:
            for module in self.plan.backend_cls.worker_imports():
                importlib.import_module(module)
            if self.plan.backend_cls.uses_hf_config:
                _ = self.model.hf_config  # built on first use: importing its config classes is not the load
            import_s = time.perf_counter() - start
            gate_wait_s = self.events.may_load()
            start = time.perf_counter()
            backend = self.plan.backend_cls(self.plan.options, self.model, self.plan.shape)
            self.memory_before_load_bytes = backend.peak_memory.current()
            backend.load()
            if not self.config.keep_prefix_cache:  # at load too: its runtime info then says whether it can
                backend.reset_prefix_cache()
        except Exception as e:
            status = "oom" if is_oom(e) else "error"
            self.load_error = (status, f"loading failed: {one_line(e)}")
            return
        self.backend, self.load_time_s = backend, time.perf_counter() - start
        self.engine_stats = backend.engine_stats()
        self.perplexity, self.accuracy, scored = score_entry(backend, self.plan)
        self.energy_meter = EnergyMeter.open(backend.placement.device, backend.placement.num_devices)
        self.gpu_monitor = GpuMonitor.open(backend.placement.device, backend.placement.num_devices)
        self.events.loaded({"load_time_s": self.load_time_s, "engine_import_s": import_s, "gate_wait_s": gate_wait_s,
                            **backend.runtime_info(), **scored})

    def _search_rate(self, pp: PlannedPoint) -> PointResult:
        """`request_rates: auto`: every probe is reported as a stream point of its own (`search` probe), then
        the search's result row; a probe that fails ends the search with that probe's status."""
        self.events.started(pp.point)
        s = self.config.stream.search
        search = RateSearch(s.start_rate, s.precision, s.max_probes)
        while (rate := search.next_rate()) is not None:
            probe = self._measure(PlannedPoint(dataclasses.replace(pp.point, request_rate=rate), pp.estimate),
                                  announce=False, search="probe")
            self.events.finished(probe)
            if probe.status != "ok":  # "result" keeps the probes on --resume
                return self._result(pp, probe.status, f"rate search stopped: the probe at {rate:g}/s: {probe.error}",
                                    search="result")
            assert probe.stream is not None and probe.slo is not None  # an ok stream point has both
            search.record(rate, slo_met(slo_attainment(probe.stream, probe.slo), probe.slo),
                          saturated=bool(probe.saturated) and self.config.stream.stop_at_saturation)
        return self._result(pp, "ok", search="result", max_rate_within_slo=search.sustained,
                            search_probes=search.describe(), engine_stats=self.engine_stats)

    def _search_batch(self, pp: PlannedPoint) -> PointResult:
        """`batch_sizes: auto`: every batch tried is reported as a point of its own (`search` probe), held to the
        same checks as a planned one (the engine's limits, skip_larger_batches_after_oom), then the search's
        result row. A probe that fails other than by memory ends the search with that probe's status."""
        self.events.started(pp.point)
        plan, p = pp.search, pp.point
        assert plan is not None  # the planner gives every batch_sizes: auto point its search
        search = BatchSearch(plan.start, plan.limit, plan.limit_reason)
        failure = None
        while failure is None and (size := search.next_batch()) is not None:
            point = dataclasses.replace(p, batch_size=size, batch_search=False)
            estimate = self.plan.backend_cls.estimate_memory(self.plan.options, self.model, size,
                                                             self.workload.longest_input(point), p.output_length)
            probe = self._run_point(PlannedPoint(point, estimate), announce=False, search="probe")
            self.events.finished(probe)
            if probe.status == "error":
                failure = f"batch search stopped: the probe at batch size {size}: {probe.error}"
            else:
                search.record(size, probe.status)
        # "result" also keeps the probes of a failed search on --resume; each probe's row has its own estimate.
        found: Dict[str, Any] = dict(search="result", search_probes=search.describe(), estimated_memory_bytes=None,
                     engine_stats=self.engine_stats)
        if failure:
            return self._result(pp, "error", failure, **found)
        if search.largest_ok is None:  # the status of the one-sequence probe: oom, or skipped by the engine
            return self._result(pp, search.probes[-1][1], f"no batch ran: {search.describe()}", **found)
        return self._result(pp, "ok", max_batch_size_found=search.largest_ok, **found)

    def _measure(self, pp: PlannedPoint, announce: bool = True, search: str = "") -> PointResult:
        """The point timed, and its record built once: what ran, its peaks, then (untimed) its logits probe and,
        with `profile: true`, its first timed batch run once more under the engine's profiler."""
        if announce:  # the parent tracks planned points; a search's probes are not planned
            self.events.started(pp.point)
        self.first_token_ids = self.first_inputs = None
        self.phase_s = {}
        if self.gpu_monitor:  # a point that fails before its timed phase has no validity, not the last point's
            self.gpu_monitor.last = None
        self.engine.peak_memory.reset()
        samples: Tuple[BatchSample, ...] = ()
        stream: Optional[StreamTiming] = None
        status, error = "ok", ""
        try:
            if not self.config.keep_prefix_cache:  # a point's cache hits are its own
                self.engine.reset_prefix_cache()
            if pp.point.scenario == "stream":
                stream = self._serve_point(pp.point)
            else:
                samples = tuple(self._time_point(pp.point))
        except StreamFailed as e:  # its message says what failed; its requests are kept
            return self._result(pp, "error", " ".join(str(e).split())[:500], stream=e.timing, search=search)
        except Exception as e:
            if lost_peer(e) and self.plan.backend_cls.distributed:
                raise
            if not is_oom(e):
                return self._result(pp, "error", one_line(e), search=search)
            status, error = "oom", one_line(e)
            self._note_oom(pp.point)
        ok = status == "ok"
        saturation = judge(stream, self.config.stream.saturation_margin) if stream is not None and ok else None
        self.saturation.note(_rateless(pp.point), pp.point.request_rate, saturation)
        measured: Dict[str, Any] = dict(peak_memory_bytes=self.engine.peak_memory.read(),
                        peak_host_memory_bytes=self.engine.peak_memory.read_host(),
                        engine_stats=self.engine_stats, phase_s=dict(self.phase_s),  # an OOM's up to where it stopped
                        token_ids=self.first_token_ids if ok else None,
                        converged=self._converged(samples) if samples else None,
                        saturated=None if saturation is None else saturation.saturated,
                        saturation_reason=saturation.reason if saturation else "",
                        gpu_validity=self.gpu_monitor.last if self.gpu_monitor else None)
        if self.probing and ok and self.first_inputs is not None:  # after the peak was read: untimed, unmetered
            measured["probe"] = self.engine.probe_logits(self.first_inputs)
        if self.plan.options.profile and ok and samples and self.first_inputs is not None:  # last: untimed
            measured["profile_trace"] = self.engine.profile(self.first_inputs)
        return self._result(pp, status, error, samples, stream, search=search, **measured)

    def _time_point(self, point: SweepPoint) -> List[BatchSample]:
        start = time.perf_counter()
        for i in range(self.config.num_warmup_batches):
            batch = self.workload.batch(point, "warmup", i)
            check_output(self.engine.run(batch), batch)
        self.phase_s["warmup_s"] = time.perf_counter() - start
        start = time.perf_counter()
        samples: List[BatchSample] = []
        meter = self.energy_meter
        num_batches = self.config.num_batches
        stop = self.config.stop if num_batches == "auto" else None
        with self._watched():
            for i in range(self.config.stop.max_batches if num_batches == "auto" else num_batches):
                batch = self.workload.batch(point, "timed", i)
                before_j = meter.joules() if meter else 0.0
                timing = self.engine.run(batch)
                energy_j = meter.joules() - before_j if meter else None
                check_output(timing, batch)
                samples.append(to_sample(i, timing, batch, energy_j))
                if i == 0:
                    self.first_token_ids, self.first_inputs = timing.token_ids, batch
                if stop and len(samples) >= stop.min_batches and self._converged(samples):
                    break
        self.phase_s["timed_s"] = time.perf_counter() - start
        return samples

    def _watched(self) -> ContextManager[None]:
        """The timed phase under the GPU monitor, where there is one (the point's validity: gpu_monitor.last)."""
        return self.gpu_monitor.watching() if self.gpu_monitor else contextlib.nullcontext()

    def _converged(self, samples: Sequence[BatchSample]) -> Optional[bool]:
        """num_batches: auto: is the mean latency known to within stop.target_ci_pct? None with a fixed count."""
        if self.config.num_batches != "auto":
            return None
        return stats.within(stats.mean_interval([s.latency_ms for s in samples]), self.config.stop.target_ci_pct)

    def _serve_point(self, point: SweepPoint) -> StreamTiming:
        """The warm-up stream, run to its end, then the timed one: warm-up requests never share the engine with
        timed ones."""
        stream_config = self.config.stream
        start = time.perf_counter()
        share = stream_config.max_failed_share
        if stream_config.num_warmup_requests:
            warmup = self.workload.stream(point, "warmup", stream_config)
            try:
                judge_stream(self.engine.serve(warmup), warmup, share)
            except StreamFailed as e:  # untimed requests are not kept
                raise RuntimeError(f"warm-up: {e}") from None
        self.phase_s["warmup_s"] = time.perf_counter() - start
        start = time.perf_counter()
        timed = due_within(self.workload.stream(point, "timed", stream_config), stream_config.duration_s)
        with self._watched():
            timing = judge_stream(self.engine.serve(timed), timed, share)
        self.phase_s["timed_s"] = time.perf_counter() - start
        ids = [r.token_ids for r in timing.requests]
        self.first_token_ids = tuple(i for i in ids if i is not None) if all(i is not None for i in ids) else None
        self.first_inputs = timed.requests
        return timing

    def _oom_skip_reason(self, point: SweepPoint) -> Optional[str]:
        if point.scenario == "stream":
            return None
        smallest = self.smallest_oom.get((point.input_length, point.output_length))
        # A batch search's own point (no size) is never skipped here: each of its probes is, by its size.
        if smallest is None or point.batch_size is None or point.batch_size <= smallest:
            return None
        return f"batch size {smallest} ran out of memory at these lengths (skip_larger_batches_after_oom)"

    def _note_oom(self, point: SweepPoint) -> None:
        gc.collect()  # drop the failed batch's tensors before the next point allocates
        if self.config.skip_larger_batches_after_oom and point.scenario == "batch" and point.batch_size is not None:
            key = (point.input_length, point.output_length)
            self.smallest_oom[key] = min(point.batch_size, self.smallest_oom.get(key, point.batch_size))

    def _result(self, pp: PlannedPoint, status: str, error: str = "", samples: Sequence[BatchSample] = (),
                stream: Optional[StreamTiming] = None, **measured) -> PointResult:
        """The point's one record: what every point of the entry shares, its outcome, and `measured` (PointResult's
        other fields, where the point got that far)."""
        warmup = self.config.stream.num_warmup_requests if stream else self.config.num_warmup_batches
        slo = self.config.stream.slo
        spec = self.plan.options.speculative
        shared = dict(
            slo=SLO(slo.ttft_ms, slo.tpot_ms, slo.percentile) if pp.point.scenario == "stream" else None,
            num_warmup_batches=warmup if (samples or stream) else 0,
            load_time_s=self.load_time_s,
            estimated_memory_bytes=pp.estimate.total_bytes, memory_before_load_bytes=self.memory_before_load_bytes,
            spec_method=spec.method if spec else "", spec_tokens=spec.num_speculative_tokens if spec else None,
            quantization=self.plan.options.quantization, perplexity=self.perplexity,
            accuracy=self.accuracy,
            grid_options=grid_cell(self.plan.options.grid_values),
        )
        return PointResult(self.context, pp.point, status, error, tuple(samples), stream, **{**shared, **measured})


def _rateless(point: SweepPoint) -> SweepPoint:
    """What a rate sweep's points at one length pair, cap and workload share: the key of stream.stop_at_saturation."""
    return dataclasses.replace(point, request_rate=None)


def to_sample(index: int, timing: BatchTiming, batch: BatchSpec, energy_j: Optional[float] = None) -> BatchSample:
    return BatchSample(index, timing.latency_ms, timing.ttft_ms, timing.tpot_ms, batch.input_tokens,
                       timing.output_tokens, timing.request_ttfts_ms(), timing.request_latencies_ms(), timing.spec,
                       energy_j, timing.cached_tokens)
