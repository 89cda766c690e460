"""A bring-your-own-agent program on the official OpenAI and Anthropic SDKs.

It opens gateway sessions on a prorl host for one task, runs the task's tools
(think, finish) itself through each SDK (OpenAI Chat, streamed; Anthropic
Messages, streamed), and closes every session for the task's domain to score.
Prints the session ids, one per line. Used by the e2e tests against a real
inference engine (llama.cpp).

Usage: sdk_agent.py HOST_URL TASK_JSON SESSIONS_PER_SDK SEED
"""

from __future__ import annotations

import json
import sys
from typing import Any

import anthropic
import httpx
import openai

MAX_CALLS = 4


def open_session(host: str, task: dict[str, Any], seed: int) -> dict[str, Any]:
    body = {"task": task, "sampling": {"seed": seed, "max_tokens_per_turn": 96}, "max_turns": MAX_CALLS}
    r = httpx.post(f"{host}/v1/sessions", json=body, timeout=60)
    r.raise_for_status()
    s: dict[str, Any] = r.json()
    return s


def close(host: str, sid: str, final: str) -> None:
    r = httpx.post(f"{host}/v1/sessions/{sid}:close", json={"evaluate": True, "final_response": final}, timeout=120)
    r.raise_for_status()


def run_openai(s: dict[str, Any]) -> str:
    client = openai.OpenAI(base_url=s["openai_base_url"], api_key=s["api_key"], max_retries=0)
    messages: list[Any] = list(s["messages"])
    for _ in range(MAX_CALLS):
        with client.chat.completions.stream(model="policy", messages=messages, tools=s["tools"]) as st:
            done = st.get_final_completion()
        msg = done.choices[0].message
        messages.append(msg.model_dump(exclude_none=True))
        if not msg.tool_calls or done.choices[0].finish_reason == "length":
            return msg.content or ""
        for tc in msg.tool_calls:
            if tc.type != "function":
                continue
            if tc.function.name == "finish":
                return str(json.loads(tc.function.arguments).get("message", ""))
            messages.append({"role": "tool", "tool_call_id": tc.id, "content": "Noted."})
    return ""


def run_anthropic(s: dict[str, Any]) -> str:
    client = anthropic.Anthropic(base_url=s["anthropic_base_url"], api_key=s["api_key"], max_retries=0)
    system = "\n".join(m["content"] for m in s["messages"] if m["role"] == "system")
    messages: list[Any] = [{"role": "user", "content": m["content"]} for m in s["messages"] if m["role"] == "user"]
    tools: list[Any] = [
        {"name": t["function"]["name"], "description": t["function"]["description"], "input_schema": t["function"]["parameters"]}
        for t in s["tools"]
    ]
    for _ in range(MAX_CALLS):
        with client.messages.stream(model="policy", max_tokens=96, system=system, messages=messages, tools=tools) as st:
            msg = st.get_final_message()
        messages.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in msg.content]})
        uses = [b for b in msg.content if b.type == "tool_use"]
        if not uses:
            return "".join(b.text for b in msg.content if b.type == "text")
        results: list[Any] = []
        for b in uses:
            if b.name == "finish" and isinstance(b.input, dict):
                return str(b.input.get("message", ""))
            results.append({"type": "tool_result", "tool_use_id": b.id, "content": "Noted."})
        messages.append({"role": "user", "content": results})
    return ""


def main() -> None:
    host, task, n, seed = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    for i in range(n):
        for run in (run_openai, run_anthropic):
            s = open_session(host, task, seed + i)
            final = run(s)
            close(host, s["session_id"], final)
            print(s["session_id"], run.__name__, flush=True)


if __name__ == "__main__":
    main()
