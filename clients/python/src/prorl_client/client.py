"""Sync and asyncio clients for the prorl host's v1 API.

Both share one description of every call (``_Call``); they differ only in
how the HTTP request is made, so they cannot drift apart.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import httpx

from .types import FINISHED, Evaluation, Result, Session, SessionRequest, SubmitRequest, SubmitResponse


class ProrlError(Exception):
    """An error answer of the host: ``{"error": {"code", "message", "field"}}``."""

    def __init__(self, status: int, code: str, message: str, field: str | None = None) -> None:
        super().__init__(f"{status} {code}: {message}" + (f" (field {field})" if field else ""))
        self.status = status
        self.code = code
        self.message = message
        self.field = field


@dataclass
class _Call:
    method: str
    path: str
    params: dict[str, str] = field(default_factory=dict)
    body: Any = None
    # The read timeout: long-polls wait on the host's side.
    timeout: float | None = None


def _check(res: httpx.Response) -> Any:
    if res.status_code < 400:
        return res.json()
    try:
        err = res.json()["error"]
        raise ProrlError(res.status_code, err.get("code", ""), err.get("message", ""), err.get("field") or None)
    except (ValueError, KeyError, TypeError):
        raise ProrlError(res.status_code, "http_error", res.text[:500]) from None


def _duration(seconds: float) -> str:
    return f"{seconds:g}s"


@dataclass
class Page:
    """A page of finished results and the ``since`` to continue from."""

    results: list[Result]
    next_since: int


class _Calls:
    """Every v1 call, as data."""

    @staticmethod
    def submit(req: SubmitRequest) -> _Call:
        return _Call("POST", "/v1/rollouts", body=req)

    @staticmethod
    def submit_batch(reqs: Sequence[SubmitRequest]) -> _Call:
        return _Call("POST", "/v1/rollouts:batch", body={"requests": list(reqs)})

    @staticmethod
    def rollout(rollout_id: str, wait: float) -> _Call:
        params = {"wait": _duration(wait)} if wait > 0 else {}
        return _Call("GET", f"/v1/rollouts/{rollout_id}", params=params, timeout=wait + 30)

    @staticmethod
    def rollouts(status: str | None, stage: str | None, older_than: float | None) -> _Call:
        params = {}
        if status:
            params["status"] = status
        if stage:
            params["stage"] = stage
        if older_than is not None:
            params["older_than"] = _duration(older_than)
        return _Call("GET", "/v1/rollouts", params=params)

    @staticmethod
    def results(since: int, group_id: str | None, wait: float, limit: int | None) -> _Call:
        params = {"since": str(since)}
        if group_id:
            params["group_id"] = group_id
        if wait > 0:
            params["wait"] = _duration(wait)
        if limit:
            params["limit"] = str(limit)
        return _Call("GET", "/v1/results", params=params, timeout=wait + 30)

    @staticmethod
    def ack(ids: Iterable[str]) -> _Call:
        return _Call("POST", "/v1/results/ack", body={"ids": list(ids)})

    @staticmethod
    def cancel(rollout_id: str) -> _Call:
        return _Call("DELETE", f"/v1/rollouts/{rollout_id}")

    @staticmethod
    def cancel_many(
        group_id: str | None, before_policy_version: int | None, all_: bool, dynamic_id: str | None = None
    ) -> _Call:
        body: dict[str, Any] = {}
        if group_id is not None:
            body["group_id"] = group_id
        if dynamic_id is not None:
            body["dynamic_id"] = dynamic_id
        if before_policy_version is not None:
            body["before_policy_version"] = before_policy_version
        if all_:
            body["all"] = True
        return _Call("POST", "/v1/rollouts:cancel", body=body)

    @staticmethod
    def set_policy(version: int) -> _Call:
        return _Call("PUT", "/v1/policy", body={"version": version})

    @staticmethod
    def pause(mode: str, timeout_s: float) -> _Call:
        return _Call("POST", "/v1/policy:pause", body={"mode": mode, "timeout_s": timeout_s}, timeout=timeout_s + 30)

    @staticmethod
    def resume(version: int | None) -> _Call:
        return _Call("POST", "/v1/policy:resume", body={} if version is None else {"version": version})

    @staticmethod
    def evaluate(domain: str, task: dict[str, Any], response: str) -> _Call:
        return _Call("POST", "/v1/evaluate", body={"domain": domain, "task": task, "response": response})

    @staticmethod
    def open_session(req: SessionRequest) -> _Call:
        return _Call("POST", "/v1/sessions", body=req, timeout=90)

    @staticmethod
    def close_session(
        session_id: str,
        reward: float | None,
        evaluate: bool,
        final_response: str | None,
        metrics: dict[str, float] | None,
    ) -> _Call:
        if (reward is None) == (not evaluate):
            raise ValueError("close a session with either reward or evaluate=True")
        body: dict[str, Any] = {"evaluate": True} if evaluate else {"reward": reward}
        if final_response is not None:
            body["final_response"] = final_response
        if metrics:
            body["metrics"] = metrics
        return _Call("POST", f"/v1/sessions/{session_id}:close", body=body, params={"wait": "60s"}, timeout=90)

    @staticmethod
    def add_backend(url: str, protocol: str, model: str | None, max_concurrency: int | None) -> _Call:
        body: dict[str, Any] = {"url": url, "protocol": protocol}
        if model:
            body["model"] = model
        if max_concurrency:
            body["max_concurrency"] = max_concurrency
        return _Call("POST", "/v1/backends", body=body)


def _stream_call(since: int, group_id: str | None) -> _Call:
    params = {"since": str(since)}
    if group_id:
        params["group_id"] = group_id
    return _Call("GET", "/v1/results/stream", params=params)


def _stream_line(line: str, since: int) -> tuple[int, Result] | None:
    """A line of the NDJSON result stream: the sequence to resume after, and the result."""
    if not line.strip():
        return None
    r = cast(Result, json.loads(line))
    return max(since, r.get("seq", since)), r


class _GroupWait:
    """The bookkeeping of waiting for whole groups, shared by both clients."""

    def __init__(self, groups: Iterable[SubmitResponse], since: int, timeout: float | None) -> None:
        self.want = {g["group_id"]: set(g["rollout_ids"]) for g in groups}
        self.got: dict[str, dict[str, Result]] = {g: {} for g in self.want}
        self.since = since
        self.deadline = None if timeout is None else time.monotonic() + timeout

    def left(self) -> float | None:
        """Seconds to long-poll next, or None when every group is complete."""
        if all(len(self.got[g]) == len(ids) for g, ids in self.want.items()):
            return None
        if self.deadline is None:
            return 20.0
        left = min(20.0, self.deadline - time.monotonic())
        if left <= 0:
            raise TimeoutError(
                f"groups not finished: {sorted(g for g, ids in self.want.items() if len(self.got[g]) < len(ids))}"
            )
        return left

    def add(self, page: Page) -> None:
        self.since = page.next_since
        for r in page.results:
            if r["id"] in self.want.get(r["group_id"], ()):
                self.got[r["group_id"]][r["id"]] = r

    def done(self) -> dict[str, list[Result]]:
        return {g: sorted(rs.values(), key=lambda r: r["sample_index"]) for g, rs in self.got.items()}


class _Config:
    def __init__(self, base_url: str, token: str | None, timeout: float) -> None:
        self.base_url = base_url.rstrip("/")
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.timeout = timeout

    def timeout_for(self, c: _Call) -> httpx.Timeout:
        return httpx.Timeout(self.timeout, read=c.timeout or self.timeout)


class Client:
    """The v1 API, blocking. Use as a context manager or call ``close()``."""

    def __init__(
        self, base_url: str = "http://127.0.0.1:8006", *, token: str | None = None, timeout: float = 60.0
    ) -> None:
        self._cfg = _Config(base_url, token, timeout)
        self._http = httpx.Client(base_url=self._cfg.base_url, headers=self._cfg.headers)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _do(self, c: _Call) -> Any:
        res = self._http.request(c.method, c.path, params=c.params, json=c.body, timeout=self._cfg.timeout_for(c))
        return _check(res)

    def submit(self, req: SubmitRequest) -> SubmitResponse:
        """Submits one task as a group of ``req["n"]`` rollouts."""
        return cast(SubmitResponse, self._do(_Calls.submit(req)))

    def submit_batch(self, reqs: Sequence[SubmitRequest]) -> list[SubmitResponse]:
        """Submits many groups at once; all are accepted or none."""
        return cast(list[SubmitResponse], self._do(_Calls.submit_batch(reqs))["groups"])

    def rollout(self, rollout_id: str, *, wait: float = 0) -> Result:
        """One rollout; with ``wait`` the host holds the call until it ends (or wait seconds pass)."""
        return cast(Result, self._do(_Calls.rollout(rollout_id, wait)))

    def rollouts(
        self, *, status: str | None = None, stage: str | None = None, older_than: float | None = None
    ) -> list[dict[str, Any]]:
        """Live rollouts (queued or running) with stage, turn and backend."""
        return cast(list[dict[str, Any]], self._do(_Calls.rollouts(status, stage, older_than))["rollouts"])

    def results(
        self, *, since: int = 0, group_id: str | None = None, wait: float = 0, limit: int | None = None
    ) -> Page:
        """Finished results after ``since``, in order."""
        out = self._do(_Calls.results(since, group_id, wait, limit))
        return Page(out["results"], out["next_since"])

    def stream_results(self, *, since: int = 0, group_id: str | None = None) -> Iterator[tuple[int, Result]]:
        """Yields ``(seq, result)`` as rollouts finish, forever; reconnects after a dropped
        connection from the last ``seq`` seen, so nothing is missed or repeated."""
        while True:
            c = _stream_call(since, group_id)
            try:
                with self._http.stream(
                    c.method, c.path, params=c.params, timeout=httpx.Timeout(self._cfg.timeout, read=None)
                ) as res:
                    if res.status_code >= 400:
                        res.read()
                        _check(res)
                    for line in res.iter_lines():
                        if got := _stream_line(line, since):
                            since = got[0]
                            yield got
            except (httpx.TransportError, httpx.RemoteProtocolError):
                time.sleep(0.5)

    def wait_groups(
        self, groups: Iterable[SubmitResponse], *, since: int = 0, timeout: float | None = None
    ) -> dict[str, list[Result]]:
        """Waits until every rollout of the submitted groups finished; results by group, in sample order."""
        w = _GroupWait(groups, since, timeout)
        while (left := w.left()) is not None:
            w.add(self.results(since=w.since, wait=left))
        return w.done()

    def ack(self, ids: Iterable[str]) -> int:
        """Acknowledges results: the host may forget them."""
        return int(self._do(_Calls.ack(ids))["acked"])

    def cancel(self, rollout_id: str) -> int:
        return int(self._do(_Calls.cancel(rollout_id))["cancelled"])

    def cancel_group(self, group_id: str) -> int:
        return int(self._do(_Calls.cancel_many(group_id, None, False))["cancelled"])

    def cancel_batch(self, dynamic_id: str) -> int:
        """Cancels a dynamic-sampling batch's unfinished rollouts."""
        return int(self._do(_Calls.cancel_many(None, None, False, dynamic_id))["cancelled"])

    def cancel_before_policy(self, version: int) -> int:
        """Cancels every rollout started under an older policy (admin token)."""
        return int(self._do(_Calls.cancel_many(None, version, False))["cancelled"])

    def cancel_all(self) -> int:
        return int(self._do(_Calls.cancel_many(None, None, True))["cancelled"])

    def set_policy(self, version: int) -> int:
        """New weights: later turns are stamped with this version (admin token)."""
        return int(self._do(_Calls.set_policy(version))["version"])

    def policy(self) -> int:
        return int(self._do(_Call("GET", "/v1/policy"))["version"])

    def pause(self, mode: str = "abort", timeout_s: float = 300) -> dict[str, Any]:
        """Stops generation for a weight update (admin token). "drain" waits
        for the generations in flight; "abort" ends them, keeping their
        tokens: the turns continue after resume. Returns once none is in flight."""
        return cast(dict[str, Any], self._do(_Calls.pause(mode, timeout_s)))

    def resume(self, version: int | None = None) -> dict[str, Any]:
        """Lets generation continue, stamped with the new policy version (admin token)."""
        return cast(dict[str, Any], self._do(_Calls.resume(version)))

    def evaluate(self, domain: str, task: dict[str, Any], response: str) -> Evaluation:
        """Scores a response with the domain's reward, without generating."""
        return cast(Evaluation, self._do(_Calls.evaluate(domain, task, response)))

    def domains(self) -> list[dict[str, Any]]:
        return cast(list[dict[str, Any]], self._do(_Call("GET", "/v1/domains"))["domains"])

    def open_session(self, req: SessionRequest | None = None) -> Session:
        """Opens a gateway session for an agent that runs elsewhere; with a
        task, the answer carries its prompt and tools."""
        return cast(Session, self._do(_Calls.open_session(req or {})))

    def close_session(
        self,
        session_id: str,
        *,
        reward: float | None = None,
        evaluate: bool = False,
        final_response: str | None = None,
        metrics: dict[str, float] | None = None,
    ) -> Result | None:
        """Ends a session with the agent's reward, or ``evaluate=True`` for the
        task's domain to score it; returns its result (None if still scoring
        after 60 s: it arrives in the results like any rollout's)."""
        return _closed(self._do(_Calls.close_session(session_id, reward, evaluate, final_response, metrics)))

    def add_backend(
        self, url: str, *, protocol: str = "vllm", model: str | None = None, max_concurrency: int | None = None
    ) -> dict[str, Any]:
        return cast(dict[str, Any], self._do(_Calls.add_backend(url, protocol, model, max_concurrency)))

    def backends(self) -> list[dict[str, Any]]:
        return cast(list[dict[str, Any]], self._do(_Call("GET", "/v1/backends"))["backends"])

    def remove_backend(self, backend_id: str) -> None:
        self._do(_Call("DELETE", f"/v1/backends/{backend_id}"))

    def healthy(self) -> bool:
        try:
            return self._http.get("/readyz", timeout=self._cfg.timeout).status_code == 200
        except httpx.TransportError:
            return False


class AsyncClient:
    """The v1 API for asyncio; the same methods as ``Client``, awaited."""

    def __init__(
        self, base_url: str = "http://127.0.0.1:8006", *, token: str | None = None, timeout: float = 60.0
    ) -> None:
        self._cfg = _Config(base_url, token, timeout)
        self._http = httpx.AsyncClient(base_url=self._cfg.base_url, headers=self._cfg.headers)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._http.aclose()

    async def _do(self, c: _Call) -> Any:
        res = await self._http.request(c.method, c.path, params=c.params, json=c.body, timeout=self._cfg.timeout_for(c))
        return _check(res)

    async def submit(self, req: SubmitRequest) -> SubmitResponse:
        return cast(SubmitResponse, await self._do(_Calls.submit(req)))

    async def submit_batch(self, reqs: Sequence[SubmitRequest]) -> list[SubmitResponse]:
        return cast(list[SubmitResponse], (await self._do(_Calls.submit_batch(reqs)))["groups"])

    async def rollout(self, rollout_id: str, *, wait: float = 0) -> Result:
        return cast(Result, await self._do(_Calls.rollout(rollout_id, wait)))

    async def rollouts(
        self, *, status: str | None = None, stage: str | None = None, older_than: float | None = None
    ) -> list[dict[str, Any]]:
        return cast(list[dict[str, Any]], (await self._do(_Calls.rollouts(status, stage, older_than)))["rollouts"])

    async def results(
        self, *, since: int = 0, group_id: str | None = None, wait: float = 0, limit: int | None = None
    ) -> Page:
        out = await self._do(_Calls.results(since, group_id, wait, limit))
        return Page(out["results"], out["next_since"])

    async def stream_results(self, *, since: int = 0, group_id: str | None = None) -> AsyncIterator[tuple[int, Result]]:
        """Yields ``(seq, result)`` as rollouts finish; resumes from the last ``seq`` after a dropped connection."""
        import asyncio

        while True:
            c = _stream_call(since, group_id)
            try:
                async with self._http.stream(
                    c.method, c.path, params=c.params, timeout=httpx.Timeout(self._cfg.timeout, read=None)
                ) as res:
                    if res.status_code >= 400:
                        await res.aread()
                        _check(res)
                    async for line in res.aiter_lines():
                        if got := _stream_line(line, since):
                            since = got[0]
                            yield got
            except (httpx.TransportError, httpx.RemoteProtocolError):
                await asyncio.sleep(0.5)

    async def wait_groups(
        self, groups: Iterable[SubmitResponse], *, since: int = 0, timeout: float | None = None
    ) -> dict[str, list[Result]]:
        w = _GroupWait(groups, since, timeout)
        while (left := w.left()) is not None:
            w.add(await self.results(since=w.since, wait=left))
        return w.done()

    async def ack(self, ids: Iterable[str]) -> int:
        return int((await self._do(_Calls.ack(ids)))["acked"])

    async def cancel(self, rollout_id: str) -> int:
        return int((await self._do(_Calls.cancel(rollout_id)))["cancelled"])

    async def cancel_group(self, group_id: str) -> int:
        return int((await self._do(_Calls.cancel_many(group_id, None, False)))["cancelled"])

    async def cancel_batch(self, dynamic_id: str) -> int:
        return int((await self._do(_Calls.cancel_many(None, None, False, dynamic_id)))["cancelled"])

    async def cancel_before_policy(self, version: int) -> int:
        return int((await self._do(_Calls.cancel_many(None, version, False)))["cancelled"])

    async def cancel_all(self) -> int:
        return int((await self._do(_Calls.cancel_many(None, None, True)))["cancelled"])

    async def set_policy(self, version: int) -> int:
        return int((await self._do(_Calls.set_policy(version)))["version"])

    async def policy(self) -> int:
        return int((await self._do(_Call("GET", "/v1/policy")))["version"])

    async def pause(self, mode: str = "abort", timeout_s: float = 300) -> dict[str, Any]:
        return cast(dict[str, Any], await self._do(_Calls.pause(mode, timeout_s)))

    async def resume(self, version: int | None = None) -> dict[str, Any]:
        return cast(dict[str, Any], await self._do(_Calls.resume(version)))

    async def evaluate(self, domain: str, task: dict[str, Any], response: str) -> Evaluation:
        return cast(Evaluation, await self._do(_Calls.evaluate(domain, task, response)))

    async def domains(self) -> list[dict[str, Any]]:
        return cast(list[dict[str, Any]], (await self._do(_Call("GET", "/v1/domains")))["domains"])

    async def open_session(self, req: SessionRequest | None = None) -> Session:
        return cast(Session, await self._do(_Calls.open_session(req or {})))

    async def close_session(
        self,
        session_id: str,
        *,
        reward: float | None = None,
        evaluate: bool = False,
        final_response: str | None = None,
        metrics: dict[str, float] | None = None,
    ) -> Result | None:
        return _closed(await self._do(_Calls.close_session(session_id, reward, evaluate, final_response, metrics)))


def _closed(out: dict[str, Any]) -> Result | None:
    """A close's answer: the result, or the 202 of one still being scored."""
    return None if out.get("status") == "closing" else cast(Result, out)


def finished(r: Result) -> bool:
    return r["status"] in FINISHED
