"""Hugging Face's Rust tokenizers' encode speed on one thread, for make bench.

Usage: encode_speed.py TOKENIZER_JSON TEXT_FILE; prints {"mb_per_s": x}:
the whole file encoded as one string (no special tokens) repeatedly for at
least two seconds after a warm-up, as our encoder is measured.
"""

import json
import os
import sys
import time

os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

from tokenizers import Tokenizer  # noqa: E402


def main() -> None:
    tok = Tokenizer.from_file(sys.argv[1])
    with open(sys.argv[2], encoding="utf-8") as f:
        text = f.read()
    tok.encode(text, add_special_tokens=False)
    runs, t0 = 0, time.perf_counter()
    while runs < 3 or time.perf_counter() - t0 < 2:
        tok.encode(text, add_special_tokens=False)
        runs += 1
    mb = len(text.encode()) * runs / (time.perf_counter() - t0) / 1e6
    print(json.dumps({"mb_per_s": mb}))


if __name__ == "__main__":
    main()
