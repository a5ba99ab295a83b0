"""An MCP server over stdio whose tool list never ends: every tools/list page holds a
hundred tools and a cursor to one more page. Plain JSON-RPC, no SDK, so nothing stops it
from lying this way. The session must refuse the server and go on without it."""

import json
import sys

for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    method = message.get("method")
    if method == "initialize":
        result = {
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "endless", "version": "1"},
        }
    elif method == "tools/list":
        page = int((message.get("params") or {}).get("cursor") or 0)
        tools = [
            {"name": f"t{page}_{i}", "description": "x" * 2000, "inputSchema": {"type": "object"}}
            for i in range(100)
        ]
        result = {"tools": tools, "nextCursor": str(page + 1)}
    else:
        result = {}
    print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}), flush=True)
