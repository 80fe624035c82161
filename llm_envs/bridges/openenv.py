"""One seat of any llm-envs episode as an OpenEnv environment, served by OpenEnv's own server.

:class:`SeatEnvironment` is an ``openenv.core.env_server.Environment``: its
``reset`` starts a family's evaluation episode with the client in one seat
and the family's reference players in the others
(:func:`llm_envs.seats.family_seat`), its ``step`` takes the seat's text.
:func:`openenv_app` serves it with ``openenv.core.env_server.create_app``, so
OpenEnv's clients (``GenericEnvClient``, ``EnvClient`` subclasses) drive it
unchanged::

    from openenv.core import GenericEnvClient

    with GenericEnvClient(base_url="http://localhost:8000/openenv").sync() as env:
        result = env.reset(seed=0, problem=3, seat="agent_0")
        while not result.done:
            result = env.step({"text": my_model(result.observation["messages"])})

``reset`` takes the episode's ``seed``, ``problem`` and ``seat`` (default the
first), and, to leave the server's defaults, ``env``, ``env_kwargs``, ``task``
and ``task_kwargs``. An observation carries the chat (``messages``), the
env's ``info``, the ``seat``, the ``episode_id`` and ``max_turns`` (the
most turns the seat takes, the family's ``max_agent_turns``); ``reward`` is what the
seat was paid since its previous action. Every episode goes to the records
like any other: ``finished``; ``timed_out`` when a step runs past the step
deadline (the step's observation comes back ``done`` and ``truncated``, its
``info`` saying so, and the session's later steps are refused); or
``interrupted`` when the client resets or closes its session after acting and
before the end. Steps and resets run in a pool of threads of their own
(:class:`~llm_envs.serve.pool.DeadlinePool`), never on the event loop.

OpenEnv serves episodes over its WebSocket (``/ws``, what its clients use);
its HTTP ``/reset`` and ``/step`` are stateless, one fresh environment per
request, as in every OpenEnv server.
"""

from __future__ import annotations

import functools
import json
import logging
import re
import threading
import uuid
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any

try:
    from openenv.core.env_server import (  # type: ignore[import-untyped]
        Action,
        Environment,
        Observation,
        State,
        create_app,
    )
    from openenv.core.env_server.types import (  # type: ignore[import-untyped]
        ConcurrencyConfig,
        EnvironmentMetadata,
    )
except ModuleNotFoundError as missing:  # an install without the serve extra
    raise ModuleNotFoundError(
        f"the episode server needs openenv-core's server, which needs {missing.name!r}: "
        'pip install "llm-envs[serve]" && pip install --no-deps openenv-core==0.3.0',
        name=missing.name,
    ) from missing
from fastapi.responses import JSONResponse
from pydantic import Field, StrictStr, ValidationError
from starlette.websockets import WebSocketDisconnect

import llm_envs
from llm_envs.sandbox.fair import as_client, current_client
from llm_envs.seats import SeatView, family_seat
from llm_envs.serve.errors import Conflict, Invalid, ServeError, Unavailable
from llm_envs.serve.families import Defaults, EpisodeSpec, Families, resolve
from llm_envs.serve.hub import BUILD_DEADLINE, MAX_HELD_CHARS, RECORD_DEADLINE, HeldChars, Status
from llm_envs.serve.pool import DeadlinePool, Overdue
from llm_envs.serve.protocol import EpisodeRequest, dumps, validation_message
from llm_envs.serve.store import EpisodeStore, utc_now

__all__ = ["SeatAction", "SeatEnvironment", "SeatObservation", "SingleSeat", "openenv_app"]

_RESET_SHAPE = (
    '{"seed": 0, "problem": 0, "seat": "agent_0"} (and env, env_kwargs, task, task_kwargs)'
)
_SURROGATE = re.compile("[\ud800-\udfff]")

log = logging.getLogger(__name__)


class SeatAction(Action):
    """The seat's action: its raw text (any string; the environment scores it)."""

    text: StrictStr = Field(description="the agent's raw text")


class SeatObservation(Observation):
    """What the seat sees: the chat to continue, the env's info, and where it sits."""

    messages: list[dict[str, Any]] = Field(default_factory=list, description="the chat")
    info: dict[str, Any] = Field(default_factory=dict, description="the env's info for the seat")
    seat: str = Field("", description="the agent the client plays")
    episode_id: str = Field("", description="the episode (GET /episodes/{id} once it is over)")
    truncated: bool = Field(False, description="the episode was cut short rather than ended")
    max_turns: int = Field(0, description="the most turns the seat takes in an episode")


class SingleSeatRequest(EpisodeRequest):
    """``reset``'s settings: an episode (:class:`EpisodeRequest`) and the seat to play."""

    seat: StrictStr | None = Field(default=None, description="the agent to play; default the first")


@dataclass(frozen=True)
class SingleSeat:
    """What every :class:`SeatEnvironment` of one server shares.

    Attributes:
        defaults: the server's defaults for what ``reset`` leaves out.
        families: builds families and their reference players once.
        store: where ended episodes go.
        step_deadline: seconds one step may run; past it the episode ends as ``timed_out``.
        workers: threads that run the sessions' steps and resets.
        max_stuck: threads still running a step past its deadline at which new
            episodes are refused and no more threads start.
        held: the characters of actions running episodes hold, and their bound
            (the episode server passes its hub's: ``--max-held-chars`` bounds
            both together); a step past it is refused, and taken again once
            episodes end.
        pool: the threads (built from ``step_deadline``, ``workers`` and ``max_stuck``).
    """

    defaults: Defaults
    families: Families
    store: EpisodeStore
    step_deadline: float = 60.0
    workers: int = 64
    max_stuck: int = 16
    held: HeldChars = field(default_factory=lambda: HeldChars(MAX_HELD_CHARS))
    pool: DeadlinePool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.step_deadline > 0:
            raise ValueError(f"step_deadline must be > 0 seconds, got {self.step_deadline}")
        pool = DeadlinePool(self.workers, max_stuck=self.max_stuck, name="llm-envs-openenv")
        object.__setattr__(self, "pool", pool)  # frozen: set once, here


class _Play:
    """One episode of a session: its view and settings, its return so far, whether it ended.

    A step that ran past its deadline still runs in its thread and may change
    this object later; a new episode of the session is a new object.
    """

    def __init__(
        self, view: SeatView, spec: EpisodeSpec, episode_id: str, budget: HeldChars
    ) -> None:
        self.view = view
        self.spec = spec
        self.id = episode_id
        self.started = utc_now()
        self.returned = 0.0
        self.steps = 0
        self.status: Status | None = None
        self._budget = budget
        self.client = current_client()  # the session's peer (the server's door set it)
        self._held = 0  # characters of the client's actions its environment holds
        self._guard = threading.Lock()

    def hold(self, text: str) -> None:
        """Count an action's characters in the server's budget until the episode ends.

        Raises:
            Unavailable: past the budget (``--max-held-chars``).
        """
        with self._guard:
            if self.status is None:  # else the step refuses it
                self._budget.take(len(text), self.client)
                self._held += len(text)

    def end(self, status: Status) -> bool:
        """Claim the episode's end for ``status``; False when it had ended (it is recorded once)."""
        with self._guard:
            if self.status is not None:
                return False
            self.status = status
            self._budget.give(self._held, self.client)
            return True


class SeatEnvironment(Environment):
    """One seat of a family's evaluation episode; the family's reference players take the rest.

    Args:
        shared: the server's defaults, families and records.
    """

    SUPPORTS_CONCURRENT_SESSIONS = True  # each session its own view; families are shared read-only

    def __init__(self, shared: SingleSeat) -> None:
        super().__init__()
        self._shared = shared
        self._play: _Play | None = None
        self._state = State()
        self._max_turns = 0

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **settings: Any
    ) -> SeatObservation:
        """Start an episode with the client in one seat (see the module docstring).

        Raises:
            ValueError: unknown settings or a bad value, or an ``episode_id`` taken.
            Unavailable: the records file is full (``--max-records-bytes``).
            NotFound: an unknown env.
            Invalid: a seat the env does not have, settings the family refuses, or
                a family without reference players (the message says why).
        """
        try:
            request = SingleSeatRequest.model_validate({"seed": seed or 0, **settings})
        except ValidationError as exc:
            raise ValueError(validation_message(exc.errors(), _RESET_SHAPE)) from exc
        self._shared.store.check_room(current_client())  # a full file (or share) takes no more
        if episode_id is not None and episode_id in self._shared.store:
            raise ValueError(
                f"episode_id {episode_id!r} names a finished episode; "
                "choose another or leave it out"
            )
        spec = resolve(request, self._shared.defaults)
        family = self._shared.families.family(spec)
        seat = request.seat or family.agents[0]
        if seat not in family.agents:
            raise Invalid(
                f"env {spec.env!r} has no seat {seat!r}; its seats are {list(family.agents)}"
            )
        # A one-seat family (expert iteration's solver) needs no other players.
        alone = tuple(family.agents) == (seat,)
        players = {} if alone else self._shared.families.reference_players(spec)
        view, reset_seed, options = family_seat(
            family, seat, problem=spec.problem, seed=spec.seed, others=players
        )
        observation, info = view.reset(seed=reset_seed, options=options)
        self._leave("the client reset its session before the episode ended")
        play = self._play = _Play(view, spec, episode_id or uuid.uuid4().hex, self._shared.held)
        self._max_turns = int(family.max_agent_turns)
        self._state = State(episode_id=play.id, step_count=0, seat=seat, **spec.as_dict())
        if view.done and play.end("finished"):
            self._finish(play, None)
        return self._observation(play, observation, info, None, truncated=False)

    def step(
        self, action: SeatAction, timeout_s: float | None = None, **kwargs: Any
    ) -> SeatObservation:
        """Act for the seat; the reference players move until it must act again or it is over.

        Raises:
            Conflict: before ``reset``, or after the episode ended.
            RuntimeError: its record could not be written.
        """
        play = self._play
        if play is None:
            raise Conflict(f"reset the episode before stepping: reset({_RESET_SHAPE})")
        if play.status is not None:
            raise Conflict(f"episode {play.id} is over ({play.status}); reset to start another")
        observation, reward, _, truncated, info = play.view.step(action.text)
        play.returned += reward
        play.steps += 1
        self._state.step_count += 1
        if play.view.done and play.end("finished"):
            self._finish(play, None)
        return self._observation(play, observation, info, reward, truncated)

    async def reset_async(
        self, seed: int | None = None, episode_id: str | None = None, **settings: Any
    ) -> SeatObservation:
        """:meth:`reset` in the view's threads, within a deadline (building a family counts).

        Raises:
            Unavailable: too many threads are stuck in steps past their
                deadline, or the reset ran past its deadline (the session is
                spoilt: open another).
            ValueError, NotFound, Invalid: as :meth:`reset`.
        """
        shared = self._shared
        if shared.pool.saturated:
            raise Unavailable(
                f"the server takes no new episodes while {shared.pool.stuck} threads still run "
                f"steps that passed the {shared.step_deadline:g} s step deadline "
                "(--step-deadline); retry when they end"
            )
        deadline = max(shared.step_deadline, BUILD_DEADLINE)
        try:
            return await shared.pool.run(deadline, self.reset, seed, episode_id, **settings)
        except Overdue:
            self._play = None
            raise Unavailable(f"the reset ran past its {deadline:g} s deadline") from None

    async def step_async(
        self, action: SeatAction, timeout_s: float | None = None, **kwargs: Any
    ) -> SeatObservation:
        """:meth:`step` in the view's threads; past the step deadline the episode is ``timed_out``.

        A step that runs late ends the episode: it is recorded with the return
        paid before the step, and the step answers ``done`` and ``truncated``,
        its ``info`` holding ``status`` and ``detail``; the late step finishes
        in its thread on its own.

        Raises:
            Unavailable: the running episodes hold ``--max-held-chars``
                characters of actions (the session's episode goes on: retry).
        """
        play = self._play
        if play is not None:
            play.hold(action.text)
        try:
            return await self._shared.pool.run(self._shared.step_deadline, self.step, action)
        except Overdue:
            assert play is not None  # step() refuses before reset, at once
            return await self._time_out(play)

    def close(self) -> None:
        """The session closed: an episode it acted in and left unfinished is recorded."""
        self._leave(
            "the session closed before the episode ended (its client left, or the server stopped)"
        )

    @property
    def state(self) -> State:
        """The episode: its id, steps taken, seat, settings and whether it is over."""
        return self._state

    def get_metadata(self) -> EnvironmentMetadata:
        """Name, version and what this environment is."""
        return EnvironmentMetadata(
            name="llm-envs",
            description="one seat of an llm-envs episode; reference players take the others",
            version=llm_envs.__version__,
        )

    def _observation(
        self, play: _Play, observation: Any, info: Any, reward: float | None, truncated: bool
    ) -> SeatObservation:
        messages = observation.get("messages", []) if isinstance(observation, dict) else []
        return SeatObservation(
            messages=_sendable(list(messages)),
            info=_sendable(json.loads(dumps(info or {}))),  # plain JSON, whatever the env put in
            seat=play.view.seat,
            episode_id=play.id,
            done=play.view.done,
            reward=reward,
            truncated=bool(truncated),
            max_turns=self._max_turns,
        )

    async def _time_out(self, play: _Play) -> SeatObservation:
        """The step ran past its deadline: record the episode as ``timed_out``; say so."""
        detail = (
            f"episode {play.id} timed out: the environment's step ran past the "
            f"{self._shared.step_deadline:g} s step deadline (--step-deadline); the episode "
            "is over, with the return paid before that step"
        )
        returned = play.returned  # before the late step pays anything
        if play.end("timed_out"):
            try:
                await self._shared.pool.run(
                    RECORD_DEADLINE, self._finish, play, detail, returned=returned
                )
            except Overdue:
                detail = f"{detail}; its record took longer than {RECORD_DEADLINE:g} s to write"
        return SeatObservation(
            info={"status": "timed_out", "detail": detail},
            seat=play.view.seat,
            episode_id=play.id,
            done=True,
            reward=0.0,
            truncated=True,
            max_turns=self._max_turns,
        )

    def _leave(self, why: str) -> None:
        """Record the session's episode as ``interrupted`` if the client acted in it and left it."""
        play = self._play
        if play is not None and play.steps and play.end("interrupted"):
            try:
                self._finish(play, f"episode {play.id} was interrupted: {why}")
            except RuntimeError:
                log.exception("episode %s: its record could not be written", play.id)

    def _finish(self, play: _Play, detail: str | None, returned: float | None = None) -> None:
        """Record the ended episode (its status claimed by :meth:`_Play.end`).

        Raises:
            RuntimeError: the record could not be written (the message says why).
        """
        view = play.view
        entry: dict[str, Any] = {
            "id": play.id,
            "status": play.status,
            **play.spec.as_dict(),
            "family_seed": self._shared.families.seed,
            "seats": {
                a: "client" if a == view.seat else "reference" for a in view.env.possible_agents
            },
            "returns": {view.seat: play.returned if returned is None else returned},
            "abandoned": [],
            "started": play.started,
            "finished": utc_now(),
        }
        try:
            entry["record"] = view.record()
        except Exception as exc:
            entry["record"] = None
            raised = f"record() raised {type(exc).__name__}: {exc}"
            detail = f"{detail}; {raised}" if detail else raised
            if entry["status"] == "finished":
                entry["status"] = "failed"
        if detail:
            entry["error"] = detail
        try:
            with as_client(play.client):  # whatever thread ends it, the record is the client's
                self._shared.store.append(entry)
        except Exception as exc:
            log.exception("episode %s: its record could not be written", play.id)
            raise RuntimeError(
                f"episode {play.id} ended ({entry['status']}) but its record could not be "
                f"written ({type(exc).__name__}: {exc}); it is lost"
            ) from exc


def _sendable(value: Any) -> Any:
    """Plain JSON ``value`` that OpenEnv can send: a lone surrogate becomes U+FFFD.

    OpenEnv's replies are pydantic's JSON, which refuses lone surrogates (a
    client may send one); the episode's record keeps the text as it was.
    """
    if isinstance(value, str):
        return value if value.isascii() else _SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {_sendable(key): _sendable(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_sendable(item) for item in value]
    return value


def openenv_app(
    shared: SingleSeat, *, max_sessions: int = 64, idle_seconds: float | None = None
) -> Any:
    """OpenEnv's FastAPI app serving :class:`SeatEnvironment`, ``max_sessions`` sockets at once.

    A session without a message for ``idle_seconds`` is ended (None: never),
    so that idle clients cannot hold every session; OpenEnv's reaper does it,
    started by the app's ``on_startup`` handlers (a mounting app runs them).
    """
    app = create_app(
        functools.partial(SeatEnvironment, shared),
        SeatAction,
        SeatObservation,
        env_name="llm-envs",
        concurrency_config=ConcurrencyConfig(
            max_concurrent_envs=max_sessions, session_timeout=idle_seconds
        ),
    )
    # OpenEnv's HTTP routes let an environment's exception through: its error
    # middleware answers 500 and raises again, past the mounting app's
    # handlers. A refusal is the client's to read, with its status, as on the
    # server's own routes.
    app.add_exception_handler(ServeError, _refused)
    app.add_exception_handler(ValueError, _refused)
    return _QuietClose(app)


async def _refused(request: Any, exc: Exception) -> Any:
    """A refusal as JSON with its own status (422 for a bad value)."""
    status = exc.status if isinstance(exc, ServeError) else 422
    return JSONResponse({"detail": str(exc)}, status_code=status)


Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


class _QuietClose:
    """OpenEnv's app, minus one traceback per socket.

    openenv-core 0.3.0 closes a WebSocket its client has already closed, and
    uvicorn reports that as an error of the application; the session itself
    ended cleanly.
    """

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self.app(scope, receive, send)
        except WebSocketDisconnect:
            if scope["type"] != "websocket":
                raise
