"""Turns at the sandbox service's pool, shared fairly between clients, and bounded.

A **client** is the peer's network address as the service's own socket sees
it (:func:`~llm_envs.sandbox.fair.client_key`: an IPv6 address by its /48
prefix, each loopback address its own), never a header. The service runs
uvicorn without proxy headers (``X-Forwarded-For`` is not read), so a client
cannot choose its key by a header either. Behind a reverse proxy every request
is the proxy's: run the service where clients reach it directly when they must
be told apart. Programs the sandbox runs cannot connect at all.

:class:`FairQueue` gives the pool's slots (one per pool worker) to waiting
clients in turn (:class:`~llm_envs.sandbox.fair.RoundRobin`): when a slot
frees, the client that has waited longest since its last turn gets it,
whatever number of requests each one has queued. A
client flooding the service therefore delays another client's request by at
most one run per other waiting client, not by its whole queue. Turns are
counted, not timed: a client whose runs are long holds a slot longer per
turn, up to the service's ``--max-timeout``.

Admission is bounded before a request's body is read: past
``max_per_client`` requests (queued or running) of one client the answer is
429, past ``max_total`` of all clients, or ``max_bytes`` of their bodies
together (a body's declared ``Content-Length``, or the body cap when it does
not declare one), 503; both carry ``Retry-After``. The bodies of requests
that run nothing (``/list_ids``) count in the same byte budgets, not among
the requests: whatever body a route reads, its bytes are counted first.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

from llm_envs.sandbox.fair import RoundRobin, client_key, tally

__all__ = ["FairQueue", "Refusal", "client_key"]


@dataclass(frozen=True)
class Refusal:
    """Why a request is not queued: its HTTP status, the message, and ``Retry-After`` seconds."""

    status: int
    detail: str
    retry_after: int


class FairQueue:
    """``slots`` turns at once, given round robin between clients; admission bounded.

    Args:
        slots: requests that run at once (the pool's workers).
        max_per_client: requests of one client admitted at once (queued or running).
        max_total: requests of all clients admitted at once.
        max_bytes: request bodies admitted at once, in bytes.
        max_bytes_per_client: one client's request bodies admitted at once, in
            bytes (None: ``max_bytes``). A body counts by its declared size from
            its head on, so without it one client declaring large bodies and
            sending them a byte at a time would hold ``max_bytes`` alone.

    All methods run on the event loop's thread; none blocks.
    """

    def __init__(
        self,
        slots: int,
        *,
        max_per_client: int,
        max_total: int,
        max_bytes: int,
        max_bytes_per_client: int | None = None,
    ) -> None:
        self.slots = slots
        self.max_per_client = max_per_client
        self.max_total = max_total
        self.max_bytes = max_bytes
        self.max_bytes_per_client = (
            max_bytes if max_bytes_per_client is None else max_bytes_per_client
        )
        self._client_bytes: dict[str, int] = {}
        self._free = slots
        self._waiting: RoundRobin[asyncio.Future[None]] = RoundRobin()
        self._admitted: dict[str, int] = {}
        self._total = 0
        self._bytes = 0
        self._mean_run = 1.0  # seconds a turn lasts, a running mean for Retry-After

    def admit(self, client: str, size: int, *, runs: bool = True) -> Refusal | None:
        """Count a request of ``size`` body bytes in, or say why not (it is then not counted).

        ``runs``: the request takes a turn at the pool, and counts among the
        requests; False counts its body's bytes only.
        """
        held = self._admitted.get(client, 0)
        if runs and held >= self.max_per_client:
            return Refusal(
                429,
                f"client {client} has {held} requests queued or running, the most one client "
                f"may (--max-queued-per-client {self.max_per_client}); wait for their answers",
                self._retry_after(self.max_per_client),
            )
        client_bytes = self._client_bytes.get(client, 0)
        if client_bytes + size > self.max_bytes_per_client:
            return Refusal(
                429,
                f"client {client} has {client_bytes:,} bytes of request bodies queued or running, "
                f"and this one declares {size:,}: past the most one client may "
                f"(--max-queued-bytes-per-client {self.max_bytes_per_client:,}); wait for their "
                "answers",
                self._retry_after(held),
            )
        if (runs and self._total >= self.max_total) or self._bytes + size > self.max_bytes:
            return Refusal(
                503,
                f"the service holds {self._total} requests ({self._bytes:,} bytes of bodies), "
                f"its limit (--max-queued {self.max_total}, --max-queued-bytes "
                f"{self.max_bytes:,}); retry later",
                self._retry_after(self._total),
            )
        if runs:
            tally(self._admitted, client, 1)
            self._total += 1
        tally(self._client_bytes, client, size)
        self._bytes += size
        return None

    def leave(self, client: str, size: int, *, runs: bool = True) -> None:
        """Count out a request :meth:`admit` counted in (answered, failed or abandoned)."""
        if runs:
            tally(self._admitted, client, -1)
            self._total -= 1
        tally(self._client_bytes, client, -size)
        self._bytes -= size

    @contextlib.asynccontextmanager
    async def turn(self, client: str) -> AsyncIterator[None]:
        """Hold one slot while the block runs, waiting for ``client``'s turn first."""
        if self._free:
            self._free -= 1
            self._waiting.served(client)
        else:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiting.push(client, waiter)
            try:
                await waiter
            except BaseException:
                if waiter.done() and not waiter.cancelled():  # given a slot as it was cancelled
                    self._release()
                else:
                    self._waiting.remove(client, waiter)
                raise
        start = time.monotonic()
        try:
            yield
        finally:
            self._mean_run += 0.1 * (time.monotonic() - start - self._mean_run)
            self._release()

    def _release(self) -> None:
        """Hand the slot to the client whose turn it is, or free it."""
        while self._waiting:
            waiter = self._waiting.pop()
            if not waiter.done():
                waiter.set_result(None)
                return
        self._free += 1

    def _retry_after(self, ahead: int) -> int:
        """Whole seconds until about ``ahead`` requests have run (1 to 60)."""
        return max(1, min(60, math.ceil(ahead * self._mean_run / self.slots)))
