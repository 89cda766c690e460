"""The JSON shapes of the prorl v1 API, as typed dicts (what the host sends, unchanged)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any, Literal, TypedDict

if sys.version_info >= (3, 11):
    from typing import NotRequired
else:  # pragma: no cover
    from typing_extensions import NotRequired

Status = Literal["queued", "running", "completed", "failed", "cancelled", "timeout", "truncated"]
# What a result is to a trainer: only a "trainable" one carries a reward to learn from.
SampleKind = Literal["trainable", "infrastructure", "cancelled", "invalid_task"]
FINISHED: frozenset[str] = frozenset({"completed", "failed", "cancelled", "timeout", "truncated"})


class Sampling(TypedDict, total=False):
    temperature: float
    top_p: float
    top_k: int
    max_tokens_per_turn: int
    max_total_tokens: int
    seed: int
    stop: list[str]
    strict_loop_detector: bool


class SubmitRequest(TypedDict, total=False):
    """One task as a group of ``n`` rollouts (POST /v1/rollouts)."""

    task: dict[str, Any]
    sampling: Sampling
    n: int
    max_turns: int
    timeout: str | float
    group_id: str
    idempotency_key: str
    metadata: dict[str, Any]
    priority: int
    expected_tokens: int
    early_stop_min_usable: int
    harness: Harness
    retry_infra: bool
    retry_budget: dict[str, int]
    retry_deadline: str | float
    incomplete_group: Literal["return", "drop"]
    max_staleness: int
    stale_mode: Literal["restart", "mark"]


class Harness(TypedDict, total=False):
    """An agent harness preset that runs the rollouts through the gateway."""

    name: str
    instruction: str
    workdir: str
    image: str


class SessionRequest(TypedDict, total=False):
    """A gateway session for an agent that runs elsewhere (POST /v1/sessions)."""

    task: dict[str, Any]
    sampling: Sampling
    max_turns: int
    timeout: str | float
    group_id: str
    metadata: dict[str, Any]


class Session(TypedDict):
    """Where the agent sends its calls: OpenAI and Anthropic clients take
    ``openai_base_url`` / ``anthropic_base_url`` with ``api_key``."""

    session_id: str
    group_id: str
    status: Literal["running", "starting"]
    api_key: str
    base_url: str
    openai_base_url: str
    anthropic_base_url: str
    messages: list[Message]
    tools: list[dict[str, Any]]


class SubmitResponse(TypedDict):
    group_id: str
    rollout_ids: list[str]


class Failure(TypedDict):
    stage: str
    reason: str
    message: NotRequired[str]


class Tokens(TypedDict):
    ids: list[int]
    loss_mask: list[int]
    logprobs: list[float]
    prompt_len: int


class FunctionCall(TypedDict):
    name: str
    arguments: str


class ToolCall(TypedDict):
    id: str
    type: str
    function: FunctionCall


class Message(TypedDict):
    role: str
    content: str
    reasoning_content: NotRequired[str]
    tool_calls: NotRequired[list[ToolCall]]
    tool_call_id: NotRequired[str]
    name: NotRequired[str]
    token_span: NotRequired[list[int]]


class PolicySpan(TypedDict):
    """Response tokens [start, end) generated under one policy version."""

    start: int
    end: int
    version: int


class Turn(TypedDict):
    index: int
    trace: NotRequired[int]
    prompt_delta_ids: list[int]
    response_ids: list[int]
    logprobs: list[float]
    finish_reason: str
    backend: str
    backends: NotRequired[list[str]]
    policy_version: int
    policy_spans: NotRequired[list[PolicySpan]]
    tool_calls: int
    generate_ms: float
    tools_ms: float
    overhead_ms: float


class Trace(TypedDict):
    """One exact token sequence of a gateway session (Polar's fields)."""

    prompt_ids: list[int]
    response_ids: list[int]
    loss_mask: list[int]
    response_logprobs: list[float]
    prompt_messages: list[Message]
    response_messages: list[Message]
    tools: list[dict[str, Any]]
    finish_reason: str
    calls: int


class Timing(TypedDict):
    queued: float
    init: float
    run: float
    eval: float
    total: float


class Staleness(TypedDict):
    """Policy versions from submission (or the attempt's start) to the first token, and from it to the finish."""

    in_queue: int
    in_flight: int


class Attempt(TypedDict):
    """An earlier attempt of a sample, ended by an infrastructure failure and run again."""

    attempt: int
    stage: str
    reason: str
    policy_version: int
    started_at: str
    ended_at: str
    generated_tokens: int
    message: NotRequired[str]


class Result(TypedDict):
    """A rollout's result (GET /v1/rollouts/{id}, /v1/results)."""

    id: str
    group_id: str
    sample_index: int
    attempt: int
    domain: str
    status: Status
    reward: float
    resolved: bool
    policy_version: int
    turns: list[Turn]
    tokens: Tokens
    messages: list[Message]
    tools: list[dict[str, Any]]
    timing: Timing
    submitted_at: str
    task_id: NotRequired[str]
    sample: NotRequired[SampleKind]
    mask_sample: NotRequired[bool]
    attempts: NotRequired[list[Attempt]]
    staleness: NotRequired[Staleness]
    stale: NotRequired[bool]
    stage: NotRequired[str]
    failure: NotRequired[Failure]
    metrics: NotRequired[dict[str, float]]
    info: NotRequired[Any]
    final_response: NotRequired[str]
    end_reason: NotRequired[str]
    metadata: NotRequired[Any]
    finished_at: NotRequired[str]
    seq: NotRequired[int]
    traces: NotRequired[list[Trace]]


class Evaluation(TypedDict, total=False):
    reward: float
    resolved: bool
    info: Any
    metrics: dict[str, float]


def usable(r: Result) -> bool:
    """Whether a result can be trained on: a trainable sample (not an infrastructure
    failure, a cancel or a refused task), its tokens and logprobs aligned, with
    tokens under the loss mask."""
    sample = r.get("sample") or ("trainable" if r["status"] in ("completed", "truncated") else "")
    return sample == "trainable" and not r.get("mask_sample", False) and any(m == 1 for m in r["tokens"]["loss_mask"])


def whole(group: Sequence[Result]) -> bool:
    """Whether a group came back whole: every sample usable (the host retries infrastructure
    failures within the request's budgets; a sample that still failed says why in ``failure``
    and ``attempts``)."""
    return len(group) > 0 and all(usable(r) for r in group)


def failures(group: Sequence[Result]) -> list[tuple[int, str, list[str]]]:
    """The samples that keep a group from being whole: (sample index, why it ended, each
    earlier attempt's reason)."""
    out = []
    for r in group:
        if usable(r):
            continue
        why = r["failure"]["reason"] if "failure" in r else r.get("sample", r["status"])
        out.append((r["sample_index"], why, [a["reason"] for a in r.get("attempts", [])]))
    return out
