"""`optarena mcp serve`: the task tools (the judge as tools) over MCP on stdio."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from optarena.cli._app import app
from optarena.errors import OptarenaError

mcp_app = typer.Typer(help="The judge as tools for an agent (Model Context Protocol).")
app.add_typer(mcp_app, name="mcp")


@mcp_app.command("serve")
def serve_cmd(
    task: Annotated[str, typer.Option(help="built-in task id or task directory")],
    workspace: Annotated[Path, typer.Option(help="the agent's working copy to judge")],
    telemetry: Annotated[
        Path, typer.Option(help="JSONL file the server appends one line per tool call to")
    ] = Path("tool_calls.jsonl"),
    max_budget_s: Annotated[
        float, typer.Option(min=0.5, help="cap on any measure call's budget, seconds")
    ] = 60.0,
) -> None:
    """Serve task_info, check_correctness, measure and profile on stdin/stdout (newline-delimited
    JSON-RPC) until the client closes stdin. Tool results are advice for the agent; they
    are never a trial's score."""
    from optarena.mcp import TaskTools, Telemetry, serve_stdio
    from optarena.tasks import resolve_task

    if not workspace.is_dir():
        raise OptarenaError(f"--workspace {workspace}: not a directory")
    tools = TaskTools(resolve_task(task), workspace.resolve(), Telemetry(telemetry), max_budget_s)
    serve_stdio(tools)


@mcp_app.command("relay")
def relay_cmd(
    socket_path: Annotated[
        Path | None, typer.Option("--socket", help="the tools host's Unix socket")
    ] = None,
    port: Annotated[int | None, typer.Option(help="the tools host's port on 127.0.0.1")] = None,
) -> None:
    """Relay stdio to optarena's task-tools host (what a contained agent runs as its MCP
    server: the real server runs outside the agent's reach)."""
    from optarena.mcp._host import relay

    if (socket_path is None) == (port is None):
        raise OptarenaError("give exactly one of --socket PATH or --port N")
    try:
        relay(socket_path, port)
    except OSError as e:
        where = socket_path or f"127.0.0.1:{port}"
        raise OptarenaError(f"cannot reach the tools host at {where}: {e}") from None
