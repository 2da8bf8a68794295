from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ExecMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EXEC_MODE_UNSPECIFIED: _ClassVar[ExecMode]
    EXEC_MODE_MAIN_FUNCTION: _ClassVar[ExecMode]
    EXEC_MODE_SCRIPT: _ClassVar[ExecMode]

class ExitReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EXIT_REASON_UNSPECIFIED: _ClassVar[ExitReason]
    EXIT_REASON_OK: _ClassVar[ExitReason]
    EXIT_REASON_ERROR: _ClassVar[ExitReason]
    EXIT_REASON_TIMEOUT: _ClassVar[ExitReason]
    EXIT_REASON_MEMORY: _ClassVar[ExitReason]
    EXIT_REASON_OUTPUT_LIMIT: _ClassVar[ExitReason]
    EXIT_REASON_KILLED: _ClassVar[ExitReason]
EXEC_MODE_UNSPECIFIED: ExecMode
EXEC_MODE_MAIN_FUNCTION: ExecMode
EXEC_MODE_SCRIPT: ExecMode
EXIT_REASON_UNSPECIFIED: ExitReason
EXIT_REASON_OK: ExitReason
EXIT_REASON_ERROR: ExitReason
EXIT_REASON_TIMEOUT: ExitReason
EXIT_REASON_MEMORY: ExitReason
EXIT_REASON_OUTPUT_LIMIT: ExitReason
EXIT_REASON_KILLED: ExitReason

class ResourceLimits(_message.Message):
    __slots__ = ("wall_time_ms", "cpu_time_ms", "memory_bytes", "pids", "output_bytes", "file_size_bytes", "open_files")
    WALL_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    CPU_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    MEMORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    PIDS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_BYTES_FIELD_NUMBER: _ClassVar[int]
    FILE_SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    OPEN_FILES_FIELD_NUMBER: _ClassVar[int]
    wall_time_ms: int
    cpu_time_ms: int
    memory_bytes: int
    pids: int
    output_bytes: int
    file_size_bytes: int
    open_files: int
    def __init__(self, wall_time_ms: _Optional[int] = ..., cpu_time_ms: _Optional[int] = ..., memory_bytes: _Optional[int] = ..., pids: _Optional[int] = ..., output_bytes: _Optional[int] = ..., file_size_bytes: _Optional[int] = ..., open_files: _Optional[int] = ...) -> None: ...

class ExecuteRequest(_message.Message):
    __slots__ = ("language", "code", "arguments", "mode", "limits", "request_id")
    LANGUAGE_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    language: str
    code: str
    arguments: _struct_pb2.Struct
    mode: ExecMode
    limits: ResourceLimits
    request_id: str
    def __init__(self, language: _Optional[str] = ..., code: _Optional[str] = ..., arguments: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., mode: _Optional[_Union[ExecMode, str]] = ..., limits: _Optional[_Union[ResourceLimits, _Mapping]] = ..., request_id: _Optional[str] = ...) -> None: ...

class ExecEvent(_message.Message):
    __slots__ = ("started", "stdout", "stderr", "result", "artifact", "exit")
    STARTED_FIELD_NUMBER: _ClassVar[int]
    STDOUT_FIELD_NUMBER: _ClassVar[int]
    STDERR_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    ARTIFACT_FIELD_NUMBER: _ClassVar[int]
    EXIT_FIELD_NUMBER: _ClassVar[int]
    started: ExecStarted
    stdout: OutputChunk
    stderr: OutputChunk
    result: ExecResult
    artifact: Artifact
    exit: ExecExit
    def __init__(self, started: _Optional[_Union[ExecStarted, _Mapping]] = ..., stdout: _Optional[_Union[OutputChunk, _Mapping]] = ..., stderr: _Optional[_Union[OutputChunk, _Mapping]] = ..., result: _Optional[_Union[ExecResult, _Mapping]] = ..., artifact: _Optional[_Union[Artifact, _Mapping]] = ..., exit: _Optional[_Union[ExecExit, _Mapping]] = ...) -> None: ...

class ExecStarted(_message.Message):
    __slots__ = ("job_id", "backend", "language", "runtime_version", "request_id")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    LANGUAGE_FIELD_NUMBER: _ClassVar[int]
    RUNTIME_VERSION_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    backend: str
    language: str
    runtime_version: str
    request_id: str
    def __init__(self, job_id: _Optional[str] = ..., backend: _Optional[str] = ..., language: _Optional[str] = ..., runtime_version: _Optional[str] = ..., request_id: _Optional[str] = ...) -> None: ...

class OutputChunk(_message.Message):
    __slots__ = ("data",)
    DATA_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    def __init__(self, data: _Optional[bytes] = ...) -> None: ...

class ExecResult(_message.Message):
    __slots__ = ("value", "json")
    VALUE_FIELD_NUMBER: _ClassVar[int]
    JSON_FIELD_NUMBER: _ClassVar[int]
    value: _struct_pb2.Value
    json: str
    def __init__(self, value: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., json: _Optional[str] = ...) -> None: ...

class Artifact(_message.Message):
    __slots__ = ("name", "mime_type", "size", "content", "truncated")
    NAME_FIELD_NUMBER: _ClassVar[int]
    MIME_TYPE_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    name: str
    mime_type: str
    size: int
    content: bytes
    truncated: bool
    def __init__(self, name: _Optional[str] = ..., mime_type: _Optional[str] = ..., size: _Optional[int] = ..., content: _Optional[bytes] = ..., truncated: _Optional[bool] = ...) -> None: ...

class ExecExit(_message.Message):
    __slots__ = ("code", "signal", "reason", "message", "wall_time_ms", "output_truncated")
    CODE_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    WALL_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    code: int
    signal: int
    reason: ExitReason
    message: str
    wall_time_ms: int
    output_truncated: bool
    def __init__(self, code: _Optional[int] = ..., signal: _Optional[int] = ..., reason: _Optional[_Union[ExitReason, str]] = ..., message: _Optional[str] = ..., wall_time_ms: _Optional[int] = ..., output_truncated: _Optional[bool] = ...) -> None: ...

class ListRuntimesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Runtime(_message.Message):
    __slots__ = ("language", "aliases", "version", "backend")
    LANGUAGE_FIELD_NUMBER: _ClassVar[int]
    ALIASES_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    language: str
    aliases: _containers.RepeatedScalarFieldContainer[str]
    version: str
    backend: str
    def __init__(self, language: _Optional[str] = ..., aliases: _Optional[_Iterable[str]] = ..., version: _Optional[str] = ..., backend: _Optional[str] = ...) -> None: ...

class ListRuntimesResponse(_message.Message):
    __slots__ = ("runtimes",)
    RUNTIMES_FIELD_NUMBER: _ClassVar[int]
    runtimes: _containers.RepeatedCompositeFieldContainer[Runtime]
    def __init__(self, runtimes: _Optional[_Iterable[_Union[Runtime, _Mapping]]] = ...) -> None: ...
