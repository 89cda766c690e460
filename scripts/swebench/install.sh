#!/usr/bin/env bash
# Installs SWE-bench's harness (PyPI swebench 4.1.0, the version whose spec
# table and eval scripts built the public sweb.eval.* images), the
# reference the SWE domain is tested against, with every dependency pinned
# in requirements.txt, into a venv under ~/.cache/prorl/venv-swebench;
# prints the venv's python. Idempotent. Regenerate the pins with
#   python3 -m venv /tmp/v && /tmp/v/bin/pip install swebench==4.1.0 && /tmp/v/bin/pip freeze > requirements.txt
here=$(cd "$(dirname "$0")" && pwd)
exec bash "$here/../pinned-venv.sh" "${SWEBENCH_VENV:-$HOME/.cache/prorl/venv-swebench}" --no-deps -r "$here/requirements.txt"
