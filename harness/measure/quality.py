"""What quantization costs in accuracy (docs/measurement.md, "Quantization"): each quantized entry's model against the
same engine's unquantized entry, on the same inputs (each point's first timed batch, or its stream's first requests).

Both entries hand over a `LogitsProbe` of those inputs (an untimed forward after the point's timing). Per point:
`logits_rel_error` = ||L_q - L|| / ||L|| over the last prompt position's logits of every probed sequence, and
`top1_agreement` = the share of prompt positions where both models' argmax agree. The unquantized entry's own rows
read 0 and 1. References run first (`plan_sweep` orders the entries so); their probes are also written to the results
folder (`probes/`, one .npz per point) and their perplexities are in results.csv, so a resumed sweep still prices
the quantized points it runs.
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from harness.errors import one_line
from harness.measure.records import PointResult, point_key
from harness.measure.stats import difference, wilson
from harness.plan.entry import EntryPlan
from harness.scenarios.accuracy import AccuracyTask, TaskScore, answered
from harness.scenarios.batch import LogitsProbe


@dataclass(frozen=True)
class QualityPrice:
    """What the quality check says of one point: its entry's unquantized reference and the price against it (the
    reference's own rows read 0 and 1; empty without a probe or a reference)."""

    quality_reference: str = ""
    logits_rel_error: Optional[float] = None
    top1_agreement: Optional[float] = None
    perplexity_delta: Optional[float] = None  # minus quality_reference's, on quality.text
    # accuracy minus the reference's on accuracy.tasks (quality_reference, or spec_baseline for a speculative entry),
    # with its 95% interval (harness/measure/stats.py)
    accuracy_delta: Optional[float] = None
    accuracy_delta_ci95_low: Optional[float] = None
    accuracy_delta_ci95_high: Optional[float] = None


def _settings(options, varied: str = "quantization") -> dict:
    return {k: v for k, v in dataclasses.asdict(options).items() if k not in ("label", varied)}


class QualityCheck:
    """Each quantized entry is held against the entry with the same engine and options but unquantized weights (and in
    task accuracy, each speculative entry against the same entry without speculation)."""

    def __init__(self, plans: Sequence[EntryPlan], folder: Optional[Path] = None, rows: Sequence[dict] = ()):
        """`folder`: where reference probes are kept for a resumed sweep (None: memory only); `rows`: results.csv's
        rows so far, whose reference perplexities a resumed sweep's quantized entries are held against."""
        plain = [p for p in plans if p.options.quantization == "none"]
        self.references: Dict[str, str] = {}
        for p in plans:
            if p.options.quantization != "none":
                match = next((r for r in plain if _settings(r.options) == _settings(p.options)), None)
                if match is not None:
                    self.references[p.label] = match.label
        # Task accuracy also prices speculation: a speculative entry against the same entry without it (its
        # spec_baseline); sampled speculation must keep the target's distribution, so its accuracy must not move.
        self.accuracy_references = dict(self.references)
        plain_decoding = [p for p in plans if p.options.speculative is None]
        for p in plans:
            if p.options.speculative is not None:
                match = next((r for r in plain_decoding
                              if _settings(r.options, "speculative") == _settings(p.options, "speculative")), None)
                if match is not None:
                    self.accuracy_references[p.label] = match.label
        self.probes: Dict[Tuple, LogitsProbe] = {}
        self.folder = folder
        # (model, reference entry) -> its perplexity on quality.text
        self.perplexities: Dict[Tuple[str, str], float] = {
            (r["model"], r["backend"]): float(r["perplexity"]) for r in rows
            if r.get("backend") in self.references.values() and r.get("perplexity") not in (None, "")}
        # (model, reference entry) -> (correct, examples) on accuracy.tasks; a row holds the share and the count
        self.accuracies: Dict[Tuple[str, str], Tuple[int, int]] = {
            (r["model"], r["backend"]): (round(float(r["accuracy"]) * int(r["accuracy_examples"])),
                                         int(r["accuracy_examples"])) for r in rows
            if r.get("backend") in self.accuracy_references.values() and r.get("accuracy") not in (None, "")
            and r.get("accuracy_examples") not in (None, "")}

    @property
    def active(self) -> bool:
        """Whether any entry is compared: only then do entries probe their model."""
        return bool(self.references)

    def describe(self) -> str:
        if not self.references:
            return "off: no quantized entry with an unquantized entry of the same engine and options"
        return "logits compared on each point's first inputs: " + ", ".join(
            f"{a} with {b}" for a, b in sorted(self.references.items()))

    def annotate(self, result: PointResult) -> QualityPrice:
        """Keep a reference's probe and perplexity; price a quantized entry's point against its reference's."""
        label, probe = result.context.backend, result.probe
        reference = self.references.get(label)
        delta = self._perplexity_delta(result, label, reference)
        error = top1 = None
        if probe is not None and label in self.references.values():
            self._keep(point_key(result.context.model, label, result.point), probe)
            error, top1 = 0.0, 1.0
        if probe is not None and reference is not None:
            held = self._held(point_key(result.context.model, reference, result.point))
            if held is not None:
                error, top1 = compare(held, probe)
        return QualityPrice(reference or "", error, top1, delta, *self._accuracy_delta(result, label))

    def _keep(self, key: Tuple, probe: LogitsProbe) -> None:
        self.probes[key] = probe
        if self.folder is None:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        lengths = [len(row) for row in probe.top1]
        np.savez(self._file(key), last_logits=np.asarray(probe.last_logits, dtype=np.float32),
                 top1=np.asarray([t for row in probe.top1 for t in row], dtype=np.int64), lengths=lengths)

    def _held(self, key: Tuple) -> Optional[LogitsProbe]:
        """The reference's probe at a point: from this run, or from the run a resumed sweep continues."""
        if key in self.probes or self.folder is None or not self._file(key).is_file():
            return self.probes.get(key)
        with np.load(self._file(key)) as saved:
            ends = np.cumsum(saved["lengths"])
            top1 = tuple(tuple(int(t) for t in saved["top1"][end - n:end]) for n, end in zip(saved["lengths"], ends))
            return LogitsProbe(saved["last_logits"], top1)

    def _file(self, key: Tuple) -> Path:
        assert self.folder is not None  # only a check that keeps its probes on disk names their files
        return self.folder / (hashlib.sha1(repr(key).encode()).hexdigest()[:16] + ".npz")

    def _accuracy_delta(self, result: PointResult, label: str) -> Tuple[Optional[float], ...]:
        """(difference, its interval's ends) against the quantization or speculation reference; 0 and no interval on
        a reference's own rows."""
        if result.accuracy is None:
            return None, None, None
        model, counts = result.context.model, (result.accuracy.correct, result.accuracy.examples)
        is_reference = label in self.accuracy_references.values()
        if is_reference:
            self.accuracies[(model, label)] = counts
        reference = self.accuracy_references.get(label)
        if reference is None:
            return (0.0, None, None) if is_reference else (None, None, None)
        if (model, reference) in self.accuracies:
            return difference(*counts, *self.accuracies[(model, reference)])
        return None, None, None

    def _perplexity_delta(self, result: PointResult, label: str, reference: Optional[str]) -> Optional[float]:
        if result.perplexity is None:
            return None
        model, delta = result.context.model, None
        if label in self.references.values():
            self.perplexities[(model, label)] = result.perplexity
            delta = 0.0
        if reference is not None and (model, reference) in self.perplexities:
            delta = result.perplexity - self.perplexities[(model, reference)]
        return delta


def compare(reference: LogitsProbe, other: LogitsProbe) -> Tuple[Optional[float], Optional[float]]:
    """(relative L2 error of the last-position logits, share of positions with the same argmax); None where the
    probes do not cover the same inputs."""
    a, b = np.asarray(reference.last_logits, dtype=np.float64), np.asarray(other.last_logits, dtype=np.float64)
    if a.shape != b.shape or [len(r) for r in reference.top1] != [len(r) for r in other.top1]:
        return None, None
    norm = float(np.linalg.norm(a))
    error = float(np.linalg.norm(b - a)) / norm if norm else None
    positions = sum(len(r) for r in reference.top1)
    same = sum(x == y for r, o in zip(reference.top1, other.top1) for x, y in zip(r, o))
    return error, (same / positions if positions else None)


def score_entry(backend, plan: EntryPlan) -> Tuple[Optional[float], Optional[TaskScore], Dict[str, object]]:
    """quality.text's perplexity, accuracy.tasks' answers and accuracy.lm_eval_tasks' scores, once per entry after
    its load, untimed; and what the manifest says of each."""
    perplexity, scored = score_text(backend, plan)
    accuracy, answered = score_tasks(backend, plan.accuracy_tasks, plan.accuracy_batch_size, plan.shape.scenario)
    return perplexity, accuracy, {**scored, **answered, **score_lm_eval(backend, plan)}


def score_lm_eval(backend, plan: EntryPlan) -> Dict[str, object]:
    """lm-eval's scores through the entry's server (`Backend.score_lm_eval`); a failure is said in the manifest and
    costs the entry none of its points."""
    if plan.lm_eval is None:
        return {}
    try:
        return backend.score_lm_eval(plan.lm_eval)
    except Exception as e:  # lm-eval's or the server's error, whatever its type
        return {"lm_eval": f"failed: {one_line(e)}"}


def score_text(backend, plan: EntryPlan) -> Tuple[Optional[float], Dict[str, object]]:
    """quality.text's perplexity, once per entry after its load (untimed), and what the manifest says of it; a failure
    is said there and leaves the column empty, not the entry's measurements."""
    if not plan.perplexity_ids:
        return None, {}
    try:
        value = backend.perplexity(plan.perplexity_ids, plan.perplexity_window)
    except Exception as e:
        return None, {"perplexity": f"failed: {one_line(e)}"}
    if value is None:
        return None, {"perplexity": f"not scored: {plan.options.name} has no forward to score with"}
    return value, {"perplexity": value, "perplexity_tokens": len(plan.perplexity_ids),
                   "perplexity_window": plan.perplexity_window}


# Task accuracy (docs/measurement.md, "Accuracy"): once per entry, after its load and before its points, the entry's
# own engine instance, or the server it times, answers every example of `accuracy.tasks` (greedy unless
# accuracy.sampling says otherwise); an answer counts on exact match (harness/scenarios/accuracy.py). Its 95% Wilson
# interval, and a quantized or speculative entry's difference from its reference with Newcombe's interval, are
# harness/measure/stats.py's.

def task_summary(score: TaskScore) -> Dict[str, object]:
    """One task's figures, as the manifest gives them."""
    low, high = wilson(score.correct, score.examples)
    return {"task": score.task, "metric": "exact_match", "examples": score.examples, "correct": score.correct,
            "accuracy": score.accuracy, "ci95_low": low, "ci95_high": high}


def pooled(scores: Sequence[TaskScore]) -> Optional[TaskScore]:
    """Every task's examples as one: the row's `accuracy`."""
    if not scores:
        return None
    return TaskScore("+".join(s.task for s in scores), sum(s.examples for s in scores),
                     sum(s.correct for s in scores))


def score_tasks(backend, tasks: Sequence[AccuracyTask], batch_size: int, scenario: str = "batch") -> Tuple[
        Optional[TaskScore], Dict[str, object]]:
    """Each task answered through `backend`, the loaded engine, untimed: as static batches of `batch_size` in a batch
    sweep, as one stream with `batch_size` in flight in a stream sweep (the way the entry is timed; a server is only
    reached that way). Every task's examples pooled (the row's `accuracy`), and what the manifest says of each. A
    failure is said there and leaves the columns empty, not the entry's measurements."""
    if not tasks:
        return None, {}
    answer = _batch_answers if scenario == "batch" else _stream_answers
    scores = []
    try:
        for task in tasks:
            generated = answer(backend, task, batch_size)
            if generated is None:
                return None, {"accuracy": "not scored: the engine does not hand back the tokens it generated (a "
                              "server is asked for them with extensions: vllm)"}
            scores.append(TaskScore(task.name, len(task.prompts),
                                    sum(answered(g, a, task.stop_ids) for g, a in zip(generated, task.answers))))
    except Exception as e:  # the engine's own error, whatever its type: the timed points still run
        return None, {"accuracy": f"failed: {one_line(e)}"}
    s = tasks[0].sampling
    decoding = "greedy" if s.greedy else f"sampled (temperature {s.temperature:g}, top_p {s.top_p:g}, top_k {s.top_k})"
    examples = f"{batch_size} example{'s' * (batch_size != 1)}"
    how = f"{examples} at a time" if scenario == "batch" else f"as a stream, {examples} in flight at a time"
    how = (f"{decoding}, through {backend.answered_by()}, {how}; exact match, then EOS or the end of the answer's "
           "budget")
    return pooled(scores), {"accuracy": {"evaluated": how, "tasks": [task_summary(s) for s in scores]}}


def _batch_answers(backend, task: AccuracyTask, batch_size: int) -> Optional[List[Sequence[int]]]:
    """Each example's generated ids, `batch_size` examples per static batch; None where the engine gives none."""
    generated: List[Sequence[int]] = []
    for _, batch in task.batches(batch_size):
        ids = backend.run(batch).token_ids
        if ids is None:
            return None
        generated.extend(ids)
    return generated


def _stream_answers(backend, task: AccuracyTask, concurrency: int) -> Optional[List[Sequence[int]]]:
    """Each example's generated ids from one stream of them all; None where the engine (a server that sends text
    only) gives none. A failed request fails the task: an unanswered example is not a wrong one."""
    requests = sorted(backend.serve(task.stream(concurrency)).requests, key=lambda r: r.index)
    failed = next((r for r in requests if not r.ok), None)
    if failed is not None:
        raise RuntimeError(f"example {failed.index + 1} of {task.name}: {failed.error}")
    generated: List[Sequence[int]] = []
    for request in requests:
        if request.token_ids is None:
            return None
        generated.append(request.token_ids)
    return generated


def accuracy_cells(score: Optional[TaskScore]) -> Dict[str, Optional[float]]:
    """A row's accuracy columns: the pooled exact-match share, its Wilson interval and how many examples."""
    if score is None:
        return {}
    low, high = wilson(score.correct, score.examples)
    return {"accuracy": score.accuracy, "accuracy_ci95_low": low, "accuracy_ci95_high": high,
            "accuracy_examples": score.examples}
