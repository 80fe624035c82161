"""Several sampling servers behind one policy: which server gets the next request.

A :class:`ServerPool` holds one policy per server (usually an
:class:`~baselines.samplers.OpenAIPolicy` per ``vllm serve``) and spreads
every request of a :meth:`~ServerPool.sample` call over them:

================  ============================================================
``round_robin``   request after request, server after server: the same
                  share for each, whatever they are doing
``least_loaded``  the server with the fewest of this pool's requests in
                  flight (ties go round-robin): a slow or busy server gets
                  fewer, so long completions do not pile up behind it
================  ============================================================

Each request keeps its own seed (``seed + i`` for request ``i`` of a call,
as every policy does), so which server samples it does not change the seeds,
and a pool of one server samples exactly like that server's policy.

With several trainer processes, :func:`urls_for_process` gives each process
its share of the server list, and :func:`urls_to_push` says which servers a
process sends the new weights to (each server exactly once). The load that
``least_loaded`` sees is this pool's own requests: with disjoint shares that
is all of a server's load.

This module routes requests; it never talks HTTP itself (the member policies
do) and never changes weights (see :mod:`baselines.samplers.server_weights`).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Literal, get_args

from baselines.samplers.base import Completion, Policy, SampleRequest, SamplingParams

__all__ = [
    "Routing",
    "ServerPool",
    "pick_server",
    "split_urls",
    "urls_for_process",
    "urls_to_push",
]

Routing = Literal["round_robin", "least_loaded"]
"""How a :class:`ServerPool` picks the server for each request (see the module docstring)."""
ROUTINGS: tuple[str, ...] = get_args(Routing)


def pick_server(routing: Routing, in_flight: Sequence[int], turn: int) -> int:
    """The index of the server that gets the next request.

    Args:
        routing: ``round_robin`` or ``least_loaded``.
        in_flight: requests each server is working on now.
        turn: how many requests the pool has routed before this one.

    Returns:
        ``turn mod n`` for ``round_robin``; for ``least_loaded``, the server with
        the fewest requests in flight, the first one at or after ``turn mod n``
        (cyclically) among equals, so that ties rotate.

    Raises:
        ValueError: no servers, or an unknown ``routing``.

    Example:
        >>> [pick_server("round_robin", [0, 0, 0], t) for t in range(4)]
        [0, 1, 2, 0]
        >>> pick_server("least_loaded", [3, 1, 2], turn=0)
        1
        >>> [pick_server("least_loaded", [1, 1, 5], t) for t in range(3)]
        [0, 1, 0]
    """
    n = len(in_flight)
    if n == 0:
        raise ValueError("pick_server needs at least one server, got in_flight=[]")
    start = turn % n
    if routing == "round_robin":
        return start
    if routing == "least_loaded":
        order = [(start + k) % n for k in range(n)]
        return min(order, key=lambda i: in_flight[i])  # min keeps the first of equals
    raise ValueError(f"routing must be one of {list(ROUTINGS)}, got {routing!r}")


def split_urls(urls: str | Sequence[str]) -> list[str]:
    """Server URLs from a comma-separated string (or a list), blanks dropped.

    Raises:
        ValueError: no URL at all.

    Example:
        >>> split_urls("http://a:8000/v1, http://b:8000/v1,")
        ['http://a:8000/v1', 'http://b:8000/v1']
    """
    parts = urls.split(",") if isinstance(urls, str) else list(urls)
    found = [u.strip() for u in parts if u.strip()]
    if not found:
        raise ValueError(
            f"no server URL in {urls!r}; give one or more /v1 base URLs separated by commas, "
            "e.g. http://127.0.0.1:8000/v1,http://127.0.0.1:8001/v1"
        )
    return found


def _check_process(process_index: int, num_processes: int) -> None:
    if not 0 <= process_index < num_processes:
        raise ValueError(
            f"process_index must be in [0, {num_processes}) for {num_processes} processes, "
            f"got {process_index}"
        )


def urls_for_process(urls: Sequence[str], process_index: int, num_processes: int) -> list[str]:
    """The servers one trainer process samples from.

    With at least as many servers as processes, process ``i`` gets servers
    ``i, i + P, i + 2P, ...`` (``P`` processes): disjoint shares that cover
    every server. With fewer servers than processes, process ``i`` gets server
    ``i mod n`` alone, shared with the processes of the same remainder.

    Example:
        >>> urls = ["a", "b", "c", "d", "e"]
        >>> [urls_for_process(urls, i, 2) for i in range(2)]
        [['a', 'c', 'e'], ['b', 'd']]
        >>> [urls_for_process(["a", "b"], i, 4) for i in range(4)]
        [['a'], ['b'], ['a'], ['b']]
    """
    _check_process(process_index, num_processes)
    if not urls:
        raise ValueError("urls_for_process needs at least one URL, got []")
    if len(urls) >= num_processes:
        return list(urls[process_index::num_processes])
    return [urls[process_index % len(urls)]]


def urls_to_push(urls: Sequence[str], process_index: int, num_processes: int) -> list[str]:
    """The servers to which one trainer process sends new weights: each server exactly once.

    Its own share from :func:`urls_for_process`, except where several
    processes share a server: then the lowest of them pushes and the others
    push nothing (their next request waits for the trainer's next collective
    step, which the pushing process reaches after its push).

    Example:
        >>> [urls_to_push(["a", "b"], i, 4) for i in range(4)]
        [['a'], ['b'], [], []]
        >>> urls_to_push(["a", "b", "c"], 0, 2)
        ['a', 'c']
    """
    _check_process(process_index, num_processes)
    if len(urls) < num_processes and process_index >= len(urls):
        return []
    return urls_for_process(urls, process_index, num_processes)


class ServerPool:
    """A :class:`~baselines.samplers.base.Policy` that spreads requests over several servers.

    Args:
        policies: one policy per server (e.g. :class:`~baselines.samplers.OpenAIPolicy`
            objects for the same model on different ``vllm serve`` processes).
        routing: ``round_robin`` or ``least_loaded`` (see the module docstring).
        max_concurrency: requests in flight at once over the whole pool; None
            is the sum of the members' ``max_concurrency`` (16 for a member
            that has none).

    Attributes:
        served: requests each server has completed, in the order of ``policies``.

    Example:
        >>> from baselines.samplers import ScriptedPolicy
        >>> pool = ServerPool([ScriptedPolicy(lambda o, i: "a"), ScriptedPolicy(lambda o, i: "b")])
        >>> requests = [SampleRequest([{"role": "user", "content": "hi"}])] * 3
        >>> [c.text for c in pool.sample(requests, SamplingParams(max_tokens=4))]
        ['a', 'b', 'a']
        >>> pool.served
        [2, 1]
    """

    def __init__(
        self,
        policies: Sequence[Policy],
        routing: Routing = "round_robin",
        *,
        max_concurrency: int | None = None,
    ) -> None:
        if not policies:
            raise ValueError("a ServerPool needs at least one policy, got none")
        if routing not in ROUTINGS:
            raise ValueError(f"routing must be one of {list(ROUTINGS)}, got {routing!r}")
        if max_concurrency is None:
            max_concurrency = sum(int(getattr(p, "max_concurrency", 16)) for p in policies)
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be >= 1, got {max_concurrency}")
        self.policies = list(policies)
        self.routing: Routing = routing
        self.max_concurrency = max_concurrency
        self.served = [0] * len(self.policies)
        self._in_flight = [0] * len(self.policies)
        self._turn = 0
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"ServerPool({self.policies!r}, routing={self.routing!r})"

    def sample(self, requests: Sequence[SampleRequest], params: SamplingParams) -> list[Completion]:
        """Sample every request on the server the routing picks; return completions in order."""
        if not requests:
            return []
        with self._lock:  # this call's turns, so round-robin does not depend on thread timing
            first = self._turn
            self._turn += len(requests)
        workers = min(self.max_concurrency, len(requests))
        with ThreadPoolExecutor(max_workers=workers) as pool:
            return list(
                pool.map(
                    lambda ir: self._one(ir[0], first + ir[0], ir[1], params), enumerate(requests)
                )
            )

    def _one(
        self, index: int, turn: int, request: SampleRequest, params: SamplingParams
    ) -> Completion:
        with self._lock:
            server = pick_server(self.routing, self._in_flight, turn)
            self._in_flight[server] += 1
        # Request `index` of this call keeps seed + index on any server.
        seed = None if params.seed is None else params.seed + index
        try:
            (completion,) = self.policies[server].sample(
                [request], dataclasses.replace(params, seed=seed)
            )
        finally:
            with self._lock:
                self._in_flight[server] -= 1
        with self._lock:
            self.served[server] += 1
        return completion
