"""Speculative decoding's charts (charts.py: TPOT speed-up and acceptance) and report section (report.py)."""
