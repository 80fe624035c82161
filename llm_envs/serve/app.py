"""The episode server's web app: HTTP and WebSocket routes over the hub, and the OpenEnv view.

Routes (``docs/serve.md`` has the protocol with examples):

==========================================  ============================================
``GET  /health``                            running and recorded episode counts
``GET  /envs``                              the registered envs and their tasks
``POST /episodes``                          create an episode (:class:`EpisodeRequest`)
``GET  /episodes/{id}``                     a running episode's seats, or a finished record
``POST /episodes/{id}/seats/{seat}/join``   take a seat; the reply holds its token
``GET  /episodes/{id}/seats/{seat}/turn``   the seat's current message (``?wait=`` seconds)
``POST /episodes/{id}/seats/{seat}/act``    act: ``{"text": ...}``
``WS   /episodes/{id}/seats/{seat}/ws``     join and play the seat on one socket
``/openenv/...``                            one seat vs reference players, OpenEnv's protocol
``POST /rendezvous``                        seats naming one key meet in an episode
==========================================  ============================================

Every route, socket and the OpenEnv view pass :class:`~llm_envs.serve.guard.Guard`
first: the server's token when it has one (``GET /health`` alone answers
without it), and ``--max-body-bytes`` on every body and WebSocket message.

Seat requests carry the seat's token in the ``X-Seat-Token`` header (a
socket's ``?token=`` rejoins after a reconnect). Refusals are JSON
``{"detail": message}`` with the hub's status (404 unknown, 409 out of turn
or taken, 422 malformed, 403 without the seat's token, 401 without the server's,
413 too large, 429 too many sockets on a seat); on a socket they are ``error``
messages, and a refused join closes it with code 4000 + status.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any

import uvicorn
from fastapi import Body, FastAPI, Header, Query, Request, WebSocket, WebSocketDisconnect
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError

import llm_envs
from llm_envs.registration import family_class, family_names
from llm_envs.sandbox.fair import tally
from llm_envs.serve.errors import ServeError
from llm_envs.serve.families import Defaults, Families, resolve
from llm_envs.serve.guard import Guard, check_exposure, uvicorn_limits
from llm_envs.serve.hub import MAX_HELD_CHARS, HeldChars, Hub, Seat, quarter
from llm_envs.serve.protocol import (
    ActMessage,
    ActRequest,
    EpisodeRequest,
    Message,
    dumps,
    error,
    validation_message,
)
from llm_envs.serve.rendezvous import Rendezvous, rendezvous_routes
from llm_envs.serve.stopping import interrupting_on_exit
from llm_envs.serve.store import MAX_RECORDS_BYTES, EpisodeStore

__all__ = ["ServeSettings", "build_app", "serving", "serving_app"]

_FINAL = frozenset({"end", "abandoned", "error"})  # a seat's socket closes after these
MAX_SEAT_SOCKETS = 4
"""The most sockets open on one seat at once (a client reconnecting overlaps its old one)."""
_SHAPES = {
    "/rendezvous": '{"key": "...", "seat": "agent_0", "episode": {...}}',
    "/act": '{"text": "..."} (and "turn": n to refuse a stale turn)',
    "/episodes": '{"env": "debate", "env_kwargs": {}, "task": "arithmetic", "problem": 0, '
    '"seed": 0}',
}


class _TooManySockets(ServeError):
    """More sockets on one seat than :data:`MAX_SEAT_SOCKETS`."""

    status = 429


@dataclass(frozen=True)
class ServeSettings:
    """How a server runs (``python -m llm_envs.serve`` builds it from its flags).

    Attributes:
        defaults: the env, env_kwargs, task and task_kwargs a request leaves out.
        seed: the families' seed (which problems there are).
        records: the directory of ``episodes.jsonl``; None keeps records in memory.
        max_records_bytes: the size of ``episodes.jsonl`` past which new
            episodes get 503 (the running ones still write theirs).
        seat_timeout: seconds a seat has to act once its turn begins.
        max_episodes: the most multi-seat episodes running at once.
        max_sessions: the most OpenEnv single-seat sessions at once.
        workers: threads that run environment steps (None: Python's default).
        token: the secret every request must carry (``Authorization: Bearer``);
            None serves anyone, and only on loopback (:func:`serving` refuses
            another host without one).
        max_body_bytes: the largest request body and WebSocket message taken (413,
            or close code 1009, past it).
        step_deadline: seconds one environment step may run before the episode
            ends for the seat that acted, as a timeout.
        max_connections: open connections past which a new one is answered 503
            and closed (None: the open-file limit less a reserve, so that records
            are written however many clients connect).
        max_connections_per_address: open connections of one client (an
            address, an IPv6 /48) past which its new one is answered 503 and
            closed (None: a quarter of ``max_connections``).
        max_held_chars: characters of actions the running episodes (the OpenEnv
            view's sessions' too) may hold together; an action past it gets 503
            until episodes end.
        max_episodes_per_client: episodes one client (their creator) runs at
            once (None: a quarter of ``max_episodes``); past it, 503.
        max_held_chars_per_client: what one client's episodes and sessions may
            hold of ``max_held_chars`` (None: a quarter of it); past it, 503.
        max_sessions_per_client: OpenEnv sessions one client holds at once (None: a
            quarter of ``max_sessions``); past it, the socket's handshake gets 503.
    """

    defaults: Defaults = field(default_factory=Defaults)
    seed: int = 0
    records: str | None = None
    max_records_bytes: int = MAX_RECORDS_BYTES
    seat_timeout: float = 300.0
    max_episodes: int = 1024
    max_sessions: int = 64
    workers: int | None = None
    token: str | None = None
    max_body_bytes: int = 1 << 20
    step_deadline: float = 60.0
    max_connections: int | None = None
    max_connections_per_address: int | None = None
    max_held_chars: int = MAX_HELD_CHARS
    max_episodes_per_client: int | None = None
    max_held_chars_per_client: int | None = None
    max_sessions_per_client: int | None = None


class _JSON(JSONResponse):
    """JSON whatever the env put in an info (numpy values included)."""

    def render(self, content: Any) -> bytes:
        return dumps(content).encode()


def build_app(settings: ServeSettings) -> FastAPI:
    """The server's app: the hub's routes, and the OpenEnv single-seat view under ``/openenv``.

    The default env's family is built and the records are read back here,
    before the app serves a request. Every route, socket and mounted app,
    added now or later, passes :class:`~llm_envs.serve.guard.Guard` first.

    Raises:
        ServeError: default settings the env refuses (the family's message).
    """
    families = Families(seed=settings.seed)
    if settings.defaults.env is not None:  # bad flags fail at start-up, not at the first request
        families.family(resolve(EpisodeRequest(), settings.defaults))
    store = EpisodeStore(settings.records, max_bytes=settings.max_records_bytes)
    hub = Hub(
        families,
        store,
        seat_timeout=settings.seat_timeout,
        max_episodes=settings.max_episodes,
        workers=settings.workers,
        step_deadline=settings.step_deadline,
        max_held_chars=settings.max_held_chars,
        max_episodes_per_client=settings.max_episodes_per_client,
        max_held_chars_per_client=settings.max_held_chars_per_client,
    )

    openenv = _openenv_view(settings, families, store, hub.held)
    # A mounted app's lifespan never runs; the OpenEnv view's session reaper starts here.
    view_router = getattr(getattr(openenv, "app", None), "router", None)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        for start in getattr(view_router, "on_startup", ()):
            await start()
        with interrupting_on_exit(hub.interrupt):  # seats hear of it before sockets close
            yield
        for stop in getattr(view_router, "on_shutdown", ()):
            await stop()
        await hub.close()

    app = FastAPI(
        title="llm-envs episode server",
        version=llm_envs.__version__,
        lifespan=lifespan,
        default_response_class=_JSON,
    )
    app.state.hub = hub
    app.state.settings = settings
    sessions = settings.max_sessions_per_client or quarter(settings.max_sessions)
    app.add_middleware(
        Guard,
        token=settings.token,
        max_body_bytes=settings.max_body_bytes,
        max_sessions_per_client=sessions,
    )
    sockets: dict[tuple[str, str], int] = {}  # open sockets per (episode, seat)

    @app.exception_handler(ServeError)
    async def refused(request: Request, exc: ServeError) -> _JSON:
        return _JSON({"detail": str(exc)}, status_code=exc.status)

    @app.exception_handler(Exception)
    async def crashed(request: Request, exc: Exception) -> _JSON:
        # The server's own fault (or a missing data set): say what broke, not just "500".
        return _JSON({"detail": f"internal error: {type(exc).__name__}: {exc}"}, status_code=500)

    @app.exception_handler(RequestValidationError)
    async def malformed(request: Request, exc: RequestValidationError) -> _JSON:
        path = request.url.path
        shape = next((s for end, s in _SHAPES.items() if path.endswith(end)), "what /docs shows")
        return _JSON({"detail": validation_message(exc.errors(), shape)}, status_code=422)

    @app.get("/health")
    async def health() -> _JSON:
        return _JSON({"status": "ok", "running": hub.running, "recorded": len(store)})

    @app.get("/envs")
    async def envs() -> _JSON:
        listed = [
            {
                "env": name,
                "tasks": list(family_class(name).tasks),
                "default": name == settings.defaults.env,
            }
            for name in family_names()
        ]
        return _JSON({"envs": listed})

    @app.post("/episodes", status_code=201)
    async def create(request: Annotated[EpisodeRequest | None, Body()] = None) -> _JSON:
        spec = resolve(request or EpisodeRequest(), settings.defaults)
        episode = await hub.create(spec)
        return _JSON(episode.status(), status_code=201)

    @app.get("/episodes/{episode_id}")
    async def describe(episode_id: str) -> _JSON:
        return _JSON(await hub.describe(episode_id))

    @app.post("/episodes/{episode_id}/seats/{seat}/join")
    async def join(
        episode_id: str, seat: str, x_seat_token: Annotated[str | None, Header()] = None
    ) -> _JSON:
        token = await hub.join(episode_id, seat, x_seat_token)
        return _JSON(_joined(hub, episode_id, seat, token))

    @app.get("/episodes/{episode_id}/seats/{seat}/turn")
    async def turn(
        episode_id: str,
        seat: str,
        wait: Annotated[float, Query(ge=0, le=60)] = 0.0,
        x_seat_token: Annotated[str | None, Header()] = None,
    ) -> _JSON:
        return _JSON(await hub.poll(episode_id, seat, x_seat_token, wait))

    @app.post("/episodes/{episode_id}/seats/{seat}/act")
    async def act(
        episode_id: str,
        seat: str,
        action: ActRequest,
        x_seat_token: Annotated[str | None, Header()] = None,
    ) -> _JSON:
        return _JSON(await hub.act(episode_id, seat, x_seat_token, action.text, action.turn))

    @app.websocket("/episodes/{episode_id}/seats/{seat}/ws")
    async def seat_socket(
        websocket: WebSocket, episode_id: str, seat: str, token: str | None = None
    ) -> None:
        await websocket.accept()
        try:
            token = await hub.join(episode_id, seat, token)
            _, place = hub.seat(episode_id, seat, token)
            if sockets.get((episode_id, seat), 0) >= MAX_SEAT_SOCKETS:
                raise _TooManySockets(
                    f"seat {seat!r} of episode {episode_id} has {MAX_SEAT_SOCKETS} sockets open, "
                    "the most it may: close one before opening another"
                )
        except ServeError as exc:
            await _send(websocket, error(exc.status, str(exc)))
            await _close(websocket, 4000 + exc.status)
            return
        tally(sockets, (episode_id, seat), 1)
        try:
            await _send(websocket, _joined(hub, episode_id, seat, token))
            await _play(websocket, hub, episode_id, place, token)
        except WebSocketDisconnect:
            pass  # the client left; its seat stays its own (rejoin with the token)
        finally:
            tally(sockets, (episode_id, seat), -1)

    # Seats that name an episode key instead of an id meet there (the verl agent loop).
    app.include_router(rendezvous_routes(Rendezvous(hub), settings.defaults))
    app.mount("/openenv", openenv)
    return app


def _openenv_view(
    settings: ServeSettings, families: Families, store: EpisodeStore, held: HeldChars
) -> Any:
    """The OpenEnv single-seat view; without openenv-core, an app that says how to install it.

    openenv-core is installed apart (``--no-deps``: it declares a web UI the
    server never uses), so a server without it still serves every other
    route; only ``/openenv`` answers 501 naming the install line.
    """
    try:
        from llm_envs.bridges.openenv import SingleSeat, openenv_app
    except ModuleNotFoundError as missing:
        return _missing_view(str(missing))
    shared = SingleSeat(
        settings.defaults,
        families,
        store,
        step_deadline=settings.step_deadline,
        workers=settings.max_sessions,
        held=held,
    )
    return openenv_app(
        shared, max_sessions=settings.max_sessions, idle_seconds=settings.seat_timeout
    )


def _missing_view(reason: str) -> Any:
    """An ASGI app answering every request 501 (a socket: closed with 4501) with ``reason``."""

    async def missing(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            await _JSON({"detail": f"the OpenEnv view is not available: {reason}"}, 501)(
                scope, receive, send
            )
        elif scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 4501, "reason": reason[:120]})

    return missing


@contextlib.contextmanager
def serving(settings: ServeSettings, host: str = "127.0.0.1", port: int = 0) -> Iterator[str]:
    """Run a server in a background thread while the block runs; yield its base URL.

    For notebooks, tests and scripts that play against a server of their own
    (port 0: any free port); a deployment runs ``python -m llm_envs.serve``.

    Raises:
        ServeError: default settings the env refuses.
        ValueError: a ``host`` beyond loopback without ``settings.token``.
        RuntimeError: the server did not start within a minute.
    """
    check_exposure(host, settings.token)
    with serving_app(build_app(settings), host, port) as url:
        yield url


@contextlib.contextmanager
def serving_app(app: Any, host: str = "127.0.0.1", port: int = 0) -> Iterator[str]:
    """:func:`serving` for an app already built (and extended, say with more routes).

    Raises:
        ValueError: a ``host`` beyond loopback, and an app without a token.
        RuntimeError: the server did not start within a minute.
    """
    settings = getattr(getattr(app, "state", None), "settings", None) or ServeSettings()
    check_exposure(host, settings.token)
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        **uvicorn_limits(
            settings.max_body_bytes,
            settings.max_connections,
            settings.max_connections_per_address,
        ),
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="llm-envs-serve", daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            raise RuntimeError(f"the server on {host}:{port} did not start; is the port taken?")
        time.sleep(0.01)
    bound = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://{host}:{bound}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def _joined(hub: Hub, episode_id: str, seat: str, token: str) -> Message:
    episode, _ = hub.seat(episode_id, seat, token)
    return {
        "type": "joined",
        "episode": episode_id,
        "seat": seat,
        "token": token,
        "seats": list(episode.seats),
    }


async def _play(websocket: WebSocket, hub: Hub, episode_id: str, place: Seat, token: str) -> None:
    """Push the seat's messages as they come; take its actions; close after its last message."""
    sent = place.version
    if place.message is not None:
        await _send(websocket, place.message)
        if place.message["type"] in _FINAL:
            await _close(websocket, 1000)
            return
    incoming = asyncio.ensure_future(websocket.receive())
    change = asyncio.ensure_future(place.changed(sent))
    try:
        while True:
            done, _ = await asyncio.wait({incoming, change}, return_when=asyncio.FIRST_COMPLETED)
            if incoming in done:
                received = incoming.result()
                if received["type"] == "websocket.disconnect":
                    return
                await _send(websocket, await _reply(hub, episode_id, place.name, token, received))
                incoming = asyncio.ensure_future(websocket.receive())
            if change not in done:
                continue
            sent = place.version
            message = place.message
            if message is not None:
                await _send(websocket, message)
                if message["type"] in _FINAL:
                    await _close(websocket, 1000)
                    return
            change = asyncio.ensure_future(place.changed(sent))
    finally:
        incoming.cancel()
        change.cancel()


async def _reply(
    hub: Hub, episode_id: str, seat: str, token: str, received: Mapping[str, Any]
) -> Message:
    """The answer to one message from a seat's client: ``accepted``, or an ``error``."""
    raw = received.get("text")
    if raw is None:
        raw = (received.get("bytes") or b"").decode("utf-8", "replace")
    try:
        message = ActMessage.model_validate(json.loads(raw))
    except ValidationError as exc:
        shape = '{"type": "act", "text": "..."}'
        return error(422, validation_message(exc.errors(), shape))
    except ValueError as exc:
        return error(422, f'not JSON ({exc}); send {{"type": "act", "text": "..."}}')
    try:
        return await hub.act(episode_id, seat, token, message.text, message.turn)
    except ServeError as exc:
        return error(exc.status, str(exc))


async def _send(websocket: WebSocket, message: Message) -> None:
    await websocket.send_text(dumps(message))


async def _close(websocket: WebSocket, code: int) -> None:
    with contextlib.suppress(RuntimeError, WebSocketDisconnect):  # closed by the client already
        await websocket.close(code=code)
