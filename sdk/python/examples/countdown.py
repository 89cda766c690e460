#!/usr/bin/env python3
"""Countdown (TinyZero's task) as a prorl plugin in Python: reach the target
with the given numbers, each used once, and + - * / ( ); a calc tool."""

import ast
import operator
import re
import sys
from dataclasses import dataclass
from typing import Annotated

import prorl_sdk as sdk


@dataclass
class Config:
    max_turns: Annotated[int, sdk.Field("Turns per episode.", minimum=1)] = 6


@dataclass
class Task:
    nums: list[int]
    target: int

    def check(self) -> None:
        if not self.nums:
            raise sdk.InvalidTask("nums", "no numbers")


env = sdk.Env[Config, Task, None](
    "countdown",
    "0.1.0",
    description="Reach a target number with arithmetic.",
    data_sources=["countdown"],
    config=Config(),
    task=Task,
    tools=[sdk.finish],
)
OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}


def evaluate(expr: str) -> float:
    """+ - * / over integers with parentheses; anything else is refused."""

    def ev(n: ast.AST) -> float:
        if isinstance(n, ast.BinOp) and type(n.op) in OPS:
            return float(OPS[type(n.op)](ev(n.left), ev(n.right)))
        if isinstance(n, ast.Constant) and type(n.value) is int:
            return n.value
        raise ValueError(f"not allowed in {expr!r}: {ast.dump(n)[:40]}")

    return ev(ast.parse(expr, mode="eval").body)


@env.tool
def calc(r: sdk.Rollout[Config, Task, None], expression: Annotated[str, "An arithmetic expression, e.g. (3 + 5) * 2."]) -> str:
    """Evaluate an arithmetic expression."""
    return f"{evaluate(expression):g}"


@env.episode
def episode(r: sdk.Rollout[Config, Task, None]) -> sdk.Episode:
    q = (
        f"Using the numbers {r.task.nums}, each exactly once, and + - * / ( ), make {r.task.target}. "
        "Call finish with the equation in <answer></answer>, e.g. <answer>(1 + 2) * 3</answer>."
    )
    return sdk.Episode(sdk.chat("You are good at arithmetic.", q), limits=sdk.Limits(max_turns=r.config.max_turns))


@env.score
def score(r: sdk.Rollout[Config, Task, None], req: sdk.EvaluateRequest) -> sdk.Score:
    answers = re.findall(r"<answer>(.*?)</answer>", req.response(), re.S)
    eq = answers[-1].strip() if answers else ""
    try:
        value = evaluate(eq)
    except (ValueError, SyntaxError, ZeroDivisionError):
        value = None
    used = sorted(int(n) for n in re.findall(r"\d+", eq))
    right = value is not None and used == sorted(r.task.nums) and abs(value - r.task.target) < 1e-5
    return sdk.Score(sdk.flag(right), resolved=right, info={"equation": eq}, metrics={"format_ok": sdk.flag(bool(answers))})


@env.command("check-tasks", usage="< tasks.jsonl")
def check_tasks(args: list[str], config: Config | None) -> None:
    """Checks a task file before training: each row read as the domain reads
    it; the bad ones named, with their field."""
    if args:
        raise sdk.UsageError("takes no arguments: the tasks come on stdin, one JSON row a line")
    bad = total = 0
    for n, line in enumerate(sys.stdin, 1):
        if not line.strip():
            continue
        total += 1
        try:
            env.parse_task(line.encode())
        except sdk.DomainError as e:
            bad += 1
            print(f"line {n}: {e.field or 'task'}: {e.message}")
    turns = config.max_turns if config else Config().max_turns
    print(f"{total - bad} of {total} tasks ok (episodes of at most {turns} turns)")
    if bad:
        raise RuntimeError(f"{bad} bad tasks")


if __name__ == "__main__":
    sdk.serve(env)
