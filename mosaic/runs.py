"""Sweeps on the MosaicML platform: build one run per compute template, submit, collect results from logs.

    python benchmark.py yamls/70b.yaml --mcli mcli/h100-x8.yaml --mcli mcli/a100-80gb-x8.yaml [--submit]
    python benchmark.py --collect RUN_NAME [RUN_NAME ...] [--output-dir DIR]

A run gets the whole resolved sweep as its `parameters` (the platform mounts them at PARAMETERS_PATH),
so what the dry run prints is exactly what runs. Results come home through the run's log (see
harness/measure/logmarkers.py): no object storage or credentials beyond the API key are needed.

The SDK is imported inside functions: it costs most of a second, and only launches need it. The
package is `mosaic`: `platform` would shadow the standard library and `mcli` the SDK.
"""

from __future__ import annotations

import copy
import difflib
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple, get_type_hints

from harness.config.cluster import job_cluster
from harness.config.loading import read_yaml_mapping
from harness.errors import UserError
from harness.measure import logmarkers

if TYPE_CHECKING:
    from mcli import RunConfig

PARAMETERS_PATH = "/mnt/config/parameters.yaml"  # where the platform mounts a run's `parameters`
RUN_COMMAND = f"python benchmark.py {PARAMETERS_PATH} --emit-log-markers"
TEMPLATE_FIELDS = ("name", "image", "command", "compute", "scheduling", "integrations", "env_variables", "metadata")
REQUIRED_FIELDS = ("name", "image", "command", "compute")
# Why a field a RunConfig knows is still refused in a template.
FIELD_HINTS = {
    "parameters": "benchmark.py fills it with the resolved sweep YAML",
    "gpu_type": "use compute.gpu_type",
    "gpu_num": "use compute.gpus",
    "cpus": "use compute.cpus",
    "cluster": "use compute.cluster",
}
# The platform's git_repo integration (not in the SDK, which passes integrations through unchecked).
GIT_REPO_FIELDS = ("integration_type", "git_repo", "git_branch", "git_commit", "path", "ssh_clone", "pip_install",
                   "host", "git_clone_recursive")
# The platform's compute.gpu_type -> harness/peaks.yaml's GPU (its SXM parts).
MCLI_GPU_TYPES = {"a100_40gb": "a100-sxm-40gb", "a100_80gb": "a100-sxm-80gb", "h100_80gb": "h100-sxm",
                  "h200_141gb": "h200", "b200_192gb": "b200"}
GPUS_PER_NODE = 8  # the platform's nodes: a run of 16 GPUs spans 2 of them
PLACEHOLDER_OWNER = "YOUR-ORG/"  # the shipped templates' git_repo, until a user names their fork
NO_API_KEY = ("no MosaicML API key: set MOSAICML_API_KEY or run `mcli set api-key` "
              "(create a key in the MosaicML console)")
_RUN_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]*$")


def _sdk():
    """The `mcli` SDK. Without the package, `import mcli` still succeeds, as an empty namespace package made
    of this repo's mcli/ folder of YAMLs; say what to install instead of failing with AttributeError."""
    try:
        import mcli
    except ImportError:
        mcli = None
    if getattr(mcli, "RunConfig", None) is None:
        raise UserError("the MosaicML SDK is not installed: pip install mosaicml-cli (pinned in requirements.txt)")
    return mcli


# ---- templates -> run configs ----

def build_run_configs(config_plain: Dict[str, Any], templates: Sequence[Path]) -> List["RunConfig"]:
    """One RunConfig per compute template, each with the whole resolved sweep (`to_plain`) as parameters."""
    templates = [Path(t) for t in templates]
    _check_unique_tags(templates)
    return [_build_run_config(config_plain, t) for t in templates]


def _build_run_config(config_plain: Dict[str, Any], template: Path) -> "RunConfig":
    raw = load_template(template)
    tag = hardware_tag(template)
    parameters = copy.deepcopy(config_plain)
    parameters["benchmark_name"] = f"{config_plain['benchmark_name']}-{tag}"
    parameters["hardware"] = template_hardware(raw, parameters.get("hardware") or {})
    parameters["cluster"] = job_cluster(parameters, nodes_of(raw["compute"]), f"{template}: compute")
    metadata = {**(raw.get("metadata") or {}), "benchmark_name": parameters["benchmark_name"],
                "template": template.name}
    name = run_name(str(raw["name"]), config_plain["benchmark_name"], tag)
    return _sdk().RunConfig.from_dict({**raw, "name": name, "parameters": parameters, "metadata": metadata})


def template_hardware(raw: Dict[str, Any], hardware: Dict[str, Any]) -> Dict[str, Any]:
    """The sweep's `hardware` section for a template's machine: its GPU (harness/peaks.yaml's name for the platform's
    compute.gpu_type) and count, and the template's `metadata.cost_per_hour` (one GPU's price), where the sweep
    does not set them. The dry run plans for that machine; the run's peaks and cost columns use them."""
    compute, metadata = raw["compute"], raw.get("metadata") or {}
    out = dict(hardware)
    if out.get("gpu") is None and MCLI_GPU_TYPES.get(compute.get("gpu_type")):
        out["gpu"] = MCLI_GPU_TYPES[compute["gpu_type"]]
        out["num_gpus"] = out.get("num_gpus") or int(compute.get("gpus") or 1) // nodes_of(compute)
    if out.get("cost_per_hour") is None and metadata.get("cost_per_hour") is not None:
        out["cost_per_hour"] = float(metadata["cost_per_hour"])
    return out


def template_machine(template: Path) -> Optional[Tuple[str, int]]:
    """(harness/peaks.yaml GPU name, count per node) of a template's compute section, None when its gpu_type is
    unknown."""
    compute = load_template(template)["compute"]
    gpu = MCLI_GPU_TYPES.get(compute.get("gpu_type"))
    return (gpu, int(compute.get("gpus") or 1) // nodes_of(compute)) if gpu else None


def nodes_of(compute: Dict[str, Any]) -> int:
    """Nodes a run's compute spans: `nodes` where set, else its GPUs in the platform's nodes of GPUS_PER_NODE."""
    if compute.get("nodes"):
        return int(compute["nodes"])
    return max(1, -(-int(compute.get("gpus") or 1) // GPUS_PER_NODE))


def load_template(path: Path) -> Dict[str, Any]:
    """A template's fields, checked: the SDK only warns about unknown ones, and a typo'd field silently
    changes what runs (a misspelled `git_branch` clones the default branch)."""
    raw = _read_template(Path(path))
    check_template(raw, Path(path))
    return raw


def _read_template(path: Path) -> Dict[str, Any]:
    return read_yaml_mapping(path, "mcli template", "run fields (name, image, compute, command, ...)")


def check_template(raw: Dict[str, Any], path: Path) -> None:
    """Every field known and in its place, the required ones set, and a command that runs our sweep."""
    mcli = _sdk()
    _check_fields(raw, TEMPLATE_FIELDS, "", path)
    for field in REQUIRED_FIELDS:
        if raw.get(field) in (None, "", {}):
            raise UserError(f"{path}: {field}: required (a template needs {', '.join(REQUIRED_FIELDS)})")
    _check_fields(raw["compute"], tuple(get_type_hints(mcli.ComputeConfig)), "compute.", path)
    _check_fields(raw.get("scheduling") or {}, tuple(get_type_hints(mcli.SchedulingConfig)), "scheduling.", path)
    _check_integrations(raw.get("integrations") or [], path)
    _check_env(raw.get("env_variables") or {}, path)
    if not isinstance(raw.get("metadata") or {}, dict):
        raise UserError(f"{path}: metadata: expected a mapping of key: value")
    if PARAMETERS_PATH not in str(raw["command"]) or "--emit-log-markers" not in str(raw["command"]):
        raise UserError(f"{path}: command: must run `{RUN_COMMAND}` (the run reads its sweep from "
                        f"{PARAMETERS_PATH}, and --collect reads results from the markers it prints)")
    if nodes_of(raw["compute"]) > 1 and "--node-agent" not in str(raw["command"]):
        raise UserError(f"{path}: command: compute spans {nodes_of(raw['compute'])} nodes; node 0 must run the sweep "
                        "with cluster.rendezvous=$MASTER_ADDR:PORT and every other node `python benchmark.py "
                        "--node-agent $MASTER_ADDR:PORT` (see mcli/h100-x16.yaml)")


def _check_fields(mapping: Any, allowed: Sequence[str], prefix: str, path: Path) -> None:
    if not isinstance(mapping, dict):
        raise UserError(f"{path}: {prefix.rstrip('.') or 'template'}: expected a mapping of fields")
    for key in mapping:
        if key not in allowed:
            close = difflib.get_close_matches(str(key), allowed, n=1)
            why = FIELD_HINTS.get(key) if not prefix else None
            hint = f"; {why}" if why else (f"; did you mean {close[0]!r}?" if close else "")
            raise UserError(f"{path}: {prefix}{key}: not a template field{hint} (allowed: {', '.join(allowed)})")


def _check_integrations(integrations: Any, path: Path) -> None:
    if not isinstance(integrations, list):
        raise UserError(f"{path}: integrations: expected a list of mappings, each with an integration_type")
    for i, item in enumerate(integrations):
        if not isinstance(item, dict) or not item.get("integration_type"):
            raise UserError(f"{path}: integrations[{i}]: expected a mapping with an integration_type")
        if item["integration_type"] == "git_repo":
            _check_fields(item, GIT_REPO_FIELDS, f"integrations[{i}].", path)


def _check_env(env: Any, path: Path) -> None:
    if not isinstance(env, dict):
        raise UserError(f"{path}: env_variables: expected a mapping of NAME: value")
    for key, value in env.items():
        if not isinstance(value, str):
            raise UserError(f"{path}: env_variables.{key}: must be a string, got {value!r} (quote it)")


def _check_unique_tags(templates: Sequence[Path]) -> None:
    seen: Dict[str, Path] = {}
    for template in templates:
        tag = hardware_tag(template)
        if tag in seen:
            raise UserError(f"--mcli: {seen[tag]} and {template} both give hardware tag {tag!r}; "
                            "each template needs its own file name")
        seen[tag] = template


def hardware_tag(template: Path) -> str:
    """The template's file name as a name part: mcli/h100-x8.yaml -> 'h100-x8' (suffixes benchmark_name)."""
    tag = _dns_label(Path(template).stem)
    if not tag:
        raise UserError(f"{template}: file name gives no hardware tag; name it like h100-x8.yaml")
    return tag


def run_name(prefix: str, benchmark_name: str, tag: str) -> str:
    """`<prefix>-<benchmark_name>-<tag>` as the platform accepts it: lowercase letters, digits and '-', at most
    56 characters (it appends '-' and a 6-character id, up to Kubernetes' 63). The benchmark name is
    shortened first, so the hardware tag survives."""
    from mcli.utils.utils_string_functions import MAX_RUN_NAME_LENGTH

    head, tail = _dns_label(prefix), _dns_label(tag)
    room = MAX_RUN_NAME_LENGTH - len(head) - len(tail) - 2
    middle = _dns_label(benchmark_name)[: max(room, 0)].strip("-")
    return "-".join(part for part in (head, middle, tail) if part)[:MAX_RUN_NAME_LENGTH].strip("-")


def _dns_label(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def render_run_yaml(run_config: "RunConfig") -> str:
    """The run as YAML, in the SDK's own layout (what `mcli run -f` reads), for the dry run."""
    return str(run_config) + "\n"


# ---- submit ----

def require_api_key() -> None:
    """Fail before any request, exactly where the SDK would on its first one (same env var, config file
    and access-token rules, all read locally)."""
    _sdk()
    from mcli.api.engine.engine import MAPIConnection
    from mcli.api.exceptions import MCLIConfigError

    try:
        MAPIConnection.get_current_connection().request_header  # noqa: B018 (the property does the check)
    except MCLIConfigError:
        raise UserError(NO_API_KEY) from None


def submit(run_configs: Sequence["RunConfig"]) -> List[str]:
    """`mcli.create_run` for each config; returns the platform's run names (it appends a unique id).

    The key and every config are checked before the first run is created, so a bad one submits nothing.
    """
    require_api_key()
    for run_config in run_configs:
        _finalize(run_config)
    names: List[str] = []
    for run_config in run_configs:
        names.append(_create(run_config, names))
    return names


def _finalize(run_config: "RunConfig") -> None:
    """What `create_run` does to a config before sending it, on a copy (finalizing mutates)."""
    _check_git_repos(run_config)
    mcli = _sdk()
    from mcli.api.exceptions import MCLIException

    try:
        final = mcli.FinalRunConfig.finalize_config(copy.deepcopy(run_config))
        final.to_create_run_api_input()
    except MCLIException as e:
        raise UserError(f"run {run_config.name}: {e}; nothing was submitted") from None


def _check_git_repos(run_config: "RunConfig") -> None:
    """A placeholder repo would be found out only after the run is scheduled, when the clone fails."""
    for item in run_config.integrations:
        if str(item.get("git_repo", "")).startswith(PLACEHOLDER_OWNER):
            template = run_config.metadata.get("template", "its mcli template")
            raise UserError(f"run {run_config.name}: git_repo is still the placeholder {item['git_repo']!r}; set it "
                            f"to this project's GitHub owner/name in {template}; nothing was submitted")


def _create(run_config: "RunConfig", submitted: List[str]) -> str:
    mcli = _sdk()
    from mcli.api.exceptions import MCLIException

    try:
        return mcli.create_run(run_config).name
    except (MCLIException, TimeoutError) as e:
        done = (f"; already submitted: {', '.join(submitted)} (stop with `mcli stop run NAME`)" if submitted
                else "; nothing was submitted")
        raise UserError(f"submitting {run_config.name}: {str(e) or type(e).__name__}{done}") from None


def follow_command(run_name: str) -> str:
    """How a user watches a submitted run."""
    return f"mcli logs {run_name} --follow"


# ---- collect ----

def collect(run_names: Sequence[str], output_root: Path) -> List[Path]:
    """Fetch each run's log, rebuild its results folder (results.csv, samples.csv, manifest.json) under
    output_root/<run name>/, ready for `python -m plots`; returns the folders.

    Every log is fetched and parsed before anything is written, so one bad name writes nothing.
    Collecting again (the run has progressed) overwrites that run's folder with the newer files.
    """
    require_api_key()
    for name in run_names:
        _check_run_name(name)
    found = {name: results_from_log(name, fetch_log(name)) for name in run_names}
    return [write_results(Path(output_root) / name, files) for name, files in found.items()]


def _check_run_name(name: str) -> None:
    if not _RUN_NAME_RE.match(name):  # it becomes a folder name: no '/', no '..'
        raise UserError(f"--collect: {name!r} is not a run name (see `mcli get runs`)")


def fetch_log(run_name: str) -> str:
    """The run's whole log so far (latest resumption, node 0), joined from the SDK's chunks."""
    mcli = _sdk()
    from mcli.api.exceptions import MCLIException

    try:
        return "".join(mcli.get_run_logs(run_name))
    except (MCLIException, TimeoutError) as e:
        raise UserError(f"--collect {run_name}: {str(e) or type(e).__name__}") from None


def results_from_log(run_name: str, log_text: str) -> Dict[str, str]:
    """{file name: text} from a run's log; a log without results rows is an error naming the likely cause."""
    files = logmarkers.parse(log_text)
    if "results.csv" not in files:
        raise UserError(f"--collect {run_name}: its log holds no results yet ({logmarkers.TAG}... lines): no "
                        "point has finished, or the run did not use --emit-log-markers")
    return files


def write_results(folder: Path, files: Dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        tmp = folder / f".{name}.tmp"
        tmp.write_bytes(text.encode("utf-8"))  # bytes: keep the CSVs' CRLF exactly as the run wrote them
        os.replace(tmp, folder / name)
    return folder
