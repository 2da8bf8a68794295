import datetime

from agentcanvas.v1 import common_pb2 as _common_pb2
from google.protobuf import field_mask_pb2 as _field_mask_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CanvasPermission(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CANVAS_PERMISSION_UNSPECIFIED: _ClassVar[CanvasPermission]
    CANVAS_PERMISSION_ME: _ClassVar[CanvasPermission]
    CANVAS_PERMISSION_TEAM: _ClassVar[CanvasPermission]

class CanvasCategory(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CANVAS_CATEGORY_UNSPECIFIED: _ClassVar[CanvasCategory]
    CANVAS_CATEGORY_AGENT: _ClassVar[CanvasCategory]
    CANVAS_CATEGORY_DATAFLOW: _ClassVar[CanvasCategory]
CANVAS_PERMISSION_UNSPECIFIED: CanvasPermission
CANVAS_PERMISSION_ME: CanvasPermission
CANVAS_PERMISSION_TEAM: CanvasPermission
CANVAS_CATEGORY_UNSPECIFIED: CanvasCategory
CANVAS_CATEGORY_AGENT: CanvasCategory
CANVAS_CATEGORY_DATAFLOW: CanvasCategory

class Canvas(_message.Message):
    __slots__ = ("name", "id", "tenant_id", "owner_id", "title", "description", "avatar", "permission", "release", "category", "tags", "dsl", "etag", "create_time", "update_time", "head_revision_id", "published_revision_id", "delete_time", "expire_time", "dsl_json")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    OWNER_ID_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    AVATAR_FIELD_NUMBER: _ClassVar[int]
    PERMISSION_FIELD_NUMBER: _ClassVar[int]
    RELEASE_FIELD_NUMBER: _ClassVar[int]
    CATEGORY_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    DSL_FIELD_NUMBER: _ClassVar[int]
    ETAG_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    HEAD_REVISION_ID_FIELD_NUMBER: _ClassVar[int]
    PUBLISHED_REVISION_ID_FIELD_NUMBER: _ClassVar[int]
    DELETE_TIME_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    DSL_JSON_FIELD_NUMBER: _ClassVar[int]
    name: str
    id: str
    tenant_id: str
    owner_id: str
    title: str
    description: str
    avatar: str
    permission: CanvasPermission
    release: bool
    category: CanvasCategory
    tags: _containers.RepeatedScalarFieldContainer[str]
    dsl: _struct_pb2.Struct
    etag: str
    create_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    head_revision_id: str
    published_revision_id: str
    delete_time: _timestamp_pb2.Timestamp
    expire_time: _timestamp_pb2.Timestamp
    dsl_json: str
    def __init__(self, name: _Optional[str] = ..., id: _Optional[str] = ..., tenant_id: _Optional[str] = ..., owner_id: _Optional[str] = ..., title: _Optional[str] = ..., description: _Optional[str] = ..., avatar: _Optional[str] = ..., permission: _Optional[_Union[CanvasPermission, str]] = ..., release: _Optional[bool] = ..., category: _Optional[_Union[CanvasCategory, str]] = ..., tags: _Optional[_Iterable[str]] = ..., dsl: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., etag: _Optional[str] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., head_revision_id: _Optional[str] = ..., published_revision_id: _Optional[str] = ..., delete_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., expire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., dsl_json: _Optional[str] = ...) -> None: ...

class CanvasRevision(_message.Message):
    __slots__ = ("name", "id", "canvas_id", "dsl", "content_hash", "create_time", "alternate_ids", "released", "author_id", "description", "dsl_json")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    CANVAS_ID_FIELD_NUMBER: _ClassVar[int]
    DSL_FIELD_NUMBER: _ClassVar[int]
    CONTENT_HASH_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    ALTERNATE_IDS_FIELD_NUMBER: _ClassVar[int]
    RELEASED_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_ID_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    DSL_JSON_FIELD_NUMBER: _ClassVar[int]
    name: str
    id: str
    canvas_id: str
    dsl: _struct_pb2.Struct
    content_hash: str
    create_time: _timestamp_pb2.Timestamp
    alternate_ids: _containers.RepeatedScalarFieldContainer[str]
    released: bool
    author_id: str
    description: str
    dsl_json: str
    def __init__(self, name: _Optional[str] = ..., id: _Optional[str] = ..., canvas_id: _Optional[str] = ..., dsl: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., content_hash: _Optional[str] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., alternate_ids: _Optional[_Iterable[str]] = ..., released: _Optional[bool] = ..., author_id: _Optional[str] = ..., description: _Optional[str] = ..., dsl_json: _Optional[str] = ...) -> None: ...

class CanvasTemplate(_message.Message):
    __slots__ = ("name", "id", "title", "description", "canvas_type", "category", "avatar", "dsl", "dsl_json")
    class TitleEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class DescriptionEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    CANVAS_TYPE_FIELD_NUMBER: _ClassVar[int]
    CATEGORY_FIELD_NUMBER: _ClassVar[int]
    AVATAR_FIELD_NUMBER: _ClassVar[int]
    DSL_FIELD_NUMBER: _ClassVar[int]
    DSL_JSON_FIELD_NUMBER: _ClassVar[int]
    name: str
    id: str
    title: _containers.ScalarMap[str, str]
    description: _containers.ScalarMap[str, str]
    canvas_type: str
    category: CanvasCategory
    avatar: str
    dsl: _struct_pb2.Struct
    dsl_json: str
    def __init__(self, name: _Optional[str] = ..., id: _Optional[str] = ..., title: _Optional[_Mapping[str, str]] = ..., description: _Optional[_Mapping[str, str]] = ..., canvas_type: _Optional[str] = ..., category: _Optional[_Union[CanvasCategory, str]] = ..., avatar: _Optional[str] = ..., dsl: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., dsl_json: _Optional[str] = ...) -> None: ...

class Session(_message.Message):
    __slots__ = ("name", "id", "canvas_id", "revision_id", "user_id", "conversation_turns", "history", "state", "create_time", "update_time", "etag")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    CANVAS_ID_FIELD_NUMBER: _ClassVar[int]
    REVISION_ID_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    CONVERSATION_TURNS_FIELD_NUMBER: _ClassVar[int]
    HISTORY_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    ETAG_FIELD_NUMBER: _ClassVar[int]
    name: str
    id: str
    canvas_id: str
    revision_id: str
    user_id: str
    conversation_turns: int
    history: _containers.RepeatedCompositeFieldContainer[_struct_pb2.Struct]
    state: _struct_pb2.Struct
    create_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    etag: str
    def __init__(self, name: _Optional[str] = ..., id: _Optional[str] = ..., canvas_id: _Optional[str] = ..., revision_id: _Optional[str] = ..., user_id: _Optional[str] = ..., conversation_turns: _Optional[int] = ..., history: _Optional[_Iterable[_Union[_struct_pb2.Struct, _Mapping]]] = ..., state: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., etag: _Optional[str] = ...) -> None: ...

class CreateCanvasRequest(_message.Message):
    __slots__ = ("canvas", "template_id", "request_id", "validate_only")
    CANVAS_FIELD_NUMBER: _ClassVar[int]
    TEMPLATE_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    canvas: Canvas
    template_id: str
    request_id: str
    validate_only: bool
    def __init__(self, canvas: _Optional[_Union[Canvas, _Mapping]] = ..., template_id: _Optional[str] = ..., request_id: _Optional[str] = ..., validate_only: _Optional[bool] = ...) -> None: ...

class GetCanvasRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class UpdateCanvasRequest(_message.Message):
    __slots__ = ("canvas", "update_mask", "validate_only")
    CANVAS_FIELD_NUMBER: _ClassVar[int]
    UPDATE_MASK_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    canvas: Canvas
    update_mask: _field_mask_pb2.FieldMask
    validate_only: bool
    def __init__(self, canvas: _Optional[_Union[Canvas, _Mapping]] = ..., update_mask: _Optional[_Union[_field_mask_pb2.FieldMask, _Mapping]] = ..., validate_only: _Optional[bool] = ...) -> None: ...

class DeleteCanvasRequest(_message.Message):
    __slots__ = ("id", "etag")
    ID_FIELD_NUMBER: _ClassVar[int]
    ETAG_FIELD_NUMBER: _ClassVar[int]
    id: str
    etag: str
    def __init__(self, id: _Optional[str] = ..., etag: _Optional[str] = ...) -> None: ...

class DeleteCanvasResponse(_message.Message):
    __slots__ = ("canvas",)
    CANVAS_FIELD_NUMBER: _ClassVar[int]
    canvas: Canvas
    def __init__(self, canvas: _Optional[_Union[Canvas, _Mapping]] = ...) -> None: ...

class UndeleteCanvasRequest(_message.Message):
    __slots__ = ("id", "etag")
    ID_FIELD_NUMBER: _ClassVar[int]
    ETAG_FIELD_NUMBER: _ClassVar[int]
    id: str
    etag: str
    def __init__(self, id: _Optional[str] = ..., etag: _Optional[str] = ...) -> None: ...

class ListCanvasesRequest(_message.Message):
    __slots__ = ("page_size", "page_token", "filter", "order_by", "show_deleted")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    FILTER_FIELD_NUMBER: _ClassVar[int]
    ORDER_BY_FIELD_NUMBER: _ClassVar[int]
    SHOW_DELETED_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    filter: str
    order_by: str
    show_deleted: bool
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., filter: _Optional[str] = ..., order_by: _Optional[str] = ..., show_deleted: _Optional[bool] = ...) -> None: ...

class ListCanvasesResponse(_message.Message):
    __slots__ = ("canvases", "next_page_token")
    CANVASES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    canvases: _containers.RepeatedCompositeFieldContainer[Canvas]
    next_page_token: str
    def __init__(self, canvases: _Optional[_Iterable[_Union[Canvas, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ListRevisionsRequest(_message.Message):
    __slots__ = ("canvas_id", "page_size", "page_token")
    CANVAS_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    canvas_id: str
    page_size: int
    page_token: str
    def __init__(self, canvas_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListRevisionsResponse(_message.Message):
    __slots__ = ("revisions", "next_page_token")
    REVISIONS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    revisions: _containers.RepeatedCompositeFieldContainer[CanvasRevision]
    next_page_token: str
    def __init__(self, revisions: _Optional[_Iterable[_Union[CanvasRevision, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class GetRevisionRequest(_message.Message):
    __slots__ = ("canvas_id", "revision_id")
    CANVAS_ID_FIELD_NUMBER: _ClassVar[int]
    REVISION_ID_FIELD_NUMBER: _ClassVar[int]
    canvas_id: str
    revision_id: str
    def __init__(self, canvas_id: _Optional[str] = ..., revision_id: _Optional[str] = ...) -> None: ...

class PublishCanvasRequest(_message.Message):
    __slots__ = ("canvas_id", "revision_id", "etag")
    CANVAS_ID_FIELD_NUMBER: _ClassVar[int]
    REVISION_ID_FIELD_NUMBER: _ClassVar[int]
    ETAG_FIELD_NUMBER: _ClassVar[int]
    canvas_id: str
    revision_id: str
    etag: str
    def __init__(self, canvas_id: _Optional[str] = ..., revision_id: _Optional[str] = ..., etag: _Optional[str] = ...) -> None: ...

class RollbackCanvasRequest(_message.Message):
    __slots__ = ("canvas_id", "revision_id", "etag")
    CANVAS_ID_FIELD_NUMBER: _ClassVar[int]
    REVISION_ID_FIELD_NUMBER: _ClassVar[int]
    ETAG_FIELD_NUMBER: _ClassVar[int]
    canvas_id: str
    revision_id: str
    etag: str
    def __init__(self, canvas_id: _Optional[str] = ..., revision_id: _Optional[str] = ..., etag: _Optional[str] = ...) -> None: ...

class ListTemplatesRequest(_message.Message):
    __slots__ = ("page_size", "page_token")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListTemplatesResponse(_message.Message):
    __slots__ = ("templates", "next_page_token")
    TEMPLATES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    templates: _containers.RepeatedCompositeFieldContainer[CanvasTemplate]
    next_page_token: str
    def __init__(self, templates: _Optional[_Iterable[_Union[CanvasTemplate, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class GetTemplateRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class CreateSessionRequest(_message.Message):
    __slots__ = ("canvas_id", "revision_id", "user_id")
    CANVAS_ID_FIELD_NUMBER: _ClassVar[int]
    REVISION_ID_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    canvas_id: str
    revision_id: str
    user_id: str
    def __init__(self, canvas_id: _Optional[str] = ..., revision_id: _Optional[str] = ..., user_id: _Optional[str] = ...) -> None: ...

class GetSessionRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class ListSessionsRequest(_message.Message):
    __slots__ = ("canvas_id", "user_id", "page_size", "page_token")
    CANVAS_ID_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    canvas_id: str
    user_id: str
    page_size: int
    page_token: str
    def __init__(self, canvas_id: _Optional[str] = ..., user_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListSessionsResponse(_message.Message):
    __slots__ = ("sessions", "next_page_token")
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    sessions: _containers.RepeatedCompositeFieldContainer[Session]
    next_page_token: str
    def __init__(self, sessions: _Optional[_Iterable[_Union[Session, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class DeleteSessionRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class DeleteSessionResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class AppendSessionTurnRequest(_message.Message):
    __slots__ = ("id", "messages", "state", "etag")
    ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    ETAG_FIELD_NUMBER: _ClassVar[int]
    id: str
    messages: _containers.RepeatedCompositeFieldContainer[_struct_pb2.Struct]
    state: _struct_pb2.Struct
    etag: str
    def __init__(self, id: _Optional[str] = ..., messages: _Optional[_Iterable[_Union[_struct_pb2.Struct, _Mapping]]] = ..., state: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., etag: _Optional[str] = ...) -> None: ...

class TenantMember(_message.Message):
    __slots__ = ("tenant_id", "user_id", "role")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    user_id: str
    role: str
    def __init__(self, tenant_id: _Optional[str] = ..., user_id: _Optional[str] = ..., role: _Optional[str] = ...) -> None: ...

class AddTenantMemberRequest(_message.Message):
    __slots__ = ("user_id",)
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    user_id: str
    def __init__(self, user_id: _Optional[str] = ...) -> None: ...

class ListTenantMembersRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListTenantMembersResponse(_message.Message):
    __slots__ = ("members",)
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    members: _containers.RepeatedCompositeFieldContainer[TenantMember]
    def __init__(self, members: _Optional[_Iterable[_Union[TenantMember, _Mapping]]] = ...) -> None: ...

class RunRecord(_message.Message):
    __slots__ = ("name", "id", "canvas_id", "revision_id", "session_id", "status", "spec", "outputs", "error", "usage", "last_seq", "lease", "cancel_requested", "create_time", "update_time", "tenant_id", "creator_id")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    CANVAS_ID_FIELD_NUMBER: _ClassVar[int]
    REVISION_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    OUTPUTS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    LAST_SEQ_FIELD_NUMBER: _ClassVar[int]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    CANCEL_REQUESTED_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    CREATOR_ID_FIELD_NUMBER: _ClassVar[int]
    name: str
    id: str
    canvas_id: str
    revision_id: str
    session_id: str
    status: _common_pb2.RunStatus
    spec: _struct_pb2.Struct
    outputs: _struct_pb2.Struct
    error: _common_pb2.ErrorDetail
    usage: _common_pb2.TokenUsage
    last_seq: int
    lease: RunLease
    cancel_requested: bool
    create_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    tenant_id: str
    creator_id: str
    def __init__(self, name: _Optional[str] = ..., id: _Optional[str] = ..., canvas_id: _Optional[str] = ..., revision_id: _Optional[str] = ..., session_id: _Optional[str] = ..., status: _Optional[_Union[_common_pb2.RunStatus, str]] = ..., spec: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., outputs: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., error: _Optional[_Union[_common_pb2.ErrorDetail, _Mapping]] = ..., usage: _Optional[_Union[_common_pb2.TokenUsage, _Mapping]] = ..., last_seq: _Optional[int] = ..., lease: _Optional[_Union[RunLease, _Mapping]] = ..., cancel_requested: _Optional[bool] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., tenant_id: _Optional[str] = ..., creator_id: _Optional[str] = ...) -> None: ...

class RunLease(_message.Message):
    __slots__ = ("run_id", "holder", "token", "expire_time", "cancel_requested")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    HOLDER_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    CANCEL_REQUESTED_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    holder: str
    token: int
    expire_time: _timestamp_pb2.Timestamp
    cancel_requested: bool
    def __init__(self, run_id: _Optional[str] = ..., holder: _Optional[str] = ..., token: _Optional[int] = ..., expire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., cancel_requested: _Optional[bool] = ...) -> None: ...

class RunStep(_message.Message):
    __slots__ = ("step_index", "node_id", "attempt", "state", "create_time")
    STEP_INDEX_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    step_index: int
    node_id: str
    attempt: int
    state: _struct_pb2.Struct
    create_time: _timestamp_pb2.Timestamp
    def __init__(self, step_index: _Optional[int] = ..., node_id: _Optional[str] = ..., attempt: _Optional[int] = ..., state: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class StoredRunEvent(_message.Message):
    __slots__ = ("run_id", "seq", "event_type", "payload", "terminal")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    EVENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    TERMINAL_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    seq: int
    event_type: str
    payload: bytes
    terminal: bool
    def __init__(self, run_id: _Optional[str] = ..., seq: _Optional[int] = ..., event_type: _Optional[str] = ..., payload: _Optional[bytes] = ..., terminal: _Optional[bool] = ...) -> None: ...

class CreateRunRecordRequest(_message.Message):
    __slots__ = ("run", "request_id")
    RUN_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    run: RunRecord
    request_id: str
    def __init__(self, run: _Optional[_Union[RunRecord, _Mapping]] = ..., request_id: _Optional[str] = ...) -> None: ...

class StartRunRecordRequest(_message.Message):
    __slots__ = ("run", "request_id", "holder", "ttl_ms", "omit_spec")
    RUN_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    HOLDER_FIELD_NUMBER: _ClassVar[int]
    TTL_MS_FIELD_NUMBER: _ClassVar[int]
    OMIT_SPEC_FIELD_NUMBER: _ClassVar[int]
    run: RunRecord
    request_id: str
    holder: str
    ttl_ms: int
    omit_spec: bool
    def __init__(self, run: _Optional[_Union[RunRecord, _Mapping]] = ..., request_id: _Optional[str] = ..., holder: _Optional[str] = ..., ttl_ms: _Optional[int] = ..., omit_spec: _Optional[bool] = ...) -> None: ...

class StartRunRecordResponse(_message.Message):
    __slots__ = ("run", "lease")
    RUN_FIELD_NUMBER: _ClassVar[int]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    run: RunRecord
    lease: RunLease
    def __init__(self, run: _Optional[_Union[RunRecord, _Mapping]] = ..., lease: _Optional[_Union[RunLease, _Mapping]] = ...) -> None: ...

class GetRunRecordRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class ListRunRecordsRequest(_message.Message):
    __slots__ = ("statuses", "lease_expired_only", "session_id", "page_size", "page_token")
    STATUSES_FIELD_NUMBER: _ClassVar[int]
    LEASE_EXPIRED_ONLY_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    statuses: _containers.RepeatedScalarFieldContainer[_common_pb2.RunStatus]
    lease_expired_only: bool
    session_id: str
    page_size: int
    page_token: str
    def __init__(self, statuses: _Optional[_Iterable[_Union[_common_pb2.RunStatus, str]]] = ..., lease_expired_only: _Optional[bool] = ..., session_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListRunRecordsResponse(_message.Message):
    __slots__ = ("runs", "next_page_token")
    RUNS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    runs: _containers.RepeatedCompositeFieldContainer[RunRecord]
    next_page_token: str
    def __init__(self, runs: _Optional[_Iterable[_Union[RunRecord, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class AcquireRunLeaseRequest(_message.Message):
    __slots__ = ("run_id", "holder", "ttl_ms")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    HOLDER_FIELD_NUMBER: _ClassVar[int]
    TTL_MS_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    holder: str
    ttl_ms: int
    def __init__(self, run_id: _Optional[str] = ..., holder: _Optional[str] = ..., ttl_ms: _Optional[int] = ...) -> None: ...

class RenewRunLeaseRequest(_message.Message):
    __slots__ = ("run_id", "holder", "token", "ttl_ms")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    HOLDER_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    TTL_MS_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    holder: str
    token: int
    ttl_ms: int
    def __init__(self, run_id: _Optional[str] = ..., holder: _Optional[str] = ..., token: _Optional[int] = ..., ttl_ms: _Optional[int] = ...) -> None: ...

class ReleaseRunLeaseRequest(_message.Message):
    __slots__ = ("run_id", "token")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    token: int
    def __init__(self, run_id: _Optional[str] = ..., token: _Optional[int] = ...) -> None: ...

class ReleaseRunLeaseResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class CommitRunStepRequest(_message.Message):
    __slots__ = ("run_id", "lease_token", "steps", "events", "status", "outputs", "error", "usage")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    OUTPUTS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    lease_token: int
    steps: _containers.RepeatedCompositeFieldContainer[RunStep]
    events: _containers.RepeatedCompositeFieldContainer[StoredRunEvent]
    status: _common_pb2.RunStatus
    outputs: _struct_pb2.Struct
    error: _common_pb2.ErrorDetail
    usage: _common_pb2.TokenUsage
    def __init__(self, run_id: _Optional[str] = ..., lease_token: _Optional[int] = ..., steps: _Optional[_Iterable[_Union[RunStep, _Mapping]]] = ..., events: _Optional[_Iterable[_Union[StoredRunEvent, _Mapping]]] = ..., status: _Optional[_Union[_common_pb2.RunStatus, str]] = ..., outputs: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., error: _Optional[_Union[_common_pb2.ErrorDetail, _Mapping]] = ..., usage: _Optional[_Union[_common_pb2.TokenUsage, _Mapping]] = ...) -> None: ...

class CommitRunStepResponse(_message.Message):
    __slots__ = ("first_seq", "last_seq", "cancel_requested")
    FIRST_SEQ_FIELD_NUMBER: _ClassVar[int]
    LAST_SEQ_FIELD_NUMBER: _ClassVar[int]
    CANCEL_REQUESTED_FIELD_NUMBER: _ClassVar[int]
    first_seq: int
    last_seq: int
    cancel_requested: bool
    def __init__(self, first_seq: _Optional[int] = ..., last_seq: _Optional[int] = ..., cancel_requested: _Optional[bool] = ...) -> None: ...

class CommitRunStepsRequest(_message.Message):
    __slots__ = ("commits",)
    COMMITS_FIELD_NUMBER: _ClassVar[int]
    commits: _containers.RepeatedCompositeFieldContainer[CommitRunStepRequest]
    def __init__(self, commits: _Optional[_Iterable[_Union[CommitRunStepRequest, _Mapping]]] = ...) -> None: ...

class CommitRunStepResult(_message.Message):
    __slots__ = ("code", "message", "status", "response")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    code: int
    message: str
    status: bytes
    response: CommitRunStepResponse
    def __init__(self, code: _Optional[int] = ..., message: _Optional[str] = ..., status: _Optional[bytes] = ..., response: _Optional[_Union[CommitRunStepResponse, _Mapping]] = ...) -> None: ...

class CommitRunStepsResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[CommitRunStepResult]
    def __init__(self, results: _Optional[_Iterable[_Union[CommitRunStepResult, _Mapping]]] = ...) -> None: ...

class ListRunStepsRequest(_message.Message):
    __slots__ = ("run_id", "after_step")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    AFTER_STEP_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    after_step: int
    def __init__(self, run_id: _Optional[str] = ..., after_step: _Optional[int] = ...) -> None: ...

class ListRunStepsResponse(_message.Message):
    __slots__ = ("steps",)
    STEPS_FIELD_NUMBER: _ClassVar[int]
    steps: _containers.RepeatedCompositeFieldContainer[RunStep]
    def __init__(self, steps: _Optional[_Iterable[_Union[RunStep, _Mapping]]] = ...) -> None: ...

class ListRunEventsRequest(_message.Message):
    __slots__ = ("run_id", "after_seq", "page_size")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    AFTER_SEQ_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    after_seq: int
    page_size: int
    def __init__(self, run_id: _Optional[str] = ..., after_seq: _Optional[int] = ..., page_size: _Optional[int] = ...) -> None: ...

class ListRunEventsResponse(_message.Message):
    __slots__ = ("events",)
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[StoredRunEvent]
    def __init__(self, events: _Optional[_Iterable[_Union[StoredRunEvent, _Mapping]]] = ...) -> None: ...

class WatchRunEventsRequest(_message.Message):
    __slots__ = ("run_id", "after_seq")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    AFTER_SEQ_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    after_seq: int
    def __init__(self, run_id: _Optional[str] = ..., after_seq: _Optional[int] = ...) -> None: ...

class RequestRunCancelRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...
