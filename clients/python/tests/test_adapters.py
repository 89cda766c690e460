"""Adapters to trainers' rollout outputs, checked against the trainers'
classes where their packages can be had here (verl 0.9.1's ``AgentLoopOutput``,
from its wheel: see verl_ref) and otherwise their documented fields (slime's
``Sample``; slime is not on PyPI)."""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest
import verl_ref
from conftest import MATH, Host

from prorl_client import Client, Result, to_slime, to_verl

# verl/experimental/agent_loop/agent_loop.py (verl 0.9): required, then optional fields.
VERL_REQUIRED = {"prompt_ids", "response_ids", "response_mask", "metrics"}
VERL_FIELDS = VERL_REQUIRED | {
    "response_logprobs",
    "routed_experts",
    "multi_modal_data",
    "reward_score",
    "num_turns",
    "extra_fields",
    "mm_processor_kwargs",
}
VERL_METRICS = {"generate_sequences", "tool_calls", "compute_score", "num_preempted"}
# slime/utils/types.py Sample.
SLIME_FIELDS = {
    "group_index",
    "index",
    "prompt",
    "tokens",
    "response",
    "response_length",
    "label",
    "reward",
    "loss_mask",
    "status",
    "metadata",
    "multimodal_inputs",
    "multimodal_train_inputs",
    "weight_versions",
    "rollout_log_probs",
    "rollout_routed_experts",
    "remove_sample",
    "generate_function_path",
    "train_metadata",
    "non_generation_time",
}


FAILED: Result = {
    "id": "r-1",
    "group_id": "g",
    "sample_index": 0,
    "attempt": 1,
    "domain": "math",
    "status": "failed",
    "reward": 0.0,
    "resolved": False,
    "policy_version": 0,
    "turns": [],
    "messages": [],
    "tools": [],
    "submitted_at": "",
    "tokens": {"ids": [1, 2], "loss_mask": [0, 0], "logprobs": [0.0, 0.0], "prompt_len": 2},
    "timing": {"queued": 0, "init": 0, "run": 0, "eval": 0, "total": 0},
    "failure": {"stage": "run", "reason": "backend_unavailable"},
}


@pytest.fixture(scope="module")
def results(host: Host) -> list[Result]:
    with Client(host.url) as c:
        g = c.submit({"task": MATH, "n": 2, "max_turns": 4})
        rs = c.wait_groups([g], timeout=60)[g["group_id"]]
        c.ack(g["rollout_ids"])
        return rs


def generated_positions(r: Result) -> set[int]:
    """Where, in the whole sequence, the model's own tokens are (from the turns)."""
    pos: set[int] = set()
    at = 0
    for t in r["turns"]:
        at += len(t["prompt_delta_ids"])
        pos.update(range(at, at + len(t["response_ids"])))
        at += len(t["response_ids"])
    return pos


def test_verl(results: list[Result]) -> None:
    for r in results:
        v = to_verl(r)
        assert VERL_REQUIRED <= set(v) <= VERL_FIELDS
        assert set(v["metrics"]) <= VERL_METRICS
        n = r["tokens"]["prompt_len"]
        assert v["prompt_ids"] + v["response_ids"] == r["tokens"]["ids"]
        assert len(v["response_mask"]) == len(v["response_ids"]) == len(v["response_logprobs"])
        gen = generated_positions(r)
        assert [i + n in gen for i in range(len(v["response_mask"]))] == [m == 1 for m in v["response_mask"]]
        assert v["reward_score"] == r["reward"] and v["num_turns"] == len(r["messages"])


def test_slime(results: list[Result]) -> None:
    for i, r in enumerate(results):
        s = to_slime(r, group_index=7)
        assert set(s) <= SLIME_FIELDS
        assert s["tokens"] == r["tokens"]["ids"] and s["index"] == i and s["group_index"] == 7
        assert (
            s["response_length"]
            == len(s["loss_mask"])
            == len(s["rollout_log_probs"])
            == len(r["tokens"]["ids"]) - r["tokens"]["prompt_len"]
        )
        assert s["status"] == "completed" and s["reward"] == 1.0
        assert s["prompt"][-1]["role"] == "user"


def test_failed_rollout_has_no_reward() -> None:
    r = FAILED
    assert to_verl(r)["reward_score"] is None
    assert to_slime(r)["status"] == "aborted" and to_slime(r)["reward"] is None


def _have(mod: str) -> bool:
    try:
        return importlib.util.find_spec(mod) is not None
    except ModuleNotFoundError:
        return False


@pytest.fixture(scope="module")
def verl_module() -> Iterator[Any]:
    """verl 0.9.1's own AgentLoopOutput (see verl_ref), registered as verl's
    module so ``to_verl(as_class=True)`` builds it as it would inside verl."""
    path = verl_ref.wheel()
    if path is None:
        if os.environ.get("PRORL_REQUIRE_REFS"):
            pytest.fail("PRORL_VERL_WHEEL is not set (make client-test fetches verl's wheel)")
        pytest.skip("verl's wheel is not fetched (make client-test does)")
    mod = verl_ref.load(path)
    saved = sys.modules.get(verl_ref.MODULE)
    sys.modules[verl_ref.MODULE] = mod
    yield mod
    if saved is None:
        del sys.modules[verl_ref.MODULE]
    else:
        sys.modules[verl_ref.MODULE] = saved


def test_verl_class(results: list[Result], verl_module: Any) -> None:
    fields = set(verl_module.AgentLoopOutput.model_fields)
    metric_fields = set(verl_module.AgentLoopMetrics.model_fields)
    for r in results:
        plain = to_verl(r)
        # pydantic drops unknown keys silently, so a misspelt field is caught here.
        assert set(plain) <= fields and set(plain["metrics"]) <= metric_fields
        out = to_verl(r, as_class=True)
        assert isinstance(out, verl_module.AgentLoopOutput)
        assert out.model_dump(exclude_unset=True) == plain | {"metrics": out.metrics.model_dump(exclude_unset=True)}
        assert out.metrics.generate_sequences == plain["metrics"]["generate_sequences"]
        n = r["tokens"]["prompt_len"]
        assert out.prompt_ids == r["tokens"]["ids"][:n] and out.prompt_ids + out.response_ids == r["tokens"]["ids"]
        assert len(out.response_mask) == len(out.response_ids) == len(out.response_logprobs or [])
        assert out.reward_score == r["reward"] and out.num_turns == len(r["messages"])


def test_verl_class_rejects_bad_output(verl_module: Any) -> None:
    """The reference is strict enough to catch a wrong type (so the test above can fail)."""
    with pytest.raises(Exception, match="response_mask"):
        verl_module.AgentLoopOutput(prompt_ids=[1], response_ids=[2], response_mask=["x"], metrics={})


def test_failed_rollout_in_verl(verl_module: Any) -> None:
    out = to_verl(FAILED, as_class=True)
    assert out.reward_score is None and out.response_ids == []


@pytest.mark.skipif(not _have("slime.utils.types"), reason="slime (THUDM) is not on PyPI")
def test_slime_class(results: list[Result]) -> None:  # pragma: no cover
    out = to_slime(results[0], as_class=True)
    assert out.response_length == len(out.loss_mask)
