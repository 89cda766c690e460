#!/usr/bin/env bash
# The Python SDK's venv (~/.cache/prorl/venv-pysdk): pinned runtime, code
# generator, test tools and the examples' libraries, then the SDK itself
# installed by pip from this checkout as an author would (not editable, so
# plugins import what pip installed). Prints the venv's python. Idempotent;
# the SDK is reinstalled each run.
set -euo pipefail
cd "$(dirname "$0")/../.."
VENV=${PYSDK_VENV:-$HOME/.cache/prorl/venv-pysdk}
REQ=scripts/pysdk/requirements.txt
stamp="$VENV/.prorl-installed"
if ! cmp -s "$REQ" "$stamp"; then
  python3 -m venv "$VENV" >/dev/null 2>&1 || { rm -rf "$VENV"; python3 -m venv "$VENV"; }
  "$VENV/bin/pip" install -q --disable-pip-version-check -r "$REQ" >&2
  cp "$REQ" "$stamp"
fi
"$VENV/bin/pip" install -q --disable-pip-version-check --no-deps --no-build-isolation --force-reinstall ./sdk/python >&2
rm -rf sdk/python/build sdk/python/src/*.egg-info
echo "$VENV/bin/python"
