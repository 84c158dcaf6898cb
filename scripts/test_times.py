"""The suite's time table from `make test-times`' record (tests/suite_times.py): the slowest tests, the files by
their total, and the slowest fixtures, each with the processes and engines they started. Markdown, for a closing
note; `--top N` rows per table. `--budget-min M` first says whether pytest's wall time kept within M minutes, with
what the engine tier started (`make test` prints it at the end of every run, CI's included: issue 49's budget).

    python scripts/test_times.py results/test-times.json [MORE.json ...] [--top 15] [--budget-min 15]

Several records (`make test`'s two phases: the files run two at a time, then those run alone) are read as one run:
their tests together, their wall times added.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Dict, List

STARTS = ("sweep", "worker", "server", "in-process engine")


def total(t: dict) -> float:
    return t["setup_s"] + t["call_s"] + t["teardown_s"]


def starts(counts: Dict[str, int]) -> str:
    return ", ".join(f"{counts[k]} {k}" for k in STARTS if counts.get(k)) or "-"


def tests_table(tests: Dict[str, dict], top: int) -> List[str]:
    rows = sorted(tests.items(), key=lambda kv: -total(kv[1]))[:top]
    lines = ["| test | seconds | setup | starts |", "|---|---:|---:|---|"]
    lines += [f"| `{nodeid}` | {total(t):.1f} | {t['setup_s']:.1f} | {starts(t['starts'])} |" for nodeid, t in rows]
    return lines


def files_table(tests: Dict[str, dict], top: int) -> List[str]:
    files: Dict[str, dict] = defaultdict(lambda: {"seconds": 0.0, "tests": 0, "engine": 0, "starts": Counter()})
    for nodeid, t in tests.items():
        f = files[nodeid.split("::")[0]]
        f["seconds"] += total(t)
        f["tests"] += 1
        f["engine"] += int(t["engine"])
        f["starts"].update(t["starts"])
    rows = sorted(files.items(), key=lambda kv: -kv[1]["seconds"])[:top]
    lines = ["| file | seconds | tests (engine) | sweeps | workers | servers | in-process engines |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| `{name}` | {f['seconds']:.1f} | {f['tests']} ({f['engine']}) | "
              + " | ".join(str(f["starts"].get(k, 0)) for k in STARTS) + " |" for name, f in rows]
    return lines


def fixtures_table(fixtures: List[dict], top: int) -> List[str]:
    rows = sorted(fixtures, key=lambda f: -f["seconds"])[:top]
    lines = ["| fixture | scope | seconds | first asked by |", "|---|---|---:|---|"]
    lines += [f"| `{f['fixture']}` | {f['scope']} | {f['seconds']:.1f} | `{f['test']}` |" for f in rows]
    return lines


def summary(record: dict) -> List[str]:
    tests = record["tests"]
    engine = [t for t in tests.values() if t["engine"]]
    counts: Counter = Counter()
    for t in tests.values():
        counts.update(t["starts"])
    phases = record.get("phases", [])
    walls = (" (" + ", ".join(f"{name} {wall_s / 60:.1f}" for name, wall_s in phases) + ")") if len(phases) > 1 else ""
    # Test time, not wall time: tests that ran side by side (pytest-xdist) each count their own.
    return [f"{len(tests)} tests ({len(engine)} engine) in {record['wall_s'] / 60:.1f} min of pytest{walls}; test time: "
            f"fast tier {sum(total(t) for t in tests.values() if not t['engine']) / 60:.1f} min, engine tier "
            f"{sum(total(t) for t in engine) / 60:.1f} min; started: {starts(counts)}; outcomes: "
            + ", ".join(f"{n} {k}" for k, n in Counter(t["outcome"] for t in tests.values()).most_common())]


def budget(record: dict, minutes: float) -> List[str]:
    """One line: the suite against its budget, and the engine tier's starts, so that a landing that breaks the
    budget says so in its own log."""
    spent = record["wall_s"] / 60
    counts: Counter = Counter()
    for t in record["tests"].values():
        if t["engine"]:
            counts.update(t["starts"])
    verdict = "within" if spent <= minutes else f"OVER by {spent - minutes:.1f} min"
    return [f"Suite budget: pytest {spent:.1f} min against {minutes:g} min: {verdict}; the engine tier started "
            f"{starts(counts)}", ""]


def minutes(text: str) -> float:
    """--budget-min's value: a finite number of minutes above 0."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number of minutes above 0, got {text!r}")
    return value


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", type=Path, nargs="+")
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--budget-min", type=minutes, help="say whether pytest kept within this many minutes")
    args = parser.parse_args(argv)
    record: dict = {"wall_s": 0.0, "tests": {}, "fixtures": [], "phases": []}
    for path in args.records:
        try:
            part = json.loads(path.read_text())
            record["wall_s"] += float(part["wall_s"])
            record["phases"].append((path.stem.removeprefix("test-times-"), float(part["wall_s"])))
            record["tests"].update(part["tests"])
            record["fixtures"] += part["fixtures"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            print(f"error: {path}: {e}", file=sys.stderr)
            return 2
    head = budget(record, args.budget_min) if args.budget_min is not None else []
    print("\n".join(head + summary(record) + ["", "Slowest tests:", ""] + tests_table(record["tests"], args.top)
                    + ["", "Files by time:", ""] + files_table(record["tests"], args.top)
                    + ["", "Slowest fixtures:", ""] + fixtures_table(record["fixtures"], args.top)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
