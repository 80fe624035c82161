"""MAGRPO tree rollouts on the code-collaboration env (seed 004), without torch.

:func:`grow_trees` expands one tree per root environment, level by level:

1. every node of the level asks each agent for ``G`` completions; the requests of
   all nodes of all trees go to the agent's policy in **one** sampler call per
   agent and level;
2. each node forms its joint actions (:func:`baselines.magrpo.credit.joint_indices`:
   ``align`` pairs the g-th completions, ``cross`` takes the Cartesian product),
   forks its environment once per joint action, and every fork of the level
   steps in one :func:`llm_envs.code_collab.step_batch` call, so the sandbox runs
   all programs of the level as one batch;
3. a node gets one child per joint action (the stepped fork) unless it is on the
   last turn or its joint actions' mean reward exceeds the termination threshold
   (:func:`baselines.magrpo.credit.should_expand`); a node that does not expand
   keeps its stepped forks, so :func:`leaf_path` can read back the episode of any
   root-to-leaf path (for transcripts).

Without termination a tree has ``B**t`` nodes at turn t and ``B**T`` leaf joint
actions, ``B = G`` (align) or ``G**N`` (cross).

The trainer reads rewards and the reward breakdown from the env's infos; it
never parses the env's text and never changes a completion: the env steps with
exactly the sampled text.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from baselines.magrpo.credit import (
    CreditNode,
    JointMode,
    NodeCredit,
    iter_credit,
    joint_indices,
    should_expand,
)
from baselines.policies.base import Completion, Policy, SampleRequest, SamplingParams
from llm_envs.code_collab import CodeCollabEnv, step_batch
from llm_envs.contract import CONTEXT_KEYS, STOP

__all__ = [
    "TURN_METRIC_KEYS",
    "TreeNode",
    "credit_node",
    "grow_trees",
    "iter_nodes",
    "leaf_path",
    "path_record",
    "tree_metrics",
]

TURN_METRIC_KEYS = (
    "pass_rate",
    "level1",
    "level2",
    "level3",
    "bonus",
    "syntax_ok",
    "calls_aux",
)
"""Outcome infos of a joint action averaged per turn (besides the reward)."""

# Sampler calls of different levels and agents get seeds this far apart, more than
# the requests of any call, so that no two requests of one tree share a seed.
_SEED_STRIDE = 1_000_003


@dataclass(eq=False)
class TreeNode:
    """One node of a MAGRPO tree: a state, the agents' completions there, their outcomes.

    Attributes:
        turn: 0-based turn of the node.
        tree: index of the tree (its root environment) in the :func:`grow_trees` call.
        env: the environment in the node's state until the node is expanded, then
            None (its forks live on in the children).
        completions: per agent, the G sampled completions.
        joint_indices_J: per joint action, the completion index of each agent
            (agents in ``env.possible_agents`` order).
        rewards_J: the team reward of each joint action (shift included).
        infos_J: the outcome infos of each joint action (the same for every agent).
        children_J: each joint action's child node; empty when the node did not expand.
        ended_envs_J: when the node did not expand, each joint action's stepped
            fork: the environment at the end of that branch, whose history holds
            the whole root-to-leaf episode (see :func:`leaf_path`); else empty.
        stopped: the node was not on the last turn but did not expand, because its
            joint actions' mean reward exceeded the termination threshold.
    """

    turn: int
    tree: int
    env: CodeCollabEnv | None
    completions: dict[str, list[Completion]] = field(default_factory=dict)
    joint_indices_J: list[tuple[int, ...]] = field(default_factory=list)
    rewards_J: list[float] = field(default_factory=list)
    infos_J: list[dict[str, Any]] = field(default_factory=list)
    children_J: list[TreeNode] = field(default_factory=list)
    ended_envs_J: list[CodeCollabEnv] = field(default_factory=list)
    stopped: bool = False

    @property
    def expanded(self) -> bool:
        """Whether the node has children."""
        return bool(self.children_J)


def _request(env: CodeCollabEnv, agent: str) -> SampleRequest:
    info = env.infos.get(agent, {})
    context = {k: v for k, v in info.items() if k in CONTEXT_KEYS}
    messages: Any = env.observe(agent)["messages"]  # chat messages are str -> str mappings
    return SampleRequest(messages, tuple(info.get(STOP, ())), agent, context)


def _level_params(params: SamplingParams, turn: int, agent: int, num_agents: int) -> SamplingParams:
    if params.seed is None:
        return params
    return replace(params, seed=params.seed + (turn * num_agents + agent) * _SEED_STRIDE)


def grow_trees(
    roots: Sequence[CodeCollabEnv],
    samplers: Mapping[str, Policy],
    params: SamplingParams,
    *,
    group_size: int,
    joint_mode: JointMode = "align",
    num_turns: int,
    termination_threshold: float | None = None,
) -> list[TreeNode]:
    """Expand one MAGRPO tree from each reset environment (see the module docstring).

    Args:
        roots: environments already reset to their problems, at turn 0; they are
            forked, never stepped themselves.
        samplers: the policy of each agent (``env.possible_agents``).
        params: sampling parameters; with a seed, each (turn, agent) call gets its own.
        group_size: G, completions per agent per node.
        joint_mode: ``"align"`` or ``"cross"``.
        num_turns: turns to expand, at most the env's ``num_turns``.
        termination_threshold: a node whose joint actions' mean reward exceeds it
            gets no children; None expands every node to ``num_turns``.

    Returns:
        The root node of each tree, in order.
    """
    if group_size < 1:
        raise ValueError(f"group_size must be >= 1, got {group_size}")
    if not roots:
        return []
    agents = list(roots[0].possible_agents)
    missing = [a for a in agents if a not in samplers]
    if missing:
        raise KeyError(f"no sampler for agent(s) {missing}; samplers cover {sorted(samplers)}")
    for env in roots:
        if env.done or env.turn != 0:
            raise ValueError("grow_trees needs environments reset to turn 0; call reset() first")
        if num_turns > env.config.num_turns:
            raise ValueError(
                f"num_turns={num_turns} exceeds the env's num_turns={env.config.num_turns}"
            )
    combos = joint_indices(len(agents), group_size, joint_mode)
    level = [TreeNode(turn=0, tree=i, env=env) for i, env in enumerate(roots)]
    trees = list(level)
    for turn in range(num_turns):
        # 1. One sampler call per agent for every node of the level.
        for a, agent in enumerate(agents):
            requests = [_request(_env(node), agent) for node in level for _ in range(group_size)]
            got = samplers[agent].sample(requests, _level_params(params, turn, a, len(agents)))
            if len(got) != len(requests):
                raise RuntimeError(
                    f"the sampler of {agent} returned {len(got)} completions for "
                    f"{len(requests)} requests"
                )
            for i, node in enumerate(level):
                node.completions[agent] = list(got[i * group_size : (i + 1) * group_size])
        # 2. Fork once per joint action; step every fork of the level in one sandbox batch.
        forks, actions = [], []
        for node in level:
            node.joint_indices_J = list(combos)
            for combo in combos:
                forks.append(_env(node).fork())
                actions.append(
                    {
                        agent: node.completions[agent][combo[a]].text
                        for a, agent in enumerate(agents)
                    }
                )
        results = iter(zip(forks, step_batch(forks, actions), strict=True))
        # 3. Rewards, then children for the nodes that go on.
        next_level = []
        for node in level:
            stepped = [next(results) for _ in combos]
            node.rewards_J = [float(result[1][agents[-1]]) for _, result in stepped]
            node.infos_J = [dict(result[4][agents[-1]]) for _, result in stepped]
            node.env = None  # the forks hold the state from here on
            if should_expand(node.rewards_J, turn, num_turns, termination_threshold):
                node.children_J = [
                    TreeNode(turn=turn + 1, tree=node.tree, env=fork) for fork, _ in stepped
                ]
                next_level.extend(node.children_J)
            else:
                node.stopped = turn + 1 < num_turns
                node.ended_envs_J = [fork for fork, _ in stepped]
        level = next_level
        if not level:
            break
    return trees


def _env(node: TreeNode) -> CodeCollabEnv:
    if node.env is None:
        raise RuntimeError(f"node at turn {node.turn} has no environment (already expanded)")
    return node.env


def leaf_path(root: TreeNode, joint: int = 0) -> tuple[list[TreeNode], CodeCollabEnv]:
    """Follow joint action ``joint`` at every node from ``root`` to the end of its branch.

    Returns:
        The nodes on the path (root first) and the environment after the last
        node's joint action ``joint``: its ``history`` and ``record()`` hold the
        path's episode, every turn of it.

    Raises:
        ValueError: the tree has not been grown, or ``joint`` is not a joint
            action of some node on the path.
    """
    path, node = [root], root
    while True:
        if not 0 <= joint < len(node.joint_indices_J):
            raise ValueError(
                f"joint={joint} is not a joint action of the node at turn {node.turn}, which "
                f"has {len(node.joint_indices_J)}; grow the tree first, or pick a smaller index"
            )
        if not node.expanded:
            return path, node.ended_envs_J[joint]
        node = node.children_J[joint]
        path.append(node)


def path_record(
    root: TreeNode, credit: NodeCredit | None = None, *, joint: int = 0
) -> dict[str, Any]:
    """The episode along :func:`leaf_path` as an :class:`~llm_envs.records.EpisodeRecord`.

    The env's record (prompts, code, test results, feedback per turn and agent),
    with each completion's ``stop_reason`` and ``completion_tokens`` added to its
    turn's details, and with ``credit`` (the tree's :class:`NodeCredit`) its
    ``advantage`` and ``return`` too. The summary gains ``path_joint_action``
    (``joint``) and ``tree_joint_actions`` (how many the tree stepped).
    """
    nodes, env = leaf_path(root, joint)
    record: dict[str, Any] = dict(env.unwrapped.record())
    agents = list(env.possible_agents)
    added: dict[tuple[int, str], dict[str, Any]] = {}
    node_credit = credit
    for node in nodes:
        combo = node.joint_indices_J[joint]
        for a, agent in enumerate(agents):
            g = combo[a]
            completion = node.completions[agent][g]
            extra: dict[str, Any] = {
                "stop_reason": completion.stop_reason,
                "completion_tokens": len(completion.tokens),
            }
            if node_credit is not None:
                extra["advantage"] = node_credit.advantages_A_G[a][g]
                extra["return"] = node_credit.returns_A_G[a][g]
            added[(node.turn + 1, agent)] = extra
        node_credit = node_credit.children_J[joint] if node_credit is not None else None
    for turn in record["turns"]:
        turn["details"] = {**turn["details"], **added.get((turn["round"], turn["agent"]), {})}
    record["summary"] = {
        **record["summary"],
        "path_joint_action": joint,
        "tree_joint_actions": sum(len(n.rewards_J) for n in iter_nodes(root)),
    }
    return record


def iter_nodes(node: TreeNode) -> Iterator[TreeNode]:
    """Every node of a tree in pre-order (as :func:`baselines.magrpo.credit.iter_credit` walks)."""
    yield node
    for child in node.children_J:
        yield from iter_nodes(child)


def credit_node(node: TreeNode) -> CreditNode:
    """The :class:`~baselines.magrpo.credit.CreditNode` view of a sampled tree."""
    group_size = len(next(iter(node.completions.values())))
    return CreditNode(
        rewards_J=tuple(node.rewards_J),
        joint_indices_J=tuple(node.joint_indices_J),
        group_size=group_size,
        children_J=tuple(credit_node(child) for child in node.children_J),
    )


def tree_metrics(
    trees: Sequence[TreeNode],
    credits: Sequence[NodeCredit] | None = None,
    *,
    prefix: str = "env",
) -> dict[str, float]:
    """Per-turn means over every joint action of the trees; with credits, returns too.

    Names: ``{prefix}/turn_{t}/reward`` (1-based t), ``.../pass_rate``,
    ``.../level1`` ... ``.../bonus``, ``.../solved`` (all tests passed),
    ``.../syntax_ok``, ``.../calls_aux``, ``.../nodes``, ``.../joint_actions``,
    ``.../stopped_frac`` (nodes before the last turn that did not expand), and
    with ``credits`` ``.../return`` (mean joint-action return). Across turns:
    ``{prefix}/all/reward/total`` (mean joint-action reward) and
    ``{prefix}/all/reward/final`` (mean reward of the joint actions that end a
    branch).
    """
    per_turn: dict[int, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    all_rewards: list[float] = []
    final_rewards: list[float] = []
    for index, root in enumerate(trees):
        credit_by_node: dict[int, NodeCredit] = {}
        if credits is not None:
            credit_by_node = {
                position: c
                for position, (_, _, c) in enumerate(iter_credit(credit_node(root), credits[index]))
            }
        for position, node in enumerate(iter_nodes(root)):
            values = per_turn[node.turn]
            values["nodes"].append(1.0)
            values["reward"].extend(node.rewards_J)
            all_rewards.extend(node.rewards_J)
            if not node.expanded:
                final_rewards.extend(node.rewards_J)
            if node.expanded or node.stopped:
                values["stopped_frac"].append(float(node.stopped))
            for info in node.infos_J:
                for key in TURN_METRIC_KEYS:
                    if key in info:
                        values[key].append(float(info[key]))
                values["solved"].append(float(info.get("pass_rate", 0.0) == 1.0))
            if position in credit_by_node:
                values["return"].extend(credit_by_node[position].returns_J)
    metrics: dict[str, float] = {}
    for turn, values in sorted(per_turn.items()):
        name = f"{prefix}/turn_{turn + 1}"
        metrics[f"{name}/nodes"] = float(len(values.pop("nodes")))
        metrics[f"{name}/joint_actions"] = float(len(values["reward"]))
        for key, seq in values.items():
            if seq:
                metrics[f"{name}/{key}"] = float(np.mean(seq))
    if all_rewards:
        metrics[f"{prefix}/all/reward/total"] = float(np.mean(all_rewards))
        metrics[f"{prefix}/all/reward/final"] = float(np.mean(final_rewards))
    return metrics
