"""uvicorn's fast HTTP parser (httptools) with a request's head bounded, as h11 bounds it.

httptools buffers a request line and headers of any size before the app sees
them (a client could hold hundreds of MiB of one server's memory with one
header); h11 refuses a head past a size, but parses each request several times
slower. :class:`BoundedHttpToolsProtocol` keeps httptools and counts the bytes
of a head still incomplete: past :data:`~llm_envs.serve.guard.MAX_HEAD_BYTES`
(give or take one read from the socket) the request is answered 400 and the
connection closed. A head that arrives whole in one read is never refused
here; :class:`~llm_envs.serve.guard.Guard` measures it (431).

A connection must also send each request's head within :data:`HEAD_SECONDS`
of opening (or of its previous response): a client that opens connections
and sends nothing, or a byte at a time, holds a file descriptor each, and a
server out of descriptors answers nobody and writes no record. Past it the
connection is closed.

This module imports uvicorn and httptools (the ``serve`` extra).
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from llm_envs.serve.guard import MAX_HEAD_BYTES

__all__ = ["HEAD_SECONDS", "BoundedHttpToolsProtocol"]

HEAD_SECONDS = 30.0
"""Seconds a connection has to send a request's line and headers."""


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, refusing a request head over ``MAX_HEAD_BYTES`` with 400."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head: int | None = 0  # bytes read while the current head is incomplete
        self._head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """A connection opens: its first head is due within ``HEAD_SECONDS``."""
        super().connection_made(transport)
        self._await_head()

    def connection_lost(self, exc: Exception | None) -> None:
        """The connection is gone: no head is due any more."""
        self._head_arrived()
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        """A request starts: its head is counted from here."""
        super().on_message_begin()
        self._head = 0
        if self._head_timer is None:
            self._await_head()

    def on_headers_complete(self) -> None:
        """The head is whole: stop counting (the body is the guard's)."""
        self._head = None
        self._head_arrived()
        super().on_headers_complete()

    def on_response_complete(self) -> None:
        """A response is sent: a kept-alive connection's next head is due in time too."""
        super().on_response_complete()
        if not self.transport.is_closing():
            self._await_head()

    def _await_head(self) -> None:
        self._head_arrived()
        self._head_timer = self.loop.call_later(HEAD_SECONDS, self._head_overdue)

    def _head_arrived(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_overdue(self) -> None:
        self._head_timer = None
        if not self.transport.is_closing():
            self.transport.close()

    def data_received(self, data: bytes) -> None:
        """Parse ``data``; refuse the request when its head, still incomplete, grew too large."""
        super().data_received(data)
        if self._head is None or self.transport.is_closing():
            return
        self._head += len(data)
        if self._head > MAX_HEAD_BYTES:
            self._head = None
            self.send_400_response(
                f"the request's line and headers are over {MAX_HEAD_BYTES} bytes: send fewer "
                "or shorter headers"
            )
