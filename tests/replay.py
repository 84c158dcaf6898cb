"""Production-shaped streams for the engine tests, built by the real workload code so each test sends exactly what a
sweep would: a small project-written trace (config validation, window, time scale, prompts of the traced lengths),
and the example conversations as a multi-turn stream."""

from pathlib import Path
from typing import Optional

from harness.config.stream import StreamConfig, TraceWindow, validate_stream
from harness.config.sweep import SweepConfig
from harness.plan.points import SweepPoint
from harness.scenarios.stream import StreamSpec
from workloads.prompts import PromptsOptions, PromptsWorkload
from workloads.random_ids import RandomOptions, RandomWorkload

CONVERSATIONS = Path(__file__).resolve().parent.parent / "yamls" / "prompts" / "example-conversations.jsonl"

# 10 requests over 0.9 s of trace time, bursts and pauses, prompts of 5-60 tokens, answers of 1-8 (fits every
# engine fixture's shape: 64 prompt tokens, 8 output tokens).
SMALL_TRACE = """TIMESTAMP,ContextTokens,GeneratedTokens
2024-05-01 10:00:00.0000000,12,8
2024-05-01 10:00:00.0100000,60,3
2024-05-01 10:00:00.0150000,5,8
2024-05-01 10:00:00.3000000,33,1
2024-05-01 10:00:00.3050000,21,6
2024-05-01 10:00:00.3100000,47,8
2024-05-01 10:00:00.3150000,9,2
2024-05-01 10:00:00.7000000,40,8
2024-05-01 10:00:00.8990000,17,5
2024-05-01 10:00:00.9000000,28,7
"""
TRACE_TIMES_S = (0.0, 0.01, 0.015, 0.3, 0.305, 0.31, 0.315, 0.7, 0.899, 0.9)
TRACE_INPUTS = (12, 60, 5, 33, 21, 47, 9, 40, 17, 28)
TRACE_OUTPUTS = (8, 3, 8, 1, 6, 8, 2, 8, 5, 7)


def write_small_trace(folder: Path) -> Path:
    path = Path(folder) / "small-azure.csv"
    path.write_text(SMALL_TRACE)
    return path


def trace_config(path: Path, time_scale: float = 1.0, max_concurrency: Optional[int] = None, **window) -> SweepConfig:
    stream = StreamConfig(arrival="trace", trace=str(path), time_scale=time_scale, window=TraceWindow(**window),
                          max_concurrency=max_concurrency, num_warmup_requests=2)
    validate_stream(stream)
    return SweepConfig(benchmark_name="t", scenario="stream", stream=stream, output_lengths=[max(TRACE_OUTPUTS)],
                       workload=RandomOptions())


def trace_stream(model, path: Path, phase: str = "timed", time_scale: float = 1.0, **window) -> StreamSpec:
    config = trace_config(path, time_scale, **window)
    workload = RandomWorkload.build(RandomOptions(), config, model)
    point = SweepPoint(workload.input_lengths()[0], config.output_lengths[0], None, workload.name,
                       config.stream.request_rates[0])
    return workload.stream(point, phase, config.stream)


def conversation_workload(model, output_length: int = 6, num_conversations: int = 5, **turns):
    """The example conversations as a multi-turn workload (conversations at 2/s, constant), and its sweep config."""
    stream = StreamConfig(arrival="constant", request_rates=[2.0], num_requests=num_conversations,
                          num_warmup_requests=2, seed=1)
    validate_stream(stream)
    options = PromptsOptions(prompts=str(CONVERSATIONS), template="chat", multi_turn=True, **turns)
    config = SweepConfig(benchmark_name="t", scenario="stream", stream=stream, output_lengths=[output_length], seed=0,
                         workload=options)
    options.validate(config)
    return PromptsWorkload.build(options, config, model), config


def conversation_stream(model, output_length: int = 6, num_conversations: int = 5, **turns) -> StreamSpec:
    w, config = conversation_workload(model, output_length, num_conversations, **turns)
    point = SweepPoint(w.input_lengths()[0], output_length, None, w.name, 2.0)
    return w.stream(point, "timed", config.stream)
