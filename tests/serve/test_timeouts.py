"""A seat that does not act in time is abandoned: the server plays "" for it, the others play on."""

from __future__ import annotations

import asyncio
from collections import defaultdict

import httpx
import pytest

from llm_envs.debate.agents import scripted_debaters
from llm_envs.registration import make_family
from llm_envs.testing.conformance import play_aec
from tests.serve.conftest import (
    ARITHMETIC,
    DEBATE,
    create,
    debate_settings,
    play_seat_ws,
    rewards_of,
    serving,
)

# Masked parse errors: a broken answer scores 0 and the debate goes on, so the
# abandoned seat's "" is played in every round it has.
MASKED = {**DEBATE, "on_parse_error": "mask"}
TIMEOUT = 1.0


def local_play(silent: str) -> tuple[dict[str, list[float]], dict]:
    """The episode in-process, ``silent`` answering "" every turn."""
    family = make_family("debate", MASKED, task="arithmetic", task_kwargs=ARITHMETIC)
    env, seed, options = family.eval_episode(2, 0)
    agents = scripted_debaters(3, seed=1)
    if silent in agents:
        agents[silent] = lambda observation, info: ""
    seen = play_aec(env, lambda a, obs, info: agents[a](obs, info), seed=seed, options=options)
    told = defaultdict(list)
    for agent, _, reward, *_ in seen:
        told[agent].append(reward)
    return dict(told), env.unwrapped.record()


@pytest.mark.parametrize(("silent", "joins"), [("agent_1", True), ("agent_0", False)])
def test_a_silent_seat_is_played_with_the_empty_answer(silent, joins):
    expected, record = local_play(silent)
    settings = debate_settings(MASKED, seat_timeout=TIMEOUT)
    agents = scripted_debaters(3, seed=1)
    players = [seat for seat in agents if seat != silent]
    with serving(settings) as url, httpx.Client(base_url=url) as client:
        episode = create(client, problem=2, seed=0)["id"]
        if joins:
            token = client.post(f"/episodes/{episode}/seats/{silent}/join").json()["token"]

        async def the_others():
            played = [play_seat_ws(url, episode, seat, agents[seat]) for seat in players]
            return dict(zip(players, await asyncio.gather(*played), strict=True))

        received = asyncio.run(the_others())
        finished = client.get(f"/episodes/{episode}").json()
        if joins:
            path, headers = f"/episodes/{episode}/seats/{silent}", {"X-Seat-Token": token}
            last = client.get(f"{path}/turn", headers=headers).json()
            late = client.post(f"{path}/act", json={"text": "sorry"}, headers=headers)

    for seat in players:
        assert rewards_of(received[seat]) == expected[seat]
    assert finished["abandoned"] == [silent]
    assert finished["returns"] == pytest.approx({s: sum(r) for s, r in expected.items()})
    assert finished["record"]["turns"] == record["turns"]
    silent_turns = [t for t in finished["record"]["turns"] if t["agent"] == silent]
    assert [t["text"] for t in silent_turns] == ["", ""]  # both rounds, played by the server
    assert {t["agent"] for t in finished["record"]["turns"]} == set(agents)  # the others played on
    if joins:
        assert last["type"] == "end" and last["abandoned"] is True
        assert last["return"] == pytest.approx(sum(expected[silent]))
        assert late.status_code == 409
        assert f"was abandoned: no action within {TIMEOUT:g} s of its turn" in late.json()["detail"]


def test_the_clock_restarts_at_every_turn():
    # agent_1 thinks 0.8 s per turn: in time for a 1.5 s timeout at each of its two
    # turns, though together they take longer than that.
    expected, _ = local_play(silent="nobody")
    agents = scripted_debaters(3, seed=1)
    with (
        serving(debate_settings(MASKED, seat_timeout=1.5)) as url,
        httpx.Client(base_url=url) as client,
    ):
        episode = create(client, problem=2, seed=0)["id"]

        async def everyone():
            played = [
                play_seat_ws(url, episode, s, agents[s], delay=0.8 if s == "agent_1" else 0.0)
                for s in agents
            ]
            return dict(zip(agents, await asyncio.gather(*played), strict=True))

        received = asyncio.run(everyone())
        finished = client.get(f"/episodes/{episode}").json()
    assert finished["abandoned"] == []
    assert {seat: rewards_of(messages) for seat, messages in received.items()} == expected
