"""Encode and decode with Hugging Face's Rust tokenizers, for tests.

Reads JSON lines {"tokenizer": path, "text": str} and writes one JSON line
per input: {"ids": [...], "decoded": str} (no special tokens added, none
skipped) or {"error": str}.
"""

from typing import Any

from refio import serve
from tokenizers import Tokenizer

_toks: dict[str, Any] = {}


def encode(case: dict[str, Any]) -> dict[str, Any]:
    path = case["tokenizer"]
    if path not in _toks:
        _toks[path] = Tokenizer.from_file(path)
    ids = _toks[path].encode(case["text"], add_special_tokens=False).ids
    return {"ids": ids, "decoded": _toks[path].decode(ids, skip_special_tokens=False)}


if __name__ == "__main__":
    serve(encode)
