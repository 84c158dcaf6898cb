"""The sweep keys OmegaConf cannot type (harness/config/sweep.py's `SweepYaml`), checked and read into their final
types (`SweepConfig`'s): the batch sizes (a list or `auto`), the output lengths (a trace's own), the timed batch
count (a count or `auto`)."""

from __future__ import annotations

from typing import Any, List, Literal, Optional, Protocol, Union

from harness.config.sections import StopConfig
from harness.config.stream import StreamConfig, replay_trace, validate_stream
from harness.config.stream.bounds import check_schedule, check_trace_schedule
from harness.errors import UserError
from harness.fields import is_int


class ShapeKeys(Protocol):
    """The keys of a parsed sweep (harness/config/sweep.py's SweepYaml) that these read."""

    scenario: str
    batch_sizes: Any  # as the YAML gave it: a list, an integer, `auto`, or anything else (refused here)
    max_batch_size: Optional[int]
    stream: StreamConfig
    input_lengths: Optional[List[int]]
    output_lengths: Optional[List[int]]
    num_batches: Any  # a count or `auto`, or anything else (refused here)
    stop: StopConfig
    point_timeout_s: float

SCENARIOS = ("batch", "stream")
NO_OUTPUT_LENGTH = 0  # every point's, in a sweep whose entries pool (embeddings, rerank): they make no output


def num_batches(parsed: ShapeKeys) -> Union[int, Literal["auto"]]:
    stop = parsed.stop
    if parsed.num_batches != "auto":
        if not is_int(parsed.num_batches) or parsed.num_batches < 1:
            raise UserError(f"num_batches: must be an integer of at least 1, or auto, got {parsed.num_batches!r}")
        if stop != StopConfig():
            raise UserError("stop: decides when num_batches: auto stops timing; with a fixed num_batches, remove it")
        return int(parsed.num_batches)
    if stop.max_batches < stop.min_batches:
        raise UserError(f"stop.max_batches: must be at least stop.min_batches ({stop.min_batches}), got "
                        f"{stop.max_batches}")
    return "auto"


def output_lengths(parsed: ShapeKeys, pooling: Optional[str] = None) -> List[int]:
    """The sweep's output lengths; a replayed trace gives each request's, and the sweep's is its longest. The
    scenario's keys are checked first (`batch_sizes` runs before this), so the stream section is valid here.
    `pooling`: where the first entry is, when every entry's requests pool (embeddings, rerank): they make no output
    tokens, so output_lengths is left out and every point's output length is 0."""
    if pooling is not None:
        if parsed.scenario == "stream" and parsed.stream.arrival == "trace":
            raise UserError(f"{pooling}.endpoint: embeddings and rerank requests make no output, and stream.trace "
                            "replays requests with output lengths; use stream.arrival poisson, gamma or constant")
        if parsed.output_lengths is not None:
            raise UserError(f"output_lengths: embeddings and rerank answers have no output tokens ({pooling}); "
                            "remove output_lengths")
        return [NO_OUTPUT_LENGTH]
    if parsed.scenario == "stream" and parsed.stream.arrival == "trace":
        for key in ("input_lengths", "output_lengths"):
            if getattr(parsed, key) is not None:
                raise UserError(f"{key}: stream.trace gives every request's lengths; remove {key}")
        return [replay_trace(parsed.stream).max_output_tokens]
    if parsed.output_lengths is None:
        raise UserError("output_lengths: required, e.g. output_lengths: [128]")
    check_positive_list("output_lengths", parsed.output_lengths)
    return list(parsed.output_lengths)


def batch_sizes(parsed: ShapeKeys) -> Union[List[int], Literal["auto"], None]:
    """The scenario's checks, then its batch sizes: a list (one integer read as a list of one), `auto`, or None for
    a stream (whose requests arrive at stream.request_rates)."""
    if parsed.scenario not in SCENARIOS:
        raise UserError(f"scenario: {parsed.scenario!r} is not one of {', '.join(SCENARIOS)}")
    if parsed.scenario == "stream":
        for key in ("batch_sizes", "max_batch_size"):
            if getattr(parsed, key) is not None:
                raise UserError(f"{key}: not used with scenario: stream (requests arrive over time at "
                                f"stream.request_rates); remove {key} or set scenario: batch")
        validate_stream(parsed.stream)
        if parsed.stream.arrival == "trace":
            check_trace_schedule(replay_trace(parsed.stream).requests, str(parsed.stream.trace),
                                 parsed.point_timeout_s)
        else:
            check_schedule(parsed.stream, parsed.point_timeout_s)
        return None
    if parsed.stream != StreamConfig():
        raise UserError("stream: is read with scenario: stream; set scenario: stream, or remove the stream section")
    sizes = [parsed.batch_sizes] if is_int(parsed.batch_sizes) else parsed.batch_sizes
    if sizes is None:
        raise UserError("batch_sizes: required with scenario: batch, e.g. batch_sizes: [1, 8], or auto")
    if sizes == "auto":
        return "auto"
    if not isinstance(sizes, list):
        raise UserError(f"batch_sizes: must be a list of positive integers or auto, got {sizes!r}")
    for i, size in enumerate(sizes):
        if not is_int(size):
            raise UserError(f"batch_sizes[{i}]: expected an integer, got {size!r}")
    check_positive_list("batch_sizes", sizes)
    if parsed.max_batch_size is not None:
        raise UserError("max_batch_size: bounds the search of batch_sizes: auto; with a list of batch sizes, "
                        "remove it")
    return [int(size) for size in sizes]


def check_positive_list(key: str, values: List[int]) -> None:
    if not values:
        raise UserError(f"{key}: must be a non-empty list of positive integers, got []")
    bad = [v for v in values if v < 1]
    if bad:
        raise UserError(f"{key}: must be a non-empty list of positive integers, got {bad[0]}")
    if len(set(values)) != len(values):
        raise UserError(f"{key}: has duplicates: {values}")
