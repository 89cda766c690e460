#!/usr/bin/env bash
# A venv of pinned PyPI packages, for a reference the tests run.
# Usage: pinned-venv.sh VENV PIP_INSTALL_ARGS... (package==version specs,
# --no-deps, -r FILE). Installed once per change of the arguments or of a
# requirements file they name; one install at a time (test packages run in
# parallel and several ask for the same venv). Prints the venv's python.
set -euo pipefail
VENV=$1
shift
mkdir -p "$(dirname "$VENV")"
exec 9>"$VENV.lock"
flock 9
stamp="$VENV/.prorl-installed"
want=$({
  printf '%s\n' "$@"
  for a in "$@"; do if [ -f "$a" ]; then cat "$a"; fi; done
} | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  python3 -m venv "$VENV" >/dev/null 2>&1 || { rm -rf "$VENV"; python3 -m venv "$VENV"; }
  "$VENV/bin/pip" install -q --disable-pip-version-check "$@" >&2
  echo "$want" > "$stamp"
fi
echo "$VENV/bin/python"
