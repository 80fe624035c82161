"""uvicorn's fast HTTP parser (httptools) with a request's head bounded, as h11 bounds it.

httptools buffers a request line and headers of any size before the app sees
them (a client could hold hundreds of MiB of one server's memory with one
header); h11 refuses a head past a size, but parses each request several times
slower. :class:`BoundedHttpToolsProtocol` keeps httptools and counts the bytes
of a head still incomplete: past :data:`~llm_envs.serve.guard.MAX_HEAD_BYTES`
(give or take one read from the socket) the request is answered 400 and the
connection closed. A head that arrives whole in one read is never refused
here; :class:`~llm_envs.serve.guard.Guard` measures it (431).

Each connection holds a file descriptor, and a server out of descriptors
answers nobody and cannot write an episode's record, so a connection is held
only while it makes progress, and only so many are held:

- a request's head is due within :data:`HEAD_SECONDS` of the connection's
  opening (or of its previous response), and its body within
  :data:`BODY_SECONDS` of its head; past either the connection is closed;
- past ``max_connections`` open connections (HTTP and WebSocket), a new one is
  answered 503 and closed at once, which keeps :data:`FD_RESERVE` descriptors
  of the process's limit for records, the sandbox and the step threads;
- past ``max_per_address`` of them from one client
  (:func:`~llm_envs.sandbox.fair.client_key`: one address, an IPv6 /48), a new
  one of that client's is answered 503 and closed too, so that one client
  holding connections leaves room for the others (default a quarter of
  ``max_connections``). Each loopback address counts apart, as in the sandbox
  service; a connection without a peer address (a unix socket) is counted in
  the total only.

This module imports uvicorn and httptools (the ``serve`` extra).
"""

from __future__ import annotations

import asyncio
import resource
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from llm_envs.sandbox.fair import client_key, tally
from llm_envs.serve.guard import MAX_HEAD_BYTES

__all__ = [
    "BODY_SECONDS",
    "FD_RESERVE",
    "HEAD_SECONDS",
    "BoundedHttpToolsProtocol",
    "default_max_connections",
    "default_max_per_address",
]

HEAD_SECONDS = 30.0
"""Seconds a connection has to send a request's line and headers."""

BODY_SECONDS = 30.0
"""Seconds a request has to send its body once its head is in (1 MiB at 35 KB/s)."""

FD_RESERVE = 128
"""File descriptors of the process's limit that connections may not take."""


def default_max_connections() -> int:
    """The open-file limit (soft) less :data:`FD_RESERVE`, and at least 1."""
    return max(1, resource.getrlimit(resource.RLIMIT_NOFILE)[0] - FD_RESERVE)


def default_max_per_address(max_connections: int) -> int:
    """A quarter of ``max_connections``, and at least 1: what one client may hold by default."""
    return max(1, max_connections // 4)


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a request's head, its time and the connections bounded.

    Args:
        max_connections: open connections (this server's, HTTP and WebSocket)
            past which a new one is answered 503 and closed; None:
            :func:`default_max_connections` when the protocol is made.
        max_per_address: open connections of one client past which its new one
            is answered 503 and closed; None: :func:`default_max_per_address`.
        per_address: the server's open connections by client, shared by all of
            its connections (one dict per server; the server's factory binds it).
    """

    def __init__(
        self,
        *args: Any,
        max_connections: int | None = None,
        max_per_address: int | None = None,
        per_address: dict[str, int] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self._head: int | None = 0  # bytes read while the current head is incomplete
        self._head_timer: asyncio.TimerHandle | None = None
        self._max_connections = max_connections or default_max_connections()
        self._max_per_address = max_per_address or default_max_per_address(self._max_connections)
        self._per_address = per_address if per_address is not None else {}
        self._address: str | None = None  # the client counted for this connection, once counted

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """A connection opens: refused past either bound, else its first head is due in time."""
        super().connection_made(transport)
        if len(self.connections) > self._max_connections:
            self._refuse(
                f"the server holds {self._max_connections} connections, its most: retry later, "
                "or raise --max-connections and the open-file limit"
            )
            return
        if self.client:
            address = client_key(self.client[0])
            held = self._per_address.get(address, 0)
            if held >= self._max_per_address:
                self._refuse(
                    f"client {address} holds {held} connections, the most one client may "
                    f"(--max-connections-per-address {self._max_per_address}, of "
                    f"--max-connections {self._max_connections}): close some, or reuse them"
                )
                return
            tally(self._per_address, address, 1)
            self._address = address
        self._await_head()

    def _refuse(self, reason: str) -> None:
        body = reason.encode()
        self.transport.write(
            b"HTTP/1.1 503 Service Unavailable\r\nconnection: close\r\n"
            b"content-type: text/plain; charset=utf-8\r\n"
            b"content-length: %d\r\n\r\n%s" % (len(body), body)
        )
        self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        """The connection is gone: no head is due any more, and its client holds one fewer."""
        self._head_arrived()
        self._leave()
        super().connection_lost(exc)

    def _leave(self) -> None:
        address, self._address = self._address, None
        if address is not None:
            tally(self._per_address, address, -1)

    def on_message_begin(self) -> None:
        """A request starts: its head is counted from here."""
        super().on_message_begin()
        self._head = 0
        if self._head_timer is None:
            self._await_head()

    def on_headers_complete(self) -> None:
        """The head is whole: stop counting (the body's size is the guard's); its body is due."""
        self._head = None
        self._await(BODY_SECONDS)
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        """The body is whole: nothing is due until the response is sent."""
        self._head_arrived()
        super().on_message_complete()

    def handle_websocket_upgrade(self) -> None:
        """The connection becomes a WebSocket's (uvicorn's pings watch it from here).

        The socket's protocol takes the transport, and this one never hears of
        it again: the socket's end releases the client's count.
        """
        self._head_arrived()
        super().handle_websocket_upgrade()
        socket = self.transport.get_protocol()
        if socket is self or self._address is None:
            return
        lost = socket.connection_lost

        def connection_lost(exc: Exception | None) -> None:
            self._leave()
            lost(exc)

        socket.connection_lost = connection_lost  # type: ignore[method-assign]

    def on_response_complete(self) -> None:
        """A response is sent: a kept-alive connection's next head is due in time too."""
        super().on_response_complete()
        if not self.transport.is_closing():
            self._await_head()

    def _await_head(self) -> None:
        self._await(HEAD_SECONDS)

    def _await(self, seconds: float) -> None:
        self._head_arrived()
        self._head_timer = self.loop.call_later(seconds, self._head_overdue)

    def _head_arrived(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_overdue(self) -> None:
        self._head_timer = None
        if not self.transport.is_closing() and self.transport.get_protocol() is self:
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
