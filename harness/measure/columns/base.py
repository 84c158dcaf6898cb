"""The shape of a column declaration, shared by every file's: units spelled once, links into the measurement
contract, the families that expand one declaration into several columns, and the context and point columns every
file begins with."""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from harness.measure.metrics import STATS


@dataclass(frozen=True)
class Column:
    """One CSV column. `unit`: "ms", "tokens/s", "share 0-1", ...; "" for text, labels and paths. `where`: which
    rows fill it ("all", "batch", "stream", or a narrower note); elsewhere the cell is empty."""

    name: str
    unit: str
    meaning: str
    where: str
    # What a cell read back may hold (columns/readback.py): a number is finite and not negative unless declared
    # otherwise; the point's key columns are whole numbers; a text column may name the words it takes.
    integer: bool = False  # a whole number of 1 or more where filled: the point's key columns
    least: int = 1  # an integer column's smallest value: output_length is 0 for embeddings and rerank
    signed: bool = False  # may be negative: an interval's low end, a difference
    infinite: bool = False  # may be inf: a burst's offered rate
    words: Tuple[str, ...] = ()  # a text column's only values (status, scenario), empty cells aside
    required: bool = False  # never empty on a row: which entry, what became of the point
    beyond_one: bool = False  # a share that may pass 1: MBU and MFU against peaks that are wrong (the report warns)

    def accepts(self, cell: str) -> bool:
        """Whether a cell read back from a file is a value of this column (`problem` says why not)."""
        return self.problem(cell) is None

    def problem(self, cell: str) -> Optional[str]:
        """Why a cell read back is not a value of this column, or None: `must not be empty`, `'okay' is not one of
        ok, oom, skipped, error`, `'-5' is not a number (ms) of 0 or more`."""
        if cell == "":
            return "must not be empty" if self.required else None
        if self.unit == TEXT:
            return None if not self.words or cell in self.words else f"{cell!r} is not one of {', '.join(self.words)}"
        if self.unit in FLAG_WORDS:
            return None if cell in FLAG_WORDS[self.unit] else f"{cell!r} is not {self.kind_words()}"
        value = _number(cell, self.integer)
        if value is None or (math.isinf(value) and not self.infinite) or abs(value) >= 2**63 and self.integer or \
                (value < (self.least if self.integer else 0) and not self.signed) or (self.unit == SHARE and value > 1 and not self.beyond_one):
            return f"{cell!r} is not {self.kind_words()}"
        return None

    def kind_words(self) -> str:
        """What `accepts` takes, for a message: `a number (ms) of 0 or more`, `one of true, false`."""
        if self.unit in FLAG_WORDS:
            return f"one of {', '.join(FLAG_WORDS[self.unit])}"
        if self.integer:
            return f"a whole number ({self.unit}) of {self.least} or more"
        kind = "a number" if self.infinite else "a finite number"
        if self.unit == SHARE and not self.beyond_one:
            return f"{kind} ({self.unit}) in [0, 1]"
        return f"{kind} ({self.unit})" + ("" if self.signed else " of 0 or more")


# --- Links into the measurement contract ----------------------------------------------------------------------
# MkDocs heading slugs of docs/measurement.md (tests/test_columns.py checks that each still exists).

def contract(slug: str) -> str:
    """A link to a section of docs/measurement.md, relative to docs/reference/."""
    return f"[contract](../measurement.md#{slug})"


POINTS = contract("points-batches-and-phases")
OUTPUT_LENGTH = contract("output-length")
SAMPLING = contract("sampling")
PER_BATCH = contract("per-timed-batch-samplescsv")
PER_SEQUENCE = contract("per-request-sequence-as-vllms-serving-benchmark-defines-them")
PER_POINT = contract("per-point-resultscsv")
UNCERTAINTY = contract("uncertainty-harnessmeasurestatspy")
STREAMS = contract("request-streams-scenario-stream")
PREFIXES = contract("shared-prefixes-workloadprefix")
MULTI_TURN = contract("multi-turn-conversations-workloadmulti_turn")
STRUCTURED = contract("structured-output-workloadjson_schema")
TOOLS = contract("tool-calls-workloadtools")
REASONING = contract("reasoning-tokens")
POOLING = contract("embeddings-and-rerank")
IMAGES_WHERE = "openai entries with an images section"
LORA = contract("lora-adapters-lora")
IMAGES = contract("images-with-the-text-images")
QUANTIZATION = contract("quantization-modelquantization")
ACCURACY = contract("accuracy-accuracy")
ZERO = contract("zero-inference-deepspeed_zero")
NODES = contract("more-than-one-node-nodes-cluster")
BATCH_SEARCH = contract("the-largest-batch-batch_sizes-auto")
SPECULATIVE = contract("speculative-decoding-speculative")
ROOFLINE = contract("what-the-numbers-mean-mbu-mfu-the-roofline-cost")
CONTEXT = contract("context")
HEADLINE = contract("per-gpu-and-per-user")
PROFILE = contract("profiler-traces-profile-true")
VALIDITY = contract("a-valid-gpu-point")

# Units, spelled once so that the test's suffix rules and the page agree.
MS, S, TOKENS, TOKENS_PER_S, BYTES = "ms", "s", "tokens", "tokens/s", "bytes"
GBPS, TFLOPS, FLOP, REQUESTS_PER_S = "GB/s", "TFLOP/s", "FLOP", "requests/s"
INPUTS_PER_S = "inputs/s"  # embeddings' inputs, rerank's documents
SHARE, RATIO, COUNT, INDEX, PERCENT = "share 0-1", "ratio", "count", "index", "%"
WATTS, JOULES, JOULES_PER_TOKEN, KWH_PER_M_TOKENS = "W", "J", "J/token", "kWh/1M tokens"
PRICE_PER_M_TOKENS = "currency/1M tokens"  # hardware.cost_per_hour's currency, whichever it is
MHZ, CELSIUS = "MHz", "C"
PIXELS = "pixels"
TEXT = ""
# A number as the writers write one: ASCII digits, an optional sign, point and exponent, or inf (Python's int() and
# float() also take `2_0`, `٢` and `２`, which no writer writes).
_INTEGER = re.compile(r"[0-9]+")
_DECIMAL = re.compile(r"[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|[-+]?inf")


def _number(cell: str, integer: bool) -> Optional[float]:
    if not (_INTEGER if integer else _DECIMAL).fullmatch(cell):
        return None
    return float(cell)


# Flags: the words each flag column's unit allows (an empty cell aside).
FLAG_WORDS = {"true/false": ("true", "false"), "True/False": ("True", "False"), "true/blank": ("true",),
              "0/1": ("0", "1")}


# --- Families: one declaration, several columns ------------------------------------------------------------------

# Percentiles interpolate linearly (numpy's default); the page says so once.
STAT_WORDS = {"mean": "Mean", "p50": "Median", "p90": "90th percentile", "p99": "99th percentile",
              "std": "Sample standard deviation (0 for one value)"}


def stats_family(metric: str, unit: str, of: str, where: str, see: str,
                 stats: Sequence[str] = STATS) -> List[Column]:
    """`{metric}_{stat}` for each statistic (metrics.STATS, or REQUEST_STATS): `of` says what the values are."""
    return [Column(f"{metric}_{s}", unit, f"{STAT_WORDS[s]} of {of}. {see}", where) for s in stats]


def ci95_family(metric: str, unit: str, of: str, method: str) -> List[Column]:
    """`{metric}_ci95_low` and `_high`: the two ends of a 95% interval over the timed batches."""
    return [Column(f"{metric}_ci95_{end}", unit,
                   f"{word} end of the 95% interval of {of} over the timed batches ({method}); empty below two "
                   f"batches. {UNCERTAINTY}", "batch", signed=True)
            for end, word in (("low", "Lower"), ("high", "Upper"))]


def keyed(columns: Iterable[Column]) -> Dict[str, Column]:
    """Columns by name; a name declared twice for one file is a mistake in this module."""
    out: Dict[str, Column] = {}
    for c in columns:
        if c.name in out:
            raise ValueError(f"column {c.name!r} is declared twice for one file")
        out[c.name] = c
    return out


# --- Every file's leading columns: which entry and which point -----------------------------------------------

CONTEXT_DECLARED = [
    Column("benchmark_name", TEXT, "The sweep's `benchmark_name` (config); it also names the results folder.", "all"),
    Column("backend", TEXT, "The backend entry's label: one engine with one set of options.", "all", required=True),
    Column("model", TEXT, "The model's label: its section's `label`, else the preset or name, with "
           f"`(modified: ...)` when `model.overrides` changed it. {CONTEXT}", "all"),
    Column("dtype", TEXT, "The dtype the entry runs the model in: the model's, or the entry's own `dtype` where it "
           "sets one.", "all"),
    Column("hardware", TEXT, "The GPU's name as the driver reports it, or the CPU model and the cores the run may "
           "use (`, no CUDA device` on rows of a GPU entry skipped for lack of GPUs).", "all"),
    Column("num_devices", COUNT, f"Devices the entry runs on, every node's together. {NODES}", "all", integer=True),
    Column("tp_size", COUNT, "Tensor-parallel size.", "all", integer=True),
    Column("pp_size", COUNT, f"Pipeline-parallel size. {NODES}", "all", integer=True),
    Column("nodes", COUNT, f"Machines the entry's ranks span. {NODES}", "all", integer=True),
]

POINT_DECLARED = [
    Column("scenario", TEXT, "`batch` (static batches of `batch_size`) or `stream` (requests arriving over time at "
           f"`request_rate`). {POINTS}", "all", words=("batch", "stream")),
    Column("workload", TEXT, "What the prompts are: `random`, or a prompt file with its template.", "all"),
    Column("batch_size", COUNT, "Sequences per batch; empty on a `batch_sizes: auto` search's result row. "
           f"{POINTS}", "batch", integer=True),
    Column("input_length", TOKENS, "The point's prompt length: exact for `random` prompts; for a prompt file the "
           "mean length of the prompts the sweep draws from; for a trace its window's longest. The real counts are "
           f"`input_tokens*`. {POINTS}", "all", integer=True),
    Column("output_length", TOKENS, "Output budget per sequence: forced unless `stop_at_eos`, else a cap; for a "
           f"trace its window's longest; 0 for embeddings and rerank, which make no output. {OUTPUT_LENGTH}", "all",
           integer=True, least=0),
    Column("request_rate", REQUESTS_PER_S, "Offered arrival rate: `inf` for a burst (every request at t=0); for a "
           "trace the rate its window offers; empty on a `request_rates: auto` search's result row. In a multi-turn "
           f"stream, conversations per second. {STREAMS}", "stream", infinite=True),
    Column("max_concurrency", COUNT, "Cap on requests in flight; released requests wait at the client for a slot. "
           f"Empty: no cap. {STREAMS}", "stream", integer=True),
]


# What names a point in every file: which entry and which point. Two rows of results.csv with the same cells here
# are one point measured twice, which no sweep writes (columns/readback.py, once_per_point).
POINT_KEY = tuple(c.name for c in CONTEXT_DECLARED + POINT_DECLARED)
# What names a row in each file: a point in results.csv, a point's timed batch in samples.csv, its request in
# requests.csv. A second row of one key is damage, never a second measurement.
ROW_KEYS = {"results.csv": POINT_KEY, "samples.csv": POINT_KEY + ("batch_index",),
            "requests.csv": POINT_KEY + ("request_index",)}


def leading(scenario: str) -> List[Column]:
    """The context and point columns of a file that holds one scenario's rows only: its own scenario's point columns
    are filled on every row; the other scenario's are written there too (one key for every file), always empty."""
    where = {scenario: "all", {"batch": "stream", "stream": "batch"}[scenario]: "never: empty in this file"}
    return CONTEXT_DECLARED + [dataclasses.replace(c, where=where.get(c.where, c.where)) for c in POINT_DECLARED]

SPECULATIVE_WHERE = "speculative entries"


def draft_counters(over: str) -> List[Column]:
    """The engine's speculative-decoding counters (metrics.SPEC_FIGURES' totals), summed `over`."""
    return [
        Column("draft_steps", COUNT, f"Verifying passes that carried at least one proposal, {over}. {SPECULATIVE}",
               SPECULATIVE_WHERE),
        Column("draft_tokens_proposed", TOKENS, f"Tokens the draft proposed, {over}. {SPECULATIVE}",
               SPECULATIVE_WHERE),
        Column("draft_tokens_accepted", TOKENS, f"Proposed tokens the target accepted, {over}. {SPECULATIVE}",
               SPECULATIVE_WHERE),
    ]
