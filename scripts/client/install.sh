#!/usr/bin/env bash
# The Python client's test venv (~/.cache/prorl/venv-client): pinned test
# tools, then the client itself pip-installed from this checkout.
# Prints the venv's python.
exec bash "$(dirname "$0")/../pip-venv.sh" "${CLIENT_VENV:-$HOME/.cache/prorl/venv-client}" scripts/client/requirements.txt clients/python
