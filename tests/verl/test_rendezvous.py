"""Seats that name one key meet in one episode: in process and on an episode server.

No verl here: this is the engine-agnostic part the verl agent loop stands on
(:mod:`llm_envs.serve.rendezvous`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest

from llm_envs.debate.agents import scripted_debaters
from llm_envs.serve.errors import Conflict, NotFound
from llm_envs.serve.rendezvous import (
    Coordinator,
    InProcessCoordinator,
    SeatSession,
    ServerCoordinator,
)
from tests.verl.conftest import ARITHMETIC, DEBATE, rendezvous_server, replay

EPISODE = {
    "env": "debate",
    "env_kwargs": DEBATE,
    "task": "arithmetic",
    "task_kwargs": ARITHMETIC,
    "problem": 3,
    "seed": 5,
}


async def play(session: SeatSession, agent: Any) -> tuple[list[str], Mapping[str, Any]]:
    """Play a seat to its end with a scripted agent; return its texts and its last message."""
    texts = []
    while (message := await session.message())["type"] == "turn":
        text = agent(message["observation"], message["info"])
        texts.append(text)
        await session.act(text, message["turn"])
    return texts, message


async def debates(coordinator: Coordinator, copies: int) -> list[tuple[str, str, list[str], Any]]:
    """``copies`` of every seat meet under one key, all at once, seats in a scrambled order."""
    agents = scripted_debaters(3, seed=1)
    order = [seat for _ in range(copies) for seat in ("agent_2", "agent_0", "agent_1")]

    async def one(seat: str) -> tuple[str, str, list[str], Any]:
        session = await coordinator.meet("debate-3", seat, EPISODE)
        texts, end = await play(session, agents[seat])
        return session.episode, seat, texts, end

    try:
        return list(await asyncio.gather(*(one(seat) for seat in order)))
    finally:
        await coordinator.close()


def check_debates(played: list[tuple[str, str, list[str], Any]], copies: int) -> None:
    episodes: dict[str, dict[str, tuple[list[str], Any]]] = {}
    for episode, seat, texts, end in played:
        assert seat not in episodes.setdefault(episode, {}), f"{seat} met {episode} twice"
        episodes[episode][seat] = (texts, end)
    assert len(episodes) == copies
    for seats in episodes.values():
        assert sorted(seats) == ["agent_0", "agent_1", "agent_2"]
        expected = replay(EPISODE, {seat: texts for seat, (texts, _) in seats.items()})
        assert {seat: end["return"] for seat, (_, end) in seats.items()} == expected
        assert all(end["type"] == "end" for _, end in seats.values())


@pytest.mark.parametrize("copies", [1, 3])
def test_copies_of_each_seat_meet_in_as_many_full_episodes_in_process(copies):
    check_debates(asyncio.run(debates(InProcessCoordinator(), copies)), copies)


@pytest.mark.parametrize("keep_finished", [None, 0], ids=["kept", "forgotten at once"])
def test_seats_in_different_processes_meet_on_the_server(keep_finished):
    # Each seat's client in its own event loop and thread: what separate workers see. A
    # server that forgets a finished episode's messages at once (keep_finished 0) still
    # tells each seat its return, from the episode's record.
    with rendezvous_server(keep_finished=keep_finished) as url:

        def seat(name: str) -> tuple[str, str, list[str], Any]:
            async def run() -> tuple[str, str, list[str], Any]:
                coordinator = ServerCoordinator(url)
                try:
                    session = await coordinator.meet("debate-3", name, EPISODE, family_seed=0)
                    texts, end = await play(session, scripted_debaters(3, seed=1)[name])
                    return session.episode, name, texts, end
                finally:
                    await coordinator.close()

            return asyncio.run(run())

        async def threads() -> list[tuple[str, str, list[str], Any]]:
            names = ["agent_1", "agent_2", "agent_0"] * 2
            return list(await asyncio.gather(*(asyncio.to_thread(seat, n) for n in names)))

        check_debates(asyncio.run(threads()), 2)


def test_a_seat_that_arrives_after_its_episode_ended_gets_its_end_at_once():
    async def late() -> tuple[Any, Any, str, str]:
        coordinator = InProcessCoordinator()
        episode = {**EPISODE, "env_kwargs": {**DEBATE, "on_parse_error": "penalize"}}
        first = await coordinator.meet("k", "agent_0", episode)
        turn = await first.message()
        await first.act("no tags at all", turn["turn"])  # a broken answer ends the debate
        own_end = await first.message()
        second = await coordinator.meet("k", "agent_2", episode)
        end = await second.message()
        await coordinator.close()
        return own_end, end, first.episode, second.episode

    own_end, end, first, second = asyncio.run(late())
    assert first == second
    assert (own_end["type"], own_end["return"]) == ("end", -1.0)
    assert end["type"] == "end" and end["return"] == 0.0


@pytest.mark.parametrize(
    ("seat", "episode", "family_seed", "error", "words"),
    [
        ("agent_7", EPISODE, None, NotFound, "has no seat 'agent_7'"),
        ("agent_1", {**EPISODE, "problem": 4}, None, Conflict, "give each episode settings"),
        ("agent_1", EPISODE, 3, Conflict, "start the server with --seed 3"),
    ],
)
def test_a_seat_that_cannot_meet_is_told_the_fix(seat, episode, family_seed, error, words):
    async def meet() -> None:
        coordinator = InProcessCoordinator()
        try:
            await coordinator.meet("k", "agent_0", EPISODE)
            await coordinator.meet("k", seat, episode, family_seed=family_seed)
        finally:
            await coordinator.close()

    with pytest.raises(error, match=words):
        asyncio.run(meet())


def test_the_server_refuses_with_the_same_words():
    async def meet(url: str) -> None:
        coordinator = ServerCoordinator(url)
        try:
            await coordinator.meet("k", "agent_0", EPISODE, family_seed=2)
        finally:
            await coordinator.close()

    with rendezvous_server() as url, pytest.raises(Exception, match="--seed 2") as raised:
        asyncio.run(meet(url))
    assert getattr(raised.value, "status", None) == 409


def test_the_in_process_records_keep_the_latest():
    async def three_debates(keep: int) -> tuple[list[str], list[bool]]:
        coordinator = InProcessCoordinator(keep_records=keep)
        agents = scripted_debaters(3, seed=1)
        episodes = []
        for key in ("a", "b", "c"):
            sessions = [await coordinator.meet(key, seat, EPISODE) for seat in agents]
            await asyncio.gather(*(play(s, agents[s.seat]) for s in sessions))
            episodes.append(sessions[0].episode)
        kept = [coordinator.record(e) is not None for e in episodes]
        await coordinator.close()
        return episodes, kept

    episodes, kept = asyncio.run(three_debates(2))
    assert len(set(episodes)) == 3 and kept == [False, True, True]
