"""LLM (and Agent without tools): one model call through the gateway (spec §5.7, §5.8).

With a downstream Message, no exception goto and no structured-output schema, the answer streams:
the node opens a stream channel that the Message consumes while the model is still generating
(§4.3, §7 item 17). Otherwise the whole answer is collected. Usage goes to the run's total.
The orchestrator never parses <think> tags: the gateway already splits reasoning from text.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from services.orchestrator.core.components.base import Component, Outcome, Problem, number_problem
from services.orchestrator.core.components.registry import register
from services.orchestrator.core.errors import ModelCallError, NodeError
from services.orchestrator.core.ports import ChatRequest
from services.orchestrator.core.sessions import history_lines
from services.orchestrator.core.values import parse_json
from services.orchestrator.tools.citations import format_knowledge

_FLAGS = {
    "temperature": "temperatureEnabled",
    "top_p": "topPEnabled",
    "max_tokens": "maxTokensEnabled",
    "presence_penalty": "presencePenaltyEnabled",
    "frequency_penalty": "frequencyPenaltyEnabled",
}
_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.MULTILINE)
CITATION_MARK = re.compile(r"\[ID:\s*\d+\]")
CITATION_PROMPT = ("Tool results and knowledge blocks show each source chunk as 'ID: <n>'. When a sentence of your "
                   "answer uses a chunk, end that sentence with [ID:<n>]. Never invent IDs.")
SECOND_PASS_PROMPT = ("Add citation markers to the answer below. After each sentence that is supported by a knowledge "
                      "chunk, insert [ID:<n>] with that chunk's ID. Do not change any other word of the answer and do "
                      "not add sentences. Reply with the answer and its markers only.")


REFINE_PROMPT = ("Rewrite the user's last question as one standalone question that can be understood without the "
                 "conversation: resolve pronouns and references from the earlier turns, keep the user's language, "
                 "and do not answer it. Reply with the rewritten question only.")


async def refine_question(model: "LLM", ctx, question: str, window: int) -> str:
    """RAGFlow's multi-turn refinement (`refine_multiturn`): with earlier turns in the session, the
    model rewrites `question` into a standalone one from the last `window` user/assistant pairs.
    Returns "" when there is nothing to refine (no history, no model, empty question or answer)."""
    history = recent_history(ctx, window)
    if not question.strip() or not history or ctx.services.llm is None:
        return ""
    transcript = "\n".join(history_lines(history))
    messages = [{"role": "system", "content": REFINE_PROMPT},
                {"role": "user", "content": f"Conversation:\n{transcript}\n\nLast question: {question.strip()}"}]
    return " ".join((await model.side_call(ctx, messages, "refine")).split())


def recent_history(ctx, window: int) -> list[dict[str, Any]]:
    """The last `window` user/assistant pairs of the session's history (none for a window of 0)."""
    return list(ctx.spec.get("history") or [])[-2 * window:] if window > 0 else []


def with_citation_prompt(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The citation instruction appended to the system prompt (one is added when there is none)."""
    if messages and messages[0]["role"] == "system":
        return [{"role": "system", "content": f"{messages[0]['content']}\n\n{CITATION_PROMPT}"}, *messages[1:]]
    return [{"role": "system", "content": CITATION_PROMPT}, *messages]


_MARKER_WITH_SPACE = re.compile(r"\s*\[ID:\s*\d+\]")


def same_words(cited: str, answer: str) -> bool:
    """Whether `cited` is `answer` plus [ID:n] markers: the same words once markers are removed
    (whitespace ignored)."""
    return _MARKER_WITH_SPACE.sub("", cited).split() == answer.split()


def apply_generation(request: ChatRequest, params: dict[str, Any]) -> None:
    """The sampling params whose UI flag is on (`temperatureEnabled`, ...) and `thinking`, as RAGFlow's
    gen_conf sends them: LLM, Agent and Categorize alike."""
    for name, flag in _FLAGS.items():
        if params.get(flag) and params.get(name) is not None:
            setattr(request, name, int(params[name]) if name == "max_tokens" else float(params[name]))
    thinking = params.get("thinking")
    if thinking and thinking != "default":
        request.thinking = str(thinking)


def structured_schema(params: dict[str, Any]) -> dict[str, Any] | None:
    outputs = params.get("outputs")
    schema = outputs.get("structured") if isinstance(outputs, dict) else None
    if isinstance(schema, dict):
        for nested in ("schema", "structured"):  # §1.5 B5: one level of nesting is accepted
            if isinstance(schema.get(nested), dict) and "properties" in schema[nested]:
                schema = schema[nested]
        if schema.get("properties"):
            return {k: v for k, v in schema.items() if k != "value"}
    return None


def parse_json_answer(text: str) -> Any:
    text = text.rsplit("</think>", 1)[-1].strip()
    return parse_json(_FENCE.sub("", text).strip())


@register
class LLM(Component):
    type_name = "LLM"
    default_timeout_s = 600.0
    durable_start = True
    static_outputs = ("content", "structured", "downloads")

    @classmethod
    def output_fields(cls, params: dict[str, Any], name: str) -> set[str] | None:
        schema = structured_schema(params) if name == "structured" else None
        properties = schema.get("properties") if schema else None
        return set(properties) if isinstance(properties, dict) else None

    @classmethod
    def check(cls, params: dict[str, Any]) -> list[Problem]:
        problems: list[Problem] = []
        prompts = params.get("prompts")
        if prompts is not None and not isinstance(prompts, (list, str)):
            problems.append(("prompts", "prompts must be a list of {role, content} or a string"))
        for i, prompt in enumerate(prompts if isinstance(prompts, list) else []):
            if not isinstance(prompt, dict) or prompt.get("role") not in ("user", "assistant", "system"):
                problems.append((f"prompts[{i}]", "each prompt needs role user|assistant|system and content"))
        for name, flag in _FLAGS.items():  # sent to the model only when enabled, so checked only then
            if params.get(flag):
                problem = number_problem(params, name, int if name == "max_tokens" else float,
                                         low=1 if name == "max_tokens" else None)
                problems.extend([problem] if problem else [])
        return problems

    def _messages(self, ctx) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = []
        system = ctx.render(str(self.param("sys_prompt", "")))
        if system.strip():
            messages.append({"role": "system", "content": system})
        messages.extend(self._history(ctx))
        prompts = self.param("prompts", [{"role": "user", "content": "{sys.query}"}])
        if isinstance(prompts, str):
            prompts = [{"role": "user", "content": prompts}]
        for prompt in prompts:
            rendered = {"role": prompt.get("role", "user"), "content": ctx.render(str(prompt.get("content", "")))}
            if messages and messages[-1]["role"] == rendered["role"] == "user" and len(messages) > 1 and messages[-1] is not messages[0]:
                messages[-1] = rendered  # the configured prompt replaces the current user turn
            else:
                messages.append(rendered)
        if not messages or messages[-1]["role"] != "user" or not str(messages[-1]["content"]).strip():
            raise NodeError(f"{self.id}: the last prompt must be a non-empty user message", reason="BAD_PROMPT")
        self._attach_files(ctx, prompts, messages[-1])
        return messages

    def _history(self, ctx) -> list[dict[str, Any]]:
        """The last `message_history_window_size` turns (user + assistant pairs) of the session.
        History holds answers only: reasoning is never stored in it."""
        window = int(self.param("message_history_window_size", 13) or 0)
        history = recent_history(ctx, window)
        return [{"role": h.get("role", "user"), "content": str(h.get("content", ""))} for h in history]

    def _attach_files(self, ctx, prompts: list[dict[str, Any]], last: dict[str, Any]) -> None:
        """§5.7 steps 1-2: images (data:image/... or visual_files_var) ride along as image parts; the
        text of sys.files is appended to the last user message unless a prompt references it."""
        images: list[str] = []
        mentioned = "sys.files" in str(self.params.get("sys_prompt", "")) + "".join(str(p.get("content", "")) for p in prompts)
        if not mentioned:
            for item in ctx.globals.get("sys.files") or []:
                if isinstance(item, str) and item.startswith("data:image/"):
                    images.append(item)
                elif isinstance(item, str) and item:
                    last["content"] = f"{last['content']}\n\n{item}"
        visual = self.params.get("visual_files_var")
        if visual:
            value = ctx.resolve(visual)
            for item in value if isinstance(value, list) else [value]:
                if isinstance(item, str) and item.startswith(("data:image/", "http://", "https://")) and item not in images:
                    images.append(item)
        if images:
            last["images"] = images

    def thoughts(self, ctx) -> str:
        return ""

    def _request(self, ctx, messages: list[dict[str, Any]], schema: dict[str, Any] | None) -> ChatRequest:
        request = ChatRequest(model=str(self.param("llm_id", "")), messages=messages, json_schema=schema)
        apply_generation(request, self.params)
        request.request_id = f"{ctx.spec.get('run_id', '')}:{self.id}:{ctx.scope}:{ctx.attempt}"
        return request

    def wants_stream(self, ctx) -> bool:
        has_goto = self.params.get("exception_method") == "goto" and self.params.get("exception_goto")
        return "Message" in ctx.downstream_types() and not has_goto and structured_schema(self.params) is None

    async def invoke(self, ctx) -> Outcome:
        if ctx.services.llm is None:
            raise NodeError("no model gateway is configured", reason="NO_GATEWAY")
        schema = structured_schema(self.params)
        messages = await self.refined(ctx, self._messages(ctx))
        if self.cites(ctx):
            messages = with_citation_prompt(messages)
        if schema is not None:
            return await self._structured(ctx, messages, schema)
        stream = None
        if self.wants_stream(ctx):
            stream = ctx.stream_of(self.id)
            if stream is None or stream.closed or stream.text_so_far():
                stream = ctx.open_stream()
        request = self._request(ctx, messages, None)
        if self.second_pass_wanted():
            # The answer is held back (reasoning still streams) until the second pass decided on it.
            pieces, _calls = await self._consume(ctx, request, stream, live_text=False)
            text = await self.cite_second_pass(ctx, "".join(pieces), stream)
            if stream is not None:
                stream.close()
        else:
            text = await self._call(ctx, request, stream)
        return Outcome(outputs={"content": text}, inputs={"messages": messages})

    refine_by_default: ClassVar[bool] = False
    """Whether `refine_multiturn` is on when the DSL does not set it (RAGFlow's Agent: yes; LLM: no)."""

    async def refined(self, ctx, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """`refine_multiturn`: the last user turn is replaced by the standalone question the model makes of
        it and the history. By default an Agent does it, as RAGFlow's does, once its prompt holds more than 3
        messages (a session with earlier turns); an LLM only when asked."""
        wanted = self.params.get("refine_multiturn")
        if wanted is None:
            wanted = self.refine_by_default and len(messages) > 3
        if not wanted or not isinstance(messages[-1].get("content"), str):
            return messages
        window = int(self.param("message_history_window_size", 13) or 0)
        question = await refine_question(self, ctx, messages[-1]["content"], window)
        return [*messages[:-1], {**messages[-1], "content": question}] if question else messages

    # -- citations (spec §5.7 step 6, §5.8; fix list §7 item 21) ------------------------------------------
    def cites(self, ctx) -> bool:
        """`cite` (default on) and the run already holds retrieved chunks: the model is asked for
        [ID:n] markers. Ids are the bucket's sequential, unique citation ids."""
        return bool(self.param("cite", True)) and len(ctx.state.reference_bucket()) > 0

    def second_pass_wanted(self) -> bool:
        return bool(self.param("citation_second_pass", False)) and bool(self.param("cite", True))

    async def cite_second_pass(self, ctx, text: str, stream) -> str:
        """`citation_second_pass`: when the answer has no [ID:n] marker but the run has chunks, one more
        model call inserts the markers, and the cited answer goes to the Message if it kept the answer's
        words; otherwise (or when that call returns nothing) the answer goes out as it was."""
        bucket = ctx.state.reference_bucket()
        if not text.strip() or CITATION_MARK.search(text) or not len(bucket):
            if stream is not None and text:
                stream.push("text", text)
            return text
        knowledge = format_knowledge(bucket.snapshot()["chunks"])
        messages = [{"role": "system", "content": SECOND_PASS_PROMPT},
                    {"role": "user", "content": f"Knowledge:\n{knowledge}\n\nAnswer:\n{text}"}]
        # Held back until it is whole: the model was asked only to add markers, and an answer whose words it
        # changed (rephrased, shortened, extended) is not shown; the first pass is, uncited.
        cited = await self.side_call(ctx, messages, "cite", stream=stream, live_text=False, reasoning=False)
        if not cited.strip() or not same_words(cited, text):
            cited = text
        if stream is not None:
            stream.push("text", cited)
        return cited

    async def _structured(self, ctx, messages, schema) -> Outcome:
        attempts = int(self.param("max_retries", 0) or 0) + 1
        for _ in range(attempts):
            text = await self._call(ctx, self._request(ctx, messages, schema), None)
            try:
                value = parse_json_answer(text)
            except ValueError:
                messages = [*messages, {"role": "assistant", "content": text},
                            {"role": "user", "content": "The answer could not be parsed as JSON. Reply with JSON only."}]
                continue
            return Outcome(outputs={"structured": value, "content": text}, inputs={"messages": messages})
        raise NodeError(f"{self.id}: the model's answer is not valid JSON for the schema", reason="INVALID_STRUCTURED_OUTPUT")

    async def side_call(self, ctx, messages: list[dict[str, Any]], suffix: str, *, schema: dict[str, Any] | None = None,
                        stream=None, live_text: bool = False, reasoning: bool = True) -> str:
        """One extra model call made by this node (question refinement, citation pass, SQL repair):
        its own request id `<node's request id>:<suffix>`, reasoning to `stream` (and the text when
        `live_text`), usage counted for the node. Returns the answer's text."""
        request = self._request(ctx, messages, schema)
        request.request_id = f"{request.request_id}:{suffix}"
        pieces, _calls = await self._consume(ctx, request, stream, live_text=live_text, reasoning=reasoning)
        return "".join(pieces)

    async def _call(self, ctx, request: ChatRequest, stream) -> str:
        pieces, _calls = await self._consume(ctx, request, stream, live_text=True)
        if stream is not None:
            stream.close()
        return "".join(pieces)

    async def _consume(self, ctx, request: ChatRequest, stream, *, live_text: bool, text_prefix: str = "",
                       reasoning: bool = True, thinking_blocks: list[dict[str, str]] | None = None,
                       ) -> tuple[list[str], list[dict[str, Any]]]:
        """One ChatStream: reasoning goes to `stream` as it arrives (and text too when `live_text`,
        preceded once by `text_prefix`), usage into the node's usage, signed thinking blocks into
        `thinking_blocks` when given. Returns the text pieces (without the prefix) and the tool calls;
        a model error raises NodeError, retryable only while nothing has reached the stream's consumer."""
        pieces: list[str] = []
        calls: list[dict[str, Any]] = []
        error, retryable, kind = "", False, ""
        try:
            async for chunk in ctx.services.llm.chat_stream(request):
                if chunk.kind == "text":
                    if not chunk.text:
                        continue
                    if live_text and stream is not None:
                        if text_prefix and not pieces:
                            stream.push("text", text_prefix)
                        stream.push("text", chunk.text)
                    pieces.append(chunk.text)
                elif chunk.kind in ("think_start", "think_delta", "think_end"):
                    if stream is not None and reasoning:
                        stream.push(chunk.kind, chunk.text)
                elif chunk.kind == "tool_call" and chunk.tool_call is not None:
                    calls.append(chunk.tool_call)
                elif chunk.kind == "thinking_block" and chunk.thinking_block is not None and thinking_blocks is not None:
                    thinking_blocks.append(chunk.thinking_block)
                elif chunk.kind == "usage" and chunk.usage is not None:
                    ctx.usage.add(chunk.usage)
                elif chunk.kind == "finish" and chunk.error:
                    error, retryable, kind = chunk.error, chunk.retryable, chunk.error_kind.removeprefix("CHAT_ERROR_KIND_")
        except NodeError as exc:
            error, retryable, kind = exc.message, exc.retryable, exc.reason
        if error:
            # Once text reached a consumer, a retry would duplicate it: only retry untouched streams.
            # The runner closes the stream after the error policy decided (default value or failure).
            partial = stream is not None and bool(stream.text_so_far())
            raise ModelCallError(f"{self.id}: model call failed: {error}", model=request.model, kind=kind or "UNSPECIFIED",
                                 retryable=retryable and not partial)
        return pieces, calls
