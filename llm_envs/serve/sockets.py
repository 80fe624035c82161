"""uvicorn's WebSocket protocol with the messages it buffers counted, per client and in all.

uvicorn reads a WebSocket's frames into memory until a message is whole, and
queues the whole message until the app takes it. ``ws_max_size`` bounds one
message, but not how many sockets hold one: a client that opens many sockets
and sends each all but the last fragment of a message held about
``--max-body-bytes`` per socket, bounded only by its share of the connections
(about 6 GB from one client at the defaults, measured at 1.22 MB a socket).

:class:`BoundedWebSocketProtocol` counts, after each read from the socket,
the bytes that socket holds for messages the app has not taken: the frame
still arriving, the fragments of an unfinished message, and the whole
messages queued. The counts meet in one :class:`MessageBudget` per server;
a read that takes a client past its share, or the server past the total,
closes that socket with code 1013 (try again later) and a reason naming the
bound, and what it held is let go. The bound is the HTTP bodies' twin
(:class:`~llm_envs.serve.guard.Guard`): 64 messages of ``--max-body-bytes``
in all, a quarter of that per client.

This module imports uvicorn and websockets (the ``serve`` extra).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from typing import Any

from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

from llm_envs.sandbox.fair import client_key, tally

__all__ = [
    "BUFFERED_SHARE",
    "FRAMES_PER_SECOND",
    "FRAME_OVERHEAD",
    "MAX_PACED_CLIENTS",
    "MESSAGE_OVERHEAD",
    "PIECE_FRAMES",
    "SMALLEST_FRAME",
    "TRY_LATER",
    "BoundedWebSocketProtocol",
    "MessageBudget",
]

BUFFERED_SHARE = 4
"""One client may hold a ``1/BUFFERED_SHARE`` of the message bytes the server holds."""
TRY_LATER = 1013
"""The close code of a socket past the budget (RFC 6455's registry: try again later)."""
MESSAGE_OVERHEAD = 512
"""Bytes a queued message counts beyond its own: the event and objects that carry it
(a read of 64 KiB of empty messages queues thousands of them)."""
FRAMES_PER_SECOND = 10_000.0
"""Frames of one client parsed a second (and at once), over all its sockets: about 3.5 %
of the event loop here, where 300,000 a second took all of it."""
SMALLEST_FRAME = 6
"""Bytes of the smallest frame a client sends (a 2-byte head and a 4-byte mask)."""
PIECE_FRAMES = 1000
"""Frames of allowance a paced read waits for before its next piece is parsed."""
MAX_PACED_CLIENTS = 4096
"""Clients whose frame allowance is remembered before those refilled are forgotten."""
FRAME_OVERHEAD = 64
"""Bytes a fragment of an unfinished message counts beyond its own: the object that
holds it (empty fragments cost nothing to send and about this much each to keep)."""


class MessageBudget:
    """Bytes of WebSocket messages the app has not taken, held by a server's sockets.

    Args:
        total: the most bytes all sockets hold at once.
        largest: the largest message (``--max-body-bytes``): a client's share
            is a quarter of ``total`` and never less than one message.

    Example:
        >>> budget = MessageBudget(total=100, largest=10)
        >>> budget.take("a", 25), budget.take("a", 1)  # a's share is 25
        (None, 'client a holds 25 message bytes, and 1 more is past its share, 25')
        >>> budget.give("a", 25); budget.held
        0
    """

    def __init__(
        self,
        total: int,
        largest: int,
        frames_per_second: float = FRAMES_PER_SECOND,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if largest < 1 or total < largest:
            raise ValueError(f"a budget needs total >= largest >= 1, got {total}, {largest}")
        if frames_per_second <= 0:
            raise ValueError(f"frames_per_second must be > 0, got {frames_per_second}")
        self.total = total
        self.share = max(total // BUFFERED_SHARE, largest)
        self.held = 0
        self.frames_per_second = frames_per_second
        self._clock = clock
        self._by_client: dict[str, int] = {}
        self._frames: dict[
            str, tuple[float, float]
        ] = {}  # client -> (frames it may still send, when)

    def take(self, client: str, more: int) -> str | None:
        """Count ``more`` bytes as ``client``'s, or say which bound refuses them.

        The reason is a close frame's (at most 123 bytes): short, and whole.
        """
        mine = self._by_client.get(client, 0)
        if mine + more > self.share:
            return (
                f"client {client} holds {mine} message bytes, "
                f"and {more} more is past its share, {self.share}"
            )
        if self.held + more > self.total:
            return (
                f"the server holds {self.held} message bytes, "
                f"and {more} more is past its {self.total}"
            )
        self.held += more
        tally(self._by_client, client, more)
        return None

    def give(self, client: str, bytes_: int) -> None:
        """Count out ``bytes_`` of ``client``'s."""
        self.held -= bytes_
        tally(self._by_client, client, -bytes_)

    def allowance(self, client: str) -> int:
        """Frames ``client`` may have parsed now (0: none until :meth:`wait` has passed).

        Each client may have :attr:`frames_per_second` frames parsed a second,
        and as many at once: parsing is the event loop's work, and without a
        pace one client's empty frames (300,000 a second from 1.7 MB/s) held
        every other client's request for seconds.
        """
        return max(0, int(self._allowed(client)))

    def wait(self, client: str, frames: int = 1) -> float:
        """Seconds until ``client`` may have ``frames`` more parsed (0: now)."""
        allowed = self._allowed(client)
        return 0.0 if allowed >= frames else (frames - allowed) / self.frames_per_second

    def spend(self, client: str, frames: int) -> None:
        """Count ``frames`` parsed for ``client``."""
        self._frames[client] = (self._allowed(client) - frames, self._clock())
        if len(self._frames) > MAX_PACED_CLIENTS:  # forget the clients whose allowance is whole
            now = self._clock()
            for other, (allowed, at) in list(self._frames.items()):
                if allowed + (now - at) * self.frames_per_second >= self.frames_per_second:
                    del self._frames[other]

    def _allowed(self, client: str) -> float:
        allowed, at = self._frames.get(client, (self.frames_per_second, self._clock()))
        refilled = allowed + (self._clock() - at) * self.frames_per_second
        return min(self.frames_per_second, refilled)


class BoundedWebSocketProtocol(WebSocketsSansIOProtocol):
    """uvicorn's WebSocket protocol (websockets' parser) with what it buffers bounded.

    Messages the app has not taken count in the server's :class:`MessageBudget`
    (a queued message with :data:`MESSAGE_OVERHEAD` more, for the objects that
    carry it). And a peer that stops reading stops being read: while the
    transport's outgoing buffer is past its high-water mark, the socket reads
    nothing, so the pongs the protocol answers every ping with (written
    straight to the transport, where the app's messages wait their turn)
    cannot pile up on the server for a peer that sends pings and never reads.

    Args:
        budget: the server's :class:`MessageBudget`, shared by all its sockets
            (the server's factory binds it).
    """

    def __init__(self, *args: Any, budget: MessageBudget, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._budget = budget
        self._client = ""  # the peer's client key, once connected
        self._counted = 0  # bytes of this socket's counted in the budget
        self._fragments = 0  # bytes of the unfinished message's fragments, with their overhead
        self._queued: deque[int] = deque()  # sizes of the whole messages the app has not taken
        self._queued_total = 0
        self._peer_reads = True  # False while the transport's outgoing buffer is full
        self._deferred: bytearray | None = None  # what is read and not yet parsed
        self._draining = False  # a timer parses the rest of _deferred
        self._frames_seen = 0

    def connection_made(self, transport: Any) -> None:
        """The socket opens (uvicorn hands it over from the HTTP upgrade): its client is known."""
        super().connection_made(transport)
        self._client = client_key(self.client[0]) if self.client else ""

    def data_received(self, data: bytes) -> None:
        """Parse ``data`` at its client's pace; count what it holds; close it past the budget.

        A read is parsed in pieces of at most the client's allowance of frames
        (:meth:`MessageBudget.allowance`; a frame from a client is at least
        :data:`SMALLEST_FRAME` bytes); what is left waits, kept and counted,
        and the socket is not read until it is parsed.
        """
        if self._deferred is None:
            self._deferred = bytearray(data)
        else:
            self._deferred += data
        if self._draining:  # a piece of an earlier read waits for the allowance
            self.transport.pause_reading()
            self._recount()
            return
        self._drain()

    def _drain(self) -> None:
        self._draining = False
        left = self._deferred
        if left is None or self.transport.is_closing():
            return
        # A piece is worth a callback: while the client is paced, wait for PIECE_FRAMES
        # (or what is left), not for each frame (a callback per frame took a whole core).
        wanted = min(PIECE_FRAMES, -(-len(left) // SMALLEST_FRAME))
        allowed = self._budget.allowance(self._client)
        if allowed >= wanted:
            piece = bytes(left[: allowed * SMALLEST_FRAME])
            del left[: len(piece)]
            self._frames_seen = 0
            super().data_received(piece)
            self._budget.spend(self._client, self._frames_seen)
            self._recount()
        if self._deferred and not self.transport.is_closing():  # (a close forgot it)
            self.transport.pause_reading()
            self._draining = True
            wanted = min(PIECE_FRAMES, -(-len(self._deferred) // SMALLEST_FRAME))
            self.loop.call_later(self._budget.wait(self._client, wanted), self._drain)
            self._recount()
            return
        self._deferred = None
        if not self.read_paused and self._peer_reads and not self.transport.is_closing():
            self.transport.resume_reading()

    def handle_events(self) -> None:
        """Handle the frames parsed; count them for the client's pace."""
        self._frames_seen += len(self.conn.events)
        super().handle_events()

    def handle_text(self, event: Any) -> None:
        """A message's first frame (text): its fragments are counted from here."""
        self._fragments = len(event.data) + FRAME_OVERHEAD
        super().handle_text(event)

    def handle_bytes(self, event: Any) -> None:
        """A message's first frame (binary): its fragments are counted from here."""
        self._fragments = len(event.data) + FRAME_OVERHEAD
        super().handle_bytes(event)

    def handle_cont(self, event: Any) -> None:
        """A message's next fragment, counted with what carries it (an empty one too)."""
        self._fragments += len(event.data) + FRAME_OVERHEAD
        super().handle_cont(event)

    def send_receive_event_to_app(self) -> None:
        """A message is whole: queued for the app, its size counted until the app takes it."""
        if not self.close_sent:
            size = self._fragments + MESSAGE_OVERHEAD
            self._queued.append(size)
            self._queued_total += size
        self._fragments = 0
        super().send_receive_event_to_app()

    async def receive(self) -> Any:
        """The app takes the next event; a message taken is no longer the socket's to count."""
        message = await super().receive()
        if not self._peer_reads or self._deferred is not None:
            self.transport.pause_reading()  # uvicorn resumed reading for the app: not yet
        if message["type"] == "websocket.receive" and self._queued:
            self._queued_total -= self._queued.popleft()
            self._recount()
        return message

    def pause_writing(self) -> None:
        """The peer does not take what is sent: read nothing more from it until it does."""
        super().pause_writing()
        self._peer_reads = False
        self.transport.pause_reading()

    def resume_writing(self) -> None:
        """The peer took enough: read again, unless a message still waits for the app."""
        super().resume_writing()
        self._peer_reads = True
        if not self.read_paused and self._deferred is None and not self.transport.is_closing():
            self.transport.resume_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        """The socket is gone: what it held is let go."""
        self._forget()
        super().connection_lost(exc)

    def _forget(self) -> None:
        self._deferred = None
        self._fragments = 0
        self._queued.clear()
        self._queued_total = 0
        self._settle(0)

    def _holding(self) -> int:
        # The frame still arriving sits in the parser's reader; an unfinished
        # message's fragments in uvicorn's list; whole messages in its queue.
        deferred = len(self._deferred) if self._deferred is not None else 0
        return deferred + len(self.conn.reader.buffer) + self._fragments + self._queued_total

    def _recount(self) -> None:
        if self.transport.is_closing():
            self._settle(0)
            return
        refusal = self._settle(self._holding())
        if refusal is not None:
            self._close_over(refusal)

    def _settle(self, holding: int) -> str | None:
        more = holding - self._counted
        if more <= 0:
            self._budget.give(self._client, -more)
            self._counted = holding
            return None
        refusal = self._budget.take(self._client, more)
        if refusal is None:
            self._counted = holding
        return refusal

    def _close_over(self, refusal: str) -> None:
        """Close the socket with :data:`TRY_LATER`; the app hears it as a disconnect.

        The messages the app has not taken are dropped with it: "try again
        later" must mean that none of them was acted on.
        """
        self.frames = []
        self._forget()
        waiting = []
        while not self.queue.empty():
            event = self.queue.get_nowait()
            if event["type"] != "websocket.receive":
                waiting.append(event)
        for event in waiting:
            self.queue.put_nowait(event)
        reason = refusal.encode()[:123].decode("utf-8", "ignore")  # an IPv6 key may be long
        self.conn.fail(TRY_LATER, reason)
        self.queue.put_nowait({"type": "websocket.disconnect", "code": TRY_LATER, "reason": reason})
        self.transport.write(b"".join(self.conn.data_to_send()))
        self.close_sent = True
        self.transport.close()
