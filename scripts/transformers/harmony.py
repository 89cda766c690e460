"""Parse and render GPT-OSS conversations with openai-harmony (OpenAI's own library).

Reads JSON lines and writes one JSON line per input, or {"error": str}:
- {"text": str, "models_dir": str}: the completion parsed,
  {"messages": [{"channel", "recipient", "text"}]};
- {"messages": [chat messages], "tools": [OpenAI tools], "reasoning_effort",
  "date", "add_generation_prompt", "models_dir"}: the conversation rendered,
  {"text": str, "ids": [...]}. Chat messages map to harmony messages as the
  Go renderer documents (core/tokenizer/harmony): the first system message
  becomes the developer message's instructions, reasoning_content the
  analysis channel, content final (commentary beside tool calls), a tool
  call a commentary message to functions.NAME, a tool result a message
  from functions.NAME.
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
# PRORL_TIKTOKEN_CACHE: another directory (a test of how the file is written).
CACHE = Path(os.environ.get("PRORL_TIKTOKEN_CACHE") or Path.home() / ".cache" / "prorl" / "tiktoken")


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
    # Written whole under another name, then renamed: several of these
    # processes (two test packages, two workers each) build it at once on a
    # fresh machine, and one loading the file while another truncated it to
    # write it read an empty vocabulary (a CI failure, hash e3b0c442...).
    tmp = CACHE / f".o200k_base.tiktoken.{os.getpid()}"
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)  # a write that failed leaves no part behind


_enc: list[Any] = []


def _load(models_dir: str) -> Any:
    if not _enc:
        ensure_o200k(models_dir)
        os.environ["TIKTOKEN_ENCODINGS_BASE"] = str(CACHE)
        from openai_harmony import HarmonyEncodingName, load_harmony_encoding

        _enc.append(load_harmony_encoding(HarmonyEncodingName.HARMONY_GPT_OSS))
    return _enc[0]


def render(case: dict[str, Any]) -> dict[str, Any]:
    import openai_harmony as h

    enc = _load(case["models_dir"])
    sysc = h.SystemContent.new().with_reasoning_effort(h.ReasoningEffort((case.get("reasoning_effort") or "medium").capitalize()))
    if case.get("date"):
        sysc = sysc.with_conversation_start_date(case["date"])
    msgs = case["messages"]
    out = [h.Message.from_role_and_content(h.Role.SYSTEM, sysc)]
    dev = h.DeveloperContent.new()
    has_dev = False
    if msgs and msgs[0]["role"] in ("system", "developer"):
        dev, has_dev, msgs = dev.with_instructions(msgs[0]["content"]), True, msgs[1:]
    if case.get("tools"):
        fns = [t["function"] for t in case["tools"]]
        descs = [h.ToolDescription.new(f["name"], f.get("description", ""), parameters=f.get("parameters")) for f in fns]
        dev, has_dev = dev.with_function_tools(descs), True
    if has_dev:
        out.append(h.Message.from_role_and_content(h.Role.DEVELOPER, dev))
    names: dict[str, str] = {}
    last = ""
    for m in msgs:
        if m["role"] == "user":
            out.append(h.Message.from_role_and_content(h.Role.USER, m["content"]))
        elif m["role"] == "assistant":
            if m.get("reasoning_content"):
                out.append(h.Message.from_role_and_content(h.Role.ASSISTANT, m["reasoning_content"]).with_channel("analysis"))
            calls = m.get("tool_calls") or []
            if m.get("content"):
                ch = "commentary" if calls else "final"
                out.append(h.Message.from_role_and_content(h.Role.ASSISTANT, m["content"]).with_channel(ch))
            for c in calls:
                fn = c["function"]
                msg = h.Message.from_role_and_content(h.Role.ASSISTANT, fn.get("arguments") or "{}")
                out.append(msg.with_channel("commentary").with_recipient("functions." + fn["name"]).with_content_type("<|constrain|>json"))
                names[c.get("id", "")] = last = fn["name"]
        elif m["role"] == "tool":
            name = m.get("name") or names.get(m.get("tool_call_id", "")) or last
            author = h.Author.new(h.Role.TOOL, "functions." + name)
            out.append(h.Message.from_author_and_content(author, m["content"]).with_channel("commentary").with_recipient("assistant"))
        else:
            raise ValueError(f"role {m['role']}")
    convo = h.Conversation.from_messages(out)
    if case.get("add_generation_prompt"):
        ids = enc.render_conversation_for_completion(convo, h.Role.ASSISTANT)
    else:
        ids = enc.render_conversation(convo)
    return {"text": enc.decode_utf8(ids), "ids": list(ids)}


def handle(case: dict[str, Any]) -> dict[str, Any]:
    if "messages" in case:
        return render(case)
    enc = _load(case["models_dir"])
    from openai_harmony import Role

    msgs = enc.parse_messages_from_completion_tokens(enc.encode(case["text"], allowed_special="all"), Role.ASSISTANT)
    return {
        "messages": [{"channel": m.channel or "", "recipient": m.recipient or "", "text": "".join(c.text for c in m.content)} for m in msgs]
    }


if __name__ == "__main__":
    serve(handle)
