#!/usr/bin/env python3
"""A math domain scored by Hugging Face's Math-Verify (PyPI: math-verify):
the model reasons and answers; the reward is Math-Verify's verdict on the
answer against the row's ground truth. ProRL/verl rows work as they are.

Math-Verify bounds its work with SIGALRM, which only the main thread of a
process may use, and sympy can run away on a hostile answer: grading runs in
worker processes (spawned, not forked from a process running gRPC threads),
each grade in a worker's main thread, with a deadline on top."""

import multiprocessing
import threading
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Annotated, Any

from math_verify import parse, verify

import prorl_sdk as sdk


@dataclass
class Config:
    max_turns: Annotated[int, sdk.Field("Turns per episode.", minimum=1)] = 4
    timeout_seconds: Annotated[int, sdk.Field("Math-Verify's parsing and verification timeout.", minimum=1)] = 5


@dataclass
class Problem:
    question: str
    answer: str


def problem(row: Any) -> Problem:
    """A {question, answer} row, or a verl row (prompt, reward_model.ground_truth)."""
    if not isinstance(row, dict):
        raise sdk.InvalidTask("task", "a task is a JSON object")
    q, a = row.get("question"), row.get("answer")
    if q is None and isinstance(row.get("prompt"), list) and row["prompt"]:
        q = row["prompt"][-1].get("content") if isinstance(row["prompt"][-1], dict) else None
    if a is None and isinstance(row.get("reward_model"), dict):
        a = row["reward_model"].get("ground_truth")
    if not isinstance(q, str) or not q.strip():
        raise sdk.InvalidTask("question", "missing (or prompt[-1].content of a verl row)")
    if not isinstance(a, (str, int, float)) or isinstance(a, bool) or str(a).strip() == "":
        raise sdk.InvalidTask("answer", "missing (or reward_model.ground_truth of a verl row)")
    return Problem(q, str(a))


env = sdk.Env[Config, Problem, None](
    "mathverify",
    "0.1.0",
    description="Math answers graded by Math-Verify.",
    data_sources=["mathverify"],
    config=Config(),
    task=problem,
    tools=[sdk.finish],
)


@env.episode
def episode(r: sdk.Rollout[Config, Problem, None]) -> sdk.Episode:
    return sdk.Episode(
        sdk.chat("Solve the problem. Put the final answer in \\boxed{}.", r.task.question), limits=sdk.Limits(max_turns=r.config.max_turns)
    )


def grade(answer: str, response: str, t: int) -> tuple[bool, list[str]]:
    """Math-Verify's verdict and what it extracted (runs in a worker)."""
    gold = parse(answer if "\\boxed" in answer else "$" + answer + "$", parsing_timeout=t)
    pred = parse(response, parsing_timeout=t)
    return bool(pred) and verify(gold, pred, timeout_seconds=t), [str(p) for p in pred]


_pool: list[ProcessPoolExecutor] = []
_lock = threading.Lock()


def pool() -> ProcessPoolExecutor:
    with _lock:
        if not _pool:
            _pool.append(ProcessPoolExecutor(max_workers=2, mp_context=multiprocessing.get_context("spawn")))
        return _pool[0]


@env.score
def score(r: sdk.Rollout[Config, Problem, None], req: sdk.EvaluateRequest) -> sdk.Score:
    t = r.config.timeout_seconds
    try:  # the deadline covers a worker's first start (importing sympy) too
        right, extracted = pool().submit(grade, r.task.answer, req.response(), t).result(timeout=4 * t + 30)
    except FutureTimeout as e:
        raise sdk.DomainError(sdk.EVAL_FAILED, f"Math-Verify did not answer in {4 * t + 30} s") from e
    return sdk.Score(sdk.flag(right), resolved=right, info={"extracted": extracted}, metrics={"extracted": sdk.flag(bool(extracted))})


if __name__ == "__main__":
    sdk.serve(env)
