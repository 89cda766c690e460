#!/usr/bin/env python3
"""A test domain that works in a sandbox through the host's services over
the go-plugin broker: setup writes a file, a tool runs commands, the score
reads what the agent left, and failures of domain code are contained."""

from dataclasses import dataclass
from typing import Annotated, Literal

import prorl_sdk as sdk


@dataclass
class Task:
    want: str
    crash: Literal["", "episode", "score", "tool"] = ""


env = sdk.Env[None, Task, None]("sandboxtest", "0.0.1", task=Task)


@env.setup
def setup(r: sdk.Rollout[None, Task, None]) -> None:
    r.sandboxes.write_file(r.sandbox_id, "goal.txt", r.task.want.encode())
    r.log.info("setup done", want=r.task.want)


@env.tool
def sh(r: sdk.Rollout[None, Task, None], command: Annotated[str, "A shell command."], timeout_ms: int = 10000) -> str:
    """Run a shell command in the sandbox."""
    if r.task.crash == "tool":
        raise sdk.DomainError(sdk.SANDBOX_FAILED, "the sandbox is gone")
    res = r.sandboxes.exec(r.sandbox_id, ["sh", "-c", command], timeout_ms=timeout_ms)
    return f"exit {res.exit_code}\n{res.stdout.decode()}{res.stderr.decode()}"


@env.episode
def episode(r: sdk.Rollout[None, Task, None]) -> sdk.Episode:
    if r.task.crash == "episode":
        raise RuntimeError("boom")
    return sdk.Episode([sdk.Message("user", "Copy goal.txt to done.txt.")], sandbox=sdk.SandboxSpec())


@env.score
def score(r: sdk.Rollout[None, Task, None], req: sdk.EvaluateRequest) -> sdk.Score:
    if r.task.crash == "score":
        return 1 / 0  # type: ignore[return-value]
    names = [e.name for e in r.sandboxes.list_dir(r.sandbox_id, ".")]
    done = "done.txt" in names and r.sandboxes.read_file(r.sandbox_id, "done.txt").strip() == r.task.want.encode()
    return sdk.Score(sdk.flag(done), resolved=done, info={"files": sorted(names)})


if __name__ == "__main__":
    sdk.serve(env)
