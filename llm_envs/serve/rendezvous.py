"""Seats that name the same key meet in one episode: the rendezvous, and the players' side of it.

The meeting itself (keys to episodes on a hub, in order) is
:class:`~llm_envs.serve.meetings.Rendezvous`; this module is its public face:
the episode server's route ``POST /rendezvous`` (:func:`rendezvous_routes`,
:class:`RendezvousRequest`), and the two ways a player reaches a rendezvous,
each a :class:`Coordinator` whose one method, :meth:`~Coordinator.meet`,
returns the seat's :class:`SeatSession` (:mod:`llm_envs.serve.coordinators`):

* :class:`InProcessCoordinator`: a hub of its own, in the player's process and
  event loop (no network); every seat of an episode must be played in that
  process;
* :class:`ServerCoordinator`: an episode server (``python -m llm_envs.serve``)
  over HTTP, ``POST /rendezvous``; seats in any process on any machine meet.

Example:
    >>> import asyncio
    >>> async def two_seats():
    ...     coordinator = InProcessCoordinator()
    ...     episode = {"env": "debate", "env_kwargs": {"num_agents": 2, "max_rounds": 1}}
    ...     first = await coordinator.meet("k", "agent_0", episode)
    ...     second = await coordinator.meet("k", "agent_1", episode)
    ...     turn = await first.message()
    ...     await first.act("no tags", turn["turn"])  # a broken answer ends the debate
    ...     ends = [await first.message(), await second.message()]
    ...     await coordinator.close()
    ...     return first.episode == second.episode, [(m["type"], m["return"]) for m in ends]
    >>> asyncio.run(two_seats())
    (True, [('end', -1.0), ('end', 0.0)])

This module imports no web framework at import time; :func:`rendezvous_routes`
imports fastapi and :class:`ServerCoordinator` httpx when used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr

from llm_envs.serve.coordinators import (
    Coordinator,
    InProcessCoordinator,
    SeatSession,
    ServerCoordinator,
)
from llm_envs.serve.errors import ServeError
from llm_envs.serve.families import Defaults, resolve
from llm_envs.serve.meetings import MAX_OPEN, Meeting, Rendezvous
from llm_envs.serve.protocol import EpisodeRequest, dumps

if TYPE_CHECKING:
    from fastapi import APIRouter

__all__ = [
    "MAX_OPEN",
    "Coordinator",
    "InProcessCoordinator",
    "Meeting",
    "Rendezvous",
    "RendezvousRequest",
    "SeatSession",
    "ServerCoordinator",
    "rendezvous_routes",
]


class RendezvousRequest(BaseModel):
    """``POST /rendezvous``: the seat, the key of its episode, and the episode's settings.

    Seats that name the same ``key`` meet in one episode; they must name the
    same ``episode`` settings (a 409 says which differ). ``family_seed``, when
    given, must be the server's ``--seed`` (which problems there are), so a
    data set built for another seed is refused instead of playing other
    problems.
    """

    model_config = ConfigDict(extra="forbid")

    key: StrictStr = Field(
        min_length=1, max_length=1024, description="the episode's key: seats naming it meet"
    )
    seat: StrictStr = Field(max_length=200, description="the seat to play, e.g. agent_0")
    episode: EpisodeRequest = Field(
        default_factory=EpisodeRequest, description="the episode's settings, as POST /episodes"
    )
    family_seed: StrictInt | None = Field(
        default=None, description="the server's --seed the data set was built for"
    )


def rendezvous_routes(rendezvous: Rendezvous, defaults: Defaults | None = None) -> APIRouter:
    """The route ``POST /rendezvous``: :class:`RendezvousRequest` in, :meth:`Meeting.as_dict` out.

    The episode server's app includes it (``app.include_router(...)``); the
    request's ``episode`` fields left out take ``defaults``, as in ``POST /episodes``.
    Refusals are the hub's :mod:`~llm_envs.serve.errors`, ``{"detail": message}``
    with their status.
    """
    from fastapi import APIRouter, Response

    router = APIRouter()
    fallback = defaults or Defaults()

    @router.post("/rendezvous")
    async def meet(request: RendezvousRequest) -> Any:
        try:
            spec = resolve(request.episode, fallback)
            meeting = await rendezvous.meet(request.key, request.seat, spec, request.family_seed)
        except ServeError as exc:
            return Response(dumps({"detail": str(exc)}), exc.status, media_type="application/json")
        return Response(dumps(meeting.as_dict()), media_type="application/json")

    return router
