#!/usr/bin/env bash
# A pinned venv with a package of this checkout pip-installed into it, as a
# user would (not editable, so tests import what pip installed).
# Usage: pip-venv.sh VENV REQUIREMENTS PACKAGE_DIR. Prints the venv's python.
# Idempotent: the requirements are installed once per change of the file;
# the package is reinstalled each run.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=$1 REQ=$2 PKG=$3
# Test packages run in parallel and several install the same venv: one at
# a time (on a new machine two creating it at once broke it).
mkdir -p "$(dirname "$VENV")"
exec 9>"$VENV.lock"
flock 9
stamp="$VENV/.prorl-installed"
if ! cmp -s "$REQ" "$stamp"; then
  python3 -m venv "$VENV" >/dev/null 2>&1 || { rm -rf "$VENV"; python3 -m venv "$VENV"; }
  "$VENV/bin/pip" install -q --disable-pip-version-check -r "$REQ" >&2
  cp "$REQ" "$stamp"
fi
"$VENV/bin/pip" install -q --disable-pip-version-check --no-deps --no-build-isolation --force-reinstall "./$PKG" >&2
rm -rf "$PKG/build" "$PKG"/src/*.egg-info
echo "$VENV/bin/python"
