#!/usr/bin/env bash
# Installs SWE-bench's harness (PyPI swebench 4.1.0, the version whose spec
# table and eval scripts built the public sweb.eval.* images), the
# reference the SWE domain is tested against, with every dependency pinned
# in requirements.txt, into a venv under ~/.cache/prorl/venv-swebench;
# prints the venv's python. Idempotent. Regenerate the pins with
#   python3 -m venv /tmp/v && /tmp/v/bin/pip install swebench==4.1.0 && /tmp/v/bin/pip freeze > requirements.txt
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
VENV=${SWEBENCH_VENV:-$HOME/.cache/prorl/venv-swebench}
stamp="$VENV/.prorl-installed"
want=$(sha256sum "$here/requirements.txt" | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  python3 -m venv "$VENV" >/dev/null 2>&1 || { rm -rf "$VENV"; python3 -m venv "$VENV"; }
  "$VENV/bin/pip" install -q --disable-pip-version-check --no-deps -r "$here/requirements.txt" >&2
  echo "$want" > "$stamp"
fi
echo "$VENV/bin/python"
