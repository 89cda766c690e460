"""The sync client against a real host and simulator."""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import threading

import pytest
from conftest import MATH, Host

from prorl_client import AsyncClient, Client, ProrlError, Result, failures, group_advantages, usable, whole


def sequence_ok(r: Result) -> bool:
    t = r["tokens"]
    n = len(t["ids"])
    return 0 < t["prompt_len"] < n and len(t["loss_mask"]) == n and len(t["logprobs"]) == n


def test_submit_wait_ack(host: Host) -> None:
    with Client(host.url) as c:
        assert c.healthy()
        g = c.submit({"task": MATH, "n": 4, "sampling": {"temperature": 1.0, "seed": 3}, "max_turns": 4})
        assert len(g["rollout_ids"]) == 4
        got = c.wait_groups([g], timeout=60)[g["group_id"]]
        assert [r["sample_index"] for r in got] == [0, 1, 2, 3]
        for r in got:
            assert r["status"] == "completed" and r["reward"] == 1.0 and usable(r) and sequence_ok(r)
        one = c.rollout(g["rollout_ids"][0], wait=1)
        assert one["id"] == g["rollout_ids"][0] and one["status"] == "completed"
        assert c.ack(g["rollout_ids"]) == 4
        assert c.results(group_id=g["group_id"]).results == []


def test_batch_and_stream_resume(host: Host) -> None:
    with Client(host.url) as c:
        start = c.results(wait=0).next_since
        groups = c.submit_batch([{"task": MATH, "n": 2}, {"task": MATH, "n": 3}])
        want = {rid for g in groups for rid in g["rollout_ids"]}
        seen: dict[str, int] = {}
        last = start
        # Read two, drop the stream, resume from the last seq: nothing lost or repeated.
        for seq, r in itertools.islice(c.stream_results(since=start), 2):
            seen[r["id"]] = seen.get(r["id"], 0) + 1
            last = seq
        for seq, r in c.stream_results(since=last):
            seen[r["id"]] = seen.get(r["id"], 0) + 1
            last = seq
            if want <= set(seen):
                break
        assert want <= set(seen)
        assert all(n == 1 for n in seen.values())
        c.ack(list(want))


def test_cancel_policy_and_errors(host: Host) -> None:
    with Client(host.url) as c:
        v = c.policy()
        assert c.set_policy(v + 1) == v + 1 and c.policy() == v + 1
        rep = c.pause("drain", timeout_s=30)
        assert rep["paused"] and rep["mode"] == "drain"
        res = c.resume(v + 2)
        assert res["was_paused"] and res["version"] == v + 2 and c.policy() == v + 2
        # The simulator is paused while the group is submitted and cancelled,
        # so the cancel finds it in flight however loaded the machine is.
        os.kill(host.sim_pid, signal.SIGSTOP)
        try:
            g = c.submit({"task": MATH, "n": 6, "max_turns": 6})
            c.cancel_group(g["group_id"])
        finally:
            os.kill(host.sim_pid, signal.SIGCONT)
        got = c.wait_groups([g], timeout=60)[g["group_id"]]
        assert len(got) == 6
        assert all(r["status"] in ("cancelled", "completed") for r in got)
        assert any(r["status"] == "cancelled" and r["failure"]["reason"] == "cancelled" for r in got)
        with pytest.raises(ProrlError) as e:
            c.submit({"task": MATH, "n": 0})
        assert e.value.status == 422 and e.value.field == "n"
        with pytest.raises(ProrlError) as e:
            c.submit({"task": {"domain": "nosuch"}})
        assert e.value.field == "task.domain"
        with pytest.raises(ProrlError) as e:
            c.rollout("r-nope")
        assert e.value.status == 404
        c.ack(g["rollout_ids"])


def test_early_stop_and_priority(host: Host) -> None:
    with Client(host.url) as c:
        g = c.submit({"task": MATH, "n": 8, "early_stop_min_usable": 2, "priority": 100})
        got = c.wait_groups([g], timeout=60)[g["group_id"]]
        good = [r for r in got if usable(r)]
        stopped = [r for r in got if r["status"] == "cancelled" and r["failure"]["reason"] == "early_stopped"]
        assert len(good) >= 2 and len(good) + len(stopped) == 8 and stopped
        c.ack(g["rollout_ids"])


def test_incomplete_group_dropped(host: Host) -> None:
    with Client(host.url) as c:
        ok = c.submit({"task": MATH, "n": 4})
        # The domain refuses this task: no sample of it can be trainable, and "drop" stops the rest.
        bad = c.submit({"task": {"domain": "math", "question": "no answer"}, "n": 4, "incomplete_group": "drop"})
        got = c.wait_groups([ok, bad], timeout=60)
        assert whole(got[ok["group_id"]]) and failures(got[ok["group_id"]]) == []
        assert not whole(got[bad["group_id"]])
        assert {why for _, why, _ in failures(got[bad["group_id"]])} <= {"invalid_task", "group_dropped"}
        with pytest.raises(ProrlError) as e:
            c.submit({"task": MATH, "retry_budget": {"max_turns": 1}})
        assert e.value.status == 422 and e.value.field == "retry_budget.max_turns"
        c.ack(ok["rollout_ids"] + bad["rollout_ids"])


def test_evaluate_and_domains(host: Host) -> None:
    with Client(host.url) as c:
        assert any(d["name"] == "math" for d in c.domains())
        ok = c.evaluate("math", {"question": "q", "answer": "0.5"}, "\\boxed{\\frac{1}{2}}")
        bad = c.evaluate("math", {"question": "q", "answer": "0.5"}, "\\boxed{0.6}")
        assert ok["reward"] == 1.0 and bad["reward"] == 0.0


def test_async_client(host: Host) -> None:
    async def main() -> None:
        async with AsyncClient(host.url) as c:
            gs = await asyncio.gather(*(c.submit({"task": MATH, "n": 2}) for _ in range(3)))
            got = await c.wait_groups(gs, timeout=60)
            assert sorted(len(v) for v in got.values()) == [2, 2, 2]
            first = gs[0]["rollout_ids"][0]
            assert (await c.rollout(first))["status"] == "completed"
            async for _seq, r in c.stream_results(since=0, group_id=gs[1]["group_id"]):
                assert r["group_id"] == gs[1]["group_id"]
                break
            with pytest.raises(ProrlError):
                await c.submit({"task": MATH, "n": -1})
            await c.ack([rid for g in gs for rid in g["rollout_ids"]])

    asyncio.run(main())


def test_grpo_step_loop(host: Host) -> None:
    """The README's loop: submit a step's groups, wait, normalise rewards per
    group, acknowledge, bump the policy."""
    with Client(host.url) as c:
        tasks = [MATH, {"domain": "math", "question": "Compute 1/2 + 1/3.", "answer": "\\frac{5}{6}"}]
        for step in range(2):
            groups = c.submit_batch([{"task": t, "n": 4, "sampling": {"temperature": 1.0}} for t in tasks])
            results = c.wait_groups(groups, timeout=120)
            for rs in results.values():
                adv = group_advantages([r["reward"] for r in rs])
                assert len(adv) == 4 and abs(sum(adv)) < 1e-6
            c.ack([r["id"] for rs in results.values() for r in rs])
            c.set_policy(100 + step)
        assert c.policy() == 101


def test_threads_share_one_client(host: Host) -> None:
    with Client(host.url) as c:
        out: list[str] = []

        def work() -> None:
            g = c.submit({"task": MATH, "n": 1})
            out.append(c.wait_groups([g], timeout=60)[g["group_id"]][0]["status"])
            c.ack(g["rollout_ids"])

        ts = [threading.Thread(target=work) for _ in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert out == ["completed"] * 4
