#!/usr/bin/env bash
# Creates the Python environment the MCP tests run their servers from: the pinned
# mcp-server-time and mcp-server-fetch (real servers from PyPI) and the `mcp` SDK (for
# the servers the tests write, tests/mcp/*.py). It lives under /opt, which the sandbox's
# Landlock policy lets every process read and run (policies/landlock/default.json), so the
# servers run inside the sandbox unchanged.
# Idempotent: an environment holding the pinned versions is kept; one built for other
# pins by the same interpreter gets them installed in place (pip only adds or changes what
# differs), so a test run beside it keeps its environment.
#   venv: $CORDON_MCP_VENV, else /opt/cordon-tests/mcp-venv. Prints the venv's python.
set -euo pipefail
pins=(
  "mcp-server-time==2026.10.19"
  "mcp-server-fetch==2026.10.24"
  "mcp==2.3.0"
)
venv="${CORDON_MCP_VENV:-/opt/cordon-tests/mcp-venv}"
# The system interpreter: the venv links to it, and the sandbox sees /usr (a pyenv or
# other interpreter under a home directory would be invisible there).
python="${CORDON_MCP_PYTHON:-/usr/bin/python3}"
check="import importlib.metadata as m, sys
pins = dict(p.split('==') for p in sys.argv[1:])
sys.exit(any(m.version(name) != version for name, version in pins.items()))"
if [ -x "$venv/bin/python" ] && [ "$(readlink -f "$venv/bin/python")" = "$(readlink -f "$python")" ]; then
  if ! "$venv/bin/python" -c "$check" "${pins[@]}" 2>/dev/null; then
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "${pins[@]}" >&2
  fi
  echo "$venv/bin/python"
  exit 0
fi
rm -rf "$venv"
mkdir -p "$(dirname "$venv")"
"$python" -m venv "$venv" >&2
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "${pins[@]}" >&2
echo "$venv/bin/python"
