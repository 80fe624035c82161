"""TRL's OpenEnv path: a served seat as ``environment_factory`` (llm_envs.bridges.trl).

A real episode server on loopback (``llm_envs.serve.app.serving``) plays the
episodes; OpenEnv's own client carries them. The fast tests play the adapter
by hand against the in-process factory, which must see the same episodes move
for move; the slow one trains a real ``GRPOTrainer`` for two steps through it.
"""

from __future__ import annotations

import pytest

from llm_envs.bridges.trl import EPISODE_OVER, RemoteSeatEnvironmentFactory, SeatEnvironmentFactory
from llm_envs.serve.app import ServeSettings, serving
from llm_envs.serve.families import Defaults
from tests.bridges.test_trl_environment_factory import (
    ANSWER_0,
    DEBATE,
    TICTACTOE,
    VOTE,
    tool_calling_model,
    train,
)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A server whose default env is the factory tests' debate; TicTacToe by request."""
    defaults = Defaults("debate", DEBATE["env_kwargs"], DEBATE["task"], DEBATE["task_kwargs"])
    settings = ServeSettings(defaults=defaults, records=str(tmp_path_factory.mktemp("records")))
    with serving(settings) as url:
        yield url


def _remote(server, settings, seat, **kwargs):
    if settings is DEBATE:  # the server's default env: nothing to ask for
        return RemoteSeatEnvironmentFactory(server, seat=seat, **kwargs)
    return RemoteSeatEnvironmentFactory(server, seat=seat, **settings, **kwargs)


@pytest.mark.parametrize(
    ("settings", "seat", "problem", "moves"),
    [
        (DEBATE, "agent_1", 2, [ANSWER_0, VOTE]),  # two rounds, pairwise reward at the end
        (DEBATE, "agent_0", 0, ["no tags at all"]),  # a parse error ends the debate: -1
        (TICTACTOE, "agent_0", 0, ["[8]", "[7]", "[5]"]),  # the minimax player wins
        (TICTACTOE, "agent_1", 1, ["[4]"]),  # then silence: invalid moves lose the game
    ],
    ids=["debate-two-rounds", "debate-parse-error", "tictactoe-first", "tictactoe-silent"],
)
def test_a_served_seat_plays_the_in_process_episode(server, settings, seat, problem, moves):
    # The server's seed (0) is the in-process family's: the same problems, the same episodes.
    remote = _remote(server, settings, seat)
    local = SeatEnvironmentFactory(**settings, seat=seat)
    rows = remote.dataset(problem + 1)
    assert rows["prompt"] == local.dataset(problem + 1)["prompt"]
    assert remote.max_turns == local.max_turns

    played = []
    for factory in (remote, local):
        env = factory()
        env.reset(**rows[problem])
        results = [env.take_turn(move) for move in moves if not env.done]
        played.append((results, env.get_reward(), env.turns, env.unplayed_turns))
    assert played[0] == played[1]
    remote_env, local_env = remote.environments[0], local.environments[0]
    served = remote_env.record
    assert served["record"] == local_env.record  # every seat's turns, as the server played them
    assert served["returns"] == {seat: pytest.approx(played[0][1])}
    assert served["seats"][seat] == "client" and served["problem"] == problem
    if settings is TICTACTOE:
        assert played[0][1] == -1.0  # minimax never loses
    remote.close()


def test_environments_are_reused_across_episodes_on_one_socket(server):
    factory = RemoteSeatEnvironmentFactory(server, seat="agent_2")
    rows = factory.dataset(2)
    env = factory()
    env.reset(**rows[0])
    assert env.take_turn("no tags at all").endswith(EPISODE_OVER)
    first = env.episode_id
    client = env._client
    env.reset(**rows[1])  # TRL resets the same instance for its next rollout
    assert (env.problem, env.turns, env.episode_return, env.done) == (1, 0, 0.0, False)
    assert env.record is None  # the episode runs: the server has no record of it yet
    assert env.get_reward() == -1.0 and env.unplayed_turns == 1  # silence: a broken answer
    assert env._client is client and env.episode_id != first
    factory.close()
    assert env._client is None and env.done


def test_misuse_and_bad_settings_are_refused_with_the_fix(server):
    factory = RemoteSeatEnvironmentFactory(server, seat="agent_0")
    rows = factory.dataset(2)
    env = factory()
    with pytest.raises(RuntimeError, match="call reset"):
        env.take_turn("x")
    with pytest.raises(ValueError, match="no 'problem' column"):
        env.reset(prompt=rows[0]["prompt"])
    with pytest.raises(ValueError, match="not agent_0's first observation of problem 1"):
        env.reset(problem=1, prompt=rows[0]["prompt"])
    env.reset(**rows[0])
    env.take_turn("no tags at all")
    with pytest.raises(RuntimeError, match=EPISODE_OVER):
        env.take_turn("x")
    with pytest.raises(ValueError, match="num_problems >= 1"):
        factory.dataset(0)
    # The server's refusals reach the trainer with the server's message.
    with pytest.raises(RuntimeError, match="has no seat 'agent_7'"):
        RemoteSeatEnvironmentFactory(server, seat="agent_7").dataset(1)
    with pytest.raises(RuntimeError, match="reference"):
        RemoteSeatEnvironmentFactory(
            server, env="textarena", env_kwargs={"game": "ConnectFour-v0"}
        ).dataset(1)
    factory.close()


@pytest.mark.slow
@pytest.mark.training
def test_grpo_trains_a_served_tictactoe_seat(server, tiny_model_dir, tmp_path):
    moves = ["[0]", "[4]", "[8]"]
    model_dir = tool_calling_model(tiny_model_dir, tmp_path / "model", moves)
    factory = RemoteSeatEnvironmentFactory(server, seat="agent_0", **TICTACTOE)
    trainer, changed, episodes = train(model_dir, factory, tmp_path, max_tool_calling_iterations=4)

    means = [
        h["rewards/RemoteSeatEnvironment/mean"] for h in trainer.state.log_history if "reward" in h
    ]
    assert len(means) == len(episodes) == 2
    turns = []
    for mean, step in zip(means, episodes, strict=True):
        assert len(step) == 4
        assert mean == pytest.approx(sum(r for r, _ in step) / len(step), abs=1e-6)
        for reward, env in step:
            served = env.record  # the server's record: the episode ran there
            assert served["returns"] == {"agent_0": pytest.approx(reward)}
            texts = [t["text"] for t in served["record"]["turns"] if t["agent"] == "agent_0"]
            assert all(text in moves for text in texts if text)
            assert (len(texts) - texts.count(""), texts.count("")) == (
                env.turns,
                env.unplayed_turns,
            )
            turns.append(env.turns)
    assert max(turns) >= 2  # several moves through TRL's tool loop in one completion
    assert changed > 0 or len({r for step in episodes for r, _ in step}) == 1
    factory.close()
