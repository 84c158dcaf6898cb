"""`batch_sizes: auto`: the search's arithmetic, its plan, the runner's probes, and the rows it leaves behind."""

import time

import pytest
import torch

from backends.base import Backend, BackendOptions, Placement
from harness.config.sweep import SweepConfig
from harness.measure.records import RunContext
from harness.measure.sink import result_row
from harness.measure.writers import ResultsDir, read_rows
from harness.model.memory import MemoryEstimate
from harness.plan.entry import EntryPlan
from harness.plan.points import BatchSearchPlan, PlannedPoint, SweepPoint
from harness.plan.sweep import plan_batch_search
from harness.run.runner import EntryRunner, RunEvents
from harness.scenarios.batch import BatchTiming
from harness.scenarios.batch_search import BatchSearch
from workloads.random_ids import RandomOptions, RandomWorkload


def write_point(out: ResultsDir, result) -> None:
    out.write_point(result, result_row(result))


def search_for(capacity: int, start: int, limit: int = 1024) -> BatchSearch:
    """An engine that runs every batch up to `capacity` sequences and runs out of memory beyond."""
    search = BatchSearch(start, limit, f"max_batch_size {limit}")
    while (size := search.next_batch()) is not None:
        search.record(size, "ok" if size <= capacity else "oom")
    return search


@pytest.mark.parametrize("capacity,start", [(100, 8), (100, 300), (1, 1), (1, 64), (37, 37), (640, 1000)])
def test_finds_the_largest_batch_that_runs(capacity, start):
    search = search_for(capacity, start)
    assert search.largest_ok == capacity
    assert search.smallest_failed == capacity + 1
    assert search.probes[0] == (start, "ok" if start <= capacity else "oom")
    assert len(search.probes) <= 2 * 11  # doubling or halving, then bisecting: logarithmic either way


def test_doubles_from_the_estimate_then_bisects():
    search = search_for(100, start=8)
    assert [s for s, _ in search.probes] == [8, 16, 32, 64, 128, 96, 112, 104, 100, 102, 101]
    assert search.describe() == ("probes: 8 ok, 16 ok, 32 ok, 64 ok, 128 oom, 96 ok, 112 oom, 104 oom, 100 ok, "
                                 "102 oom, 101 oom")


def test_halves_when_the_estimate_is_too_large():
    search = search_for(30, start=64)
    assert [s for s, _ in search.probes][:3] == [64, 32, 16]
    assert search.largest_ok == 30


def test_stops_at_the_limit_and_says_why():
    search = search_for(5000, start=100, limit=256)
    assert [s for s, _ in search.probes] == [100, 200, 256]
    assert search.largest_ok == 256 and search.smallest_failed is None
    assert search.describe().endswith("; stopped at the limit: max_batch_size 256")


def test_nothing_runs():
    search = search_for(0, start=4)
    assert [s for s, _ in search.probes] == [4, 2, 1]
    assert search.largest_ok is None and search.describe().endswith("; not even one sequence ran")


def test_start_is_clamped_to_the_limit():
    assert BatchSearch(start=5000, limit=64).next_batch() == 64


def test_the_plan_starts_at_the_estimate_and_a_host_never_goes_past_it(model):
    from backends.generate.hf import HFBackend, HFOptions

    config = SweepConfig(benchmark_name="t", batch_sizes="auto", output_lengths=[64], workload=RandomOptions())
    point = SweepPoint(512, 64, None, batch_search=True)
    one = HFBackend.estimate_memory(HFOptions(name="hf"), model, 1, 512, 64).total_bytes
    budget = 20 * one
    cpu = plan_batch_search(HFBackend, HFOptions(name="hf"), model, point, 512, budget, "cpu", config)
    fits = [n for n in range(1, 1024) if HFBackend.estimate_memory(HFOptions(name="hf"), model, n, 512, 64)
            .total_bytes <= budget]
    assert cpu.start == cpu.limit == max(fits) < 1023
    assert "memory estimate" in cpu.limit_reason
    gpu = plan_batch_search(HFBackend, HFOptions(name="hf"), model, point, 512, budget, "cuda", config)
    assert (gpu.start, gpu.limit, gpu.limit_reason) == (max(fits), 1024, "max_batch_size 1024")
    config.max_batch_size = 4
    assert plan_batch_search(HFBackend, HFOptions(name="hf"), model, point, 512, budget, "cpu", config) == \
        BatchSearchPlan(4, 4, "max_batch_size 4")


class Bounded(Backend):
    """Answers instantly; batches above `capacity` sequences raise a CUDA out-of-memory error."""

    capacity = 20
    runs = []

    @classmethod
    def resolve_placement(cls, options):
        return Placement("cpu")

    @classmethod
    def estimate_memory(cls, options, model, batch_size, input_length, output_length):
        return MemoryEstimate(1, batch_size, 1)

    def load(self):
        pass

    def run(self, batch):
        type(self).runs.append(batch.batch_size)
        if batch.batch_size > self.capacity:
            raise torch.OutOfMemoryError("CUDA out of memory")
        t = time.perf_counter()
        return BatchTiming(t, t + 0.001, t + 0.002, t + 0.003, (batch.max_output_tokens,) * batch.batch_size)


def search_entry(model, backend_cls, start=8, limit=64):
    config = SweepConfig(benchmark_name="t", batch_sizes="auto", input_lengths=[16], output_lengths=[4],
                         num_batches=2, num_warmup_batches=0, workload=RandomOptions())
    point = PlannedPoint(SweepPoint(16, 4, None, batch_search=True), MemoryEstimate(1, 1, 1),
                         search=BatchSearchPlan(start, limit, f"max_batch_size {limit}"))
    workload = RandomWorkload.build(RandomOptions(), config, model)
    plan = EntryPlan(BackendOptions(name="bounded"), backend_cls, Placement("cpu"), 10**12, [point], workload, model)
    context = RunContext("t", "bounded", "tiny-llama", "fp32", "cpu", 1, 1)
    results, started = [], []
    events = RunEvents(results.append)
    events.started = started.append
    backend_cls.runs = []
    EntryRunner(plan, model, config, context, events).run(set())
    return results, started


def test_the_runner_reports_every_probe_then_the_answer(model):
    results, started = search_entry(model, Bounded)
    probes, answer = results[:-1], results[-1]
    assert started == [SweepPoint(16, 4, None, batch_search=True)]  # probes are not planned points
    assert [(r.point.batch_size, r.status, r.search) for r in probes] == [
        (8, "ok", "probe"), (16, "ok", "probe"), (32, "oom", "probe"), (24, "oom", "probe"), (20, "ok", "probe"),
        (22, "oom", "probe"), (21, "oom", "probe")]
    assert all(len(r.samples) == 2 for r in probes if r.status == "ok")
    assert [r.estimated_memory_bytes for r in probes] == [2 + n for n in (8, 16, 32, 24, 20, 22, 21)]
    assert answer.point.batch_search and answer.search == "result" and answer.status == "ok"
    assert answer.max_batch_size_found == 20
    assert answer.search_probes.startswith("probes: 8 ok, 16 ok, 32 oom")
    assert 32 not in Bounded.runs[Bounded.runs.index(32) + 1:]  # skip_larger_batches_after_oom: never retried


def test_an_error_ends_the_search_without_an_answer(model):
    class Broken(Bounded):
        def run(self, batch):
            if batch.batch_size == 16:
                raise ValueError("kernel failed")
            return super().run(batch)

    results, _ = search_entry(model, Broken)
    assert [(r.point.batch_size, r.status) for r in results[:-1]] == [(8, "ok"), (16, "error")]
    answer = results[-1]
    assert answer.status == "error" and answer.max_batch_size_found is None and answer.search == "result"
    assert answer.error == "batch search stopped: the probe at batch size 16: ValueError: kernel failed"


def test_when_nothing_runs_the_answer_says_so(model):
    class Tiny(Bounded):
        capacity = 0

    results, _ = search_entry(model, Tiny, start=2)
    assert [r.point.batch_size for r in results[:-1]] == [2, 1]
    assert results[-1].status == "oom" and results[-1].max_batch_size_found is None
    assert results[-1].error == "no batch ran: probes: 2 oom, 1 oom; not even one sequence ran"


def test_the_largest_batch_is_marked_and_an_unfinished_search_is_run_again(model, tmp_path):
    results, _ = search_entry(model, Bounded)
    out = ResultsDir(tmp_path / "run")
    out.open(resume=False)
    for r in results[:3]:  # the sweep died during the fourth probe
        write_point(out, r)
    assert ResultsDir(tmp_path / "run").open(resume=True) == set()  # its probes are dropped: the search reruns
    assert read_rows(out.results_csv) == [] and read_rows(out.samples_csv) == []
    for r in results:
        write_point(out, r)
    rows = read_rows(out.results_csv)
    assert [(r["batch_size"], r["max_batch"]) for r in rows if r["search"] == "probe"] == [
        ("8", ""), ("16", ""), ("32", ""), ("24", ""), ("20", "true"), ("22", ""), ("21", "")]
    answer = rows[-1]
    assert (answer["scenario"], answer["batch_size"], answer["search"], answer["max_batch_size_found"]) == \
        ("batch", "", "result", "20")
    done = ResultsDir(tmp_path / "run").open(resume=True)
    assert results[-1].key in done and len(done) == 8
    assert len(read_rows(out.samples_csv)) == 2 * 3  # the three probes that ran, two timed batches each
