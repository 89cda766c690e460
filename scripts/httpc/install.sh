#!/usr/bin/env bash
# Installs uvicorn, the ASGI server vLLM and SGLang answer through, with both
# of its HTTP/1.1 implementations (h11, httptools), pinned, into a venv under
# ~/.cache/prorl/venv-uvicorn: the reference the lean backend client
# (core/httpc) is tested against. Prints the venv's python. Idempotent.
set -euo pipefail
VENV=${UVICORN_VENV:-$HOME/.cache/prorl/venv-uvicorn}
PKGS=(uvicorn==0.54.0 h11==0.16.0 httptools==0.9.0 click==8.5.1)
mkdir -p "$(dirname "$VENV")"
exec 9>"$VENV.lock"
flock 9
stamp="$VENV/.prorl-installed"
if [ "$(cat "$stamp" 2>/dev/null)" != "${PKGS[*]}" ]; then
  python3 -m venv "$VENV" >/dev/null 2>&1 || { rm -rf "$VENV"; python3 -m venv "$VENV"; }
  "$VENV/bin/pip" install -q --disable-pip-version-check "${PKGS[@]}" >&2
  echo "${PKGS[*]}" > "$stamp"
fi
echo "$VENV/bin/python"
