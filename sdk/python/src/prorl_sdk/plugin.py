"""Serving an Env as a prorl plugin: hashicorp/go-plugin's protocol over gRPC.

The host starts the plugin as a process with the handshake cookie and its
client certificate in the environment; the plugin listens on a Unix socket
with mutual TLS (a fresh self-signed certificate, as go-plugin's AutoMTLS
does), prints the handshake line ``1|API|unix|PATH|grpc|CERT`` on stdout
and serves TaskDomain, grpc.health.v1 (service "plugin"), GRPCBroker (the
host announces HostServices there), GRPCController (Shutdown) and GRPCStdio.
"""

from __future__ import annotations

import base64
import datetime
import json
import os
import signal
import sys
import tempfile
import threading
import traceback
from collections.abc import Callable, Iterator, Sequence
from concurrent import futures
from typing import Any, TypeVar

import grpc
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from ._proto import goplugin_pb2 as gp
from ._proto import goplugin_pb2_grpc as gpg
from ._proto import prorl_pb2 as pb
from ._proto import prorl_pb2_grpc as pbg
from .env import Env, Rollout, UsageError
from .sandboxes import Sandboxes
from .types import INTERNAL, DomainError, EvaluateRequest, Message, SandboxSpec, ToolCall

API_VERSION = 1
CORE_PROTOCOL_VERSION = 1
COOKIE_KEY, COOKIE_VALUE = "PRORL_PLUGIN", "9c1f0e6a-task-domain"
# The plugin's config table, as JSON, for a command (Go: sdk/wire.ConfigEnv).
CONFIG_ENV = "PRORL_PLUGIN_CONFIG"
MAX_MESSAGE_BYTES = 64 << 20
_GRPC_OPTIONS = [
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
]


def _diag(e: BaseException) -> list[pb.Diagnostic]:
    if isinstance(e, DomainError):
        return [pb.Diagnostic(code=e.code, message=e.message, field=e.field)]
    return [pb.Diagnostic(code=INTERNAL, message=f"{type(e).__name__}: {e}")]


def _messages(ms: Any) -> list[Message]:
    return [
        Message(
            m.role,
            m.content,
            [ToolCall(c.name, bytes(c.arguments_json).decode() or "{}", c.id) for c in m.tool_calls],
            m.tool_call_id,
            m.name,
        )
        for m in ms
    ]


def _sandbox(s: SandboxSpec | None) -> pb.SandboxSpec | None:
    if s is None:
        return None
    return pb.SandboxSpec(
        image=s.image,
        network=s.network,
        env=s.env,
        cpu_seconds=s.cpu_seconds,
        memory_bytes=s.memory_bytes,
        max_processes=s.max_processes,
        max_file_bytes=s.max_file_bytes,
        disk_bytes=s.disk_bytes,
        seccomp_allow=s.seccomp_allow,
        writable=s.writable,
    )


class _Broker(gpg.GRPCBrokerServicer):
    """The plugin's end of go-plugin's broker: the host streams where each
    service it offers listens; the plugin dials them by id."""

    def __init__(self) -> None:
        self._cv = threading.Condition()
        self._conns: dict[int, gp.ConnInfo] = {}
        self._closed = threading.Event()

    def StartStream(self, request_iterator: Iterator[gp.ConnInfo], context: grpc.ServicerContext) -> Iterator[gp.ConnInfo]:  # noqa: N802
        def read() -> None:
            try:
                for ci in request_iterator:
                    with self._cv:
                        self._conns[ci.service_id] = ci
                        self._cv.notify_all()
            except grpc.RpcError:
                pass

        threading.Thread(target=read, daemon=True).start()
        # This plugin offers nothing through the broker: the stream stays
        # open, empty, until the host or the plugin ends.
        while context.is_active() and not self._closed.wait(1.0):
            pass
        return iter(())

    def conn_info(self, service_id: int, timeout: float = 10.0) -> gp.ConnInfo:
        with self._cv:
            if not self._cv.wait_for(lambda: service_id in self._conns, timeout):
                raise DomainError(INTERNAL, f"the host never announced broker service {service_id}")
            return self._conns[service_id]

    def close(self) -> None:
        self._closed.set()


class _Stdio(gpg.GRPCStdioServicer):
    """Nothing is relayed here: the plugin's stderr is the host's log pipe."""

    def __init__(self, closed: threading.Event) -> None:
        self._closed = closed

    def StreamStdio(self, request: Any, context: grpc.ServicerContext) -> Iterator[gp.StdioData]:  # noqa: N802
        while context.is_active() and not self._closed.wait(1.0):
            pass
        return iter(())


class _Controller(gpg.GRPCControllerServicer):
    def __init__(self, stop: threading.Event) -> None:
        self._stop = stop

    def Shutdown(self, request: gp.Empty, context: grpc.ServicerContext) -> gp.Empty:  # noqa: N802
        self._stop.set()
        return gp.Empty()


class _TLS:
    """Mutual TLS as go-plugin's AutoMTLS: the host's certificate arrives in
    PLUGIN_CLIENT_CERT; the plugin answers with a fresh self-signed one
    (ECDSA P-256, which gRPC's BoringSSL signs and verifies, where go-plugin
    uses P-521; CN and DNS name localhost, a CA so it verifies itself)."""

    def __init__(self, client_pem: bytes) -> None:
        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost"), x509.NameAttribute(NameOID.ORGANIZATION_NAME, "prorl")])
        now = datetime.datetime.now(datetime.timezone.utc)
        cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(seconds=30))
            .not_valid_after(now + datetime.timedelta(days=3650))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    key_encipherment=True,
                    key_agreement=True,
                    key_cert_sign=True,
                    content_commitment=False,
                    data_encipherment=False,
                    crl_sign=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH, ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(key, hashes.SHA256())
        )
        self.client_pem = client_pem
        self.cert_pem = cert.public_bytes(serialization.Encoding.PEM)
        self.key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
        # The handshake carries the leaf's DER, base64 without padding.
        self.handshake = base64.b64encode(cert.public_bytes(serialization.Encoding.DER)).decode().rstrip("=")

    def server(self) -> grpc.ServerCredentials:
        return grpc.ssl_server_credentials([(self.key_pem, self.cert_pem)], root_certificates=self.client_pem, require_client_auth=True)

    def channel(self) -> grpc.ChannelCredentials:
        return grpc.ssl_channel_credentials(root_certificates=self.client_pem, private_key=self.key_pem, certificate_chain=self.cert_pem)


_Req = TypeVar("_Req")
_Resp = TypeVar("_Resp")


class _Domain(pbg.TaskDomainServicer):
    """TaskDomain over an Env; every failure of domain code is a diagnostic
    in the reply, never a dead plugin or a transport error."""

    def __init__(self, env: Env[Any, Any, Any], broker: _Broker, tls: _TLS | None) -> None:
        self.env, self.broker, self.tls = env, broker, tls
        self.sandboxes = Sandboxes(None)
        self.tools = {t.name: t for t in env.tools}
        # A batch's calls run at once, as the unary calls of its rollouts would.
        self._batch_pool = futures.ThreadPoolExecutor(max_workers=64, thread_name_prefix="batch")

    def _batch(
        self,
        call: Callable[[_Req, grpc.ServicerContext], _Resp],
        reqs: Sequence[_Req],
        context: grpc.ServicerContext,
    ) -> Iterator[tuple[int, _Resp]]:
        """Each request's answer with its index, as each call returns."""
        fs = {self._batch_pool.submit(call, r, context): i for i, r in enumerate(reqs)}
        for f in futures.as_completed(fs):
            yield fs[f], f.result()

    def PrepareBatch(  # noqa: N802
        self, request: pb.PrepareBatchRequest, context: grpc.ServicerContext
    ) -> Iterator[pb.PrepareBatchItem]:
        for i, resp in self._batch(self.Prepare, request.requests, context):
            yield pb.PrepareBatchItem(index=i, response=resp)

    def EvaluateBatch(  # noqa: N802
        self, request: pb.EvaluateBatchRequest, context: grpc.ServicerContext
    ) -> Iterator[pb.EvaluateBatchItem]:
        for i, resp in self._batch(self.Evaluate, request.requests, context):
            yield pb.EvaluateBatchItem(index=i, response=resp)

    def _internal(self, op: str, e: BaseException) -> list[pb.Diagnostic]:
        if not isinstance(e, DomainError):
            self.env.log.error("exception in domain", op=op, error=repr(e), stack=traceback.format_exc())
        return _diag(e)

    def GetInfo(self, request: pb.GetInfoRequest, context: grpc.ServicerContext) -> pb.DomainInfo:  # noqa: N802
        caps = (["setup"] if self.env.has_setup else []) + ([] if self.env.stateless else ["release"])
        caps += ["task_prepare"] if self.env.task_prepare else []
        return pb.DomainInfo(
            name=self.env.name,
            version=self.env.version,
            description=self.env.description,
            api_versions=[API_VERSION],
            data_sources=self.env.data_sources,
            capabilities=caps,
            config_schema_json=json.dumps(self.env.config_schema).encode(),
            tools=[
                pb.ToolSpec(name=t.name, description=t.description, parameters_json=json.dumps(t.parameters).encode())
                for t in self.env.tools
            ],
        )

    def Configure(self, request: pb.ConfigureRequest, context: grpc.ServicerContext) -> pb.ConfigureResponse:  # noqa: N802
        try:
            if request.host_services_broker_id:
                ci = self.broker.conn_info(request.host_services_broker_id)
                target = ("unix:" if ci.network == "unix" else "") + ci.address
                opts = [*_GRPC_OPTIONS, ("grpc.ssl_target_name_override", "localhost")]
                ch = (
                    grpc.secure_channel(target, self.tls.channel(), options=opts)
                    if self.tls
                    else grpc.insecure_channel(target, options=_GRPC_OPTIONS)
                )
                self.sandboxes = Sandboxes(ch)
            self.env.configure(bytes(request.config_json))
        except Exception as e:  # noqa: BLE001
            return pb.ConfigureResponse(diagnostics=self._internal("Configure", e))
        return pb.ConfigureResponse()

    def Prepare(self, request: pb.PrepareRequest, context: grpc.ServicerContext) -> pb.PrepareResponse:  # noqa: N802
        try:
            ep = self.env.prepare(request.rollout_id, bytes(request.task_json))
            if not ep.messages:
                raise DomainError(INTERNAL, "the domain's episode has no messages")
            for name in ep.tools or []:
                if name not in self.tools:
                    raise DomainError(INTERNAL, f"episode names tool {name!r} the domain does not declare")
            return pb.PrepareResponse(
                task_id=ep.task_id,
                messages=[
                    pb.Message(
                        role=m.role,
                        content=m.content,
                        tool_call_id=m.tool_call_id,
                        name=m.name,
                        tool_calls=[pb.ToolCall(id=c.id, name=c.name, arguments_json=c.arguments.encode()) for c in m.tool_calls],
                    )
                    for m in ep.messages
                ],
                tools=ep.tools or [],
                sandbox=_sandbox(ep.sandbox),
                eval_sandbox=_sandbox(ep.eval_sandbox),
                limits=pb.Limits(
                    max_turns=ep.limits.max_turns,
                    max_tokens_per_turn=ep.limits.max_tokens_per_turn,
                    max_total_tokens=ep.limits.max_total_tokens,
                ),
                chat_template_kwargs_json=json.dumps(ep.chat_template_kwargs).encode() if ep.chat_template_kwargs else b"",
            )
        except Exception as e:  # noqa: BLE001
            if request.rollout_id:
                self.env.release(request.rollout_id)
            return pb.PrepareResponse(diagnostics=self._internal("Prepare", e))

    def _rollout(self, rollout_id: str, sandbox_id: str, task: bytes) -> Rollout[Any, Any, Any]:
        return self.env.session(rollout_id, sandbox_id, self.sandboxes, task)

    def Setup(self, request: pb.SetupRequest, context: grpc.ServicerContext) -> pb.SetupResponse:  # noqa: N802
        try:
            self.env.run_setup(self._rollout(request.rollout_id, request.sandbox_id, bytes(request.task_json)))
        except Exception as e:  # noqa: BLE001
            return pb.SetupResponse(diagnostics=self._internal("Setup", e))
        return pb.SetupResponse()

    def CallTool(self, request: pb.CallToolRequest, context: grpc.ServicerContext) -> pb.CallToolResponse:  # noqa: N802
        call = request.call
        t = self.tools.get(call.name)
        if t is None:
            names = ", ".join(self.tools)
            return pb.CallToolResponse(is_error=True, output=f"Error: unknown tool {call.name!r}; available tools: {names}")
        try:
            args = json.loads(bytes(call.arguments_json) or b"{}")
        except ValueError:
            return pb.CallToolResponse(is_error=True, output="Error: tool arguments are not valid JSON")
        try:
            res = t.call(self._rollout(request.rollout_id, request.sandbox_id, bytes(request.task_json)), args)
        except Exception as e:  # noqa: BLE001
            return pb.CallToolResponse(diagnostics=self._internal("CallTool", e))
        return pb.CallToolResponse(output=res.output, done=res.done, final_response=res.final_response, is_error=res.is_error)

    def Evaluate(self, request: pb.EvaluateRequest, context: grpc.ServicerContext) -> pb.EvaluateResponse:  # noqa: N802
        try:
            r = self._rollout(request.rollout_id, request.sandbox_id, bytes(request.task_json))
            req = EvaluateRequest(request.final_response, _messages(request.messages), request.end_reason, request.eval_sandbox_id)
            sc = self.env.evaluate(r, req)
            return pb.EvaluateResponse(
                reward=float(sc.reward),
                resolved=sc.resolved,
                metrics={k: float(v) for k, v in sc.metrics.items()},
                info_json=json.dumps(sc.info).encode() if sc.info else b"",
            )
        except Exception as e:  # noqa: BLE001
            return pb.EvaluateResponse(diagnostics=self._internal("Evaluate", e))

    def Release(self, request: pb.ReleaseRequest, context: grpc.ServicerContext) -> pb.ReleaseResponse:  # noqa: N802
        self.env.release(request.rollout_id)
        return pb.ReleaseResponse()


def describe(env: Env[Any, Any, Any]) -> dict[str, Any]:
    """The document ``PLUGIN describe`` prints (as the Go SDK's)."""
    out: dict[str, Any] = {"name": env.name, "version": env.version}
    if env.description:
        out["description"] = env.description
    if env.data_sources:
        out["data_sources"] = env.data_sources
    out["config_schema"] = env.config_schema
    out["api_versions"] = [API_VERSION]
    out["tools"] = [{"name": t.name, "description": t.description, "parameters": t.parameters} for t in env.tools]
    return out


def run_command(env: Env[Any, Any, Any], argv: list[str]) -> int:
    """Runs ``describe`` or one of the Env's commands (the config table
    from CONFIG_ENV, as ``prorl-host plugins exec`` passes it); returns
    the exit status."""
    if argv[0] == "describe":
        json.dump(describe(env), sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    cmd = env.commands.get(argv[0])
    if cmd is None:
        sys.stderr.write(f"{env.name} is a prorl plugin: the prorl host starts it.\nusage: {sys.argv[0]} describe\n")
        for c in env.commands.values():
            sys.stderr.write(f"       {sys.argv[0]} {c.name} {c.usage}\n")
        return 2
    try:
        env.configure(os.environ.get(CONFIG_ENV, "").encode() or b"{}")
        cmd.run(argv[1:], env.config)
    except UsageError as e:
        sys.stderr.write(f"{env.name} {cmd.name}: {e}\n")
        return 2
    except Exception as e:  # noqa: BLE001 -- an admin's command: say what went wrong, exit 1
        sys.stderr.write(f"{env.name} {cmd.name}: {e}\n")
        return 1
    return 0


def serve(env: Env[Any, Any, Any], argv: list[str] | None = None) -> None:
    """Runs the plugin; ``describe`` as the first argument prints the
    domain's description as JSON instead."""
    argv = sys.argv[1:] if argv is None else argv
    if argv:
        sys.exit(run_command(env, argv))
    if os.environ.get(COOKIE_KEY) != COOKIE_VALUE:
        sys.stderr.write(f"{env.name} is a prorl plugin: the prorl host starts it (usage: {sys.argv[0]} describe)\n")
        sys.exit(1)
    versions = [v for v in os.environ.get("PLUGIN_PROTOCOL_VERSIONS", str(API_VERSION)).split(",") if v]
    if str(API_VERSION) not in versions:
        sys.stderr.write(f"the host speaks plugin protocol versions {versions}; this plugin speaks {API_VERSION}\n")
        sys.exit(1)

    client_pem = os.environ.get("PLUGIN_CLIENT_CERT", "").encode()
    tls = _TLS(client_pem) if client_pem else None
    stop = threading.Event()
    broker = _Broker()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=64), options=_GRPC_OPTIONS)
    pbg.add_TaskDomainServicer_to_server(_Domain(env, broker, tls), server)
    hs = health.HealthServicer()
    hs.set("plugin", health_pb2.HealthCheckResponse.SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(hs, server)
    gpg.add_GRPCBrokerServicer_to_server(broker, server)
    gpg.add_GRPCControllerServicer_to_server(_Controller(stop), server)
    gpg.add_GRPCStdioServicer_to_server(_Stdio(stop), server)

    sockdir = tempfile.mkdtemp(prefix="prorl-plugin-", dir=os.environ.get("PLUGIN_UNIX_SOCKET_DIR") or None)
    sock = os.path.join(sockdir, "plugin.sock")
    addr = "unix:" + sock
    if (server.add_secure_port(addr, tls.server()) if tls else server.add_insecure_port(addr)) == 0:
        sys.stderr.write(f"cannot listen on {sock}\n")
        sys.exit(1)
    server.start()
    line = f"{CORE_PROTOCOL_VERSION}|{API_VERSION}|unix|{sock}|grpc|{tls.handshake if tls else ''}"
    sys.stdout.write(line + "\n")
    sys.stdout.flush()
    # After the handshake, stdout is the host's log too: a stray print()
    # must not look like protocol.
    sys.stdout = sys.stderr
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    env.log.debug("plugin serving", socket=sock)
    stop.wait()
    # The socket's file first: the host kills a plugin whose stop outlasts
    # its grace, and connections made do not need the name.
    try:
        os.unlink(sock)
        os.rmdir(sockdir)
    except OSError:
        pass
    broker.close()
    server.stop(grace=2).wait()


__all__ = ["describe", "serve"]
