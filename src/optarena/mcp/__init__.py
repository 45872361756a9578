"""optarena's judge as tools for an agent, over the Model Context Protocol.

The tools help an agent check its work; they never score it. The trial's verdict is always
the judge's own judgement of the delivered files after the agent stops, and every tool call is
recorded by the server (`Telemetry`), outside what the tool returns to the agent.
"""

from optarena.mcp._errors import ToolInputError
from optarena.mcp._hook import TaskToolsHook
from optarena.mcp._host import ToolsHost
from optarena.mcp._server import build_server, serve_stdio
from optarena.mcp._tools import TOOL_NAMES, TaskTools, Telemetry

__all__ = [
    "TOOL_NAMES",
    "TaskTools",
    "TaskToolsHook",
    "Telemetry",
    "ToolInputError",
    "ToolsHost",
    "build_server",
    "serve_stdio",
]
