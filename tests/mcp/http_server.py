"""A Streamable HTTP MCP server for Cordon's tests, written with the `mcp` Python SDK: it
listens on 127.0.0.1 at a port the system picks, prints that port on its first line,
and serves `/mcp`. Each request's `X-Cordon-Test` header is appended to the file named
by its argument; the `whoami` tool answers with the header its own request carried."""

import socket
import sys

import anyio
import uvicorn
from mcp.server.mcpserver import Context, MCPServer

HEADER = "x-cordon-test"
log_path = sys.argv[1]
server = MCPServer("web")


@server.tool()
def whoami(ctx: Context) -> str:
    """Says which X-Cordon-Test header reached the server with this call."""
    request = ctx.request_context.request
    return f"{HEADER}={request.headers.get(HEADER, '(none)')}"


class HeaderLog:
    """ASGI middleware: one line per HTTP request, the header's value or `-`."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            value = headers.get(HEADER.encode(), b"-").decode()
            with open(log_path, "a") as f:
                f.write(f"{scope['method']} {scope['path']} {value}\n")
        await self.app(scope, receive, send)


async def main():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    print(sock.getsockname()[1], flush=True)
    app = HeaderLog(server.streamable_http_app())
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve(sockets=[sock])


if __name__ == "__main__":
    anyio.run(main)
