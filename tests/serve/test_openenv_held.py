"""OpenEnv sessions' actions count in ``--max-held-chars`` with the hub's episodes.

Attack round 4: a session's environment keeps its transcript until its episode
ends, and the OpenEnv view's sessions were outside the server's budget (64
sessions x turns x 1 MiB). The budget is one, shared: what sessions hold
leaves less for the hub's seats, and the reverse.
"""

from __future__ import annotations

import httpx
import pytest
from openenv.core import GenericEnvClient

from llm_envs.debate.agents import ScriptedDebater
from llm_envs.serve.app import ServeSettings, serving
from llm_envs.serve.families import Defaults

DEBATE = Defaults("debate", {"num_agents": 3, "max_rounds": 2}, "arithmetic")
BUDGET = 30_000


def _answer(observation: dict, info: dict, padding: int) -> str:
    """A well-formed first answer (the debate goes on), padded to hold ``padding`` more."""
    return ScriptedDebater(0, 3, agree_from_round=None)(observation, info) + "\n" + "x" * padding


def _session(url: str) -> GenericEnvClient:
    return GenericEnvClient(base_url=f"{url}/openenv", message_timeout_s=60).sync()


def test_sessions_share_the_budget_with_each_other_and_with_the_hubs_seats(tmp_path):
    settings = ServeSettings(
        defaults=DEBATE,
        max_held_chars=BUDGET,
        max_held_chars_per_client=BUDGET,  # one client here: its share is the whole budget
        records=str(tmp_path),
    )
    with serving(settings) as url, _session(url) as first, _session(url) as second:
        began = first.reset(problem=3, seat="agent_0").observation
        taken = first.step({"text": _answer(began, {}, 20_000)})
        assert not taken.done  # the episode goes on, holding the action
        began = second.reset(problem=4, seat="agent_0").observation
        with pytest.raises(RuntimeError, match="--max-held-chars"):
            second.step({"text": _answer(began, {}, 20_000)})
        with httpx.Client(base_url=url, timeout=30) as client:  # the hub's seats: the same budget
            episode = client.post("/episodes", json={"problem": 3}).json()["id"]
            seat = f"/episodes/{episode}/seats/agent_0"
            headers = {"X-Seat-Token": client.post(f"{seat}/join").json()["token"]}
            turn = client.get(f"{seat}/turn?wait=5", headers=headers).json()
            text = _answer(turn["observation"], turn["info"], 20_000)
            refused = client.post(f"{seat}/act", json={"text": text}, headers=headers)
            assert refused.status_code == 503 and "--max-held-chars" in refused.json()["detail"]
            first.reset(problem=5, seat="agent_0")  # the first episode ends (interrupted)
            taken = client.post(f"{seat}/act", json={"text": text}, headers=headers)
            assert taken.status_code == 200, taken.text
        # The second session's episode went on after its refusal; it may act once room is made.
        assert not second.step({"text": _answer(began, {}, 10)}).done
