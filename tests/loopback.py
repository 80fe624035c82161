"""An HTTP server on 127.0.0.1 for tests that play a remote service (never the network).

Subclasses say what to answer in :meth:`LoopbackServer.respond`; the server
reads each request's JSON body, sends the answer with its length, keeps the
test output free of access logs, and serves on a daemon thread while the
``with`` block runs.

A server a test starts as another process announces its URL with
:func:`announce` (a file, written whole) and the test waits with
:func:`wait_for_announcement`: stdout is never the protocol, since any library
the server imports may print there first.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


class LoopbackServer:
    """A server on a free port of 127.0.0.1; ``url`` is its OpenAI-style ``/v1`` base URL."""

    def __init__(self) -> None:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def _handle(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                status, headers, data = owner.respond(method, self.path, self.headers, body)
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._handle("GET")

            def do_POST(self) -> None:
                self._handle("POST")

            def log_message(self, format: str, *args: object) -> None:
                pass  # keep the test output clean

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_port}/v1"
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )

    def respond(
        self, method: str, path: str, headers: Mapping[str, str], body: Any
    ) -> tuple[int, Mapping[str, str], bytes]:
        """``(status, headers, data)`` for one request; ``body`` is its parsed JSON or None."""
        raise NotImplementedError

    def __enter__(self) -> LoopbackServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


JSON = {"Content-Type": "application/json"}
"""The header of a JSON answer."""


def announce(url: str, path: Path) -> None:
    """Publish ``url`` in ``path`` once the server listens: written beside it, then renamed.

    A reader polling for ``path`` sees no file or the whole URL, never a part.
    """
    partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
    partial.write_text(url, encoding="utf-8")
    os.replace(partial, path)


def wait_for_announcement(process: subprocess.Popen[Any], path: Path, timeout: float) -> str | None:
    """The URL ``process`` announced in ``path``; None once it exits or ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            return path.read_text(encoding="utf-8") if path.exists() else None
        time.sleep(0.05)
    return path.read_text(encoding="utf-8")
