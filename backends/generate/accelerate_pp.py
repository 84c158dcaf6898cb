"""Accelerate big-model inference (`device_map`): naive pipeline parallelism, timed exactly like `hf`.

The model's blocks are spread over devices; accelerate's AlignDevicesHook on each block moves
activations to that block's device, so one batch runs through the devices one after another
(only one device works at a time). `run` is the family's (base.py), on the dispatched model.

Random weights never exist whole on the host: the model is built on the meta device, the device
map is computed from that, and each mapped block is materialized directly on its device with the
values of `harness.model.weights` (the same weights `hf` and `deepspeed` build). Pretrained weights go
through `from_pretrained(device_map=...)` with the same map.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple, Union

from backends.base import Placement, resolve_device
from backends.generate import quantization
from backends.generate.base import GenerateEngine, GenerateOptions
from harness.errors import UserError
from harness.fields import opt, size_bytes
from harness.model import weights
from harness.model.hardware import cuda_device_count

if TYPE_CHECKING:  # imported where used: planning reads this module without torch
    import torch

DEVICE_MAPS = ("auto", "balanced", "balanced_low_0", "sequential")
HOST_KEYS = ("cpu", "disk")
Device = Union[int, str]


@dataclass
class AccelerateOptions(GenerateOptions):
    device_map: str = opt(
        "auto", help="auto | balanced (layers spread evenly over the GPUs; auto is balanced) | balanced_low_0 "
        "(GPU 0 kept light for generate's own tensors) | sequential (fill GPU 0, then 1, ...)."
    )
    max_memory: Optional[Dict[Any, Any]] = opt(
        None, help="Memory per device for the map, e.g. {0: 20GiB, 1: 20GiB, cpu: 60GiB}; what does not fit the "
        "GPUs is offloaded to cpu, then disk. Default: what is free on each of num_devices GPUs, and the host's RAM."
    )
    num_devices: Optional[int] = opt(
        None, help="GPUs to spread the model over; default: every visible GPU (1, the host, on a CPU machine)."
    )
    offload_folder: Optional[str] = opt(None, help="Folder for layers the map offloads to disk (needed only then).")

    def validate(self, key: str) -> None:
        super().validate(key)
        if self.device_map not in DEVICE_MAPS:
            raise UserError(f"{key}.device_map: {self.device_map!r} is not one of {', '.join(DEVICE_MAPS)}")
        if self.num_devices is not None and self.num_devices < 1:
            raise UserError(f"{key}.num_devices: must be at least 1, got {self.num_devices}")
        for device, size in (self.max_memory or {}).items():
            _check_memory_entry(f"{key}.max_memory.{device}", device, size, self.num_devices)


def _check_memory_entry(key: str, device, size, num_devices: Optional[int]) -> None:
    index = _device_key(device)
    if isinstance(index, str) and index not in HOST_KEYS:
        raise UserError(f"{key}: not a device; use a GPU index (0, 1, ...), cpu or disk")
    if isinstance(index, int) and num_devices is not None and index >= num_devices:
        raise UserError(f"{key}: GPU {index} is beyond num_devices ({num_devices})")
    try:
        size_bytes(size)
    except ValueError:
        raise UserError(f"{key}: expected bytes or a size like 20GiB, got {size!r}") from None


def _device_key(device) -> Device:
    """YAML gives GPU indices as ints, dotlist overrides may give '0': accelerate wants ints."""
    return int(device) if isinstance(device, str) and device.isdigit() else device


class AccelerateBackend(GenerateEngine[AccelerateOptions]):
    Options = AccelerateOptions
    engine_modules = ("torch", "transformers", "accelerate")
    distributions = ("torch", "transformers", "accelerate")
    quantizations = quantization.QUANTIZATIONS  # torchao's, on the layers the map places on the entry's devices

    @classmethod
    def resolve_placement(cls, options: AccelerateOptions) -> Placement:
        device = resolve_device(options.device)
        count = options.num_devices or (cuda_device_count() if device == "cuda" else 1)
        return Placement(device, num_devices=count)

    def load(self) -> None:
        from accelerate import dispatch_model
        from transformers import AutoModelForCausalLM

        kwargs = dict(dtype=self.model.torch_dtype, attn_implementation=self.options.attn_implementation)
        model = weights.build_empty(self.model.hf_config, **kwargs)
        self.device_map = plan_device_map(model, self.options, self.placement)
        offload = dict(offload_dir=self.options.offload_folder, skip_keys=model._skip_keys_device_placement)
        if self.model.weights == "random":
            materialize_by_map(model, self.device_map, weights.init_range_of(self.model.hf_config))
        else:
            model = AutoModelForCausalLM.from_pretrained(self.model.source, device_map=self.device_map,
                                                         offload_folder=self.options.offload_folder, **kwargs)
        self.quantized = quantize_mapped(model, self.options.quantization, self.placement.device, self.device_map)
        if not hooked_blocks(model):  # random weights, or a one-device map that from_pretrained only moved
            # force_hooks: on one device (always so on a CPU) accelerate would just move the model; hooks stay
            # on, so the code measured here is the code that runs across GPUs.
            dispatch_model(model, self.device_map, force_hooks=True, **offload)
        self._ready(model.eval().requires_grad_(False), _sync_devices(self.device_map))

    def runtime_info(self) -> Dict[str, object]:
        return {**super().runtime_info(), "num_devices": self.placement.num_devices,
                "device_map_strategy": self.options.device_map,
                "device_map": {name: str(device) for name, device in self.device_map.items()},
                "layers_per_device": layers_per_device(self.net, self.device_map),
                "hooked_blocks": len(hooked_blocks(self.net)),
                "attn_implementation": self.options.attn_implementation, "quantization": self.quantized}


def quantize_mapped(model, method: str, device: str, device_map: Dict[str, Device]) -> str:
    """torchao's quantization (quantization.py) of a mapped model. On GPUs, modules the map offloads
    to the host or disk would be quantized for a device they do not run on: refused, naming them."""
    offloaded = [name for name, where in device_map.items() if where in HOST_KEYS] if device == "cuda" else []
    if method != "none" and offloaded:
        raise RuntimeError(f"quantization {method}: accelerate quantizes the layers on the entry's GPUs only; the "
                           f"device map offloads {len(offloaded)} module(s) to the host or disk ({offloaded[0]}, ...)")
    return quantization.quantize(model, method, device)


def plan_device_map(model, options: AccelerateOptions, placement: Placement) -> Dict[str, Device]:
    """accelerate's map for the meta model, as `from_pretrained(device_map=...)` would compute it.

    On a CPU accelerate would put the whole model in one entry; the map is split into blocks
    (decoder layers, embeddings, head) there, so every block gets its own hook as across GPUs.
    """
    from accelerate import infer_auto_device_map
    from accelerate.utils import get_balanced_memory, get_max_memory

    no_split = model._no_split_modules
    max_memory = _max_memory(options, placement)
    if options.device_map == "sequential" or placement.device == "cpu":
        max_memory = get_max_memory(max_memory)
    else:
        max_memory = get_balanced_memory(model, max_memory, no_split_module_classes=no_split, dtype=model.dtype,
                                         low_zero=options.device_map == "balanced_low_0")
    device_map = dict(infer_auto_device_map(model, max_memory=max_memory, no_split_module_classes=no_split,
                                            dtype=model.dtype))
    return split_into_blocks(model, device_map) if placement.device == "cpu" else device_map


def _max_memory(options: AccelerateOptions, placement: Placement) -> Optional[Dict[Device, Any]]:
    """The user's budget, or what is free on the entry's GPUs and the host (accelerate's default uses every GPU)."""
    from accelerate.utils import get_max_memory

    budget = {_device_key(device): size for device, size in (options.max_memory or {}).items()}
    if placement.device == "cpu":  # GPU entries of a GPU-sized YAML mean nothing here
        host: Dict[Device, Any] = {device: size for device, size in budget.items() if device in HOST_KEYS}
        return host or {"cpu": get_max_memory()["cpu"]}
    if budget:
        return budget
    free = get_max_memory()
    return {d: size for d, size in free.items() if d == "cpu" or (isinstance(d, int) and d < placement.num_devices)}


def dispatch_blocks(module, no_split: List[str], prefix: str = "") -> List[str]:
    """The units a device map can place: no-split layers, leaves, and modules holding tensors themselves."""
    children = list(module.named_children())
    own = any(True for _ in module.parameters(recurse=False)) or any(True for _ in module.buffers(recurse=False))
    if not children or own or type(module).__name__ in no_split:
        return [prefix]
    return [block for name, child in children
            for block in dispatch_blocks(child, no_split, f"{prefix}.{name}" if prefix else name)]


def split_into_blocks(model, device_map: Dict[str, Device]) -> Dict[str, Device]:
    blocks = dispatch_blocks(model, model._no_split_modules)
    split: Dict[str, Device] = {}
    for name, device in device_map.items():
        inside = [b for b in blocks if name == "" or b == name or b.startswith(name + ".")]
        split.update((block, device) for block in (inside or [name]))
    return split


def materialize_by_map(model, device_map: Dict[str, Device], init_range: float) -> None:
    """Each mapped module straight onto its device; disk-mapped ones on the host, which dispatch then offloads."""
    done: Dict[int, Tuple[torch.nn.Parameter, torch.nn.Parameter]] = {}  # shared: tied weights stay tied across calls
    for name, device in device_map.items():
        target = "cpu" if device in HOST_KEYS else f"cuda:{device}" if isinstance(device, int) else device
        weights.materialize(model.get_submodule(name), target, prefix=name, init_range=init_range, done=done)


def hooked_blocks(model) -> List[str]:
    """Modules carrying accelerate's AlignDevicesHook (possibly inside a SequentialHook)."""
    from accelerate.hooks import AlignDevicesHook

    names = []
    for name, module in model.named_modules():
        hook = getattr(module, "_hf_hook", None)
        hooks = getattr(hook, "hooks", (hook,))
        if any(isinstance(h, AlignDevicesHook) for h in hooks):
            names.append(name)
    return names


def layers_per_device(model, device_map: Dict[str, Device]) -> Dict[str, int]:
    """No-split layers (decoder layers) on each device, for the manifest."""
    no_split = set(model._no_split_modules or ())
    counts: Dict[str, int] = {}
    for name, module in model.named_modules():
        if type(module).__name__ in no_split:
            device = str(_device_of(name, device_map))
            counts[device] = counts.get(device, 0) + 1
    return counts


def _device_of(name: str, device_map: Dict[str, Device]) -> Device:
    owners = [key for key in device_map if key == "" or name == key or name.startswith(key + ".")]
    return device_map[max(owners, key=len)]


def _sync_devices(device_map: Dict[str, Device]) -> Callable[[], None]:
    """Synchronize every GPU of the map before a stamp: the last token comes from the last one."""
    import torch

    gpus = sorted({d for d in device_map.values() if isinstance(d, int)})
    if not gpus:
        return lambda: None

    def sync() -> None:
        for gpu in gpus:
            torch.cuda.synchronize(gpu)

    return sync
