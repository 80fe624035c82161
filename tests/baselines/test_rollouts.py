"""Batched rollouts: trajectories, reward attribution, info merging, batching and groups."""

from __future__ import annotations

import functools
import zlib

import pytest
from gymnasium.utils import seeding
from hypothesis import given, settings
from hypothesis import strategies as st
from pettingzoo import ParallelEnv

from baselines.data.datums import assemble_training_data
from baselines.rollouts import group_by, group_episodes, rollout
from baselines.samplers import SampleRequest, SamplingParams, ScriptedPolicy
from baselines.samplers.scripted import byte_render
from llm_envs.debate import MalformedDebater, format_answer, scripted_debaters
from llm_envs.debate import env as debate_env
from llm_envs.debate.agents import ScriptedDebater
from llm_envs.spaces import UnicodeText, chat_observation_space
from llm_envs.testing.conformance import play_aec


class CountingPolicy:
    """Wraps a policy and records the size of every batch it is asked for."""

    def __init__(self, inner):
        self.inner = inner
        self.batches: list[int] = []

    def sample(self, requests, params):
        self.batches.append(len(requests))
        return self.inner.sample(requests, params)


def test_debate_rollout_matches_sequential_play_and_batches_across_envs():
    num_envs, n = 4, 3
    policy = CountingPolicy(ScriptedPolicy(scripted_debaters(n, seed=2)))
    envs = [debate_env(num_agents=n, max_rounds=3) for _ in range(num_envs)]
    results = rollout(envs, policy, seeds=range(num_envs))

    # One batched call per tick, one request per env while all are running.
    assert policy.batches[0] == num_envs
    assert sum(policy.batches) == sum(
        len(t.transitions) for r in results for t in r.trajectories.values()
    )


def test_batched_rollout_equals_playing_each_env_alone():
    # Scripted agents keep a random state, so each env gets its own fresh set.
    n, seeds = 3, [0, 1, 2, 3]
    policies = [ScriptedPolicy(scripted_debaters(n, seed=s)) for s in seeds]
    envs = [debate_env(num_agents=n, max_rounds=3) for _ in seeds]
    results = rollout(envs, lambda i, agent: policies[i], seeds=seeds)
    for seed, result in zip(seeds, results, strict=True):
        agents = scripted_debaters(n, seed=seed)
        seen = play_aec(
            debate_env(num_agents=n, max_rounds=3),
            lambda a, o, i, agents=agents: agents[a](o, i),
            seed=seed,
        )
        finals = {a: r for a, _, r, term, trunc, _ in seen if term or trunc}
        assert result.final_rewards == pytest.approx(finals)
        played = [obs for a, obs, _, term, trunc, _ in seen if a == "agent_1" and not term]
        assert len(result.trajectories["agent_1"].transitions) == len(played)


def test_transitions_carry_tokens_context_and_outcome():
    n = 2
    envs = [debate_env(num_agents=n, max_rounds=2)]
    (result,) = rollout(
        envs, ScriptedPolicy(scripted_debaters(n, agree_from_round=None)), seeds=[0]
    )
    t0, t1 = result.trajectories["agent_0"].transitions
    # Context keys from before the turn: agent_0 acts at global turns 0 and 2.
    assert (t0.info["turn"], t0.info["round"], t1.info["turn"], t1.info["round"]) == (0, 1, 2, 2)
    assert t0.info["stop"] == ["</consensus_reason>"]
    # Outcome keys from after the turn.
    assert t0.info["parse_error"] is False and t0.info["loss_weight"] == 1.0
    assert t0.info["solution"] == "42"
    assert t1.info["pairwise_total_votes"] >= 0  # the final info reaches the last turn
    assert (t0.done, t1.done) == (False, True)
    assert bytes(t0.action).decode().startswith("<solution>\n42\n</solution>")
    assert bytes(t0.observation).decode().startswith("<system>You are Agent 0 in a debate")
    assert bytes(t0.observation).decode().endswith("<assistant>")


def test_masked_parse_error_gives_loss_weight_zero_on_that_turn():
    agents = {"agent_0": scripted_debaters(2)["agent_0"], "agent_1": MalformedDebater("prose")}
    envs = [debate_env(num_agents=2, max_rounds=2, on_parse_error="mask")]
    (result,) = rollout(envs, ScriptedPolicy(agents), seeds=[0])
    weights = [t.info["loss_weight"] for t in result.trajectories["agent_1"].transitions]
    assert weights == [0.0, 0.0]
    assert [t.loss_weight for t in result.trajectories["agent_0"].transitions] == [1.0, 1.0]


def test_penalized_parse_error_final_rewards_and_agents_that_never_acted():
    agents = {
        "agent_0": MalformedDebater(),
        "agent_1": scripted_debaters(3)["agent_1"],
        "agent_2": scripted_debaters(3)["agent_2"],
    }
    (result,) = rollout([debate_env(num_agents=3)], ScriptedPolicy(agents), seeds=[0])
    assert result.final_rewards == {"agent_0": -1.0, "agent_1": 0.0, "agent_2": 0.0}
    assert len(result.trajectories["agent_0"].transitions) == 1
    assert result.trajectories["agent_1"].transitions == ()
    group = result.to_group()
    assert group.final_rewards_G == (-1.0, 0.0, 0.0)
    batch = assemble_training_data([group], render_messages=byte_render)
    # Returns -1, 0, 0 -> advantages -2/3, 1/3, 1/3; only agent_0 has tokens to train on.
    assert len(batch.data_D) == 1
    assert batch.data_D[0].advantages.max() == pytest.approx(0.0)
    assert batch.data_D[0].advantages.min() == pytest.approx(-2 / 3)


def test_policy_assignment_by_role():
    trained = CountingPolicy(ScriptedPolicy(scripted_debaters(3, solution="trained")))
    fixed = CountingPolicy(ScriptedPolicy(scripted_debaters(3, solution="fixed")))
    # Debate i: the trained policy plays agent_i, the fixed policy the others.
    envs = [debate_env(num_agents=3, max_rounds=1) for _ in range(3)]
    assign = lambda i, agent: trained if agent == f"agent_{i}" else fixed  # noqa: E731
    results = rollout(envs, assign, seeds=[0, 0, 0])
    for i, r in enumerate(results):
        for agent, traj in r.trajectories.items():
            text = bytes(traj.transitions[0].action).decode()
            assert ("trained" in text) == (agent == f"agent_{i}")
    assert sum(trained.batches) == 3 and sum(fixed.batches) == 6


class SeedRecorder:
    """Wraps a policy and records the seed each request would be sampled with (seed + i)."""

    def __init__(self, inner):
        self.inner = inner
        self.seeds: list[int] = []

    def sample(self, requests, params):
        self.seeds.extend(params.seed + i for i in range(len(requests)))
        return self.inner.sample(requests, params)


def test_every_request_of_a_rollout_gets_a_seed_of_its_own():
    # Agents taking turns in the same batch slot once shared a seed, and a model wrote
    # the same answer for all three debaters; every request now draws its own numbers.
    trained = SeedRecorder(ScriptedPolicy(scripted_debaters(3)))
    fixed = SeedRecorder(ScriptedPolicy(scripted_debaters(3)))
    envs = [debate_env(num_agents=3, max_rounds=3) for _ in range(4)]
    assign = lambda i, agent: trained if agent == "agent_0" else fixed  # noqa: E731
    rollout(envs, assign, SamplingParams(seed=11), seeds=range(4))
    seeds = trained.seeds + fixed.seeds
    assert len(seeds) == 4 * 3 * 2  # agreement from round 2 ends each debate then
    assert len(set(seeds)) == len(seeds)
    # the same seeds again for the same rollout: runs stay reproducible
    again = SeedRecorder(ScriptedPolicy(scripted_debaters(3)))
    envs = [debate_env(num_agents=3, max_rounds=3) for _ in range(4)]
    rollout(
        envs,
        lambda i, a: trained if a == "agent_0" else again,
        SamplingParams(seed=11),
        seeds=range(4),
    )
    assert again.seeds == fixed.seeds


def test_group_by_problem():
    envs = [debate_env(num_agents=2, max_rounds=1) for _ in range(6)]
    results = rollout(envs, ScriptedPolicy(scripted_debaters(2)), seeds=range(6))
    groups = group_by(results, key=lambda r: r.env_index // 3, agents=["agent_0"])
    assert [len(g.trajectories_G) for g in groups] == [3, 3]
    assert len(group_episodes(results)) == 6
    with pytest.raises(ValueError, match="one of each per env"):
        rollout(envs, ScriptedPolicy(scripted_debaters(2)), seeds=[0])


class EchoParallelEnv(ParallelEnv):
    """Two agents act at once for two steps; reward = 1 if the text has an even length."""

    metadata = {"name": "echo_v0"}  # noqa: RUF012

    def __init__(self):
        self.possible_agents = ["a", "b"]
        self._obs_space = {a: chat_observation_space() for a in self.possible_agents}
        self._act_space = {a: UnicodeText() for a in self.possible_agents}

    def observation_space(self, agent):
        return self._obs_space[agent]

    def action_space(self, agent):
        return self._act_space[agent]

    def reset(self, seed=None, options=None):
        self.np_random, _ = seeding.np_random(seed)
        self.agents = list(self.possible_agents)
        self.t = 0
        obs = {a: {"messages": [{"role": "user", "content": f"{a} step 0"}]} for a in self.agents}
        return obs, {a: {"stop": [], "turn": 0} for a in self.agents}

    def step(self, actions):
        self.t += 1
        done = self.t >= 2
        obs = {
            a: {"messages": [{"role": "user", "content": f"{a} step {self.t}"}]}
            for a in self.agents
        }
        rewards = {a: float(len(actions[a]) % 2 == 0) for a in self.agents}
        infos = {
            a: {"turn": self.t, "chars": len(actions[a]), "loss_weight": 1.0, "text": actions[a]}
            for a in self.agents
        }
        terms = dict.fromkeys(self.agents, done)
        truncs = dict.fromkeys(self.agents, False)
        if done:
            self.agents = []
        return obs, rewards, terms, truncs, infos


class FixedText:
    def __init__(self, text):
        self.text = text

    def __call__(self, observation, info):
        return self.text


def test_parallel_env_rollout():
    policy = CountingPolicy(ScriptedPolicy({"a": FixedText("xy"), "b": FixedText("xyz")}))
    results = rollout([EchoParallelEnv(), EchoParallelEnv()], policy, seeds=[0, 1])
    assert policy.batches == [4, 4]  # both agents of both envs, two ticks
    a, b = results[0].trajectories["a"], results[0].trajectories["b"]
    assert [t.reward for t in a.transitions] == [1.0, 1.0]
    assert [t.reward for t in b.transitions] == [0.0, 0.0]
    assert [(t.info["turn"], t.info["chars"], t.done) for t in a.transitions] == [
        (0, 2, False),
        (1, 2, True),
    ]
    # A group's metrics are the numeric outcomes of the last info (numeric_info):
    # not the context key "turn", not "loss_weight", not the text.
    assert group_episodes(results)[0].metrics_G == ({"chars": 2.0}, {"chars": 3.0})


def test_a_request_needs_a_chat_observation():
    with pytest.raises(TypeError, match="not a chat"):
        SampleRequest.for_turn("a", "just text", {})


@pytest.mark.slow
def test_tiny_model_debate_rollout_end_to_end(tiny_model):
    from baselines.samplers import TransformersPolicy

    model, tokenizer = tiny_model
    policy = TransformersPolicy(model, tokenizer)
    envs = [debate_env(num_agents=2, max_rounds=1, on_parse_error="mask") for _ in range(2)]
    results = rollout(envs, policy, SamplingParams(max_tokens=12, seed=0), seeds=[0, 1])
    for r in results:
        for traj in r.trajectories.values():
            (turn,) = traj.transitions
            assert turn.info["parse_error"] is True  # a random model cannot write the contract
            assert turn.info["loss_weight"] == 0.0
            assert 0 < len(turn.action) <= 12
    render = functools.partial(policy.renderer)
    batch = assemble_training_data(group_episodes(results), render_messages=render)
    # Every return is 0: constant groups are dropped but one is kept, and its masked
    # parse errors carry weight 0, so nothing is trained on.
    assert len(batch.data_D) == 2
    for datum in batch.data_D:
        assert datum.mask.sum() > 0
        assert not datum.weights.any()
        assert not datum.advantages.any()


def test_request_carries_context_only():
    seen: list[SampleRequest] = []

    class Spy:
        def sample(self, requests, params):
            seen.extend(requests)
            return ScriptedPolicy(scripted_debaters(2)).sample(requests, params)

    rollout([debate_env(num_agents=2, max_rounds=1)], Spy(), seeds=[0])
    assert set(seen[0].info) == {"stop", "round", "turn"}
    assert seen[1].agent == "agent_1" and seen[1].stop == ("</consensus_reason>",)
    assert format_answer("42").startswith("<solution>")


def test_a_rollout_adds_its_costs_to_the_timings_it_is_given():
    n = 3
    envs = [debate_env(num_agents=n, max_rounds=2) for _ in range(2)]
    timings = {"time/env": 1.0}
    results = rollout(
        envs, ScriptedPolicy(scripted_debaters(n, seed=2)), seeds=[0, 1], timings=timings
    )
    sampled = sum(
        len(tr.action) for r in results for t in r.trajectories.values() for tr in t.transitions
    )
    assert set(timings) == {"time/env", "time/policy", "sample/tokens"}
    assert timings["time/env"] > 1.0 and timings["time/policy"] > 0.0
    assert timings["sample/tokens"] == sampled > 0


# ------------------------------------------------------------ one policy per call


class StatelessDebater:
    """A scripted debater whose answer depends on the observation alone.

    A :class:`ScriptedDebater` draws its votes from a random state, so its
    answers depend on the order it is asked in; this one draws them from a
    fresh debater seeded by the prompt, so an episode plays the same however
    a rollout schedules its calls.
    """

    def __init__(self, index, num_agents, solution, agree):
        self.index, self.num_agents = index, num_agents
        self.solution, self.agree = solution, agree

    def __call__(self, observation, info):
        prompt = "".join(m["content"] for m in observation["messages"])
        seed = zlib.crc32(prompt.encode())
        debater = ScriptedDebater(self.index, self.num_agents, seed=seed, solution=self.solution)
        text = debater(observation, info)
        return text if self.agree else text.replace("<consensus>YES", "<consensus>NO")


def stateless_policy(num_agents, solution, agree=False):
    return ScriptedPolicy(
        {f"agent_{i}": StatelessDebater(i, num_agents, solution, agree) for i in range(num_agents)}
    )


class CallLog:
    """Every call of every policy, in order: (policy name, number of requests)."""

    def __init__(self):
        self.calls: list[tuple[str, int]] = []

    def wrap(self, name, inner):
        log = self

        class Logged:
            def sample(self, requests, params):
                log.calls.append((name, len(requests)))
                return inner.sample(requests, params)

        return Logged()


def _transcript(result):
    return {
        agent: [bytes(t.action).decode() for t in trajectory.transitions]
        for agent, trajectory in result.trajectories.items()
    }


def _alone(num_agents, rounds, assign_of_env, seed):
    """One debate played alone, turn by turn: its (agent, round) turns and each agent's texts."""
    env = debate_env(num_agents=num_agents, max_rounds=rounds)
    texts = {agent: [] for agent in env.possible_agents}

    def act(agent, obs, info):
        request = SampleRequest.for_turn(agent, obs, info)
        texts[agent].append(assign_of_env(agent).sample([request], SamplingParams())[0].text)
        return texts[agent][-1]

    seen = play_aec(env, act, seed=seed)
    turns = [(a, info.get("round")) for a, _, _, term, trunc, info in seen if not (term or trunc)]
    return turns, texts


def test_an_evaluation_in_every_role_takes_eight_calls_not_twelve():
    # The shape of a debate evaluation: 4 questions x 3 roles, the trained policy in
    # role i of debate i, the fixed opponent in the others, two rounds of three turns
    # each. Calling both policies every tick takes 6 ticks x 2 calls; calling the
    # policy with the most turns waiting takes 8 calls, each serving one policy.
    log = CallLog()
    trained = log.wrap("trained", stateless_policy(3, "trained"))
    fixed = log.wrap("fixed", stateless_policy(3, "fixed"))
    envs = [debate_env(num_agents=3, max_rounds=2) for _ in range(12)]
    assign = lambda i, agent: trained if agent == f"agent_{i % 3}" else fixed  # noqa: E731
    results = rollout(envs, assign, SamplingParams(seed=3), seeds=[i // 3 for i in range(12)])

    assert len(log.calls) == 8
    assert sum(size for _, size in log.calls) == 12 * 6  # every turn sampled exactly once
    for i, result in enumerate(results):
        for agent, texts in _transcript(result).items():
            assert len(texts) == 2
            assert all(("trained" in t) == (agent == f"agent_{i % 3}") for t in texts)


@settings(max_examples=40, deadline=None)
@given(
    num_agents=st.integers(2, 4),
    rounds=st.integers(1, 3),
    seats=st.lists(st.lists(st.integers(0, 2), min_size=4, max_size=4), min_size=1, max_size=6),
    agree=st.booleans(),
)
def test_each_episode_plays_as_alone_whatever_the_schedule(num_agents, rounds, seats, agree):
    # Any assignment of three policies to seats: each episode's turns, their order
    # and their texts are those of the episode played alone; every call serves one
    # policy; the schedule is a function of the episodes (same calls when replayed).
    names = ("p0", "p1", "p2")

    def play():
        log = CallLog()
        policies = [log.wrap(n, stateless_policy(num_agents, n, agree)) for n in names]
        envs = [debate_env(num_agents=num_agents, max_rounds=rounds) for _ in seats]
        results = rollout(
            envs,
            lambda i, agent: policies[seats[i][int(agent.split("_")[1])]],
            seeds=range(len(seats)),
        )
        return log.calls, results

    calls, results = play()
    assert play()[0] == calls
    turns = sum(len(t.transitions) for r in results for t in r.trajectories.values())
    assert sum(size for _, size in calls) == turns
    longest = max(max(len(t.transitions) for t in r.trajectories.values()) for r in results)
    assert longest <= len(calls) <= turns
    for i, result in enumerate(results):
        bare = [stateless_policy(num_agents, n, agree) for n in names]
        order, texts = _alone(
            num_agents, rounds, lambda agent, i=i, bare=bare: bare[seats[i][int(agent[-1])]], seed=i
        )
        acted = sorted(
            (t.info.get("round"), agent)
            for agent, traj in result.trajectories.items()
            for t in traj.transitions
        )
        assert acted == sorted((r, a) for a, r in order)
        assert _transcript(result) == texts  # every agent's answers, in its order
        for agent, texts in _transcript(result).items():
            owner = names[seats[i][int(agent[-1])]]
            assert all(owner in t for t in texts)


def test_a_parallel_env_steps_once_every_acting_agent_has_its_completion():
    log = CallLog()
    pa = log.wrap("pa", ScriptedPolicy({"a": FixedText("xy"), "b": FixedText("never")}))
    pb = log.wrap("pb", ScriptedPolicy({"a": FixedText("never"), "b": FixedText("xyz")}))
    results = rollout([EchoParallelEnv(), EchoParallelEnv()], {"a": pa, "b": pb}, seeds=[0, 1])
    # Each tick: one call per policy (a tie goes to the policy met first), then both envs step.
    assert log.calls == [("pa", 2), ("pb", 2), ("pa", 2), ("pb", 2)]
    together = rollout(
        [EchoParallelEnv(), EchoParallelEnv()],
        ScriptedPolicy({"a": FixedText("xy"), "b": FixedText("xyz")}),
        seeds=[0, 1],
    )
    for mixed, one in zip(results, together, strict=True):
        assert _transcript(mixed) == _transcript(one)
        assert mixed.final_rewards == one.final_rewards
        for agent in ("a", "b"):
            got = [
                (t.reward, t.done, t.info["chars"]) for t in mixed.trajectories[agent].transitions
            ]
            want = [
                (t.reward, t.done, t.info["chars"]) for t in one.trajectories[agent].transitions
            ]
            assert got == want
