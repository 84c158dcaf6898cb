"""Experiment trackers (MLflow, Weights & Biases): a results folder sent to them, live as the sweep writes it or
later (`python -m plots --track DIR`); docs/guides/tracking.md."""
