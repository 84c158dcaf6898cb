"""Configs generated from the typed schema, each with one key given a wrong kind, a non-finite or out-of-range value,
a misspelt name or a second copy: `benchmark.py CONFIG --dry-run` answers with one `error:` line naming the key and
exit 2, or plans a correct sweep; never a traceback. The keys come from the declarations themselves (every section
of SweepYaml, the synthetic engine's options, the random workload's), so a key added later is tried too."""

import contextlib
import dataclasses
import io
import math
import typing
from pathlib import Path
from typing import Any, List, Optional, Tuple

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.cli import main
from backends.registry import BACKENDS
from harness.config.sweep import SweepYaml
from workloads.registry import WORKLOADS

BASE = {"benchmark_name": "prop", "model": {"preset": "tiny-llama", "dtype": "fp32"},
        "backends": [{"name": "synthetic"}], "batch_sizes": [1, 2], "input_lengths": [16], "output_lengths": [4],
        "num_batches": 2, "num_warmup_batches": 0}
# Keys read by their own code (a list or `auto`, a section picked by name) or that need other keys to be read at all.
SKIPPED = {"backends", "workload", "models", "cluster"}


@dataclasses.dataclass(frozen=True)
class Key:
    path: Tuple[Any, ...]  # into the raw config: names, and 0 for the first backend entry
    hint: Any
    limits: Any  # harness/fields.py's Range, or None

    @property
    def name(self) -> str:
        return ".".join(f"[{p}]" if isinstance(p, int) else p for p in self.path).replace(".[", "[")


def keys_of(schema: type, prefix: Tuple[Any, ...]) -> List[Key]:
    out = []
    hints = typing.get_type_hints(schema)
    for f in dataclasses.fields(schema):
        if not prefix and f.name in SKIPPED:
            continue
        section = _section(hints[f.name])
        if section is not None:
            out += keys_of(section, (*prefix, f.name))
        else:
            out.append(Key((*prefix, f.name), hints[f.name], f.metadata.get("range")))
    return out


def _section(hint: Any) -> Optional[type]:
    kinds = [a for a in typing.get_args(hint) if a is not type(None)] or [hint]
    found = [k for k in kinds if isinstance(k, type) and dataclasses.is_dataclass(k)]
    return found[0] if found and typing.get_origin(hint) is not list else None


SYNTHETIC = BACKENDS.get("synthetic", "backends[0].name").Options
RANDOM = WORKLOADS.get("random", "workload").Options
KEYS = (keys_of(SweepYaml, ()) + [k for k in keys_of(SYNTHETIC, ("backends", 0)) if k.path[-1] not in
                                  ("name", "label", "grid", "grid_values", "speculative", "quantization")]
        + keys_of(RANDOM, ("workload",)))

ODD = st.one_of(
    st.integers(min_value=-(10**30), max_value=10**30), st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(), st.none(), st.text(max_size=12), st.sampled_from(["1e9", "nan", "inf", "-1", "", "auto"]),
    st.lists(st.integers(-3, 3), max_size=3), st.dictionaries(st.sampled_from(["a", "rate", "x"]), st.integers(-2, 5),
                                                              max_size=2),
)


def certainly_wrong(key: Key, value: Any) -> bool:
    """Values no declaration of this key can take: decided from the type hint alone (not from the code under test)."""
    if _has_nan(value):
        return True
    hint = key.hint
    optional = typing.get_origin(hint) is typing.Union and type(None) in typing.get_args(hint)
    if optional:
        hint = next(a for a in typing.get_args(hint) if a is not type(None))
        if value is None:
            return False
    if hint is Any:
        return False
    if value is None:
        return True
    origin = typing.get_origin(hint)
    if origin is list:
        return not isinstance(value, list)
    if origin is dict:
        return not isinstance(value, dict)
    if hint is bool:
        return not isinstance(value, bool)
    if hint is int:
        return isinstance(value, bool) or not isinstance(value, int) or not _within(key, value)
    if hint is float:
        return (isinstance(value, bool) or not isinstance(value, (int, float)) or math.isinf(value)
                or not _within(key, value)) and not isinstance(value, str)
    if hint is str:
        return isinstance(value, (bool, list, dict))
    return False


def _within(key: Key, value: float) -> bool:
    return key.limits is None or key.limits.holds(value)


def _has_nan(value: Any) -> bool:
    if isinstance(value, float):
        return math.isnan(value)
    if isinstance(value, list):
        return any(_has_nan(v) for v in value)
    if isinstance(value, dict):
        return any(_has_nan(v) for v in value.values())
    return False


def with_value(path: Tuple[Any, ...], value: Any) -> dict:
    raw = yaml.safe_load(yaml.safe_dump(BASE))
    node = raw
    for part in path[:-1]:
        node = node.setdefault(part, {}) if isinstance(part, str) else node[part]
    node[path[-1]] = value
    return raw


def run(folder: Path, text: str) -> Tuple[int, str]:
    """`benchmark.py CONFIG --dry-run` in process: its exit code and stderr; a traceback fails the test."""
    path = folder / "config.yaml"
    path.write_text(text)
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        rc = main([str(path), "--dry-run"])
    return rc, err.getvalue()


def assert_one_line_naming(rc: int, err: str, key: str) -> None:
    assert rc == 2, (key, rc, err)
    assert err.count("\n") == 1 and err.startswith("error: "), (key, err)
    top = key.split(".")[0].split("[")[0]
    assert top in err, (key, err)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("configs")


CHECKS = settings(max_examples=700, deadline=None, derandomize=True,
                  suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@CHECKS
@given(key=st.sampled_from(KEYS), value=ODD)
def test_a_key_given_any_value_is_one_line_or_a_correct_plan(folder, key, value):
    rc, err = run(folder, yaml.safe_dump(with_value(key.path, value)))
    if certainly_wrong(key, value):
        assert_one_line_naming(rc, err, key.name)
    else:
        assert rc in (0, 2), (key.name, value, rc, err)
        assert rc == 0 or (err.count("\n") == 1 and err.startswith("error: ")), (key.name, value, err)


@settings(CHECKS, max_examples=200)
@given(key=st.sampled_from(KEYS), edit=st.integers(0, 2), where=st.integers(0, 30))
def test_a_misspelt_key_is_one_line_naming_it(folder, key, edit, where):
    name = key.path[-1]
    i = where % len(name)
    wrong = [name[:i] + name[i + 1:], name[:i] + "x" + name[i:], name[:i] + name[i].upper() + name[i + 1:]][edit]
    siblings = {k.path[-1] for k in KEYS if k.path[:-1] == key.path[:-1]}
    if wrong in siblings or wrong == name:
        return
    raw = with_value(key.path, 1)
    node = raw
    for part in key.path[:-1]:
        node = node[part]
    node[wrong] = node.pop(name)
    rc, err = run(folder, yaml.safe_dump(raw))
    assert_one_line_naming(rc, err, key.name)
    assert f"{wrong}: unknown key" in err, err


@settings(CHECKS, max_examples=100)
@given(key=st.sampled_from([k for k in KEYS if len(k.path) == 1]))
def test_a_key_written_twice_is_one_line_with_both_lines(folder, key):
    text = yaml.safe_dump(BASE) + f"{key.path[0]}: null\n"
    if key.path[0] not in BASE:
        text += f"{key.path[0]}: null\n"
    rc, err = run(folder, text)
    assert rc == 2 and err.count("\n") == 1, err
    assert f"duplicate key {key.path[0]!r}" in err and "lines " in err, err


def test_a_config_that_is_not_utf8_is_one_line_with_the_byte(folder):
    path = folder / "latin1.yaml"
    path.write_bytes(yaml.safe_dump(BASE).encode() + b"# caf\xe9\n")
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert main([str(path), "--dry-run"]) == 2
    at, line = len(yaml.safe_dump(BASE).encode()) + len("# caf"), yaml.safe_dump(BASE).count("\n") + 1
    assert err.getvalue() == f"error: {path}: not UTF-8 text: byte {at} (line {line}) is b'\\xe9'; save the file as " \
                             "UTF-8\n"
