"""Each refusal has its HTTP status and a message that names the value and the fix."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from websockets.asyncio.client import connect

from llm_envs.serve.app import ServeSettings
from tests.serve.conftest import create, debate_settings, serving, ws_url

CREATE_REFUSALS = [
    (
        {"env": "chess"},
        404,
        "unknown env 'chess'; the registered ones are: debate, expert_iteration, code_collab, "
        "textarena",
    ),
    (
        {"env": "debate", "task": "chess"},
        422,
        "env 'debate' takes task default | arithmetic | gsm8k, got 'chess'",
    ),
    ({"env_kwargs": {"num_agents": 1}}, 422, "num_agents=1 is out of bounds for a client"),
    ({"env_kwargs": {"colour": "red"}}, 422, "env_kwargs 'colour' is not a setting a client"),
    ({"task_kwargs": {"bogus": 1}}, 422, "task_kwargs 'bogus' is not a setting a client may"),
    (
        {"task": "default", "task_kwargs": {"max_digits": 3}},
        422,
        "task_kwargs are settings of the arithmetic task, got {'max_digits': 3} with task=",
    ),
    ({"envkwargs": {}}, 422, 'envkwargs: Extra inputs are not permitted; send {"env": '),
    ({"problem": -1}, 422, "problem: Input should be greater than or equal to 0"),
    ({"seed": "7"}, 422, "seed: Input should be a valid integer"),
]


@pytest.mark.parametrize(("body", "status", "message"), CREATE_REFUSALS)
def test_create_refusals(debate_server, body, status, message):
    response = httpx.post(f"{debate_server}/episodes", json=body)
    assert response.status_code == status
    assert message in response.json()["detail"]


def test_an_env_is_named_where_there_is_no_default():
    with serving(ServeSettings()) as url:
        response = httpx.post(f"{url}/episodes", json={})
        listed = httpx.get(f"{url}/envs").json()["envs"]
    assert response.status_code == 422
    assert response.json()["detail"].startswith('name the env: {"env": "debate"}, one of debate,')
    assert [e["env"] for e in listed] == ["debate", "expert_iteration", "code_collab", "textarena"]


@pytest.fixture
def episode(debate_server):
    """A fresh debate whose agent_0 is joined: ``(client, id, agent_0's token)``."""
    with httpx.Client(base_url=debate_server) as client:
        episode_id = create(client)["id"]
        token = client.post(f"/episodes/{episode_id}/seats/agent_0/join").json()["token"]
        yield client, episode_id, token


def test_unknown_episode_and_seat_are_404(episode):
    client, episode_id, _ = episode
    missing = client.get("/episodes/nope")
    assert missing.status_code == 404
    assert missing.json()["detail"] == "no episode 'nope'; create one with POST /episodes"
    seat = client.post(f"/episodes/{episode_id}/seats/agent_9/join")
    assert seat.status_code == 404
    assert seat.json()["detail"] == (
        f"episode {episode_id} has no seat 'agent_9'; its seats are agent_0, agent_1, agent_2"
    )


def test_a_seat_joined_twice_is_409_and_its_token_rejoins(episode):
    client, episode_id, token = episode
    twice = client.post(f"/episodes/{episode_id}/seats/agent_0/join")
    assert twice.status_code == 409
    assert twice.json()["detail"] == (
        f"seat 'agent_0' of episode {episode_id} is already joined; join a free seat "
        "(agent_1, agent_2), or rejoin with the seat's token"
    )
    again = client.post(
        f"/episodes/{episode_id}/seats/agent_0/join", headers={"X-Seat-Token": token}
    )
    assert again.status_code == 200 and again.json()["token"] == token


def test_acting_out_of_turn_is_409(episode):
    client, episode_id, _ = episode
    token = client.post(f"/episodes/{episode_id}/seats/agent_1/join").json()["token"]
    response = client.post(
        f"/episodes/{episode_id}/seats/agent_1/act",
        json={"text": "my answer"},
        headers={"X-Seat-Token": token},
    )
    assert response.status_code == 409
    assert response.json()["detail"] == (
        f"it is not agent_1's turn in episode {episode_id}: waiting for agent_0; "
        "act after the seat's next turn message"
    )


@pytest.mark.parametrize(
    ("body", "headers", "status", "message"),
    [
        ({"text": "hi"}, {}, 403, "send the token its join returned in the X-Seat-Token header"),
        ({"text": "hi"}, {"X-Seat-Token": "guess"}, 403, "takes requests with its token only"),
        (
            {"txt": "hi"},
            None,
            422,
            'text: Field required; txt: Extra inputs are not permitted; send {"text": "..."}',
        ),
        ({"text": 5}, None, 422, "text: Input should be a valid string"),
        (
            {"text": "hi", "turn": 0},
            None,
            409,
            "turn 0 of seat 'agent_0' is over; its turn now is 1",
        ),
    ],
)
def test_act_refusals(episode, body, headers, status, message):
    client, episode_id, token = episode
    headers = {"X-Seat-Token": token} if headers is None else headers
    response = client.post(f"/episodes/{episode_id}/seats/agent_0/act", json=body, headers=headers)
    assert response.status_code == status
    assert message in response.json()["detail"]


def test_a_seat_nobody_joined_cannot_act(episode):
    client, episode_id, _ = episode
    response = client.post(f"/episodes/{episode_id}/seats/agent_2/act", json={"text": "x"})
    assert response.status_code == 409
    assert response.json()["detail"] == (
        f"seat 'agent_2' of episode {episode_id} is not joined; "
        f"POST /episodes/{episode_id}/seats/agent_2/join first"
    )


def test_any_text_is_an_action_the_env_scores(episode):
    client, episode_id, token = episode
    garbage = "</solution><<\x00 \u202e ]]>" * 50
    response = client.post(
        f"/episodes/{episode_id}/seats/agent_0/act",
        json={"text": garbage},
        headers={"X-Seat-Token": token},
    )
    assert response.status_code == 200
    record = client.get(f"/episodes/{episode_id}").json()
    assert record["returns"]["agent_0"] == -1.0  # a parse error: scored, not refused
    over = client.post(f"/episodes/{episode_id}/seats/agent_1/join")
    assert over.status_code == 409
    assert (
        over.json()["detail"]
        == f"episode {episode_id} is over; GET /episodes/{episode_id} for its record"
    )


def test_a_full_server_is_503():
    with serving(debate_settings(max_episodes=1)) as url, httpx.Client(base_url=url) as client:
        create(client)
        full = client.post("/episodes", json={})
    assert full.status_code == 503
    assert (
        "the server is full (max_episodes=1 running); retry when one ends" in full.json()["detail"]
    )


def test_socket_refusals_are_error_messages(debate_server):
    with httpx.Client(base_url=debate_server) as client:
        episode_id = create(client)["id"]

    async def talk():
        got = {}
        async with connect(ws_url(debate_server, episode_id, "agent_1")) as socket:
            assert json.loads(await socket.recv())["type"] == "joined"
            await socket.send("not json")
            got["not json"] = json.loads(await socket.recv())
            await socket.send(json.dumps({"type": "act", "txt": "x"}))
            got["malformed"] = json.loads(await socket.recv())
            await socket.send(json.dumps({"type": "act", "text": "x"}))
            got["out of turn"] = json.loads(await socket.recv())
            async with connect(ws_url(debate_server, episode_id, "agent_1")) as second:
                got["twice"] = json.loads(await second.recv())
                await second.wait_closed()
                got["twice closed"] = second.close_code
        async with connect(ws_url(debate_server, "nope", "agent_0")) as third:
            got["unknown"] = json.loads(await third.recv())
            await third.wait_closed()
            got["unknown closed"] = third.close_code
        return got

    got = asyncio.run(talk())
    assert got["not json"]["status"] == 422
    assert got["not json"]["detail"].startswith("not JSON (")
    assert got["malformed"] == {
        "type": "error",
        "status": 422,
        "detail": "text: Field required; txt: Extra inputs are not permitted; "
        'send {"type": "act", "text": "..."}',
    }
    assert got["out of turn"]["status"] == 409
    assert "it is not agent_1's turn" in got["out of turn"]["detail"]
    assert got["twice"]["status"] == 409 and got["twice closed"] == 4409
    assert "is already joined" in got["twice"]["detail"]
    assert got["unknown"]["status"] == 404 and got["unknown closed"] == 4404
