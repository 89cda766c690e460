"""Env: a task domain from typed parts, the Python twin of the Go SDK's
sdk.Env. A config dataclass (its JSON Schema is what the host checks the
[plugins.NAME.config] table against), a task type (decoded from each task
row), the state one rollout keeps, tools as typed functions, and the
episode and score functions.

Sessions live in the plugin process: the host sends every call of a
rollout to the process that prepared it and fails the rollout if that
process restarts, so state needs no persistence; calls of one rollout never
overlap (the agent runs tools one at a time), so state needs no lock.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from . import schema
from .log import Logger
from .sandboxes import Sandboxes
from .types import (
    INTERNAL,
    INVALID_CONFIG,
    INVALID_TASK,
    TOOL_ERROR,
    DomainError,
    Episode,
    EvaluateRequest,
    Score,
)

C = TypeVar("C")
T = TypeVar("T")
S = TypeVar("S")


class Rollout(Generic[C, T, S]):
    """One rollout: its config, task and state (a fresh state at Prepare,
    dropped at Release), its sandbox once one runs, the host's services and
    a logger whose lines reach the host's log with the rollout id."""

    def __init__(self, id: str, config: C, task: T, state: S, log: Logger) -> None:
        self.id, self.config, self.task, self.state, self.log = id, config, task, state, log
        self.sandbox_id = ""
        self.sandboxes = Sandboxes(None)
        self._done: str | None = None

    def finish(self, answer: str) -> None:
        """Ends the episode after the current tool call with answer as the
        final response the score function sees."""
        self._done = answer


@dataclass
class ToolResult:
    output: str
    done: bool = False
    final_response: str = ""
    is_error: bool = False


@dataclass
class Tool:
    """A tool: its name, description, the JSON Schema of its arguments, and
    the function called with the rollout and the checked arguments."""

    name: str
    description: str
    parameters: dict[str, Any]
    fn: Callable[..., str]

    def call(self, r: Rollout[Any, Any, Any], args: Any) -> ToolResult:
        bad = schema.check(self.parameters, args)
        if bad is not None:
            field, msg = bad
            return ToolResult(f"Error: invalid arguments: {field + ': ' if field else ''}{msg}", is_error=True)
        try:
            out = self.fn(r, **args)
        except DomainError as e:
            if e.code != TOOL_ERROR:
                raise
            return ToolResult("Error: " + e.message, is_error=True)
        except Exception as e:  # noqa: BLE001 - a tool's failure is the model's observation
            return ToolResult(f"Error: {e}", is_error=True)
        res = ToolResult(str(out))
        if r._done is not None:
            res.done, res.final_response, r._done = True, r._done, None
        return res


def tool(fn: Callable[..., str] | None = None, *, name: str = "", description: str = "") -> Any:
    """Makes a tool of ``fn(r, **args) -> str``: the arguments' schema comes
    from its parameters after the rollout (``Annotated[str, "desc"]``,
    ``Literal``, defaults for optional ones), the description from its
    docstring. A raised exception is shown to the model as an error."""

    def make(f: Callable[..., str]) -> Tool:
        desc = description or inspect.getdoc(f) or ""
        if not desc:
            raise schema.SchemaError(f"tool {f.__name__} needs a description (a docstring)")
        return Tool(name or f.__name__, desc, schema.params_schema(f, skip=1), f)

    return make(fn) if fn is not None else make


def _finish(r: Rollout[Any, Any, Any], message: str, **_: Any) -> str:
    r.finish(message)
    return "Task finished."


# The standard finish tool (the Go SDK's tools.Finish): ends the episode with
# its message as the answer. OpenHands also sends task_completed: accepted.
finish = Tool(
    "finish",
    "Signals that the task is complete. Put the final answer in the message.",
    {
        "type": "object",
        "properties": {"message": {"type": "string", "description": "The final answer and a short summary."}},
        "required": ["message"],
    },
    _finish,
)


class UsageError(Exception):
    """A command's complaint about its arguments: the plugin exits 2."""


CommandFn = Callable[[list[str], C | None], None]


@dataclasses.dataclass(frozen=True)
class Command(Generic[C]):
    """An admin's subcommand of a plugin script (``Env.command``)."""

    name: str
    run: CommandFn[C]
    usage: str = ""


class Env(Generic[C, T, S]):
    """A task domain. ``config`` is a dataclass instance holding the
    defaults; ``task`` a dataclass (rows may carry other fields; a
    ``check()`` method refuses bad rows as invalid_task) or a function of the
    row; ``state`` makes one rollout's fresh state. ``episode_by_task``
    declares that the episode reads the task and config only (it is then
    built with an empty rollout id): the host prepares a group's task once
    (capability ``task_prepare``; never with ``state``)."""

    def __init__(
        self,
        name: str,
        version: str,
        *,
        description: str = "",
        data_sources: Sequence[str] = (),
        config: C | None = None,
        task: Callable[..., T],
        state: Callable[[], S] | None = None,
        tools: Sequence[Tool] = (),
        episode_by_task: bool = False,
    ) -> None:
        self.name, self.version, self.description = name, version, description
        self.data_sources = list(data_sources)
        self.tools: list[Tool] = list(tools)
        self._defaults = config
        if config is None:
            self.config_schema: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}
        elif dataclasses.is_dataclass(config) and not isinstance(config, type):
            self.config_schema = schema.dataclass_schema(type(config), optional=True)
        else:
            raise schema.SchemaError(f"{name}: config must be a dataclass instance (the defaults)")
        self._task = task
        self._task_schema: dict[str, Any] | None = None
        if isinstance(task, type) and dataclasses.is_dataclass(task):
            self._task_schema = schema.dataclass_schema(task, optional=False, closed=False)
        self._state = state
        self._episode_by_task = episode_by_task
        self._episode: Callable[[Rollout[C, T, S]], Episode] | None = None
        self._setup: Callable[[Rollout[C, T, S]], None] | None = None
        self._score: Callable[[Rollout[C, T, S], EvaluateRequest], Score] | None = None
        self._check_config: Callable[[C], None] | None = None
        self._cfg: C | None = config
        self._mu = threading.Lock()
        self._sessions: dict[str, Rollout[C, T, S]] = {}
        self.commands: dict[str, Command[C]] = {}
        self.log = Logger(name)

    # Decorators.
    def tool(self, fn: Callable[..., str] | None = None, *, name: str = "", description: str = "") -> Any:
        """``@env.tool``: adds a tool (see ``tool``)."""

        def add(f: Callable[..., str]) -> Callable[..., str]:
            self.tools.append(tool(f, name=name, description=description))
            return f

        return add(fn) if fn is not None else add

    def command(self, name: str, usage: str = "") -> Callable[[CommandFn[C]], CommandFn[C]]:
        """``@env.command("check", usage="--all")``: an admin's subcommand of
        the plugin (``prorl-host plugins exec NAME check --all`` runs the
        script as the host runs the plugin). It gets its arguments and the
        plugin's config table, decoded and checked as at start (None when
        the Env has no config); it reads ``sys.stdin`` and writes
        ``sys.stdout``. ``UsageError`` exits 2, any other exception 1."""

        def add(f: CommandFn[C]) -> CommandFn[C]:
            if name == "describe" or name in self.commands:
                raise ValueError(f"{self.name}: command {name!r} is taken")
            self.commands[name] = Command(name, f, usage)
            return f

        return add

    @property
    def config(self) -> C | None:
        """The configuration in force (the defaults until the host configures)."""
        with self._mu:
            return self._cfg

    def episode(self, fn: Callable[[Rollout[C, T, S]], Episode]) -> Callable[[Rollout[C, T, S]], Episode]:
        """``@env.episode``: turns a rollout's task into its episode (required)."""
        self._episode = fn
        return fn

    def setup(self, fn: Callable[[Rollout[C, T, S]], None]) -> Callable[[Rollout[C, T, S]], None]:
        """``@env.setup``: runs in the sandbox before the agent starts."""
        self._setup = fn
        return fn

    def score(self, fn: Callable[[Rollout[C, T, S], EvaluateRequest], Score]) -> Callable[[Rollout[C, T, S], EvaluateRequest], Score]:
        """``@env.score``: rewards a finished episode (required)."""
        self._score = fn
        return fn

    def check_config(self, fn: Callable[[C], None]) -> Callable[[C], None]:
        """``@env.check_config``: validates the config beyond its schema."""
        self._check_config = fn
        return fn

    # What the plugin server calls.
    def configure(self, raw: bytes) -> None:
        value = json.loads(raw or b"{}")
        bad = schema.check(self.config_schema, value)
        if bad is not None:
            raise DomainError(INVALID_CONFIG, f"{self.name} config: {bad[0]}: {bad[1]}" if bad[0] else bad[1], bad[0])
        cfg = self._defaults
        if cfg is not None and value:
            merged = {**dataclasses.asdict(cfg), **value}  # type: ignore[call-overload]
            cfg = schema.from_json(type(cfg), merged)
        if self._check_config is not None and cfg is not None:
            try:
                self._check_config(cfg)
            except DomainError:
                raise
            except Exception as e:
                raise DomainError(INVALID_CONFIG, f"{self.name} config: {e}") from e
        with self._mu:
            self._cfg = cfg

    def parse_task(self, raw: bytes) -> T:
        try:
            row = json.loads(raw)
        except ValueError as e:
            raise DomainError(INVALID_TASK, f"not valid JSON: {e}", "task") from e
        if self._task_schema is not None:
            bad = schema.check(self._task_schema, row)
            if bad is not None:
                raise DomainError(INVALID_TASK, bad[1], bad[0] or "task")
        try:
            t = schema.from_json(self._task, row) if isinstance(self._task, type) and self._task_schema is not None else self._task(row)
            check = getattr(t, "check", None)
            if callable(check):
                check()
        except DomainError:
            raise
        except Exception as e:
            raise DomainError(INVALID_TASK, str(e) or type(e).__name__, "task") from e
        return t

    def prepare(self, rollout_id: str, raw: bytes) -> Episode:
        if self._episode is None or self._score is None:
            raise DomainError(INTERNAL, f"{self.name}: the Env has no episode or score function")
        # What the host may reuse for other rollouts cannot name this one.
        r = self._new_rollout("" if self.task_prepare else rollout_id, raw)
        ep = self._episode(r)
        if not self.stateless:
            with self._mu:
                self._sessions[rollout_id] = r
        return ep

    def _new_rollout(self, rollout_id: str, raw: bytes) -> Rollout[C, T, S]:
        t = self.parse_task(raw)
        state = self._state() if self._state is not None else None
        return Rollout(rollout_id, self._cfg, t, state, self.log.with_fields(rollout=rollout_id))  # type: ignore[arg-type]

    @property
    def stateless(self) -> bool:
        """No state factory: a rollout is its config and task alone, rebuilt
        from the task each call carries; nothing is kept, the domain declares
        no per-rollout state and its rollouts survive a plugin restart."""
        return self._state is None

    def session(self, rollout_id: str, sandbox_id: str, sandboxes: Sandboxes, task: bytes = b"") -> Rollout[C, T, S]:
        """The prepared rollout, given the call's sandbox and services; a call for
        one this process did not prepare fails rather than running blank. A
        stateless Env rebuilds it from the call's task."""
        if self.stateless:
            fresh = self._new_rollout(rollout_id, task)
            fresh.sandbox_id, fresh.sandboxes = sandbox_id, sandboxes
            return fresh
        with self._mu:
            r = self._sessions.get(rollout_id)
        if r is None:
            raise DomainError(
                INTERNAL,
                f"no session for rollout {rollout_id} in this plugin process (not prepared here, or already released)",
            )
        r.sandbox_id, r.sandboxes = sandbox_id, sandboxes
        return r

    def run_setup(self, r: Rollout[C, T, S]) -> None:
        if self._setup is not None:
            self._setup(r)

    def evaluate(self, r: Rollout[C, T, S], req: EvaluateRequest) -> Score:
        assert self._score is not None
        return self._score(r, req)

    def release(self, rollout_id: str) -> None:
        with self._mu:
            self._sessions.pop(rollout_id, None)

    def sessions(self) -> int:
        """How many rollouts hold state now."""
        with self._mu:
            return len(self._sessions)

    @property
    def task_prepare(self) -> bool:
        """The episode depends on the task alone (capability task_prepare)."""
        return self._episode_by_task and self.stateless

    @property
    def has_setup(self) -> bool:
        return self._setup is not None
