"""An HTTP endpoint that holds every request until released: keeps runs in flight on demand."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class _Handler(BaseHTTPRequestHandler):
    server: "Gate"

    def log_message(self, *args):  # keep test output clean
        pass

    def do_GET(self) -> None:
        with self.server.lock:
            self.server.arrived += 1
            self.server.changed.notify_all()
        self.server.release.wait(120)
        payload = b'{"ok": true}'
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


class Gate(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.release = threading.Event()
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)
        self.arrived = 0
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)

    def handle_error(self, request, client_address) -> None:
        pass  # a killed replica's held connection breaks when the gate answers it: expected here

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/hold"

    def wait_arrived(self, count: int, timeout: float = 60) -> bool:
        """Blocking (call it in an executor): until `count` requests are being held."""
        with self.lock:
            return self.changed.wait_for(lambda: self.arrived >= count, timeout)

    def __enter__(self) -> "Gate":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.release.set()
        self.shutdown()
        self.server_close()
