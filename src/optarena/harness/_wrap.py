"""The command line of `_contained`, the wrapper every agent-built artifact's command runs in.

A module of its own: `_contained` runs as `python -m`, and a package import of it before that
would run it twice."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from optarena.agents import SandboxSpec


def wrap(
    command: Sequence[str],
    writable: Sequence[Path],
    readable: Sequence[Path] = (),
    spec: SandboxSpec | None = None,
) -> list[str]:
    """`command` as run by this wrapper: `writable` (the first is its working directory) and
    `readable` besides what any sandbox shows, contained as `spec` says (None: the default
    policy, nothing hidden by name)."""
    argv = [sys.executable, "-m", "optarena.harness._contained"]
    argv += [a for w in writable for a in ("--writable", str(w))]
    argv += [a for r in readable for a in ("--readable", str(r))]
    if spec is not None:
        argv += [a for h in spec.hidden for a in ("--hide", str(h))]
        argv += ["--max-processes", str(spec.policy.max_processes)]
    return [*argv, "--", *command]
