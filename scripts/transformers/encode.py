"""Encode and decode with Hugging Face's Rust tokenizers, for tests.

Reads JSON lines {"tokenizer": path, "text": str} and writes one JSON line
per input: {"ids": [...], "decoded": str} (no special tokens added, none
skipped) or {"error": str}.
"""

import json
import sys
from typing import Any

from tokenizers import Tokenizer


def main() -> None:
    toks: dict[str, Any] = {}
    for line in sys.stdin:
        case = json.loads(line)
        try:
            path = case["tokenizer"]
            if path not in toks:
                toks[path] = Tokenizer.from_file(path)
            ids = toks[path].encode(case["text"], add_special_tokens=False).ids
            out: dict[str, Any] = {"ids": ids, "decoded": toks[path].decode(ids, skip_special_tokens=False)}
        except Exception as e:  # noqa: BLE001 - every failure is a result to compare
            out = {"error": f"{type(e).__name__}: {e}"}
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
