"""The episode hub: many concurrent episodes, each seat played by its own client. No web here.

A client creates an episode (:meth:`Hub.create`), joins one of its seats
(:meth:`Hub.join`, which hands out the seat's token), waits for its turn
(:meth:`Hub.poll`, or :meth:`Seat.changed` on a socket), acts
(:meth:`Hub.act`), and receives its reward at the end. The environment keeps
its own turn order and rewards (:class:`~llm_envs.serve.driver.EpisodeDriver`).

* Concurrency: one :class:`asyncio.Lock` per episode. Environment steps run in
  a pool of step threads, each with a deadline (``step_deadline``); building
  an episode (its family, its reset) and reading or writing records run in a
  small pool of their own (:class:`~llm_envs.serve.pool.DeadlinePool`), so a
  step, however slow, never holds a thread that ``create``, ``describe``,
  ``join``, ``poll`` or the server's health need.
* Timeouts: a seat that has not acted ``seat_timeout`` seconds after its turn
  began (joined or not) is *abandoned*: the server plays ``""`` for it (the
  environment scores that as a broken answer) for the rest of the episode,
  and the others play on to the end. A step that runs past ``step_deadline``
  ends its episode as ``timed_out``: Python cannot stop the step's thread, so
  it finishes on its own and another takes its place; while ``max_stuck``
  such threads run, new episodes are refused (503).
* Records: every episode that ends is recorded exactly once, whatever ended
  it (:data:`Status`): its env's record, its seats, each seat's return, the
  abandoned seats, go to the :class:`~llm_envs.serve.store.EpisodeStore`
  before its seats are told it ended. An episode ends ``finished``; ``failed``
  when its environment raised, or its record could not be written;
  ``timed_out``; or ``interrupted`` when the hub closes (the server stops).
  Whatever ended it, its slot is released.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
import os
import secrets
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from llm_envs.arguments import check_int, check_number
from llm_envs.sandbox.fair import as_client, current_client, tally
from llm_envs.serve.driver import EpisodeDriver, SeatUpdate
from llm_envs.serve.errors import Conflict, Failed, Forbidden, NotFound, ServeError, Unavailable
from llm_envs.serve.families import EpisodeSpec, Families
from llm_envs.serve.pool import DeadlinePool, Overdue
from llm_envs.serve.protocol import Message, accepted, dumps, error
from llm_envs.serve.store import EpisodeStore, utc_now

__all__ = ["MAX_HELD_CHARS", "Episode", "HeldChars", "Hub", "Outcome", "Seat", "Status"]

log = logging.getLogger(__name__)

Status = Literal["finished", "failed", "timed_out", "interrupted"]
"""How an episode ended: played to its end; its env raised or its record was not written;
a step ran past the step deadline; the hub closed while it ran."""

SERVICE_WORKERS = 4
"""Threads that build episodes and read and write records (never a step)."""
BUILD_DEADLINE = 60.0
"""Seconds building an episode's environment may take at least (its family may load a data set)."""
RECORD_DEADLINE = 10.0
"""Seconds an ended episode's record may take to be taken and written, off the steps' threads."""
MAX_HELD_CHARS = 1 << 30
"""Characters of actions the running episodes may hold together.

Measured (attack round 9): 2.1 to 2.5 bytes of server memory each while the
episodes run, 6 to 10 for a moment as one ends and its record is built."""


def quarter(limit: int) -> int:
    """One client's default share of a server-wide ``limit``: a quarter, at least 1."""
    return max(1, limit // 4)


def client_share(name: str, limit: int, per_client: int | None) -> int:
    """One client's share of the bound ``name``: ``per_client`` in ``[1, limit]``, or a quarter."""
    share = quarter(limit) if per_client is None else per_client
    if not 1 <= share <= limit:
        raise ValueError(f"{name}_per_client must be in [1, {name}={limit}], got {share}")
    return share


class HeldChars:
    """The characters of clients' actions that running episodes hold, and their bounds.

    One per server, shared by the hub's episodes and the OpenEnv view's
    sessions: an environment keeps its transcript until its episode ends, so
    what every running episode holds, together, is bounded, not each alone;
    and what one client's episodes hold is bounded by its share, so that one
    client filling the budget does not refuse every other's actions.
    Thread-safe.

    Args:
        limit: the most characters held at once.
        per_client: the most one client's episodes hold (None: :func:`quarter` of ``limit``).
    """

    def __init__(self, limit: int, per_client: int | None = None) -> None:
        if limit < 1:
            raise ValueError(f"max_held_chars must be >= 1, got {limit}")
        self.limit = limit
        self.per_client = client_share("max_held_chars", limit, per_client)
        self._held = 0
        self._by_client: dict[str, int] = {}
        self._lock = threading.Lock()

    @property
    def held(self) -> int:
        """Characters held now."""
        return self._held

    def take(self, chars: int, client: str) -> None:
        """Count ``chars`` more in for ``client`` (an action about to be played).

        Raises:
            Unavailable: they would pass :attr:`limit` or the client's share
                (nothing is counted).
        """
        with self._lock:
            if self._held + chars > self.limit:
                raise Unavailable(
                    f"the running episodes hold {self._held} characters of actions and this "
                    f"one has {chars}: past the server's {self.limit} (--max-held-chars); "
                    "retry when episodes end"
                )
            mine = self._by_client.get(client, 0)
            if mine + chars > self.per_client:
                raise Unavailable(
                    f"client {client}'s actions in running episodes hold {mine} characters and "
                    f"this one has {chars}: past one client's {self.per_client} "
                    "(--max-held-chars-per-client); retry when those episodes end"
                )
            self._held += chars
            tally(self._by_client, client, chars)

    def give(self, chars: int, client: str) -> None:
        """Count out what an ended episode of ``client`` held."""
        with self._lock:
            self._held -= chars
            tally(self._by_client, client, -chars)


@dataclass(frozen=True)
class Outcome:
    """How an episode ended, and whether its record is on file.

    Attributes:
        status: :data:`Status`.
        detail: why, for any status but ``finished``.
        written: the record is in the store (else ``status`` is ``failed``).
    """

    status: Status
    detail: str | None = None
    written: bool = True


class _Interrupted(Exception):
    """(A step's awaiter.) The hub closed its episode while the step ran."""


@dataclass
class _Advanced:
    """What one driver call did: the seats' updates, and the outcome when it ended the episode.

    ``late``: the episode had ended (timed out, interrupted) before the call returned.
    """

    updates: dict[str, SeatUpdate] = field(default_factory=dict)
    outcome: Outcome | None = None
    late: bool = False


class _Handoff:
    """A step's result, for the loop's awaiter, or for ``adopt`` once the awaiter gave up.

    A step may end its episode (and claim its record) just before its deadline
    passes; the loop's timeout then finds the episode ended and leaves it to
    the step. The step's result must still reach the seats and free the
    episode's place, whenever the step returns.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.lock = threading.Lock()
        self.result: _Advanced | None = None
        self.adopt: Callable[[_Advanced], None] | None = None

    def deliver(self, result: _Advanced) -> None:
        """(The step's thread.) Keep the result, or hand it to ``adopt`` on the loop."""
        with self.lock:
            adopt = self.adopt
            if adopt is None:
                self.result = result
        if adopt is not None:
            with contextlib.suppress(RuntimeError):  # the loop closed: the server is gone
                self.loop.call_soon_threadsafe(adopt, result)

    def give_up(self, adopt: Callable[[_Advanced], None]) -> _Advanced | None:
        """(The loop.) Whatever the step returns from now goes to ``adopt``; its result if in."""
        with self.lock:
            self.adopt = adopt
            return self.result


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


class _EndedDriver:
    """What an ended episode keeps of its driver: no environment, no transcript.

    Ended episodes stay in memory (``keep_finished`` of them) so late clients
    get their end; with its environment each held all its actions (a debate of
    1 MiB actions: 13 to 87 MiB), so a client playing episodes one after
    another grew the server by that much per episode.
    """

    done = True
    pending: frozenset[str] = frozenset()

    def __init__(self, driver: EpisodeDriver) -> None:
        self.agents = tuple(driver.agents)
        self.parallel = driver.parallel
        self.returns = dict(driver.returns)

    def owed(self, seat: str) -> float:
        return 0.0


def _kept(episode: Episode) -> Episode:
    """What the hub keeps of an ended episode: the same seats, spec and outcome, no env.

    A copy, so whoever still holds the episode (a late step, a seat's
    handler) keeps its driver; the hub's copy lets the env go with them.
    """
    kept = copy.copy(episode)
    kept.driver = _EndedDriver(episode.driver)  # type: ignore[assignment]
    return kept


class Episode:
    """A running (or just finished) episode: its spec, driver, seats and lock.

    Whether it has ended is decided once, under a thread lock, by whoever ends
    it: the step thread that played it to its end, or the loop when a step
    ran past its deadline or the hub closed. Only that one records it.

    Its steps count as its creator's (:attr:`client`), whichever seat acts:
    step threads and sandbox workers are shared between clients in turn. The
    characters of an action count in the share of the client that sent it
    (:attr:`held`), so a seat joined by another client cannot fill the
    creator's share, nor act without spending its own.
    """

    def __init__(self, episode_id: str, spec: EpisodeSpec, driver: EpisodeDriver) -> None:
        self.id = episode_id
        self.spec = spec
        self.driver = driver
        self.client = current_client()  # the peer that created it (the server's door set it)
        self.seats = {agent: Seat(agent) for agent in driver.agents}
        self.lock = asyncio.Lock()
        self.started = utc_now()
        self.outcome: Outcome | None = None  # once its record was written (or not)
        self.step: asyncio.Future[_Advanced] | None = None  # the driver call awaited now
        self.held: dict[str, int] = {}  # its actions' characters, by the client that sent each
        self.written: dict[str, int] = {}  # its actions' bytes as a record writes them, by sender
        self._guard = threading.Lock()
        self._ended = False
        self._stepping = False

    @property
    def finished(self) -> bool:
        """Whether the episode has ended (for any reason); nothing more is played."""
        return self._ended

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

    # The three ways the end is claimed; each under the guard, so exactly one wins.

    def begin_step(self) -> bool:
        """(A step thread.) False when the episode ended while the step waited for a thread."""
        with self._guard:
            self._stepping = not self._ended
            return self._stepping

    def end_step(self, ends: bool) -> bool:
        """(A step thread.) Whether the step still counts; ``ends``: it ended the episode."""
        with self._guard:
            self._stepping = False
            if self._ended:
                return False  # ended from outside while the step ran
            self._ended = ends
            return True

    def cut(self) -> bool | None:
        """(The loop.) End it now; whether a step still runs in it; None if it had ended."""
        with self._guard:
            if self._ended:
                return None
            self._ended = True
            return self._stepping


class Hub:
    """Episodes, their seats and clients, turn order, timeouts and records.

    Args:
        families: builds each episode's environment.
        store: where ended episodes go.
        seat_timeout: seconds a seat has to act once its turn begins.
        max_episodes: the most episodes running at once; creating more is refused (503).
        workers: threads that run environment steps (None: Python's default,
            ``min(32, CPUs + 4)``).
        keep_finished: ended episodes kept in memory, so late clients still get their end.
        keep_finished_chars: the characters of actions those ended episodes
            held, together, past which the oldest are forgotten (their seats
            then get 409, over): a seat's last message echoes its last action
            (a debate's ``info``), so 1,024 ended episodes of 1 MiB actions
            kept 2.7 GB.
        step_deadline: seconds one environment step (or reset) may run; past it, its
            episode ends as ``timed_out``.
        max_stuck: threads still running steps past their deadline, per pool, at
            which new episodes are refused (503) and no more threads start.
        max_held_chars: characters of actions the running episodes may hold
            together (an environment keeps its transcript until the episode
            ends: one client's 1,024 debates of 8 seats and 1 MiB actions would
            hold some 34 GiB); an action past it is refused (503), the seat's
            clock running, until episodes end.
        max_episodes_per_client: the most episodes one client (their creator)
            runs at once (None: a quarter of ``max_episodes``), so that one
            client cannot take every place (503 past it).
        max_held_chars_per_client: what one client's episodes may hold of
            ``max_held_chars`` (None: a quarter of it).
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
        keep_finished_chars: int = 1 << 28,
        step_deadline: float = 60.0,
        max_stuck: int = 16,
        max_held_chars: int = MAX_HELD_CHARS,
        max_episodes_per_client: int | None = None,
        max_held_chars_per_client: int | None = None,
    ) -> None:
        check_int("max_stuck", max_stuck, minimum=1)
        self.families = families
        self.store = store
        self.seat_timeout = check_number(
            "seat_timeout", seat_timeout, minimum=0, open_minimum=True, unit=" of seconds"
        )
        self.max_episodes = check_int("max_episodes", max_episodes, minimum=1)
        self.keep_finished = keep_finished
        self.keep_finished_chars = keep_finished_chars
        self._finished_chars = 0
        self.step_deadline = check_number(
            "step_deadline", step_deadline, minimum=0, open_minimum=True, unit=" of seconds"
        )
        # The OpenEnv view's sessions count here too.
        self.held = HeldChars(max_held_chars, max_held_chars_per_client)
        self.max_episodes_per_client = client_share(
            "max_episodes", max_episodes, max_episodes_per_client
        )
        self._by_client: dict[str, int] = {}  # running (and being built) episodes per creator
        steps = workers if workers is not None else min(32, (os.cpu_count() or 1) + 4)
        self._steps = DeadlinePool(steps, max_stuck=max_stuck, name="llm-envs-step")
        self._service = DeadlinePool(SERVICE_WORKERS, max_stuck=max_stuck, name="llm-envs-serve")
        self._running: dict[str, Episode] = {}
        self._finished: OrderedDict[str, Episode] = OrderedDict()
        self._creating = 0
        self._closing: str | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def running(self) -> int:
        """How many episodes are running."""
        return len(self._running)

    @property
    def stuck(self) -> int:
        """Threads still running a step (or a reset, or a record) that passed its deadline."""
        return self._steps.stuck + self._service.stuck

    # ------------------------------------------------------------------ requests

    async def create(self, spec: EpisodeSpec) -> Episode:
        """Start an episode of ``spec``; its first seats' turns begin (and their clocks).

        Raises:
            Unavailable: ``max_episodes`` are running, ``max_stuck`` threads are
                stuck past their deadline, the records file is full, or the hub
                is closing.
            Invalid: settings the family refuses.
            Failed: the environment raised on reset, or its reset (or building
                the episode) ran past its deadline.
        """
        client = current_client()
        self._admit(client)
        self._creating += 1  # a place held while the env is built, off the loop
        tally(self._by_client, client, 1)
        built = False
        try:
            deadline = max(self.step_deadline, BUILD_DEADLINE)
            try:
                env, seed, options = await self._service.run(deadline, self.families.episode, spec)
            except Overdue:
                raise Failed(
                    f"building an episode of env {spec.env!r} took longer than {deadline:g} s; "
                    "retry later"
                ) from None
            episode = Episode(uuid.uuid4().hex, spec, EpisodeDriver(env))
            self._running[episode.id] = episode
            built = True  # its count goes when it ends
        finally:
            self._creating -= 1
            if not built:
                tally(self._by_client, client, -1)
        async with episode.lock:
            await self._step(
                episode, self._service, "its reset", episode.driver.start, seed, options
            )
        if episode.outcome is not None and episode.outcome.status != "finished":
            raise Failed(episode.outcome.detail or f"episode {episode.id} is over")
        return episode

    async def describe(self, episode_id: str) -> dict[str, Any]:
        """A running episode's status, or an ended episode's record entry.

        Raises:
            NotFound: no such episode, running or recorded.
            Unavailable: the record took longer than ``RECORD_DEADLINE`` to read.
        """
        episode = self._running.get(episode_id)
        if episode is not None:
            return episode.status()
        kept = self._finished.get(episode_id)
        if kept is not None and kept.outcome is not None and not kept.outcome.written:
            return self._unwritten(kept, kept.outcome)
        try:
            entry = await self._service.run(RECORD_DEADLINE, self.store.get, episode_id)
        except Overdue:
            raise Unavailable(
                f"the record of episode {episode_id} took longer than {RECORD_DEADLINE:g} s "
                "to read; retry later"
            ) from None
        if entry is None:
            raise NotFound(f"no episode {episode_id!r}; create one with POST /episodes")
        return entry

    async def join(self, episode_id: str, seat: str, token: str | None = None) -> str:
        """Make ``seat`` the caller's; return its token (the same one again with ``token``).

        Raises:
            NotFound: no such episode or seat.
            Conflict: the seat is joined already (without its token), abandoned,
                or the episode is over.
            Unavailable: a free seat of another client's episode, and the caller's
                share of the records file is full (``--max-records-bytes``).
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
            # A client past its share of the records file joins no more of others' episodes:
            # else it fills the file through seats of episodes others created, whose records
            # it pays. Its own episodes, admitted before, it may still play to their end.
            if current_client() != episode.client:
                self.store.check_share(current_client())
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

        Any text is an action: the environment scores it. A step that runs past
        the step deadline ends the episode (``timed_out``): the action was taken,
        and every seat's next message is its ``end``.

        Raises:
            NotFound, Forbidden: as :meth:`seat`.
            Conflict: not the seat's turn, a stale ``turn``, an abandoned seat, or
                an episode that is over.
            Failed: the environment raised, or the record could not be written
                (the episode is over).
            Unavailable: the hub closed while the step ran (the episode is interrupted).
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
            actor = current_client()  # the acting seat's peer (the server's door set it)
            self.held.take(len(text), actor)
            tally(episode.held, actor, len(text))
            # A character may take 6 bytes in the record ("\u0001"): the record is split by these.
            tally(episode.written, actor, len(dumps(text).encode("utf-8", "backslashreplace")))
            taken = place.turn
            self._stop_timer(place)
            place.publish(None)
            await self._step(
                episode,
                self._steps,
                f"{seat}'s action",
                episode.driver.act,
                seat,
                text,
                episode.abandoned,
            )
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

    async def interrupt(self, reason: str) -> None:
        """End every running episode as ``interrupted``: recorded, its seats told ``reason``.

        New episodes are refused from now on (503). A step still running is
        left to finish on its own; its episode's record is taken as it stands.
        """
        self._closing = reason
        await asyncio.gather(
            *(
                self._cut(
                    episode,
                    "interrupted",
                    f"episode {episode.id} was interrupted: {reason}; "
                    f"GET /episodes/{episode.id} for its record",
                )
                for episode in list(self._running.values())
            )
        )

    async def close(self, reason: str = "the server stopped") -> None:
        """Interrupt the running episodes (:meth:`interrupt`), then stop the clocks and threads."""
        await self.interrupt(reason)
        for task in list(self._tasks):
            task.cancel()
        self._steps.shutdown()
        self._service.shutdown()

    # ------------------------------------------------------------------ turns and clocks

    async def _step(
        self,
        episode: Episode,
        pool: DeadlinePool,
        what: str,
        call: Callable[..., dict[str, SeatUpdate]],
        *args: Any,
    ) -> None:
        """Run one driver call in ``pool``; tell the seats; let an ended episode go.

        ``what`` names the call in a timeout's message. An episode the call
        ended is recorded in the same thread call, so its record is on file
        before any seat is told the episode ended.
        """
        handoff = _Handoff(asyncio.get_running_loop())
        with as_client(episode.client):
            future = pool.submit(self.step_deadline, self._advance, episode, call, args, handoff)
        episode.step = future
        try:
            advanced = await future
        except Overdue:
            await self._cut(episode, "timed_out", self._overdue_message(episode, what))
            returned = handoff.give_up(lambda late: self._adopt(episode, late))
            if returned is not None:
                self._adopt(episode, returned)
            return
        except _Interrupted as exc:
            raise Unavailable(str(exc)) from None
        except Exception as exc:  # the hub's own fault (the env's are caught in _advance)
            log.exception("episode %s: the server failed", episode.id)
            detail = f"the server failed ({type(exc).__name__}: {exc}); episode {episode.id} ended"
            await self._cut(episode, "failed", detail)
            if episode.id in self._running:  # its end was claimed before the fault: free it
                lost = Outcome("failed", detail, written=False)
                self._tell_failed(episode, lost)
                self._release(episode, lost)
            raise Failed(detail) from exc
        finally:
            episode.step = None
        self._settle(episode, advanced)

    def _adopt(self, episode: Episode, advanced: _Advanced) -> None:
        """A step that ended its episode after its awaiter gave up: its seats told, the place freed.

        A step that did not end it (or ran late) leaves it to the timeout, which ended it.
        """
        if advanced.outcome is not None and not advanced.late:
            with contextlib.suppress(ServeError):  # its awaiter was answered already
                self._settle(episode, advanced)

    def _settle(self, episode: Episode, advanced: _Advanced) -> None:
        """Tell the seats what a step did; free the episode it ended.

        Raises:
            Conflict: the episode had ended before the step returned.
            Failed: the step's environment raised, or the record was lost.
        """
        if advanced.late:
            raise Conflict(
                f"episode {episode.id} is over; GET /episodes/{episode.id} for its record"
            )
        outcome = advanced.outcome
        if outcome is not None and outcome.status == "failed":
            self._tell_failed(episode, outcome)
            self._release(episode, outcome)
            raise Failed(outcome.detail)
        for name, update in advanced.updates.items():
            place = episode.seats[name]
            self._stop_timer(place)
            if update.kind == "turn":
                place.turn += 1
                place.publish(self._turn_message(episode, name, update))
                self._start_timer(episode, place)
            else:
                place.publish(self._end_message(episode, name, update))
        if outcome is not None:
            self._release(episode, outcome)

    def _advance(
        self,
        episode: Episode,
        call: Callable[..., dict[str, SeatUpdate]],
        args: tuple[Any, ...],
        handoff: _Handoff,
    ) -> _Advanced:
        """The driver call, and the record when it ended the episode (in a pool thread)."""
        advanced = self._play_step(episode, call, args)
        handoff.deliver(advanced)
        return advanced

    def _play_step(
        self, episode: Episode, call: Callable[..., dict[str, SeatUpdate]], args: tuple[Any, ...]
    ) -> _Advanced:
        if not episode.begin_step():
            return _Advanced(late=True)  # ended while the call waited for a thread
        try:
            updates = call(*args)
        except Exception as exc:
            log.exception("episode %s failed", episode.id)
            if not episode.end_step(ends=True):
                self._close_env(episode)  # it ran late; whoever ended it left the env to us
                return _Advanced(late=True)
            detail = (
                f"the environment raised {type(exc).__name__}: {exc}; episode {episode.id} is over"
            )
            return _Advanced(outcome=self._conclude(episode, "failed", detail))
        if not episode.end_step(ends=episode.driver.done):
            self._close_env(episode)
            return _Advanced(late=True)
        if episode.driver.done:
            return _Advanced(updates, self._conclude(episode, "finished", None))
        return _Advanced(updates)

    async def _cut(self, episode: Episode, status: Status, detail: str) -> None:
        """End a running episode from the loop (a step ran late, the hub closes); record, tell."""
        stepping = episode.cut()
        if stepping is None:
            return  # it had ended
        if episode.step is not None and not episode.step.done():
            episode.step.set_exception(_Interrupted(detail))
        for place in episode.seats.values():
            self._stop_timer(place)
        # The step still running may pay more; the record and the seats get these.
        returns = dict(episode.driver.returns)
        owed = {seat: episode.driver.owed(seat) for seat in episode.seats}
        try:
            outcome = await self._service.run(
                RECORD_DEADLINE,
                self._conclude,
                episode,
                status,
                detail,
                returns=returns,
                close=not stepping,
            )
        except Overdue:
            outcome = Outcome(
                "failed",
                f"{detail}; its record took longer than {RECORD_DEADLINE:g} s to take and write",
                written=False,
            )
        except Exception as exc:  # never leave the slot held
            log.exception("episode %s: its record could not be taken", episode.id)
            outcome = Outcome("failed", f"{detail}; and then {type(exc).__name__}: {exc}", False)
        if outcome.status == "failed":
            self._tell_failed(episode, outcome)
        else:
            for name, place in episode.seats.items():
                if (place.message or {}).get("type") != "end":
                    place.publish(self._cut_message(episode, name, outcome, returns, owed))
        self._release(episode, outcome)

    def _conclude(
        self,
        episode: Episode,
        status: Status,
        detail: str | None,
        *,
        returns: dict[str, float] | None = None,
        close: bool = True,
    ) -> Outcome:
        """Write the ended episode's record; close its env unless a step still runs (a thread)."""
        try:
            entry = self._entry(episode, status, detail, returns)
        finally:
            if close:
                self._close_env(episode)
        try:
            with as_client(_payer(episode)):
                self.store.append(entry, shares=episode.written)
        except Exception as exc:
            log.exception("episode %s: its record could not be written", episode.id)
            why = f": {entry['error']}" if "error" in entry else ""
            return Outcome(
                "failed",
                f"episode {episode.id} ended {entry['status']}{why}; and its record could not "
                f"be written ({type(exc).__name__}: {exc}): it is lost",
                written=False,
            )
        return Outcome(entry["status"], entry.get("error"))

    def _entry(
        self,
        episode: Episode,
        status: Status,
        detail: str | None,
        returns: dict[str, float] | None,
    ) -> dict[str, Any]:
        """An ended episode's record entry (in a thread: ``record()`` is a copy)."""
        try:
            record = episode.driver.record()
        except Exception as exc:
            record = None
            raised = f"record() raised {type(exc).__name__}: {exc}"
            if status == "finished":
                status, detail = "failed", raised
            else:
                detail = f"{detail}; {raised}"
        entry: dict[str, Any] = {
            "id": episode.id,
            "status": status,
            **episode.spec.as_dict(),
            "family_seed": self.families.seed,
            "seats": dict.fromkeys(episode.seats, "client"),
            "returns": dict(episode.driver.returns if returns is None else returns),
            "abandoned": sorted(episode.abandoned),
            "started": episode.started,
            "finished": utc_now(),
            "record": record,
        }
        if detail:
            entry["error"] = detail
        return entry

    @staticmethod
    def _close_env(episode: Episode) -> None:
        try:
            episode.driver.env.close()
        except Exception:
            log.exception("episode %s: its environment raised on close", episode.id)

    def _release(self, episode: Episode, outcome: Outcome) -> None:
        """The episode is over: stop its clocks; keep its seats' last messages readable."""
        episode.outcome = outcome
        for place in episode.seats.values():
            self._stop_timer(place)
        if self._running.pop(episode.id, None) is not None:
            for actor, chars in episode.held.items():
                self.held.give(chars, actor)
            tally(self._by_client, episode.client, -1)
        self._forget_finished(episode.id)
        self._finished[episode.id] = _kept(episode)
        self._finished_chars += sum(episode.held.values())
        while len(self._finished) > self.keep_finished or (
            self._finished_chars > self.keep_finished_chars and len(self._finished) > 1
        ):
            self._forget_finished(next(iter(self._finished)))

    def _forget_finished(self, episode_id: str) -> None:
        forgotten = self._finished.pop(episode_id, None)
        if forgotten is not None:
            self._finished_chars -= sum(forgotten.held.values())

    def _admit(self, client: str) -> None:
        if self._closing is not None:
            raise Unavailable(f"the server takes no new episodes: {self._closing}")
        self.store.check_room(client)
        if len(self._running) + self._creating >= self.max_episodes:
            raise Unavailable(
                f"the server is full (max_episodes={self.max_episodes} running); "
                "retry when one ends, or start it with a larger --max-episodes"
            )
        mine = self._by_client.get(client, 0)
        if mine >= self.max_episodes_per_client:
            raise Unavailable(
                f"client {client} runs {mine} episodes, the most one client may "
                f"(--max-episodes-per-client {self.max_episodes_per_client}); retry when one ends"
            )
        if self._steps.saturated or self._service.saturated:
            raise Unavailable(
                f"the server takes no new episodes while {self.stuck} threads still run steps "
                f"that passed the {self.step_deadline:g} s step deadline (--step-deadline); "
                "retry when they end"
            )

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
                await self._step(
                    episode,
                    self._steps,
                    "the abandoned seats' empty answers",
                    episode.driver.abandon,
                    episode.abandoned,
                )

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
            "status": "finished",
        }

    @staticmethod
    def _cut_message(
        episode: Episode,
        seat: str,
        outcome: Outcome,
        returns: dict[str, float],
        owed: dict[str, float],
    ) -> Message:
        """A seat's ``end`` when a step ran late or the hub closed: cut short, its return so far."""
        return {
            "type": "end",
            "episode": episode.id,
            "seat": seat,
            "reward": owed[seat],
            "return": returns[seat],
            "terminated": False,
            "truncated": True,
            "abandoned": episode.seats[seat].abandoned,
            "info": {},
            "status": outcome.status,
            "detail": outcome.detail,
        }

    @staticmethod
    def _tell_failed(episode: Episode, outcome: Outcome) -> None:
        for place in episode.seats.values():
            if (place.message or {}).get("type") != "end":
                place.publish(error(Failed.status, outcome.detail or "the episode failed"))

    def _overdue_message(self, episode: Episode, what: str) -> str:
        return (
            f"episode {episode.id} timed out: the environment's step after {what} ran past "
            f"the {self.step_deadline:g} s step deadline (--step-deadline); the episode is "
            "over, with the returns paid before that step"
        )

    def _unwritten(self, episode: Episode, outcome: Outcome) -> dict[str, Any]:
        """What ``GET /episodes/{id}`` shows of an episode whose record could not be written."""
        return {
            "id": episode.id,
            "status": "failed",
            **episode.spec.as_dict(),
            "family_seed": self.families.seed,
            "returns": dict(episode.driver.returns),
            "abandoned": sorted(episode.abandoned),
            "started": episode.started,
            "record": None,
            "error": outcome.detail,
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


def _payer(episode: Episode) -> str:
    """The client an episode's record counts against: the one that sent most of its bytes.

    The creator when nobody sent more than it did. Charged to the creator, an
    opponent's long actions in an honest client's episodes filled that
    client's share of the records and pushed out its other records.
    """
    most = max(episode.written.values(), default=0)
    if episode.written.get(episode.client, 0) >= most:
        return episode.client
    return max(episode.written, key=episode.written.__getitem__)
