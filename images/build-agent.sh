#!/usr/bin/env bash
# Builds the static sandbox-agent binary that every sandbox image carries.
# glibc static-pie: there is no musl target on these machines. The explicit --target is
# required, or proc-macros would be built with crt-static too and fail to load.
# Output: target/x86_64-unknown-linux-gnu/release/sandbox-agent
set -euo pipefail
cd "$(dirname "$0")/.."
RUSTFLAGS='-C target-feature=+crt-static' \
  cargo build --release --target x86_64-unknown-linux-gnu -p sandbox-agent -p escape-probe "$@"
bin=target/x86_64-unknown-linux-gnu/release/sandbox-agent
# A dynamic binary would not run in the FROM-scratch image: fail here, not at session start.
if file "$bin" 2>/dev/null | grep -q 'dynamically linked'; then
  echo "build-agent.sh: $bin is dynamically linked" >&2
  exit 1
fi
echo "$bin"
