"""A stdio MCP server for Cordon's tests, written with the `mcp` Python SDK, whose tool
list changes while it runs: `grow` adds a tool of the name it is given and tells the
client so (`notifications/tools/list_changed`) before it answers; `listings` says how
many times the client asked for the tool list."""

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("growing")
listings = 0


async def count_listings(ctx, call_next):
    global listings
    if ctx.method == "tools/list":
        listings += 1
    return await call_next(ctx)


server.middleware.append(count_listings)


@server.tool()
def listings_so_far() -> str:
    """How many tools/list requests the server answered."""
    return f"tools/list answered {listings} times"


@server.tool()
async def grow(name: str, ctx: Context) -> str:
    """Adds a tool called `name` that answers with its own name."""

    def added() -> str:
        return f"{name} was added while the server ran"

    server.add_tool(added, name=name, description=f"A tool `grow` added: {name}.")
    await ctx.session.send_tool_list_changed()
    return f"added {name}"


if __name__ == "__main__":
    server.run()
