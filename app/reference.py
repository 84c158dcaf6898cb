"""The docs' generated reference pages: the command line, every config key, every results column.

Each page is rendered from the code it documents (the argument parsers, the typed config, the column declarations),
so it cannot drift from what the tool does: `python scripts/gen_docs.py` writes them, and tests/test_docs.py fails when
a page on disk differs from what the code renders now.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Callable, Dict

from app.console import parameter_count
from backends.registry import BACKENDS
from harness.config import schema
from harness.config.sections import ModelConfig
from harness.markdown import cell
from harness.measure import columns
from harness.model.spec import preset_names, resolve_model
from workloads.registry import WORKLOADS

ROOT = Path(__file__).resolve().parent.parent
DOCS, YAMLS = ROOT / "docs", ROOT / "yamls"
HELP_WIDTH = 100  # help text wrapped the same on every machine, whatever its terminal


def cli_page() -> str:
    from app.cli import build_parser
    from plots.__main__ import build_parser as plots_parser
    from plots.compare_report import build_parser as compare_parser

    parts = ["# Command line", "",
             "Generated from the argument parsers (`app/cli.py`, `plots/__main__.py`, `plots/compare_report.py`) by "
             "`python scripts/gen_docs.py`; `tests/test_docs.py` fails when this page is out of date.", ""]
    for title, parser in (("python benchmark.py", build_parser()), ("python -m plots", plots_parser()),
                          ("python -m plots compare", compare_parser())):
        parts += [f"## {title}", "", "```text", _help(parser).rstrip(), "```", ""]
    return "\n".join(parts)


def config_page() -> str:
    head = ("# Config keys\n\n"
            "Every key a sweep YAML may hold, with its type, default and meaning: what "
            "`python benchmark.py --schema [SECTION]` prints, generated from the typed config the YAML is checked "
            "against (`python scripts/gen_docs.py`; `tests/test_docs.py` fails when this page is out of date). "
            "`sweep` is the YAML's top level; `backends.NAME` is a `backends` entry with `name: NAME`; "
            "`workload.NAME` the `workload` section of that kind of prompts. `required` means the key has no "
            "default.\n\n")
    return head + schema.render_markdown(schema.sections(BACKENDS, WORKLOADS))


def shipped_page() -> str:
    """The presets (harness/presets/) with the sizes planning reads of them, and the YAMLs (yamls/) with what each
    one's opening comment says it is for."""
    lines = ["# Presets and shipped YAMLs", "",
             "Generated from `harness/presets/` and `yamls/` by `python scripts/gen_docs.py`; `tests/test_docs.py` "
             "fails when this page is out of date. A preset is an architecture (a `config.json`), run with random "
             "weights: `model.preset: NAME`. Your own model is `model.name_or_path` instead "
             "([your model on your GPU](../getting-started/your-model.md)).", "",
             "## Presets", "",
             "| preset | model_type | parameters | layers | hidden | heads / KV heads | experts (active) | "
             "max positions |", "|---|---|--:|--:|--:|--:|--:|--:|"]
    for name in preset_names():
        model = resolve_model(ModelConfig(preset=name))
        c = model.config
        experts = getattr(c, "num_local_experts", None)
        lines.append(f"| `{name}` | {c.model_type} | {parameter_count(model.num_params)} | {c.num_hidden_layers} | "
                     f"{c.hidden_size:,} | {c.num_attention_heads} / {c.num_key_value_heads} | "
                     f"{f'{experts} ({c.num_experts_per_tok})' if experts else '-'} | "
                     f"{c.max_position_embeddings:,} |")
    lines += ["", "## YAMLs", "", "Run one with `python benchmark.py yamls/NAME.yaml`; `--dry-run` shows every point "
              "it would run here, `--plan` what fits.", "", "| YAML | what it is for |", "|---|---|"]
    for path in sorted(YAMLS.glob("*.yaml")):
        lines.append(f"| `yamls/{path.name}` | {_opening_comment(path)} |")
    return "\n".join(lines) + "\n"


def _opening_comment(path: Path) -> str:
    """The comment lines a YAML opens with, joined: what the file says it is for."""
    words = []
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        words.append(line.lstrip("# ").strip())
    text = " ".join(w for w in words if w)
    if not text:
        raise ValueError(f"{path}: opens with no comment saying what it is for")
    return cell(text)


PAGES: Dict[str, Callable[[], str]] = {
    "reference/cli.md": cli_page,
    "reference/config.md": config_page,
    "reference/columns.md": columns.reference_markdown,
    "reference/shipped.md": shipped_page,
}


def write_pages(docs: Path = DOCS) -> None:
    for relative, render in PAGES.items():
        path = docs / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render())


def _help(parser: argparse.ArgumentParser) -> str:
    kind = parser.formatter_class
    # Every parser here formats with one of argparse's classes, which take a width (its stubs promise only `prog`).
    assert isinstance(kind, type) and issubclass(kind, argparse.HelpFormatter)
    parser.formatter_class = lambda prog: kind(prog, width=HELP_WIDTH)
    try:
        return parser.format_help()
    finally:
        parser.formatter_class = kind
