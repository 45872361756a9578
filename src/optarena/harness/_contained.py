"""Run an agent-built artifact's command inside the agent sandbox, with this process's stdio.

    python -m optarena.harness._contained --writable DIR [--writable DIR2 ...] -- ARGV...

Artifacts are code an agent wrote: qualifying them must not run that code as optarena's
user. The MCP SDK's client (qualifying a server) and a tool's test both start this wrapper,
which starts ARGV under the same containment as the agent (own uid, no network, only DIR
writable) and ends with its exit status.
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
    p.add_argument("command", nargs=argparse.REMAINDER)
    a = p.parse_args(argv)
    command = [c for c in a.command if c != "--"] if a.command[:1] == ["--"] else a.command
    if not command:
        p.error("no command given")
    exe = shutil.which(command[0]) or command[0]
    box = AgentSandbox(
        AgentSandboxPolicy(), writable=a.writable, readable=[Path(sys.executable), Path(exe)]
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
