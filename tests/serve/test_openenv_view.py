"""OpenEnv's own client plays one seat; the reference players take the others, server-side.

The rewards the client receives are those of the same episode played in-process
through :class:`llm_envs.seats.SeatView`.
"""

from __future__ import annotations

import httpx
import pytest
from openenv.core import GenericEnvClient

from llm_envs.debate.agents import MalformedDebater, scripted_debaters
from llm_envs.registration import make_family
from llm_envs.seats import family_seat
from llm_envs.textarena.players import RandomTicTacToePlayer
from tests.serve.conftest import ARITHMETIC, DEBATE

TICTACTOE = {"env": "textarena", "env_kwargs": {"game": "TicTacToe-v0"}}


def play_openenv(url, seat, agent, **reset):
    """The client's rewards, step by step, and the episode's id."""
    with GenericEnvClient(base_url=f"{url}/openenv").sync() as env:
        result = env.reset(seat=seat, **reset)
        assert result.observation["seat"] == seat and result.reward is None
        rewards = []
        while not result.done:
            observation = result.observation
            text = agent({"messages": observation["messages"]}, observation["info"])
            result = env.step({"text": text})
            rewards.append(result.reward)
        return rewards, result.observation["episode_id"]


def play_in_process(family, seat, agent, problem, seed, others=None):
    view, reset_seed, options = family_seat(family, seat, problem=problem, seed=seed, others=others)
    observation, info = view.reset(seed=reset_seed, options=options)
    rewards = []
    while not view.done:
        observation, reward, _, _, info = view.step(agent(observation, info))
        rewards.append(reward)
    return rewards


@pytest.mark.parametrize(
    ("seat", "client", "problem", "seed", "paid"),
    [
        # "42" to every question: both reference answers beat it in every vote.
        ("agent_0", "scripted", 0, 0, 0.0),
        # The reference answer itself: it ties the two others, a win rate of 0.5.
        ("agent_1", "reference", 4, 2, 0.5),
        # A broken answer costs -1 and ends the debate.
        ("agent_2", "malformed", 1, 0, -1.0),
    ],
)
def test_openenv_client_plays_a_debate_seat_as_in_process(
    debate_server, seat, client, problem, seed, paid
):
    family = make_family("debate", DEBATE, task="arithmetic", task_kwargs=ARITHMETIC)

    def agent():
        if client == "reference":
            return family.reference_players()[seat]
        return MalformedDebater() if client == "malformed" else scripted_debaters(3, seed=1)[seat]

    expected = play_in_process(family, seat, agent(), problem, seed)
    rewards, episode_id = play_openenv(debate_server, seat, agent(), problem=problem, seed=seed)

    assert rewards == pytest.approx(expected)
    assert sum(rewards) == pytest.approx(paid)
    record = httpx.get(f"{debate_server}/episodes/{episode_id}").json()
    assert record["returns"] == {seat: pytest.approx(paid)}
    assert record["seats"][seat] == "client"
    assert sorted(v for k, v in record["seats"].items() if k != seat) == ["reference"] * 2
    assert (record["problem"], record["seed"], record["task"]) == (problem, seed, "arithmetic")


@pytest.mark.parametrize(("seat", "seed"), [("agent_0", 0), ("agent_0", 1), ("agent_1", 2)])
def test_openenv_client_plays_tictactoe_against_minimax(debate_server, seat, seed):
    family = make_family("textarena", TICTACTOE["env_kwargs"])
    expected = play_in_process(family, seat, RandomTicTacToePlayer(seed), 0, seed)
    rewards, _ = play_openenv(
        debate_server, seat, RandomTicTacToePlayer(seed), seed=seed, **TICTACTOE
    )

    assert rewards == expected
    assert sum(rewards) in (0.0, -1.0)  # minimax never loses: a draw or the client's loss


def test_openenv_random_player_loses_to_minimax(debate_server):
    # The cases above could all be draws; this seat and seed lose (computed in-process).
    family = make_family("textarena", TICTACTOE["env_kwargs"])
    losing = [
        s
        for s in range(6)
        if sum(play_in_process(family, "agent_0", RandomTicTacToePlayer(s), 0, s)) < 0
    ]
    assert losing, "the random player never lost: pick other seeds"
    rewards, _ = play_openenv(
        debate_server, "agent_0", RandomTicTacToePlayer(losing[0]), seed=losing[0], **TICTACTOE
    )
    assert sum(rewards) == -1.0


def test_openenv_client_plays_a_one_seat_family_alone(debate_server):
    # Expert iteration's solver is its family's only seat: nobody else to play.
    family = make_family("expert_iteration", {})
    solver = lambda observation, info: "The answer is \\boxed{5200}."  # noqa: E731
    expected = play_in_process(family, "solver", solver, 0, 0, others={})
    rewards, episode_id = play_openenv(debate_server, "solver", solver, env="expert_iteration")
    assert rewards == expected == [1.0]  # problem 0 is 65 * 80
    record = httpx.get(f"{debate_server}/episodes/{episode_id}").json()
    assert record["seats"] == {"solver": "client"} and record["returns"] == {"solver": 1.0}


@pytest.mark.parametrize(
    ("reset", "message"),
    [
        (
            {"env": "chess"},
            "unknown env 'chess'; the registered ones are: debate, expert_iteration",
        ),
        (
            {"seat": "agent_7"},
            "has no seat 'agent_7'; its seats are ['agent_0', 'agent_1', 'agent_2']",
        ),
        ({"problem": "three"}, "problem: Input should be a valid integer"),
        ({"colour": "red"}, "colour: Extra inputs are not permitted"),
        (
            {"env": "code_collab"},
            "env 'code_collab' cannot fill the other seats: --env code_collab's reference players "
            "write each problem",
        ),
    ],
)
def test_openenv_reset_refusals_name_the_value(debate_server, reset, message):
    with GenericEnvClient(base_url=f"{debate_server}/openenv").sync() as env:
        with pytest.raises(RuntimeError, match="Server error: ") as refused:
            env.reset(**reset)
        assert message in str(refused.value)


@pytest.mark.parametrize(
    ("route", "body", "status", "message"),
    [
        ("reset", {"seat": "agent_7"}, 422, "has no seat 'agent_7'"),
        ("reset", {"env": "code_collab"}, 422, "cannot fill the other seats"),
        ("reset", {"problem": "three"}, 422, "problem: Input should be a valid integer"),
        ("step", {"action": {"text": "hello"}}, 409, "reset the episode before stepping"),
    ],
)
def test_openenv_http_refusals_keep_their_status(debate_server, route, body, status, message):
    # OpenEnv's HTTP routes let the environment's exception through to a bare 500.
    answer = httpx.post(f"{debate_server}/openenv/{route}", json=body, timeout=30)
    assert answer.status_code == status, answer.text
    assert message in answer.json()["detail"]
    assert httpx.get(f"{debate_server}/health", timeout=30).status_code == 200


def test_openenv_step_before_reset_says_what_to_do(debate_server):
    with (
        GenericEnvClient(base_url=f"{debate_server}/openenv").sync() as env,
        pytest.raises(RuntimeError, match="reset the episode before stepping"),
    ):
        env.step({"text": "hello"})
