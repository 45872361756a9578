"""The MCP server the harness tests' scripted agent builds (`bench`, one tool, `probe`)."""

BENCH_SERVER = '''from mcp.server.mcpserver import MCPServer

server = MCPServer("bench")


@server.tool()
def probe(n: int) -> str:
    """Say how many rows would be checked."""
    return f"checked {n} rows"


server.run()
'''
