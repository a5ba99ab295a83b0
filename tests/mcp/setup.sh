#!/usr/bin/env bash
# Creates the Python environment the MCP tests run their servers from: the pinned
# mcp-server-time (a real server from PyPI) and the `mcp` SDK (for tests/mcp/flaky_server.py).
# It lives under /opt, which the sandbox's Landlock policy lets every process read and run
# (policies/landlock/default.json), so the servers run inside the sandbox unchanged.
# Idempotent: an environment holding the pinned versions is kept.
#   venv: $CORDON_MCP_VENV, else /opt/cordon-tests/mcp-venv. Prints the venv's python.
set -euo pipefail
TIME_VERSION=2026.10.19
MCP_VERSION=2.3.0
venv="${CORDON_MCP_VENV:-/opt/cordon-tests/mcp-venv}"
# The system interpreter: the venv links to it, and the sandbox sees /usr (a pyenv or
# other interpreter under a home directory would be invisible there).
python="${CORDON_MCP_PYTHON:-/usr/bin/python3}"
check="import importlib.metadata as m, sys; sys.exit(m.version('mcp-server-time') != '$TIME_VERSION' or m.version('mcp') != '$MCP_VERSION')"
if [ -x "$venv/bin/python" ] && [ "$(readlink -f "$venv/bin/python")" = "$(readlink -f "$python")" ] &&
  "$venv/bin/python" -c "$check" 2>/dev/null; then
  echo "$venv/bin/python"
  exit 0
fi
rm -rf "$venv"
mkdir -p "$(dirname "$venv")"
"$python" -m venv "$venv" >&2
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
  "mcp-server-time==$TIME_VERSION" "mcp==$MCP_VERSION" >&2
echo "$venv/bin/python"
