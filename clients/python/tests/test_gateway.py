"""The LLM gateway driven by the official OpenAI and Anthropic SDKs.

Each test is an agent written against a provider's SDK, as a trainer-side
program would be: it opens a session on a real host, runs its own loop
through the gateway (non-streaming and streaming), and closes the session
for the math domain to score. The result's traces are checked token for
token against the inference simulator's own request log: every generated
span is exactly what the backend returned for exactly that prompt.
"""

from __future__ import annotations

import json
from typing import Any

import anthropic
import httpx
import openai
import pytest
from conftest import MATH, Host

MODEL = "any-model-name"  # harnesses name their own models; the session serves its policy


def open_session(host: Host, **body: Any) -> dict[str, Any]:
    r = httpx.post(f"{host.url}/v1/sessions", json=body, timeout=30)
    assert r.status_code == 201, r.text
    s: dict[str, Any] = r.json()
    assert s["status"] == "running"
    return s


def close_session(host: Host, sid: str, **body: Any) -> dict[str, Any]:
    r = httpx.post(f"{host.url}/v1/sessions/{sid}:close", json=body, timeout=60)
    assert r.status_code == 200, r.text
    res: dict[str, Any] = r.json()
    return res


def check_against_log(host: Host, result: dict[str, Any]) -> int:
    """Every loss-masked span of every trace is one generation the backend
    logged: its prompt is all the trace's tokens before it, its ids and
    logprobs are the backend's. Returns the number of generations seen."""
    log = [json.loads(line) for line in (host.dir / "sim-requests.jsonl").read_text().splitlines()]
    by_prompt = {tuple(e["request"]["prompt"]): e for e in log if e["path"] == "/v1/completions" and e["status"] == 200}
    seen = 0
    for t in result["traces"]:
        ids = t["prompt_ids"] + t["response_ids"]
        mask = [0] * len(t["prompt_ids"]) + t["loss_mask"]
        lps = [0.0] * len(t["prompt_ids"]) + t["response_logprobs"]
        assert len(t["response_ids"]) == len(t["loss_mask"]) == len(t["response_logprobs"])
        calls, i = 0, 0
        while i < len(ids):
            if mask[i] != 1:
                i += 1
                continue
            j = i
            while j < len(ids) and mask[j] == 1:
                j += 1
            entry = by_prompt.get(tuple(ids[:i]))
            assert entry is not None, f"no backend request had the prompt before position {i}"
            choice = entry["response"]["choices"][0]
            # vLLM's return_tokens_as_token_ids: each token is "token_id:N".
            got = choice.get("token_ids") or [int(t.removeprefix("token_id:")) for t in choice["logprobs"]["tokens"]]
            assert got == ids[i:j]
            assert choice["logprobs"]["token_logprobs"] == lps[i:j]
            calls += 1
            i = j
        assert calls == t["calls"]
        seen += calls
    assert seen == len(result["turns"])
    return seen


def scored(result: dict[str, Any], calls: int) -> None:
    assert result["status"] == "completed", result.get("failure")
    assert result["reward"] == 1.0
    m = result["metrics"]
    assert m["gateway_calls"] == calls
    assert m["gateway_traces"] == 1
    assert m["gateway_merge_rate"] == 1.0
    assert result["tokens"]["ids"] == result["traces"][0]["prompt_ids"] + result["traces"][0]["response_ids"]


def math_session(host: Host, **extra: Any) -> dict[str, Any]:
    return open_session(host, task=MATH, sampling={"seed": 3}, **extra)


@pytest.mark.parametrize("stream", [False, True])
def test_openai_chat_agent(host: Host, stream: bool) -> None:
    s = math_session(host)
    client = openai.OpenAI(base_url=s["openai_base_url"], api_key=s["api_key"], max_retries=0)
    messages: list[Any] = list(s["messages"])
    final = None
    for _ in range(8):
        if stream:
            with client.chat.completions.stream(model=MODEL, messages=messages, tools=s["tools"]) as st:
                done: Any = st.get_final_completion()
        else:
            done = client.chat.completions.create(model=MODEL, messages=messages, tools=s["tools"])
        msg = done.choices[0].message
        messages.append(msg.model_dump(exclude_none=True))  # sent back as the SDK returned it
        if not msg.tool_calls:
            break
        for tc in msg.tool_calls:
            assert tc.type == "function"
            args = json.loads(tc.function.arguments)
            if tc.function.name == "finish":
                final = args["message"]
            messages.append({"role": "tool", "tool_call_id": tc.id, "content": "noted"})
        if final is not None:
            break
    assert final is not None
    result = close_session(host, s["session_id"], evaluate=True, final_response=final)
    scored(result, calls=2)
    assert check_against_log(host, result) == 2


@pytest.mark.parametrize("stream", [False, True])
def test_anthropic_messages_agent(host: Host, stream: bool) -> None:
    s = math_session(host)
    client = anthropic.Anthropic(base_url=s["anthropic_base_url"], api_key=s["api_key"], max_retries=0)
    system = "\n".join(m["content"] for m in s["messages"] if m["role"] == "system")
    messages: list[Any] = [{"role": m["role"], "content": m["content"]} for m in s["messages"] if m["role"] == "user"]
    tools: list[Any] = [
        {
            "name": t["function"]["name"],
            "description": t["function"]["description"],
            "input_schema": t["function"]["parameters"],
        }
        for t in s["tools"]
    ]
    assert client.messages.count_tokens(model=MODEL, system=system, messages=messages, tools=tools).input_tokens > 0
    final = None
    for _ in range(8):
        if stream:
            with client.messages.stream(
                model=MODEL, max_tokens=512, system=system, messages=messages, tools=tools
            ) as st:
                msg: Any = st.get_final_message()
        else:
            msg = client.messages.create(model=MODEL, max_tokens=512, system=system, messages=messages, tools=tools)
        messages.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in msg.content]})
        uses = [b for b in msg.content if b.type == "tool_use"]
        if msg.stop_reason != "tool_use":
            break
        results: list[Any] = []
        for b in uses:
            assert isinstance(b.input, dict)
            if b.name == "finish":
                final = b.input["message"]
            results.append({"type": "tool_result", "tool_use_id": b.id, "content": "noted"})
        messages.append({"role": "user", "content": results})
        if final is not None:
            break
    assert final is not None
    result = close_session(host, s["session_id"], evaluate=True, final_response=final)
    scored(result, calls=2)
    assert check_against_log(host, result) == 2


@pytest.mark.parametrize("stream", [False, True])
def test_openai_responses_agent(host: Host, stream: bool) -> None:
    s = math_session(host)
    client = openai.OpenAI(base_url=s["openai_base_url"], api_key=s["api_key"], max_retries=0)
    instructions = "\n".join(m["content"] for m in s["messages"] if m["role"] == "system")
    items: list[Any] = [{"role": "user", "content": m["content"]} for m in s["messages"] if m["role"] == "user"]
    tools: list[Any] = [
        {
            "type": "function",
            "name": t["function"]["name"],
            "description": t["function"]["description"],
            "parameters": t["function"]["parameters"],
            "strict": False,
        }
        for t in s["tools"]
    ]
    final = None
    for _ in range(8):
        if stream:
            with client.responses.stream(
                model=MODEL, instructions=instructions, input=items, tools=tools, store=False
            ) as st:
                resp: Any = st.get_final_response()
        else:
            resp = client.responses.create(
                model=MODEL, instructions=instructions, input=items, tools=tools, store=False
            )
        items += [o.model_dump(exclude_none=True) for o in resp.output]
        calls = [o for o in resp.output if o.type == "function_call"]
        if not calls:
            break
        for c in calls:
            if c.name == "finish":
                final = json.loads(c.arguments)["message"]
            items.append({"type": "function_call_output", "call_id": c.call_id, "output": "noted"})
        if final is not None:
            break
    assert final is not None
    result = close_session(host, s["session_id"], evaluate=True, final_response=final)
    scored(result, calls=2)
    assert check_against_log(host, result) == 2


def test_changed_history_starts_a_new_trace(host: Host) -> None:
    """A harness that rewrites what the model said cannot be merged: the call
    starts a trace of its own, rendered whole, and both stay exact."""
    s = open_session(host)
    client = openai.OpenAI(base_url=s["openai_base_url"], api_key=s["api_key"], max_retries=0)
    first: list[Any] = [{"role": "user", "content": "What is 17 + 25?"}]
    a = client.chat.completions.create(model=MODEL, messages=first)
    edited = (a.choices[0].message.content or "") + " (edited by the harness)"
    again: list[Any] = [*first, {"role": "assistant", "content": edited}, {"role": "user", "content": "Again."}]
    client.chat.completions.create(model=MODEL, messages=again)
    result = close_session(host, s["session_id"], reward=0.5)
    assert result["reward"] == 0.5
    assert result["metrics"]["gateway_traces"] == 2
    assert result["metrics"]["gateway_merge_rate"] == 0.0
    assert check_against_log(host, result) == 2


def test_errors_in_each_providers_shape(host: Host) -> None:
    s = open_session(host, max_turns=1)
    oa = openai.OpenAI(base_url=s["openai_base_url"], api_key=s["api_key"], max_retries=0)
    an = anthropic.Anthropic(base_url=s["anthropic_base_url"], api_key=s["api_key"], max_retries=0)
    user: Any = [{"role": "user", "content": "hi"}]

    with pytest.raises(openai.BadRequestError) as oe:
        oa.chat.completions.create(model=MODEL, messages=user, n=2)
    assert oe.value.param == "n"
    with pytest.raises(openai.BadRequestError) as oe:
        oa.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:,"}}]}]
        )
    assert oe.value.param == "messages[0].content[0].type"
    with pytest.raises(anthropic.BadRequestError) as ae:
        an.messages.create(model=MODEL, max_tokens=16, messages=[{"role": "tool", "content": "x"}])  # type: ignore[misc,list-item]
    assert ae.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]
    assert "messages[0].role" in ae.value.body["error"]["message"]  # type: ignore[index]
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=s["openai_base_url"], api_key="wrong", max_retries=0).chat.completions.create(
            model=MODEL, messages=user
        )

    # The turn budget: one call, then a clean stop with nothing generated.
    assert oa.chat.completions.create(model=MODEL, messages=user).choices[0].finish_reason in ("stop", "tool_calls")
    over = oa.chat.completions.create(model=MODEL, messages=user)
    assert over.choices[0].finish_reason == "length"
    assert over.usage is not None and over.usage.completion_tokens == 0
    over_a = an.messages.create(model=MODEL, max_tokens=16, messages=user)
    assert over_a.stop_reason == "max_tokens"

    result = close_session(host, s["session_id"], reward=0.0)
    assert result["metrics"]["gateway_calls"] == 1
    assert result["metrics"]["gateway_budget_stops"] == 2
    assert check_against_log(host, result) == 1

    # A finished session is 404 in both shapes and never reaches a backend.
    before = len((host.dir / "sim-requests.jsonl").read_text().splitlines())
    with pytest.raises(openai.NotFoundError):
        oa.chat.completions.create(model=MODEL, messages=user)
    with pytest.raises(anthropic.NotFoundError) as nf:
        an.messages.create(model=MODEL, max_tokens=16, messages=user)
    assert nf.value.body["type"] == "error"  # type: ignore[index]
    assert len((host.dir / "sim-requests.jsonl").read_text().splitlines()) == before
    r = httpx.post(f"{host.url}/v1/sessions/{s['session_id']}:close", json={"reward": 1})
    assert r.status_code == 409


def test_close_errors(host: Host) -> None:
    s = open_session(host)
    r = httpx.post(f"{host.url}/v1/sessions/{s['session_id']}:close", json={})
    assert r.status_code == 422 and r.json()["error"]["field"] == "reward"
    r = httpx.post(f"{host.url}/v1/sessions/{s['session_id']}:close", json={"evaluate": True})
    assert r.status_code == 422 and r.json()["error"]["field"] == "evaluate"  # no task: nothing to score with
    r = httpx.post(f"{host.url}/v1/sessions/{s['session_id']}:close", json={"reward": 1, "bogus": 1})
    assert r.status_code == 400 and "bogus" in r.json()["error"]["message"]
    r = httpx.post(f"{host.url}/v1/sessions/r-0000:close", json={"reward": 1})
    assert r.status_code == 404
    res = close_session(host, s["session_id"], reward=1)
    assert res["status"] == "completed" and res["reward"] == 1
    assert "traces" not in res  # no call, no trace


def test_sessions_in_the_result_stream(host: Host) -> None:
    """A session's result is in the same stream as every rollout's."""
    s = open_session(host, group_id="gw-stream")
    close_session(host, s["session_id"], reward=0.25)
    r = httpx.get(f"{host.url}/v1/results", params={"group_id": "gw-stream", "since": 0}, timeout=30)
    got = r.json()["results"]
    assert [x["id"] for x in got] == [s["session_id"]]
    assert got[0]["reward"] == 0.25


def test_harness_refusals(host: Host) -> None:
    """A harness rollout names a configured preset and needs sandboxes (this
    host has them disabled): each refusal names its field."""
    r = httpx.post(f"{host.url}/v1/rollouts", json={"task": MATH, "harness": {"name": "nope"}})
    assert r.status_code == 422 and r.json()["error"]["field"] == "harness.name"
    assert "mini-swe-agent" in r.json()["error"]["message"]  # the configured presets are listed
    r = httpx.post(f"{host.url}/v1/rollouts", json={"task": MATH, "harness": {"name": "mini-swe-agent"}})
    assert r.status_code == 422 and r.json()["error"]["field"] == "harness"
    r = httpx.post(f"{host.url}/v1/rollouts", json={"task": MATH, "harness": {"name": "codex", "image": "../../etc"}})
    assert r.status_code == 422 and r.json()["error"]["field"] == "harness.image"  # a name, never a path
    r = httpx.post(f"{host.url}/v1/rollouts", json={"task": MATH, "harness": {"name": "codex", "bogus": 1}})
    assert r.status_code == 400 and "bogus" in r.json()["error"]["message"]


def test_client_sessions(host: Host) -> None:
    """The Python client opens and closes sessions, sync and asyncio."""
    import asyncio

    from prorl_client import AsyncClient, Client

    with Client(host.url) as c:
        s = c.open_session({"task": MATH, "max_turns": 2})
        assert s["status"] == "running" and s["tools"] and s["messages"][-1]["role"] == "user"
        oa = openai.OpenAI(base_url=s["openai_base_url"], api_key=s["api_key"], max_retries=0)
        oa.chat.completions.create(model=MODEL, messages=s["messages"], tools=s["tools"])  # type: ignore[arg-type]
        res = c.close_session(s["session_id"], reward=0.75, metrics={"agent_steps": 1})
        assert res is not None and res["reward"] == 0.75 and res["metrics"]["agent_steps"] == 1
        assert res["traces"][0]["calls"] == 1
        with pytest.raises(ValueError):
            c.close_session(s["session_id"])

    async def run() -> None:
        async with AsyncClient(host.url) as ac:
            s = await ac.open_session()
            res = await ac.close_session(s["session_id"], reward=1.0)
            assert res is not None and res["status"] == "completed" and "traces" not in res

    asyncio.run(run())
