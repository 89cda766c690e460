"""Parse tool calls with mlx-lm's parsers (derived from vLLM's), for tests.

Reads JSON lines {"format": str, "text": str, "tools": [...] | null} and
writes one JSON line per input: {"calls": [{"name", "arguments"}]} or
{"error": str}. Like mlx-lm's server, each span from the format's start
marker to its end marker (or the end of the text) goes to the format
module's parse_tool_call.
"""

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

from refio import serve

MODULES = {"kimi_k2": "kimi_k2", "mistral": "mistral", "glm45": "glm47", "minimax_m2": "minimax_m2"}


def _module(name: str) -> ModuleType:
    # mlx_lm/__init__.py imports mlx (Apple silicon only); the parsers do not.
    spec = importlib.util.find_spec("mlx_lm")
    assert spec is not None and spec.submodule_search_locations
    path = Path(list(spec.submodule_search_locations)[0]) / "tool_parsers" / f"{name}.py"
    mspec = importlib.util.spec_from_file_location(f"tool_parsers_{name}", path)
    assert mspec is not None and mspec.loader is not None
    mod = importlib.util.module_from_spec(mspec)
    mspec.loader.exec_module(mod)
    return mod


def parse(mod: ModuleType, text: str, tools: Any) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []
    start, end = mod.tool_call_start, mod.tool_call_end
    pos = 0
    while (i := text.find(start, pos)) >= 0:
        j = text.find(end, i + len(start)) if end else -1
        seg = text[i + len(start) : j if j >= 0 else len(text)]
        pos = j + len(end) if j >= 0 else len(text)
        out = mod.parse_tool_call(seg, tools)
        for c in out if isinstance(out, list) else [out]:
            calls.append({"name": c["name"], "arguments": c["arguments"]})
    return calls


_mods: dict[str, ModuleType] = {}


def handle(case: dict[str, Any]) -> dict[str, Any]:
    fmt = case["format"]
    if fmt not in _mods:
        _mods[fmt] = _module(MODULES[fmt])
    return {"calls": parse(_mods[fmt], case["text"], case.get("tools"))}


if __name__ == "__main__":
    serve(handle)
