"""What every column of the results folder's CSV files means, and its unit: declared once, here.

docs/reference/columns.md is generated from these declarations (`reference_markdown`, via scripts/gen_docs.py), and
tests/test_columns.py holds them to the writers' column lists both ways: a column written without a declaration, or a
declaration of a column no writer writes, fails. Definitions the measurement contract (docs/measurement.md) gives are
summarized here and linked to it; the contract stays the authority.

The page lists each file's columns in the order its writer writes them, so this module reads writers.py's lists;
writers.py must never import this package (it would be an import loop).
"""

from harness.measure.columns.base import (
    Column, MS, S, TOKENS, TOKENS_PER_S, BYTES, GBPS, TFLOPS, FLOP, REQUESTS_PER_S, SHARE, RATIO, COUNT, INDEX,
    PERCENT, WATTS, JOULES, JOULES_PER_TOKEN, PRICE_PER_M_TOKENS, TEXT,
)
from harness.measure.columns.page import FILES, reference_markdown, written_columns

# The declaration's shape and its units (for tests and readers), and the page built from the declarations.
__all__ = ["Column", "MS", "S", "TOKENS", "TOKENS_PER_S", "BYTES", "GBPS", "TFLOPS", "FLOP", "REQUESTS_PER_S", "SHARE",
           "RATIO", "COUNT", "INDEX", "PERCENT", "WATTS", "JOULES", "JOULES_PER_TOKEN", "PRICE_PER_M_TOKENS", "TEXT",
           "FILES", "reference_markdown", "written_columns"]
