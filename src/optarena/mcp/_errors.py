"""The error a tool call with unusable arguments raises (an MCP error result, not a crash)."""


class ToolInputError(ValueError):
    """A tool was called with arguments it cannot use: the message says which and why."""
