"""Runners that break optarena's own process during a trial (a plan names them as
`hostile_runners:Class` with this directory on the path): what a hostile trial that finds a
crash in optarena looks like from the experiment's side."""

from __future__ import annotations

import os
import signal

from optarena.agents import AgentRunner, RunContext
from optarena.records import AgentLimits, AgentOutcome


class _Hostile(AgentRunner):
    def __init__(self, **_: str) -> None:
        pass

    def version(self) -> str | None:
        return "hostile 1"


class RaisingRunner(_Hostile):
    """A traceback inside optarena's process, mid-trial."""

    name = "raising"

    def run(self, context: RunContext, prompt: str, limits: AgentLimits) -> AgentOutcome:
        raise RuntimeError("sabotage: a traceback in optarena's process")


class SegfaultRunner(_Hostile):
    """optarena's process dies of SIGSEGV mid-trial (no Python handler runs)."""

    name = "segfault"

    def run(self, context: RunContext, prompt: str, limits: AgentLimits) -> AgentOutcome:
        os.kill(os.getpid(), signal.SIGSEGV)
        raise AssertionError("unreachable")
