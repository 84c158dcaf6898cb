"""The answer the harness exists for: the best configuration at the user's targets (docs/guides/best.md)."""
