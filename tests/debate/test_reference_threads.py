"""The debate's reference players answer from many threads at once (``llm-envs check`` plays so)."""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from llm_envs.debate import parse_response
from llm_envs.registration import make_family


@pytest.fixture
def switch_often():
    """Threads switch every microsecond, so a shared reader is entered twice if it can be."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(before)


def test_reference_players_answer_from_many_threads_at_once(switch_often) -> None:
    family = make_family("debate", {}, task="arithmetic")
    plan = family.evaluation(list(range(200)), 0)
    first = []
    for env, seed, options in zip(plan.envs, plan.seeds, plan.options, strict=True):
        env.reset(seed=seed, options=options)
        observation, *_ = env.last()
        first.append((observation, options["question"].answer))
    for _ in range(3):  # fresh players each time: each starts reading the questions anew
        player = family.reference_players()["agent_0"]

        def answer(case, player=player):
            observation, _ = case
            return parse_response(player(observation, {}), author=0).solution

        with ThreadPoolExecutor(32) as pool:
            said = list(pool.map(answer, first))
        assert said == [f"The answer is {expected}." for _, expected in first]
