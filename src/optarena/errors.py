"""Typed errors, one class per cause. The CLI turns every `OptarenaError` into one clear line
and exit code 2, never a traceback; the class says whose fault it is:

- `OptarenaError` and its input subclasses (`SpecError`, `UnknownNameError`, `LedgerError`,
  `RecordError`): bad input, a file, a field or a name that is not what was expected;
- `TaskPackageError`: the task package is broken as shipped (its baseline fails);
- `MissingPrerequisiteError` (`AgentNotInstalledError`): this machine lacks something the
  work needs (git, a compiler, a device, an agent's executable).
"""

from __future__ import annotations

from pathlib import Path


class OptarenaError(Exception):
    """Bad input from the user: a file, a field or a name that is not what was expected."""


class SpecError(OptarenaError):
    """A malformed or incomplete on-disk spec: names the file, the field and what was expected."""

    def __init__(self, path: Path | str, field: str, expected: str) -> None:
        self.path = str(path)
        self.field = field
        self.expected = expected
        where = f"{self.path}: field '{field}'" if field else self.path
        super().__init__(f"{where}: {expected}")


class UnknownNameError(OptarenaError):
    """A name (task, agent, trial) that does not exist; the message lists the known ones."""

    def __init__(self, kind: str, name: str, known: list[str]) -> None:
        self.kind = kind
        self.name = name
        self.known = known
        listing = ", ".join(sorted(known)) if known else "(none)"
        super().__init__(f"unknown {kind} '{name}'; known {kind}s: {listing}")


class MissingPrerequisiteError(OptarenaError):
    """Something this machine lacks that the asked-for work needs (git, valgrind, a compiler,
    a device, a package); the message names it and what needs it."""


class AgentNotInstalledError(MissingPrerequisiteError):
    """An agent's executable is not on PATH; the message says how to install it."""

    def __init__(self, agent: str, binary: str, install_hint: str | None) -> None:
        self.agent = agent
        self.binary = binary
        self.install_hint = install_hint
        hint = f"; install it with: {install_hint}" if install_hint else ""
        super().__init__(f"agent '{agent}' needs '{binary}', which is not on PATH{hint}")


class LedgerError(OptarenaError):
    """The ledger cannot be opened or used as asked (schema too new, unknown trial, ...)."""


class RecordError(LedgerError):
    """A stored record that cannot be read: not JSON, a newer version, a field that does not
    fit; the message names where it was read from and the field."""


class TaskPackageError(OptarenaError):
    """A task package that is broken as shipped (its baseline fails its own oracle, a control
    does not behave as declared): the task's fault, not the user's input nor the candidate's."""


__all__ = [
    "AgentNotInstalledError",
    "LedgerError",
    "MissingPrerequisiteError",
    "OptarenaError",
    "RecordError",
    "SpecError",
    "TaskPackageError",
    "UnknownNameError",
]
