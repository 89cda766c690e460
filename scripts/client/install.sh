#!/usr/bin/env bash
# The Python client's test venv (~/.cache/prorl/venv-client): pinned test
# tools, then the client itself installed by pip from this checkout, as a
# user would (not editable, so the tests import what pip installed).
# Prints the venv's python. Idempotent; the client is reinstalled each run.
set -euo pipefail
cd "$(dirname "$0")/../.."
VENV=${CLIENT_VENV:-$HOME/.cache/prorl/venv-client}
REQ=scripts/client/requirements.txt
stamp="$VENV/.prorl-installed"
if ! cmp -s "$REQ" "$stamp"; then
  python3 -m venv "$VENV" >/dev/null 2>&1 || { rm -rf "$VENV"; python3 -m venv "$VENV"; }
  "$VENV/bin/pip" install -q --disable-pip-version-check -r "$REQ" >&2
  cp "$REQ" "$stamp"
fi
"$VENV/bin/pip" install -q --disable-pip-version-check --no-deps --no-build-isolation --force-reinstall ./clients/python >&2
rm -rf clients/python/build clients/python/src/*.egg-info
echo "$VENV/bin/python"
