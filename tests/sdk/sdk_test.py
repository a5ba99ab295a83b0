"""The Claude Agent SDK drives Cordon: a can_use_tool callback denies one call and allows
another with an edited input, a PreToolUse hook callback sees Bash calls, and an
interrupt stops a long command; the session goes on afterwards.

Run by tests/tests/agent_sdk.rs, which starts the scripted model this script's prompts
play against (the turns: Bash `rm victim.txt`, Write allowed.txt, text; Bash `sleep 600`;
text "still here"). Environment: CORDON_BIN, SDK_WORKSPACE, plus the model's
ANTHROPIC_BASE_URL / ANTHROPIC_API_KEY and CORDON_HOME. Exit 0 when every check passed.
"""

import asyncio
import json
import os
import sys

from claude_agent_sdk import (
    AssistantMessage,
    ClaudeAgentOptions,
    ClaudeSDKClient,
    HookMatcher,
    PermissionResultAllow,
    PermissionResultDeny,
    ResultMessage,
    SystemMessage,
    ToolResultBlock,
    UserMessage,
)
from sdk_checks import check, collect

CLI = os.environ["CORDON_BIN"]
WS = os.environ["SDK_WORKSPACE"]
UPDATED_CONTENT = "written with the input can_use_tool gave back\n"
DENY_MESSAGE = "deleting files is not allowed in this test"

permission_calls = []
hook_calls = []
sleep_started = asyncio.Event()


async def can_use_tool(tool_name, tool_input, context):
    permission_calls.append({"tool_name": tool_name, "input": tool_input})
    command = tool_input.get("command", "") if tool_name == "Bash" else ""
    if command.startswith("rm "):
        return PermissionResultDeny(message=DENY_MESSAGE)
    if tool_name == "Write":
        return PermissionResultAllow(updated_input={**tool_input, "content": UPDATED_CONTENT})
    if command.startswith("sleep "):
        return PermissionResultAllow()
    return PermissionResultDeny(message=f"unexpected call {tool_name}")


async def pre_bash(input_data, tool_use_id, context):
    hook_calls.append(
        {
            "event": input_data.get("hook_event_name"),
            "tool_name": input_data.get("tool_name"),
            "tool_input": input_data.get("tool_input"),
            "tool_use_id": tool_use_id,
        }
    )
    if (input_data.get("tool_input") or {}).get("command", "").startswith("sleep "):
        # The long command is about to run (whether the rules ask about it or not).
        sleep_started.set()
    return {}


async def main():
    options = ClaudeAgentOptions(
        cli_path=CLI,
        cwd=WS,
        can_use_tool=can_use_tool,
        hooks={"PreToolUse": [HookMatcher(matcher="Bash", hooks=[pre_bash])]},
        enable_file_checkpointing=True,
        extra_args={"replay-user-messages": None},
        stderr=lambda line: print(f"[cordon] {line}", file=sys.stderr),
    )
    async with ClaudeSDKClient(options=options) as client:
        await client.query("Remove victim.txt and write allowed.txt.")
        first = await collect(client)
        check(
            any(isinstance(m, SystemMessage) and m.subtype == "init" for m in first),
            "the session starts with a system/init record",
        )
        check(
            any(isinstance(m, AssistantMessage) for m in first),
            "assistant messages come through",
        )
        result = first[-1]
        check(isinstance(result, ResultMessage), "the first prompt ends with a result", first[-1])
        check(not result.is_error and result.result == "first task done", "the first result is a success", result)

        check(os.path.exists(os.path.join(WS, "victim.txt")), "the denied rm did not run")
        with open(os.path.join(WS, "allowed.txt")) as f:
            written = f.read()
        check(written == UPDATED_CONTENT, "the allowed Write ran with the updated input", written)
        asked = [(c["tool_name"], c["input"].get("command")) for c in permission_calls]
        check(("Bash", "rm victim.txt") in asked, "can_use_tool was asked about the rm", asked)
        check(any(t == "Write" for t, _ in asked), "can_use_tool was asked about the Write", asked)
        rm_hooks = [h for h in hook_calls if (h["tool_input"] or {}).get("command") == "rm victim.txt"]
        check(len(rm_hooks) == 1, "the PreToolUse hook callback saw the rm", hook_calls)
        check(
            rm_hooks[0]["event"] == "PreToolUse" and rm_hooks[0]["tool_name"] == "Bash" and rm_hooks[0]["tool_use_id"] == "b1",
            "the hook input carries hook_event_name, tool_name, tool_input and tool_use_id",
            rm_hooks[0],
        )
        check(all(h["tool_name"] == "Bash" for h in hook_calls), "the Bash matcher only fires for Bash", hook_calls)

        await client.query("Wait for a long time.")

        async def interrupt_when_running():
            await sleep_started.wait()
            # Give the command a moment to start; the interrupt stops the run either way.
            await asyncio.sleep(1.0)
            await client.interrupt()

        interrupter = asyncio.create_task(interrupt_when_running())
        second = await collect(client)
        await interrupter
        result = second[-1]
        check(isinstance(result, ResultMessage), "the interrupted prompt still ends with a result", result)
        check(result.subtype == "interrupted" and result.is_error, "the result says the run was interrupted", result)

        await client.query("Are you still there?")
        third = await collect(client)
        check(
            isinstance(third[-1], ResultMessage) and third[-1].result == "still here",
            "the session goes on after the interrupt",
            third[-1],
        )
        # Rewind to the first prompt: the file its run created goes away again.
        prompts = [
            m
            for m in first
            if isinstance(m, UserMessage)
            and m.uuid
            and not (isinstance(m.content, list) and any(isinstance(b, ToolResultBlock) for b in m.content))
        ]
        check(len(prompts) == 1, "the first prompt's user record carries a uuid", first)
        await client.rewind_files(prompts[0].uuid)
        check(not os.path.exists(os.path.join(WS, "allowed.txt")), "rewind_files removed the file the run created")
        check(os.path.exists(os.path.join(WS, "victim.txt")), "rewind_files kept what was there before")
    print(json.dumps({"permission_calls": permission_calls, "hook_calls": hook_calls}))


if __name__ == "__main__":
    asyncio.run(main())
