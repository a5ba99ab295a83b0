#!/usr/bin/env bash
# Creates the Python virtual environment the Agent SDK test drives Cordon from, and
# installs the pinned claude-agent-sdk into it (from PyPI). Idempotent: an environment
# that already holds the pinned version is kept.
#   venv: $CORDON_SDK_VENV, else target/sdk-venv. Prints the venv's python on success.
set -euo pipefail
SDK_VERSION=0.2.189
root="$(cd "$(dirname "$0")/../.." && pwd)"
venv="${CORDON_SDK_VENV:-$root/target/sdk-venv}"
python="${CORDON_SDK_PYTHON:-python3}"

if [ -x "$venv/bin/python" ] &&
  "$venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('claude-agent-sdk') != '$SDK_VERSION')" 2>/dev/null; then
  echo "$venv/bin/python"
  exit 0
fi
rm -rf "$venv"
"$python" -m venv "$venv" >&2
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "claude-agent-sdk==$SDK_VERSION" >&2
echo "$venv/bin/python"
