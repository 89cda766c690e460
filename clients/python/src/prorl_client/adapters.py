"""Turn prorl results into what trainers consume.

Each adapter returns plain data with exactly the trainer's field names; when
the trainer's package is importable the trainer's own class is built from it
(``to_verl(..., as_class=True)``), so a field it does not know fails there.

- verl: ``verl.experimental.agent_loop.agent_loop.AgentLoopOutput`` (what an
  agent loop's ``run`` returns).
- slime: ``slime.utils.types.Sample``.
"""

from __future__ import annotations

import importlib
import statistics
from collections.abc import Sequence
from typing import Any

from .types import Result


def _split(r: Result) -> tuple[list[int], list[int], list[int], list[float]]:
    t = r["tokens"]
    n = t["prompt_len"]
    return t["ids"][:n], t["ids"][n:], [int(m) for m in t["loss_mask"][n:]], t["logprobs"][n:]


def _scored(r: Result) -> bool:
    return r["status"] in ("completed", "truncated")


def to_verl(r: Result, *, as_class: bool = False) -> Any:
    """A result as verl's ``AgentLoopOutput``: the prompt ids, the response ids
    (generated and tool tokens), ``response_mask`` (1 for generated tokens),
    the response logprobs, the reward, turns and timing metrics."""
    prompt, response, mask, logprobs = _split(r)
    turns = r.get("turns") or []
    out: dict[str, Any] = {
        "prompt_ids": prompt,
        "response_ids": response,
        "response_mask": mask,
        "response_logprobs": logprobs,
        "reward_score": r["reward"] if _scored(r) else None,
        # verl counts chat turns of every role.
        "num_turns": len(r["messages"]),
        "metrics": {
            "generate_sequences": sum(t.get("generate_ms", 0.0) for t in turns) / 1000,
            "tool_calls": sum(t.get("tools_ms", 0.0) for t in turns) / 1000,
        },
        "extra_fields": {
            "rollout_id": r["id"],
            "group_id": r["group_id"],
            "status": r["status"],
            "policy_version": r["policy_version"],
            "turn_policy_versions": [t.get("policy_version") for t in turns],
        },
    }
    if as_class:
        mod = importlib.import_module("verl.experimental.agent_loop.agent_loop")
        return mod.AgentLoopOutput(**out)
    return out


def to_slime(r: Result, *, group_index: int | None = None, as_class: bool = False) -> Any:
    """A result as slime's ``Sample``: ``tokens`` is prompt + response,
    ``response_length``, ``loss_mask`` and ``rollout_log_probs`` cover the
    response; status is completed, truncated or aborted."""
    prompt, response, mask, logprobs = _split(r)
    status = {"completed": "completed", "truncated": "truncated"}.get(r["status"], "aborted")
    msgs = r["messages"]
    first = next((i for i, m in enumerate(msgs) if m["role"] == "assistant"), len(msgs))
    out: dict[str, Any] = {
        "group_index": group_index,
        "index": r["sample_index"],
        "prompt": [dict(m) for m in msgs[:first]],
        "tokens": prompt + response,
        "response": r.get("final_response", ""),
        "response_length": len(response),
        "reward": r["reward"] if _scored(r) else None,
        "loss_mask": mask,
        "rollout_log_probs": logprobs,
        "status": status,
        "metadata": {
            "rollout_id": r["id"],
            "group_id": r["group_id"],
            "policy_version": r["policy_version"],
            "domain": r["domain"],
        },
    }
    if as_class:
        mod = importlib.import_module("slime.utils.types")
        out["status"] = mod.Sample.Status(status)
        return mod.Sample(**out)
    return out


def group_advantages(rewards: Sequence[float], *, normalize_std: bool = True, eps: float = 1e-6) -> list[float]:
    """GRPO's advantages for one group: reward minus the group mean, divided by
    the group's standard deviation (population) unless ``normalize_std`` is off."""
    if not rewards:
        return []
    mean = statistics.fmean(rewards)
    if not normalize_std:
        return [x - mean for x in rewards]
    std = statistics.pstdev(rewards)
    return [(x - mean) / (std + eps) for x in rewards]
