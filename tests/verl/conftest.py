"""Helpers for the verl tests: a served rendezvous, debates played locally, a token server.

Only ``test_agent_loop.py`` needs verl (it skips without it); the rendezvous
and data set tests run in the main environment too.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from llm_envs.registration import make_family
from llm_envs.testing.conformance import play_aec

# A 3-seat debate of arithmetic problems: each seat's episode is one growing chat (chat
# observations), and a broken answer is masked from the loss instead of ending the debate,
# so every seat takes both its turns whatever the tiny model writes.
DEBATE = {"num_agents": 3, "max_rounds": 2, "observation_mode": "chat", "on_parse_error": "mask"}
ARITHMETIC = {"num_problems": 10, "max_digits": 2}
VOTES = {0: "Agent 1 > Agent 2", 1: "Agent 0 > Agent 2"}
"""The votes of the seats that answer in the format: agent_2 loses both."""


def answer(agent: int) -> str:
    """A well-formed debate answer of agent ``agent`` (0 or 1) with its vote, in any round."""
    return (
        f"<solution>42</solution><evaluation>Agent {1 - agent} is right</evaluation>"
        f"<comparison>{VOTES[agent]}</comparison><consensus>NO</consensus>"
        "<consensus_reason>not yet</consensus_reason>"
    )


@contextlib.contextmanager
def rendezvous_server(
    family_seed: int = 0, seat_timeout: float = 300.0, keep_finished: int | None = None
) -> Iterator[str]:
    """An episode server with ``POST /rendezvous``, on a free loopback port; yield its URL.

    ``keep_finished``: how many finished episodes the hub keeps in memory (default its own).
    """
    from llm_envs.serve.app import ServeSettings, build_app, serving_app
    from llm_envs.serve.rendezvous import Rendezvous, rendezvous_routes

    app = build_app(ServeSettings(seed=family_seed, seat_timeout=seat_timeout))
    if not any(getattr(route, "path", "") == "/rendezvous" for route in app.routes):
        app.include_router(rendezvous_routes(Rendezvous(app.state.hub)))
    if keep_finished is not None:
        app.state.hub.keep_finished = keep_finished
    with serving_app(app) as url:
        yield url


def replay(episode: Mapping[str, Any], texts: Mapping[str, Sequence[str]]) -> dict[str, float]:
    """Each seat's return when the episode is played locally with these texts, seat by seat.

    ``episode``: the ``POST /episodes`` fields; ``texts``: each seat's actions in order.
    """
    family = make_family(
        episode["env"],
        dict(episode["env_kwargs"]),
        task=episode["task"],
        task_kwargs=dict(episode["task_kwargs"]),
    )
    env, seed, options = family.eval_episode(episode["problem"], episode["seed"])
    left = {seat: list(actions) for seat, actions in texts.items()}
    seen = play_aec(env, lambda agent, *_: left[agent].pop(0), seed=seed, options=options)
    assert not any(left.values()), f"actions left over: {left}"
    returns = dict.fromkeys(env.possible_agents, 0.0)
    for agent, _, reward, *_ in seen:
        returns[agent] += reward
    return returns


def texts_by_seat(record: Mapping[str, Any]) -> dict[str, list[str]]:
    """Each seat's texts, in order, from an environment record."""
    texts: dict[str, list[str]] = {}
    for turn in record["turns"]:
        texts.setdefault(turn["agent"], []).append(turn["text"])
    return texts
