"""Who a sandbox run is for, and turns given to waiting clients in turn.

A **client** is a string key: the peer's network address for a server's
requests (:func:`client_key`), :data:`LOCAL` for an in-process caller. The
key travels with the work in a context variable (:func:`current_client`,
:func:`as_client`): the episode server sets it to an episode's creator where it
runs the episode's steps, and :class:`~llm_envs.sandbox.Sandbox` reads it when a
run waits for a worker. Nothing a client sends chooses its key: a header is
whatever the sender writes, so declaring a thousand ids would buy a thousand
turns.

:class:`RoundRobin` is the order of turns every shared queue of the suite uses
(the sandbox pool's workers, the episode server's step threads, the sandbox
service's slots): the client served least recently goes next, and each
client's own waiters go in arrival order. A client queueing a thousand
requests thus delays another client's by at most one turn, not by its whole
queue. Turns are counted, not timed, and a turn is never cut short: a turn
lasts as long as its call (a sandbox run up to its timeout).
"""

from __future__ import annotations

import contextlib
import contextvars
import ipaddress
from collections import OrderedDict, deque
from collections.abc import Iterator
from typing import Generic, TypeVar

__all__ = [
    "LOCAL",
    "RoundRobin",
    "as_client",
    "client_key",
    "current_client",
    "give_up_at",
    "tally",
]

_W = TypeVar("_W")
_K = TypeVar("_K")

LOCAL = "local"
"""The client key of work no server request started (an in-process user)."""

_CLIENT: contextvars.ContextVar[str] = contextvars.ContextVar("llm_envs_client", default=LOCAL)
_GIVE_UP: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "llm_envs_give_up", default=None
)


_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_LINK_LOCAL = ipaddress.ip_network("fe80::/10")
_UNROUTED = ipaddress.ip_network("::/48")  # loopback, unspecified, IPv4-compatible and -translated


def client_key(host: str | None) -> str:
    """The client a peer address counts as: an IPv4 address, or an IPv6 site's /48.

    One site is commonly given a whole IPv6 /48 (a home or a customer a /56
    or /48 of it), so its 65,536 /64s count as one client: any finer and one
    site could count as thousands and take all but one turn in thousands.
    The same rule counts a 6to4 host (``2002:WWXX:YYZZ::/48``, its IPv4
    address's) as one client. An IPv6 address never counts as an IPv4
    client, since whoever can route it would take that client's share: only
    a dual-stack socket's mapped form (``::ffff:a.b.c.d``) is the IPv4 peer.
    A Teredo address counts as ``teredo`` and its client's IPv4 address
    (``2001::/32``: one host has 2**48 of them, by server, port and flags), a
    NAT64 address (``64:ff9b::/96``, the well-known prefix) as itself: one
    IPv4 host counts as at most a handful of clients, never as another host.
    Behind a local-use (``64:ff9b:1::/48``) or an operator's own NAT64
    prefix, as behind any NAT, every IPv4 client is one client (the /48).
    Every link-local client (``fe80::/10``) is one client: a neighbour on
    the link may give itself any of its 2**38 /48s.
    Each loopback address (``127.0.0.0/8``, ``::1``) is a client of its own,
    and so is each address of ``::/48`` (``::``, ``::a.b.c.d``,
    ``::ffff:0:a.b.c.d``), which no router forwards between sites: a process
    on the server's machine can count as many clients, on purpose (it can
    already stop the server, and trainers sharing one machine are told
    apart so).

    Example:
        >>> client_key("127.0.0.1"), client_key("2001:db8:1:2::1"), client_key("2001:db8:1:ff::2")
        ('127.0.0.1', '2001:db8:1::/48', '2001:db8:1::/48')
        >>> client_key("::ffff:192.0.2.4"), client_key("2002:c000:204::1"), client_key("::1")
        ('192.0.2.4', '2002:c000:204::/48', '::1')
        >>> client_key("2001:0:4136:e378:8000:63bf:3fff:fdd2"), client_key("64:ff9b::c000:221")
        ('teredo 192.0.2.45', '64:ff9b::c000:221')
    """
    if not host:
        return "unknown"
    try:
        address = ipaddress.ip_address(host)
    except ValueError:  # a unix socket's path, a test client's name
        return host
    if not isinstance(address, ipaddress.IPv6Address):
        return str(address)
    if address.ipv4_mapped is not None:  # an IPv4 peer of a dual-stack socket
        return str(address.ipv4_mapped)
    if address.teredo is not None:
        return f"teredo {address.teredo[1]}"
    if address in _NAT64 or address in _UNROUTED:
        return str(address)
    if address.is_link_local:  # a neighbour on the link picks any of fe80::/10's addresses
        return str(_LINK_LOCAL)
    return str(ipaddress.ip_network(f"{address}/48", strict=False))


def tally(counts: dict[_K, int], key: _K, change: int) -> int:
    """Add ``change`` to ``counts[key]`` and return it; a key whose count reaches 0 leaves.

    The per-client counts of the suite's bounds (requests, bytes, connections,
    episodes, sessions) hold only clients that hold something, so that their
    size is bounded by what is held, not by every client ever seen.

    Example:
        >>> counts = {}
        >>> tally(counts, "a", 2), tally(counts, "a", -2), counts
        (2, 0, {})
    """
    left = counts.get(key, 0) + change
    if left > 0:
        counts[key] = left
    else:
        counts.pop(key, None)
    return left


def current_client() -> str:
    """The client the current work is for (:data:`LOCAL` unless :func:`as_client` set one)."""
    return _CLIENT.get()


def give_up_at() -> float | None:
    """When (``time.monotonic()``) the current work stops waiting for a turn; None: never."""
    return _GIVE_UP.get()


@contextlib.contextmanager
def as_client(client: str, *, give_up: float | None = None) -> Iterator[None]:
    """Count the work inside the block as ``client``'s (in this thread or task only).

    ``give_up``: a ``time.monotonic()`` time past which the work no longer
    waits for a turn (:func:`give_up_at`; the episode server passes its step's
    deadline, after which nobody reads the step's result).

    Example:
        >>> with as_client("10.0.0.7"):
        ...     current_client()
        '10.0.0.7'
        >>> current_client()
        'local'
    """
    token = _CLIENT.set(client)
    until = _GIVE_UP.set(give_up)
    try:
        yield
    finally:
        _GIVE_UP.reset(until)
        _CLIENT.reset(token)


class RoundRobin(Generic[_W]):
    """Waiters of many clients: the least recently served client's first waiter goes next.

    Among clients that keep waiters queued this is round robin; a client that
    arrives with one waiter goes ahead of those served since its own last turn
    (a sequential client, one request at a time, never waits behind a flood's
    whole rotation), and one that was just served goes behind everyone
    waiting, however it times its requests. The last turns of the
    :data:`REMEMBERED` most recent clients are kept; a client forgotten since
    counts as never served.

    Not thread-safe: its owner holds its own lock (or runs on one event loop).

    Example:
        >>> turns = RoundRobin()
        >>> for client, waiter in [("a", 1), ("a", 2), ("a", 3), ("b", 4)]:
        ...     turns.push(client, waiter)
        >>> turns.pop(), turns.pop()
        (1, 4)
        >>> turns.push("c", 5)  # never served: ahead of a, served a moment ago
        >>> [turns.pop() for _ in range(len(turns))]
        [5, 2, 3]
    """

    REMEMBERED = 4096
    """Clients whose last turn is kept (about 100 bytes each)."""

    def __init__(self) -> None:
        self._queues: dict[str, deque[_W]] = {}  # clients with waiters, each one's in order
        self._served: OrderedDict[str, int] = OrderedDict()  # client -> its last turn's number
        self._turns = 0
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def push(self, client: str, waiter: _W) -> None:
        """Queue ``waiter`` last among ``client``'s."""
        self._queues.setdefault(client, deque()).append(waiter)
        self._count += 1

    def pop(self) -> _W:
        """The first waiter of the least recently served client with one (ties: who came first).

        Raises:
            IndexError: nobody waits.
        """
        if not self._queues:
            raise IndexError("pop from an empty RoundRobin")
        client = min(self._queues, key=lambda c: self._served.get(c, -1))
        waiters = self._queues[client]
        waiter = waiters.popleft()
        if not waiters:
            del self._queues[client]
        self._count -= 1
        self.served(client)
        return waiter

    def served(self, client: str) -> None:
        """Count a turn ``client`` took without waiting (:meth:`pop` counts those it gives)."""
        self._turns += 1
        self._served[client] = self._turns
        self._served.move_to_end(client)
        if len(self._served) > self.REMEMBERED:
            self._served.popitem(last=False)

    def remove(self, client: str, waiter: _W) -> bool:
        """Take ``waiter`` out of ``client``'s queue (it gave up); whether it was there."""
        waiters = self._queues.get(client)
        if waiters is None or waiter not in waiters:
            return False
        waiters.remove(waiter)
        self._count -= 1
        if not waiters:
            del self._queues[client]
        return True
