"""One client's many episodes cannot stall another's: step threads and sandbox workers take turns.

An episode's steps count as its creator's, the peer address the server's
door saw (never a header); queued steps are taken round robin between
clients, and a sandbox run a step makes waits for a worker in that client's
turn (``tests/sandbox/test_fair_turns.py``).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import httpx
import pytest
from openenv.core import GenericEnvClient

from llm_envs.sandbox import Sandbox
from llm_envs.sandbox.fair import as_client, current_client
from llm_envs.serve.guard import Guard
from llm_envs.serve.pool import DeadlinePool, Overdue
from tests.serve.conftest import debate_settings, serving
from tests.serve.sleepy import CLIENTS, NAME, registered


@pytest.fixture
def sleepy() -> Iterator[None]:
    CLIENTS.clear()
    with registered():
        yield


def test_queued_calls_are_taken_round_robin_between_clients():
    """A queues five calls on one thread, then B one: B's runs next, not last."""
    order: list[str] = []
    gate = threading.Event()

    def call(name: str) -> None:
        gate.wait(10)
        order.append(f"{name}@{current_client()}")

    async def scenario() -> None:
        pool = DeadlinePool(1, max_stuck=1, name="fair-test")
        with as_client("a"):
            flood = [pool.submit(10, call, f"a{i}") for i in range(5)]
        await asyncio.sleep(0.1)  # a0 runs; a1..a4 wait
        with as_client("b"):
            honest = pool.submit(10, call, "b0")
        gate.set()
        await asyncio.gather(*flood, honest)
        pool.shutdown()

    asyncio.run(scenario())
    assert order == ["a0@a", "b0@b", "a1@a", "a2@a", "a3@a", "a4@a"]


def test_the_guard_sets_the_client_from_the_peer_address_not_a_header():
    seen: list[str] = []

    async def app(scope, receive, send) -> None:
        seen.append(current_client())
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def request(host: str) -> None:
        scope = {
            "type": "http",
            "path": "/x",
            "raw_path": b"/x",
            "query_string": b"",
            "headers": [(b"x-forwarded-for", b"10.9.9.9")],
            "client": (host, 5000),
        }

        async def receive():
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message) -> None:
            pass

        await Guard(app, token=None, max_body_bytes=100)(scope, receive, send)

    asyncio.run(request("10.0.0.7"))
    asyncio.run(request("2001:db8::1"))
    assert seen == ["10.0.0.7", "2001:db8::/48"]
    assert current_client() == "local"


def _client(url: str, source: str) -> httpx.Client:
    transport = httpx.HTTPTransport(local_address=source)
    return httpx.Client(base_url=url, timeout=30, transport=transport)


def test_an_episodes_steps_run_as_its_creator_whichever_client_acts(sleepy, tmp_path):
    with serving(debate_settings(records=str(tmp_path))) as url:
        with _client(url, "127.0.0.2") as creator:
            episode = creator.post("/episodes", json={"env": NAME}).json()["id"]
            tokens = {
                seat: creator.post(f"/episodes/{episode}/seats/{seat}/join").json()["token"]
                for seat in ("agent_0", "agent_1")
            }
        for seat, source in (("agent_0", "127.0.0.1"), ("agent_1", "127.0.0.3")):
            with _client(url, source) as player:
                acted = player.post(
                    f"/episodes/{episode}/seats/{seat}/act",
                    json={"text": "whoami"},
                    headers={"X-Seat-Token": tokens[seat]},
                )
                assert acted.status_code == 200, acted.text
        with (
            GenericEnvClient(base_url=f"{url}/openenv", message_timeout_s=30).sync() as env,
        ):
            env.reset(env=NAME, seat="agent_0")
            env.step({"text": "whoami"})
    assert CLIENTS == ["127.0.0.2", "127.0.0.2", "127.0.0.1"]


def test_a_step_past_its_deadline_stops_waiting_for_a_sandbox_worker():
    """Its thread leaves soon after the deadline instead of running a program nobody reads."""
    sleeper = "import time\ndef f():\n    time.sleep(8)\n    return 1"

    async def scenario(sandbox: Sandbox) -> tuple[int, bool]:
        pool = DeadlinePool(2, max_stuck=2, name="give-up-test")
        blocker = pool.submit(30, sandbox.run_tests, sleeper, ["assert f() == 1"])
        await asyncio.sleep(0.3)  # the blocker holds the only sandbox worker
        with pytest.raises(Overdue):
            await pool.run(0.3, sandbox.run_tests, "x = 1", ["assert x == 1"])
        stuck = pool.stuck
        waited = 0.0
        while pool.stuck and waited < 6:  # it gives up a second (GIVE_UP_GRACE) after its deadline
            await asyncio.sleep(0.1)
            waited += 0.1
        left_first = not pool.stuck and not blocker.done()
        await blocker
        pool.shutdown()
        return stuck, left_first

    with Sandbox(workers=1, timeout=30.0) as sandbox:
        stuck, left_first = asyncio.run(scenario(sandbox))
    assert stuck == 1 and left_first
