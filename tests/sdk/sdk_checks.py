"""What the Agent SDK scripts share: one named check per assertion (printed as it passes,
the script exits 1 at the first that fails) and collecting one prompt's messages."""

import sys


def check(condition, what, detail=None):
    if not condition:
        print(f"FAILED: {what}", file=sys.stderr)
        if detail is not None:
            print(f"  detail: {detail!r}", file=sys.stderr)
        sys.exit(1)
    print(f"ok: {what}")


async def collect(client):
    """The messages of one prompt, up to and including its result."""
    return [m async for m in client.receive_response()]
