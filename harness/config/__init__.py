"""The typed sweep config: every YAML key, its type, default and help, checked on load (no model is loaded).

sweep.py is the top of it (`SweepConfig`, `load_config`, cross-field checks); the small sections, the stream and
speculative sections, the YAML loading, the name registries and the `--schema` text sit beside it.
"""
