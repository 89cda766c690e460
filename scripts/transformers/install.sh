#!/usr/bin/env bash
# Installs Hugging Face transformers and tokenizers (PyPI, every package
# pinned; no PyTorch, nothing fetched from the Hub) into a venv under
# ~/.cache/prorl/venv-transformers; prints the venv's python. Idempotent.
# The reference for chat templates (transformers' own Jinja2 environment and
# its template selection) and for tokenizers; and mlx-lm's tool-call
# parsers (pure Python, loaded from their files: mlx itself is not
# installed) for the tool-call formats; sentencepiece for SentencePiece
# models, with Mistral's .model files from mistral-common's data (the
# package itself is never imported).
exec bash "$(dirname "$0")/../pinned-venv.sh" "${TRANSFORMERS_VENV:-$HOME/.cache/prorl/venv-transformers}" --no-deps \
  transformers==5.23.0 tokenizers==0.23.3 jinja2==3.1.6 markupsafe==3.0.4 huggingface_hub==2.4.0 numpy==2.4.6 \
  packaging==26.3 pyyaml==6.0.4 regex==2026.11.19 safetensors==0.8.0 tqdm==4.70.1 filelock==4.2.12 fsspec==2026.9.0 \
  hf-xet==1.8.0 typer==0.29.2 click==8.5.1 rich==15.0.0 shellingham==1.5.4 typing_extensions==4.16.0 \
  annotated-doc==0.0.7 annotated-types==0.8.0 anyio==4.16.0 h11==0.16.0 httpcore2==2.16.2 httpx2==2.16.2 idna==3.20 \
  markdown-it-py==4.3.0 mdurl==0.1.2 pydantic==2.14.4 pydantic_core==2.50.5 pygments==2.21.0 truststore==0.10.5 \
  typing-inspection==0.4.5 mlx-lm==0.32.2 openai-harmony==0.0.8 sentencepiece==0.2.3 protobuf==7.36.2 mistral-common==1.13.1
