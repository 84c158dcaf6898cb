"""The `openai` backend's server command: its `{NAME}` placeholders, checked when the config is read and filled when
the server starts. Built-in ones are the harness's (`{python}`, `{port}`, `{model_dir}`, `{checkpoint_dir}`, and
with a `lora` section `{lora_modules}`, `{lora_adapters}`, `{lora_rank}`); any other is a key of `server_args`, so
that a grid over `server_args.KEY` starts one server per value."""

from __future__ import annotations

import re
from typing import Any, Dict, List

from harness.config.grid import show
from harness.errors import UserError

BUILT_IN = ("python", "port", "model_dir", "checkpoint_dir", "lora_modules", "lora_adapters", "lora_rank")
# Filled from the entry's `lora` section: the adapters the harness made, as `name=path` words (vLLM's --lora-modules
# takes them after one flag), how many, and their rank.
LORA_PLACEHOLDERS = ("{lora_modules}", "{lora_adapters}", "{lora_rank}")
PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
NEAR_PLACEHOLDER = re.compile(r"\{[\w.\-]+\}")  # what reads as one: a word in braces


def placeholders(command: str) -> List[str]:
    """The names of the command's `{NAME}` placeholders, each once, in order."""
    return list(dict.fromkeys(PLACEHOLDER.findall(command)))


def check_server_args(key: str, command: str, server_args: Dict[str, Any]) -> None:
    """Every placeholder is filled and every server_args key is used; a UserError naming the key otherwise."""
    near = next((m.group(0) for m in NEAR_PLACEHOLDER.finditer(command) if not PLACEHOLDER.fullmatch(m.group(0))),
                None)
    if near is not None:  # `{0}`, `{a.b}`: meant as a placeholder, but none is named so (JSON's braces hold quotes)
        raise UserError(f"{key}.command: {near} is not a placeholder: a placeholder is {{NAME}}, letters, digits and "
                        "_ starting with a letter or _")
    names = placeholders(command)
    for name in server_args:
        if name in BUILT_IN:
            raise UserError(f"{key}.server_args.{name}: {{{name}}} is filled by the harness; give the value "
                            "another name")
        if name not in names:
            raise UserError(f"{key}.server_args.{name}: {key}.command has no {{{name}}}, so it would have no "
                            f"effect; put {{{name}}} where the value goes in the command, or remove it")
    for name in names:
        if name not in BUILT_IN and name not in server_args:
            built_in = ", ".join(f"{{{b}}}" for b in BUILT_IN)
            raise UserError(f"{key}.command: {{{name}}} is neither a placeholder the harness fills ({built_in}) "
                            f"nor a key of {key}.server_args")


def arg_values(server_args: Dict[str, Any]) -> Dict[str, str]:
    """server_args as placeholder -> text, each value written as YAML writes it (`true`, `16`, `fp8`)."""
    return {f"{{{name}}}": show(value) for name, value in server_args.items()}


def check_lora(key: str, command: str, lora: Any) -> None:
    """A `lora` section needs a command that loads what the harness makes ({lora_modules} as a word of its own); its
    placeholders need the section."""
    words = command.split()
    if lora is None:
        used = next((p for p in LORA_PLACEHOLDERS if p in command), None)
        if used is not None:
            raise UserError(f"{key}.command: {used} is filled from {key}.lora, the adapters the harness makes; add a "
                            "lora section or remove it")
    elif lora.load == "on_demand":
        if "{lora_modules}" in command:
            raise UserError(f"{key}.command: {{lora_modules}} loads every adapter as the server starts; with "
                            f"{key}.lora.load: on_demand the server finds each when a request first names it: remove "
                            "--lora-modules {lora_modules}")
        if "--enable-lora" not in words:
            raise UserError(f"{key}.command: must serve adapters: add --enable-lora --max-loras {{lora_adapters}} "
                            "--max-lora-rank {lora_rank} (vLLM's flags)")
    elif "{lora_modules}" not in words:
        raise UserError(f"{key}.command: must load the adapters {key}.lora makes: add --enable-lora --max-loras "
                        "{lora_adapters} --max-lora-rank {lora_rank} --lora-modules {lora_modules} (vLLM's flags; "
                        "{lora_modules} a word of its own)")


def expand(words: List[str], values: Dict[str, str], lora_modules: List[str]) -> List[str]:
    """The command's words with every placeholder filled; a {lora_modules} word becomes one word per adapter."""
    out: List[str] = []
    for word in words:
        out.extend(lora_modules if word == "{lora_modules}" else [fill(word, values)])
    return out


def fill(word: str, values: Dict[str, str]) -> str:
    """Placeholders are filled word by word after splitting, so a path with spaces stays one argument."""
    for placeholder, value in values.items():
        word = word.replace(placeholder, value)
    return word
