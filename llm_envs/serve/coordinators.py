"""The players' side of a rendezvous: coordinators that seat a player, and its seat's session.

A :class:`Coordinator` seats a player in an episode of a key
(:meth:`~Coordinator.meet`) and returns the seat's :class:`SeatSession`:

* :class:`InProcessCoordinator`: a rendezvous on a hub of its own, in the
  player's process and event loop (no network);
* :class:`ServerCoordinator`: the rendezvous of an episode server
  (``python -m llm_envs.serve``), over HTTP.

The rendezvous itself (how seats naming a key meet) is
:mod:`llm_envs.serve.meetings`; :mod:`llm_envs.serve.rendezvous`, its public
face, re-exports these names. This module imports no web framework at
import time; :class:`ServerCoordinator` imports httpx when used.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, Protocol

from llm_envs.serve.errors import Conflict, NotFound, ServeError
from llm_envs.serve.families import Defaults, Families, resolve
from llm_envs.serve.hub import Episode, Hub
from llm_envs.serve.meetings import Meeting, Rendezvous
from llm_envs.serve.protocol import EpisodeRequest, Message, dumps
from llm_envs.serve.store import EpisodeStore

__all__ = ["Coordinator", "InProcessCoordinator", "SeatSession", "ServerCoordinator"]

_FINAL = frozenset({"end", "error"})
"""A seat's messages after which nothing more comes."""
_POLL_SECONDS = 30.0
"""How long one ``GET .../turn`` waits for the seat's next message (the server allows 60)."""


class SeatSession(Protocol):
    """One seat of one episode, as its player sees it."""

    @property
    def episode(self) -> str:
        """The episode's id."""
        ...

    @property
    def seat(self) -> str:
        """The seat played."""
        ...

    async def message(self) -> Message:
        """The seat's next ``turn``, or its ``end`` (or an ``error``): waits for the other seats."""
        ...

    async def act(self, text: str, turn: int) -> None:
        """Play ``text`` for turn ``turn`` (any text: the environment scores it)."""
        ...


class Coordinator(Protocol):
    """Where the seats of an episode meet: :meth:`meet` with a key, get the seat's session."""

    async def meet(
        self,
        key: str,
        seat: str,
        episode: Mapping[str, Any] | None = None,
        *,
        family_seed: int | None = None,
    ) -> SeatSession:
        """Seat ``seat`` in an episode of ``key`` (``episode``: the ``POST /episodes`` fields)."""
        ...

    async def close(self) -> None:
        """Let go of what the coordinator holds (connections, a hub)."""
        ...


class InProcessCoordinator:
    """A rendezvous on a hub of its own, in this process and event loop: no server, no network.

    Every seat of an episode must meet here, in the same event loop (one
    verl agent-loop worker). Finished episodes go to ``records/episodes.jsonl``,
    or, without a folder, the latest ``keep_records`` stay in memory (a
    training run plays many).

    Args:
        family_seed: the families' seed (which problems there are), as the server's ``--seed``.
        seat_timeout: seconds a seat has to act once its turn begins.
        records: a directory for ``episodes.jsonl``; None keeps the latest records in memory.
        max_episodes: the most episodes running at once.
        keep_records: without ``records``, how many finished episodes :meth:`record` still knows.
    """

    def __init__(
        self,
        *,
        family_seed: int = 0,
        seat_timeout: float = 300.0,
        records: str | None = None,
        max_episodes: int = 65536,
        keep_records: int = 4096,
    ) -> None:
        self.store = EpisodeStore(records) if records is not None else _Latest(keep_records)
        self.hub = Hub(
            Families(seed=family_seed),
            self.store,
            seat_timeout=seat_timeout,
            max_episodes=max_episodes,
        )
        self.rendezvous = Rendezvous(self.hub)

    async def meet(
        self,
        key: str,
        seat: str,
        episode: Mapping[str, Any] | None = None,
        *,
        family_seed: int | None = None,
    ) -> SeatSession:
        """Seat ``seat`` in an episode of ``key``; see :meth:`Rendezvous.meet`.

        Raises:
            ServeError: what the rendezvous refuses (its message names the fix).
            pydantic.ValidationError: ``episode`` fields ``POST /episodes`` refuses.
        """
        # The caller is the operator here, not a remote client: its settings are not bounded.
        request = EpisodeRequest.model_validate(dict(episode or {}))
        spec = resolve(request, Defaults(), bounded=False)
        meeting, held = await self.rendezvous.meet_episode(key, seat, spec, family_seed)
        return _HubSession(self.hub, meeting, held)

    def record(self, episode: str) -> dict[str, Any] | None:
        """A finished episode's record entry (as ``GET /episodes/{id}``), or None."""
        return self.store.get(episode)

    async def close(self) -> None:
        """Stop the hub's clocks and step threads."""
        await self.hub.close()


class _Latest(EpisodeStore):
    """The latest ``keep`` finished episodes, in memory only."""

    def __init__(self, keep: int) -> None:
        if keep < 1:
            raise ValueError(f"keep_records must be >= 1, got {keep}")
        super().__init__(None)
        self.keep = keep
        self._latest: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._guard = threading.Lock()

    def __contains__(self, episode_id: object) -> bool:
        return episode_id in self._latest

    def __len__(self) -> int:
        return len(self._latest)

    def append(self, entry: dict[str, Any], shares: Mapping[str, int] | None = None) -> None:
        """Keep a finished episode; forget the oldest past ``keep`` (``shares`` unused)."""
        with self._guard:
            self._latest[str(entry["id"])] = json.loads(dumps(entry))
            while len(self._latest) > self.keep:
                self._latest.popitem(last=False)

    def get(self, episode_id: str) -> dict[str, Any] | None:
        """The finished episode ``episode_id`` while it is among the latest, or None."""
        with self._guard:
            entry = self._latest.get(episode_id)
            return json.loads(dumps(entry)) if entry is not None else None


class _Session:
    """A seat as met (:class:`~llm_envs.serve.meetings.Meeting`): what every session shares.

    :meth:`message` hands a seat that arrived after its episode was over its
    final message; a seated one's next message comes from :meth:`_next`.
    """

    def __init__(self, meeting: Meeting) -> None:
        self.meeting = meeting

    @property
    def episode(self) -> str:
        return self.meeting.episode

    @property
    def seat(self) -> str:
        return self.meeting.seat

    async def message(self) -> Message:
        if self.meeting.token is None:
            return _final(self.meeting)
        return await self._next(self.meeting.token)

    async def _next(self, token: str) -> Message:
        """The seated seat's next ``turn``, or its ``end`` (or an ``error``)."""
        raise NotImplementedError


class _HubSession(_Session):
    """A seat played on a hub in this process; it holds its episode, finished or not."""

    def __init__(self, hub: Hub, meeting: Meeting, episode: Episode) -> None:
        super().__init__(meeting)
        self.hub = hub
        self.held = episode

    async def _next(self, token: str) -> Message:
        place = self.held.seats[self.seat]
        while True:
            message = place.message
            if message is not None and message["type"] in {"turn", *_FINAL}:
                return message
            await place.changed(place.version, _POLL_SECONDS)

    async def act(self, text: str, turn: int) -> None:
        await self.hub.act(self.episode, self.seat, self.meeting.token, text, turn)


class ServerCoordinator:
    """The rendezvous of an episode server (``python -m llm_envs.serve``), over HTTP.

    Seats in any process on any machine that reach the server meet there. One
    instance per event loop: it holds an ``httpx.AsyncClient``.

    Args:
        url: the server's base URL, e.g. ``http://10.0.0.1:8000``.
        timeout: seconds one request may take (a long poll waits up to 30 more).
        max_connections: open connections at most (each seat waiting for its
            turn holds one); None for no bound.
        token: the server's token (its ``--token``), sent with every request;
            None reads the ``LLM_ENVS_SERVE_TOKEN`` environment variable, and
            sends none where it is unset (a server on loopback needs none).
    """

    def __init__(
        self,
        url: str,
        *,
        timeout: float = 60.0,
        max_connections: int | None = None,
        token: str | None = None,
    ) -> None:
        import httpx

        from llm_envs.serve.guard import token_from_environment

        self.url = url.rstrip("/")
        limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=64)
        token = token_from_environment(token)
        self.client = httpx.AsyncClient(
            base_url=self.url,
            timeout=timeout + _POLL_SECONDS,
            limits=limits,
            headers={"Authorization": f"Bearer {token}"} if token else None,
        )

    async def meet(
        self,
        key: str,
        seat: str,
        episode: Mapping[str, Any] | None = None,
        *,
        family_seed: int | None = None,
    ) -> SeatSession:
        """Seat ``seat`` in an episode of ``key``: ``POST /rendezvous``.

        Raises:
            ServeError: the server's refusal, with its status and message.
        """
        body: dict[str, Any] = {"key": key, "seat": seat, "episode": dict(episode or {})}
        if family_seed is not None:
            body["family_seed"] = family_seed
        reply = await self.request("POST", "/rendezvous", json=body)
        meeting = Meeting(
            reply["episode"], reply["seat"], reply["token"], tuple(reply["seats"]), reply["message"]
        )
        return _ServerSession(self, meeting)

    async def close(self) -> None:
        """Close the connections."""
        await self.client.aclose()

    async def request(self, method: str, path: str, **kwargs: Any) -> Message:
        """One request to the server; its JSON reply, or the server's refusal as a ServeError."""
        response = await self.client.request(method, path, **kwargs)
        detail = _detail(response.text, response.status_code)
        if response.status_code == 404 and path == "/rendezvous" and detail == "Not Found":
            raise NotFound(
                f"the episode server at {self.url} has no POST /rendezvous: serve llm-envs "
                "with the rendezvous (python -m llm_envs.serve of this version)"
            )
        if response.status_code >= 400:
            error = ServeError(detail)
            error.status = response.status_code
            raise error
        reply: Message = response.json()
        return reply


class _ServerSession(_Session):
    """A seat played on an episode server over HTTP.

    A server keeps the last messages of its latest finished episodes only
    (1024); a seat that asks for its end later is told the episode is over
    (409), and gets its end from the episode's record instead: its return,
    and the reward paid since its last turn (the end's ``info`` is lost).
    """

    def __init__(self, coordinator: ServerCoordinator, meeting: Meeting) -> None:
        super().__init__(meeting)
        self.coordinator = coordinator
        self._path = f"/episodes/{meeting.episode}/seats/{meeting.seat}"
        self._paid = 0.0  # the rewards of the messages handed out so far

    async def _next(self, token: str) -> Message:
        headers = {"X-Seat-Token": token}
        while True:
            try:
                message = await self.coordinator.request(
                    "GET", f"{self._path}/turn", params={"wait": _POLL_SECONDS}, headers=headers
                )
            except ServeError as exc:
                if exc.status != Conflict.status:
                    raise
                return await self._recorded_end()
            if message["type"] in {"turn", *_FINAL}:
                self._paid += float(message.get("reward") or 0.0)
                return message
            if message["type"] == "abandoned":  # its end follows when the others finish
                await asyncio.sleep(1.0)

    async def _recorded_end(self) -> Message:
        entry = await self.coordinator.request("GET", f"/episodes/{self.episode}")
        if entry.get("status") != "finished" or self.seat not in entry.get("returns", {}):
            detail = entry.get("error") or f"episode {self.episode} is {entry.get('status')}"
            return {"type": "error", "status": 500, "detail": detail}
        total = float(entry["returns"][self.seat])
        return {
            "type": "end",
            "episode": self.episode,
            "seat": self.seat,
            "reward": total - self._paid,
            "return": total,
            "terminated": True,
            "truncated": False,
            "abandoned": self.seat in entry.get("abandoned", []),
            "info": {},
        }

    async def act(self, text: str, turn: int) -> None:
        headers = {"X-Seat-Token": self.meeting.token or ""}
        await self.coordinator.request(
            "POST", f"{self._path}/act", json={"text": text, "turn": turn}, headers=headers
        )


def _final(meeting: Meeting) -> Message:
    """The last message of a seat that arrived after its episode was over."""
    message = meeting.message
    if message is not None and message["type"] in _FINAL:
        return message
    return {
        "type": "error",
        "status": Conflict.status,
        "detail": f"seat {meeting.seat!r} of episode {meeting.episode} was abandoned before "
        "its player arrived (it did not act within the seat timeout); raise --seat-timeout",
    }


def _detail(text: str, status: int) -> str:
    try:
        detail = json.loads(text).get("detail")
    except (ValueError, AttributeError):
        detail = None
    return str(detail) if detail else f"HTTP {status}: {text[:500]}"
