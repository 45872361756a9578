"""Whether this machine meets a task's declared requirements.

An unmet requirement is the machine's problem, not the candidate's: the judge refuses to run
(exit 2, naming what is missing) instead of rejecting a candidate for the environment's fault.
"""

from __future__ import annotations

import platform
import shutil
from importlib import metadata
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet

from optarena.tasks._model import Requirements


def parse_requirement(text: str) -> Requirement:
    """Raises ValueError with the reason; used by the spec validator and the check below."""
    try:
        return Requirement(text)
    except InvalidRequirement as e:
        raise ValueError(f"'{text}' is not a requirement like 'numpy>=1.26' ({e})") from None


def parse_specifier(text: str) -> SpecifierSet:
    try:
        return SpecifierSet(text)
    except InvalidSpecifier:
        raise ValueError(f"'{text}' is not a version specifier like '>=3.11'") from None


def cuda_available() -> bool:
    return Path("/dev/nvidia0").exists() or shutil.which("nvidia-smi") is not None


# What each program a task may require is, in the words of the refusal.
_PROGRAMS = {"cc": "the C compiler"}


def unmet_requirements(req: Requirements) -> list[str]:
    """Human-readable list of what this machine lacks; empty when everything is met."""
    problems: list[str] = []
    if req.device == "cuda" and not cuda_available():
        problems.append(
            "needs a CUDA device: no NVIDIA GPU is visible (no /dev/nvidia0, no nvidia-smi)"
        )
    for program in req.programs:
        if shutil.which(program) is None:
            what = _PROGRAMS.get(program, "a program")
            problems.append(f"needs {program} ({what}): not found on PATH")
    py = platform.python_version()
    if not parse_specifier(req.python).contains(py, prereleases=True):
        problems.append(f"python {req.python} required, this is {py}")
    for text in req.packages:
        r = parse_requirement(text)
        try:
            have = metadata.version(r.name)
        except metadata.PackageNotFoundError:
            problems.append(f"package {r.name} required ({text}), not installed")
            continue
        if r.specifier and not r.specifier.contains(have, prereleases=True):
            problems.append(f"package {text} required, {r.name} {have} installed")
    return problems
