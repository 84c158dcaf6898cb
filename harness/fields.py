"""`opt`: a typed config field with its help text and, for a number, its range and unit, shared by every config
section (harness/config/sweep.py, harness/config/stream/section.py, each backend's and workload's options).

A field's declaration is its check: harness/config/kinds.py reads the type and the range declared here, so a new key
is checked (its kind, finiteness, range) by declaring it, not by new code in its section.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Optional

from omegaconf import MISSING


def is_int(value: Any) -> bool:
    """An integer as YAML gives it, not a bool (which Python counts as one)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    """An int or a float as YAML gives it, not a bool."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass(frozen=True)
class Range:
    """Where a number may lie: `gt`/`ge` below, `lt`/`le` above (each optional), in `unit` ("seconds", "ms",
    "requests/s", "%": the word the message uses). Infinity is refused unless `infinite` (NaN always is)."""

    gt: Optional[float] = None
    ge: Optional[float] = None
    lt: Optional[float] = None
    le: Optional[float] = None
    unit: str = ""
    infinite: bool = False

    def holds(self, value: float) -> bool:
        if math.isnan(value) or (math.isinf(value) and not self.infinite):
            return False
        return ((self.gt is None or value > self.gt) and (self.ge is None or value >= self.ge)
                and (self.lt is None or value < self.lt) and (self.le is None or value <= self.le))

    def words(self, integer: bool) -> str:
        """`a finite number of seconds > 0`, `an integer >= 1`, `a finite number in (0, 1]`: what the value must be."""
        kind = "an integer" if integer else "a number" if self.infinite else "a finite number"
        if self.unit == "%":
            kind, unit = kind.replace("number", "percentage").replace("an integer", "a whole percentage"), ""
        else:
            unit = f" of {self.unit}" if self.unit else ""
        low = (f"({_num(self.gt)}" if self.gt is not None else f"[{_num(self.ge)}" if self.ge is not None else None)
        high = (f"{_num(self.lt)})" if self.lt is not None else f"{_num(self.le)}]" if self.le is not None else None)
        if low and high:
            return f"{kind}{unit} in {low}, {high}"
        if low:
            return f"{kind}{unit} {'>' if self.gt is not None else '>='} {low[1:]}"
        if high:
            return f"{kind}{unit} {'<' if self.lt is not None else '<='} {high[:-1]}"
        return f"{kind}{unit}"


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"  # a seed's bound exactly, not 9.22337e+18


ANY_NUMBER = Range()  # a float field that declares no range: any finite number
# The largest seed: every seed ends up in a signed 64-bit integer somewhere (torch generators, engines' sampling).
SEED_MAX = 2**63 - 1
# The longest wait any timeout or slept time may ask for: past it, the OS's timers overflow (time.sleep(1e300) raises),
# and no benchmark waits a week for one answer.
WEEK_S = 7 * 24 * 3600


# accelerate's size units (accelerate.utils.convert_file_size_to_int reads the sizes engines are given).
BINARY_UNITS = {"GIB": 2**30, "MIB": 2**20, "KIB": 2**10}
DECIMAL_UNITS = {"GB": 10**9, "MB": 10**6, "KB": 10**3}  # with a lower-case final b: bits


def size_bytes(size: Any) -> int:
    """Bytes of a size as accelerate reads it (`20GiB`, `5.5GB`, an int), checked without importing it (and
    torch): ValueError for anything else."""
    if is_int(size) and size >= 0:
        return size
    if isinstance(size, str):
        units = {**BINARY_UNITS, **DECIMAL_UNITS}  # binary first: "GIB" also ends in "B"
        unit = next((u for u in units if size.upper().endswith(u)), None)
        if unit is not None:
            try:
                count = float(size[:-len(unit)]) * units[unit]
            except ValueError:
                count = -1
            if math.isfinite(count) and count >= 0:
                count = int(count)
                return count // 8 if unit in DECIMAL_UNITS and size.endswith("b") else count
    raise ValueError(f"not a size: {size!r}")


def opt(default: Any = MISSING, *, help: str, factory: Any = dataclasses.MISSING, gt: Optional[float] = None,
        ge: Optional[float] = None, lt: Optional[float] = None, le: Optional[float] = None, unit: str = "",
        infinite: bool = False, measures: bool = True) -> Any:
    """A dataclass field with a help text; without a default (OmegaConf's MISSING) the key is required. A number's
    range (`gt`, `ge`, `lt`, `le`), `unit` and whether infinity is allowed are checked where the YAML is read.
    `measures=False`: changing the key changes no measurement (a timeout, where results are copied), so `--resume`
    takes a new value (app/resume.py); every other key must be what the folder was measured with."""
    metadata: dict = {"help": help}
    if not measures:
        metadata["measures"] = False
    if any(b is not None for b in (gt, ge, lt, le)) or unit or infinite:
        metadata["range"] = Range(gt, ge, lt, le, unit, infinite)
    if factory is not dataclasses.MISSING:
        return field(default_factory=factory, metadata=metadata)
    return field(default=default, metadata=metadata)
