"""With a token, every route, socket and the OpenEnv view take requests that carry it only.

The routes are read from the app itself, mounted apps included, so a route
added later is checked without a line here. Beyond loopback the server does
not start without a token.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
from collections.abc import Iterator

import httpx
import pytest
from openenv.core import GenericEnvClient
from starlette.routing import Mount, Route, WebSocketRoute
from starlette.testclient import TestClient
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from llm_envs.serve.__main__ import main
from llm_envs.serve.app import ServeSettings, build_app, serving
from llm_envs.serve.guard import CLOSED_PATHS, TOKEN_VARIABLE, check_exposure
from llm_envs.serve.rendezvous import ServerCoordinator
from tests.serve.conftest import debate_settings

TOKEN = "s3cret/with:odd%chars"
BEARER = {"Authorization": f"Bearer {TOKEN}"}


def routes(app, prefix: str = "") -> Iterator[tuple[str, str]]:
    """Every (kind, path) the app answers: HTTP methods and WebSockets, mounts descended.

    A route of a kind not known here fails the test, so none is skipped unseen.
    """
    for route in app.routes:
        if isinstance(route, WebSocketRoute):
            yield "WS", prefix + route.path
        elif isinstance(route, Route):
            for method in sorted(route.methods or ()):
                yield method, prefix + route.path
        elif isinstance(route, Mount):
            inner = route.app
            while not hasattr(inner, "routes"):  # a wrapper around the mounted app
                inner = inner.app
            found = list(routes(inner, prefix + route.path))
            assert found, f"the app mounted at {route.path} shows no routes"
            yield from found
        elif hasattr(route, "original_router"):  # FastAPI's include_router, as it keeps it
            yield from routes(route.original_router, prefix + route.include_context.prefix)
        else:
            raise AssertionError(f"a route of an unknown kind, {route!r}: teach routes() it")


def concrete(path: str) -> str:
    return re.sub(r"\{[^}]+\}", "x", path)


@pytest.fixture(scope="module")
def app():
    return build_app(debate_settings(token=TOKEN))


@pytest.fixture(scope="module")
def guarded(app):
    from llm_envs.serve.app import serving_app

    with serving_app(app) as url:
        yield url


def test_the_routes_are_found(app):
    found = set(routes(app))
    for expected in [
        ("POST", "/episodes"),
        ("WS", "/episodes/{episode_id}/seats/{seat}/ws"),
        ("POST", "/rendezvous"),
        ("GET", "/openapi.json"),
        ("WS", "/openenv/ws"),
        ("WS", "/openenv/mcp"),
        ("POST", "/openenv/step"),
    ]:
        assert expected in found


def test_every_http_route_is_401_without_the_token_but_health(app, guarded):
    answers = {}
    with httpx.Client(base_url=guarded) as client:
        for method, path in routes(app):
            if method == "WS":
                continue
            without = client.request(method, concrete(path))
            wrong = client.request(method, concrete(path), headers={"Authorization": "Bearer x"})
            given = client.request(method, concrete(path), headers=BEARER)
            answers[method, path] = (without.status_code, wrong.status_code, given.status_code)
            if without.status_code == 401 and method != "HEAD":
                assert "send the header" in without.json()["detail"]
                assert without.headers["www-authenticate"] == "Bearer"
    for (method, path), (without, wrong, given) in answers.items():
        if path == "/health":
            assert without == wrong == given == 200
        else:
            assert (without, wrong) == (401, 401), (method, path)
            assert given != 401, (method, path)


async def handshake(url: str, headers: dict[str, str] | None) -> int:
    try:
        async with connect(url, additional_headers=headers):
            return 101
    except InvalidStatus as refused:
        return refused.response.status_code


def test_every_socket_is_401_without_the_token(app, guarded):
    base = guarded.replace("http://", "ws://")
    sockets = [concrete(path) for kind, path in routes(app) if kind == "WS"]
    assert len(sockets) >= 3
    for path in sockets:
        assert asyncio.run(handshake(base + path, None)) == 401
        assert asyncio.run(handshake(base + path, {"Authorization": "Bearer x"})) == 401
        opened = 404 if path in CLOSED_PATHS else 101  # OpenEnv's MCP sessions: not served
        assert asyncio.run(handshake(base + path, BEARER)) == opened


def test_a_client_without_headers_sends_the_token_in_the_url(guarded):
    host = guarded.removeprefix("http://")
    quoted = httpx.URL(f"http://token:{TOKEN.replace('%', '%25').replace('/', '%2F')}@{host}")
    with GenericEnvClient(base_url=f"{quoted}/openenv").sync() as env:
        result = env.reset(seed=0, seat="agent_0")
    assert result.observation["seat"] == "agent_0"
    basic = base64.b64encode(f"anyone:{TOKEN}".encode()).decode()
    health = httpx.get(f"{guarded}/envs", headers={"Authorization": f"Basic {basic}"})
    assert health.status_code == 200


def test_the_coordinator_sends_the_token(guarded, monkeypatch):
    async def meet(**kwargs):
        coordinator = ServerCoordinator(guarded, **kwargs)
        try:
            return (await coordinator.meet("k", "agent_0")).seat
        finally:
            await coordinator.close()

    with pytest.raises(Exception, match="this server takes requests with its token only"):
        asyncio.run(meet())
    assert asyncio.run(meet(token=TOKEN)) == "agent_0"
    monkeypatch.setenv(TOKEN_VARIABLE, TOKEN)
    assert asyncio.run(meet()) == "agent_0"


def test_a_socket_message_over_the_cap_closes_1009_on_any_asgi_server():
    # The guard's own check, where no uvicorn bounds the frames (Starlette's test client).
    with TestClient(build_app(debate_settings(max_body_bytes=1000))) as client:
        episode = client.post("/episodes", json={}).json()["id"]
        with client.websocket_connect(f"/episodes/{episode}/seats/agent_0/ws") as socket:
            assert socket.receive_json()["type"] == "joined"
            socket.send_text(json.dumps({"type": "act", "text": "x" * 1000}))
            received = [socket.receive()]
            while received[-1]["type"] != "websocket.close":
                received.append(socket.receive())
    assert received[-1] == {
        "type": "websocket.close",
        "code": 1009,
        "reason": "message over 1000 bytes (--max-body-bytes)",
    }


@pytest.mark.parametrize("host", ["0.0.0.0", "10.0.0.1", "example.org", "::"])
def test_beyond_loopback_the_server_needs_a_token(host, capsys, monkeypatch):
    monkeypatch.delenv(TOKEN_VARIABLE, raising=False)
    with pytest.raises(SystemExit) as exited:
        main(["--host", host, "--env", "debate"], prog="llm-envs serve")
    assert exited.value.code == 2
    assert f"--host {host} listens beyond this machine" in capsys.readouterr().err
    with (
        pytest.raises(ValueError, match="give clients a secret with --token"),
        serving(ServeSettings(), host=host),
    ):
        pass
    check_exposure(host, TOKEN)  # with one it may


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1", "127.0.0.2"])
def test_loopback_needs_no_token(host):
    check_exposure(host, None)
