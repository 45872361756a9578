"""Run an agent-built artifact's command inside the agent sandbox, with this process's stdio.

    python -m optarena.harness._contained --writable DIR [--writable DIR2 ...]
        [--readable PATH ...] [--hide PATH ...] [--max-processes N] -- ARGV...

Artifacts are code an agent wrote: vetting them must not run that code as optarena's
user. The MCP SDK's client (vetting a server), a tool's test and a server activated for a
later attempt all start this wrapper (`_wrap.wrap` builds its command line), which starts ARGV under
the same containment as the agent: the spec from `trials.agent_sandbox_spec` (the ledger, other
trials and what the task keeps from the agent hidden; its process limit), its own uid, no
network, only DIR writable, PATH readable (a server may read the agent's workspace), and
everything else absent where the machine allows a private root. It ends with ARGV's status.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

from optarena.sandbox import AgentSandbox, AgentSandboxPolicy


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="optarena.harness._contained")
    p.add_argument(
        "--writable", type=Path, action="append", required=True, help="the first is the cwd"
    )
    p.add_argument("--readable", type=Path, action="append", default=[])
    p.add_argument("--hide", type=Path, action="append", default=[])
    p.add_argument("--max-processes", type=int, default=AgentSandboxPolicy.max_processes)
    p.add_argument("command", nargs=argparse.REMAINDER)
    a = p.parse_args(argv)
    command = [c for c in a.command if c != "--"] if a.command[:1] == ["--"] else a.command
    if not command:
        p.error("no command given")
    exe = shutil.which(command[0]) or command[0]
    box = AgentSandbox(
        AgentSandboxPolicy(max_processes=a.max_processes),
        writable=a.writable,
        readable=[Path(sys.executable), Path(exe), *a.readable],
        hidden=a.hide,
    )
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
    }
    proc = box.spawn(command, env=env, stdin=None)  # the caller's stdin: MCP speaks over it
    try:
        code = proc.wait()
    finally:
        box.close()
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main())
