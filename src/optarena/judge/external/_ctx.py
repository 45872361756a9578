"""What judging one external candidate carries from step to step: the frozen task, the
sandbox policy, the checks so far and the sealed trees; and how a step fails (the task's fault
on the baseline, a recorded rejection on the candidate)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from optarena.errors import TaskPackageError
from optarena.judge._result import Check
from optarena.judge.external._run import (
    OUTPUT_TAIL,
    CommandRun,
    JUnitReport,
    limits_of,
    run_command,
)
from optarena.judge.external._tree import SealedTree, TreeSize
from optarena.sandbox import SandboxPolicy
from optarena.tasks.external import FrozenExternal, ResolvedEnvironment


class BrokenTaskError(TaskPackageError):
    """The baseline itself fails the task's set-up, gate or benchmark: the task is broken, not
    the candidate. The message names the spec file and the field whose command failed, so the
    user knows what to fix, and quotes the end of the command's output (a missing module is
    named only there) and where its whole output is kept."""

    def __init__(
        self, frozen: FrozenExternal, field: str, detail: str, run: CommandRun | None = None
    ) -> None:
        self.field = field
        self.detail = detail
        self.output_tail = run.output[-OUTPUT_TAIL:] if run else None
        self.log = run.log if run else None
        where = frozen.path or frozen.frozen.spec_path
        super().__init__(f"{where}: field '{field}': on the baseline, {detail}")


@dataclass
class Ctx:
    frozen: FrozenExternal
    policy: SandboxPolicy | None
    checks: list[Check]
    sealed: dict[Path, SealedTree] = field(default_factory=dict)  # tree -> its seal
    watched: frozenset[str] = frozenset()  # what no command of the candidate's may change
    last: dict[Path, str] = field(default_factory=dict)  # tree -> its last unsettled command
    baseline_report: JUnitReport | None = None  # the baseline gate's JUnit report
    logs: Path | None = None  # where a failing command's whole output is kept
    runs: int = 0
    environment: ResolvedEnvironment | None = None  # the spec's [environment], if declared
    timings: dict[str, float] = field(default_factory=dict)  # seconds per phase and arm
    setup: dict[str, str] = field(default_factory=dict)  # arm -> "ran" or "cached"
    prepared: TreeSize | None = None  # the baseline's prepared tree: what a candidate's may be

    def run(self, cmd: str, tree: Path, timeout_s: float) -> CommandRun:
        """Run `cmd` in `tree`; a sealed tree is first put back as prepared, so no command
        sees what an earlier one (the candidate's code in it) wrote. What a command wrote
        stays until the next one (the gate's JUnit report is read from it)."""
        s = self.frozen.spec
        self.settle(tree)
        if tree in self.sealed:
            self.last[tree] = f"`{cmd}`"
        self.runs += 1
        keep = None if self.logs is None else self.logs / f"{self.runs:03d}-{tree.name}.log"
        limits, env, visible = limits_of(s.limits), dict(s.env), []
        if self.environment is not None:
            env = {**self.environment.variables(os.environ.get("PATH", "/usr/bin:/bin")), **env}
            visible = self.environment.visible()
        return run_command(cmd, tree, timeout_s, env, limits, self.policy, keep, visible)

    @contextmanager
    def timing(self, phase: str) -> Iterator[None]:
        """Seconds spent in `phase`, recorded however it ends (a failing gate's too)."""
        t0 = time.monotonic()
        try:
            yield
        finally:
            spent = time.monotonic() - t0
            self.timings[phase] = round(self.timings.get(phase, 0.0) + spent, 3)

    def settle(self, tree: Path) -> None:
        """Put `tree` back as sealed, noting what its last command changed."""
        if tree in self.sealed and tree in self.last:
            self.sealed[tree].restore(after=self.last.pop(tree))

    def fail(self, name: str, code: str, detail: str) -> None:
        self.checks.append(Check(name=name, workload=None, passed=False, detail=detail, code=code))

    def ok(self, name: str, detail: str) -> None:
        self.checks.append(Check(name=name, workload=None, passed=True, detail=detail))


class Rejected(Exception):
    """A candidate's failure at one step: recorded as a failed check with its code."""

    def __init__(self, name: str, code: str, detail: str) -> None:
        super().__init__(detail)
        self.name, self.code, self.detail = name, code, detail
