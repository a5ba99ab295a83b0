"""What the SDK scripts share: one check, which ends the script at the first failure
with what failed (and why) on stderr."""

import sys


def check(condition, what, detail=None):
    if not condition:
        print(f"FAILED: {what}", file=sys.stderr)
        if detail is not None:
            print(f"  detail: {detail!r}", file=sys.stderr)
        sys.exit(1)
    print(f"ok: {what}")
