"""The episode hub: many concurrent episodes, each seat played by its own client. No web here.

A client creates an episode (:meth:`Hub.create`), joins one of its seats
(:meth:`Hub.join`, which hands out the seat's token), waits for its turn
(:meth:`Hub.poll`, or :meth:`Seat.changed` on a socket), acts
(:meth:`Hub.act`), and receives its reward at the end. The environment keeps
its own turn order and rewards (:class:`~llm_envs.serve.driver.EpisodeDriver`).

* Concurrency: one :class:`asyncio.Lock` per episode; every environment call
  runs in a thread pool, so a slow step (a sandbox run) never blocks the
  event loop or the other episodes.
* Timeouts: a seat that has not acted ``seat_timeout`` seconds after its turn
  began (joined or not) is *abandoned*: the server plays ``""`` for it (the
  environment scores that as a broken answer) for the rest of the episode,
  and the others play on to the end.
* Records: a finished episode (the env's record, its seats, each seat's
  return, the abandoned seats) goes to the :class:`~llm_envs.serve.store.EpisodeStore`
  before its last messages are final; an environment that raises ends its
  episode, recorded as failed.

Episodes still running when the server stops are lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import secrets
import uuid
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from llm_envs.serve.driver import EpisodeDriver, SeatUpdate
from llm_envs.serve.errors import Conflict, Failed, Forbidden, NotFound, ServeError, Unavailable
from llm_envs.serve.families import EpisodeSpec, Families
from llm_envs.serve.protocol import Message, accepted, error
from llm_envs.serve.store import EpisodeStore, utc_now

__all__ = ["Episode", "Hub", "Seat"]

log = logging.getLogger(__name__)
_T = TypeVar("_T")


class Seat:
    """One seat of an episode: its client's token, its turn count, what it must see now.

    ``message`` is the seat's current message: its ``turn`` while it must act,
    its ``end``, ``abandoned`` or ``error``, or None while it waits for others.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.token: str | None = None
        self.abandoned = False
        self.turn = 0
        self.message: Message | None = None
        self.version = 0
        self.timer: asyncio.TimerHandle | None = None
        self._changed = asyncio.Event()

    def publish(self, message: Message | None) -> None:
        """Make ``message`` the seat's current message and wake whoever waits for it."""
        self.message = message
        self.version += 1
        self._changed.set()
        self._changed = asyncio.Event()

    async def changed(self, after: int, timeout: float | None = None) -> bool:
        """Wait until the message changes after version ``after``; False when ``timeout`` passes."""
        while self.version <= after:
            try:
                await asyncio.wait_for(self._changed.wait(), timeout)
            except TimeoutError:
                return False
        return True


class Episode:
    """A running (or just finished) episode: its spec, driver, seats and lock."""

    def __init__(self, episode_id: str, spec: EpisodeSpec, driver: EpisodeDriver) -> None:
        self.id = episode_id
        self.spec = spec
        self.driver = driver
        self.seats = {agent: Seat(agent) for agent in driver.agents}
        self.lock = asyncio.Lock()
        self.started = utc_now()
        self.finished = False

    @property
    def abandoned(self) -> frozenset[str]:
        """The seats the server plays with ``""``."""
        return frozenset(name for name, seat in self.seats.items() if seat.abandoned)

    def status(self) -> dict[str, Any]:
        """The running episode as ``GET /episodes/{id}`` shows it."""
        return {
            "id": self.id,
            "status": "running",
            **self.spec.as_dict(),
            "parallel": self.driver.parallel,
            "started": self.started,
            "seats": {
                name: {
                    "joined": seat.token is not None,
                    "abandoned": seat.abandoned,
                    "pending": name in self.driver.pending,
                    "turns": seat.turn,
                    "return": self.driver.returns[name],
                }
                for name, seat in self.seats.items()
            },
        }


class Hub:
    """Episodes, their seats and clients, turn order, timeouts and records.

    Args:
        families: builds each episode's environment.
        store: where finished episodes go.
        seat_timeout: seconds a seat has to act once its turn begins.
        max_episodes: the most episodes running at once; creating more is refused (503).
        workers: threads that run environment steps (None: Python's default).
        keep_finished: finished episodes kept in memory, so late clients still get their end.
    """

    def __init__(
        self,
        families: Families,
        store: EpisodeStore,
        *,
        seat_timeout: float = 300.0,
        max_episodes: int = 1024,
        workers: int | None = None,
        keep_finished: int = 1024,
    ) -> None:
        if seat_timeout <= 0:
            raise ValueError(f"seat_timeout must be > 0 seconds, got {seat_timeout}")
        if max_episodes < 1:
            raise ValueError(f"max_episodes must be >= 1, got {max_episodes}")
        self.families = families
        self.store = store
        self.seat_timeout = seat_timeout
        self.max_episodes = max_episodes
        self.keep_finished = keep_finished
        self._executor = ThreadPoolExecutor(workers, thread_name_prefix="llm-envs-serve")
        self._running: dict[str, Episode] = {}
        self._finished: OrderedDict[str, Episode] = OrderedDict()
        self._creating = 0
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def running(self) -> int:
        """How many episodes are running."""
        return len(self._running)

    # ------------------------------------------------------------------ requests

    async def create(self, spec: EpisodeSpec) -> Episode:
        """Start an episode of ``spec``; its first seats' turns begin (and their clocks).

        Raises:
            Unavailable: ``max_episodes`` are running.
            Invalid: settings the family refuses.
            Failed: the environment raised on reset.
        """
        if len(self._running) + self._creating >= self.max_episodes:
            raise Unavailable(
                f"the server is full (max_episodes={self.max_episodes} running); "
                "retry when one ends, or start it with a larger --max-episodes"
            )
        self._creating += 1  # a place held while the env is built, off the loop
        try:
            env, seed, options = await self._run(self.families.episode, spec)
            episode = Episode(uuid.uuid4().hex, spec, EpisodeDriver(env))
            self._running[episode.id] = episode
        finally:
            self._creating -= 1
        async with episode.lock:
            await self._step(episode, episode.driver.start, seed, options)
        return episode

    async def describe(self, episode_id: str) -> dict[str, Any]:
        """A running episode's status, or a finished episode's record entry.

        Raises:
            NotFound: no such episode, running or recorded.
        """
        episode = self._running.get(episode_id)
        if episode is not None:
            return episode.status()
        entry = await self._run(self.store.get, episode_id)
        if entry is None:
            raise NotFound(f"no episode {episode_id!r}; create one with POST /episodes")
        return entry

    async def join(self, episode_id: str, seat: str, token: str | None = None) -> str:
        """Make ``seat`` the caller's; return its token (the same one again with ``token``).

        Raises:
            NotFound: no such episode or seat.
            Conflict: the seat is joined already (without its token), abandoned,
                or the episode is over.
        """
        episode = self._episode(episode_id)
        place = self._seat(episode, seat)
        if episode.finished:
            raise Conflict(
                f"episode {episode_id} is over; GET /episodes/{episode_id} for its record"
            )
        if place.abandoned:
            raise Conflict(self._abandoned_message(episode, seat))
        if place.token is None:
            place.token = secrets.token_urlsafe(16)
            return place.token
        if token is not None and secrets.compare_digest(token, place.token):
            return place.token
        free = [n for n, s in episode.seats.items() if s.token is None and not s.abandoned]
        fix = f"join a free seat ({', '.join(free)})" if free else "every seat is taken"
        raise Conflict(
            f"seat {seat!r} of episode {episode_id} is already joined; {fix}, "
            "or rejoin with the seat's token"
        )

    def seat(self, episode_id: str, seat: str, token: str | None) -> tuple[Episode, Seat]:
        """The episode and the seat the caller joined with ``token``.

        Raises:
            NotFound: no such episode or seat.
            Conflict: nobody joined the seat.
            Forbidden: ``token`` is not the seat's.
        """
        episode = self._episode(episode_id)
        place = self._seat(episode, seat)
        if place.token is None:
            raise Conflict(
                f"seat {seat!r} of episode {episode_id} is not joined; "
                f"POST /episodes/{episode_id}/seats/{seat}/join first"
            )
        if token is None or not secrets.compare_digest(token, place.token):
            raise Forbidden(
                f"seat {seat!r} of episode {episode_id} takes requests with its token only: "
                "send the token its join returned in the X-Seat-Token header"
            )
        return episode, place

    async def act(
        self, episode_id: str, seat: str, token: str | None, text: str, turn: int | None = None
    ) -> Message:
        """Take the seat's text for its current turn; return the ``accepted`` message.

        Any text is an action: the environment scores it.

        Raises:
            NotFound, Forbidden: as :meth:`seat`.
            Conflict: not the seat's turn, a stale ``turn``, an abandoned seat, or
                an episode that is over.
            Failed: the environment raised (the episode is over).
        """
        episode, place = self.seat(episode_id, seat, token)
        async with episode.lock:
            if place.abandoned:
                raise Conflict(self._abandoned_message(episode, seat))
            if episode.finished:
                raise Conflict(
                    f"episode {episode_id} is over; GET /episodes/{episode_id} for its record"
                )
            if seat not in episode.driver.pending:
                raise Conflict(self._not_your_turn(episode, seat))
            if turn is not None and turn != place.turn:
                raise Conflict(
                    f"turn {turn} of seat {seat!r} is over; its turn now is {place.turn} "
                    "(act on the latest turn message)"
                )
            taken = place.turn
            self._stop_timer(place)
            place.publish(None)
            await self._step(episode, episode.driver.act, seat, text, episode.abandoned)
        return accepted(episode_id, seat, taken)

    async def poll(self, episode_id: str, seat: str, token: str | None, wait: float) -> Message:
        """The seat's current message, waiting up to ``wait`` seconds for one; else ``wait``."""
        episode, place = self.seat(episode_id, seat, token)
        if place.message is None and wait > 0:
            await place.changed(place.version, wait)
        if place.message is not None:
            return place.message
        return {
            "type": "wait",
            "episode": episode_id,
            "seat": seat,
            "waiting_for": sorted(episode.driver.pending),
        }

    async def close(self) -> None:
        """Stop the clocks and the step threads; running episodes are dropped."""
        for episode in self._running.values():
            for place in episode.seats.values():
                self._stop_timer(place)
        for task in list(self._tasks):
            task.cancel()
        self._executor.shutdown(wait=False, cancel_futures=True)

    # ------------------------------------------------------------------ turns and clocks

    async def _step(
        self, episode: Episode, call: Callable[..., dict[str, SeatUpdate]], *args: Any
    ) -> None:
        """Run one driver call off the loop; tell the seats; let a finished episode go.

        A finished episode is recorded in the same thread call, so its record
        is on file before any seat is told the episode ended.
        """
        try:
            updates = await self._run(self._advance, episode, call, args)
        except Exception as exc:
            detail = (
                f"the environment raised {type(exc).__name__}: {exc}; episode {episode.id} is over"
            )
            log.exception("episode %s failed", episode.id)
            for place in episode.seats.values():
                if (place.message or {}).get("type") != "end":
                    place.publish(error(Failed.status, detail))
            await self._run(self._record, episode, detail)
            self._release(episode)
            raise Failed(detail) from exc
        for name, update in updates.items():
            place = episode.seats[name]
            self._stop_timer(place)
            if update.kind == "turn":
                place.turn += 1
                place.publish(self._turn_message(episode, name, update))
                self._start_timer(episode, place)
            else:
                place.publish(self._end_message(episode, name, update))
        if episode.driver.done:
            self._release(episode)

    def _advance(
        self, episode: Episode, call: Callable[..., dict[str, SeatUpdate]], args: tuple[Any, ...]
    ) -> dict[str, SeatUpdate]:
        """The driver call, and the record when it ended the episode (in a step thread)."""
        updates = call(*args)
        if episode.driver.done:
            self._record(episode, None)
        return updates

    def _start_timer(self, episode: Episode, place: Seat) -> None:
        loop = asyncio.get_running_loop()
        place.timer = loop.call_later(
            self.seat_timeout, self._timed_out, episode, place.name, place.turn
        )

    @staticmethod
    def _stop_timer(place: Seat) -> None:
        if place.timer is not None:
            place.timer.cancel()
            place.timer = None

    def _timed_out(self, episode: Episode, seat: str, turn: int) -> None:
        task = asyncio.ensure_future(self._abandon(episode, seat, turn))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _abandon(self, episode: Episode, seat: str, turn: int) -> None:
        """The seat let its turn ``turn`` run out: the server plays ``""`` for it from now on."""
        async with episode.lock:
            place = episode.seats[seat]
            late = seat in episode.driver.pending and place.turn == turn
            if episode.finished or place.abandoned or not late:
                return  # it acted in time after all
            place.abandoned = True
            place.timer = None
            log.info("episode %s: seat %s abandoned at turn %d", episode.id, seat, turn)
            place.publish(
                {
                    "type": "abandoned",
                    "episode": episode.id,
                    "seat": seat,
                    "detail": self._abandoned_message(episode, seat),
                }
            )
            # A failure ends the episode, recorded as failed; nobody asked for this step.
            with contextlib.suppress(ServeError):
                await self._step(episode, episode.driver.abandon, episode.abandoned)

    def _record(self, episode: Episode, failure: str | None) -> None:
        """Append the finished episode's record to the store (in a step thread)."""
        try:
            self.store.append(self._entry(episode, failure))
        except OSError:
            log.exception("episode %s: its record could not be written", episode.id)

    def _release(self, episode: Episode) -> None:
        """The episode is over: stop its clocks; keep its seats' last messages readable."""
        episode.finished = True
        for place in episode.seats.values():
            self._stop_timer(place)
        self._running.pop(episode.id, None)
        self._finished[episode.id] = episode
        while len(self._finished) > self.keep_finished:
            self._finished.popitem(last=False)

    def _entry(self, episode: Episode, failure: str | None) -> dict[str, Any]:
        """A finished episode's record entry (runs in a step thread: ``record()`` is a copy)."""
        try:
            record = episode.driver.record()
        except Exception as exc:
            record = None
            failure = failure or f"record() raised {type(exc).__name__}: {exc}"
        entry: dict[str, Any] = {
            "id": episode.id,
            "status": "failed" if failure else "finished",
            **episode.spec.as_dict(),
            "family_seed": self.families.seed,
            "seats": dict.fromkeys(episode.seats, "client"),
            "returns": dict(episode.driver.returns),
            "abandoned": sorted(episode.abandoned),
            "started": episode.started,
            "finished": utc_now(),
            "record": record,
        }
        if failure:
            entry["error"] = failure
        episode.driver.env.close()
        return entry

    # ------------------------------------------------------------------ messages

    def _turn_message(self, episode: Episode, seat: str, update: SeatUpdate) -> Message:
        return {
            "type": "turn",
            "episode": episode.id,
            "seat": seat,
            "turn": episode.seats[seat].turn,
            "observation": update.observation,
            "info": dict(update.info),
            "reward": update.reward,
            "timeout": self.seat_timeout,
        }

    def _end_message(self, episode: Episode, seat: str, update: SeatUpdate) -> Message:
        return {
            "type": "end",
            "episode": episode.id,
            "seat": seat,
            "reward": update.reward,
            "return": episode.driver.returns[seat],
            "terminated": update.terminated,
            "truncated": update.truncated,
            "abandoned": episode.seats[seat].abandoned,
            "info": dict(update.info),
        }

    def _abandoned_message(self, episode: Episode, seat: str) -> str:
        return (
            f"seat {seat!r} of episode {episode.id} was abandoned: no action within "
            f"{self.seat_timeout:g} s of its turn; the server plays '' for it until the "
            "episode ends"
        )

    @staticmethod
    def _not_your_turn(episode: Episode, seat: str) -> str:
        pending = ", ".join(sorted(episode.driver.pending)) or "nobody"
        done = " (it acted in this joint step already)" if episode.driver.parallel else ""
        return (
            f"it is not {seat}'s turn in episode {episode.id}{done}: waiting for {pending}; "
            "act after the seat's next turn message"
        )

    # ------------------------------------------------------------------ lookups

    def _episode(self, episode_id: str) -> Episode:
        episode = self._running.get(episode_id) or self._finished.get(episode_id)
        if episode is not None:
            return episode
        if episode_id in self.store:
            raise Conflict(
                f"episode {episode_id} is over; GET /episodes/{episode_id} for its record"
            )
        raise NotFound(f"no episode {episode_id!r}; create one with POST /episodes")

    @staticmethod
    def _seat(episode: Episode, seat: str) -> Seat:
        place = episode.seats.get(seat)
        if place is None:
            raise NotFound(
                f"episode {episode.id} has no seat {seat!r}; "
                f"its seats are {', '.join(episode.seats)}"
            )
        return place

    async def _run(self, call: Callable[..., _T], *args: Any) -> _T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(call, *args))
