#!/usr/bin/env bash
# Regenerates sdk/schema/testdata/validate.json: each case's verdict from the
# reference validator, Python's jsonschema (Draft 2020-12), pinned.
set -euo pipefail
cd "$(dirname "$0")/../.."
venv="$HOME/.cache/prorl/venv-schema"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check jsonschema==4.26.0 referencing==0.37.0 \
	jsonschema-specifications==2025.9.1 rpds-py==2026.9.1 attrs==26.1.0
"$venv/bin/python" scripts/schema/golden.py >sdk/schema/testdata/validate.json
