#!/usr/bin/env bash
# Installs Math-Verify (Hugging Face's math grader, the reference the math
# reward is tested against) and its pinned dependencies into a venv under
# ~/.cache/prorl/venv-mathverify; prints the venv's python. Idempotent.
set -euo pipefail
VENV=${MATHVERIFY_VENV:-$HOME/.cache/prorl/venv-mathverify}
PKGS=(math-verify==0.9.0 latex2sympy2_extended==1.11.0 sympy==1.14.0 antlr4-python3-runtime==4.13.2 mpmath==1.3.0)
stamp="$VENV/.prorl-installed"
if [ "$(cat "$stamp" 2>/dev/null)" != "${PKGS[*]}" ]; then
  python3 -m venv "$VENV" >/dev/null 2>&1 || { rm -rf "$VENV"; python3 -m venv "$VENV"; }
  "$VENV/bin/pip" install -q --disable-pip-version-check "${PKGS[@]}" >&2
  echo "${PKGS[*]}" > "$stamp"
fi
echo "$VENV/bin/python"
