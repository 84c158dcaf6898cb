"""YAML text read strictly: what a config file or a `key=value` override says, and nothing PyYAML would guess.

PyYAML reads YAML 1.1, which takes `1:30` for 90 (base 60), `1_0` for 10, `010` for 8 and `1e3` for text; it keeps
the last of a key written twice; and its aliases can expand a few lines into billions of values. Here numbers are
YAML 1.2's (the core schema: `1e3` is a number, `1:30` and `1_0` are text, `010` is ten), a key written twice is an
error with both lines, and a document that expands past MAX_VALUES through its aliases is refused. `true`/`false`
stay as YAML 1.1 reads them, `yes`/`no`/`on`/`off` included, as configs are written.
"""

from __future__ import annotations

import re
from typing import Any, Dict

import yaml

from harness.errors import UserError

# The most values a document may hold once its aliases (`*name`) are expanded: every shipped YAML holds under 500.
MAX_VALUES = 100_000
# The deepest a document may nest lists and mappings: a config is a few levels deep (a grid of engine_args: 5).
MAX_DEPTH = 64
_INT = "tag:yaml.org,2002:int"
_FLOAT = "tag:yaml.org,2002:float"


class StrictLoader(yaml.SafeLoader):
    """PyYAML's safe loader with YAML 1.2's numbers and duplicate keys refused."""


StrictLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag not in (_INT, _FLOAT)]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
StrictLoader.add_implicit_resolver(_INT, re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$"),
                                   list("-+0123456789"))
StrictLoader.add_implicit_resolver(
    _FLOAT, re.compile(r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)"
                       r"|\.(?:nan|NaN|NAN))$"), list("-+0123456789."))


def _int(loader: StrictLoader, node: yaml.ScalarNode) -> int:
    text = str(loader.construct_scalar(node))
    if text.startswith(("0o", "0x")):
        return int(text[2:], 8 if text[1] == "o" else 16)
    return int(text, 10)  # 010 is ten, as YAML 1.2 reads it (1.1: eight)


def _mapping(loader: StrictLoader, node: yaml.MappingNode) -> dict:
    """A mapping whose keys are each given once (a merge key `<<: *base` may be overridden, as YAML allows)."""
    seen: Dict[Any, int] = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node, deep=True)
        line = key_node.start_mark.line + 1
        if not isinstance(key, (str, int, float, bool)) and key is not None:
            raise yaml.constructor.ConstructorError(None, None, f"a key must be a name, got {type(key).__name__} "
                                                    f"{key!r}", key_node.start_mark)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r} (lines {seen[key]} and {line}): give each key once",
                key_node.start_mark)
        seen[key] = line
    return loader.construct_mapping(node, deep=True)


StrictLoader.add_constructor(_INT, _int)
StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


def parse(text: str) -> Any:
    """YAML text as data; yaml.YAMLError (with where the parser stopped) for text that is not valid YAML, holds a
    key twice or a control character, nests past MAX_DEPTH, or holds more than MAX_VALUES."""
    bad = next((i for i, ch in enumerate(text) if _control(ch)), None)
    if bad is not None:
        line = text.count("\n", 0, bad) + 1
        what = "a byte that is not UTF-8" if "\ud800" <= text[bad] <= "\udfff" else f"a control character ({text[bad]!r})"
        raise yaml.YAMLError(f"holds {what} at line {line}; a config is plain UTF-8 text")
    try:
        data = yaml.load(text, Loader=StrictLoader)  # noqa: S506: a SafeLoader subclass
    except RecursionError:
        raise yaml.YAMLError(f"nested deeper than {MAX_DEPTH} levels") from None
    if _deeper_than(data, MAX_DEPTH):
        raise yaml.YAMLError(f"nested deeper than {MAX_DEPTH} levels")
    if _expanded_size(data, {}) > MAX_VALUES:
        raise yaml.YAMLError(f"holds more than {MAX_VALUES:,} values (each alias, *name, counted as written out)")
    return data


def load_yaml(text: str, where: str) -> Any:
    """`parse`, with a failure as one UserError naming `where` (a file) and the line."""
    try:
        return parse(text)
    except yaml.YAMLError as e:
        raise UserError(f"{where}: not valid YAML{yaml_reason(e)}") from None


def yaml_reason(e: yaml.YAMLError) -> str:
    """` at line 4, column 9: mapping values are not allowed here (while parsing a block mapping from line 2)`:
    where the parser stopped and its own reason, for a one-line error."""
    mark = getattr(e, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    problem = getattr(e, "problem", None)
    if problem is None and not mark and e.args:  # one of ours, raised with its message only
        return f": {e.args[0]}"
    context, start = getattr(e, "context", None), getattr(e, "context_mark", None)
    since = f" ({context} from line {start.line + 1})" if context and start else ""
    return f"{where}: {problem}{since}" if problem else where


def _control(ch: str) -> bool:
    """A control character no config means (a tab and line ends aside), or a byte that was not UTF-8 on the command
    line (kept by Python as a lone surrogate)."""
    return (ord(ch) < 32 and ch not in "\t\n\r") or ch == "\x7f" or "\ud800" <= ch <= "\udfff"


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether lists and mappings nest more than `limit` deep (walked no deeper than that, so never too deep itself;
    an alias's object is walked once)."""
    level, seen = [value], set()
    for _ in range(limit + 1):
        nested: list = []
        for item in level:
            if isinstance(item, (list, dict)) and id(item) not in seen:
                seen.add(id(item))
                nested.extend(item.values() if isinstance(item, dict) else item)
        if not nested:
            return False
        level = nested
    return True


def _expanded_size(value: Any, sizes: Dict[int, float]) -> float:
    """How many values `value` holds with every alias written out; an alias is one shared object, counted once per
    use without walking it again. A structure that holds itself (`&a [*a]`) is infinitely large."""
    if not isinstance(value, (list, dict)):
        return 1
    key = id(value)
    if key in sizes:
        return sizes[key]
    sizes[key] = float("inf")  # while it is walked: met again inside itself, it never ends
    items = value.values() if isinstance(value, dict) else value
    sizes[key] = 1 + sum(_expanded_size(item, sizes) for item in items)
    return sizes[key]
