"""The Claude Agent SDK's options, each driving Cordon as it drives Claude Code: the
client side of tests/tests/agent_sdk_flags.rs, which starts the scripted model for one
scenario (the first argument), runs this script, then checks what the model was sent.

Environment: CORDON_BIN, SDK_WORKSPACE, the model's ANTHROPIC_BASE_URL /
ANTHROPIC_API_KEY, CORDON_HOME; some scenarios read SDK_ARG. Prints one JSON line
`{"saw": ...}` with what the client saw (for the Rust side) and exits 0 when every check
here passed.
"""

import asyncio
import json
import os
import sys

from claude_agent_sdk import (
    AssistantMessage,
    ClaudeAgentOptions,
    ClaudeSDKClient,
    ResultMessage,
    StreamEvent,
    SystemMessage,
)

from sdk_checks import check

CLI = os.environ["CORDON_BIN"]
WS = os.environ["SDK_WORKSPACE"]
ARG = os.environ.get("SDK_ARG", "")


def options(**kwargs):
    return ClaudeAgentOptions(
        cli_path=CLI,
        cwd=WS,
        stderr=lambda line: print(f"[cordon] {line}", file=sys.stderr),
        **kwargs,
    )


async def ask(prompt, **kwargs):
    """One session, one prompt: every message the client received."""
    async with ClaudeSDKClient(options=options(**kwargs)) as client:
        await client.query(prompt)
        return [m async for m in client.receive_response()]


def init_of(messages):
    return next(m for m in messages if isinstance(m, SystemMessage) and m.subtype == "init")


def result_of(messages):
    result = messages[-1]
    check(isinstance(result, ResultMessage), "the prompt ends with a result", result)
    return result


async def system_prompts():
    custom = await ask("Who are you?", system_prompt="You are a pirate.")
    check(result_of(custom).result == "arr", "the custom prompt's session answers", custom[-1])
    appended = await ask(
        "Who are you?",
        system_prompt={"type": "preset", "preset": "claude_code", "append": "Answer in French."},
    )
    check(result_of(appended).result == "oui", "the appended prompt's session answers")
    path = os.path.join(ARG, "prompt.txt")
    with open(path, "w") as f:
        f.write("You are a file-borne prompt.")
    from_file = await ask("Who are you?", system_prompt={"type": "file", "path": path})
    check(result_of(from_file).result == "filed", "the file prompt's session answers")
    minimal = await ask("Who are you?")
    check(result_of(minimal).result == "minimal", "the default session answers")
    return {}


async def tools():
    only_read = await ask("List the tools.", tools=["Read", "Grep"])
    names = init_of(only_read).data.get("tools")
    check(sorted(names) == ["Grep", "Read"], "init lists only the chosen built-ins", names)
    none = await ask("List the tools.", tools=[])
    names = init_of(none).data.get("tools")
    check(names == [], "tools=[] offers no built-in", names)
    return {}


async def partial_messages():
    messages = await ask("Say hello.", include_partial_messages=True)
    events = [m.event for m in messages if isinstance(m, StreamEvent)]
    kinds = [e.get("type") for e in events]
    check(kinds[0] == "message_start" and kinds[-1] == "message_stop", "events span the message", kinds)
    deltas = "".join(
        e["delta"]["text"]
        for e in events
        if e.get("type") == "content_block_delta" and e["delta"].get("type") == "text_delta"
    )
    check(deltas == "hello there, streamed in pieces", "the text deltas add up to the answer", deltas)
    first_assistant = next(i for i, m in enumerate(messages) if isinstance(m, AssistantMessage))
    first_event = next(i for i, m in enumerate(messages) if isinstance(m, StreamEvent))
    check(first_event < first_assistant, "stream events come before the assembled message")
    plain = await ask("Say hello.")
    check(not any(isinstance(m, StreamEvent) for m in plain), "no stream events unless asked")
    return {"kinds": kinds}


SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "population": {"type": "integer", "minimum": 0}},
    "required": ["city", "population"],
    "additionalProperties": False,
}


async def json_schema():
    messages = await ask(
        "What is the largest city of France?",
        output_format={"type": "json_schema", "schema": SCHEMA},
    )
    result = result_of(messages)
    check(not result.is_error, "the run succeeds", result)
    check(
        result.structured_output == {"city": "Paris", "population": 2100000},
        "the result carries the validated structured output",
        result.structured_output,
    )
    failing = await ask(
        "What is the largest city of France?",
        output_format={"type": "json_schema", "schema": SCHEMA},
    )
    result = result_of(failing)
    check(
        result.is_error and result.subtype == "error_max_structured_output_retries",
        "a model that never gives a matching value ends in error_max_structured_output_retries",
        result,
    )
    return {}


async def max_budget():
    messages = await ask("Read the notes.", max_budget_usd=0.05)
    result = result_of(messages)
    check(result.subtype == "error_max_budget_usd" and result.is_error, "the budget ends the run", result)
    check(
        result.total_cost_usd is not None and result.total_cost_usd >= 0.05,
        "the result says what was spent",
        result.total_cost_usd,
    )
    roomy = await ask("Read the notes.", max_budget_usd=100.0)
    result = result_of(roomy)
    check(result.subtype == "success", "a budget not reached changes nothing", result)
    check(result.total_cost_usd and result.total_cost_usd > 0, "the cost is reported", result)
    return {}


async def sessions():
    first_id = "0b5c1e0e-5d7a-4c39-9a57-3f1c2a9d0001"
    fork_id = "0b5c1e0e-5d7a-4c39-9a57-3f1c2a9d0002"
    first = await ask("Remember the word: tangerine.", session_id=first_id)
    check(init_of(first).data.get("session_id") == first_id, "the session takes the given id")
    check(result_of(first).session_id == first_id, "the result names the given id")
    fork = await ask("What was the word?", resume=first_id, fork_session=True, session_id=fork_id)
    check(init_of(fork).data.get("session_id") == fork_id, "the fork takes its own given id")
    again = await ask("And now?", resume=first_id)
    check(result_of(again).session_id == first_id, "the original goes on under its own id")
    return {}


async def thinking():
    messages = await ask(
        "Think hard.",
        thinking={"type": "enabled", "budget_tokens": 20000},
        effort="high",
        task_budget={"total": 50000},
        betas=["context-1m-2025-08-07"],
    )
    check(result_of(messages).result == "thought", "the run ends")
    adaptive = await ask("Think as you like.", thinking={"type": "adaptive", "display": "summarized"})
    check(result_of(adaptive).result == "adapted", "the adaptive run ends")
    return {}


async def fallback():
    messages = await ask("Hello?", fallback_model="claude-haiku-4-5")
    result = result_of(messages)
    check(not result.is_error and result.result == "from the fallback", "the fallback model answered", result)
    return {}


async def add_dir():
    outside = ARG
    messages = await ask("Write the report.", add_dirs=[outside], permission_mode="acceptEdits")
    check(result_of(messages).result == "written", "the run ends")
    with open(os.path.join(outside, "report.txt")) as f:
        check(f.read() == "outside the workspace\n", "the Write reached the added directory")
    lines = []
    try:
        async with ClaudeSDKClient(
            options=ClaudeAgentOptions(cli_path=CLI, cwd=WS, add_dirs=["/etc"], stderr=lines.append)
        ) as client:
            await client.query("Write elsewhere.")
            async for _ in client.receive_response():
                pass
        refused = False
    except Exception:
        refused = True
    check(refused, "a system directory is refused: the session does not start")
    check(any("/etc" in line for line in lines), "the refusal names the directory", lines)
    return {}


async def mcp_config():
    time_server = {"command": ARG, "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"]}
    messages = await ask("What time is it?", mcp_servers={"time": time_server})
    init = init_of(messages)
    servers = {s["name"]: s["status"] for s in init.data.get("mcp_servers", [])}
    check(servers == {"time": "connected"}, "the --mcp-config server is up", servers)
    check("mcp__time__get_current_time" in init.data.get("tools", []), "its tools are offered")
    check(result_of(messages).result == "it is time", "the run ends")
    other = json.dumps({"mcpServers": {"other": time_server}})
    loose = await ask("Again?", mcp_servers={"time": time_server}, settings=other)
    names = sorted(s["name"] for s in init_of(loose).data.get("mcp_servers", []))
    check(names == ["other", "time"], "without strict, the settings' servers join", names)
    strict = await ask(
        "Again?", mcp_servers={"time": time_server}, settings=other, strict_mcp_config=True
    )
    names = [s["name"] for s in init_of(strict).data.get("mcp_servers", [])]
    check(names == ["time"], "--strict-mcp-config keeps only the flag's servers", names)
    return {}


async def setting_sources():
    everything = await ask("Hello?")
    check("Grep" not in init_of(everything).data.get("tools", []), "the project's deny removes Grep")
    user_only = await ask("Hello?", setting_sources=["user"])
    check("Grep" in init_of(user_only).data.get("tools", []), "without project settings Grep stays")
    return {}


HOOK_SETTINGS = json.dumps(
    {"hooks": {"UserPromptSubmit": [{"hooks": [{"type": "command", "command": "echo hooked"}]}]}}
)


async def hook_events():
    from claude_agent_sdk import HookEventMessage

    messages = await ask("Hello?", settings=HOOK_SETTINGS, include_hook_events=True)
    events = [m for m in messages if isinstance(m, HookEventMessage)]
    phases = [(e.subtype, e.hook_event_name) for e in events]
    check(
        phases == [("hook_started", "UserPromptSubmit"), ("hook_response", "UserPromptSubmit")],
        "the hook's start and end reach the client",
        phases,
    )
    response = events[1].data
    check(response["hook_id"] == events[0].data["hook_id"], "both name the same hook run")
    check("hooked" in response["output"] and response["exit_code"] == 0, "the output and exit code", response)
    check(response["outcome"] == "success", "the outcome", response)
    quiet = await ask("Hello?", settings=HOOK_SETTINGS)
    check(not any(isinstance(m, HookEventMessage) for m in quiet), "no hook events unless asked")
    return {}


async def resume_at():
    from claude_agent_sdk import UserMessage

    source_id = "0b5c1e0e-5d7a-4c39-9a57-3f1c2a9d0003"
    async with ClaudeSDKClient(options=options(session_id=source_id)) as client:
        await client.query("one")
        first = [m async for m in client.receive_response()]
        await client.query("two")
        second = [m async for m in client.receive_response()]
    kept = next(m for m in first if isinstance(m, AssistantMessage))
    dropped = next(m for m in second if isinstance(m, UserMessage))
    check(kept.uuid and dropped.uuid, "assistant and prompt records carry their transcript uuids")
    fork = await ask(
        "three",
        resume=source_id,
        fork_session=True,
        resume_session_at=kept.uuid,
        resume_drops_turn=dropped.uuid,
    )
    check(result_of(fork).result == "third", "the fork at the first answer goes on")
    check(result_of(fork).session_id != source_id, "as a session of its own")
    try:
        await ask(
            "four",
            resume=source_id,
            fork_session=True,
            resume_session_at=kept.uuid,
            resume_drops_turn="0b5c1e0e-5d7a-4c39-9a57-3f1c2a9d0fff",
        )
        refused = None
    except Exception as e:
        refused = str(e)
    check(refused is not None, "a fork that would drop more than the named turn is refused")
    return {}


async def prices():
    # Claude Opus 5.5: 10k input at $4/M and 3k output at $20/M.
    opus = await ask("Hello?", model="claude-opus-5-5")
    cost = result_of(opus).total_cost_usd
    check(cost is not None and abs(cost - 0.1) < 1e-9, "Opus 5.5 is priced from the table", cost)
    # Claude Haiku 5.5 over 100,000 prompt tokens: every token at the higher tier.
    haiku = await ask("Hello?", model="claude-haiku-5-5")
    cost = result_of(haiku).total_cost_usd
    check(cost is not None and abs(cost - 0.0775) < 1e-9, "a long Haiku 5.5 prompt is priced at its tier", cost)
    return {}


async def plugins():
    root = ARG
    messages = await ask(
        "/toolkit:greet Bob",
        plugins=[{"type": "local", "path": root}, {"type": "local", "path": root + "-missing"}],
        allowed_tools=["mcp__plugin_toolkit_clock"],
    )
    init = init_of(messages).data
    check(
        init.get("plugins") == [{"name": "toolkit", "path": root, "version": "1.0.0"}],
        "init lists the loaded plugin",
        init.get("plugins"),
    )
    errors = init.get("plugin_errors", [])
    check(
        [(e["plugin"], e["type"]) for e in errors] == [("inline[1]", "path-not-found")],
        "init names the plugin directory that failed",
        errors,
    )
    check("toolkit:greet" in init.get("slash_commands", []), "the plugin's command is listed", init.get("slash_commands"))
    check("toolkit:lint" in init.get("skills", []), "the plugin's skill is listed", init.get("skills"))
    check("toolkit:checker" in init.get("agents", []), "the plugin's agent is listed", init.get("agents"))
    servers = {s["name"]: s["status"] for s in init.get("mcp_servers", [])}
    check(servers.get("plugin:toolkit:clock") == "connected", "the plugin's MCP server is up", servers)
    check(
        "mcp__plugin_toolkit_clock__get_current_time" in init.get("tools", []),
        "its tools are named as Claude Code names them",
        init.get("tools"),
    )
    check(result_of(messages).result == "plugged", "the run ends", messages[-1])
    return {}


async def session_store():
    from claude_agent_sdk import InMemorySessionStore, project_key_for_directory

    store = InMemorySessionStore()
    first = await ask("Remember the fruit: kiwi.", session_store=store)
    session_id = result_of(first).session_id
    key = {"project_key": project_key_for_directory(WS), "session_id": session_id}
    entries = await store.load(key) or []
    kinds = [e.get("type") for e in entries]
    check(kinds[:1] == ["session_start"], "the store holds the session from its start", kinds)
    check(
        any("kiwi" in json.dumps(e) for e in entries if e.get("type") == "user"),
        "the store holds the prompt",
        entries,
    )
    check("assistant" in kinds and kinds[-1] == "result", "and the answer and the run's end", kinds)
    # Another machine: a Cordon with no sessions of its own resumes from the store.
    fresh_home = os.path.join(ARG, "fresh-cordon-home")
    again = await ask(
        "What was the fruit?",
        session_store=store,
        resume=session_id,
        env={"CORDON_HOME": fresh_home},
    )
    check(result_of(again).result == "kiwi it was", "the resumed session answers", again[-1])
    check(result_of(again).session_id == session_id, "under the stored session's id")
    later = await store.load(key) or []
    check(len(later) > len(entries), "the resumed turn joins the store", [e.get("type") for e in later])
    check(
        len({e["uuid"] for e in later}) == len(later),
        "no record is mirrored twice",
        [e.get("uuid") for e in later],
    )
    return {}


async def agent_fields():
    from claude_agent_sdk import AgentDefinition

    agents = {
        "scribe": AgentDefinition(
            description="Keeps notes",
            prompt="SCRIBE-PROMPT",
            tools=["Read", "Write"],
            skills=["style"],
            effort="low",
            permissionMode="acceptEdits",
        ),
        "brief": AgentDefinition(description="One call only", prompt="BRIEF-PROMPT", maxTurns=1),
    }
    messages = await ask("Take notes, then be brief.", agents=agents)
    check(result_of(messages).result == "noted", "the run ends", messages[-1])
    with open(os.path.join(WS, "notes.md")) as f:
        check(f.read() == "tabs, always\n", "the scribe's Write ran under its own acceptEdits")
    refused = None
    try:
        await ask("Hello?", agents={"keeper": AgentDefinition(description="d", prompt="p", memory="project")})
    except Exception as e:  # noqa: BLE001 - the SDK raises a bare Exception
        refused = str(e)
    check(
        refused is not None and "keeper" in refused and "memory" in refused,
        "a field Cordon cannot apply is refused, naming the agent and the field",
        refused,
    )
    return {}


SCENARIOS = {
    "prices": prices,
    "plugins": plugins,
    "session_store": session_store,
    "agent_fields": agent_fields,
    "resume_at": resume_at,
    "hook_events": hook_events,
    "mcp_config": mcp_config,
    "setting_sources": setting_sources,
    "system_prompts": system_prompts,
    "tools": tools,
    "partial_messages": partial_messages,
    "json_schema": json_schema,
    "max_budget": max_budget,
    "sessions": sessions,
    "thinking": thinking,
    "fallback": fallback,
    "add_dir": add_dir,
}


if __name__ == "__main__":
    saw = asyncio.run(SCENARIOS[sys.argv[1]]())
    print(json.dumps({"saw": saw}))
