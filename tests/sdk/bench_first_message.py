"""One Agent SDK session per run: connect, send a prompt, stop at the first assistant
message; prints the milliseconds from the start of connect() to that message, one JSON
line per run. Driven by tests/benches/sdk_first_message.rs against the scripted model.

Arguments: CLI_PATH RUNS. Environment: SDK_WORKSPACE, the model's ANTHROPIC_BASE_URL and
ANTHROPIC_API_KEY, and whatever the CLI needs (CORDON_HOME, or HOME for Claude Code).
"""

import asyncio
import json
import os
import sys
import time

from claude_agent_sdk import AssistantMessage, ClaudeAgentOptions, ClaudeSDKClient


async def once(cli):
    options = ClaudeAgentOptions(
        cli_path=cli,
        cwd=os.environ["SDK_WORKSPACE"],
        stderr=lambda line: print(f"[cli] {line}", file=sys.stderr),
    )
    started = time.perf_counter()
    async with ClaudeSDKClient(options=options) as client:
        await client.query("Say hello.")
        async for message in client.receive_messages():
            if isinstance(message, AssistantMessage):
                first = time.perf_counter()
                break
        else:
            raise SystemExit("the session ended without an assistant message")
    return (first - started) * 1000.0


async def main():
    cli, runs = sys.argv[1], int(sys.argv[2])
    for _ in range(runs):
        print(json.dumps({"ms": await once(cli)}), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
