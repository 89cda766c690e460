"""Render chat templates exactly as transformers does, for differential tests.

Reads JSON lines and writes one JSON line per input, {"text": str} or
{"error": str}. An input is either
  {"template": str, "context": object}: the template compiled by
  transformers' own _compile_jinja_template and rendered with the context;
or
  {"model_dir": str, "messages": [...], "tools": [...] | null,
   "chat_template": str | null, "add_generation_prompt": bool}:
  AutoTokenizer.from_pretrained(model_dir).apply_chat_template(...,
  tokenize=False), which also chooses among named templates.
"""

import os
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

from refio import serve  # noqa: E402
from transformers import AutoTokenizer  # noqa: E402
from transformers.utils.chat_template_utils import _compile_jinja_template  # noqa: E402

_tokenizers: dict[str, Any] = {}


def render(case: dict[str, Any]) -> str:
    if "template" in case:
        return str(_compile_jinja_template(case["template"]).render(**case["context"]))
    d = case["model_dir"]
    if d not in _tokenizers:
        _tokenizers[d] = AutoTokenizer.from_pretrained(d)
    out = _tokenizers[d].apply_chat_template(
        case["messages"],
        tools=case.get("tools"),
        chat_template=case.get("chat_template"),
        add_generation_prompt=case.get("add_generation_prompt", False),
        tokenize=False,
    )
    return str(out)


if __name__ == "__main__":
    serve(lambda case: {"text": render(case)})
