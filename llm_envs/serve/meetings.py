"""Seats naming the same key meet in one episode on a hub: the meeting, and where a seat landed.

A trainer that plays each seat of an episode as its own task (verl's agent
loops: one dataset row per seat, run as asyncio tasks, possibly in several
worker processes) cannot create an episode and hand its id to the other
seats: they do not know each other. Instead every seat names the episode it
wants by a *key* (a string its data set row holds) and asks to *meet*:

* the first seat to name a key creates the episode (:meth:`Hub.create
  <llm_envs.serve.hub.Hub.create>`); each later seat with that key joins the
  oldest episode of the key whose seat it has not taken yet, and a seat that
  finds every episode of its key taken creates the next one. So the ``k``-th
  seat ``agent_1`` to name a key plays with the ``k``-th ``agent_0``: a row
  repeated ``n`` times (verl's ``rollout.n``) gives ``n`` episodes, each with
  one of every seat;
* a seat that arrives after its episode ended (another seat's broken answer
  ended a debate before this seat's first turn) is handed its ``end`` message
  at once, with its return.

Everything else is the hub's: turn order, timeouts (a seat that never
arrives is abandoned after ``seat_timeout``), records. The players then
speak the server's seat protocol (``docs/serve.md``).

:class:`Rendezvous` and its answer :class:`Meeting` are what both sides
share: the episode server's route (:mod:`llm_envs.serve.rendezvous`) and the
players' coordinators (:mod:`llm_envs.serve.coordinators`) import them from
here, and this module imports neither.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections import OrderedDict
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from llm_envs.serve.errors import Conflict, NotFound
from llm_envs.serve.families import EpisodeSpec
from llm_envs.serve.hub import Episode, Hub
from llm_envs.serve.protocol import Message

__all__ = ["MAX_OPEN", "Meeting", "Rendezvous"]


@dataclass(frozen=True)
class Meeting:
    """Where a seat landed: its episode, its token, and its message when the episode is over.

    Attributes:
        episode: the episode's id.
        seat: the seat.
        token: the seat's token (``X-Seat-Token``); None when the episode was
            over (or the seat abandoned) before the seat arrived.
        seats: every seat of the episode.
        message: the seat's final message when ``token`` is None, else None.
    """

    episode: str
    seat: str
    token: str | None
    seats: tuple[str, ...]
    message: Message | None = None

    def as_dict(self) -> Message:
        """The reply of ``POST /rendezvous``."""
        return {
            "type": "met",
            "episode": self.episode,
            "seat": self.seat,
            "token": self.token,
            "seats": list(self.seats),
            "message": self.message,
        }


@dataclass
class _Open:
    """An episode of a key that some seat has not met yet."""

    episode: Episode
    taken: set[str] = field(default_factory=set)


MAX_OPEN = 2048
"""Episodes a rendezvous keeps for seats still to meet them: the hub's running episodes (1,024
at most by default) and as many finished ones. Round 3 of the attacks found 65,536 finished
episodes kept, about 19 KB each, so a flood of keys held over a GiB."""


class Rendezvous:
    """Keys to episodes on one hub: the seats naming a key meet in its episodes, in order.

    Args:
        hub: the hub that runs the episodes.
        max_open: the most episodes kept waiting for a seat; past it the
            oldest finished ones are forgotten (a seat naming their key later
            starts a new episode).
    """

    def __init__(self, hub: Hub, *, max_open: int = MAX_OPEN) -> None:
        if max_open < 1:
            raise ValueError(f"max_open must be >= 1, got {max_open}")
        self.hub = hub
        self.max_open = max_open
        self._open: OrderedDict[str, list[_Open]] = OrderedDict()
        # One lock per key, held while a key's seat is placed (which may build a family):
        # seats of other keys meet meanwhile. A key's lock lives while a seat waits on it.
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    async def meet(
        self, key: str, seat: str, spec: EpisodeSpec, family_seed: int | None = None
    ) -> Meeting:
        """Seat ``seat`` in the oldest episode of ``key`` it has not taken, or in a new one.

        Raises:
            Conflict: ``family_seed`` is not the server's, or ``key`` names
                episodes of other settings.
            NotFound: the env has no such seat.
            Invalid, Unavailable, Failed: as :meth:`Hub.create <llm_envs.serve.hub.Hub.create>`.
        """
        meeting, _ = await self.meet_episode(key, seat, spec, family_seed)
        return meeting

    async def meet_episode(
        self, key: str, seat: str, spec: EpisodeSpec, family_seed: int | None = None
    ) -> tuple[Meeting, Episode]:
        """:meth:`meet`, and the episode itself (for a player in the hub's own process)."""
        if family_seed is not None and family_seed != self.hub.families.seed:
            raise Conflict(
                f"this data set was built for family seed {family_seed}, and this server's "
                f"--seed is {self.hub.families.seed} (problem numbers name other problems): "
                f"start the server with --seed {family_seed}, or rebuild the data set"
            )
        async with self._key_lock(key):
            try:
                return await self._meet(key, seat, spec)
            finally:
                self._forget_taken(key)

    @contextlib.asynccontextmanager
    async def _key_lock(self, key: str) -> AsyncIterator[None]:
        lock, users = self._locks.get(key, (asyncio.Lock(), 0))
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[key]
            if users > 1:
                self._locks[key] = (lock, users - 1)
            else:
                del self._locks[key]

    async def _meet(self, key: str, seat: str, spec: EpisodeSpec) -> tuple[Meeting, Episode]:
        for place in self._open.get(key, []):
            if place.episode.spec != spec:
                raise Conflict(
                    f"key {key!r} names episodes of {place.episode.spec.as_dict()}, and this "
                    f"seat asks for {spec.as_dict()}: give each episode settings its own key"
                )
            if seat not in place.episode.seats:
                raise NotFound(self._no_seat(place.episode, seat))
            if seat not in place.taken:
                place.taken.add(seat)
                return await self._seat(place.episode, seat), place.episode
        loop = asyncio.get_running_loop()
        # The family is built off the loop, once; a bad seat is refused before an episode starts.
        agents = await loop.run_in_executor(None, functools.partial(self._agents, spec))
        if seat not in agents:
            raise NotFound(
                f"env {spec.env!r} has no seat {seat!r}; its seats are {', '.join(agents)}"
            )
        episode = await self.hub.create(spec)
        # Read again: while this key waited on its family, other keys' meetings may
        # have forgotten or reordered the lists (never this key's: its lock is held).
        self._open.setdefault(key, []).append(_Open(episode, {seat}))
        self._bound()
        return await self._seat(episode, seat), episode

    @property
    def waiting(self) -> int:
        """How many episodes wait for a seat to meet them."""
        return sum(len(places) for places in self._open.values())

    def _agents(self, spec: EpisodeSpec) -> tuple[str, ...]:
        return tuple(self.hub.families.family(spec).agents)

    async def _seat(self, episode: Episode, seat: str) -> Meeting:
        place = episode.seats[seat]
        seats = tuple(episode.seats)
        if episode.finished or place.abandoned:
            # Over before the seat arrived: its last message is all there is to tell it.
            return Meeting(episode.id, seat, None, seats, place.message)
        token = await self.hub.join(episode.id, seat)
        return Meeting(episode.id, seat, token, seats)

    def _forget_taken(self, key: str) -> None:
        places = [p for p in self._open.get(key, []) if p.taken != set(p.episode.seats)]
        if places:
            self._open[key] = places
            self._open.move_to_end(key)
        else:
            self._open.pop(key, None)

    def _bound(self) -> None:
        """Forget the oldest finished episodes while more than ``max_open`` wait."""
        excess = self.waiting - self.max_open
        for key in list(self._open):
            if excess <= 0:
                return
            kept = []
            for place in self._open[key]:
                if excess > 0 and place.episode.finished:
                    excess -= 1
                else:
                    kept.append(place)
            if kept:
                self._open[key] = kept
            else:
                del self._open[key]

    @staticmethod
    def _no_seat(episode: Episode, seat: str) -> str:
        return (
            f"episode {episode.id} has no seat {seat!r}; its seats are {', '.join(episode.seats)}"
        )
