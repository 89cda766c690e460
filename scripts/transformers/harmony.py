"""Parse GPT-OSS completions with openai-harmony (OpenAI's own parser).

Reads JSON lines {"text": str, "models_dir": str} and writes one JSON line
per input: {"messages": [{"channel", "recipient", "text"}]} or {"error": str}.
harmony needs o200k_base.tiktoken, which it would download; it is rebuilt
offline from the GPT-OSS tokenizer.json (make models) and checked against
the published file's sha256, so it is the same file.
"""

import base64
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from refio import serve

O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
CACHE = Path.home() / ".cache" / "prorl" / "tiktoken"


def _byte_decoder() -> dict[str, int]:
    # GPT-2's byte-level alphabet, as tokenizer.json stores the pieces.
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs, strict=True)}


def ensure_o200k(models_dir: str) -> None:
    path = CACHE / "o200k_base.tiktoken"
    if path.exists() and hashlib.sha256(path.read_bytes()).hexdigest() == O200K_SHA256:
        return
    vocab = json.loads((Path(models_dir) / "gptoss" / "tokenizer.json").read_text())["model"]["vocab"]
    dec = _byte_decoder()
    lines = []
    for piece, rank in sorted(vocab.items(), key=lambda kv: kv[1]):
        if rank < 199998:
            lines.append(base64.b64encode(bytes(dec[c] for c in piece)).decode() + f" {rank}\n")
    data = "".join(lines).encode()
    if hashlib.sha256(data).hexdigest() != O200K_SHA256:
        raise RuntimeError("the rebuilt o200k_base.tiktoken differs from the published one")
    CACHE.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


_enc: list[Any] = []


def handle(case: dict[str, Any]) -> dict[str, Any]:
    if not _enc:
        ensure_o200k(case["models_dir"])
        os.environ["TIKTOKEN_ENCODINGS_BASE"] = str(CACHE)
        from openai_harmony import HarmonyEncodingName, Role, load_harmony_encoding

        _enc.extend([load_harmony_encoding(HarmonyEncodingName.HARMONY_GPT_OSS), Role.ASSISTANT])
    enc, role = _enc
    msgs = enc.parse_messages_from_completion_tokens(enc.encode(case["text"], allowed_special="all"), role)
    return {
        "messages": [{"channel": m.channel or "", "recipient": m.recipient or "", "text": "".join(c.text for c in m.content)} for m in msgs]
    }


if __name__ == "__main__":
    serve(handle)
