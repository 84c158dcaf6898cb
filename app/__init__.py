"""The application: the CLI, one sweep start to finish (session), the console, and llm-foundry YAML translation.

The one composition root: it alone knows the plug-ins (`backends`, `workloads`, `plots`, `mosaic`) and hands
their registries down to the library (`harness`). Nothing imports it but benchmark.py.
"""
