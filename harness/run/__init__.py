"""Running an entry: the runner that drives a backend through its points, the worker process it lives in, the
launcher that starts and supervises workers (and ranks), process groups, and the time budget.
"""
