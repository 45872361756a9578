"""What containing the agent costs per trial: a trivial agent (`true`) run N times through the
real trial lifecycle with the agent sandbox on, on with a forwarded proxy port, and off
(`--no-agent-sandbox`), interleaved, correctness-only judgement.

    python tests/trials/bench_agent_sandbox.py [N]

Prints the median agent phase (start of the agent to its sandbox torn down) per mode, the
difference from "off", and the sandbox's own setup and teardown times from its report. Not a
test (timings on a shared machine vary); its numbers go in docs/guarantees.md.
"""

from __future__ import annotations

import socket
import statistics
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from optarena.agents import RunContext
from optarena.ledger import Ledger
from optarena.tasks import resolve_task
from optarena.trials import TrialConfig, TrialHook, run_trial


class Port(TrialHook):
    """A listening port the agent may reach (as the metering proxy's would be)."""

    def __init__(self, port: int) -> None:
        self.port = port

    def before_agent(self, context: RunContext) -> RunContext:
        return replace(context, proxy_ports=(*context.proxy_ports, self.port))


def main(n: int) -> None:
    task = resolve_task("rmsnorm")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    modes = {
        "off": (False, []),
        "on": (True, []),
        "on+proxy": (True, [Port(listener.getsockname()[1])]),
    }
    agent_s: dict[str, list[float]] = {m: [] for m in modes}
    setup: dict[str, list[float]] = {m: [] for m in modes}
    teardown: dict[str, list[float]] = {m: [] for m in modes}
    with tempfile.TemporaryDirectory() as tmp, Ledger.open(Path(tmp) / "ledger") as ledger:
        for i in range(n + 1):
            for mode, (contained, hooks) in modes.items():
                config = TrialConfig(
                    task=task,
                    agent="command",
                    agent_args={"command": "true"},
                    measure=False,
                    agent_sandbox=contained,
                )
                rec = run_trial(config, ledger, hooks=hooks)
                if i == 0:
                    continue  # warm-up: the once-per-process probe and imports
                agent_s[mode].append(rec.phases_s["agent"] * 1000)
                sb = rec.agent_sandbox or {}
                if sb.get("enabled"):
                    setup[mode].append(sb["setup_ms"])
                    teardown[mode].append(sb["teardown_ms"])
    base = statistics.median(agent_s["off"])
    for mode in modes:
        med = statistics.median(agent_s[mode])
        line = f"{mode:<9} agent phase {med:7.1f} ms  (+{med - base:5.1f} ms vs off)"
        if setup[mode]:
            line += (
                f"  sandbox setup {statistics.median(setup[mode]):5.1f} ms, "
                f"teardown {statistics.median(teardown[mode]):5.1f} ms"
            )
        print(line)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 15)
