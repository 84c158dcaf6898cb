"""What the library asks of an engine and of a workload, as types: where an entry runs (`Placement`), the backend
class as planning and the runner use it (`EngineClass`), the loaded engine (`Engine`), and the workload that makes
each point's batches and streams (`PointWorkload`).

backends/base.py's `Backend` and workloads/base.py's `Workload` implement these; the library never imports either
package (docs/architecture.md), so it names them by what they must do. The registries hand the classes over as these
types (harness/config/registry.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Protocol, Sequence, Tuple

from harness.config.engine import BackendOptions
from harness.config.stream import StreamConfig
from harness.model.memory import MemoryEstimate
from harness.model.spec import ModelSpec
from harness.plan.points import SweepPoint, SweepShape
from harness.scenarios.batch import BatchSpec, BatchTiming, LogitsProbe, Sampling
from harness.scenarios.stream import StreamSpec, StreamTiming


@dataclass(frozen=True)
class Placement:
    """Where an entry runs, resolved from its options without loading anything."""

    device: str  # "cpu" or "cuda"
    num_devices: int = 1  # on every node together
    tp_size: int = 1
    ranks: int = 0  # processes a distributed engine runs as (torchrun); 0: one per tensor-parallel shard
    nodes: int = 1  # machines the devices are spread over, evenly
    pp_size: int = 1

    @property
    def num_ranks(self) -> int:
        return self.ranks or self.tp_size

    @property
    def ranks_per_node(self) -> int:
        return self.num_ranks // self.nodes

    @property
    def devices_per_node(self) -> int:
        return self.num_devices // self.nodes


class MemoryCounter(Protocol):
    """An engine's peak-memory counter (harness/measure/peak_memory.py)."""

    def reset(self) -> None: ...

    def read(self) -> Optional[int]: ...

    def read_host(self) -> Optional[int]: ...

    def current(self) -> Optional[int]: ...


class Engine(Protocol):
    """A backend entry's engine once built: loaded once, then driven point by point (backends/base.py, Backend)."""

    placement: Placement
    peak_memory: MemoryCounter

    def load(self) -> None: ...

    def run(self, batch: BatchSpec) -> BatchTiming: ...

    def serve(self, stream: StreamSpec) -> StreamTiming: ...

    def close(self) -> None: ...

    def cannot_run(self, batch_size: int, input_length: int, output_length: int) -> Optional[str]: ...

    def engine_stats(self) -> Dict[str, object]: ...

    def probe_logits(self, batch: BatchSpec) -> Optional[LogitsProbe]: ...

    def profile(self, batch: BatchSpec) -> Optional[bytes]: ...

    def reset_prefix_cache(self) -> None: ...

    def perplexity(self, token_ids: Sequence[int], window: int) -> Optional[float]: ...

    def runtime_info(self) -> Dict[str, object]: ...


class EngineClass(Protocol):
    """A backend class, as planning and the runner use it before anything loads (its class-level facts and
    classmethods), and as the runner builds it."""

    Options: type
    distributed: bool
    engine_modules: Tuple[str, ...]
    distributions: Tuple[str, ...]
    uses_hf_config: bool
    harness_random_weights: bool
    runs_the_model: bool
    serves_lm_eval: bool

    def worker_imports(self) -> Tuple[str, ...]: ...

    def __call__(self, options: BackendOptions, model: ModelSpec, shape: SweepShape) -> Engine: ...

    def resolve_placement(self, options: BackendOptions) -> Placement: ...

    def launch_env(self, options: BackendOptions, placement: Placement) -> Dict[str, str]: ...

    def estimate_memory(self, options: BackendOptions, model: ModelSpec, batch_size: int, input_length: int,
                        output_length: int) -> MemoryEstimate: ...

    def unsupported(self, options: BackendOptions, scenario: str, model: Optional[ModelSpec]) -> Optional[str]: ...

    def point_unsupported(self, options: BackendOptions, point: SweepPoint) -> Optional[str]: ...

    def destination(self, options: BackendOptions) -> Optional[str]: ...


class PointWorkload(Protocol):
    """The prompts every entry of a model is given (workloads/base.py, Workload): identical token ids per point,
    phase and index, for every engine; its sampling, and how the manifest and the console describe it."""

    sampling: Sampling

    @property
    def name(self) -> str: ...

    def input_lengths(self) -> List[int]: ...

    def longest_input(self, point: SweepPoint) -> int: ...

    def batch(self, point: SweepPoint, phase: str, index: int) -> BatchSpec: ...

    def stream(self, point: SweepPoint, phase: str, stream: StreamConfig) -> StreamSpec: ...

    def manifest(self) -> Dict[str, Any]: ...

    def describe(self) -> str: ...
