"""The CLI commands. Each talks to services only through the generated stubs."""

from __future__ import annotations

import argparse
import asyncio
import json
import shlex
import sys
from pathlib import Path

import grpc

from agentcanvas.v1 import (
    canvas_store_pb2,
    canvas_store_pb2_grpc,
    common_pb2,
    llm_gateway_pb2,
    llm_gateway_pb2_grpc,
    orchestrator_pb2,
    orchestrator_pb2_grpc,
    sandbox_pb2,
    sandbox_pb2_grpc,
)
from google.protobuf import json_format

from services.cli.files import (NotJsonNumber, export_document, find_unsendable_number, from_canvas_message, load_document,
                                read_text, reject_constant, to_canvas_message, write_text)
from services.cli.render import TerminalView, event_json, utf8_output
from services.cli.stack import (CLI_NAMES, ChildExited, ChildProcess, Stack, build_definition, first_exit, open_stack,
                                spawn_processes, stop_children, wait_for_children)
from services.common import status
from services.common.bootstrap import run_service
from services.common.errors import AgentCanvasError, FailedPreconditionError, InvalidArgumentError
from services.common.settings import Config
from services.common.json_text import dump_object
from services.common.structs import to_struct

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "hello.json"


def _report_one(exc: AgentCanvasError, path: str) -> None:
    """One line for one failed file of a batch (the file is named once)."""
    message = exc.message if path in exc.message else f"{path}: {exc.message}"
    print(f"error: {status.code_for(exc).name}: {message}", file=sys.stderr)


def serve(config: Config, args: argparse.Namespace) -> int:
    service = CLI_NAMES[args.service]
    if service == "http_api":  # HTTP on uvicorn, not a gRPC server
        from services.http_api.runner import run as run_http

        return run_http(config, host=args.host, port=args.port)
    try:
        return run_service(build_definition(service, config), config, host=args.host, port=args.port)
    except RuntimeError as exc:
        if not str(exc).startswith("Failed to bind"):  # grpc's words for a port it cannot listen on
            raise
        raise FailedPreconditionError(
            f"{service}: {str(exc).split(';')[0]} (is something else listening there? choose another with --port)"
        ) from None


def up(config: Config, args: argparse.Namespace) -> int:
    """Until Ctrl-C or SIGTERM (main turns SIGTERM into the same interrupt), or until a service exits
    on its own: then the others are stopped and the dead one is named (exit 1)."""
    children = spawn_processes(config, config_path=args.config)
    try:
        try:
            asyncio.run(wait_for_children(children))
        except ChildExited as exc:
            print(f"error: {exc.child.service} exited with code {exc.code} while starting "
                  f"(see its log above); stopping the other services", file=sys.stderr)
            return 1
        for child in children:
            print(f"{child.service:<13} serving on {child.address} (pid {child.process.pid})", file=sys.stderr)
        print(f"token: {config.data_dir / 'token'} (or set AGENT_CANVAS_TOKEN)", file=sys.stderr)
        if args.demo:
            demo = argparse.Namespace(file=EXAMPLE, canvas=None, revision="", query=args.demo, inputs="{}",
                                      session="", resume="", user="", json=False, mode="remote", config=args.config)
            asyncio.run(run(config, demo))
        print("press Ctrl-C to stop", file=sys.stderr)

        async def until_one_exits() -> ChildProcess:
            return await first_exit(children)

        gone = asyncio.run(until_one_exits())
        print(f"error: {gone.service} exited with code {gone.process.returncode}; stopping the other services",
              file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass  # Ctrl-C or SIGTERM: the normal way to stop
    finally:
        codes = stop_children(children)
    return 0 if all(code == 0 for code in codes) else 1


def _run_request(args: argparse.Namespace) -> orchestrator_pb2.RunCanvasRequest:
    resume = getattr(args, "resume", "") or ""
    if args.file and args.canvas:
        raise InvalidArgumentError.for_field("FILE|--canvas", "give a canvas file or --canvas ID, not both")
    if resume and (args.file or args.canvas):
        raise InvalidArgumentError.for_field("--resume", "continues a paused run with its own canvas; give no FILE or --canvas")
    if not (args.file or args.canvas or args.session or resume):
        raise InvalidArgumentError.for_field(
            "FILE|--canvas", "give a canvas file, --canvas ID, --session ID to continue a session, or --resume RUN_ID")
    request = orchestrator_pb2.RunCanvasRequest(
        revision_id=args.revision,
        query=args.query,
        inputs=to_struct(_parse_object(args.inputs, "--inputs")),
        session_id=args.session,
        user_id=args.user,
        resume_run_id=resume,
    )
    if args.file:
        request.dsl_json = dump_object(load_document(args.file).dsl)  # text keeps the key order a Struct loses
    elif args.canvas:
        request.canvas_id = args.canvas
    # else: the session knows its canvas, a paused run its DSL
    return request


def text_delivery(as_json: bool, view: TerminalView) -> int:
    """LIVE for --json (every event, MessageReset included) and a terminal; CONFIRMED when the answer goes to a
    pipe or file, which cannot take text back: each answer then arrives once, whole."""
    if as_json or view.live_text:
        return orchestrator_pb2.TEXT_DELIVERY_LIVE
    return orchestrator_pb2.TEXT_DELIVERY_CONFIRMED


def _resume_hint(args: argparse.Namespace, run_id: str, session_id: str, fields: list[str]) -> str:
    """The command that continues a paused run (by its session when it has one, else by its id)."""
    words = ["agent-canvas", "run"]
    words += ["--session", session_id] if session_id else ["--resume", run_id]
    if fields:
        words += ["--inputs", shlex.quote(json.dumps({name: "..." for name in fields}, ensure_ascii=False))]
    if getattr(args, "config", None):
        words += ["--config", shlex.quote(str(args.config))]
    return " ".join(words)


def _parse_object(text: str, flag: str) -> dict:
    try:
        value = json.loads(text, parse_constant=reject_constant)
    except json.JSONDecodeError as exc:
        raise InvalidArgumentError.for_field(flag, f"is not valid JSON: {exc.msg}") from None
    except NotJsonNumber as exc:
        raise InvalidArgumentError.for_field(flag, f"is not valid JSON: {exc}") from None
    except RecursionError:
        raise InvalidArgumentError.for_field(flag, "nests arrays or objects too deeply to read") from None
    except ValueError:  # the only other refusal: Python reads integers of at most 4300 digits
        raise InvalidArgumentError.for_field(flag, "holds an integer of more than 4300 digits") from None
    if not isinstance(value, dict):
        raise InvalidArgumentError.for_field(flag, "must be a JSON object")
    if (where := find_unsendable_number(value)) is not None:
        path, problem = where
        raise InvalidArgumentError.for_field(f"{flag}{path}", problem)
    return value


async def follow(batches, args: argparse.Namespace, view: TerminalView) -> int:
    """Print a run's events as they arrive (`--json` lines or the live view) and return the exit code: 0 for a
    succeeded or paused run (with the command that continues a paused one on stderr), 1 otherwise. Shared by
    `run` and `runs tail`, so that a replay prints exactly what the live run printed."""
    final = None
    run_id = session_id = ""
    waiting: list[str] = []
    async for batch in batches:
        for event in batch.events:
            if args.json:
                print(event_json(event), flush=True)
            else:
                view.show(event)
            kind = event.WhichOneof("event")
            if kind == "user_inputs_required":
                waiting += [name for name in event.user_inputs_required.inputs.keys() if name not in waiting]
            elif kind == "workflow_finished":
                final = event.workflow_finished.status
                run_id, session_id = event.run_id, event.session_id
    if final == common_pb2.RUN_STATUS_PAUSED and run_id:
        print(f"paused; to continue: {_resume_hint(args, run_id, session_id, waiting)}", file=sys.stderr)
    return 0 if final in (common_pb2.RUN_STATUS_SUCCEEDED, common_pb2.RUN_STATUS_PAUSED) else 1


async def run(config: Config, args: argparse.Namespace) -> int:
    request = _run_request(args)
    stack = await open_stack(config, ["orchestrator"], mode=args.mode)
    try:
        stub = orchestrator_pb2_grpc.OrchestratorStub(stack.channel("orchestrator"))
        view = TerminalView()
        request.text_delivery = text_delivery(args.json, view)
        # The batched stream: the same events, fewer messages (one per commit of the run).
        return await follow(stub.RunCanvasBatched(request, metadata=stack.metadata()), args, view)
    finally:
        await stack.close()


async def canvas(config: Config, args: argparse.Namespace) -> int:
    stack: Stack = await open_stack(config, ["canvas_store"], mode=args.mode)
    try:
        stub = canvas_store_pb2_grpc.CanvasStoreStub(stack.channel("canvas_store"))
        metadata = stack.metadata()
        if args.canvas_command == "import":
            # Each file on its own: a bad one is reported (one line) and the others are still imported.
            failed = 0
            for path in args.files:
                try:
                    created = await stub.CreateCanvas(
                        canvas_store_pb2.CreateCanvasRequest(canvas=to_canvas_message(load_document(path), args.title)),
                        metadata=metadata,
                    )
                except AgentCanvasError as exc:
                    failed += 1
                    _report_one(exc, str(path))
                    continue
                except grpc.aio.AioRpcError as exc:
                    if exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.UNAUTHENTICATED):
                        raise  # the store is gone or refuses us: no point in trying the next file
                    failed += 1
                    _report_one(status.from_rpc_error(exc), str(path))
                    continue
                print(f"{created.id}\t{created.title}")
            if failed:
                return 2
        elif args.canvas_command == "list":
            request = canvas_store_pb2.ListCanvasesRequest(page_size=args.page_size, filter=args.filter, order_by=args.order_by,
                                                           show_deleted=args.show_deleted)
            while True:
                page = await stub.ListCanvases(request, metadata=metadata)
                for item in page.canvases:
                    category = canvas_store_pb2.CanvasCategory.Name(item.category).removeprefix("CANVAS_CATEGORY_")
                    print(f"{item.id}\t{category}\t{item.title}" + ("\tdeleted" if item.HasField("delete_time") else ""))
                if not page.next_page_token:
                    break
                request.page_token = page.next_page_token
        elif args.canvas_command == "get":
            item = await stub.GetCanvas(canvas_store_pb2.GetCanvasRequest(id=args.id), metadata=metadata)
            shown = json_format.MessageToDict(item)
            text = shown.pop("dslJson", None)
            if not args.dsl:
                shown.pop("dsl", None)
            elif text:
                shown["dsl"] = json.loads(text)  # in the order it was written (the Struct's is arbitrary)
            print(json.dumps(shown, indent=2, ensure_ascii=not utf8_output()))
        elif args.canvas_command == "delete":
            reply = await stub.DeleteCanvas(canvas_store_pb2.DeleteCanvasRequest(id=args.id, etag=args.etag),
                                            metadata=metadata)
            expires = reply.canvas.expire_time.ToDatetime().isoformat(timespec="seconds") + "Z"
            print(f"{reply.canvas.id}\tdeleted\trestorable until {expires}")
        elif args.canvas_command == "undelete":
            item = await stub.UndeleteCanvas(canvas_store_pb2.UndeleteCanvasRequest(id=args.id, etag=args.etag),
                                             metadata=metadata)
            print(f"{item.id}\trestored\t{item.title}")
        elif args.canvas_command in ("revisions", "publish", "rollback"):
            from services.cli.revisions import revisions_command

            await revisions_command(stub, args, metadata)
        elif args.canvas_command == "export":
            item = await stub.GetCanvas(canvas_store_pb2.GetCanvasRequest(id=args.id), metadata=metadata)
            document = export_document(from_canvas_message(item))
            if args.output:
                write_text(args.output, json.dumps(document, indent=2, ensure_ascii=False) + "\n")
            else:
                print(json.dumps(document, indent=2, ensure_ascii=not utf8_output()))
    finally:
        await stack.close()
    return 0


def knowledge_base(config: Config, args: argparse.Namespace) -> int:
    from services.orchestrator.tools import kb_cli

    if args.kb_command == "add":
        print(kb_cli.format_documents(kb_cli.add(args.files, config, dataset=args.dataset)))
    elif args.kb_command == "list":
        print(kb_cli.format_documents(kb_cli.list_documents(config, dataset=args.dataset)))
    else:
        # Like canvas import: every id is tried, and an unknown one is bad input (exit 2, one error line).
        removed = set(kb_cli.remove(args.ids, config))
        unknown = [document_id for document_id in dict.fromkeys(args.ids) if document_id not in removed]
        for document_id in args.ids:
            print(f"{document_id}\t{'removed' if document_id in removed else 'not found'}")
        for document_id in unknown:
            print(f"error: NOT_FOUND: {document_id}: no such document in the knowledge base", file=sys.stderr)
        if unknown:
            return 2
    return 0


async def chat(config: Config, args: argparse.Namespace) -> int:
    stack = await open_stack(config, ["llm_gateway"], mode=args.mode)
    view_out = sys.stdout
    try:
        stub = llm_gateway_pb2_grpc.LlmGatewayStub(stack.channel("llm_gateway"))
        request = llm_gateway_pb2.ChatRequest(
            model=args.model,
            messages=[
                llm_gateway_pb2.ChatMessage(role="system", content=args.system),
                llm_gateway_pb2.ChatMessage(role="user", content=args.prompt),
            ],
            with_reasoning=not args.no_think,
            generation=llm_gateway_pb2.GenerationConfig(temperature=args.temperature),
        )
        finish = None
        async for event in stub.ChatStream(request, metadata=stack.metadata()):
            kind = event.WhichOneof("event")
            if kind == "text_delta":
                view_out.write(event.text_delta.text)
                view_out.flush()
            elif kind == "think_delta":
                view_out.write(f"\033[2m{event.think_delta.text}\033[0m")
            elif kind == "finish":
                finish = event.finish
        view_out.write("\n")
    finally:
        await stack.close()
    if finish is not None and finish.reason == llm_gateway_pb2.FINISH_REASON_ERROR:
        print(f"error: {llm_gateway_pb2.ChatErrorKind.Name(finish.error.kind)}: {finish.error.message}", file=sys.stderr)
        return 1
    return 0


async def execute(config: Config, args: argparse.Namespace) -> int:
    if bool(args.file) == bool(args.code):
        raise InvalidArgumentError.for_field("FILE|-c", "give exactly one of a file or -c CODE")
    code = args.code if args.code else read_text(args.file)
    arguments = to_struct(_parse_object(args.args, "--args"))  # refused before anything starts
    stack = await open_stack(config, ["sandbox"], mode=args.mode)
    exit_event = None
    try:
        stub = sandbox_pb2_grpc.SandboxStub(stack.channel("sandbox"))
        request = sandbox_pb2.ExecuteRequest(language=args.lang, code=code, arguments=arguments)
        async for event in stub.Execute(request, metadata=stack.metadata()):
            kind = event.WhichOneof("event")
            if kind == "stdout":
                sys.stdout.buffer.write(event.stdout.data)
                sys.stdout.flush()
            elif kind == "stderr":
                sys.stderr.buffer.write(event.stderr.data)
                sys.stderr.flush()
            elif kind == "result":
                print(f"result: {event.result.json}")
            elif kind == "artifact":
                print(f"artifact: {event.artifact.name} ({event.artifact.mime_type}, {event.artifact.size} bytes)", file=sys.stderr)
            elif kind == "exit":
                exit_event = event.exit
    finally:
        await stack.close()
    if exit_event is None:
        return 1
    if exit_event.reason != sandbox_pb2.EXIT_REASON_OK:
        print(f"exit: {sandbox_pb2.ExitReason.Name(exit_event.reason)} {exit_event.message}".rstrip(), file=sys.stderr)
    return exit_event.code if exit_event.code >= 0 else 1
