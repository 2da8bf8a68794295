"""agent-canvas services: canvas_store, orchestrator, llm_gateway and sandbox, plus what they share."""

import os

# gRPC's fork support (on by default in grpcio's core) installs pthread_atfork handlers. Our processes never
# use gRPC in a forked child (every child they start execs at once), and under uvloop those handlers broke
# children before their exec now and then: libuv starts processes with fork(), where CPython's subprocess
# uses vfork(), which runs no atfork handlers. Set before anything imports grpc; the environment still wins.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "0")

# Every parse of Python source in a process of ours is serialised (services/common/python_ast.py): CPython 3.11
# can fail two threads that parse at once, and the standard library parses whenever it formats a traceback.
# Installed here, before any service starts a thread.
from services.common import python_ast as _python_ast  # noqa: E402,F401
