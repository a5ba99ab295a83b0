"""The Claude Agent SDK's control requests against Cordon: programmatic sub-agents from
`initialize`, an in-process SDK MCP server whose tool the model calls through the client
(`mcp_message`), mcp_status / mcp_toggle / mcp_reconnect, set_model (sub-agents without a
model follow it), stop_task on a running sub-agent, get_context_usage (with the CLAUDE.md
the workspace holds as memoryFiles), an mcp_message the client sends for its server, an
unknown request answered with an error naming it, and the version check passing without
a warning.

Run by tests/tests/agent_sdk_controls.rs, which starts the scripted model this script plays
against and checks what the model was sent. The main script's turns, in order:
  1 mcp__calc__add {a: 2, b: 3}          2 text "sum done"
  3 Agent reviewer (REVIEW-TASK-MARKER)  4 text "reviewed"
  5 text "after set_model"
  6 Agent follower (FOLLOW-TASK-MARKER)  7 text "stopped it"
and the sub-agents' (routed by the markers): the reviewer answers "review report: fine";
the follower runs Bash `sleep 611`, which stop_task ends.
Environment: CORDON_BIN, SDK_WORKSPACE, the model's ANTHROPIC_BASE_URL / ANTHROPIC_API_KEY,
CORDON_HOME. Prints one JSON line of what it saw last; exit 0 when every check passed.
"""

import asyncio
import json
import logging
import os
import sys

from claude_agent_sdk import (
    AgentDefinition,
    McpSdkServerConfig,
    AssistantMessage,
    ClaudeAgentOptions,
    ClaudeSDKClient,
    HookMatcher,
    PermissionResultAllow,
    ResultMessage,
    SystemMessage,
    TaskNotificationMessage,
    TaskStartedMessage,
    create_sdk_mcp_server,
    tool,
)
from claude_agent_sdk._internal._mcp_compat import build_tool_server
from mcp.types import CallToolResult, Tool
from sdk_checks import check, collect

CLI = os.environ["CORDON_BIN"]
WS = os.environ["SDK_WORKSPACE"]

sdk_warnings = []


class Capture(logging.Handler):
    def emit(self, record):
        if record.levelno >= logging.WARNING:
            sdk_warnings.append(record.getMessage())


logging.getLogger("claude_agent_sdk").addHandler(Capture())

tool_calls = []
permission_calls = []
sleep_started = asyncio.Event()


@tool("add", "Adds two integers and returns the sum", {"a": int, "b": int})
async def add(args):
    # Runs here, in the SDK client's process: the caller's own code.
    tool_calls.append(args)
    return {"content": [{"type": "text", "text": f"the sum is {args['a'] + args['b']}"}]}


async def can_use_tool(tool_name, tool_input, context):
    permission_calls.append(tool_name)
    return PermissionResultAllow()


async def pre_bash(input_data, tool_use_id, context):
    if (input_data.get("tool_input") or {}).get("command", "").startswith("sleep "):
        sleep_started.set()
    return {}


# An in-process server whose tool list the test changes: it says so with a
# notifications/tools/list_changed the client sends on its behalf (mcp_message).
dyn_tools = [Tool(name="first", description="The first tool", inputSchema={"type": "object"})]


async def run_dyn(name, arguments):
    return CallToolResult(content=[], isError=False)


def tool_names_of(status, server):
    entry = next(s for s in status["mcpServers"] if s["name"] == server)
    return [t["name"] for t in entry.get("tools", [])]


def result_of(messages):
    check(isinstance(messages[-1], ResultMessage), "the prompt ends with a result", messages[-1])
    return messages[-1]


async def main():
    calc = create_sdk_mcp_server("calc", tools=[add])
    options = ClaudeAgentOptions(
        cli_path=CLI,
        cwd=WS,
        mcp_servers={
            "calc": calc,
            "dyn": McpSdkServerConfig(
                type="sdk", name="dyn", instance=build_tool_server("dyn", "1.0.0", dyn_tools, run_dyn)
            ),
        },
        agents={
            "reviewer": AgentDefinition(
                description="Reviews code for the test",
                prompt="REVIEWER-PROMPT-MARKER: you review code.",
                tools=["Read"],
                model="claude-sub-model",
            ),
            "follower": AgentDefinition(
                description="Runs commands, on the parent's model",
                prompt="FOLLOWER-PROMPT-MARKER: you run what you are told.",
                tools=["Bash"],
            ),
        },
        can_use_tool=can_use_tool,
        hooks={"PreToolUse": [HookMatcher(matcher="Bash", hooks=[pre_bash])]},
        stderr=lambda line: print(f"[cordon] {line}", file=sys.stderr),
    )
    async with ClaudeSDKClient(options=options) as client:
        info = await client.get_server_info()
        check(
            sorted(a["name"] for a in info.get("agents", [])) == ["follower", "reviewer"],
            "the initialize answer names the client's sub-agents",
            info,
        )

        # 1. The in-process tool: offered to the model, called through the client.
        await client.query("Add 2 and 3.")
        first = await collect(client)
        init = next((m for m in first if isinstance(m, SystemMessage) and m.subtype == "init"), None)
        check(init is not None, "the session starts with a system/init record", first)
        check(init.data.get("claude_code_version") == "2.1.0", "init names the compatible version", init.data)
        check(str(init.data.get("cordon_version", "")).count(".") == 2, "init names Cordon's version", init.data)
        check(init.data.get("confinement", {}).get("backend") == "local", "init names the confinement", init.data)
        check(
            {"name": "calc", "status": "connected"} in init.data.get("mcp_servers", []),
            "init lists the SDK server as connected",
            init.data,
        )
        check("mcp__calc__add" in init.data.get("tools", []), "init lists the SDK tool", init.data)
        check(result_of(first).result == "sum done", "the first prompt's answer", first[-1])
        check(tool_calls == [{"a": 2, "b": 3}], "the tool ran in the client with the model's input", tool_calls)
        check("mcp__calc__add" in permission_calls, "the SDK tool call passed the permission gate", permission_calls)

        status = await client.get_mcp_status()
        calc_status = next((s for s in status["mcpServers"] if s["name"] == "calc"), None)
        check(calc_status is not None and calc_status["status"] == "connected", "mcp_status: calc connected", status)
        check(calc_status.get("scope") == "sdk", "mcp_status: calc is an SDK server", calc_status)
        check([t["name"] for t in calc_status.get("tools", [])] == ["add"], "mcp_status: calc's tools", calc_status)

        # 2. A programmatic sub-agent, announced as a task.
        await client.query("Review the code.")
        second = await collect(client)
        check(result_of(second).result == "reviewed", "the review prompt's answer", second[-1])
        started = [m for m in second if isinstance(m, TaskStartedMessage)]
        ended = [m for m in second if isinstance(m, TaskNotificationMessage)]
        check(len(started) == 1 and started[0].task_id == "a1", "the sub-agent was announced as task a1", second)
        check(started[0].description == "review", "the task's description is the call's", started[0])
        check(len(ended) == 1 and ended[0].status == "completed", "the task ended completed", ended)
        check(ended[0].summary.startswith("review report"), "the task's summary is the report", ended[0])
        sub = [m for m in second if isinstance(m, AssistantMessage) and m.parent_tool_use_id == "a1"]
        check(len(sub) == 1, "the sub-agent's message came through with its parent's id", second)

        # 3. set_model, and an MCP server turned off: the next call has neither the old
        # model nor the tool.
        await client.set_model("claude-chosen-model")
        await client.toggle_mcp_server("calc", False)
        status = await client.get_mcp_status()
        calc_status = next(s for s in status["mcpServers"] if s["name"] == "calc")
        check(calc_status["status"] == "disabled", "mcp_toggle off: calc is disabled", calc_status)
        await client.query("Anything else?")
        third = await collect(client)
        check(result_of(third).result == "after set_model", "the third prompt's answer", third[-1])
        await client.toggle_mcp_server("calc", True)
        await client.reconnect_mcp_server("calc")
        status = await client.get_mcp_status()
        calc_status = next(s for s in status["mcpServers"] if s["name"] == "calc")
        check(calc_status["status"] == "connected", "mcp_toggle on and mcp_reconnect: calc connected", calc_status)
        try:
            await client.reconnect_mcp_server("no-such-server")
            check(False, "reconnecting an unknown server fails")
        except Exception as e:  # noqa: BLE001 - the SDK raises a bare Exception
            check("no-such-server" in str(e), "reconnecting an unknown server names it", str(e))

        # 4. stop_task stops the running sub-agent alone; the parent's turn goes on.
        await client.query("Wait in a sub-agent.")
        stopper = None
        stop_error = []

        async def stop_when_running(task_id):
            await sleep_started.wait()
            await asyncio.sleep(1.0)  # let the command start; stop_task ends it either way
            try:
                await client.stop_task(task_id)
            except Exception as e:  # noqa: BLE001
                stop_error.append(str(e))

        fourth = []
        async for m in client.receive_response():
            fourth.append(m)
            if isinstance(m, TaskStartedMessage) and stopper is None:
                stopper = asyncio.create_task(stop_when_running(m.task_id))
        check(stopper is not None, "the follower was announced as a task", fourth)
        await stopper
        check(not stop_error, "stop_task was accepted", stop_error)
        ended = [m for m in fourth if isinstance(m, TaskNotificationMessage)]
        check(len(ended) == 1 and ended[0].status == "stopped", "the task ended stopped", ended)
        result = result_of(fourth)
        check(not result.is_error and result.result == "stopped it", "the parent's turn went on", result)
        try:
            await client.stop_task(ended[0].task_id)
            check(False, "stopping a finished task fails")
        except Exception as e:  # noqa: BLE001
            check(ended[0].task_id in str(e), "stopping a finished task names it", str(e))

        # 5. get_context_usage in the SDK type's shape.
        usage = await client.get_context_usage()
        for field in ["categories", "totalTokens", "maxTokens", "percentage", "model", "mcpTools", "agents"]:
            check(field in usage, f"get_context_usage has {field}", usage)
        check(usage["totalTokens"] > 0 and usage["maxTokens"] >= usage["totalTokens"], "tokens used within the window", usage)
        check(usage["model"] == "claude-chosen-model", "the usage names the model set_model chose", usage["model"])
        check(
            all({"name", "tokens", "color"} <= set(c) for c in usage["categories"]),
            "categories carry name, tokens and color",
            usage["categories"],
        )
        check(
            {"agentType": "reviewer", "source": "flagSettings"}.items() <= next(a for a in usage["agents"] if a["agentType"] == "reviewer").items(),
            "the usage lists the client's sub-agent",
            usage["agents"],
        )
        check(any(t["name"] == "mcp__calc__add" for t in usage["mcpTools"]), "the usage lists the SDK tool", usage["mcpTools"])

        check(
            [(m["path"], m["type"]) for m in usage.get("memoryFiles", [])] == [(os.path.join(WS, "CLAUDE.md"), "Project")],
            "memoryFiles names the CLAUDE.md read, as Claude Code does",
            usage.get("memoryFiles"),
        )
        check(all(m["tokens"] > 0 for m in usage["memoryFiles"]), "with its size", usage["memoryFiles"])

        # 6. mcp_message from the client: its server's own notification reaches the
        # connection, which lists the tools again.
        check(tool_names_of(await client.get_mcp_status(), "dyn") == ["first"], "dyn starts with one tool")
        dyn_tools.append(Tool(name="second", description="The second tool", inputSchema={"type": "object"}))
        changed = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
        answer = await client._query._send_control_request(
            {"subtype": "mcp_message", "server_name": "dyn", "message": changed}, timeout=30
        )
        check(answer == {}, "mcp_message is acknowledged with an empty success", answer)
        names = tool_names_of(await client.get_mcp_status(), "dyn")
        check(names == ["first", "second"], "the server's tools were listed again", names)
        try:
            await client._query._send_control_request(
                {"subtype": "mcp_message", "server_name": "nope", "message": changed}, timeout=30
            )
            check(False, "an mcp_message for an unknown server fails")
        except Exception as e:  # noqa: BLE001
            check("nope" in str(e), "an mcp_message for an unknown server names it", str(e))

        # 7. A request Cordon does not know gets an error naming it.
        try:
            await client._query._send_control_request({"subtype": "no_such_request"}, timeout=30)
            check(False, "an unknown request fails")
        except Exception as e:  # noqa: BLE001
            check("no_such_request" in str(e), "an unknown request's error names it", str(e))

    too_old = [w for w in sdk_warnings if "too old" in w or "Minimum required version" in w]
    check(not too_old, "the SDK's version check passed without a warning", sdk_warnings)
    print(json.dumps({"tool_calls": tool_calls, "permission_calls": permission_calls, "warnings": sdk_warnings}))


if __name__ == "__main__":
    asyncio.run(main())
