"""The domain-facing types, the Python twins of the Go SDK's (sdk/types.go)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Failure codes, the host's fixed failure vocabulary.
INVALID_TASK = "invalid_task"
INVALID_CONFIG = "invalid_config"
TOOL_ERROR = "tool_error"
SANDBOX_FAILED = "sandbox_failed"
EVAL_FAILED = "eval_failed"
INTERNAL = "internal"


class DomainError(Exception):
    """A domain failure with a code from the failure vocabulary; it travels
    to the host as a diagnostic and fails the rollout with that code. Raised
    from a tool with code tool_error it is shown to the model instead."""

    def __init__(self, code: str, message: str, field: str = "") -> None:
        super().__init__(f"{code}: {field + ': ' if field else ''}{message}")
        self.code, self.message, self.field = code, message, field


def InvalidTask(field: str, message: str) -> DomainError:  # noqa: N802 - reads as the Go SDK's
    """A task the domain cannot run, naming the field at fault."""
    return DomainError(INVALID_TASK, message, field)


@dataclass
class ToolCall:
    name: str
    arguments: str = "{}"
    id: str = ""


@dataclass
class Message:
    """One chat message (OpenAI roles: system, user, assistant, tool)."""

    role: str
    content: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_call_id: str = ""
    name: str = ""


def chat(system: str, user: str) -> list[Message]:
    """The usual opening of an episode: a system and a user message."""
    return [Message("system", system), Message("user", user)]


@dataclass
class SandboxSpec:
    """A sandbox for the rollout; an empty image is the host's default image.

    ``env`` is the environment of every command in the sandbox, over the
    host's defaults and under a command's own ``env``; names are letters,
    digits and ``_``, not first a digit.
    """

    image: str = ""
    network: bool = False
    env: dict[str, str] = field(default_factory=dict)
    cpu_seconds: int = 0
    memory_bytes: int = 0
    max_processes: int = 0
    max_file_bytes: int = 0
    disk_bytes: int = 0
    seccomp_allow: list[str] = field(default_factory=list)
    writable: list[str] = field(default_factory=list)


@dataclass
class Limits:
    """Bounds of an episode; zero takes the request's or the host's value."""

    max_turns: int = 0
    max_tokens_per_turn: int = 0
    max_total_tokens: int = 0


@dataclass
class Episode:
    """Everything the host needs to run a rollout of a task."""

    messages: list[Message]
    # Tools this rollout may use, by name; None means every tool of the domain.
    tools: list[str] | None = None
    sandbox: SandboxSpec | None = None
    # A fresh sandbox for scoring, never the one the agent worked in.
    eval_sandbox: SandboxSpec | None = None
    limits: Limits = field(default_factory=Limits)
    task_id: str = ""
    chat_template_kwargs: dict[str, Any] | None = None


@dataclass
class Score:
    """A reward with its metrics; info (JSON) goes back to the trainer."""

    reward: float
    resolved: bool = False
    metrics: dict[str, float] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)


@dataclass
class EvaluateRequest:
    """What Score sees of a finished episode."""

    final_response: str
    messages: list[Message]
    # finish, stop, max_turns, context_overflow, evaluate.
    end_reason: str
    eval_sandbox_id: str

    def response(self) -> str:
        """The finish tool's message, else the last assistant message."""
        if self.final_response:
            return self.final_response
        for m in reversed(self.messages):
            if m.role == "assistant":
                return m.content
        return ""


def flag(b: bool) -> float:
    """A boolean as a 0/1 metric or reward."""
    return 1.0 if b else 0.0
