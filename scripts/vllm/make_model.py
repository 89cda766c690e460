"""Makes a random-weight model of Qwen3's architecture on Qwen3's tokenizer.

vLLM serves it on the CPU in the tests: small enough to load in a second,
with a head size (64) that vLLM's CPU attention supports. Its outputs are
meaningless; what the tests compare (token ids, logprobs, prefix-cache
hits) does not depend on them.

Usage: make_model.py TOKENIZER_DIR OUT_DIR
"""

import shutil
import sys
from pathlib import Path

import torch
from transformers import Qwen3Config, Qwen3ForCausalLM


def main(tokenizer_dir: Path, out: Path) -> None:
    cfg = Qwen3Config(
        vocab_size=151936,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=64,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        bos_token_id=151643,
        eos_token_id=151645,
    )
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(cfg).to(torch.bfloat16)
    model.save_pretrained(out, safe_serialization=True)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(tokenizer_dir / name, out / name)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
