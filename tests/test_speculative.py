"""Speculative decoding without a sweep: the config and its expansion, baselines, the figures, and HF's assisted
generation in process (prompt lookup, a draft of the target's own first layers, and a draft identical to the
target, whose every proposal must be accepted: the counting checked against arithmetic)."""

import dataclasses
import json

import pytest

from backends.generate.hf import HFBackend, HFOptions
from backends.registry import BACKENDS
from backends.vllm_engine import VLLMBackend, VLLMOptions
from harness.config.sections import ModelConfig
from harness.config.speculative import baselines, expand_entries, parse
from harness.measure.crosscheck import TokenAgreement, TokenCrossCheck
from harness.measure.metrics import spec_figures
from harness.measure.records import PointResult, RunContext
from harness.measure.spec_baseline import BaselineComparison, SpeedUp
from harness.model.spec import resolve_model
from harness.plan.points import SweepPoint, SweepShape
from harness.scenarios.batch import BatchSpec, SpecCounts
from workloads.random_ids import allowed_token_ids, make_prompts

NGRAM = {"method": "ngram", "num_speculative_tokens": 4}


def test_a_speculative_list_becomes_one_entry_per_item():
    raw = [{"name": "vllm", "speculative": [None, NGRAM, {"method": "draft", "num_speculative_tokens": 5,
                                                          "draft": {"layers_of_target": 1}}]},
           {"name": "hf", "label": "mine", "speculative": NGRAM}]
    expanded = expand_entries(raw)
    assert [(key, spec_key, entry.get("label")) for key, spec_key, entry in expanded] == [
        ("backends[0]", "backends[0].speculative[0]", None),
        ("backends[0]", "backends[0].speculative[1]", "vllm-ngram4"),
        ("backends[0]", "backends[0].speculative[2]", "vllm-draft5"),
        ("backends[1]", "backends[1].speculative", "mine"),
    ]
    assert expanded[0][2]["speculative"] is None and raw[0]["speculative"][1] == NGRAM  # the YAML is not changed


def test_baseline_is_the_same_engine_with_the_same_options():
    def hf(label, spec=None, **options):
        return HFOptions(name="hf", label=label, speculative=parse(spec, "s") if spec else None, **options)

    entries = [hf("eager", attn_implementation="eager"), hf("hf"), hf("hf-ngram", NGRAM),
               hf("eager-ngram", NGRAM, attn_implementation="eager"), hf("static-ngram", NGRAM, max_wait_ms=1.0),
               VLLMOptions(name="vllm", label="vllm-ngram", speculative=parse(NGRAM, "s"))]
    assert baselines(entries) == {"hf-ngram": "hf", "eager-ngram": "eager", "static-ngram": None, "vllm-ngram": None}


def test_figures_from_counts():
    figures = spec_figures([SpecCounts(draft_steps=4, proposed=16, accepted=12), SpecCounts(2, 8, 0)])
    assert figures == {"draft_steps": 6, "draft_tokens_proposed": 24, "draft_tokens_accepted": 12,
                       "acceptance_rate": 0.5, "mean_accepted_length": 3.0}
    assert spec_figures([]) == {}  # an entry that does not speculate has none of the columns filled
    assert spec_figures([SpecCounts()])["acceptance_rate"] is None  # nothing proposed: no rate, not 0


def _result(label: str, point: SweepPoint, tokens=None) -> PointResult:
    context = RunContext("b", label, "m", "fp32", "cpu", 1, 1)
    return PointResult(context, point, "ok", token_ids=tokens)


def test_speedup_and_tokens_are_against_the_baseline_at_the_same_point(tmp_path):
    one, four = SweepPoint(16, 8, 1), SweepPoint(16, 8, 4)
    comparison = BaselineComparison({"hf-ngram": "hf"}, previous_rows=[])
    comparison.annotate(_result("hf", one), tpot_ms=6.0)
    fast, unmatched = _result("hf-ngram", one), _result("hf-ngram", four)
    assert comparison.annotate(fast, tpot_ms=4.0) == SpeedUp("hf", 1.5)
    assert comparison.annotate(unmatched, tpot_ms=4.0) == SpeedUp("hf", None)  # the baseline has no bs 4 row
    assert comparison.annotate(_result("hf", four), tpot_ms=5.0) == SpeedUp()  # the baseline itself: nothing said
    # A resumed sweep finds the baseline's TPOT in results.csv.
    row = {"model": "m", "backend": "hf", "status": "ok", "tpot_ms_mean": "8", "input_length": "16",
           "output_length": "8", "batch_size": "4", "workload": "random", "request_rate": "", "max_concurrency": ""}
    resumed = BaselineComparison({"hf-ngram": "hf"}, previous_rows=[row])
    assert resumed.annotate(unmatched, tpot_ms=4.0).speedup_vs_baseline == 2.0


class _Plan:
    def __init__(self, label, spec=None, backend_cls=HFBackend):
        self.label, self.backend_cls = label, backend_cls
        self.options = HFOptions(name="hf", label=label, speculative=parse(spec, "s") if spec else None)


def test_a_speculative_entry_is_checked_against_its_baseline_others_against_the_first_plain_entry(tmp_path):
    plans = [_Plan("hf"), _Plan("hf-eager"), _Plan("hf-ngram", NGRAM), _Plan("vllm", backend_cls=VLLMBackend)]
    check = TokenCrossCheck(plans, "random", tmp_path / "tokens.jsonl", greedy=True,
                            baselines={"hf-ngram": "hf"})
    assert check.references == {"hf-eager": "hf", "hf-ngram": "hf"}  # vLLM draws other random weights
    point = SweepPoint(16, 4, 1)
    assert check.annotate(_result("hf", point, ((1, 2, 3, 4),))) == TokenAgreement(None)  # the reference: kept
    assert check.annotate(_result("hf-ngram", point, ((1, 2, 9, 9),))) == TokenAgreement(0.5)
    sampled = TokenCrossCheck(plans, "random", tmp_path / "other.jsonl", greedy=False, baselines={"hf-ngram": "hf"})
    assert sampled.references == {} and sampled.describe().startswith("off: sampling")


@pytest.fixture(scope="module")
def four_layers():
    return resolve_model(ModelConfig(preset="tiny-llama", dtype="fp32", overrides={"num_hidden_layers": 4}))


def _run(model, spec, prompts, output_tokens=32):
    options = HFOptions(name="hf", device="cpu", speculative=parse(spec, "s") if spec else None)
    backend = HFBackend(options, model, SweepShape(1, max(map(len, prompts)), output_tokens))
    backend.load()
    try:
        return [backend.run(BatchSpec([p], (output_tokens,))) for p in prompts]
    finally:
        backend.close()


def _prompts(model, count=3, length=32):
    allowed = allowed_token_ids(model.hf_config.vocab_size, model.special_token_ids)
    return [make_prompts(allowed, i, 1, length, 32, "timed", 0)[0] for i in range(count)]


@pytest.mark.engine
def test_hf_assisted_generation_counts_and_keeps_greedy_tokens(four_layers):
    prompts = _prompts(four_layers)
    plain = _run(four_layers, None, prompts)
    for spec in (NGRAM | {"method": "prompt_lookup", "prompt_lookup_max": 2},
                 {"method": "draft", "num_speculative_tokens": 3, "draft": {"layers_of_target": 1}}):
        timings = _run(four_layers, spec, prompts)
        for base, timing in zip(plain, timings):
            assert timing.output_tokens == (32,)
            assert timing.token_ids == base.token_ids  # greedy: speculation must not change a token
            counts = timing.spec
            assert 0 <= counts.accepted <= counts.proposed <= spec["num_speculative_tokens"] * counts.draft_steps
            assert counts.draft_steps <= 32
        if spec["method"] == "draft":  # a draft proposes at every pass
            assert all(t.spec.draft_steps > 0 for t in timings)


def test_an_identical_draft_has_every_proposal_accepted():
    """The 2-layer preset as the draft of itself: the first pass verifies 4 proposals with the prompt and emits 5
    tokens, then 5 per pass, the last pass proposing only what the budget of 32 leaves: 6 x 4 + 1 = 25."""
    model = resolve_model(ModelConfig(preset="tiny-llama", dtype="fp32"))
    spec = {"method": "draft", "num_speculative_tokens": 4, "draft": {"preset": "tiny-llama"}}
    for timing in _run(model, spec, _prompts(model, count=2)):
        assert timing.spec == SpecCounts(draft_steps=7, proposed=25, accepted=25)
        assert len(set(timing.request_last_token_s)) == 1 and timing.tpot_ms > 0


def test_engines_skip_what_they_cannot_run(four_layers):
    options = HFOptions(name="hf", speculative=parse(NGRAM, "s"))
    assert "batch size 1 only" in HFBackend.point_unsupported(options, SweepPoint(16, 8, 4))
    assert HFBackend.point_unsupported(options, SweepPoint(16, 8, 1)) is None
    assert "scenario: batch only" in HFBackend.unsupported(options, "stream", four_layers)
    options.speculative.prompt_lookup_min = 2
    assert "prompt_lookup_min: 1" in HFBackend.unsupported(options, "batch", four_layers)
    eagle = VLLMOptions(name="vllm", speculative=parse({"method": "eagle", "num_speculative_tokens": 2,
                                                         "draft": {"name_or_path": "some/eagle-head"}}, "s"))
    assert "pretrained" in VLLMBackend.unsupported(eagle, "batch", four_layers)
    assert "eagle" in HFBackend.unsupported(HFOptions(name="hf", speculative=eagle.speculative), "batch", four_layers)
    static = HFOptions(name="hf", cache_implementation="static", speculative=parse(NGRAM, "s"))
    assert "cache_implementation: dynamic" in HFBackend.unsupported(static, "batch", four_layers)
    own_layers = parse({"method": "draft", "num_speculative_tokens": 2, "draft": {"layers_of_target": 1}}, "s")
    pretrained = dataclasses.replace(four_layers, weights="pretrained")
    assert "checkpoint of its own" in VLLMBackend.unsupported(VLLMOptions(name="vllm", speculative=own_layers),
                                                              "batch", pretrained)
    assert HFBackend.unsupported(HFOptions(name="hf", speculative=own_layers), "batch", pretrained) is None
    for engine in ("accelerate", "deepspeed", "openai"):
        cls = BACKENDS.get(engine, "name")
        options = cls.Options(name=engine, speculative=parse(NGRAM, "s"))
        scenario = cls.scenarios[0]
        assert "does not run speculative method ngram" in cls.unsupported(options, scenario, four_layers)


def test_vllm_speculative_config_for_each_method(four_layers, tmp_path):
    from backends.vllm_engine.speculative import speculative_config

    lookup = speculative_config(parse(NGRAM | {"prompt_lookup_min": 2}, "s"), four_layers, tmp_path)
    assert lookup == {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4, "prompt_lookup_min": 2}
    own = parse({"method": "draft", "num_speculative_tokens": 3, "draft": {"layers_of_target": 1}}, "s")
    config = speculative_config(own, four_layers, tmp_path)
    assert config["method"] == "draft_model" and config["num_speculative_tokens"] == 3
    written = json.loads((tmp_path / "draft" / "config.json").read_text())
    assert config["model"] == str(tmp_path / "draft") and written["num_hidden_layers"] == 1
    assert written["vocab_size"] == four_layers.hf_config.vocab_size
    eagle = parse({"method": "eagle", "num_speculative_tokens": 2, "draft": {"name_or_path": "org/eagle-head"}}, "s")
    assert speculative_config(eagle, four_layers, None)["model"] == "org/eagle-head"
