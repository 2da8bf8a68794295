"""Load clients for bench.store: keep N unary calls in flight for a slice of time, and say which process pays.

Two kinds, measured against the same store:
- `NativeLoad` (the default): bench/native/store_load.cc, a C++ gRPC client built here on first use with the
  system's gRPC (Debian: libgrpc++-dev libprotobuf-dev protobuf-compiler-grpc pkg-config g++). The client is
  only the harness, but it shares the machine's two cores with the store; this one costs a small fraction of
  the CPU per call of the cheapest Python client, so the cores go to the store under test.
- `PythonLoad`: one sync grpc-python channel, its `.future` calls chained by completion callbacks (the
  cheapest Python client measured; see `grpc_rate`).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import grpc

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "bench" / "native" / "store_load.cc"
PROTOS = ROOT / "protos"
PROTO_FILES = ("agentcanvas/v1/canvas_store.proto", "agentcanvas/v1/common.proto")
BUILD_DIR = ROOT / "build" / "bench"
BUILD_PACKAGES = "g++ pkg-config libgrpc++-dev libprotobuf-dev protobuf-compiler-grpc"


class Load(Protocol):
    pid: int
    """The process whose CPU the client's calls cost."""

    def run(self, seconds: float) -> tuple[int, float]:
        """Keep the calls in flight for `seconds`; returns (completed calls, elapsed seconds)."""

    def close(self) -> None: ...


class NativeClientUnavailable(RuntimeError):
    """The C++ load client cannot be built on this machine (the message says what is missing)."""


def grpc_rate(start: Callable[[int], grpc.Future], finish: Callable[[int, Any], None], concurrency: int,
              seconds: float) -> tuple[int, float]:
    """Keep `concurrency` calls in flight for `seconds`: `start(index)` issues one (a sync stub's `.future`),
    `finish(index, reply)` takes its reply, and the completion callback issues that worker's next call.

    Why callbacks on grpc's own completion thread and not grpc.aio or blocking stubs in threads: this is the
    cheapest Python client measured (Health.Check on the same server: ~80-110 us of client CPU per call, vs
    ~110-155 us for grpc.aio with 8 in-flight and ~130-150 us for blocking stubs in 8 threads).
    Returns (completed calls, seconds).
    """
    done = [0]
    failures: list[BaseException] = []
    active = [concurrency]
    finished = threading.Condition()
    counting = threading.Lock()
    stop = time.perf_counter() + seconds

    def issue(index: int, future: grpc.Future | None = None) -> None:
        try:
            if future is not None:
                finish(index, future.result())
                with counting:  # callbacks run on grpc's channel thread, or here when the call is already done
                    done[0] += 1
            if time.perf_counter() < stop and not failures:
                start(index).add_done_callback(lambda f: issue(index, f))
                return
        except BaseException as exc:  # noqa: BLE001 - carried to the caller, which fails the run
            failures.append(exc)
        with finished:
            active[0] -= 1
            finished.notify()

    started = time.perf_counter()
    for index in range(concurrency):
        issue(index)
    with finished:
        finished.wait_for(lambda: active[0] == 0)
    elapsed = time.perf_counter() - started
    if failures:
        raise failures[0]
    return done[0], elapsed


class PythonLoad:
    """grpc-python calls from this process: `start(index)` issues worker index's next call, `finish` checks it."""

    def __init__(self, start: Callable[[int], grpc.Future], finish: Callable[[int, Any], None], concurrency: int):
        self.pid = os.getpid()
        self._start, self._finish, self._concurrency = start, finish, concurrency

    def run(self, seconds: float) -> tuple[int, float]:
        return grpc_rate(self._start, self._finish, self._concurrency, seconds)

    def close(self) -> None:
        pass


class NativeLoad:
    """The C++ client as a child process, driven one slice at a time over its stdin/stdout.

    For `get` it cycles through `lines` (canvas ids); for `update`, `lines` are "id etag", one per worker, and each
    worker carries its canvas's etag from reply to request, as the Python harness does."""

    def __init__(self, binary: Path, target: str, token: str, op: str, concurrency: int, lines: Sequence[str]):
        self._process = subprocess.Popen([str(binary), target, token, op, str(concurrency)], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, text=True)
        self.pid = self._process.pid
        self._process.stdin.write("\n".join(lines) + "\n\n")
        self._process.stdin.flush()
        self._expect_reply()

    def _expect_reply(self) -> str:
        line = self._process.stdout.readline().strip()
        if not line or line.startswith("error"):
            self.close()
            raise RuntimeError(f"the native load client failed: {line or 'it exited'}")
        return line

    def run(self, seconds: float) -> tuple[int, float]:
        self._process.stdin.write(f"{seconds}\n")
        self._process.stdin.flush()
        done, elapsed = self._expect_reply().split()
        return int(done), float(elapsed)

    def close(self) -> None:
        if self._process.poll() is None:
            self._process.stdin.close()
            self._process.wait(30)


def build_native_client() -> Path:
    """The C++ load client, compiled into build/bench/ once per version of its source, the protos and the
    system's gRPC. Raises NativeClientUnavailable, naming what is missing, when it cannot be built."""
    tools = {name: shutil.which(name) for name in ("g++", "protoc", "grpc_cpp_plugin", "pkg-config")}
    if missing := [name for name, path in tools.items() if path is None]:
        raise NativeClientUnavailable(f"{', '.join(missing)} not found (Debian packages: {BUILD_PACKAGES})")
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "grpc++", "protobuf"], capture_output=True, text=True)
    versions = subprocess.run(["pkg-config", "--modversion", "grpc++", "protobuf"], capture_output=True, text=True)
    if flags.returncode != 0:
        raise NativeClientUnavailable(f"pkg-config knows no grpc++ (Debian packages: {BUILD_PACKAGES})")
    digest = hashlib.sha256(SOURCE.read_bytes() + versions.stdout.encode())
    for proto in PROTO_FILES:
        digest.update((PROTOS / proto).read_bytes())
    binary = BUILD_DIR / f"store_load-{digest.hexdigest()[:16]}"
    if binary.exists():
        return binary
    BUILD_DIR.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="store-load-", dir=BUILD_DIR) as tmp:
        generated = Path(tmp)
        compile_steps = [
            lambda: [tools["protoc"], f"-I{PROTOS}", f"--cpp_out={generated}", f"--grpc_out={generated}",
                     f"--plugin=protoc-gen-grpc={tools['grpc_cpp_plugin']}", *(str(PROTOS / p) for p in PROTO_FILES)],
            lambda: [tools["g++"], "-O2", "-std=c++17", f"-I{generated}", str(SOURCE),  # with what protoc generated
                     *(str(path) for path in sorted(generated.rglob("*.cc"))), "-o", str(generated / "store_load"),
                     *flags.stdout.split()],
        ]
        for command in compile_steps:
            step = command()
            result = subprocess.run(step, capture_output=True, text=True)
            if result.returncode != 0:
                raise NativeClientUnavailable(f"{Path(step[0]).name} failed: {result.stderr.strip()[-2000:]}")
        os.replace(generated / "store_load", binary)
    return binary
