"""The CLI commands. Each talks to services only through the generated stubs."""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from pathlib import Path

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

from services.cli.files import export_document, from_canvas_message, load_document, to_canvas_message
from services.cli.render import TerminalView, event_json
from services.cli.stack import CLI_NAMES, Stack, build_definition, open_stack, spawn_processes, stop_children, wait_for_children
from services.common.bootstrap import run_service
from services.common.errors import InvalidArgumentError
from services.common.settings import Config
from services.common.structs import to_struct

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "hello.json"


def serve(config: Config, args: argparse.Namespace) -> int:
    service = CLI_NAMES[args.service]
    return run_service(build_definition(service, config), config, host=args.host, port=args.port)


def up(config: Config, args: argparse.Namespace) -> int:
    children = spawn_processes(config, config_path=args.config)
    try:
        asyncio.run(wait_for_children(children))
        for child in children:
            print(f"{child.service:<13} serving on {child.address}", file=sys.stderr)
        print(f"token: {config.data_dir / 'token'} (or set AGENT_CANVAS_TOKEN)", file=sys.stderr)
        if args.demo:
            demo = argparse.Namespace(file=EXAMPLE, canvas=None, revision="", query=args.demo, inputs="{}",
                                      session="", user="", json=False, mode="remote")
            asyncio.run(run(config, demo))
        print("press Ctrl-C to stop", file=sys.stderr)
        stop = asyncio.Event()

        async def wait_for_signal() -> None:
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, stop.set)
            waiters = [asyncio.create_task(stop.wait())]
            waiters += [asyncio.create_task(asyncio.to_thread(child.process.wait)) for child in children]
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)

        asyncio.run(wait_for_signal())
    finally:
        codes = stop_children(children)
    return 0 if all(code == 0 for code in codes) else 1


def _run_request(args: argparse.Namespace) -> orchestrator_pb2.RunCanvasRequest:
    if args.file and args.canvas:
        raise InvalidArgumentError.for_field("FILE|--canvas", "give a canvas file or --canvas ID, not both")
    if not (args.file or args.canvas or args.session):
        raise InvalidArgumentError.for_field("FILE|--canvas", "give a canvas file, --canvas ID, or --session ID to continue a session")
    request = orchestrator_pb2.RunCanvasRequest(
        revision_id=args.revision,
        query=args.query,
        inputs=to_struct(_parse_object(args.inputs, "--inputs")),
        session_id=args.session,
        user_id=args.user,
    )
    if args.file:
        request.dsl.CopyFrom(to_struct(load_document(args.file).dsl))
    else:
        request.canvas_id = args.canvas
    return request


def _parse_object(text: str, flag: str) -> dict:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidArgumentError.for_field(flag, f"is not valid JSON: {exc.msg}") from None
    if not isinstance(value, dict):
        raise InvalidArgumentError.for_field(flag, "must be a JSON object")
    return value


async def run(config: Config, args: argparse.Namespace) -> int:
    request = _run_request(args)
    stack = await open_stack(config, ["orchestrator"], mode=args.mode)
    try:
        stub = orchestrator_pb2_grpc.OrchestratorStub(stack.channel("orchestrator"))
        view = TerminalView()
        final = None
        # The batched stream: the same events, fewer messages (one per commit of the run).
        async for batch in stub.RunCanvasBatched(request, metadata=stack.metadata()):
            for event in batch.events:
                if args.json:
                    print(event_json(event), flush=True)
                else:
                    view.show(event)
                if event.WhichOneof("event") == "workflow_finished":
                    final = event.workflow_finished.status
    finally:
        await stack.close()
    return 0 if final in (common_pb2.RUN_STATUS_SUCCEEDED, common_pb2.RUN_STATUS_PAUSED) else 1


async def canvas(config: Config, args: argparse.Namespace) -> int:
    stack: Stack = await open_stack(config, ["canvas_store"], mode=args.mode)
    try:
        stub = canvas_store_pb2_grpc.CanvasStoreStub(stack.channel("canvas_store"))
        metadata = stack.metadata()
        if args.canvas_command == "import":
            for path in args.files:
                created = await stub.CreateCanvas(
                    canvas_store_pb2.CreateCanvasRequest(canvas=to_canvas_message(load_document(path), args.title)),
                    metadata=metadata,
                )
                print(f"{created.id}\t{created.title}")
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
            if not args.dsl:
                shown.pop("dsl", None)
            print(json.dumps(shown, indent=2, ensure_ascii=False))
        elif args.canvas_command == "delete":
            reply = await stub.DeleteCanvas(canvas_store_pb2.DeleteCanvasRequest(id=args.id, etag=args.etag),
                                            metadata=metadata)
            expires = reply.canvas.expire_time.ToDatetime().isoformat(timespec="seconds") + "Z"
            print(f"{reply.canvas.id}\tdeleted\trestorable until {expires}")
        elif args.canvas_command == "undelete":
            item = await stub.UndeleteCanvas(canvas_store_pb2.UndeleteCanvasRequest(id=args.id, etag=args.etag),
                                             metadata=metadata)
            print(f"{item.id}\trestored\t{item.title}")
        elif args.canvas_command == "export":
            item = await stub.GetCanvas(canvas_store_pb2.GetCanvasRequest(id=args.id), metadata=metadata)
            text = json.dumps(export_document(from_canvas_message(item)), indent=2, ensure_ascii=False)
            if args.output:
                args.output.write_text(text + "\n")
            else:
                print(text)
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
        removed = set(kb_cli.remove(args.ids, config))
        for document_id in args.ids:
            print(f"{document_id}\t{'removed' if document_id in removed else 'not found'}")
        if len(removed) != len(set(args.ids)):
            return 1
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
    code = args.code if args.code else args.file.read_text()
    stack = await open_stack(config, ["sandbox"], mode=args.mode)
    exit_event = None
    try:
        stub = sandbox_pb2_grpc.SandboxStub(stack.channel("sandbox"))
        request = sandbox_pb2.ExecuteRequest(language=args.lang, code=code, arguments=to_struct(_parse_object(args.args, "--args")))
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
