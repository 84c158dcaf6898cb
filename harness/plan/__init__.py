"""The sweep plan: every (backend entry, point) with its memory estimate and whether it runs (points.py, sweep.py),
and the `--plan` capacity table (capacity.py). Computed before anything is loaded.
"""
