"""A stdio MCP server for Cordon's tests, written with the `mcp` Python SDK: it answers,
crashes, hangs, or writes garbage on request, and probes what its sandbox lets it read."""

import os
import sys
import time

from mcp.server.mcpserver import MCPServer

server = MCPServer("flaky")


@server.tool()
def echo(text: str) -> str:
    """Returns the text with the server's process id (a restart changes it)."""
    return f"{text} (pid {os.getpid()})"


@server.tool()
def crash() -> str:
    """Exits at once without answering."""
    sys.stderr.write("flaky: crashing on request\n")
    sys.stderr.flush()
    os._exit(3)


@server.tool()
def hang() -> str:
    """Never answers."""
    while True:
        time.sleep(3600)


@server.tool()
def garbage() -> str:
    """Writes a line that is not JSON-RPC to stdout, then never answers."""
    os.write(1, b"this is not json {{{\n")
    while True:
        time.sleep(3600)


@server.tool()
def probe(path: str) -> str:
    """Tries to read a file and says what happened."""
    try:
        with open(path) as f:
            return "read: " + f.read()
    except OSError as e:
        return f"refused: {e.strerror}"


@server.tool()
def big(chars: int) -> str:
    """Returns a long text of `chars` characters."""
    return "x" * chars


if __name__ == "__main__":
    server.run()
