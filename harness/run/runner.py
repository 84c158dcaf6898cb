"""Run one backend entry over its planned points: load once, warm up, time, record.

Every point ends as exactly one `PointResult` handed to `events.finished`, whatever
happens: ok, skipped (memory guard, the engine's own limits, or after a smaller batch ran
out of memory), oom, or error. Ctrl-C (KeyboardInterrupt) is not caught here: the point in
flight is dropped and the caller keeps everything already reported.
The runner is the same in-process and in a worker process; only `events` differ.
"""

from __future__ import annotations

import dataclasses
import gc
import importlib
import time
from typing import Callable, Dict, List, Optional, Sequence, Set, Tuple

from harness.config.sweep import SweepConfig
from harness.errors import ShortOutputError, is_oom, lost_peer, one_line
from harness.measure import stats
from harness.measure.energy import EnergyMeter
from harness.measure.metrics import slo_attainment, slo_met
from harness.measure.quality import score_text
from harness.measure.records import SLO, BatchSample, PointResult, RunContext
from harness.model.spec import ModelSpec
from harness.plan.points import EntryPlan, PlannedPoint, SweepPoint, concurrency
from harness.scenarios.batch import BatchSpec, BatchTiming
from harness.scenarios.batch_search import BatchSearch
from harness.scenarios.rate_search import RateSearch
from harness.scenarios.stream import RequestTiming, StreamSpec, StreamTiming


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
        self.backend = None
        self.load_time_s: Optional[float] = None
        self.load_error: Optional[Tuple[str, str]] = None  # (status, message) for every point
        self.engine_stats: Dict[str, object] = {}
        self.first_token_ids = None  # of the point's first timed batch, for cross-checking engines
        self.first_inputs: Optional[BatchSpec] = None  # its prompts, or the timed stream's: what a probe looks at
        self.probing = plan.probe_logits
        self.perplexity: Optional[float] = None  # quality.text's, scored once after the load (score_text)
        self.energy_meter: Optional[EnergyMeter] = None  # the entry's GPUs' energy counters, where NVML has them
        self.memory_before_load_bytes: Optional[int] = None  # what peak_memory's counter held before the engine
        self.phase_s: Dict[str, float] = {}  # the point in flight: warmup_s, timed_s (the manifest's time budget)

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
        reason = pp.skip_reason or self._oom_skip_reason(pp.point)
        if reason:
            return self._result(pp, "skipped", reason, search=search)
        if self.backend is None and self.load_error is None:
            self._load()
        if self.load_error is not None:
            return self._result(pp, *self.load_error, search=search)
        p = pp.point
        reason = self.backend.cannot_run(max(1, concurrency(p)), self.workload.longest_input(p), p.output_length)
        if reason:
            return self._result(pp, "skipped", reason, search=search)
        if p.rate_search:
            return self._search_rate(pp)
        if p.batch_search:
            return self._search_batch(pp)
        return self._measure(pp, announce, search)

    def _load(self) -> None:
        self.events.loading()
        start = time.perf_counter()
        try:
            for module in self.plan.backend_cls.engine_modules:
                importlib.import_module(module)
            if self.plan.backend_cls.uses_hf_config:
                _ = self.model.hf_config  # built on first use: importing its config classes is not the load
            import_s = time.perf_counter() - start
            gate_wait_s = self.events.may_load()
            start = time.perf_counter()
            backend = self.plan.backend_cls(self.plan.options, self.model, self.plan.shape)
            self.memory_before_load_bytes = backend.peak_memory.current()
            backend.load()
        except Exception as e:
            status = "oom" if is_oom(e) else "error"
            self.load_error = (status, f"loading failed: {one_line(e)}")
            return
        self.backend, self.load_time_s = backend, time.perf_counter() - start
        self.engine_stats = backend.engine_stats()
        self.perplexity, scored = score_text(backend, self.plan)
        self.energy_meter = EnergyMeter.open(backend.placement.device, backend.placement.num_devices)
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
            search.record(rate, slo_met(slo_attainment(probe.stream, probe.slo), probe.slo))
        return self._result(pp, "ok", search="result", max_rate_within_slo=search.sustained,
                            search_probes=search.describe(), engine_stats=self.engine_stats)

    def _search_batch(self, pp: PlannedPoint) -> PointResult:
        """`batch_sizes: auto`: every batch tried is reported as a point of its own (`search` probe), held to the
        same checks as a planned one (the engine's limits, skip_larger_batches_after_oom), then the search's
        result row. A probe that fails other than by memory ends the search with that probe's status."""
        self.events.started(pp.point)
        plan, p = pp.search, pp.point
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
        found = dict(search="result", search_probes=search.describe(), estimated_memory_bytes=None,
                     engine_stats=self.engine_stats)
        if failure:
            return self._result(pp, "error", failure, **found)
        if search.largest_ok is None:  # the status of the one-sequence probe: oom, or skipped by the engine
            return self._result(pp, search.probes[-1][1], f"no batch ran: {search.describe()}", **found)
        return self._result(pp, "ok", max_batch_size_found=search.largest_ok, **found)

    def _measure(self, pp: PlannedPoint, announce: bool = True, search: str = "") -> PointResult:
        """The point timed, and its record built once: what ran, its peaks, then (untimed) its logits probe."""
        if announce:  # the parent tracks planned points; a search's probes are not planned
            self.events.started(pp.point)
        self.first_token_ids = self.first_inputs = None
        self.phase_s = {}
        self.backend.peak_memory.reset()
        samples: Tuple[BatchSample, ...] = ()
        stream: Optional[StreamTiming] = None
        status, error = "ok", ""
        try:
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
        measured = dict(peak_memory_bytes=self.backend.peak_memory.read(),
                        peak_host_memory_bytes=self.backend.peak_memory.read_host(),
                        engine_stats=self.engine_stats, phase_s=dict(self.phase_s),  # an OOM's up to where it stopped
                        token_ids=self.first_token_ids if ok else None,
                        converged=self._converged(samples) if samples else None)
        if self.probing and ok and self.first_inputs is not None:  # after the peak was read: untimed, unmetered
            measured["probe"] = self.backend.probe_logits(self.first_inputs)
        return self._result(pp, status, error, samples, stream, search=search, **measured)

    def _time_point(self, point: SweepPoint) -> List[BatchSample]:
        start = time.perf_counter()
        for i in range(self.config.num_warmup_batches):
            batch = self.workload.batch(point, "warmup", i)
            check_output(self.backend.run(batch), batch)
        self.phase_s["warmup_s"] = time.perf_counter() - start
        start = time.perf_counter()
        samples = []
        meter = self.energy_meter
        stop = self.config.stop if self.config.num_batches == "auto" else None
        for i in range(stop.max_batches if stop else self.config.num_batches):
            batch = self.workload.batch(point, "timed", i)
            before_j = meter.joules() if meter else None
            timing = self.backend.run(batch)
            energy_j = meter.joules() - before_j if meter else None
            check_output(timing, batch)
            samples.append(to_sample(i, timing, batch, energy_j))
            if i == 0:
                self.first_token_ids, self.first_inputs = timing.token_ids, batch
            if stop and len(samples) >= stop.min_batches and self._converged(samples):
                break
        self.phase_s["timed_s"] = time.perf_counter() - start
        return samples

    def _converged(self, samples: List[BatchSample]) -> Optional[bool]:
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
                judge_stream(self.backend.serve(warmup), warmup, share)
            except StreamFailed as e:  # untimed requests are not kept
                raise RuntimeError(f"warm-up: {e}") from None
        self.phase_s["warmup_s"] = time.perf_counter() - start
        start = time.perf_counter()
        timed = self.workload.stream(point, "timed", stream_config)
        timing = judge_stream(self.backend.serve(timed), timed, share)
        self.phase_s["timed_s"] = time.perf_counter() - start
        ids = tuple(r.token_ids for r in timing.requests)
        self.first_token_ids = ids if all(i is not None for i in ids) else None
        self.first_inputs = timed.requests
        return timing

    def _oom_skip_reason(self, point: SweepPoint) -> Optional[str]:
        if point.scenario == "stream":
            return None
        smallest = self.smallest_oom.get((point.input_length, point.output_length))
        if smallest is None or point.batch_size <= smallest:
            return None
        return f"batch size {smallest} ran out of memory at these lengths (skip_larger_batches_after_oom)"

    def _note_oom(self, point: SweepPoint) -> None:
        gc.collect()  # drop the failed batch's tensors before the next point allocates
        if self.config.skip_larger_batches_after_oom and point.scenario == "batch":
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
        )
        return PointResult(self.context, pp.point, status, error, tuple(samples), stream, **{**shared, **measured})


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


class StreamFailed(RuntimeError):
    """More of a stream's requests failed than stream.max_failed_share allows: the point is an error, and its
    requests (`timing`, failures marked) are still written."""

    def __init__(self, message: str, timing: StreamTiming):
        super().__init__(message)
        self.timing = timing


def judge_stream(timing: StreamTiming, stream: StreamSpec, max_failed_share: float) -> StreamTiming:
    """Every request must come back, in order; one that failed, or came back with a token count outside its budget
    (other than exactly it when forced), is a failed request. Returns the timing with those marked (`error`);
    raises StreamFailed, naming the first failure, when their share is over `max_failed_share`."""
    if len(timing.requests) != stream.num_requests:
        raise ShortOutputError(f"got {len(timing.requests)} request timings for a stream of {stream.num_requests}")
    assert [r.index for r in timing.requests] == list(range(stream.num_requests)), "requests out of order"
    judged = tuple(_judged(r, budget, stream.requests.forced)
                   for r, budget in zip(timing.requests, stream.requests.max_tokens))
    timing = dataclasses.replace(timing, requests=judged)
    failed = [r for r in judged if not r.ok]
    if len(failed) > max_failed_share * stream.num_requests:
        first = failed[0]
        raise StreamFailed(f"{len(failed)} of {stream.num_requests} requests failed (stream.max_failed_share: "
                           f"{max_failed_share:g}); request {first.index}: {first.error}", timing)
    return timing


def _judged(r: RequestTiming, budget: int, forced: bool) -> RequestTiming:
    if not r.ok:
        return r if r.error else dataclasses.replace(r, error="no tokens came back")
    if forced and r.output_tokens != budget:
        return dataclasses.replace(r, error=f"ShortOutputError: {r.output_tokens} tokens, {budget} were forced")
    if not 1 <= r.output_tokens <= budget:
        return dataclasses.replace(r, error=f"ShortOutputError: {r.output_tokens} tokens, outside 1..{budget}")
    return r


def to_sample(index: int, timing: BatchTiming, batch: BatchSpec, energy_j: Optional[float] = None) -> BatchSample:
    return BatchSample(index, timing.latency_ms, timing.ttft_ms, timing.tpot_ms, batch.input_tokens,
                       timing.output_tokens, timing.request_ttfts_ms(), timing.request_latencies_ms(), timing.spec,
                       energy_j, timing.cached_tokens)
