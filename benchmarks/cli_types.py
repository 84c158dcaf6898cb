"""Argument types shared by the benchmark scripts: a bad value is one line naming the flag and what is allowed."""

from __future__ import annotations

import argparse
import math


def positive(kind: type, least: float):
    """An argparse type: a finite number of `kind` at least `least`, else one line naming what is allowed."""
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            value = None
        if value is None or not math.isfinite(value) or value < least:
            raise argparse.ArgumentTypeError(f"must be a finite {kind.__name__} of at least {least:g}, got {text!r}")
        return value
    return parse
