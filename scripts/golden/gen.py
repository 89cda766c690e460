"""Generates the tokenizer and chat-template goldens from the reference:
Hugging Face's transformers (apply_chat_template, its Jinja2 environment)
and Rust tokenizers, from PyPI (make transformers).

Usage: gen.py MODELS_DIR TESTDATA_DIR. Run by `make golden`.
"""

import json
import os
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

from transformers import AutoTokenizer  # noqa: E402
from transformers.utils.chat_template_utils import _compile_jinja_template  # noqa: E402


def mulberry32(seed: int):  # type: ignore[no-untyped-def]
    """The deterministic generator the corpus was drawn with (32-bit JS arithmetic)."""
    state = [seed]

    def imul(a: int, b: int) -> int:
        return ((a & 0xFFFFFFFF) * (b & 0xFFFFFFFF)) & 0xFFFFFFFF

    def nxt() -> float:
        state[0] = (state[0] + 0x6D2B79F5) & 0xFFFFFFFF
        s = state[0]
        t = imul(s ^ (s >> 15), 1 | s)
        t = ((t + imul(t ^ (t >> 7), 61 | t)) & 0xFFFFFFFF) ^ t
        return ((t ^ (t >> 14)) & 0xFFFFFFFF) / 4294967296

    return nxt


POOL = [
    "the",
    " the",
    "The",
    " quick",
    "brown",
    " fox",
    "'s",
    "'LL",
    " ",
    "  ",
    "   ",
    "\n",
    "\n\n",
    "\t",
    "\r\n",
    "0",
    "7",
    "42",
    "1234",
    "3.14",
    "-",
    "_",
    ".",
    ",",
    "!",
    "?",
    "...",
    "(",
    ")",
    "{",
    "}",
    "[",
    "]",
    "<",
    ">",
    "<|im_start|>",
    "<|im_end|>",
    "<think>",
    "</think>",
    "<tool_call>",
    "<|eot_id|>",
    "<|begin_of_text|>",
    "<｜User｜>",
    "<｜Assistant｜>",
    "é",
    "ü",
    "ß",
    "Σ",
    "я",
    "ש",
    "ع",
    "क",
    "中",
    "文",
    "の",
    "カ",
    "한",
    "😀",
    "👍🏽",
    "🇫🇷",
    "\u200b",
    "\u00a0",
    "\u3000",
    "e\u0301",
    "def ",
    "return",
    " x",
    "=",
    "==",
    "->",
    "=>",
    "//",
    "/*",
    "*/",
    '"',
    "'",
    "`",
    "$",
    "\\",
    "%",
    "&",
    "#",
    "@",
    "^",
    "|",
    "~",
    "ǅ",
    "Ⅷ",
    "½",
    "²",
    "𝔘",
    "\u0085",
    "ﬁ",
]

MODELS: dict[str, dict[str, Any]] = {
    "qwen3": {
        "templates": {"model": None, "qwen2.5": "qwen2.5.jinja", "qwen3-coder": "qwen3-coder.jinja"},
        "kwargs": [{}, {"enable_thinking": False}],
    },
    "llama3_1": {
        "templates": {"model": None, "llama3.1-tools": "llama3.1-tools.jinja"},
        "kwargs": [{}, {"date_string": "22 Nov 2026"}],
    },
    "deepseek_v3": {"templates": {"model": None}, "kwargs": [{}], "string_args": True},
}


# Models with token goldens only (no chat template goldens): the other byte-
# level families and the SentencePiece-style ones.
ENCODE_ONLY = ["gemma3", "llama2", "gemini", "gptoss", "gpt4o", "gpt35turbo", "llama3", "claude"]


def for_deepseek(msgs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """DeepSeek V3's template concatenates arguments as a string and expects
    null content on tool-calling turns."""
    out = []
    for m in msgs:
        if not m.get("tool_calls"):
            out.append(m)
            continue
        calls = [
            {
                **c,
                "function": {
                    **c["function"],
                    "arguments": json.dumps(c["function"]["arguments"], separators=(",", ":"), ensure_ascii=False),
                },
            }
            for c in m["tool_calls"]
        ]
        out.append({**m, "content": None if m.get("content") == "" else m.get("content"), "tool_calls": calls})
    return out


def write(path: Path, value: Any) -> None:
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False).replace('},{"', '},\n{"')
    path.write_text(text + "\n")


def main() -> None:
    models_dir, testdata = Path(sys.argv[1]), Path(sys.argv[2])

    def read(p: str) -> Any:
        return json.loads((testdata / p).read_text())

    texts, conversations, tool_sets = read("corpus/texts.json"), read("corpus/conversations.json"), read("corpus/tools.json")
    r = mulberry32(20261122)
    rand = []
    for _ in range(300):
        n = 1 + int(r() * 40)
        rand.append("".join(POOL[int(r() * len(POOL))] for _ in range(n)))
    for name, spec in MODELS.items():
        tok = AutoTokenizer.from_pretrained(str(models_dir / name))
        rust = tok.backend_tokenizer
        encode = [{"text": t, "ids": rust.encode(t, add_special_tokens=False).ids} for t in texts + rand]
        special = [{"text": t, "ids": rust.encode(t, add_special_tokens=True).ids} for t in texts[:5]]
        chat = []
        for tname, file in spec["templates"].items():
            template = (testdata / "templates" / file).read_text() if file else None
            for conv in conversations:
                messages = conv["messages"]
                if spec.get("string_args"):
                    messages = for_deepseek(messages)
                tools = tool_sets[conv["tools"]] if conv.get("tools") else None
                if tname == "llama3.1-tools" and any(len(m.get("tool_calls") or []) > 1 for m in messages):
                    continue
                for kwargs in spec["kwargs"]:
                    for gen in (False, True):
                        try:
                            text = tok.apply_chat_template(
                                messages, tools=tools, add_generation_prompt=gen, chat_template=template, tokenize=False, **kwargs
                            )
                        except Exception:  # noqa: BLE001
                            if not spec.get("string_args"):
                                raise
                            # transformers 5 drops None-valued keys from messages, and
                            # DeepSeek V3's template needs content None on tool-calling
                            # turns: render those in transformers' own Jinja2
                            # environment with the messages as given (as vLLM's
                            # DeepSeek setups and our null_content_with_tool_calls do).
                            text = _compile_jinja_template(template or tok.chat_template).render(
                                messages=messages, tools=tools, add_generation_prompt=gen, **tok.special_tokens_map, **kwargs
                            )
                        ids = rust.encode(text, add_special_tokens=False).ids
                        chat.append(
                            {
                                "template": tname,
                                "conversation": conv["name"],
                                "add_generation_prompt": gen,
                                "kwargs": kwargs,
                                "messages": messages,
                                "tools": tools,
                                "text": text,
                                "ids": ids,
                            }
                        )
        out = testdata / "golden" / name
        out.mkdir(parents=True, exist_ok=True)
        write(out / "encode.json", encode)
        write(out / "encode_special.json", special)
        write(out / "chat.json", chat)
        print(f"{name}: {len(encode)} encode cases, {len(chat)} chat cases")
    for name in ENCODE_ONLY:
        from tokenizers import Tokenizer

        rust = Tokenizer.from_file(str(models_dir / name / "tokenizer.json"))
        out = testdata / "golden" / name
        out.mkdir(parents=True, exist_ok=True)
        write(out / "encode.json", [{"text": t, "ids": rust.encode(t, add_special_tokens=False).ids} for t in texts + rand])
        write(out / "encode_special.json", [{"text": t, "ids": rust.encode(t, add_special_tokens=True).ids} for t in texts[:5]])
        print(f"{name}: {len(texts) + len(rand)} encode cases")


if __name__ == "__main__":
    main()
