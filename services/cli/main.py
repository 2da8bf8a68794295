"""`agent-canvas`: run canvases, manage them, and run the services.

    agent-canvas up [--config FILE]                      all five services as child processes
    agent-canvas serve store|orchestrator|gateway|sandbox|http
    agent-canvas run FILE|--canvas ID --query Q [--inputs JSON] [--session ID] [--json]
    agent-canvas run --resume RUN_ID [--inputs JSON] | --session ID [--query Q]   continue a paused run
    agent-canvas canvas import FILE... | list [--show-deleted] | get ID | export ID [-o FILE]
                        | delete ID [--etag E] | undelete ID [--etag E]
                        | revisions ID | publish ID [REV] [--etag E] | rollback ID REV [--etag E]
    agent-canvas runs list [--canvas ID] [--session ID] [--status S] [--limit N] | show RUN_ID
                      | tail RUN_ID [--after-seq N] | cancel RUN_ID
    agent-canvas validate FILE|--canvas ID [--json]
    agent-canvas kb add FILES... | list | remove ID...
    agent-canvas chat [--model M] PROMPT
    agent-canvas exec [--lang python|nodejs] FILE | -c CODE [--args JSON]
    agent-canvas completion bash|zsh                     a shell completion script
    agent-canvas --version

Commands that need a service use the one running at the configured address (see `up`) or, when
none answers, boot it in this process with the embedded defaults.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
import asyncio
import os
import signal
import sys
import threading
from pathlib import Path

import grpc

from services.cli.render import utf8_output
from services.common import errors, status
from services.common.settings import Config


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port number (0-65535)")
    return port


def _whole_number(least: int, rule: str) -> Callable[[str], int]:
    """An argparse type: an integer of at least `least`; `rule` says what it must be, in the error."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"{rule}, not {value}")
        return value
    return parse


_positive = _whole_number(1, "must be at least 1")
_not_negative = _whole_number(0, "must not be negative")


def version_text() -> str:
    """The installed package's version and the proto package (API version) this CLI speaks."""
    from importlib import metadata

    from agentcanvas.v1 import common_pb2

    try:
        version = metadata.version("agent-canvas")
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        version = "unknown"
    return f"agent-canvas {version} (protocol {common_pb2.DESCRIPTOR.package})"


class _Version(argparse.Action):
    """--version, resolved only when asked for (it imports the generated stubs)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(version_text())
        parser.exit()


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", help="YAML config file (default: $AGENT_CANVAS_CONFIG, else built-in defaults)")


def _stack_mode(parser: argparse.ArgumentParser) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--embedded", dest="mode", action="store_const", const="embedded",
                       help="always boot the services in this process")
    group.add_argument("--remote", dest="mode", action="store_const", const="remote",
                       help="only use already-running services")
    parser.set_defaults(mode="auto")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agent-canvas", description="Durable runtime for RAGFlow-compatible agent canvases.")
    parser.add_argument("--version", action=_Version, help="print the version and the protocol it speaks, and exit")
    commands = parser.add_subparsers(dest="command", required=True)

    up = commands.add_parser("up", help="run all five services as child processes until Ctrl-C")
    _common(up)
    up.add_argument("--demo", metavar="QUERY", help="once serving, run examples/hello.json with QUERY and keep serving")

    serve = commands.add_parser("serve", help="run one service in this process")
    _common(serve)
    serve.add_argument("service", choices=["store", "orchestrator", "gateway", "sandbox", "http"])
    serve.add_argument("--port", type=_port, help="listen port (default: $PORT, then the config)")
    serve.add_argument("--host", help="listen address (default: $AGENT_CANVAS_LISTEN_HOST, then 0.0.0.0)")

    run = commands.add_parser("run", help="run a canvas and stream its events")
    _common(run)
    _stack_mode(run)
    run.add_argument("file", nargs="?", type=Path, help="canvas file (template wrapper or bare DSL)")
    run.add_argument("--canvas", help="id of a stored canvas")
    run.add_argument("--revision", default="", help="revision id, 'published' or 'latest' (with --canvas)")
    run.add_argument("--query", "-q", default="", help="the question (sys.query)")
    run.add_argument("--inputs", default="{}", help="Begin form values or UserFillUp answers, as a JSON object")
    run.add_argument("--session", default="", help="session id (multi-turn; resumes a paused run)")
    run.add_argument("--resume", default="", metavar="RUN_ID",
                     help="continue this paused run (its own canvas; answer with --inputs / --query)")
    run.add_argument("--user", default="", help="end-user id exposed as sys.user_id")
    run.add_argument("--json", action="store_true", help="print one RunEvent per line (proto JSON mapping)")

    canvas = commands.add_parser("canvas", help="manage stored canvases")
    canvas_commands = canvas.add_subparsers(dest="canvas_command", required=True)
    imp = canvas_commands.add_parser("import", help="import RAGFlow template wrappers or bare DSL files")
    imp.add_argument("files", nargs="+", type=Path)
    imp.add_argument("--title", help="title (default: the file's title, else its name)")
    lst = canvas_commands.add_parser("list", help="list canvases")
    lst.add_argument("--filter", default="", help='e.g. title:"research" AND category=AGENT')
    lst.add_argument("--order-by", default="", help="update_time desc (default) or title")
    lst.add_argument("--page-size", type=int, default=50)
    lst.add_argument("--show-deleted", action="store_true", help="include soft-deleted canvases (marked 'deleted')")
    get = canvas_commands.add_parser("get", help="show one canvas")
    get.add_argument("id")
    get.add_argument("--dsl", action="store_true", help="include the DSL")
    exp = canvas_commands.add_parser("export", help="write a canvas to a file that imports back to an equal canvas")
    exp.add_argument("id")
    exp.add_argument("-o", "--output", type=Path, help="file (default: stdout)")
    delete = canvas_commands.add_parser("delete", help="soft-delete a canvas (restorable with undelete until it expires)")
    delete.add_argument("id")
    delete.add_argument("--etag", default="", help="only if the canvas still has this etag")
    undelete = canvas_commands.add_parser("undelete", help="restore a soft-deleted canvas")
    undelete.add_argument("id")
    undelete.add_argument("--etag", default="", help="only if the deleted canvas still has this etag (canvas get ID)")
    revisions = canvas_commands.add_parser("revisions", help="list a canvas's revisions, newest first (head and published marked)")
    revisions.add_argument("id")
    revisions.add_argument("--json", action="store_true", help="one JSON object per revision and line")
    publish = canvas_commands.add_parser("publish", help="make a revision the published one (default: the head)")
    publish.add_argument("id")
    publish.add_argument("revision", nargs="?", default="", metavar="REV")
    publish.add_argument("--etag", default="", help="only if the canvas still has this etag")
    rollback = canvas_commands.add_parser("rollback", help="make an old revision's DSL the head again")
    rollback.add_argument("id")
    rollback.add_argument("revision", metavar="REV")
    rollback.add_argument("--etag", default="", help="only if the canvas still has this etag (default: its current one)")
    for sub in (imp, lst, get, exp, delete, undelete, revisions, publish, rollback):
        _common(sub)
        _stack_mode(sub)

    runs = commands.add_parser("runs", help="list, inspect, follow and cancel runs")
    runs_commands = runs.add_subparsers(dest="runs_command", required=True)
    runs_list = runs_commands.add_parser("list", help="the newest runs you may see, newest first")
    runs_list.add_argument("--canvas", default="", help="only runs of this canvas")
    runs_list.add_argument("--session", default="", help="only runs of this session")
    runs_list.add_argument("--status", action="append", metavar="S",
                           help="only runs in this status (pending, running, paused, succeeded, failed, cancelled; "
                                "repeat or separate with commas)")
    runs_list.add_argument("--limit", type=_positive, default=20, metavar="N", help="at most N runs (default 20)")
    runs_list.add_argument("--json", action="store_true", help="one JSON object (the run record) per line")
    runs_show = runs_commands.add_parser("show", help="a run's status, canvas, node timings, usage and error")
    runs_show.add_argument("run_id", metavar="RUN_ID")
    runs_show.add_argument("--json", action="store_true", help="one JSON object: the run record and its nodes")
    runs_tail = runs_commands.add_parser("tail", help="reattach to a run: replay its events, then follow it live")
    runs_tail.add_argument("run_id", metavar="RUN_ID")
    runs_tail.add_argument("--after-seq", type=_not_negative, default=0, metavar="N", help="only events after seq N")
    runs_tail.add_argument("--json", action="store_true", help="print one RunEvent per line, as `run --json` does")
    runs_cancel = runs_commands.add_parser("cancel", help="cancel a running or paused run")
    runs_cancel.add_argument("run_id", metavar="RUN_ID")
    for sub in (runs_list, runs_show, runs_tail, runs_cancel):
        _common(sub)
        _stack_mode(sub)

    validate = commands.add_parser("validate", help="check a canvas without running it (exit 1 when it has problems)")
    _common(validate)
    _stack_mode(validate)
    validate.add_argument("file", nargs="?", type=Path, help="canvas file (template wrapper or bare DSL)")
    validate.add_argument("--canvas", help="id of a stored canvas (its head revision)")
    validate.add_argument("--json", action="store_true", help="one JSON object: valid and every problem")

    chat = commands.add_parser("chat", help="one model call through the gateway")
    _common(chat)
    _stack_mode(chat)
    chat.add_argument("prompt")
    chat.add_argument("--model", default="", help="llm_id (default: the configured default model)")
    chat.add_argument("--system", default="You are a helpful assistant. Answer in one short sentence.")
    chat.add_argument("--no-think", action="store_true", help="hide reasoning")
    chat.add_argument("--temperature", type=float, default=0.1)

    kb = commands.add_parser("kb", help="the embedded knowledge base used by Retrieval")
    kb_commands = kb.add_subparsers(dest="kb_command", required=True)
    kb_add = kb_commands.add_parser("add", help="add or update documents (files or directories)")
    kb_add.add_argument("files", nargs="+", type=Path)
    kb_list = kb_commands.add_parser("list", help="list documents")
    kb_remove = kb_commands.add_parser("remove", help="remove documents by id")
    kb_remove.add_argument("ids", nargs="+")
    for sub in (kb_add, kb_list):
        sub.add_argument("--dataset", help="dataset name (default: the knowledge base's default dataset)")
    for sub in (kb_add, kb_list, kb_remove):
        _common(sub)

    exe = commands.add_parser("exec", help="run code in the sandbox")
    _common(exe)
    _stack_mode(exe)
    exe.add_argument("file", nargs="?", type=Path)
    exe.add_argument("-c", "--code", help="code to run instead of a file")
    exe.add_argument("--lang", default="python", help="python | nodejs")
    exe.add_argument("--args", default="{}", help="JSON object passed as main(**args)")

    completion = commands.add_parser("completion", help="print a shell completion script (see the README)")
    completion.add_argument("shell", choices=["bash", "zsh"])
    return parser


def _report(exc: errors.AgentCanvasError) -> int:
    code = status.code_for(exc).name
    print(f"error: {code}: {exc.message}", file=sys.stderr)
    violations = getattr(exc, "violations", [])
    if len(violations) > 1:
        for violation in violations:
            print(f"  - {violation.field}: {violation.description}", file=sys.stderr)
    return 2


def _interrupt_on_sigterm(signum, frame) -> None:
    """SIGTERM does what Ctrl-C does: whatever handles SIGINT right now (asyncio.run's handler, which
    cancels the command so its cleanup runs, or the default one, which raises KeyboardInterrupt)."""
    handler = signal.getsignal(signal.SIGINT)
    if callable(handler):
        handler(signal.SIGINT, frame)
    else:
        raise KeyboardInterrupt


def _tolerate_any_encoding() -> None:
    """A terminal or pipe whose encoding cannot show a character (LANG=C without UTF-8 mode,
    PYTHONIOENCODING=ascii) gets an escape for it instead of a UnicodeEncodeError after the work is done."""
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure") and not utf8_output(stream):
            stream.reconfigure(errors="backslashreplace")


def _silence_closed_stdout() -> None:
    """The reader of our output went away (`| head -1`): send the rest, and Python's final flush, nowhere."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


def main(argv: list[str] | None = None) -> int:
    _tolerate_any_encoding()
    args = build_parser().parse_args(argv)
    # So that `kill`, systemd or a container runtime stopping the CLI stops what it started (the
    # services of `up`, in-process servers and the model server) instead of orphaning them.
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, _interrupt_on_sigterm)
    try:
        code = _main(args)
        sys.stdout.flush()  # inside the try: a pipe closed early fails here, not in Python's exit
        return code
    except BrokenPipeError:
        # Like any Unix filter whose reader exits: stop quietly, with the status a SIGPIPE death gives.
        _silence_closed_stdout()
        return 128 + signal.SIGPIPE
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _main(args: argparse.Namespace) -> int:
    if args.command == "completion":
        from services.cli.completion import script

        print(script(build_parser(), args.shell), end="")
        return 0
    try:
        config = Config.load(args.config)
        if args.command == "serve":
            from services.cli.commands import serve

            return serve(config, args)
        if args.command == "kb":
            from services.cli.commands import knowledge_base

            return knowledge_base(config, args)
        if args.command == "up":
            from services.cli.commands import up

            return up(config, args)
        from services.cli import commands, runs

        handler = {"run": commands.run, "canvas": commands.canvas, "chat": commands.chat, "exec": commands.execute,
                   "runs": runs.runs, "validate": runs.validate}[args.command]
        return asyncio.run(handler(config, args))
    except errors.AgentCanvasError as exc:
        return _report(exc)
    except grpc.aio.AioRpcError as exc:
        return _report(status.from_rpc_error(exc))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
