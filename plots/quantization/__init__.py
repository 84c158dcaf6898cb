"""Quantization's charts (charts.py: throughput and TPOT per quantization, each bar with its accuracy price) and
report section (report.py: the fastest setting within quality.max_logits_rel_error, and every quantized point)."""
