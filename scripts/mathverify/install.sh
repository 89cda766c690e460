#!/usr/bin/env bash
# Installs Math-Verify (Hugging Face's math grader, the reference the math
# reward is tested against) and its pinned dependencies into a venv under
# ~/.cache/prorl/venv-mathverify; prints the venv's python. Idempotent.
exec bash "$(dirname "$0")/../pinned-venv.sh" "${MATHVERIFY_VENV:-$HOME/.cache/prorl/venv-mathverify}" \
  math-verify==0.9.0 latex2sympy2_extended==1.11.0 sympy==1.14.0 antlr4-python3-runtime==4.13.2 mpmath==1.3.0
