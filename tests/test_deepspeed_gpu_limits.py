"""What the H200 taught about DeepSpeed-Inference's GPU options (docs/results/h200-20261128), held on the CPU: the
JIT kernel build's reading of TORCH_CUDA_ARCH_LIST, and its CUDA graph, which no causal LM can use under
`generate`, refused at plan time in one line."""

from backends.base import Placement
from backends.generate.deepspeed_tp import DeepSpeedBackend, DeepSpeedOptions
from app.cli import main


def test_a_deepspeed_rank_gets_the_arch_list_its_kernel_build_can_read(monkeypatch):
    """`9.0a` (NVIDIA's images set it) ended the fused kernels' build in int('0a') on the H200."""
    cuda = Placement("cuda", num_devices=1, tp_size=1)
    for given, passed in (("9.0a", "9.0"), ("8.0;9.0a+PTX", "8.0;9.0+PTX"), ("9.0 10.0a", "9.0 10.0")):
        monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", given)
        assert DeepSpeedBackend.launch_env(DeepSpeedOptions(name="deepspeed"), cuda)["TORCH_CUDA_ARCH_LIST"] == passed
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "9.0")  # nothing to change: the rank inherits it as it is
    assert "TORCH_CUDA_ARCH_LIST" not in DeepSpeedBackend.launch_env(DeepSpeedOptions(name="deepspeed"), cuda)
    cpu = Placement("cpu", num_devices=2, tp_size=2)
    assert "TORCH_CUDA_ARCH_LIST" not in DeepSpeedBackend.launch_env(DeepSpeedOptions(name="deepspeed"), cpu)


def test_deepspeeds_cuda_graph_is_refused_at_plan_time_with_what_to_use_instead(capsys):
    """On the H200 DeepSpeed raised "enable_cuda_graph is not supported with replace_with_kernel_inject for this
    model" after a 47 s load; the plan says why before any rank starts."""
    assert main(["yamls/cpu-tiny.yaml", "backends=[{name: deepspeed, init_inference: {enable_cuda_graph: true}}]",
                 "--dry-run"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # the console wraps long lines
    assert "DeepSpeed captures a CUDA graph with kernel injection for BERT, DistilBERT and CLIP only" in out
    assert "use hf with compile: true; its points will be skipped" in out
