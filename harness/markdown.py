"""Markdown for the docs' generated reference pages (docs/reference/): one escaping rule for every table."""

from __future__ import annotations


def cell(text: str) -> str:
    """`text` safe inside a markdown table cell: its pipes escaped, its lines joined."""
    return " ".join(str(text).replace("|", "\\|").splitlines())
