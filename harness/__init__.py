"""The measuring library: config -> plan -> scenario -> records -> metrics -> CSV, in layers (docs/architecture.md).

Imports only go down, top to bottom: run, measure, plan, scenarios, model, config, then errors and fields. Nothing
here imports the application (`app`) or a plug-in (`backends`, `workloads`, `plots`, `mosaic`): the app hands the
registries down. `make test` holds this with import-linter (pyproject.toml, [tool.importlinter]).
"""
