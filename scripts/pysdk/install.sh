#!/usr/bin/env bash
# The Python SDK's venv (~/.cache/prorl/venv-pysdk): pinned runtime, code
# generator, test tools and the examples' libraries, then the SDK itself
# pip-installed from this checkout, as an author would. Prints the venv's python.
exec bash "$(dirname "$0")/../pip-venv.sh" "${PYSDK_VENV:-$HOME/.cache/prorl/venv-pysdk}" scripts/pysdk/requirements.txt sdk/python
