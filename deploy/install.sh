#!/usr/bin/env bash
# Installs a Cordon team server on this host under systemd (run as root, after
# `cargo install --path orchestrator --root /usr/local` and
# `cargo install --path sandbox-agent --root /usr/local`):
#   - the `cordon` system user, in the docker group (the only user of the socket here);
#   - /var/lib/cordon (data, 0700) and /srv/cordon/workspaces (the workspace root);
#   - /etc/cordon/cordon.env for the model credentials (0600; fill in ANTHROPIC_API_KEY);
#   - the sandbox image cordon-minimal, built from the binaries beside cordon;
#   - deploy/cordon.service, enabled and started;
#   - a first tenant (default: "team") and its key, printed once as the last line.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tenant=${1:-team}
cordon=$(command -v cordon || echo /usr/local/bin/cordon)
[ -x "$cordon" ] || { echo "install.sh: cordon not found: cargo install --path orchestrator --root /usr/local" >&2; exit 1; }
[ -x "$(dirname "$cordon")/sandbox-agent" ] || { echo "install.sh: sandbox-agent not beside $cordon: cargo install --path sandbox-agent --root /usr/local" >&2; exit 1; }
[ "$cordon" = /usr/local/bin/cordon ] || ln -sf "$cordon" /usr/local/bin/cordon

getent group docker >/dev/null || { echo "install.sh: no docker group: install Docker first" >&2; exit 1; }
id cordon >/dev/null 2>&1 || useradd --system --home-dir /var/lib/cordon --shell /usr/sbin/nologin --groups docker cordon
install -d -m 0700 -o cordon -g cordon /var/lib/cordon
install -d -m 0750 -o cordon -g cordon /srv/cordon/workspaces
install -d -m 0755 /etc/cordon
[ -e /etc/cordon/cordon.env ] || install -m 0600 -o root -g root /dev/null /etc/cordon/cordon.env

# Images are built as the service user, with its own CORDON_HOME (the dev image's cache).
runuser -u cordon -- env CORDON_HOME=/var/lib/cordon "$cordon" images build minimal

install -m 0644 "$here/cordon.service" /etc/systemd/system/cordon.service
systemctl daemon-reload
systemctl enable --now cordon.service

if ! runuser -u cordon -- "$cordon" admin tenant create "$tenant" --data /var/lib/cordon 2>/dev/null; then
  echo "install.sh: tenant $tenant exists already; a new key for it follows" >&2
fi
runuser -u cordon -- "$cordon" admin key create --tenant "$tenant" --data /var/lib/cordon
