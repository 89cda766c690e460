#!/usr/bin/env bash
# The random-weight Qwen3-architecture model the real vLLM serves here
# (make_model.py, on Qwen3's real tokenizer from the models reference), under
# ~/.cache/prorl/models/tiny-qwen3-vllm. Run by
# `python3 scripts/ref.py install vllm` with vLLM's python in PRORL_REF;
# remade when its inputs change.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
py=${PRORL_REF:?run through: python3 scripts/ref.py install vllm}
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
