"""verl's own ``AgentLoopOutput``, taken from verl's published wheel.

verl's agent-loop module imports torch, ray, hydra and transformers at the top,
none of which install here without a GPU stack; the two classes a rollout
output is made of (``AgentLoopMetrics`` and ``AgentLoopOutput``) are plain
pydantic models. So their definitions are taken verbatim, by AST, from the
wheel's ``verl/experimental/agent_loop/agent_loop.py`` and executed with real
pydantic; nothing of them is rewritten here. What differs from importing verl:
``AgentLoopOutput.as_dict`` (which makes torch tensors) cannot be called.
"""

from __future__ import annotations

import ast
import os
import types
import zipfile
from typing import Any, Optional

MODULE = "verl.experimental.agent_loop.agent_loop"
CLASSES = ("AgentLoopMetrics", "AgentLoopOutput")


def wheel() -> str | None:
    """The verl wheel make client-test fetched (PRORL_VERL_WHEEL), if any."""
    return os.environ.get("PRORL_VERL_WHEEL") or None


def load(path: str) -> types.ModuleType:
    from pydantic import BaseModel, ConfigDict

    with zipfile.ZipFile(path) as z:
        src = z.read(MODULE.replace(".", "/") + ".py").decode()
    keep: list[ast.stmt] = [n for n in ast.parse(src).body if isinstance(n, ast.ClassDef) and n.name in CLASSES]
    if sorted(n.name for n in keep if isinstance(n, ast.ClassDef)) != sorted(CLASSES):
        raise RuntimeError(f"{path}: {MODULE} no longer defines {CLASSES}")
    mod = types.ModuleType(MODULE)
    ns: dict[str, Any] = mod.__dict__
    ns.update(BaseModel=BaseModel, ConfigDict=ConfigDict, Optional=Optional, Any=Any)
    exec(compile(ast.Module(body=keep, type_ignores=[]), f"{path}!{MODULE}", "exec"), ns)
    return mod
