from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Diagnostic(_message.Message):
    __slots__ = ("code", "message", "field")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    FIELD_FIELD_NUMBER: _ClassVar[int]
    code: str
    message: str
    field: str
    def __init__(self, code: _Optional[str] = ..., message: _Optional[str] = ..., field: _Optional[str] = ...) -> None: ...

class GetInfoRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ToolSpec(_message.Message):
    __slots__ = ("name", "description", "parameters_json", "builtin")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    PARAMETERS_JSON_FIELD_NUMBER: _ClassVar[int]
    BUILTIN_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    parameters_json: bytes
    builtin: str
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., parameters_json: _Optional[bytes] = ..., builtin: _Optional[str] = ...) -> None: ...

class DomainInfo(_message.Message):
    __slots__ = ("name", "version", "api_versions", "data_sources", "tools", "capabilities", "config_schema_json", "description")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    API_VERSIONS_FIELD_NUMBER: _ClassVar[int]
    DATA_SOURCES_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    CONFIG_SCHEMA_JSON_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    name: str
    version: str
    api_versions: _containers.RepeatedScalarFieldContainer[int]
    data_sources: _containers.RepeatedScalarFieldContainer[str]
    tools: _containers.RepeatedCompositeFieldContainer[ToolSpec]
    capabilities: _containers.RepeatedScalarFieldContainer[str]
    config_schema_json: bytes
    description: str
    def __init__(self, name: _Optional[str] = ..., version: _Optional[str] = ..., api_versions: _Optional[_Iterable[int]] = ..., data_sources: _Optional[_Iterable[str]] = ..., tools: _Optional[_Iterable[_Union[ToolSpec, _Mapping]]] = ..., capabilities: _Optional[_Iterable[str]] = ..., config_schema_json: _Optional[bytes] = ..., description: _Optional[str] = ...) -> None: ...

class ConfigureRequest(_message.Message):
    __slots__ = ("config_json", "host_services_broker_id", "host_instance")
    CONFIG_JSON_FIELD_NUMBER: _ClassVar[int]
    HOST_SERVICES_BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    HOST_INSTANCE_FIELD_NUMBER: _ClassVar[int]
    config_json: bytes
    host_services_broker_id: int
    host_instance: str
    def __init__(self, config_json: _Optional[bytes] = ..., host_services_broker_id: _Optional[int] = ..., host_instance: _Optional[str] = ...) -> None: ...

class ConfigureResponse(_message.Message):
    __slots__ = ("diagnostics",)
    DIAGNOSTICS_FIELD_NUMBER: _ClassVar[int]
    diagnostics: _containers.RepeatedCompositeFieldContainer[Diagnostic]
    def __init__(self, diagnostics: _Optional[_Iterable[_Union[Diagnostic, _Mapping]]] = ...) -> None: ...

class Message(_message.Message):
    __slots__ = ("role", "content", "tool_calls", "tool_call_id", "name")
    ROLE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    role: str
    content: str
    tool_calls: _containers.RepeatedCompositeFieldContainer[ToolCall]
    tool_call_id: str
    name: str
    def __init__(self, role: _Optional[str] = ..., content: _Optional[str] = ..., tool_calls: _Optional[_Iterable[_Union[ToolCall, _Mapping]]] = ..., tool_call_id: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class ToolCall(_message.Message):
    __slots__ = ("id", "name", "arguments_json")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_JSON_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    arguments_json: bytes
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., arguments_json: _Optional[bytes] = ...) -> None: ...

class SandboxSpec(_message.Message):
    __slots__ = ("image", "network", "env", "cpu_seconds", "memory_bytes", "max_processes", "max_file_bytes", "disk_bytes", "seccomp_allow", "writable")
    class EnvEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    NETWORK_FIELD_NUMBER: _ClassVar[int]
    ENV_FIELD_NUMBER: _ClassVar[int]
    CPU_SECONDS_FIELD_NUMBER: _ClassVar[int]
    MEMORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_PROCESSES_FIELD_NUMBER: _ClassVar[int]
    MAX_FILE_BYTES_FIELD_NUMBER: _ClassVar[int]
    DISK_BYTES_FIELD_NUMBER: _ClassVar[int]
    SECCOMP_ALLOW_FIELD_NUMBER: _ClassVar[int]
    WRITABLE_FIELD_NUMBER: _ClassVar[int]
    image: str
    network: bool
    env: _containers.ScalarMap[str, str]
    cpu_seconds: int
    memory_bytes: int
    max_processes: int
    max_file_bytes: int
    disk_bytes: int
    seccomp_allow: _containers.RepeatedScalarFieldContainer[str]
    writable: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, image: _Optional[str] = ..., network: _Optional[bool] = ..., env: _Optional[_Mapping[str, str]] = ..., cpu_seconds: _Optional[int] = ..., memory_bytes: _Optional[int] = ..., max_processes: _Optional[int] = ..., max_file_bytes: _Optional[int] = ..., disk_bytes: _Optional[int] = ..., seccomp_allow: _Optional[_Iterable[str]] = ..., writable: _Optional[_Iterable[str]] = ...) -> None: ...

class Limits(_message.Message):
    __slots__ = ("max_turns", "max_tokens_per_turn", "max_total_tokens")
    MAX_TURNS_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_PER_TURN_FIELD_NUMBER: _ClassVar[int]
    MAX_TOTAL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    max_turns: int
    max_tokens_per_turn: int
    max_total_tokens: int
    def __init__(self, max_turns: _Optional[int] = ..., max_tokens_per_turn: _Optional[int] = ..., max_total_tokens: _Optional[int] = ...) -> None: ...

class PrepareRequest(_message.Message):
    __slots__ = ("rollout_id", "task_json")
    ROLLOUT_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_JSON_FIELD_NUMBER: _ClassVar[int]
    rollout_id: str
    task_json: bytes
    def __init__(self, rollout_id: _Optional[str] = ..., task_json: _Optional[bytes] = ...) -> None: ...

class PrepareResponse(_message.Message):
    __slots__ = ("messages", "tools", "sandbox", "limits", "task_id", "diagnostics", "chat_template_kwargs_json", "eval_sandbox")
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    SANDBOX_FIELD_NUMBER: _ClassVar[int]
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    DIAGNOSTICS_FIELD_NUMBER: _ClassVar[int]
    CHAT_TEMPLATE_KWARGS_JSON_FIELD_NUMBER: _ClassVar[int]
    EVAL_SANDBOX_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[Message]
    tools: _containers.RepeatedScalarFieldContainer[str]
    sandbox: SandboxSpec
    limits: Limits
    task_id: str
    diagnostics: _containers.RepeatedCompositeFieldContainer[Diagnostic]
    chat_template_kwargs_json: bytes
    eval_sandbox: SandboxSpec
    def __init__(self, messages: _Optional[_Iterable[_Union[Message, _Mapping]]] = ..., tools: _Optional[_Iterable[str]] = ..., sandbox: _Optional[_Union[SandboxSpec, _Mapping]] = ..., limits: _Optional[_Union[Limits, _Mapping]] = ..., task_id: _Optional[str] = ..., diagnostics: _Optional[_Iterable[_Union[Diagnostic, _Mapping]]] = ..., chat_template_kwargs_json: _Optional[bytes] = ..., eval_sandbox: _Optional[_Union[SandboxSpec, _Mapping]] = ...) -> None: ...

class SetupRequest(_message.Message):
    __slots__ = ("rollout_id", "task_json", "sandbox_id")
    ROLLOUT_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_JSON_FIELD_NUMBER: _ClassVar[int]
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    rollout_id: str
    task_json: bytes
    sandbox_id: str
    def __init__(self, rollout_id: _Optional[str] = ..., task_json: _Optional[bytes] = ..., sandbox_id: _Optional[str] = ...) -> None: ...

class SetupResponse(_message.Message):
    __slots__ = ("diagnostics",)
    DIAGNOSTICS_FIELD_NUMBER: _ClassVar[int]
    diagnostics: _containers.RepeatedCompositeFieldContainer[Diagnostic]
    def __init__(self, diagnostics: _Optional[_Iterable[_Union[Diagnostic, _Mapping]]] = ...) -> None: ...

class CallToolRequest(_message.Message):
    __slots__ = ("rollout_id", "task_json", "sandbox_id", "call")
    ROLLOUT_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_JSON_FIELD_NUMBER: _ClassVar[int]
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    CALL_FIELD_NUMBER: _ClassVar[int]
    rollout_id: str
    task_json: bytes
    sandbox_id: str
    call: ToolCall
    def __init__(self, rollout_id: _Optional[str] = ..., task_json: _Optional[bytes] = ..., sandbox_id: _Optional[str] = ..., call: _Optional[_Union[ToolCall, _Mapping]] = ...) -> None: ...

class CallToolResponse(_message.Message):
    __slots__ = ("output", "done", "final_response", "is_error", "diagnostics")
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    FINAL_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    IS_ERROR_FIELD_NUMBER: _ClassVar[int]
    DIAGNOSTICS_FIELD_NUMBER: _ClassVar[int]
    output: str
    done: bool
    final_response: str
    is_error: bool
    diagnostics: _containers.RepeatedCompositeFieldContainer[Diagnostic]
    def __init__(self, output: _Optional[str] = ..., done: _Optional[bool] = ..., final_response: _Optional[str] = ..., is_error: _Optional[bool] = ..., diagnostics: _Optional[_Iterable[_Union[Diagnostic, _Mapping]]] = ...) -> None: ...

class EvaluateRequest(_message.Message):
    __slots__ = ("rollout_id", "task_json", "sandbox_id", "final_response", "messages", "end_reason", "eval_sandbox_id")
    ROLLOUT_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_JSON_FIELD_NUMBER: _ClassVar[int]
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    FINAL_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    END_REASON_FIELD_NUMBER: _ClassVar[int]
    EVAL_SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    rollout_id: str
    task_json: bytes
    sandbox_id: str
    final_response: str
    messages: _containers.RepeatedCompositeFieldContainer[Message]
    end_reason: str
    eval_sandbox_id: str
    def __init__(self, rollout_id: _Optional[str] = ..., task_json: _Optional[bytes] = ..., sandbox_id: _Optional[str] = ..., final_response: _Optional[str] = ..., messages: _Optional[_Iterable[_Union[Message, _Mapping]]] = ..., end_reason: _Optional[str] = ..., eval_sandbox_id: _Optional[str] = ...) -> None: ...

class EvaluateResponse(_message.Message):
    __slots__ = ("reward", "resolved", "metrics", "info_json", "diagnostics")
    class MetricsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    REWARD_FIELD_NUMBER: _ClassVar[int]
    RESOLVED_FIELD_NUMBER: _ClassVar[int]
    METRICS_FIELD_NUMBER: _ClassVar[int]
    INFO_JSON_FIELD_NUMBER: _ClassVar[int]
    DIAGNOSTICS_FIELD_NUMBER: _ClassVar[int]
    reward: float
    resolved: bool
    metrics: _containers.ScalarMap[str, float]
    info_json: bytes
    diagnostics: _containers.RepeatedCompositeFieldContainer[Diagnostic]
    def __init__(self, reward: _Optional[float] = ..., resolved: _Optional[bool] = ..., metrics: _Optional[_Mapping[str, float]] = ..., info_json: _Optional[bytes] = ..., diagnostics: _Optional[_Iterable[_Union[Diagnostic, _Mapping]]] = ...) -> None: ...

class PrepareBatchRequest(_message.Message):
    __slots__ = ("requests",)
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    requests: _containers.RepeatedCompositeFieldContainer[PrepareRequest]
    def __init__(self, requests: _Optional[_Iterable[_Union[PrepareRequest, _Mapping]]] = ...) -> None: ...

class PrepareBatchItem(_message.Message):
    __slots__ = ("index", "response")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    index: int
    response: PrepareResponse
    def __init__(self, index: _Optional[int] = ..., response: _Optional[_Union[PrepareResponse, _Mapping]] = ...) -> None: ...

class EvaluateBatchRequest(_message.Message):
    __slots__ = ("requests",)
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    requests: _containers.RepeatedCompositeFieldContainer[EvaluateRequest]
    def __init__(self, requests: _Optional[_Iterable[_Union[EvaluateRequest, _Mapping]]] = ...) -> None: ...

class EvaluateBatchItem(_message.Message):
    __slots__ = ("index", "response")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    index: int
    response: EvaluateResponse
    def __init__(self, index: _Optional[int] = ..., response: _Optional[_Union[EvaluateResponse, _Mapping]] = ...) -> None: ...

class ReleaseRequest(_message.Message):
    __slots__ = ("rollout_id",)
    ROLLOUT_ID_FIELD_NUMBER: _ClassVar[int]
    rollout_id: str
    def __init__(self, rollout_id: _Optional[str] = ...) -> None: ...

class ReleaseResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ExecRequest(_message.Message):
    __slots__ = ("sandbox_id", "argv", "session", "command", "timeout_ms", "stdin", "workdir", "env")
    class EnvEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    ARGV_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    STDIN_FIELD_NUMBER: _ClassVar[int]
    WORKDIR_FIELD_NUMBER: _ClassVar[int]
    ENV_FIELD_NUMBER: _ClassVar[int]
    sandbox_id: str
    argv: _containers.RepeatedScalarFieldContainer[str]
    session: bool
    command: str
    timeout_ms: int
    stdin: bytes
    workdir: str
    env: _containers.ScalarMap[str, str]
    def __init__(self, sandbox_id: _Optional[str] = ..., argv: _Optional[_Iterable[str]] = ..., session: _Optional[bool] = ..., command: _Optional[str] = ..., timeout_ms: _Optional[int] = ..., stdin: _Optional[bytes] = ..., workdir: _Optional[str] = ..., env: _Optional[_Mapping[str, str]] = ...) -> None: ...

class ExecChunk(_message.Message):
    __slots__ = ("stdout", "stderr", "exited", "exit_code", "timed_out", "error", "truncated")
    STDOUT_FIELD_NUMBER: _ClassVar[int]
    STDERR_FIELD_NUMBER: _ClassVar[int]
    EXITED_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    TIMED_OUT_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    stdout: bytes
    stderr: bytes
    exited: bool
    exit_code: int
    timed_out: bool
    error: str
    truncated: bool
    def __init__(self, stdout: _Optional[bytes] = ..., stderr: _Optional[bytes] = ..., exited: _Optional[bool] = ..., exit_code: _Optional[int] = ..., timed_out: _Optional[bool] = ..., error: _Optional[str] = ..., truncated: _Optional[bool] = ...) -> None: ...

class ReadFileRequest(_message.Message):
    __slots__ = ("sandbox_id", "path", "max_bytes")
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    sandbox_id: str
    path: str
    max_bytes: int
    def __init__(self, sandbox_id: _Optional[str] = ..., path: _Optional[str] = ..., max_bytes: _Optional[int] = ...) -> None: ...

class ReadFileResponse(_message.Message):
    __slots__ = ("data", "truncated", "error")
    DATA_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    truncated: bool
    error: str
    def __init__(self, data: _Optional[bytes] = ..., truncated: _Optional[bool] = ..., error: _Optional[str] = ...) -> None: ...

class WriteFileRequest(_message.Message):
    __slots__ = ("sandbox_id", "path", "data", "mode")
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    sandbox_id: str
    path: str
    data: bytes
    mode: int
    def __init__(self, sandbox_id: _Optional[str] = ..., path: _Optional[str] = ..., data: _Optional[bytes] = ..., mode: _Optional[int] = ...) -> None: ...

class WriteFileResponse(_message.Message):
    __slots__ = ("error",)
    ERROR_FIELD_NUMBER: _ClassVar[int]
    error: str
    def __init__(self, error: _Optional[str] = ...) -> None: ...

class ListDirRequest(_message.Message):
    __slots__ = ("sandbox_id", "path")
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    sandbox_id: str
    path: str
    def __init__(self, sandbox_id: _Optional[str] = ..., path: _Optional[str] = ...) -> None: ...

class DirEntry(_message.Message):
    __slots__ = ("name", "dir", "size", "mode")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DIR_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    name: str
    dir: bool
    size: int
    mode: int
    def __init__(self, name: _Optional[str] = ..., dir: _Optional[bool] = ..., size: _Optional[int] = ..., mode: _Optional[int] = ...) -> None: ...

class ListDirResponse(_message.Message):
    __slots__ = ("entries", "error")
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[DirEntry]
    error: str
    def __init__(self, entries: _Optional[_Iterable[_Union[DirEntry, _Mapping]]] = ..., error: _Optional[str] = ...) -> None: ...
