"""Every seat its own client: the served episode is the one played in-process, reward for reward."""

from __future__ import annotations

import asyncio
from collections import defaultdict

import httpx
import pytest

from llm_envs.code_collab import ScriptedCoder
from llm_envs.debate.agents import scripted_debaters
from llm_envs.registration import make_family
from llm_envs.serve.app import ServeSettings
from llm_envs.serve.families import Defaults
from llm_envs.testing.conformance import play_aec
from tests.code_collab.cases import IS_BIG, IS_PRIME, USES_AUX
from tests.serve.conftest import ARITHMETIC, DEBATE, create, play_seat_ws, rewards_of, serving


def local_debate(problem: int, seed: int) -> tuple[dict[str, list[float]], dict]:
    """Each agent's ``last()`` rewards (its turns and its dead step) and the record, in-process."""
    family = make_family("debate", DEBATE, task="arithmetic", task_kwargs=ARITHMETIC)
    env, reset_seed, options = family.eval_episode(problem, seed)
    agents = scripted_debaters(3, seed=1)
    seen = play_aec(
        env, lambda a, obs, info: agents[a](obs, info), seed=reset_seed, options=options
    )
    told = defaultdict(list)
    for agent, _, reward, *_ in seen:
        told[agent].append(reward)
    return dict(told), env.unwrapped.record()


@pytest.mark.parametrize(("problem", "seed"), [(0, 0), (5, 3)])
def test_three_websocket_clients_play_the_local_debate(debate_server, problem, seed):
    expected, record = local_debate(problem, seed)
    with httpx.Client(base_url=debate_server) as client:
        episode = create(client, problem=problem, seed=seed)
        assert list(episode["seats"]) == ["agent_0", "agent_1", "agent_2"]
        agents = scripted_debaters(3, seed=1)

        async def everyone():
            seats = [play_seat_ws(debate_server, episode["id"], s, agents[s]) for s in agents]
            return dict(zip(agents, await asyncio.gather(*seats), strict=True))

        received = asyncio.run(everyone())
        finished = client.get(f"/episodes/{episode['id']}").json()

    assert {seat: rewards_of(messages) for seat, messages in received.items()} == expected
    assert any(r != 0 for rewards in expected.values() for r in rewards)  # the test can fail
    for seat, messages in received.items():
        assert messages[0]["type"] == "joined"
        assert messages[-1]["type"] == "end"
        assert messages[-1]["return"] == pytest.approx(sum(expected[seat]))
    assert finished["status"] == "finished" and finished["abandoned"] == []
    assert finished["returns"] == pytest.approx({s: sum(r) for s, r in expected.items()})
    assert finished["record"]["turns"] == record["turns"]


def test_parallel_code_pair_steps_jointly_over_http():
    # CoopHumanEval/0 (x_or_y): the helper's first aux is wrong (2 of 5 tests pass with
    # the main's entry point), its second right; the team reward is paid per joint turn.
    # A generous test timeout: a loaded machine must not turn a pass into a timeout.
    settings = ServeSettings(defaults=Defaults("code_collab", {"num_turns": 3, "timeout": 30.0}))
    coders = {"helper": ScriptedCoder([IS_BIG, IS_PRIME]), "main": ScriptedCoder(USES_AUX)}
    with serving(settings) as url, httpx.Client(base_url=url) as client:
        episode = create(client, problem=0, seed=0)
        assert episode["parallel"] is True
        tokens = {
            seat: client.post(f"/episodes/{episode['id']}/seats/{seat}/join").json()["token"]
            for seat in coders
        }
        told = {seat: [] for seat in coders}
        finished = set()
        while len(finished) < len(coders):
            for seat, coder in coders.items():
                if seat in finished:
                    continue
                headers = {"X-Seat-Token": tokens[seat]}
                path = f"/episodes/{episode['id']}/seats/{seat}"
                message = client.get(f"{path}/turn", params={"wait": 5}, headers=headers).json()
                if message["type"] == "wait":
                    assert message["waiting_for"] == [s for s in coders if s != seat]
                    continue
                told[seat].append(message["reward"])
                if message["type"] == "end":
                    finished.add(seat)
                    continue
                text = coder(message["observation"], message["info"])
                accepted = client.post(f"{path}/act", json={"text": text}, headers=headers)
                assert accepted.json() == {
                    "type": "accepted",
                    "episode": episode["id"],
                    "seat": seat,
                    "turn": message["turn"],
                }
        record = client.get(f"/episodes/{episode['id']}").json()
    # Each seat: 0 at its first turn, then each joint turn's team reward.
    assert told["helper"] == told["main"] == [0.0, pytest.approx(3.4), 4.0, 4.0]
    assert record["returns"] == pytest.approx({"helper": 11.4, "main": 11.4})
    assert record["record"]["title"].startswith("CoopHumanEval/0")
