"""Env's decoding of config and tasks, tools and sessions, in-process."""

import json
from dataclasses import dataclass
from typing import Annotated

import pytest

import prorl_sdk as sdk


@dataclass
class Config:
    limit: Annotated[int, sdk.Field("Limit.", minimum=1)] = 2


@dataclass
class Task:
    n: int

    def check(self) -> None:
        if self.n < 0:
            raise ValueError("n must not be negative")


@dataclass
class State:
    calls: int = 0


def make() -> sdk.Env[Config, Task, State]:
    env = sdk.Env[Config, Task, State]("t", "0", config=Config(), task=Task, state=State, tools=[sdk.finish])

    @env.tool
    def count(r: sdk.Rollout[Config, Task, State], by: int = 1) -> str:
        """Count."""
        if r.state.calls >= r.config.limit:
            raise RuntimeError("limit reached")
        r.state.calls += by
        return str(r.state.calls)

    env.episode(lambda r: sdk.Episode(sdk.chat("s", "u")))
    env.score(lambda r, req: sdk.Score(float(r.state.calls == r.task.n)))
    return env


def test_config_over_defaults_and_refusals() -> None:
    env = make()
    env.configure(b"{}")
    env.prepare("a", b'{"n": 1}')
    assert env.session("a", "", sdk.Sandboxes(None)).config == Config(limit=2)
    env.configure(b'{"limit": 5}')
    env.prepare("b", b'{"n": 1}')
    assert env.session("b", "", sdk.Sandboxes(None)).config.limit == 5
    for bad, field in [(b'{"limit": 0}', "limit"), (b'{"limt": 3}', "limt"), (b'{"limit": "3"}', "limit")]:
        with pytest.raises(sdk.DomainError) as e:
            env.configure(bad)
        assert e.value.code == sdk.INVALID_CONFIG and e.value.field == field


@pytest.mark.parametrize(
    ("row", "field"),
    [(b"{}", "n"), (b'{"n": "1"}', "n"), (b'{"n": -1}', "task"), (b"[1]", "task"), (b"{nope", "task"), (b'{"n": 1.5}', "n")],
)
def test_bad_tasks_name_the_field(row: bytes, field: str) -> None:
    with pytest.raises(sdk.DomainError) as e:
        make().prepare("r", row)
    assert e.value.code == sdk.INVALID_TASK and e.value.field == field


def test_tasks_keep_extra_fields_out() -> None:
    env = make()
    env.prepare("r", json.dumps({"n": 2, "data_source": "t", "extra_info": {}}).encode())
    assert env.session("r", "", sdk.Sandboxes(None)).task == Task(2)


def test_state_is_per_rollout_and_released() -> None:
    env = make()
    env.prepare("a", b'{"n": 2}')
    env.prepare("b", b'{"n": 2}')
    tool = {t.name: t for t in env.tools}["count"]
    a = env.session("a", "", sdk.Sandboxes(None))
    assert [tool.call(a, {}).output for _ in range(3)] == ["1", "2", "Error: limit reached"]
    b = env.session("b", "", sdk.Sandboxes(None))
    assert tool.call(b, {"by": 2}).output == "2"
    assert tool.call(b, {"by": "2"}).is_error
    assert tool.call(b, {"bye": 2}).output.startswith("Error: invalid arguments: bye")
    assert env.evaluate(a, sdk.EvaluateRequest("", [], "finish", "")).reward == 1
    assert env.sessions() == 2
    env.release("a")
    env.release("a")
    assert env.sessions() == 1
    with pytest.raises(sdk.DomainError):
        env.session("a", "", sdk.Sandboxes(None))


def test_finish_ends_the_episode() -> None:
    env = make()
    env.prepare("a", b'{"n": 0}')
    r = env.session("a", "", sdk.Sandboxes(None))
    res = sdk.finish.call(r, {"message": "done", "task_completed": "true"})
    assert res.done and res.final_response == "done"
    assert sdk.finish.call(r, {}).is_error


def test_a_tool_needs_a_description() -> None:
    def nodoc(r: object) -> str:
        return ""

    with pytest.raises(sdk.SchemaError):
        sdk.tool(nodoc)


def test_response_falls_back_to_the_last_assistant_message() -> None:
    msgs = [sdk.Message("user", "q"), sdk.Message("assistant", "a1"), sdk.Message("tool", "t"), sdk.Message("assistant", "a2")]
    assert sdk.EvaluateRequest("", msgs, "stop", "").response() == "a2"
    assert sdk.EvaluateRequest("f", msgs, "finish", "").response() == "f"


def test_describe_matches_the_go_sdk_shape() -> None:
    d = sdk.describe(make())
    assert list(d) == ["name", "version", "config_schema", "api_versions", "tools"]
    assert [t["name"] for t in d["tools"]] == ["finish", "count"]


def test_stateless_env_keeps_nothing_and_rebuilds_from_the_task() -> None:
    env = sdk.Env[Config, Task, None]("s", "0", config=Config(), task=Task)
    env.episode(lambda r: sdk.Episode(sdk.chat("s", "u")))
    env.score(lambda r, req: sdk.Score(float(r.task.n)))
    env.prepare("a", b'{"n": 1}')
    assert env.stateless and env.sessions() == 0
    r = env.session("never-prepared", "", sdk.Sandboxes(None), b'{"n": 1}')
    assert env.evaluate(r, sdk.EvaluateRequest("", [], "finish", "")).reward == 1


@pytest.mark.parametrize(
    ("by_task", "state", "declared", "seen_id"),
    [(True, None, True, ""), (False, None, False, "r7"), (True, State, False, "r7")],
)
def test_episode_by_task(by_task: bool, state: type[State] | None, declared: bool, seen_id: str) -> None:
    env = sdk.Env[Config, Task, State | None]("s", "0", config=Config(), task=Task, state=state, episode_by_task=by_task)
    seen: list[str] = []

    def episode(r: sdk.Rollout[Config, Task, State | None]) -> sdk.Episode:
        seen.append(r.id)
        return sdk.Episode(sdk.chat("s", "u"))

    env.episode(episode)
    env.score(lambda r, req: sdk.Score(0.0))
    env.prepare("r7", b'{"n": 1}')
    assert env.task_prepare == declared
    assert seen == [seen_id]


def test_commands(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A plugin script's own commands run with the config table the host
    passes (decoded and checked as at start); usage lists them; a usage
    error exits 2, a bad config or a failure 1."""
    env = make()
    seen: list[Config | None] = []

    @env.command("check", usage="N...")
    def check(args: list[str], config: Config | None) -> None:
        seen.append(config)
        if not args:
            raise sdk.UsageError("give at least one N")
        if args == ["boom"]:
            raise RuntimeError("it broke")
        print(",".join(args))

    monkeypatch.setenv("PRORL_PLUGIN_CONFIG", '{"limit": 7}')
    assert sdk.plugin.run_command(env, ["check", "1", "2"]) == 0
    assert capsys.readouterr().out == "1,2\n" and seen == [Config(limit=7)]
    assert sdk.plugin.run_command(env, ["check"]) == 2
    assert "give at least one N" in capsys.readouterr().err
    assert sdk.plugin.run_command(env, ["check", "boom"]) == 1
    assert "t check: it broke" in capsys.readouterr().err
    monkeypatch.setenv("PRORL_PLUGIN_CONFIG", '{"limit": 0}')
    assert sdk.plugin.run_command(env, ["check", "1"]) == 1
    assert "limit" in capsys.readouterr().err
    assert sdk.plugin.run_command(env, ["nope"]) == 2
    assert "check N..." in capsys.readouterr().err
    with pytest.raises(ValueError):
        env.command("check")(check)
