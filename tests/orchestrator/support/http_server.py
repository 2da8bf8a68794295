"""A tiny real HTTP server (stdlib) for Invoke tests: echoes requests, can fail on demand."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse


class _Handler(BaseHTTPRequestHandler):
    server: "EchoServer"

    def log_message(self, *args):  # keep test output clean
        pass

    def _reply(self) -> None:
        parsed = urlparse(self.path)
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length).decode() if length else ""
        self.server.hits.append(parsed.path)
        if parsed.path.startswith("/flaky") and self.server.failures_left > 0:
            self.server.failures_left -= 1
            self.send_response(503)
            self.end_headers()
            return
        if parsed.path.startswith("/slow") and not self.server.slow_done.is_set():
            self.server.slow_done.set()  # only the first request hangs (until the server shuts down)
            self.server.release.wait(120)
        if parsed.path.startswith("/missing"):
            self.send_response(404)
            self.end_headers()
            return
        if parsed.path.startswith("/html"):
            payload = b"<html><script>x()</script><body><h1>Title</h1><p>Hello   world</p></body></html>"
            ctype = "text/html"
        else:
            payload = json.dumps({"method": self.command, "path": parsed.path, "query": parse_qs(parsed.query),
                                  "body": body, "auth": self.headers.get("x-api-key")}).encode()
            ctype = "application/json"
        self.send_response(200)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = do_PUT = _reply


class EchoServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.hits: list[str] = []
        self.failures_left = 0
        self.slow_done = threading.Event()
        self.release = threading.Event()
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def __enter__(self) -> "EchoServer":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.release.set()
        self.shutdown()
        self.server_close()
