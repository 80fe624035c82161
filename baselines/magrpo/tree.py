"""MAGRPO tree rollouts on any forkable PettingZoo ParallelEnv (the MAGRPO paper), without torch.

:func:`grow_trees` expands one tree per root environment, level by level:

1. every node of the level asks each agent for ``G`` completions; the requests of
   all nodes of all trees go to the agent's policy in **one** sampler call per
   agent and level;
2. each node forms its joint actions (:func:`baselines.magrpo.credit.joint_indices`:
   ``align`` pairs the g-th completions, ``cross`` takes the Cartesian product),
   forks its environment once per joint action and steps every fork. Forks whose
   environment type has a batched step (:func:`batch_step_of`) are stepped
   together in one call: the code-collaboration env's
   :func:`llm_envs.code_collab.step_batch` runs all programs of the level as one
   sandbox batch; any other env steps each fork with its own ``step``;
3. a joint action gets a child node (its stepped fork) unless its node is on the
   last turn, the node's joint actions' mean reward exceeds the termination
   threshold (:func:`baselines.magrpo.credit.should_expand`), or the fork's
   episode has ended (no live agents). A joint action without a child keeps its
   stepped fork, so :func:`leaf_path` can read back the episode of any
   root-to-leaf path (for transcripts).

Without termination a tree has ``B**t`` nodes at turn t and ``B**T`` leaf joint
actions, ``B = G`` (align) or ``G**N`` (cross).

What the tree needs from an environment (a PettingZoo ``ParallelEnv``):

* ``possible_agents``, ``agents`` and ``step(actions)``; every agent acts at every turn;
* ``fork()``, an independent copy mid-episode (``copy.deepcopy`` where there is none);
* at the roots, what each agent sees: pass ``reset_results`` (what ``reset``
  returned for each root), or use an env with ``observe(agent)`` and an
  ``infos`` dict (as :class:`~llm_envs.code_collab.CodeCollabEnv`); below the
  roots, the step results are used;
* the team reward of a joint action is the mean of the agents' rewards (in a
  cooperative env every agent gets the same: that reward); its outcome infos
  are the agents' infos merged in agent order;
* for :func:`path_record`, ``unwrapped.record()`` (an
  :class:`~llm_envs.records.EpisodeRecord`).

The trainer reads rewards and outcome infos from the env's step results; it
never parses the env's text and never changes a completion: the env steps with
exactly the sampled text.
"""

from __future__ import annotations

import copy
import math
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeAlias

import numpy as np

from baselines.data.episode_metrics import numeric_info, warn_reserved_info_keys
from baselines.magrpo.credit import (
    CreditNode,
    JointMode,
    NodeCredit,
    iter_credit,
    joint_indices,
    should_expand,
)
from baselines.samplers.base import Completion, Policy, SampleRequest, SamplingParams

__all__ = [
    "TREE_METRICS",
    "BatchStep",
    "TreeNode",
    "TreeValues",
    "batch_step_of",
    "credit_node",
    "grow_trees",
    "iter_nodes",
    "leaf_path",
    "merge_tree_values",
    "path_record",
    "summarize_tree_values",
    "tree_metric_values",
    "tree_metrics",
]

Env: TypeAlias = Any
"""A PettingZoo ``ParallelEnv`` (untyped: pettingzoo ships no type information)."""

StepResult: TypeAlias = tuple[
    dict[str, Any], dict[str, float], dict[str, bool], dict[str, bool], dict[str, Any]
]

BatchStep: TypeAlias = Callable[[Sequence[Any], Sequence[Mapping[str, str]]], Sequence[StepResult]]
"""``step(envs, actions)``: step many environments at once, one step result per env,
as ``[env.step(a) for env, a in zip(envs, actions)]`` would."""

# Sampler calls of different levels and agents get seeds this far apart, more than
# the requests of any call, so that no two requests of one tree share a seed.
_SEED_STRIDE = 1_000_003


def batch_step_of(env: Any) -> BatchStep | None:
    """The batched step of ``env``'s class, or None: then each fork steps alone.

    An env class offers one as a static method ``step_batch(envs, actions)``
    returning the ``(observations, rewards, terminations, truncations,
    infos)`` of each env, as :class:`llm_envs.code_collab.CodeCollabEnv` does
    (its programs then run in one sandbox batch).
    """
    own = getattr(type(env), "step_batch", None)
    return own if callable(own) else None


@dataclass(eq=False)
class TreeNode:
    """One node of a MAGRPO tree: a state, the agents' completions there, their outcomes.

    Attributes:
        turn: 0-based turn of the node (counted from the root).
        tree: index of the tree (its root environment) in the :func:`grow_trees` call.
        env: the environment in the node's state until the node is expanded, then
            None (its forks live on in the children).
        observations: what each agent sees at the node (until it is expanded).
        infos: each agent's info at the node (its context keys go into the requests).
        completions: per agent, the G sampled completions.
        joint_indices_J: per joint action, the completion index of each agent
            (agents in ``env.possible_agents`` order).
        rewards_J: the team reward of each joint action (shift included).
        infos_J: the outcome infos of each joint action (the agents' infos merged).
        children_J: each joint action's child node, or None where the joint
            action has none (its episode ended); empty when no joint action has one.
        ended_envs_J: each joint action's stepped fork where it has no child (None
            where it has one): the environment at the end of that branch, whose
            history holds the whole root-to-leaf episode (see :func:`leaf_path`);
            empty when every joint action has a child.
        stopped: the node was not on the last turn but did not expand, because its
            joint actions' mean reward exceeded the termination threshold.
    """

    turn: int
    tree: int
    env: Env | None
    observations: dict[str, Any] = field(default_factory=dict)
    infos: dict[str, dict[str, Any]] = field(default_factory=dict)
    completions: dict[str, list[Completion]] = field(default_factory=dict)
    joint_indices_J: list[tuple[int, ...]] = field(default_factory=list)
    rewards_J: list[float] = field(default_factory=list)
    infos_J: list[dict[str, Any]] = field(default_factory=list)
    children_J: list[TreeNode | None] = field(default_factory=list)
    ended_envs_J: list[Env | None] = field(default_factory=list)
    stopped: bool = False

    @property
    def expanded(self) -> bool:
        """Whether the node has children."""
        return bool(self.children_J)

    def child(self, j: int) -> TreeNode | None:
        """The child node of joint action ``j``, or None."""
        return self.children_J[j] if self.children_J else None


def _level_params(params: SamplingParams, turn: int, agent: int, num_agents: int) -> SamplingParams:
    if params.seed is None:
        return params
    return replace(params, seed=params.seed + (turn * num_agents + agent) * _SEED_STRIDE)


def _root_view(
    env: Env, agents: Sequence[str], reset_result: Any | None
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """What each agent sees at a root: from its reset result, or the env's ``observe``/``infos``."""
    if reset_result is not None:
        observations, infos = reset_result
        return dict(observations), {a: dict(infos.get(a, {})) for a in agents}
    if not callable(getattr(env, "observe", None)):
        raise TypeError(
            f"{type(env).__name__} has no observe(agent), so grow_trees cannot read what the "
            "agents see at the root; pass reset_results=[env.reset(...) for env in roots]"
        )
    infos = getattr(env, "infos", {})
    return {a: env.observe(a) for a in agents}, {a: dict(infos.get(a, {})) for a in agents}


def _check_root(env: Env, agents: Sequence[str], num_turns: int) -> None:
    if list(env.possible_agents) != list(agents):
        raise ValueError(
            f"every root needs the same agents; got {list(env.possible_agents)} and {list(agents)}"
        )
    if not env.agents:
        raise ValueError(
            "grow_trees needs environments reset to their problems; call reset() first"
        )
    if sorted(env.agents) != sorted(agents):
        raise ValueError(f"every agent must act at a root; live agents are {list(env.agents)}")
    # An env that declares its horizon (config.num_turns, turn) is checked up front.
    horizon = getattr(getattr(env, "config", None), "num_turns", None)
    turn = getattr(env, "turn", 0)
    if isinstance(horizon, int) and isinstance(turn, int):
        if turn != 0:
            raise ValueError("grow_trees needs environments reset to turn 0; call reset() first")
        if num_turns > horizon:
            raise ValueError(f"num_turns={num_turns} exceeds the env's num_turns={horizon}")


def _fork(env: Env) -> Env:
    fork = getattr(env, "fork", None)
    return fork() if callable(fork) else copy.deepcopy(env)


def _step_all(forks: Sequence[Env], actions: Sequence[Mapping[str, str]]) -> list[StepResult]:
    """Step every fork: those sharing a batched step in one call each, the others one by one."""
    results: list[StepResult | None] = [None] * len(forks)
    batches: dict[BatchStep, list[int]] = {}
    for i, fork in enumerate(forks):
        batched = batch_step_of(fork)
        if batched is None:
            results[i] = fork.step(actions[i])
        else:
            batches.setdefault(batched, []).append(i)
    for batched, members in batches.items():
        stepped = batched([forks[i] for i in members], [actions[i] for i in members])
        for i, result in zip(members, stepped, strict=True):
            results[i] = result
    return [r for r in results if r is not None]


def _team_outcome(result: StepResult, agents: Sequence[str]) -> tuple[float, dict[str, Any]]:
    """The team reward of a joint action (the agents' mean reward) and its merged infos."""
    _, rewards, _, _, infos = result
    values = [float(rewards[a]) for a in agents if a in rewards]
    if not values:
        reward = 0.0
    elif all(v == values[0] for v in values):
        reward = values[0]  # a cooperative env: exactly the shared reward
    else:
        reward = math.fsum(values) / len(values)
    merged: dict[str, Any] = {}
    for agent in agents:
        merged.update(infos.get(agent, {}))
    return reward, merged


def grow_trees(
    roots: Sequence[Env],
    samplers: Mapping[str, Policy],
    params: SamplingParams,
    *,
    group_size: int,
    joint_mode: JointMode = "align",
    num_turns: int,
    termination_threshold: float | None = None,
    reset_results: Sequence[Any] | None = None,
) -> list[TreeNode]:
    """Expand one MAGRPO tree from each reset environment (see the module docstring).

    Args:
        roots: parallel environments already reset to their problems; they are
            forked, never stepped themselves.
        samplers: the policy of each agent (``env.possible_agents``).
        params: sampling parameters; with a seed, each (turn, agent) call gets its own.
        group_size: G, completions per agent per node.
        joint_mode: ``"align"`` or ``"cross"``.
        num_turns: turns to expand; an env that declares ``config.num_turns``
            must allow that many. A branch whose episode ends earlier stops there.
        termination_threshold: a node whose joint actions' mean reward exceeds it
            gets no children; None expands every node to ``num_turns``.
        reset_results: for each root, the ``(observations, infos)`` its
            ``reset`` returned; needed for envs without ``observe(agent)``.

    Returns:
        The root node of each tree, in order.
    """
    if group_size < 1:
        raise ValueError(f"group_size must be >= 1, got {group_size}")
    if not roots:
        return []
    if reset_results is not None and len(reset_results) != len(roots):
        raise ValueError(f"got {len(reset_results)} reset_results for {len(roots)} roots")
    agents = list(roots[0].possible_agents)
    missing = [a for a in agents if a not in samplers]
    if missing:
        raise KeyError(f"no sampler for agent(s) {missing}; samplers cover {sorted(samplers)}")
    level = []
    for i, env in enumerate(roots):
        _check_root(env, agents, num_turns)
        observations, infos = _root_view(
            env, agents, reset_results[i] if reset_results is not None else None
        )
        level.append(TreeNode(turn=0, tree=i, env=env, observations=observations, infos=infos))
    trees = list(level)
    combos = joint_indices(len(agents), group_size, joint_mode)
    for turn in range(num_turns):
        _sample_level(level, agents, samplers, params, turn, group_size)
        forks, actions = _joint_actions(level, agents, combos)
        results = iter(zip(forks, _step_all(forks, actions), strict=True))
        next_level: list[TreeNode] = []
        for node in level:
            stepped = [next(results) for _ in combos]
            expand = _settle_node(node, stepped, agents, turn, num_turns, termination_threshold)
            children: list[TreeNode | None] = [
                _child(node, fork, result, agents) if expand else None for fork, result in stepped
            ]
            if any(child is not None for child in children):
                node.children_J = children
                next_level.extend(child for child in children if child is not None)
            if any(child is None for child in children):
                node.ended_envs_J = [
                    fork if child is None else None
                    for (fork, _), child in zip(stepped, children, strict=True)
                ]
        level = next_level
        if not level:
            break
    return trees


def _sample_level(
    level: Sequence[TreeNode],
    agents: Sequence[str],
    samplers: Mapping[str, Policy],
    params: SamplingParams,
    turn: int,
    group_size: int,
) -> None:
    """One sampler call per agent for every node of the level: G completions per node."""
    for a, agent in enumerate(agents):
        requests = [
            SampleRequest.for_turn(agent, node.observations[agent], node.infos.get(agent, {}))
            for node in level
            for _ in range(group_size)
        ]
        got = samplers[agent].sample(requests, _level_params(params, turn, a, len(agents)))
        if len(got) != len(requests):
            raise RuntimeError(
                f"the sampler of {agent} returned {len(got)} completions for "
                f"{len(requests)} requests"
            )
        for i, node in enumerate(level):
            node.completions[agent] = list(got[i * group_size : (i + 1) * group_size])


def _joint_actions(
    level: Sequence[TreeNode], agents: Sequence[str], combos: Sequence[tuple[int, ...]]
) -> tuple[list[Env], list[dict[str, str]]]:
    """A fork of each node's env per joint action, and that joint action's texts."""
    forks, actions = [], []
    for node in level:
        node.joint_indices_J = list(combos)
        for combo in combos:
            forks.append(_fork(_env(node)))
            actions.append(
                {agent: node.completions[agent][combo[a]].text for a, agent in enumerate(agents)}
            )
    return forks, actions


def _settle_node(
    node: TreeNode,
    stepped: Sequence[tuple[Env, StepResult]],
    agents: Sequence[str],
    turn: int,
    num_turns: int,
    termination_threshold: float | None,
) -> bool:
    """Record a node's joint-action rewards and infos; return whether it gets children."""
    outcomes = [_team_outcome(result, agents) for _, result in stepped]
    for (env, _), (_, info) in zip(stepped, outcomes, strict=True):
        warn_reserved_info_keys(info, env)
    node.rewards_J = [reward for reward, _ in outcomes]
    node.infos_J = [info for _, info in outcomes]
    node.env, node.observations, node.infos = None, {}, {}  # the forks hold the state
    expand = should_expand(node.rewards_J, turn, num_turns, termination_threshold)
    node.stopped = not expand and turn + 1 < num_turns
    return expand


def _child(node: TreeNode, fork: Env, result: StepResult, agents: Sequence[str]) -> TreeNode | None:
    """The child of a joint action (its stepped fork), or None when the fork's episode ended."""
    if not fork.agents:
        return None
    if sorted(fork.agents) != sorted(agents):
        raise ValueError(
            f"MAGRPO needs every agent to act at every turn, but after turn {node.turn + 1} "
            f"the live agents are {list(fork.agents)} of {list(agents)}"
        )
    observations, _, _, _, infos = result
    return TreeNode(
        turn=node.turn + 1,
        tree=node.tree,
        env=fork,
        observations=dict(observations),
        infos={a: dict(infos.get(a, {})) for a in agents},
    )


def _env(node: TreeNode) -> Env:
    if node.env is None:
        raise RuntimeError(f"node at turn {node.turn} has no environment (already expanded)")
    return node.env


def leaf_path(root: TreeNode, joint: int = 0) -> tuple[list[TreeNode], Env]:
    """Follow joint action ``joint`` at every node from ``root`` to the end of its branch.

    Returns:
        The nodes on the path (root first) and the environment after the last
        node's joint action ``joint``, which has played the path's whole episode
        (for the code-collaboration env, its ``history`` and ``record()``).

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
        child = node.child(joint)
        if child is None:
            ended = node.ended_envs_J[joint]
            assert ended is not None  # a joint action without a child keeps its fork
            return path, ended
        node = child
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

    Raises:
        TypeError: the env has no ``record()``.
    """
    nodes, env = leaf_path(root, joint)
    record_of = getattr(getattr(env, "unwrapped", env), "record", None)
    if not callable(record_of):
        raise TypeError(f"{type(env).__name__} has no record(): path_record needs one")
    record: dict[str, Any] = dict(record_of())
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
        if child is not None:
            yield from iter_nodes(child)


def credit_node(node: TreeNode) -> CreditNode:
    """The :class:`~baselines.magrpo.credit.CreditNode` view of a sampled tree."""
    group_size = len(next(iter(node.completions.values())))
    return CreditNode(
        rewards_J=tuple(node.rewards_J),
        joint_indices_J=tuple(node.joint_indices_J),
        group_size=group_size,
        children_J=tuple(
            None if child is None else credit_node(child) for child in node.children_J
        ),
    )


TREE_METRICS = frozenset({"reward", "nodes", "joint_actions", "stopped_frac", "return", "solved"})
"""Per-turn metrics the tree computes itself; an info key of the same name is not logged
(they are in :data:`llm_envs.contract.RESERVED_INFO_KEYS`, and the rollouts warn about one)."""


TreeValues: TypeAlias = dict[tuple[int, str], list[float]]
"""What :func:`tree_metrics` averages, by ``(turn, name)`` (turn -1: across turns).

Lists of plain floats: the values of trees grown in several processes are
concatenated (:func:`merge_tree_values`) and summarized once
(:func:`summarize_tree_values`), giving the metrics of all the trees together.
"""


def tree_metric_values(
    trees: Sequence[TreeNode], credits: Sequence[NodeCredit] | None = None
) -> TreeValues:
    """The values behind :func:`tree_metrics`, before averaging (see :data:`TreeValues`)."""
    values: TreeValues = defaultdict(list)
    for index, root in enumerate(trees):
        credit_by_node: dict[int, NodeCredit] = {}
        if credits is not None:
            credit_by_node = {
                position: c
                for position, (_, _, c) in enumerate(iter_credit(credit_node(root), credits[index]))
            }
        for position, node in enumerate(iter_nodes(root)):
            turn = node.turn
            values[turn, "nodes"].append(1.0)
            values[turn, "reward"].extend(node.rewards_J)
            values[-1, "total"].extend(node.rewards_J)
            values[-1, "final"].extend(
                r for j, r in enumerate(node.rewards_J) if node.child(j) is None
            )
            if node.expanded or node.stopped:
                values[turn, "stopped_frac"].append(float(node.stopped))
            for info in node.infos_J:
                for key, value in numeric_info(info).items():
                    if key not in TREE_METRICS:
                        values[turn, key].append(value)
                if "pass_rate" in info:
                    values[turn, "solved"].append(float(info["pass_rate"] == 1.0))
            if position in credit_by_node:
                values[turn, "return"].extend(credit_by_node[position].returns_J)
    return dict(values)


def merge_tree_values(parts: Sequence[TreeValues]) -> TreeValues:
    """The values of several groups of trees (e.g. one per process), concatenated in order."""
    merged: TreeValues = defaultdict(list)
    for part in parts:
        for key, seq in part.items():
            merged[key].extend(seq)
    return dict(merged)


def summarize_tree_values(values: TreeValues, *, prefix: str = "env") -> dict[str, float]:
    """The metrics of :func:`tree_metrics` from its values (means, counts)."""
    metrics: dict[str, float] = {}
    for turn in sorted({t for t, _ in values if t >= 0}):
        name = f"{prefix}/turn_{turn + 1}"
        metrics[f"{name}/nodes"] = float(len(values[turn, "nodes"]))
        metrics[f"{name}/joint_actions"] = float(len(values.get((turn, "reward"), [])))
        for (t, key), seq in values.items():
            if t == turn and key != "nodes" and seq:
                metrics[f"{name}/{key}"] = float(np.mean(seq))
    if values.get((-1, "total")):
        metrics[f"{prefix}/all/reward/total"] = float(np.mean(values[-1, "total"]))
        metrics[f"{prefix}/all/reward/final"] = float(np.mean(values[-1, "final"]))
    return metrics


def tree_metrics(
    trees: Sequence[TreeNode],
    credits: Sequence[NodeCredit] | None = None,
    *,
    prefix: str = "env",
) -> dict[str, float]:
    """Per-turn means over every joint action of the trees; with credits, returns too.

    Names: ``{prefix}/turn_{t}/reward`` (1-based t), ``.../nodes``,
    ``.../joint_actions``, ``.../stopped_frac`` (nodes before the last turn that
    did not expand), with ``credits`` ``.../return`` (mean joint-action return),
    and ``.../{key}`` for every numeric outcome info of the joint actions
    (:func:`baselines.data.episode_metrics.numeric_info`, the rule every trainer
    logs by; for code collaboration ``pass_rate``, ``level1`` ... ``bonus``,
    ``syntax_ok``, ``calls_aux``...) except those names, plus ``.../solved``
    (all tests passed) where the infos hold a ``pass_rate``. Across turns:
    ``{prefix}/all/reward/total`` (mean joint-action reward) and
    ``{prefix}/all/reward/final`` (mean reward of the joint actions that end a
    branch). Trees grown in several processes: :func:`tree_metric_values` in
    each, then :func:`merge_tree_values` and :func:`summarize_tree_values`.
    """
    return summarize_tree_values(tree_metric_values(trees, credits), prefix=prefix)
