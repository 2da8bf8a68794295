import datetime

from agentcanvas.v1 import common_pb2 as _common_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TextDelivery(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TEXT_DELIVERY_UNSPECIFIED: _ClassVar[TextDelivery]
    TEXT_DELIVERY_LIVE: _ClassVar[TextDelivery]
    TEXT_DELIVERY_CONFIRMED: _ClassVar[TextDelivery]
TEXT_DELIVERY_UNSPECIFIED: TextDelivery
TEXT_DELIVERY_LIVE: TextDelivery
TEXT_DELIVERY_CONFIRMED: TextDelivery

class RunCanvasRequest(_message.Message):
    __slots__ = ("canvas_id", "dsl", "dsl_json", "revision_id", "query", "inputs", "files", "session_id", "user_id", "request_id", "resume_run_id", "webhook_payload", "text_delivery")
    CANVAS_ID_FIELD_NUMBER: _ClassVar[int]
    DSL_FIELD_NUMBER: _ClassVar[int]
    DSL_JSON_FIELD_NUMBER: _ClassVar[int]
    REVISION_ID_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    INPUTS_FIELD_NUMBER: _ClassVar[int]
    FILES_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    RESUME_RUN_ID_FIELD_NUMBER: _ClassVar[int]
    WEBHOOK_PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    TEXT_DELIVERY_FIELD_NUMBER: _ClassVar[int]
    canvas_id: str
    dsl: _struct_pb2.Struct
    dsl_json: str
    revision_id: str
    query: str
    inputs: _struct_pb2.Struct
    files: _containers.RepeatedCompositeFieldContainer[_common_pb2.InputFile]
    session_id: str
    user_id: str
    request_id: str
    resume_run_id: str
    webhook_payload: _struct_pb2.Struct
    text_delivery: TextDelivery
    def __init__(self, canvas_id: _Optional[str] = ..., dsl: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., dsl_json: _Optional[str] = ..., revision_id: _Optional[str] = ..., query: _Optional[str] = ..., inputs: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., files: _Optional[_Iterable[_Union[_common_pb2.InputFile, _Mapping]]] = ..., session_id: _Optional[str] = ..., user_id: _Optional[str] = ..., request_id: _Optional[str] = ..., resume_run_id: _Optional[str] = ..., webhook_payload: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., text_delivery: _Optional[_Union[TextDelivery, str]] = ...) -> None: ...

class StreamRunEventsRequest(_message.Message):
    __slots__ = ("run_id", "after_seq", "text_delivery")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    AFTER_SEQ_FIELD_NUMBER: _ClassVar[int]
    TEXT_DELIVERY_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    after_seq: int
    text_delivery: TextDelivery
    def __init__(self, run_id: _Optional[str] = ..., after_seq: _Optional[int] = ..., text_delivery: _Optional[_Union[TextDelivery, str]] = ...) -> None: ...

class CancelRunRequest(_message.Message):
    __slots__ = ("run_id",)
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    def __init__(self, run_id: _Optional[str] = ...) -> None: ...

class GetRunRequest(_message.Message):
    __slots__ = ("run_id",)
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    def __init__(self, run_id: _Optional[str] = ...) -> None: ...

class Run(_message.Message):
    __slots__ = ("id", "canvas_id", "revision_id", "session_id", "status", "outputs", "error", "usage", "last_seq", "create_time", "update_time")
    ID_FIELD_NUMBER: _ClassVar[int]
    CANVAS_ID_FIELD_NUMBER: _ClassVar[int]
    REVISION_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    OUTPUTS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    LAST_SEQ_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    id: str
    canvas_id: str
    revision_id: str
    session_id: str
    status: _common_pb2.RunStatus
    outputs: _struct_pb2.Struct
    error: _common_pb2.ErrorDetail
    usage: _common_pb2.TokenUsage
    last_seq: int
    create_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    def __init__(self, id: _Optional[str] = ..., canvas_id: _Optional[str] = ..., revision_id: _Optional[str] = ..., session_id: _Optional[str] = ..., status: _Optional[_Union[_common_pb2.RunStatus, str]] = ..., outputs: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., error: _Optional[_Union[_common_pb2.ErrorDetail, _Mapping]] = ..., usage: _Optional[_Union[_common_pb2.TokenUsage, _Mapping]] = ..., last_seq: _Optional[int] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ValidateCanvasRequest(_message.Message):
    __slots__ = ("canvas_id", "dsl", "dsl_json")
    CANVAS_ID_FIELD_NUMBER: _ClassVar[int]
    DSL_FIELD_NUMBER: _ClassVar[int]
    DSL_JSON_FIELD_NUMBER: _ClassVar[int]
    canvas_id: str
    dsl: _struct_pb2.Struct
    dsl_json: str
    def __init__(self, canvas_id: _Optional[str] = ..., dsl: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., dsl_json: _Optional[str] = ...) -> None: ...

class CanvasProblem(_message.Message):
    __slots__ = ("component_id", "field", "code", "message")
    COMPONENT_ID_FIELD_NUMBER: _ClassVar[int]
    FIELD_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    component_id: str
    field: str
    code: str
    message: str
    def __init__(self, component_id: _Optional[str] = ..., field: _Optional[str] = ..., code: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class ValidateCanvasResponse(_message.Message):
    __slots__ = ("valid", "problems", "normalized_dsl", "normalized_dsl_json")
    VALID_FIELD_NUMBER: _ClassVar[int]
    PROBLEMS_FIELD_NUMBER: _ClassVar[int]
    NORMALIZED_DSL_FIELD_NUMBER: _ClassVar[int]
    NORMALIZED_DSL_JSON_FIELD_NUMBER: _ClassVar[int]
    valid: bool
    problems: _containers.RepeatedCompositeFieldContainer[CanvasProblem]
    normalized_dsl: _struct_pb2.Struct
    normalized_dsl_json: str
    def __init__(self, valid: _Optional[bool] = ..., problems: _Optional[_Iterable[_Union[CanvasProblem, _Mapping]]] = ..., normalized_dsl: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., normalized_dsl_json: _Optional[str] = ...) -> None: ...

class RunEventBatch(_message.Message):
    __slots__ = ("events",)
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[RunEvent]
    def __init__(self, events: _Optional[_Iterable[_Union[RunEvent, _Mapping]]] = ...) -> None: ...

class RunEvent(_message.Message):
    __slots__ = ("run_id", "session_id", "seq", "created_at_ms", "trace_id", "workflow_started", "node_started", "node_finished", "node_skipped", "message_delta", "think_start", "think_delta", "think_end", "message_end", "user_inputs_required", "workflow_finished", "heartbeat", "message_reset", "event_unreadable", "warning")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_STARTED_FIELD_NUMBER: _ClassVar[int]
    NODE_STARTED_FIELD_NUMBER: _ClassVar[int]
    NODE_FINISHED_FIELD_NUMBER: _ClassVar[int]
    NODE_SKIPPED_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_DELTA_FIELD_NUMBER: _ClassVar[int]
    THINK_START_FIELD_NUMBER: _ClassVar[int]
    THINK_DELTA_FIELD_NUMBER: _ClassVar[int]
    THINK_END_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_END_FIELD_NUMBER: _ClassVar[int]
    USER_INPUTS_REQUIRED_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_FINISHED_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_RESET_FIELD_NUMBER: _ClassVar[int]
    EVENT_UNREADABLE_FIELD_NUMBER: _ClassVar[int]
    WARNING_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    session_id: str
    seq: int
    created_at_ms: int
    trace_id: str
    workflow_started: WorkflowStarted
    node_started: NodeStarted
    node_finished: NodeFinished
    node_skipped: NodeSkipped
    message_delta: MessageDelta
    think_start: ThinkStart
    think_delta: ThinkDelta
    think_end: ThinkEnd
    message_end: MessageEnd
    user_inputs_required: UserInputsRequired
    workflow_finished: WorkflowFinished
    heartbeat: Heartbeat
    message_reset: MessageReset
    event_unreadable: EventUnreadable
    warning: RunWarning
    def __init__(self, run_id: _Optional[str] = ..., session_id: _Optional[str] = ..., seq: _Optional[int] = ..., created_at_ms: _Optional[int] = ..., trace_id: _Optional[str] = ..., workflow_started: _Optional[_Union[WorkflowStarted, _Mapping]] = ..., node_started: _Optional[_Union[NodeStarted, _Mapping]] = ..., node_finished: _Optional[_Union[NodeFinished, _Mapping]] = ..., node_skipped: _Optional[_Union[NodeSkipped, _Mapping]] = ..., message_delta: _Optional[_Union[MessageDelta, _Mapping]] = ..., think_start: _Optional[_Union[ThinkStart, _Mapping]] = ..., think_delta: _Optional[_Union[ThinkDelta, _Mapping]] = ..., think_end: _Optional[_Union[ThinkEnd, _Mapping]] = ..., message_end: _Optional[_Union[MessageEnd, _Mapping]] = ..., user_inputs_required: _Optional[_Union[UserInputsRequired, _Mapping]] = ..., workflow_finished: _Optional[_Union[WorkflowFinished, _Mapping]] = ..., heartbeat: _Optional[_Union[Heartbeat, _Mapping]] = ..., message_reset: _Optional[_Union[MessageReset, _Mapping]] = ..., event_unreadable: _Optional[_Union[EventUnreadable, _Mapping]] = ..., warning: _Optional[_Union[RunWarning, _Mapping]] = ...) -> None: ...

class MessageReset(_message.Message):
    __slots__ = ("component_id", "attempt")
    COMPONENT_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    component_id: str
    attempt: int
    def __init__(self, component_id: _Optional[str] = ..., attempt: _Optional[int] = ...) -> None: ...

class EventUnreadable(_message.Message):
    __slots__ = ("error",)
    ERROR_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.ErrorDetail
    def __init__(self, error: _Optional[_Union[_common_pb2.ErrorDetail, _Mapping]] = ...) -> None: ...

class RunWarning(_message.Message):
    __slots__ = ("component_id", "code", "message", "references")
    COMPONENT_ID_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    REFERENCES_FIELD_NUMBER: _ClassVar[int]
    component_id: str
    code: str
    message: str
    references: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, component_id: _Optional[str] = ..., code: _Optional[str] = ..., message: _Optional[str] = ..., references: _Optional[_Iterable[str]] = ...) -> None: ...

class WorkflowStarted(_message.Message):
    __slots__ = ("inputs", "canvas_id", "revision_id", "resumed", "query")
    INPUTS_FIELD_NUMBER: _ClassVar[int]
    CANVAS_ID_FIELD_NUMBER: _ClassVar[int]
    REVISION_ID_FIELD_NUMBER: _ClassVar[int]
    RESUMED_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    inputs: _struct_pb2.Struct
    canvas_id: str
    revision_id: str
    resumed: bool
    query: str
    def __init__(self, inputs: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., canvas_id: _Optional[str] = ..., revision_id: _Optional[str] = ..., resumed: _Optional[bool] = ..., query: _Optional[str] = ...) -> None: ...

class NodeStarted(_message.Message):
    __slots__ = ("component_id", "component_name", "component_type", "parent_id", "thoughts", "attempt")
    COMPONENT_ID_FIELD_NUMBER: _ClassVar[int]
    COMPONENT_NAME_FIELD_NUMBER: _ClassVar[int]
    COMPONENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    PARENT_ID_FIELD_NUMBER: _ClassVar[int]
    THOUGHTS_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    component_id: str
    component_name: str
    component_type: str
    parent_id: str
    thoughts: str
    attempt: int
    def __init__(self, component_id: _Optional[str] = ..., component_name: _Optional[str] = ..., component_type: _Optional[str] = ..., parent_id: _Optional[str] = ..., thoughts: _Optional[str] = ..., attempt: _Optional[int] = ...) -> None: ...

class NodeFinished(_message.Message):
    __slots__ = ("component_id", "component_name", "component_type", "parent_id", "inputs", "outputs", "error", "elapsed_ms", "next", "branch", "attempt")
    COMPONENT_ID_FIELD_NUMBER: _ClassVar[int]
    COMPONENT_NAME_FIELD_NUMBER: _ClassVar[int]
    COMPONENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    PARENT_ID_FIELD_NUMBER: _ClassVar[int]
    INPUTS_FIELD_NUMBER: _ClassVar[int]
    OUTPUTS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ELAPSED_MS_FIELD_NUMBER: _ClassVar[int]
    NEXT_FIELD_NUMBER: _ClassVar[int]
    BRANCH_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    component_id: str
    component_name: str
    component_type: str
    parent_id: str
    inputs: _struct_pb2.Struct
    outputs: _struct_pb2.Struct
    error: _common_pb2.ErrorDetail
    elapsed_ms: int
    next: _containers.RepeatedScalarFieldContainer[str]
    branch: str
    attempt: int
    def __init__(self, component_id: _Optional[str] = ..., component_name: _Optional[str] = ..., component_type: _Optional[str] = ..., parent_id: _Optional[str] = ..., inputs: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., outputs: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., error: _Optional[_Union[_common_pb2.ErrorDetail, _Mapping]] = ..., elapsed_ms: _Optional[int] = ..., next: _Optional[_Iterable[str]] = ..., branch: _Optional[str] = ..., attempt: _Optional[int] = ...) -> None: ...

class NodeSkipped(_message.Message):
    __slots__ = ("component_id", "component_type", "reason")
    COMPONENT_ID_FIELD_NUMBER: _ClassVar[int]
    COMPONENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    component_id: str
    component_type: str
    reason: str
    def __init__(self, component_id: _Optional[str] = ..., component_type: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class MessageDelta(_message.Message):
    __slots__ = ("component_id", "content")
    COMPONENT_ID_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    component_id: str
    content: str
    def __init__(self, component_id: _Optional[str] = ..., content: _Optional[str] = ...) -> None: ...

class ThinkStart(_message.Message):
    __slots__ = ("component_id",)
    COMPONENT_ID_FIELD_NUMBER: _ClassVar[int]
    component_id: str
    def __init__(self, component_id: _Optional[str] = ...) -> None: ...

class ThinkDelta(_message.Message):
    __slots__ = ("component_id", "content")
    COMPONENT_ID_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    component_id: str
    content: str
    def __init__(self, component_id: _Optional[str] = ..., content: _Optional[str] = ...) -> None: ...

class ThinkEnd(_message.Message):
    __slots__ = ("component_id", "truncated")
    COMPONENT_ID_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    component_id: str
    truncated: bool
    def __init__(self, component_id: _Optional[str] = ..., truncated: _Optional[bool] = ...) -> None: ...

class Download(_message.Message):
    __slots__ = ("doc_id", "filename", "mime_type", "size", "base64")
    DOC_ID_FIELD_NUMBER: _ClassVar[int]
    FILENAME_FIELD_NUMBER: _ClassVar[int]
    MIME_TYPE_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    BASE64_FIELD_NUMBER: _ClassVar[int]
    doc_id: str
    filename: str
    mime_type: str
    size: int
    base64: str
    def __init__(self, doc_id: _Optional[str] = ..., filename: _Optional[str] = ..., mime_type: _Optional[str] = ..., size: _Optional[int] = ..., base64: _Optional[str] = ...) -> None: ...

class MessageEnd(_message.Message):
    __slots__ = ("component_id", "content", "reference", "downloads", "status", "attachment")
    COMPONENT_ID_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    REFERENCE_FIELD_NUMBER: _ClassVar[int]
    DOWNLOADS_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ATTACHMENT_FIELD_NUMBER: _ClassVar[int]
    component_id: str
    content: str
    reference: _struct_pb2.Struct
    downloads: _containers.RepeatedCompositeFieldContainer[Download]
    status: str
    attachment: _struct_pb2.Struct
    def __init__(self, component_id: _Optional[str] = ..., content: _Optional[str] = ..., reference: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., downloads: _Optional[_Iterable[_Union[Download, _Mapping]]] = ..., status: _Optional[str] = ..., attachment: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class UserInputsRequired(_message.Message):
    __slots__ = ("component_id", "inputs", "tips")
    COMPONENT_ID_FIELD_NUMBER: _ClassVar[int]
    INPUTS_FIELD_NUMBER: _ClassVar[int]
    TIPS_FIELD_NUMBER: _ClassVar[int]
    component_id: str
    inputs: _struct_pb2.Struct
    tips: str
    def __init__(self, component_id: _Optional[str] = ..., inputs: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., tips: _Optional[str] = ...) -> None: ...

class WorkflowFinished(_message.Message):
    __slots__ = ("status", "outputs", "error", "usage", "elapsed_ms")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    OUTPUTS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    ELAPSED_MS_FIELD_NUMBER: _ClassVar[int]
    status: _common_pb2.RunStatus
    outputs: _struct_pb2.Struct
    error: _common_pb2.ErrorDetail
    usage: _common_pb2.TokenUsage
    elapsed_ms: int
    def __init__(self, status: _Optional[_Union[_common_pb2.RunStatus, str]] = ..., outputs: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., error: _Optional[_Union[_common_pb2.ErrorDetail, _Mapping]] = ..., usage: _Optional[_Union[_common_pb2.TokenUsage, _Mapping]] = ..., elapsed_ms: _Optional[int] = ...) -> None: ...

class Heartbeat(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...
