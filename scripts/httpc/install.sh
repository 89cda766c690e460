#!/usr/bin/env bash
# Installs uvicorn, the ASGI server vLLM and SGLang answer through, with both
# of its HTTP/1.1 implementations (h11, httptools), pinned, into a venv under
# ~/.cache/prorl/venv-uvicorn: the reference the lean backend client
# (core/httpc) is tested against. Prints the venv's python. Idempotent.
exec bash "$(dirname "$0")/../pinned-venv.sh" "${UVICORN_VENV:-$HOME/.cache/prorl/venv-uvicorn}" \
  uvicorn==0.54.0 h11==0.16.0 httptools==0.9.0 click==8.5.1
