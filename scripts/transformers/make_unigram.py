"""Builds the small Unigram test models with Hugging Face's tokenizers.

Usage: make_unigram.py CORPUS OUT_DIR. Writes OUT_DIR/plain/tokenizer.json
(a 400-piece SentencePiece-style Unigram model trained on CORPUS: Nmt, NFKC,
space-run normalizers, Metaspace) and OUT_DIR/bytefallback/tokenizer.json
(the same with the 256 <0xXX> pieces and byte_fallback on). Deterministic
for a given corpus and tokenizers version.
"""

import json
import sys
from pathlib import Path

from tokenizers import SentencePieceUnigramTokenizer


def main() -> None:
    corpus, out = sys.argv[1], Path(sys.argv[2])
    tok = SentencePieceUnigramTokenizer()
    tok.train([corpus], vocab_size=400, special_tokens=["<unk>", "<s>", "</s>"], unk_token="<unk>", show_progress=False)
    (out / "plain").mkdir(parents=True, exist_ok=True)
    tok.save(str(out / "plain" / "tokenizer.json"))
    data = json.loads((out / "plain" / "tokenizer.json").read_text())
    low = min(score for _, score in data["model"]["vocab"])
    data["model"]["vocab"] += [[f"<0x{b:02X}>", low - 1.0] for b in range(256)]
    data["model"]["byte_fallback"] = True
    (out / "bytefallback").mkdir(parents=True, exist_ok=True)
    (out / "bytefallback" / "tokenizer.json").write_text(json.dumps(data, ensure_ascii=False))


if __name__ == "__main__":
    main()
