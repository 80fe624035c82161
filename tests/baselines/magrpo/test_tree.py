"""MAGRPO tree rollouts with scripted policies: shapes, batching, termination, credit.

On CodeCollab-v0 (batched sandbox steps) and on a plain ParallelEnv with ``fork()``.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import pytest
from pettingzoo import ParallelEnv

from baselines.magrpo.credit import tree_credit, tree_shape
from baselines.magrpo.tree import (
    TreeNode,
    batch_step_of,
    credit_node,
    grow_trees,
    iter_nodes,
    leaf_path,
    path_record,
    tree_metrics,
)
from baselines.samplers import ScriptedPolicy
from baselines.samplers.base import Completion, SampleRequest, SamplingParams
from llm_envs.code_collab import parallel_env
from llm_envs.spaces import UnicodeText, chat_observation_space
from llm_envs.tasks import load_coophumaneval

# CoopHumanEval/0 (x_or_y) texts and their team rewards (docs/envs/code_collab.md):
# right aux + main using it: 4.0; wrong aux ("big" for "prime") + main using it: 3.4.
RIGHT_AUX = "def aux(n):\n    return n > 1 and all(n % k for k in range(2, n))"
WRONG_AUX = "def aux(n):\n    return n > 10"
USES_AUX = "def x_or_y(n, x, y):\n    return x if aux(n) else y"
PROSE = "I am not sure how to do this."  # no code: reward 0, nothing runs


class Scripted:
    """A scripted sampler that records its calls.

    Turn-1 answers cycle through ``texts`` by request index; later turns repeat the
    agent's previous answer (the last assistant message of its observation).
    """

    def __init__(self, texts: Sequence[str]) -> None:
        self.texts = list(texts)
        self.calls: list[int] = []

    def sample(self, requests: Sequence[SampleRequest], params: SamplingParams) -> list[Completion]:
        self.calls.append(len(requests))
        out = []
        for i, request in enumerate(requests):
            said = [m["content"] for m in request.messages if m["role"] == "assistant"]
            text = said[-1] if said else self.texts[i % len(self.texts)]
            tokens = tuple(text.encode()[:4])
            out.append(Completion((1, 2, 3), tokens, (0.0,) * len(tokens), text, "eos"))
        return out


@pytest.fixture(scope="module")
def x_or_y():
    return next(p for p in load_coophumaneval() if p.task_id == "CoopHumanEval/0")


def roots(problem, count=1, *, num_turns=2, num_agents=2):
    envs = []
    for _ in range(count):
        env = parallel_env(problems=[problem], num_turns=num_turns, num_agents=num_agents)
        env.reset(seed=0)
        envs.append(env)
    return envs


def nodes_per_turn(tree: TreeNode) -> list[int]:
    counts: dict[int, int] = {}
    for node in iter_nodes(tree):
        counts[node.turn] = counts.get(node.turn, 0) + 1
    return [counts[t] for t in sorted(counts)]


def last_turn_joint_actions(tree: TreeNode) -> int:
    last = max(node.turn for node in iter_nodes(tree))
    return sum(len(node.rewards_J) for node in iter_nodes(tree) if node.turn == last)


@pytest.mark.parametrize(
    ("mode", "num_agents", "group_size", "num_turns"),
    [
        ("align", 2, 2, 2),  # G^T = 4 leaves
        ("align", 2, 3, 2),  # 9
        ("align", 2, 2, 3),  # 8
        ("cross", 2, 2, 1),  # G^(N*T) = 4
        ("cross", 2, 2, 2),  # 16
        ("cross", 2, 3, 2),  # 81
        ("cross", 1, 3, 2),  # one agent: 9, as align
    ],
)
def test_full_trees_have_the_documented_shape(x_or_y, mode, num_agents, group_size, num_turns):
    samplers = {"helper": Scripted([PROSE]), "main": Scripted([PROSE])}
    (tree,) = grow_trees(
        roots(x_or_y, num_turns=num_turns, num_agents=num_agents),
        samplers,
        SamplingParams(),
        group_size=group_size,
        joint_mode=mode,
        num_turns=num_turns,
    )
    nodes, leaves = tree_shape(num_agents, group_size, num_turns, mode)
    assert nodes_per_turn(tree) == nodes
    assert last_turn_joint_actions(tree) == leaves
    assert leaves == (
        group_size**num_turns if mode == "align" else group_size ** (num_agents * num_turns)
    )
    for node in iter_nodes(tree):
        assert all(len(c) == group_size for c in node.completions.values())
        assert node.env is None  # released after expansion
    # one sampler call per agent and turn, for every node of the turn at once
    for agent in ("helper", "main")[2 - num_agents :]:
        assert samplers[agent].calls == [n * group_size for n in nodes]


def test_sampling_is_batched_across_trees(x_or_y):
    samplers = {"helper": Scripted([PROSE]), "main": Scripted([PROSE])}
    trees = grow_trees(
        roots(x_or_y, count=3), samplers, SamplingParams(), group_size=2, num_turns=2
    )
    assert [t.tree for t in trees] == [0, 1, 2]
    # turn 1: 3 roots x G = 6 requests; turn 2: 3 x 2 children x G = 12 requests
    assert samplers["helper"].calls == [6, 12]
    assert samplers["main"].calls == [6, 12]


def test_roots_are_forked_not_stepped(x_or_y):
    envs = roots(x_or_y)
    samplers = {"helper": Scripted([RIGHT_AUX]), "main": Scripted([USES_AUX])}
    grow_trees(envs, samplers, SamplingParams(), group_size=2, num_turns=2)
    assert envs[0].turn == 0 and not envs[0].history


def test_joint_actions_pair_the_sampled_texts(x_or_y):
    samplers = {"helper": Scripted([RIGHT_AUX, WRONG_AUX]), "main": Scripted([USES_AUX, PROSE])}
    (tree,) = grow_trees(
        roots(x_or_y), samplers, SamplingParams(), group_size=2, joint_mode="cross", num_turns=1
    )
    assert tree.joint_indices_J == [(0, 0), (0, 1), (1, 0), (1, 1)]
    # (right, uses) 4.0; (right, prose) 0.4; (wrong, uses) 3.4; (wrong, prose) 0.4
    assert tree.rewards_J == pytest.approx([4.0, 0.4, 3.4, 0.4])
    assert [info["pass_rate"] for info in tree.infos_J] == pytest.approx([1.0, 0.0, 0.4, 0.0])
    assert not tree.expanded and not tree.stopped  # the last turn is not a stop


def test_termination_prunes_nodes_whose_siblings_do_well(x_or_y):
    # align, G = 2, three turns, threshold 3.8. Each agent repeats its first answer.
    #   root: (right, uses) 4.0 and (wrong, uses) 3.4, mean 3.7: expands
    #   child 0 (right aux): 4.0, 4.0, mean 4.0 > 3.8: stops
    #   child 1 (wrong aux): 3.4, 3.4, mean 3.4: expands into two turn-3 nodes
    samplers = {"helper": Scripted([RIGHT_AUX, WRONG_AUX]), "main": Scripted([USES_AUX])}
    (tree,) = grow_trees(
        roots(x_or_y, num_turns=3),
        samplers,
        SamplingParams(),
        group_size=2,
        num_turns=3,
        termination_threshold=3.8,
    )
    assert tree.rewards_J == pytest.approx([4.0, 3.4])
    child0, child1 = tree.children_J
    assert child0.rewards_J == pytest.approx([4.0, 4.0]) and child0.stopped
    assert not child0.children_J
    assert child1.rewards_J == pytest.approx([3.4, 3.4]) and child1.expanded
    assert nodes_per_turn(tree) == [1, 2, 2]
    assert samplers["helper"].calls == [2, 4, 4]
    # Credit, gamma 0.9: child 0 returns (4, 4); child 1's children are leaves at 3.4, so
    # child 1 returns 3.4 + 0.9*3.4 = 6.46 each; root: 4 + 0.9*4 = 7.6, 3.4 + 0.9*6.46 = 9.214.
    # (Stopping truncates a branch's future reward: see docs/magrpo.md on reward_shift.)
    credit = tree_credit(credit_node(tree), discount=0.9)
    assert credit.returns_J == pytest.approx((7.6, 9.214))
    assert credit.advantages_A_G[0] == pytest.approx((-0.807, 0.807))

    metrics = tree_metrics([tree], [credit])
    assert metrics["env/turn_1/nodes"] == 1 and metrics["env/turn_2/nodes"] == 2
    assert metrics["env/turn_2/stopped_frac"] == pytest.approx(0.5)  # child 0 of 2
    assert metrics["env/turn_3/joint_actions"] == 4
    assert metrics["env/turn_1/reward"] == pytest.approx(3.7)
    assert metrics["env/turn_1/solved"] == pytest.approx(0.5)
    assert metrics["env/turn_2/pass_rate"] == pytest.approx((1.0 + 1.0 + 0.4 + 0.4) / 4)
    assert metrics["env/turn_1/return"] == pytest.approx((7.6 + 9.214) / 2)
    # final joint actions: child 0's two (4.0) and the four of turn 3 (3.4)
    assert metrics["env/all/reward/final"] == pytest.approx((2 * 4.0 + 4 * 3.4) / 6)


def test_with_shifted_rewards_termination_favours_the_solved_branch(x_or_y):
    # The same tree with reward_shift -4 (a perfect turn scores 0) and threshold -0.2:
    #   root (0, -0.6), mean -0.3: expands; child 0 (0, 0) mean 0 > -0.2: stops;
    #   child 1 (-0.6, -0.6) expands; its leaves earn -0.6.
    # child 1 returns -0.6 + 0.9*(-0.6) = -1.14; root: 0 + 0.9*0 = 0, -0.6 + 0.9*(-1.14)
    # = -1.626; mean -0.813: A = (0.813, -0.813), the solved branch wins (unshifted it lost).
    env = parallel_env(problems=[x_or_y], num_turns=3, reward_shift=-4.0)
    env.reset(seed=0)
    samplers = {"helper": Scripted([RIGHT_AUX, WRONG_AUX]), "main": Scripted([USES_AUX])}
    (tree,) = grow_trees(
        [env], samplers, SamplingParams(), group_size=2, num_turns=3, termination_threshold=-0.2
    )
    assert tree.rewards_J == pytest.approx([0.0, -0.6])
    assert tree.children_J[0].stopped and tree.children_J[1].expanded
    credit = tree_credit(credit_node(tree), discount=0.9)
    assert credit.returns_J == pytest.approx((0.0, -1.626))
    assert credit.advantages_A_G[0] == pytest.approx((0.813, -0.813))


def test_threshold_above_every_mean_expands_fully(x_or_y):
    samplers = {"helper": Scripted([RIGHT_AUX]), "main": Scripted([USES_AUX])}
    (tree,) = grow_trees(
        roots(x_or_y),
        samplers,
        SamplingParams(),
        group_size=2,
        num_turns=2,
        termination_threshold=4.0,  # rewards are at most 4.0: "exceeds" never holds
    )
    assert nodes_per_turn(tree) == [1, 2]


def test_tree_metrics_report_levels_and_bonus(x_or_y):
    samplers = {"helper": Scripted([WRONG_AUX]), "main": Scripted([USES_AUX])}
    (tree,) = grow_trees(roots(x_or_y), samplers, SamplingParams(), group_size=2, num_turns=1)
    metrics = tree_metrics([tree], prefix="eval")
    # wrong aux + main using it: level1 1.0, level2 0.5, level3 0.4, bonus 1.5 = 3.4
    assert metrics["eval/turn_1/level1"] == pytest.approx(1.0)
    assert metrics["eval/turn_1/level2"] == pytest.approx(0.5)
    assert metrics["eval/turn_1/level3"] == pytest.approx(0.4)
    assert metrics["eval/turn_1/bonus"] == pytest.approx(1.5)
    assert metrics["eval/turn_1/reward"] == pytest.approx(3.4)
    assert metrics["eval/turn_1/calls_aux"] == 1.0
    assert "eval/turn_1/return" not in metrics  # no credits given


def test_path_record_is_the_episode_along_one_branch_with_its_credit(x_or_y):
    # The termination tree above: joint action 0 (right aux) stops after turn 2 with the
    # problem solved; joint action 1 (wrong aux) goes on to turn 3.
    samplers = {"helper": Scripted([RIGHT_AUX, WRONG_AUX]), "main": Scripted([USES_AUX])}
    (tree,) = grow_trees(
        roots(x_or_y, num_turns=3),
        samplers,
        SamplingParams(),
        group_size=2,
        num_turns=3,
        termination_threshold=3.8,
    )
    nodes, env = leaf_path(tree)
    assert nodes == [tree, tree.children_J[0]] and len(env.history) == 2
    nodes, env = leaf_path(tree, joint=1)
    assert [n.turn for n in nodes] == [0, 1, 2] and len(env.history) == 3
    credit = tree_credit(credit_node(tree), discount=0.9)

    record = path_record(tree, credit)
    assert record["env"] == "code_collab_v0" and record["summary"]["rewards"] == [4.0, 4.0]
    assert record["summary"]["tree_joint_actions"] == 2 + 4 + 4
    assert [(t["agent"], t["round"]) for t in record["turns"]] == [
        ("helper", 1), ("main", 1), ("helper", 2), ("main", 2)
    ]  # fmt: skip
    helper1, main1, helper2, main2 = (t["details"] for t in record["turns"])
    assert helper1["code"] == RIGHT_AUX and main1["tests"] == "5/5 passed"
    assert all(line.startswith("passed: assert") for line in main1["test_results"])
    # credit of the path's completions: the root's joint action 0 (7.6 vs 9.214)
    assert helper1["advantage"] == pytest.approx(-0.807) and main1["return"] == pytest.approx(7.6)
    assert helper2["advantage"] == pytest.approx(0.0) and main2["return"] == pytest.approx(4.0)
    assert helper1["stop_reason"] == "eos" and helper1["completion_tokens"] == 4
    # without credit (evaluation), the same episode without advantages
    plain = path_record(tree, joint=1)
    assert plain["summary"]["rewards"] == pytest.approx([3.4, 3.4, 3.4])
    assert "advantage" not in plain["turns"][0]["details"]
    with pytest.raises(ValueError, match="joint=2 is not a joint action"):
        leaf_path(tree, joint=2)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"num_turns": 3}, ValueError, "exceeds the env's num_turns"),
        ({"group_size": 0}, ValueError, "group_size must be >= 1"),
    ],
)
def test_bad_arguments(x_or_y, kwargs, error, message):
    samplers = {"helper": Scripted([PROSE]), "main": Scripted([PROSE])}
    arguments = {"group_size": 2, "num_turns": 2, **kwargs}
    with pytest.raises(error, match=message):
        grow_trees(roots(x_or_y), samplers, SamplingParams(), **arguments)


def test_missing_sampler_and_unreset_env(x_or_y):
    with pytest.raises(KeyError, match="no sampler for agent"):
        grow_trees(
            roots(x_or_y), {"main": Scripted([PROSE])}, SamplingParams(), group_size=2, num_turns=2
        )
    fresh = parallel_env(problems=[x_or_y], num_turns=2)
    samplers = {"helper": Scripted([PROSE]), "main": Scripted([PROSE])}
    with pytest.raises(ValueError, match="reset"):
        grow_trees([fresh], samplers, SamplingParams(), group_size=2, num_turns=2)


# ------------------------------------------------- any ParallelEnv that can fork()


class Tally(ParallelEnv):
    """Two agents each say a number per turn; the team reward is their sum.

    No ``observe`` and no ``config``: the tree reads the roots from their reset
    results and everything else from step results. With ``end_at``, a turn whose
    sum reaches it ends the episode.
    """

    metadata = {"name": "tally_v0"}  # noqa: RUF012

    def __init__(self, num_turns: int = 2, end_at: int | None = None) -> None:
        self.possible_agents = ["a", "b"]
        self.agents: list[str] = []
        self.num_turns, self.end_at = num_turns, end_at
        self.history: list[dict[str, str]] = []

    def observation_space(self, agent):
        return chat_observation_space()

    def action_space(self, agent):
        return UnicodeText()

    def _observations(self):
        said = f"said so far: {self.history}"
        return {a: {"messages": [{"role": "user", "content": said}]} for a in self.agents}

    def reset(self, seed=None, options=None):
        self.agents, self.history = list(self.possible_agents), []
        return self._observations(), {a: {"stop": ["\n"], "turn": 0} for a in self.agents}

    def step(self, actions):
        total = sum(int(text) for text in actions.values())
        self.history.append(dict(actions))
        done = len(self.history) >= self.num_turns or (
            self.end_at is not None and total >= self.end_at
        )
        acting = list(self.agents)
        info = {"stop": ["\n"], "turn": len(self.history), "total": total, "big": total >= 5}
        if done:
            self.agents = []
        return (
            self._observations(),
            dict.fromkeys(acting, float(total)),
            dict.fromkeys(acting, done),
            dict.fromkeys(acting, False),
            {a: {**info, "note": "text is not a metric"} for a in acting},
        )

    def fork(self):
        return copy.deepcopy(self)


class Cycle:
    """A text agent that answers its texts in turn, whatever it is asked."""

    def __init__(self, *texts: str) -> None:
        self.texts, self.calls = texts, 0

    def __call__(self, observation, info):
        self.calls += 1
        return self.texts[(self.calls - 1) % len(self.texts)]


def nested_approx(rows):
    return tuple(pytest.approx(row) for row in rows)


def tally_roots(count=1, **kwargs):
    envs = [Tally(**kwargs) for _ in range(count)]
    return envs, [env.reset(seed=0) for env in envs]


def tally_policies():
    policy = ScriptedPolicy({"a": Cycle("1", "2"), "b": Cycle("0", "3")})
    return {"a": policy, "b": policy}


def test_a_plain_parallel_env_with_fork_grows_a_tree():
    # align, G = 2: every node's joint actions are ("1", "0") = 1 and ("2", "3") = 5.
    envs, reset = tally_roots(num_turns=2)
    (tree,) = grow_trees(
        envs, tally_policies(), SamplingParams(), group_size=2, num_turns=2, reset_results=reset
    )
    nodes, leaves = tree_shape(2, 2, 2, "align")
    assert nodes_per_turn(tree) == nodes and last_turn_joint_actions(tree) == leaves
    assert tree.rewards_J == [1.0, 5.0]
    assert all(child.rewards_J == [1.0, 5.0] for child in tree.children_J)
    assert envs[0].history == []  # the root was forked, not stepped
    # Credit, gamma 0.9: children return (1, 5), mean 3; root 1 + 2.7 and 5 + 2.7.
    credit = tree_credit(credit_node(tree), discount=0.9)
    assert credit.returns_J == pytest.approx((3.7, 7.7))
    assert credit.advantages_A_G == nested_approx(((-2.0, 2.0), (-2.0, 2.0)))
    assert credit.children_J[0].advantages_A_G == nested_approx(((-2.0, 2.0), (-2.0, 2.0)))
    # Metrics: every numeric outcome info (not "turn", a context key; not "note", text).
    metrics = tree_metrics([tree], [credit])
    assert metrics["env/turn_1/total"] == 3.0 and metrics["env/turn_1/big"] == 0.5
    assert metrics["env/turn_2/joint_actions"] == 4
    assert metrics["env/turn_1/return"] == pytest.approx(5.7)
    assert not any(k.endswith(("/turn", "/note", "/solved")) for k in metrics)
    nodes_on_path, env = leaf_path(tree, joint=1)
    assert len(nodes_on_path) == 2 and env.history == [{"a": "2", "b": "3"}] * 2


def test_a_plain_parallel_env_in_cross_mode():
    # Joint actions (a, b): (1, 0) = 1, (1, 3) = 4, (2, 0) = 2, (2, 3) = 5.
    envs, reset = tally_roots(num_turns=1)
    (tree,) = grow_trees(
        envs,
        tally_policies(),
        SamplingParams(),
        group_size=2,
        joint_mode="cross",
        num_turns=1,
        reset_results=reset,
    )
    assert tree.rewards_J == [1.0, 4.0, 2.0, 5.0]
    credit = tree_credit(credit_node(tree))
    # a's completions: (1 + 4)/2, (2 + 5)/2; b's: (1 + 2)/2, (4 + 5)/2.
    assert credit.returns_A_G == nested_approx(((2.5, 3.5), (1.5, 4.5)))
    assert credit.advantages_A_G == nested_approx(((-0.5, 0.5), (-1.5, 1.5)))


def test_a_branch_whose_episode_ends_gets_no_child():
    # The sum 5 ends the episode: joint action 1 ends at every node, joint action 0 goes on.
    envs, reset = tally_roots(num_turns=3, end_at=5)
    (tree,) = grow_trees(
        envs, tally_policies(), SamplingParams(), group_size=2, num_turns=3, reset_results=reset
    )
    assert nodes_per_turn(tree) == [1, 1, 1]
    assert tree.children_J[1] is None and tree.ended_envs_J[0] is None
    assert not tree.stopped  # it expanded; one branch just ended
    nodes_on_path, env = leaf_path(tree, joint=1)
    assert nodes_on_path == [tree] and env.history == [{"a": "2", "b": "3"}]
    nodes_on_path, env = leaf_path(tree, joint=0)
    assert len(nodes_on_path) == 3 and len(env.history) == 3
    # Credit: turn 3 returns (1, 5); turn 2: 1 + 0.9*3 = 3.7 and 5 (no child);
    # root: 1 + 0.9*mean(3.7, 5) = 4.915 and 5.
    credit = tree_credit(credit_node(tree), discount=0.9)
    assert credit.returns_J == pytest.approx((4.915, 5.0))
    assert credit.children_J[1] is None
    assert credit.children_J[0].returns_J == pytest.approx((3.7, 5.0))
    metrics = tree_metrics([tree], [credit])
    assert metrics["env/all/reward/final"] == pytest.approx((5 + 5 + 1 + 5) / 4)


def test_an_env_class_with_a_static_step_batch_is_stepped_in_batches():
    calls: list[int] = []

    class BatchedTally(Tally):
        @staticmethod
        def step_batch(envs, actions):
            calls.append(len(envs))
            return [env.step(a) for env, a in zip(envs, actions, strict=True)]

    envs = [BatchedTally(num_turns=2) for _ in range(2)]
    reset = [env.reset(seed=0) for env in envs]
    grow_trees(
        envs, tally_policies(), SamplingParams(), group_size=2, num_turns=2, reset_results=reset
    )
    assert calls == [4, 8]  # one call per level: 2 roots x 2, then 4 nodes x 2
    assert batch_step_of(Tally()) is None


def test_code_collab_forks_are_stepped_by_step_batch(x_or_y):
    from llm_envs.code_collab import CodeCollabEnv

    assert batch_step_of(roots(x_or_y)[0]) is CodeCollabEnv.step_batch


def test_an_env_without_observe_needs_its_reset_results():
    envs, _ = tally_roots()
    with pytest.raises(TypeError, match="reset_results"):
        grow_trees(envs, tally_policies(), SamplingParams(), group_size=2, num_turns=2)
    with pytest.raises(ValueError, match="reset_results for 1 roots"):
        grow_trees(
            envs, tally_policies(), SamplingParams(), group_size=2, num_turns=2, reset_results=[]
        )
