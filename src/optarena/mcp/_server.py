"""The MCP server around `TaskTools` (the official SDK's `MCPServer`, stdio transport).

Bad arguments and failures become MCP error results (`ToolError`) with one clear message; the
server itself keeps running.
"""

from __future__ import annotations

import json
import os
import signal
from types import FrameType
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from optarena.mcp._errors import ToolInputError
from optarena.mcp._tools import TaskTools

INSTRUCTIONS = (
    "optarena's judge for this task. check_correctness judges your workspace's editable files "
    "on fresh secret inputs; measure also times them against the baseline; profile shows where "
    "the time goes. Results are advice: "
    "the trial's verdict is the judge's own judgement of the files you deliver, after you stop."
)


def build_server(tools: TaskTools) -> MCPServer:
    server: MCPServer = MCPServer("optarena", instructions=INSTRUCTIONS)
    one_at_a_time = anyio.Lock()  # calls sent side by side queue: a judgement per server

    async def run(tool: str, arguments: dict[str, Any]) -> str:
        received = tools.begin(tool, arguments)  # on record while it waits its turn
        try:
            async with one_at_a_time:
                out = await anyio.to_thread.run_sync(tools.call, tool, arguments, received)
        except ToolInputError as e:
            raise ToolError(str(e)) from None
        except Exception as e:  # the judge failed: say so, keep serving
            raise ToolError(f"{tool} failed: {type(e).__name__}: {e}") from None
        return json.dumps(out, indent=1, default=str)

    @server.tool(
        description="The task's contract: entry point, editable files, tolerance, workloads."
    )
    async def task_info() -> str:
        return await run("task_info", {})

    @server.tool(
        description="Judge the workspace's current editable files for correctness on fresh "
        "secret inputs: verdict, reason codes and failed checks (never expected values)."
    )
    async def check_correctness() -> str:
        return await run("check_correctness", {})

    @server.tool(
        description="Correctness, then the paired speed comparison against the baseline within "
        "budget_s seconds (capped by the trial): ratio (candidate/baseline), interval, verdict."
    )
    async def measure(budget_s: float | None = None) -> str:
        return await run("measure", {"budget_s": budget_s})

    @server.tool(
        description="Where the candidate spends its time (cProfile, by own time) on fresh inputs "
        "of one workload (default: the first timed one): a diagnostic, never a verdict."
    )
    async def profile(
        workload: str | None = None, calls: int | None = None, top: int | None = None
    ) -> str:
        return await run("profile", {"workload": workload, "calls": calls, "top": top})

    return server


CUT_OFF = "the server was stopped (SIGTERM) with the call unfinished: the agent had quit"


def serve_stdio(tools: TaskTools) -> None:
    """Serve until the client closes stdin. SIGTERM (the host stopping a server whose agent
    has quit while a call runs) records the calls in flight as cut off, then exits at once:
    the judge's children die with it (their parent-death signal)."""

    def stop(signum: int, frame: FrameType | None) -> None:
        tools.cut_off(CUT_OFF)
        os._exit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    anyio.run(build_server(tools).run_stdio_async)
