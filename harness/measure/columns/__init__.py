"""What every column of the results folder's CSV files means, and its unit: declared once, here.

The writers take each file's header from these declarations, in their order (harness/measure/writers.py), and refuse
a row with a key not declared here; docs/reference/columns.md is generated from them (`reference_markdown`, via
scripts/gen_docs.py); tests/test_columns.py holds every figure the code derives to a declaration. Definitions the
measurement contract (docs/measurement.md) gives are summarized here and linked to it; the contract stays the
authority. This package imports no writer: the writers import it.
"""

from harness.measure.columns.base import (
    Column, MS, S, TOKENS, TOKENS_PER_S, BYTES, GBPS, TFLOPS, FLOP, REQUESTS_PER_S, SHARE, RATIO, COUNT, INDEX,
    PERCENT, WATTS, JOULES, JOULES_PER_TOKEN, KWH_PER_M_TOKENS, PRICE_PER_M_TOKENS, TEXT,
    MHZ, CELSIUS, INPUTS_PER_S,
)
from harness.measure.columns.page import FILES, reference_markdown

# The declaration's shape and its units (for tests and readers), and the page built from the declarations.
__all__ = ["Column", "MS", "S", "TOKENS", "TOKENS_PER_S", "BYTES", "GBPS", "TFLOPS", "FLOP", "REQUESTS_PER_S", "SHARE",
           "RATIO", "COUNT", "INDEX", "PERCENT", "WATTS", "JOULES", "JOULES_PER_TOKEN", "KWH_PER_M_TOKENS",
           "PRICE_PER_M_TOKENS", "TEXT", "MHZ", "CELSIUS", "INPUTS_PER_S",
           "FILES", "reference_markdown"]
