"""The host's sandbox services as a plugin sees them (HostServices over the
go-plugin broker)."""

from __future__ import annotations

from dataclasses import dataclass

import grpc

from ._proto import prorl_pb2 as pb
from ._proto import prorl_pb2_grpc as pbg
from .types import SANDBOX_FAILED, DomainError


@dataclass
class ExecResult:
    stdout: bytes
    stderr: bytes
    exit_code: int
    timed_out: bool = False
    truncated: bool = False


@dataclass
class DirEntry:
    name: str
    dir: bool
    size: int
    mode: int


class NoHostError(DomainError):
    def __init__(self) -> None:
        super().__init__(SANDBOX_FAILED, "the host offers no sandbox services")


class Sandboxes:
    """Runs commands and moves files in a rollout's sandbox."""

    def __init__(self, channel: grpc.Channel | None) -> None:
        self._stub = pbg.HostServicesStub(channel) if channel is not None else None

    def _s(self) -> pbg.HostServicesStub:
        if self._stub is None:
            raise NoHostError()
        return self._stub

    def exec(
        self,
        sandbox_id: str,
        argv: list[str] | None = None,
        *,
        command: str = "",
        session: bool = False,
        timeout_ms: int = 0,
        stdin: bytes = b"",
        workdir: str = "",
        env: dict[str, str] | None = None,
    ) -> ExecResult:
        """Runs argv as a new process, or with session=True a command in the
        sandbox's persistent shell, in its current directory and environment
        (the host refuses argv, stdin, workdir and env there)."""
        req = pb.ExecRequest(
            sandbox_id=sandbox_id,
            argv=argv or [],
            command=command,
            session=session,
            timeout_ms=timeout_ms,
            stdin=stdin,
            workdir=workdir,
            env=env or {},
        )
        res = ExecResult(b"", b"", -1)
        for ch in self._s().Exec(req):
            res.stdout += ch.stdout
            res.stderr += ch.stderr
            if ch.error:
                raise DomainError(SANDBOX_FAILED, ch.error)
            if ch.exited:
                res.exit_code, res.timed_out, res.truncated = ch.exit_code, ch.timed_out, ch.truncated
        return res

    def read_file(self, sandbox_id: str, path: str) -> bytes:
        r = self._s().ReadFile(pb.ReadFileRequest(sandbox_id=sandbox_id, path=path))
        if r.error:
            raise OSError(f"read {path}: {r.error}")
        return bytes(r.data)

    def write_file(self, sandbox_id: str, path: str, data: bytes, mode: int = 0o644) -> None:
        r = self._s().WriteFile(pb.WriteFileRequest(sandbox_id=sandbox_id, path=path, data=data, mode=mode))
        if r.error:
            raise OSError(f"write {path}: {r.error}")

    def list_dir(self, sandbox_id: str, path: str) -> list[DirEntry]:
        r = self._s().ListDir(pb.ListDirRequest(sandbox_id=sandbox_id, path=path))
        if r.error:
            raise OSError(f"list {path}: {r.error}")
        return [DirEntry(e.name, e.dir, e.size, e.mode) for e in r.entries]
