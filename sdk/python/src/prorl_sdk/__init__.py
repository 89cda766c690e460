"""prorl's Python SDK: write a task domain as a prorl plugin in Python.

A domain is an ``Env`` (config, task type, per-rollout state, typed tools,
episode and score functions) passed to ``serve`` from an executable script;
the prorl host starts it like a Go plugin (hashicorp/go-plugin over gRPC,
mutual TLS) and the same conformance suite (Go's sdktest) checks it.
"""

from .env import Command, Env, Rollout, Tool, ToolResult, UsageError, finish, tool
from .log import Logger
from .plugin import describe, serve
from .sandboxes import DirEntry, ExecResult, Sandboxes
from .schema import Field, SchemaError
from .types import (
    EVAL_FAILED,
    INTERNAL,
    INVALID_CONFIG,
    INVALID_TASK,
    SANDBOX_FAILED,
    TOOL_ERROR,
    DomainError,
    Episode,
    EvaluateRequest,
    InvalidTask,
    Limits,
    Message,
    SandboxSpec,
    Score,
    ToolCall,
    chat,
    flag,
)

__all__ = [
    "EVAL_FAILED",
    "INTERNAL",
    "INVALID_CONFIG",
    "INVALID_TASK",
    "SANDBOX_FAILED",
    "TOOL_ERROR",
    "Command",
    "DirEntry",
    "DomainError",
    "Env",
    "Episode",
    "EvaluateRequest",
    "ExecResult",
    "Field",
    "InvalidTask",
    "Limits",
    "Logger",
    "Message",
    "Rollout",
    "SandboxSpec",
    "Sandboxes",
    "SchemaError",
    "Score",
    "Tool",
    "ToolCall",
    "ToolResult",
    "UsageError",
    "chat",
    "describe",
    "finish",
    "flag",
    "serve",
    "tool",
]
