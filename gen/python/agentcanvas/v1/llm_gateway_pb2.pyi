from agentcanvas.v1 import common_pb2 as _common_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ThinkingMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    THINKING_MODE_UNSPECIFIED: _ClassVar[ThinkingMode]
    THINKING_MODE_ENABLED: _ClassVar[ThinkingMode]
    THINKING_MODE_DISABLED: _ClassVar[ThinkingMode]
    THINKING_MODE_EFFORT: _ClassVar[ThinkingMode]
    THINKING_MODE_BUDGET: _ClassVar[ThinkingMode]

class ReasoningEffort(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    REASONING_EFFORT_UNSPECIFIED: _ClassVar[ReasoningEffort]
    REASONING_EFFORT_LOW: _ClassVar[ReasoningEffort]
    REASONING_EFFORT_MEDIUM: _ClassVar[ReasoningEffort]
    REASONING_EFFORT_HIGH: _ClassVar[ReasoningEffort]

class FinishReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FINISH_REASON_UNSPECIFIED: _ClassVar[FinishReason]
    FINISH_REASON_STOP: _ClassVar[FinishReason]
    FINISH_REASON_LENGTH: _ClassVar[FinishReason]
    FINISH_REASON_TOOL_CALLS: _ClassVar[FinishReason]
    FINISH_REASON_CONTENT_FILTER: _ClassVar[FinishReason]
    FINISH_REASON_ERROR: _ClassVar[FinishReason]

class ChatErrorKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CHAT_ERROR_KIND_UNSPECIFIED: _ClassVar[ChatErrorKind]
    CHAT_ERROR_KIND_RATE_LIMITED: _ClassVar[ChatErrorKind]
    CHAT_ERROR_KIND_TIMEOUT: _ClassVar[ChatErrorKind]
    CHAT_ERROR_KIND_CONNECTION: _ClassVar[ChatErrorKind]
    CHAT_ERROR_KIND_SERVER: _ClassVar[ChatErrorKind]
    CHAT_ERROR_KIND_BAD_REQUEST: _ClassVar[ChatErrorKind]
    CHAT_ERROR_KIND_AUTH: _ClassVar[ChatErrorKind]
    CHAT_ERROR_KIND_CONTEXT_WINDOW: _ClassVar[ChatErrorKind]
    CHAT_ERROR_KIND_CONTENT_POLICY: _ClassVar[ChatErrorKind]
    CHAT_ERROR_KIND_MODEL_NOT_FOUND: _ClassVar[ChatErrorKind]
    CHAT_ERROR_KIND_STREAM_INTERRUPTED: _ClassVar[ChatErrorKind]
    CHAT_ERROR_KIND_INCOMPLETE_STREAM: _ClassVar[ChatErrorKind]
    CHAT_ERROR_KIND_INVALID_STRUCTURED_OUTPUT: _ClassVar[ChatErrorKind]
    CHAT_ERROR_KIND_INTERNAL: _ClassVar[ChatErrorKind]
THINKING_MODE_UNSPECIFIED: ThinkingMode
THINKING_MODE_ENABLED: ThinkingMode
THINKING_MODE_DISABLED: ThinkingMode
THINKING_MODE_EFFORT: ThinkingMode
THINKING_MODE_BUDGET: ThinkingMode
REASONING_EFFORT_UNSPECIFIED: ReasoningEffort
REASONING_EFFORT_LOW: ReasoningEffort
REASONING_EFFORT_MEDIUM: ReasoningEffort
REASONING_EFFORT_HIGH: ReasoningEffort
FINISH_REASON_UNSPECIFIED: FinishReason
FINISH_REASON_STOP: FinishReason
FINISH_REASON_LENGTH: FinishReason
FINISH_REASON_TOOL_CALLS: FinishReason
FINISH_REASON_CONTENT_FILTER: FinishReason
FINISH_REASON_ERROR: FinishReason
CHAT_ERROR_KIND_UNSPECIFIED: ChatErrorKind
CHAT_ERROR_KIND_RATE_LIMITED: ChatErrorKind
CHAT_ERROR_KIND_TIMEOUT: ChatErrorKind
CHAT_ERROR_KIND_CONNECTION: ChatErrorKind
CHAT_ERROR_KIND_SERVER: ChatErrorKind
CHAT_ERROR_KIND_BAD_REQUEST: ChatErrorKind
CHAT_ERROR_KIND_AUTH: ChatErrorKind
CHAT_ERROR_KIND_CONTEXT_WINDOW: ChatErrorKind
CHAT_ERROR_KIND_CONTENT_POLICY: ChatErrorKind
CHAT_ERROR_KIND_MODEL_NOT_FOUND: ChatErrorKind
CHAT_ERROR_KIND_STREAM_INTERRUPTED: ChatErrorKind
CHAT_ERROR_KIND_INCOMPLETE_STREAM: ChatErrorKind
CHAT_ERROR_KIND_INVALID_STRUCTURED_OUTPUT: ChatErrorKind
CHAT_ERROR_KIND_INTERNAL: ChatErrorKind

class ThinkingConfig(_message.Message):
    __slots__ = ("mode", "effort", "budget_tokens")
    MODE_FIELD_NUMBER: _ClassVar[int]
    EFFORT_FIELD_NUMBER: _ClassVar[int]
    BUDGET_TOKENS_FIELD_NUMBER: _ClassVar[int]
    mode: ThinkingMode
    effort: ReasoningEffort
    budget_tokens: int
    def __init__(self, mode: _Optional[_Union[ThinkingMode, str]] = ..., effort: _Optional[_Union[ReasoningEffort, str]] = ..., budget_tokens: _Optional[int] = ...) -> None: ...

class ContentPart(_message.Message):
    __slots__ = ("text", "image_url")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    IMAGE_URL_FIELD_NUMBER: _ClassVar[int]
    text: str
    image_url: str
    def __init__(self, text: _Optional[str] = ..., image_url: _Optional[str] = ...) -> None: ...

class ToolCall(_message.Message):
    __slots__ = ("id", "name", "arguments_json")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_JSON_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    arguments_json: str
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., arguments_json: _Optional[str] = ...) -> None: ...

class ThinkingBlock(_message.Message):
    __slots__ = ("thinking", "signature", "redacted_data")
    THINKING_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    REDACTED_DATA_FIELD_NUMBER: _ClassVar[int]
    thinking: str
    signature: str
    redacted_data: str
    def __init__(self, thinking: _Optional[str] = ..., signature: _Optional[str] = ..., redacted_data: _Optional[str] = ...) -> None: ...

class ChatMessage(_message.Message):
    __slots__ = ("role", "content", "parts", "tool_calls", "tool_call_id", "name", "reasoning_content", "thinking_blocks")
    ROLE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    PARTS_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    REASONING_CONTENT_FIELD_NUMBER: _ClassVar[int]
    THINKING_BLOCKS_FIELD_NUMBER: _ClassVar[int]
    role: str
    content: str
    parts: _containers.RepeatedCompositeFieldContainer[ContentPart]
    tool_calls: _containers.RepeatedCompositeFieldContainer[ToolCall]
    tool_call_id: str
    name: str
    reasoning_content: str
    thinking_blocks: _containers.RepeatedCompositeFieldContainer[ThinkingBlock]
    def __init__(self, role: _Optional[str] = ..., content: _Optional[str] = ..., parts: _Optional[_Iterable[_Union[ContentPart, _Mapping]]] = ..., tool_calls: _Optional[_Iterable[_Union[ToolCall, _Mapping]]] = ..., tool_call_id: _Optional[str] = ..., name: _Optional[str] = ..., reasoning_content: _Optional[str] = ..., thinking_blocks: _Optional[_Iterable[_Union[ThinkingBlock, _Mapping]]] = ...) -> None: ...

class ToolDefinition(_message.Message):
    __slots__ = ("name", "description", "parameters", "parameters_json")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    PARAMETERS_FIELD_NUMBER: _ClassVar[int]
    PARAMETERS_JSON_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    parameters: _struct_pb2.Struct
    parameters_json: str
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., parameters: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., parameters_json: _Optional[str] = ...) -> None: ...

class GenerationConfig(_message.Message):
    __slots__ = ("temperature", "top_p", "max_tokens", "presence_penalty", "frequency_penalty", "stop", "seed")
    TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    TOP_P_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    PRESENCE_PENALTY_FIELD_NUMBER: _ClassVar[int]
    FREQUENCY_PENALTY_FIELD_NUMBER: _ClassVar[int]
    STOP_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    temperature: float
    top_p: float
    max_tokens: int
    presence_penalty: float
    frequency_penalty: float
    stop: _containers.RepeatedScalarFieldContainer[str]
    seed: int
    def __init__(self, temperature: _Optional[float] = ..., top_p: _Optional[float] = ..., max_tokens: _Optional[int] = ..., presence_penalty: _Optional[float] = ..., frequency_penalty: _Optional[float] = ..., stop: _Optional[_Iterable[str]] = ..., seed: _Optional[int] = ...) -> None: ...

class ResponseFormat(_message.Message):
    __slots__ = ("json_schema", "name", "max_repairs", "json_schema_json")
    JSON_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    MAX_REPAIRS_FIELD_NUMBER: _ClassVar[int]
    JSON_SCHEMA_JSON_FIELD_NUMBER: _ClassVar[int]
    json_schema: _struct_pb2.Struct
    name: str
    max_repairs: int
    json_schema_json: str
    def __init__(self, json_schema: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., name: _Optional[str] = ..., max_repairs: _Optional[int] = ..., json_schema_json: _Optional[str] = ...) -> None: ...

class ChatRequest(_message.Message):
    __slots__ = ("model", "messages", "thinking", "with_reasoning", "tools", "tool_choice", "response_format", "generation", "fallback_models", "request_id")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    THINKING_FIELD_NUMBER: _ClassVar[int]
    WITH_REASONING_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    TOOL_CHOICE_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FORMAT_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    FALLBACK_MODELS_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    model: str
    messages: _containers.RepeatedCompositeFieldContainer[ChatMessage]
    thinking: ThinkingConfig
    with_reasoning: bool
    tools: _containers.RepeatedCompositeFieldContainer[ToolDefinition]
    tool_choice: str
    response_format: ResponseFormat
    generation: GenerationConfig
    fallback_models: _containers.RepeatedScalarFieldContainer[str]
    request_id: str
    def __init__(self, model: _Optional[str] = ..., messages: _Optional[_Iterable[_Union[ChatMessage, _Mapping]]] = ..., thinking: _Optional[_Union[ThinkingConfig, _Mapping]] = ..., with_reasoning: _Optional[bool] = ..., tools: _Optional[_Iterable[_Union[ToolDefinition, _Mapping]]] = ..., tool_choice: _Optional[str] = ..., response_format: _Optional[_Union[ResponseFormat, _Mapping]] = ..., generation: _Optional[_Union[GenerationConfig, _Mapping]] = ..., fallback_models: _Optional[_Iterable[str]] = ..., request_id: _Optional[str] = ...) -> None: ...

class ChatError(_message.Message):
    __slots__ = ("kind", "message", "retryable", "partial_text", "http_status")
    KIND_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    RETRYABLE_FIELD_NUMBER: _ClassVar[int]
    PARTIAL_TEXT_FIELD_NUMBER: _ClassVar[int]
    HTTP_STATUS_FIELD_NUMBER: _ClassVar[int]
    kind: ChatErrorKind
    message: str
    retryable: bool
    partial_text: str
    http_status: int
    def __init__(self, kind: _Optional[_Union[ChatErrorKind, str]] = ..., message: _Optional[str] = ..., retryable: _Optional[bool] = ..., partial_text: _Optional[str] = ..., http_status: _Optional[int] = ...) -> None: ...

class ChatResponse(_message.Message):
    __slots__ = ("text", "reasoning", "tool_calls", "structured", "finish_reason", "usage", "model", "error", "thinking_blocks", "reasoning_as_answer")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    REASONING_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    STRUCTURED_FIELD_NUMBER: _ClassVar[int]
    FINISH_REASON_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    THINKING_BLOCKS_FIELD_NUMBER: _ClassVar[int]
    REASONING_AS_ANSWER_FIELD_NUMBER: _ClassVar[int]
    text: str
    reasoning: str
    tool_calls: _containers.RepeatedCompositeFieldContainer[ToolCall]
    structured: _struct_pb2.Value
    finish_reason: FinishReason
    usage: _common_pb2.TokenUsage
    model: str
    error: ChatError
    thinking_blocks: _containers.RepeatedCompositeFieldContainer[ThinkingBlock]
    reasoning_as_answer: bool
    def __init__(self, text: _Optional[str] = ..., reasoning: _Optional[str] = ..., tool_calls: _Optional[_Iterable[_Union[ToolCall, _Mapping]]] = ..., structured: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., finish_reason: _Optional[_Union[FinishReason, str]] = ..., usage: _Optional[_Union[_common_pb2.TokenUsage, _Mapping]] = ..., model: _Optional[str] = ..., error: _Optional[_Union[ChatError, _Mapping]] = ..., thinking_blocks: _Optional[_Iterable[_Union[ThinkingBlock, _Mapping]]] = ..., reasoning_as_answer: _Optional[bool] = ...) -> None: ...

class ChatEvent(_message.Message):
    __slots__ = ("text_delta", "think_start", "think_delta", "think_end", "tool_call", "usage", "finish", "thinking_block")
    TEXT_DELTA_FIELD_NUMBER: _ClassVar[int]
    THINK_START_FIELD_NUMBER: _ClassVar[int]
    THINK_DELTA_FIELD_NUMBER: _ClassVar[int]
    THINK_END_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    FINISH_FIELD_NUMBER: _ClassVar[int]
    THINKING_BLOCK_FIELD_NUMBER: _ClassVar[int]
    text_delta: TextDelta
    think_start: ChatThinkStart
    think_delta: ChatThinkDelta
    think_end: ChatThinkEnd
    tool_call: ToolCall
    usage: _common_pb2.TokenUsage
    finish: ChatFinish
    thinking_block: ThinkingBlock
    def __init__(self, text_delta: _Optional[_Union[TextDelta, _Mapping]] = ..., think_start: _Optional[_Union[ChatThinkStart, _Mapping]] = ..., think_delta: _Optional[_Union[ChatThinkDelta, _Mapping]] = ..., think_end: _Optional[_Union[ChatThinkEnd, _Mapping]] = ..., tool_call: _Optional[_Union[ToolCall, _Mapping]] = ..., usage: _Optional[_Union[_common_pb2.TokenUsage, _Mapping]] = ..., finish: _Optional[_Union[ChatFinish, _Mapping]] = ..., thinking_block: _Optional[_Union[ThinkingBlock, _Mapping]] = ...) -> None: ...

class ChatEventBatch(_message.Message):
    __slots__ = ("events",)
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[ChatEvent]
    def __init__(self, events: _Optional[_Iterable[_Union[ChatEvent, _Mapping]]] = ...) -> None: ...

class TextDelta(_message.Message):
    __slots__ = ("text",)
    TEXT_FIELD_NUMBER: _ClassVar[int]
    text: str
    def __init__(self, text: _Optional[str] = ...) -> None: ...

class ChatThinkStart(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ChatThinkDelta(_message.Message):
    __slots__ = ("text",)
    TEXT_FIELD_NUMBER: _ClassVar[int]
    text: str
    def __init__(self, text: _Optional[str] = ...) -> None: ...

class ChatThinkEnd(_message.Message):
    __slots__ = ("truncated",)
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    truncated: bool
    def __init__(self, truncated: _Optional[bool] = ...) -> None: ...

class ChatFinish(_message.Message):
    __slots__ = ("reason", "error", "model", "reasoning_as_answer")
    REASON_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    REASONING_AS_ANSWER_FIELD_NUMBER: _ClassVar[int]
    reason: FinishReason
    error: ChatError
    model: str
    reasoning_as_answer: bool
    def __init__(self, reason: _Optional[_Union[FinishReason, str]] = ..., error: _Optional[_Union[ChatError, _Mapping]] = ..., model: _Optional[str] = ..., reasoning_as_answer: _Optional[bool] = ...) -> None: ...

class CountTokensRequest(_message.Message):
    __slots__ = ("model", "messages", "max_tokens")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    model: str
    messages: _containers.RepeatedCompositeFieldContainer[ChatMessage]
    max_tokens: int
    def __init__(self, model: _Optional[str] = ..., messages: _Optional[_Iterable[_Union[ChatMessage, _Mapping]]] = ..., max_tokens: _Optional[int] = ...) -> None: ...

class CountTokensResponse(_message.Message):
    __slots__ = ("tokens", "tokenizer", "trimmed_messages", "trimmed_tokens")
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    TOKENIZER_FIELD_NUMBER: _ClassVar[int]
    TRIMMED_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    TRIMMED_TOKENS_FIELD_NUMBER: _ClassVar[int]
    tokens: int
    tokenizer: str
    trimmed_messages: _containers.RepeatedCompositeFieldContainer[ChatMessage]
    trimmed_tokens: int
    def __init__(self, tokens: _Optional[int] = ..., tokenizer: _Optional[str] = ..., trimmed_messages: _Optional[_Iterable[_Union[ChatMessage, _Mapping]]] = ..., trimmed_tokens: _Optional[int] = ...) -> None: ...

class ListModelsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ModelInfo(_message.Message):
    __slots__ = ("llm_id", "litellm_model", "provider", "api_base", "supports_tools", "supports_reasoning", "context_window", "is_default")
    LLM_ID_FIELD_NUMBER: _ClassVar[int]
    LITELLM_MODEL_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    API_BASE_FIELD_NUMBER: _ClassVar[int]
    SUPPORTS_TOOLS_FIELD_NUMBER: _ClassVar[int]
    SUPPORTS_REASONING_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_WINDOW_FIELD_NUMBER: _ClassVar[int]
    IS_DEFAULT_FIELD_NUMBER: _ClassVar[int]
    llm_id: str
    litellm_model: str
    provider: str
    api_base: str
    supports_tools: bool
    supports_reasoning: bool
    context_window: int
    is_default: bool
    def __init__(self, llm_id: _Optional[str] = ..., litellm_model: _Optional[str] = ..., provider: _Optional[str] = ..., api_base: _Optional[str] = ..., supports_tools: _Optional[bool] = ..., supports_reasoning: _Optional[bool] = ..., context_window: _Optional[int] = ..., is_default: _Optional[bool] = ...) -> None: ...

class ListModelsResponse(_message.Message):
    __slots__ = ("models",)
    MODELS_FIELD_NUMBER: _ClassVar[int]
    models: _containers.RepeatedCompositeFieldContainer[ModelInfo]
    def __init__(self, models: _Optional[_Iterable[_Union[ModelInfo, _Mapping]]] = ...) -> None: ...
