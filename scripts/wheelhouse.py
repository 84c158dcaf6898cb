#!/usr/bin/env python3
"""A wheelhouse for a machine without network that already has torch (an NGC container, a cluster image).

On a connected machine, with the list of what the target already has (`python3 -m pip list --format=freeze` run
there, or one package name a line):

    python3 scripts/wheelhouse.py make WHEELHOUSE --have target-packages.txt --python-version 3.12

downloads a wheel for the target's Python and platform of every requirement the target lacks, and of everything
those need that it lacks too (read from each wheel's own metadata), building a wheel where the index has only a
source distribution (DeepSpeed: its ops compile on first use, so the wheel is pure Python). Copy WHEELHOUSE over,
then on the target:

    SETUP_TORCH=system WHEELHOUSE=WHEELHOUSE make setup

`missing` prints the requirement lines this interpreter lacks: what `make setup` installs with SETUP_TORCH=system.
It needs the standard library alone (an image may not even have `packaging`); `make` needs `packaging` too.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import zipfile
from email.parser import Parser
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Dict, Iterable, List, Mapping, Optional, Set

if TYPE_CHECKING:
    from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_REQUIREMENTS = ("requirements.txt", "requirements-gpu.txt")
# manylinux tags pip must be told one by one (it matches N exactly): the common glibc 2.17 to 2.39 machines.
PLATFORMS = tuple(f"manylinux_2_{n}_x86_64" for n in range(39, 16, -1)) + ("manylinux2014_x86_64",
                                                                        "manylinux1_x86_64", "linux_x86_64")


def requirement_lines(files: Iterable[Path]) -> List[str]:
    """The requirement lines of pip requirements files, comments and blank lines left out."""
    lines = []
    for path in files:
        for line in path.read_text().splitlines():
            line = line.split("#", 1)[0].strip()
            if line:
                lines.append(line)
    return lines


def canonical(name: str) -> str:
    """A distribution's name as PEP 503 compares them: `PyYAML`, `pyyaml` and `py_yaml` are one (packaging's
    canonicalize_name, without needing packaging)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(line: str) -> str:
    """The distribution a requirement line names: `torch==2.13.0+cpu` -> torch (PEP 508's name rule)."""
    found = re.match(r"\s*([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)", line)
    if not found:
        raise SystemExit(f"error: {line!r}: not a requirement line")
    return found.group(1)


def installed_names() -> Set[str]:
    return {canonical(d.metadata["Name"]) for d in metadata.distributions() if d.metadata["Name"]}


def missing(lines: Iterable[str], have: Mapping[str, Optional[str]]) -> List[str]:
    """The lines whose distribution is not in `have`, any version: the target's own torch, transformers, ... stay
    (a machine's image is the version people run there), and only what is absent is installed."""
    return [line for line in lines if canonical(requirement_name(line)) not in have]


def read_have(path: Path) -> Dict[str, Optional[str]]:
    """Package name -> version from `pip list --format=freeze` output (name==version); a plain list of names (or a
    `name @ url` line) gives None: the version is then unknown, and taken to fit whatever needs it."""
    found: Dict[str, Optional[str]] = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line and not line.startswith("-"):
            name, _, version = line.split(" @ ")[0].partition("==")
            found[canonical(name.strip())] = version.strip() or None
    return found


def fits(requirement: "Requirement", have: Mapping[str, Optional[str]]) -> bool:
    """Whether the target's own copy serves `requirement`: a known version must be inside its range (an image's
    rich 14 does not serve mosaicml-cli's rich<14: pip --no-index would then find nothing to install)."""
    version = have.get(canonical(requirement.name))
    return version is None or requirement.specifier.contains(version, prereleases=True)


def target_environment(python_version: str) -> Dict[str, str]:
    """The marker environment of a CPython `python_version` on x86-64 Linux, for evaluating Requires-Dist."""
    major, minor = python_version.split(".")[:2]
    return {"python_version": f"{major}.{minor}", "python_full_version": f"{major}.{minor}.0",
            "implementation_name": "cpython", "platform_python_implementation": "CPython", "os_name": "posix",
            "sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64", "extra": ""}


def wheel_requirements(wheel: Path, environment: Dict[str, str], extras: Iterable[str] = ()) -> List["Requirement"]:
    """What a wheel needs on the target: its Requires-Dist lines whose markers hold there, for no extra or for
    one of `extras` (those its requirer asked for)."""
    from packaging.requirements import Requirement

    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        fields = Parser().parsestr(archive.read(name).decode())
    needed = []
    for line in fields.get_all("Requires-Dist") or []:
        requirement = Requirement(line)
        marker = requirement.marker
        if marker is None or any(marker.evaluate({**environment, "extra": e}) for e in ("", *extras)):
            needed.append(requirement)
    return needed


def spec_of(requirement: "Requirement") -> str:
    extras = f"[{','.join(sorted(requirement.extras))}]" if requirement.extras else ""
    return f"{requirement.name}{extras}{requirement.specifier}"


def fetch(spec: str, out: Path, python_version: str, platforms: Iterable[str]) -> Path:
    """A wheel of `spec` for the target in `out`: the index's binary wheel, else one built here from its source
    distribution (pure Python only: a compiled one would be for this machine, not the target)."""
    platform_args = [arg for platform in platforms for arg in ("--platform", platform)]
    download = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
                "--python-version", python_version, "--implementation", "cp", *platform_args, "--dest", str(out), spec]
    if subprocess.run(download, capture_output=True, text=True).returncode == 0:
        return newest_wheel(out, spec)
    build = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "--wheel-dir",
             str(out), spec]
    done = subprocess.run(build, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"error: {spec}: no wheel for Python {python_version} on the index, and building one "
                         f"failed: {done.stderr.strip().splitlines()[-1:] or ['(no output)']}")
    wheel = newest_wheel(out, spec)
    if not wheel.name.endswith("-none-any.whl"):
        raise SystemExit(f"error: {spec}: built {wheel.name}, which is for this machine, not the target")
    return wheel


def newest_wheel(out: Path, spec: str) -> Path:
    """The wheel of `spec`'s distribution pip just put in `out` (or left there from an earlier run)."""
    name = canonical(requirement_name(spec))
    return max((w for w in out.glob("*.whl") if canonical(w.name.split("-")[0]) == name),
               key=lambda w: w.stat().st_mtime)


def make(out: Path, have: Mapping[str, Optional[str]], requirements: List[str], without: Set[str],
         python_version: str, platforms: Iterable[str]) -> List[Path]:
    """Every wheel the target lacks, its needs followed through each wheel's metadata; a need the target has at a
    version outside the range asked for is fetched too, at that range."""
    from packaging.requirements import Requirement

    out.mkdir(parents=True, exist_ok=True)
    environment = target_environment(python_version)
    queue = [Requirement(line) for line in missing(requirements, have)]
    seen: Set[str] = set(without)
    wheels = []
    while queue:
        requirement = queue.pop(0)
        name = canonical(requirement.name)
        if name in seen or (name in have and fits(requirement, have)):
            continue
        seen.add(name)
        wheel = fetch(spec_of(requirement), out, python_version, platforms)
        wheels.append(wheel)
        print(wheel.name, flush=True)
        queue += [needed for needed in wheel_requirements(wheel, environment, requirement.extras)
                  if canonical(needed.name) not in seen]
    return wheels


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/wheelhouse.py", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    build = commands.add_parser("make", help="download (or build) the wheels a target lacks into a folder")
    build.add_argument("out", type=Path, help="the wheelhouse folder")
    build.add_argument("--have", type=Path, required=True,
                       help="the target's packages: `python3 -m pip list --format=freeze` run there")
    build.add_argument("--python-version", required=True, help="the target's Python, e.g. 3.12")
    build.add_argument("--without", action="append", default=[], metavar="NAME",
                       help="leave a requirement out (e.g. vllm: hundreds of MB); its entries are then skipped there")
    build.add_argument("-r", "--requirement", action="append", type=Path, metavar="FILE",
                       help=f"requirements files (default: {', '.join(DEFAULT_REQUIREMENTS)})")
    build.add_argument("--platform", action="append", help="wheel platform tags (default: manylinux x86_64)")
    lack = commands.add_parser("missing", help="print the requirement lines this interpreter lacks")
    lack.add_argument("files", nargs="+", type=Path, help="requirements files")
    args = parser.parse_args(argv)
    if args.command == "missing":
        print("\n".join(missing(requirement_lines(args.files), installed_names())))
        return 0
    files = args.requirement or [ROOT / name for name in DEFAULT_REQUIREMENTS]
    wheels = make(args.out, read_have(args.have), requirement_lines(files),
                  {canonical(n) for n in args.without}, args.python_version, args.platform or PLATFORMS)
    size = sum(w.stat().st_size for w in wheels)
    print(f"{len(wheels)} wheels, {size / 2**20:.1f} MiB, in {args.out}: copy it over, then on the target: "
          f"SETUP_TORCH=system WHEELHOUSE={args.out} make setup")
    return 0


if __name__ == "__main__":
    sys.exit(main())
