"""Failure handling of one backend entry, with scripted backends: OOM, errors, short outputs, load failures."""

import time

import torch

from backends.base import Backend, BackendOptions, Placement
from harness.config.sections import StopConfig
from harness.config.sweep import SweepConfig
from harness.measure.records import RunContext, point_key
from harness.model.memory import MemoryEstimate
from harness.plan.entry import EntryPlan
from harness.plan.points import PlannedPoint, SweepPoint
from harness.run.runner import EntryRunner, RunEvents
from harness.scenarios.batch import BatchTiming
from workloads.random_ids import RandomOptions, RandomWorkload


class Scripted(Backend):
    """Answers instantly; `fail(batch)` may return an exception to raise or a shorter length to produce."""

    fail = staticmethod(lambda batch: None)
    runs = []

    @classmethod
    def resolve_placement(cls, options):
        return Placement("cpu")

    def load(self):
        pass

    def run(self, batch):
        type(self).runs.append((batch.batch_size, max(batch.input_tokens), batch.max_output_tokens))
        outcome = self.fail(batch)
        if isinstance(outcome, Exception):
            raise outcome
        produced = outcome if isinstance(outcome, int) else batch.max_output_tokens
        t = time.perf_counter()
        return BatchTiming(t, t + 0.001, t + 0.002, t + 0.003, (produced,) * batch.batch_size)


def run_entry(model, backend_cls, batch_sizes=(1, 4, 8, 16), lengths=((16, 4),), done=(), skip=None, **cfg):
    config = SweepConfig(benchmark_name="t", batch_sizes=list(batch_sizes), input_lengths=[i for i, _ in lengths],
                         output_lengths=[o for _, o in lengths], num_warmup_batches=1,
                         workload=RandomOptions(), **{"num_batches": 2, **cfg})
    points = [PlannedPoint(SweepPoint(i, o, b), MemoryEstimate(1, 1, 1), skip)
              for i, o in lengths for b in batch_sizes]
    workload = RandomWorkload.build(RandomOptions(), config, model)
    plan = EntryPlan(BackendOptions(name="scripted"), backend_cls, Placement("cpu"), 10**12, points, workload, model)
    context = RunContext("t", "scripted", "tiny-llama", "fp32", "cpu", 1, 1)
    results = []
    backend_cls.runs = []
    EntryRunner(plan, model, config, context, RunEvents(results.append)).run(set(done))
    return {(r.point.batch_size, r.point.input_length, r.point.output_length): r for r in results}


def test_oom_skips_larger_batches_at_the_same_lengths(model):
    class OOM(Scripted):
        fail = staticmethod(lambda b: torch.OutOfMemoryError("CUDA out of memory") if b.batch_size >= 8 else None)

    r = run_entry(model, OOM, lengths=((16, 4), (32, 4)))
    assert [r[(b, 16, 4)].status for b in (1, 4, 8, 16)] == ["ok", "ok", "oom", "skipped"]
    assert r[(16, 16, 4)].error == "batch size 8 ran out of memory at these lengths (skip_larger_batches_after_oom)"
    assert r[(8, 16, 4)].error.startswith("OutOfMemoryError: CUDA out of memory")
    assert [r[(b, 32, 4)].status for b in (1, 4, 8, 16)] == ["ok", "ok", "oom", "skipped"]
    assert (16, 16, 4) not in OOM.runs


def test_oom_skip_can_be_turned_off(model):
    class OOM(Scripted):
        fail = staticmethod(lambda b: torch.OutOfMemoryError("oom") if b.batch_size == 8 else None)

    r = run_entry(model, OOM, skip_larger_batches_after_oom=False)
    assert [r[(b, 16, 4)].status for b in (1, 4, 8, 16)] == ["ok", "ok", "oom", "ok"]


def test_an_error_is_recorded_and_the_sweep_goes_on(model):
    class Flaky(Scripted):
        fail = staticmethod(lambda b: ValueError("bad\nthing") if b.batch_size == 4 else None)

    r = run_entry(model, Flaky)
    assert [r[(b, 16, 4)].status for b in (1, 4, 8, 16)] == ["ok", "error", "ok", "ok"]
    assert r[(4, 16, 4)].error == "ValueError: bad thing"
    assert r[(4, 16, 4)].samples == ()


def test_short_output_is_an_error_not_a_number(model):
    class Short(Scripted):
        fail = staticmethod(lambda b: 3 if b.batch_size == 8 else None)

    r = run_entry(model, Short)
    assert r[(8, 16, 4)].status == "error"
    assert r[(8, 16, 4)].error == "ShortOutputError: a sequence produced 3 tokens, 4 were forced"


def test_load_failure_marks_every_point(model):
    class Broken(Scripted):
        def load(self):
            raise RuntimeError("no weights")

    r = run_entry(model, Broken, batch_sizes=(1, 2))
    assert {x.status for x in r.values()} == {"error"}
    assert r[(2, 16, 4)].error == "loading failed: RuntimeError: no weights"


def test_warmup_then_timed_batches_and_done_points_are_skipped(model):
    done = {point_key("tiny-llama", "scripted", SweepPoint(16, 4, 1))}
    r = run_entry(model, Scripted, batch_sizes=(1, 2), done=done)
    assert set(r) == {(2, 16, 4)}
    assert Scripted.runs == [(2, 16, 4)] * 3  # 1 warm-up + 2 timed
    assert len(r[(2, 16, 4)].samples) == 2 and r[(2, 16, 4)].num_warmup_batches == 1


def test_planned_skips_never_load_the_model(model):
    class NeverLoad(Scripted):
        def load(self):
            raise AssertionError("loaded a model for skipped points")

    r = run_entry(model, NeverLoad, batch_sizes=(1,), skip="needs an estimated 99 GiB")
    assert r[(1, 16, 4)].status == "skipped" and r[(1, 16, 4)].error == "needs an estimated 99 GiB"


class Alternating(Scripted):
    """Batches alternate between 3 ms and 30 ms: the mean is never known to within a few percent."""

    calls = 0

    def run(self, batch):
        type(self).calls += 1
        d = 0.001 if self.calls % 2 else 0.010
        t = time.perf_counter()
        return BatchTiming(t, t + d, t + 2 * d, t + 3 * d, (batch.max_output_tokens,) * batch.batch_size)


def test_num_batches_auto_stops_when_converged_or_at_max_batches(model):
    stop = StopConfig(target_ci_pct=2.0, min_batches=3, max_batches=7)
    steady = run_entry(model, Scripted, batch_sizes=(1,), num_batches="auto", stop=stop)[(1, 16, 4)]
    assert steady.converged is True and len(steady.samples) == 3  # 3 ms every time: narrow at the minimum
    noisy = run_entry(model, Alternating, batch_sizes=(1,), num_batches="auto", stop=stop)[(1, 16, 4)]
    assert noisy.converged is False and len(noisy.samples) == 7
    fixed = run_entry(model, Alternating, batch_sizes=(1,))[(1, 16, 4)]
    assert fixed.converged is None and len(fixed.samples) == 2
