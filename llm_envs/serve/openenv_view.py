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
seat was paid since its previous action. A finished episode goes to the
records like any other; one the client leaves unfinished is dropped (no other
client waits on it).

OpenEnv serves episodes over its WebSocket (``/ws``, what its clients use);
its HTTP ``/reset`` and ``/step`` are stateless, one fresh environment per
request, as in every OpenEnv server.
"""

from __future__ import annotations

import functools
import json
import uuid
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

try:
    from openenv.core.env_server import (  # type: ignore[import-untyped]
        Action,
        Environment,
        Observation,
        State,
        create_app,
    )
    from openenv.core.env_server.types import EnvironmentMetadata  # type: ignore[import-untyped]
except ModuleNotFoundError as missing:  # an install without the serve extra
    raise ModuleNotFoundError(
        f"the episode server needs openenv-core's server, which needs {missing.name!r}: "
        'pip install "llm-envs[serve]" && pip install --no-deps openenv-core==0.3.0',
        name=missing.name,
    ) from missing
from pydantic import Field, StrictStr, ValidationError
from starlette.websockets import WebSocketDisconnect

import llm_envs
from llm_envs.seats import SeatView, family_seat
from llm_envs.serve.errors import Invalid
from llm_envs.serve.families import Defaults, EpisodeSpec, Families, resolve
from llm_envs.serve.protocol import EpisodeRequest, dumps, validation_message
from llm_envs.serve.store import EpisodeStore, utc_now

__all__ = ["SeatAction", "SeatEnvironment", "SeatObservation", "SingleSeat", "openenv_app"]

_RESET_SHAPE = (
    '{"seed": 0, "problem": 0, "seat": "agent_0"} (and env, env_kwargs, task, task_kwargs)'
)


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
        store: where finished episodes go.
    """

    defaults: Defaults
    families: Families
    store: EpisodeStore


class SeatEnvironment(Environment):
    """One seat of a family's evaluation episode; the family's reference players take the rest.

    Args:
        shared: the server's defaults, families and records.
    """

    SUPPORTS_CONCURRENT_SESSIONS = True  # each session its own view; families are shared read-only

    def __init__(self, shared: SingleSeat) -> None:
        super().__init__()
        self._shared = shared
        self._view: SeatView | None = None
        self._spec: EpisodeSpec | None = None
        self._state = State()
        self._return = 0.0
        self._started = ""
        self._max_turns = 0

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **settings: Any
    ) -> SeatObservation:
        """Start an episode with the client in one seat (see the module docstring).

        Raises:
            ValueError: unknown settings or a bad value, or an ``episode_id`` taken.
            NotFound: an unknown env.
            Invalid: a seat the env does not have, settings the family refuses, or
                a family without reference players (the message says why).
        """
        try:
            request = SingleSeatRequest.model_validate({"seed": seed or 0, **settings})
        except ValidationError as exc:
            raise ValueError(validation_message(exc.errors(), _RESET_SHAPE)) from exc
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
        self._view, self._spec, self._return = view, spec, 0.0
        self._max_turns = int(family.max_agent_turns)
        self._started = utc_now()
        self._state = State(
            episode_id=episode_id or uuid.uuid4().hex, step_count=0, seat=seat, **spec.as_dict()
        )
        if view.done:
            self._finish()
        return self._observation(observation, info, None, truncated=False)

    def step(
        self, action: SeatAction, timeout_s: float | None = None, **kwargs: Any
    ) -> SeatObservation:
        """Act for the seat; the reference players move until it must act again or it is over.

        Raises:
            RuntimeError: before ``reset``, or after the episode ended.
        """
        if self._view is None:
            raise RuntimeError(f"reset the episode before stepping: reset({_RESET_SHAPE})")
        observation, reward, _, truncated, info = self._view.step(action.text)
        self._return += reward
        self._state.step_count += 1
        if self._view.done:
            self._finish()
        return self._observation(observation, info, reward, truncated)

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
        self, observation: Any, info: Any, reward: float | None, truncated: bool
    ) -> SeatObservation:
        view = self._view
        assert view is not None
        messages = observation.get("messages", []) if isinstance(observation, dict) else []
        return SeatObservation(
            messages=list(messages),
            info=json.loads(dumps(info or {})),  # plain JSON, whatever the env put in
            seat=view.seat,
            episode_id=self._state.episode_id,
            done=view.done,
            reward=reward,
            truncated=bool(truncated),
            max_turns=self._max_turns,
        )

    def _finish(self) -> None:
        """Record the finished episode."""
        view, spec = self._view, self._spec
        assert view is not None and spec is not None
        self._shared.store.append(
            {
                "id": self._state.episode_id,
                "status": "finished",
                **spec.as_dict(),
                "family_seed": self._shared.families.seed,
                "seats": {
                    a: "client" if a == view.seat else "reference" for a in view.env.possible_agents
                },
                "returns": {view.seat: self._return},
                "abandoned": [],
                "started": self._started,
                "finished": utc_now(),
                "record": view.record(),
            }
        )


def openenv_app(shared: SingleSeat, *, max_sessions: int = 64) -> Any:
    """OpenEnv's FastAPI app serving :class:`SeatEnvironment`, ``max_sessions`` sockets at once."""
    app = create_app(
        functools.partial(SeatEnvironment, shared),
        SeatAction,
        SeatObservation,
        env_name="llm-envs",
        max_concurrent_envs=max_sessions,
    )
    return _QuietClose(app)


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
