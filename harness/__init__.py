"""Core of the benchmark harness: config -> sweep -> runs -> records -> metrics -> CSV.

Each module owns one step of that flow and only ever calls "down" it; backends live
in the top-level `backends` package and plots in `plots`.
"""
