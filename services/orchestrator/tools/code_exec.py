"""CodeExec (RAGFlow class `CodeExec`, function `execute_code`) through the sandbox service.

Calls `agentcanvas.v1.Sandbox/Execute` with mode MAIN_FUNCTION: the sandbox runs `main(**arguments)`
(Python) or `main(arguments)` (Node) and streams Started, Stdout/Stderr, Result, Artifact, Exit.
RAGFlow's result protocol then applies (spec §5.19):

- the value is the structured Result when present, else stdout parsed as JSON, else as a Python
  literal, else the raw stdout text;
- with no Result, no artifacts, empty stdout and a failed exit (or non-empty stderr), the call
  fails with the exit message / stderr;
- outputs: `<business output>` (the one declared non-system output, default `result`), `content`
  (strings verbatim, objects as sorted pretty JSON, None as ""), `actual_type`, `raw_result`,
  `attachments`, `_ARTIFACTS`, `_ATTACHMENT_CONTENT`; the declared type is checked;
- artifacts become downloads `{doc_id, filename, mime_type, size, base64}`.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import grpc

from agentcanvas.v1 import sandbox_pb2, sandbox_pb2_grpc
from services.common import errors as common_errors
from services.common import python_ast
from services.common.clients import call_timeout, create_channel, outbound_metadata
from services.common.context import token_var
from services.common.status import from_rpc_error
from services.common.structs import from_value, to_struct
from services.orchestrator.tools.base import Download, ParamProblem, Tool, ToolResult
from services.orchestrator.tools.citations import stable_id
from services.orchestrator.tools.errors import (
    ToolExecutionError,
    ToolInputError,
    ToolTimeoutError,
    ToolUpstreamError,
)
from services.orchestrator.tools.runtime import ToolContext

logger = logging.getLogger(__name__)

TOOL = "CodeExec"
LANGUAGES = {"python": "python", "python3": "python", "javascript": "nodejs", "nodejs": "nodejs"}
SYSTEM_OUTPUTS = frozenset(
    {"content", "actual_type", "attachments", "_ERROR", "_ARTIFACTS", "_ATTACHMENT_CONTENT", "raw_result", "_created_time", "_elapsed_time"}
)
_TEXT_ARTIFACTS = ("text/", "application/json", "image/svg+xml")
_ATTACHMENT_TEXT_LIMIT = 4000


@dataclass
class ExecOutcome:
    """Everything one Execute stream delivered."""

    stdout: str = ""
    stderr: str = ""
    result_json: str | None = None
    artifacts: list[sandbox_pb2.Artifact] = field(default_factory=list)
    exit_reason: int = sandbox_pb2.EXIT_REASON_UNSPECIFIED
    exit_code: int = 0
    exit_message: str = ""
    backend: str = ""


class SandboxClient:
    """A reusable channel to the sandbox service."""

    def __init__(self, address: str, *, token: str = "",
                 service_identity: Callable[[], tuple[str | None, str]] | None = None):
        self.address = address
        self._token = token
        # (the orchestrator's service token, "tenant/user" it acts for) outside an RPC, i.e. in a takeover: the
        # run's code then runs for its creator, as in the RPC that started it (there the caller's token goes).
        self._service_identity = service_identity
        self._channel: grpc.aio.Channel | None = None

    def _stub(self) -> sandbox_pb2_grpc.SandboxStub:
        if self._channel is None:
            self._channel = create_channel(self.address)
        return sandbox_pb2_grpc.SandboxStub(self._channel)

    def _metadata(self) -> list[tuple[str, str]]:
        if self._service_identity is not None and not token_var.get():
            service_token, on_behalf_of = self._service_identity()
            if service_token and on_behalf_of:
                return outbound_metadata(service_token, on_behalf_of=on_behalf_of)
        return outbound_metadata(self._token or None)

    async def execute(
        self, *, language: str, code: str, arguments: Mapping[str, Any], timeout_s: float, request_id: str = ""
    ) -> ExecOutcome:
        request = sandbox_pb2.ExecuteRequest(
            language=language,
            code=code,
            arguments=to_struct(dict(arguments)),
            mode=sandbox_pb2.EXEC_MODE_MAIN_FUNCTION,
            limits=sandbox_pb2.ResourceLimits(wall_time_ms=int(timeout_s * 1000)),
            request_id=request_id,
        )
        outcome = ExecOutcome()
        stdout, stderr = bytearray(), bytearray()
        # The sandbox enforces the wall limit itself; the RPC deadline is a backstop a bit later.
        deadline = call_timeout(timeout_s + 10)
        try:
            call = self._stub().Execute(request, timeout=deadline, metadata=self._metadata())
            async for event in call:
                kind = event.WhichOneof("event")
                if kind == "started":
                    outcome.backend = event.started.backend
                elif kind == "stdout":
                    stdout.extend(event.stdout.data)
                elif kind == "stderr":
                    stderr.extend(event.stderr.data)
                elif kind == "result":
                    outcome.result_json = event.result.json or json.dumps(from_value(event.result.value))
                elif kind == "artifact":
                    outcome.artifacts.append(event.artifact)
                elif kind == "exit":
                    outcome.exit_reason = event.exit.reason
                    outcome.exit_code = event.exit.code
                    outcome.exit_message = event.exit.message
        except grpc.aio.AioRpcError as error:
            raise _rpc_error(error, self.address) from None
        outcome.stdout = stdout.decode("utf-8", "replace")
        outcome.stderr = stderr.decode("utf-8", "replace")
        return outcome

    async def aclose(self) -> None:
        if self._channel is not None:
            await self._channel.close()
            self._channel = None


def _rpc_error(error: grpc.aio.AioRpcError, address: str) -> Exception:
    domain = from_rpc_error(error)
    if isinstance(domain, common_errors.DeadlineExceededError):
        return ToolTimeoutError(TOOL, "the sandbox did not finish in time")
    if isinstance(domain, common_errors.UnavailableError):
        return ToolUpstreamError(TOOL, f"the sandbox at {address} is unavailable: {domain.message}")
    if isinstance(domain, common_errors.InvalidArgumentError):
        return ToolInputError(TOOL, "script", f"the sandbox rejected the job: {domain.message}")
    return ToolExecutionError(TOOL, f"sandbox error ({error.code().name}): {domain.message}")


# ---- RAGFlow result protocol ------------------------------------------------------------------


def parse_value(outcome: ExecOutcome) -> tuple[bool, Any]:
    """(present, value): structured result, else stdout as JSON, as a Python literal, or as text."""
    if outcome.result_json is not None:
        try:
            return True, json.loads(outcome.result_json)
        except (ValueError, RecursionError):
            logger.warning("code_exec: the sandbox sent a result that is not JSON; using stdout")
    text = outcome.stdout.strip()
    if not text:
        return False, None
    try:
        return True, json.loads(text)
    except (ValueError, RecursionError):  # too deep to parse: a literal, else text
        pass
    try:
        return True, python_ast.literal(text)
    except python_ast.UnparsablePython:
        return True, text


def type_name(value: Any) -> str:
    if value is None:
        return "Null"
    if isinstance(value, bool):
        return "Boolean"
    if isinstance(value, (int, float)):
        return "Number"
    if isinstance(value, str):
        return "String"
    if isinstance(value, dict):
        return "Object"
    if isinstance(value, (list, tuple)):
        return "Array"
    return type(value).__name__


def matches_type(value: Any, declared: str) -> bool:
    """Whether `value` fits a RAGFlow type: String, Number, Boolean, Object, Null, Any, Array<T>."""
    kind = declared.strip().lower()
    if kind in ("", "any"):
        return True
    if kind.startswith("array"):
        if not isinstance(value, (list, tuple)):
            return False
        inner = kind[len("array") :].strip()
        if inner.startswith("<") and inner.endswith(">"):
            return all(matches_type(v, inner[1:-1]) for v in value)
        return True
    return type_name(value).lower() == kind


def canonical_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, ensure_ascii=False, sort_keys=True, indent=2)
    return json.dumps(value) if isinstance(value, bool) else str(value)


def business_output(params: Mapping[str, Any]) -> tuple[str, str]:
    """(name, declared type) of the one non-system output; raises ToolInputError otherwise."""
    outputs = params.get("outputs") or {}
    if not isinstance(outputs, Mapping) or not outputs:
        return "result", "Any"
    names = list(outputs) if len(outputs) == 1 else [n for n in outputs if n not in SYSTEM_OUTPUTS]
    if len(names) != 1:
        raise ToolInputError(TOOL, "outputs", f"declare exactly one business output (found {len(names)})")
    name = names[0]
    if not name or "." in name or (len(outputs) > 1 and name in SYSTEM_OUTPUTS):
        raise ToolInputError(TOOL, "outputs", f"'{name}' is not a valid output name")
    spec = outputs[name] if isinstance(outputs[name], Mapping) else {}
    return name, str(spec.get("type") or "Any")


def _attachment_section(index: int, artifact: sandbox_pb2.Artifact) -> str:
    header = f"attachment{index} ({artifact.mime_type or 'application/octet-stream'}): {artifact.name}"
    if artifact.content and artifact.mime_type.startswith(_TEXT_ARTIFACTS):
        return f"{header}\n{artifact.content.decode('utf-8', 'replace')[:_ATTACHMENT_TEXT_LIMIT]}"
    return header


class CodeExec(Tool):
    component_name = "CodeExec"
    function_name = "execute_code"
    description = (
        "Execute Python or JavaScript code in a sandbox and return what its main() function returns. "
        "Define `def main(**kwargs)` (Python) or `function main(args)` (JavaScript) and return a "
        "JSON-serialisable value. Files written to the `artifacts/` directory (png, jpg, svg, pdf, csv, "
        "json, html) are returned as attachments. Python has pandas, numpy, matplotlib and requests "
        "when the sandbox image provides them."
    )
    arguments_schema = {
        "type": "object",
        "properties": {
            "lang": {"type": "string", "enum": ["python", "javascript"], "description": "The programming language."},
            "script": {"type": "string", "description": "The code; it must define main() and return the result."},
        },
        "required": ["lang", "script"],
    }
    params_schema = {
        "type": "object",
        "properties": {
            "lang": {"type": "string", "enum": sorted(LANGUAGES), "default": "python"},
            "script": {"type": "string", "default": ""},
            "arguments": {"type": "object", "default": {}},
            # RAGFlow declares `result: Object`; undeclared, we accept any JSON value (models often return text).
            "outputs": {"type": "object", "default": {"result": {"type": "Any", "value": ""}}},
        },
    }
    output_names = ("result", "content", "actual_type", "raw_result", "attachments", "_ARTIFACTS", "_ATTACHMENT_CONTENT")

    def validate(self, params: Mapping[str, Any] | None, context: ToolContext) -> list[ParamProblem]:
        params = self.merged_params(params)
        problems = []
        if str(params.get("lang") or "python").lower() not in LANGUAGES:
            problems.append(ParamProblem("lang", f"must be one of {sorted(LANGUAGES)}"))
        try:
            business_output(params)
        except ToolInputError as exc:
            problems.append(ParamProblem("outputs", exc.detail))
        return problems

    async def run(self, args: dict[str, Any], params: dict[str, Any], context: ToolContext) -> ToolResult:
        lang = str(args.get("lang") or params.get("lang") or "python").lower()
        language = LANGUAGES.get(lang)
        if language is None:
            raise ToolInputError(TOOL, "lang", f"'{lang}' is not supported (python, javascript)")
        script = args.get("script") or params.get("script") or ""
        if not isinstance(script, str) or not script.strip():
            raise ToolInputError(TOOL, "script", "no code to run")
        declared = params.get("arguments") or {}
        if not isinstance(declared, Mapping):
            raise ToolInputError(TOOL, "arguments", "'arguments' must be an object")
        # Declared arguments (resolved by the core); a truthy call argument of the same name wins.
        main_args = {str(k): (args[k] if args.get(k) else v) for k, v in declared.items()}
        name, declared_type = business_output(params)
        outcome = await context.runtime.sandbox.execute(
            language=language,
            code=script,
            arguments=main_args,
            timeout_s=context.settings.code_exec.timeout_s,
            request_id=context.request_id,
        )
        present, value = parse_value(outcome)
        failed_exit = outcome.exit_reason not in (sandbox_pb2.EXIT_REASON_OK, sandbox_pb2.EXIT_REASON_UNSPECIFIED)
        if outcome.result_json is None and not outcome.artifacts and not outcome.stdout.strip() and (failed_exit or outcome.stderr.strip()):
            detail = (outcome.exit_message or outcome.stderr.strip() or "the code failed")[-2000:]
            if outcome.exit_reason == sandbox_pb2.EXIT_REASON_TIMEOUT:
                raise ToolTimeoutError(TOOL, f"the code exceeded its time limit: {detail}")
            raise ToolExecutionError(TOOL, detail)
        if outcome.stderr.strip():
            logger.info("code_exec: stderr (%d chars) ignored: the call produced output", len(outcome.stderr))
        downloads = [self._download(a, context.request_id) for a in outcome.artifacts if a.content and not a.truncated]
        outputs: dict[str, Any] = {
            "content": canonical_text(value),
            "actual_type": type_name(value),
            "raw_result": value,
        }
        if matches_type(value, declared_type) or not present:
            outputs[name] = value
        else:
            outputs[name] = None
            outputs["_ERROR"] = f"output '{name}' should be {declared_type} but the code returned {type_name(value)}"
        if outcome.artifacts:
            outputs["_ARTIFACTS"] = [
                {"name": a.name, "doc_id": d.doc_id, "mime_type": a.mime_type, "size": a.size}
                for a, d in zip((a for a in outcome.artifacts if a.content and not a.truncated), downloads)
            ]
            outputs["attachments"] = "\n".join(
                f"![{a.name}](attachment://{d.doc_id})" if a.mime_type.startswith("image/") else f"[{a.name}](attachment://{d.doc_id})"
                for a, d in zip((a for a in outcome.artifacts if a.content and not a.truncated), downloads)
            )
            sections = [_attachment_section(i, a) for i, a in enumerate(outcome.artifacts, start=1)]
            outputs["_ATTACHMENT_CONTENT"] = f"attachment_count: {len(outcome.artifacts)}\n\n" + "\n\n".join(sections)
            outputs["content"] = f"{outputs['content']}\n\n{outputs['_ATTACHMENT_CONTENT']}".strip()
        model_view = {k: v for k, v in outputs.items() if k != "raw_result"}
        result = ToolResult(content=json.dumps(model_view, ensure_ascii=False, default=str), outputs=outputs, downloads=downloads)
        if "_ERROR" in outputs:
            result.error = ToolExecutionError(TOOL, outputs["_ERROR"])
        return result

    @staticmethod
    def _download(artifact: sandbox_pb2.Artifact, request_id: str) -> Download:
        digest = stable_id("artifact", request_id, artifact.name, base64.b64encode(artifact.content).decode("ascii"))
        return Download(
            doc_id=digest,
            filename=artifact.name,
            mime_type=artifact.mime_type or "application/octet-stream",
            size=artifact.size or len(artifact.content),
            base64=base64.b64encode(artifact.content).decode("ascii"),
        )
