"""A stdio MCP server for Cordon's tool-search tests, written with the `mcp` Python SDK:
200 tools (20 actions on 10 kinds of record, `create_invoice`, `export_ticket`...), each
with a description and a three-field input schema, as a large business API's server
offers them. A call answers with the tool's name and its arguments."""

import json

from mcp.server.mcpserver import MCPServer

ACTIONS = [
    "get", "list", "create", "update", "delete", "search", "archive", "restore",
    "export", "import", "sync", "share", "lock", "unlock", "tag", "untag", "move",
    "copy", "rename", "count",
]
RECORDS = [
    "issue", "ticket", "invoice", "calendar_event", "document", "channel", "message",
    "contact", "deployment", "build",
]

server = MCPServer("many")


def make(action: str, record: str):
    def tool(target: str, limit: int = 10, note: str = "") -> str:
        args = {"target": target, "limit": limit, "note": note}
        return f"{action}_{record} ran with {json.dumps(args, sort_keys=True)}"

    tool.__doc__ = (
        f"{action.capitalize()} {record.replace('_', ' ')} records in the workspace's "
        f"business system. `target` names the {record.replace('_', ' ')} (an id or a "
        f"search expression), `limit` caps how many are touched, and `note` is kept in "
        f"the audit trail beside the change."
    )
    return tool


for action in ACTIONS:
    for record in RECORDS:
        server.add_tool(make(action, record), name=f"{action}_{record}")

if __name__ == "__main__":
    server.run()
