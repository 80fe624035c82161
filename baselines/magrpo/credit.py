"""MAGRPO credit assignment on a rollout tree: pure functions (the MAGRPO paper).

A MAGRPO *node* is one state of a multi-turn episode. At a node every agent
samples ``G`` completions, and the agents' completions are combined into joint
actions (the MAGRPO paper, "Joint Action"):

* ``"align"`` pairs the g-th completion of every agent: ``G`` joint actions;
* ``"cross"`` takes the Cartesian product: ``G**N`` joint actions for ``N`` agents.

Each joint action earns an immediate team reward ``r_j`` and, unless the node
stops there, leads to a child node (the next turn). The joint actions of one node
are *siblings*: they compete from the same state, so their mean is the baseline.

Formulas (the MAGRPO paper, "Advantage" and "Termination"; the reference code computes
returns the same way):

* return of joint action j: ``R_j = r_j + gamma * mean(R_child)`` where
  ``R_child`` are the returns of the joint actions of j's child node, and
  ``R_j = r_j`` when j has no child (last turn, or the node stopped expanding);
* return of agent a's completion g: the **mean** of ``R_j`` over the joint actions
  that contain it (``reduction="mean"``, the default), or their **sum**
  (``reduction="sum"``, the upstream convention). In align mode each completion
  is in exactly one joint action, so both give ``R_g = R_g``. In cross mode each
  completion is in ``G**(N-1)`` joint actions, so the sum is that constant times
  the mean: it scales every advantage, i.e. the learning rate, by ``G**(N-1)``;
* advantage: ``A_g = R_g - mean_g' R_g'`` over the agent's G completions at the
  node. No division by the standard deviation (the MAGRPO paper cites Dr. GRPO: the mean
  baseline keeps the gradient unbiased) and no importance ratio (on-policy);
* termination: a node stops expanding when the mean immediate reward of its
  joint actions exceeds ``termination_threshold`` (strictly greater).

Everything here takes and returns plain Python numbers: no torch, no tokens, no
environment. :mod:`baselines.magrpo.trainer` builds a :class:`CreditNode` tree
from its rollout and calls :func:`tree_credit`. The centring is
:func:`baselines.data.advantages.center_advantages`, the one definition every
trainer uses (numpy inside; ``import baselines`` loads numpy anyway, through
:mod:`baselines.types`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Literal, get_args

from baselines.data.advantages import center_advantages

__all__ = [
    "CreditNode",
    "JointMode",
    "NodeCredit",
    "ReturnReduction",
    "completion_returns",
    "iter_credit",
    "joint_action_returns",
    "joint_indices",
    "should_expand",
    "tree_credit",
    "tree_shape",
]

JointMode = Literal["align", "cross"]
"""How agents' completions at a node form joint actions (see the module docstring)."""

ReturnReduction = Literal["mean", "sum"]
"""How a completion's return is read from the joint actions it takes part in."""


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values)


def joint_indices(num_agents: int, group_size: int, mode: JointMode) -> list[tuple[int, ...]]:
    """The joint actions of a node, as one completion index per agent.

    Example:
        >>> joint_indices(2, 2, "align")
        [(0, 0), (1, 1)]
        >>> joint_indices(2, 2, "cross")
        [(0, 0), (0, 1), (1, 0), (1, 1)]
    """
    if num_agents < 1 or group_size < 1:
        raise ValueError(
            f"num_agents and group_size must be >= 1, got {num_agents} and {group_size}"
        )
    if mode == "align":
        return [(g,) * num_agents for g in range(group_size)]
    if mode == "cross":
        return list(itertools.product(range(group_size), repeat=num_agents))
    raise ValueError(f"joint mode must be one of {list(get_args(JointMode))}, got {mode!r}")


def should_expand(
    rewards_J: Sequence[float], turn: int, num_turns: int, threshold: float | None
) -> bool:
    """Whether a node at 0-based ``turn`` gets children (the MAGRPO paper, "Termination").

    A node on the last turn has none; otherwise it expands unless the mean
    immediate reward of its joint actions is strictly above ``threshold``.

    Example:
        >>> should_expand([3.0, 4.0], turn=0, num_turns=2, threshold=3.4)  # mean 3.5 > 3.4
        False
        >>> should_expand([3.0, 3.8], turn=0, num_turns=2, threshold=3.4)  # mean 3.4, not above
        True
        >>> should_expand([0.0, 0.0], turn=1, num_turns=2, threshold=None)  # last turn
        False
    """
    if turn + 1 >= num_turns:
        return False
    if threshold is None or not rewards_J:
        return True
    return not _mean(rewards_J) > threshold


def tree_shape(
    num_agents: int, group_size: int, num_turns: int, mode: JointMode
) -> tuple[list[int], int]:
    """Nodes per turn and leaf joint actions of a full tree (no termination).

    A node has ``B = G`` (align) or ``G**N`` (cross) joint actions, so turn t has
    ``B**t`` nodes and the last turn ``B**T`` joint actions: ``G**T`` (align)
    and ``G**(N*T)`` (cross), as the MAGRPO paper's "Number of Samples" states.

    Example:
        >>> tree_shape(2, 2, 2, "align")
        ([1, 2], 4)
        >>> tree_shape(2, 2, 2, "cross")
        ([1, 4], 16)
    """
    branching = len(joint_indices(num_agents, group_size, mode))
    return [branching**t for t in range(num_turns)], branching**num_turns


@dataclass(frozen=True)
class CreditNode:
    """What credit assignment needs to know about one node of a rollout tree.

    Attributes:
        rewards_J: the immediate team reward of each joint action.
        joint_indices_J: for each joint action, the index of each agent's
            completion in it (agents in a fixed order, the same at every node).
        group_size: G, the completions each agent sampled at the node.
        children_J: each joint action's child node, or None (last turn, or the
            node stopped expanding); an empty tuple means no children at all.
    """

    rewards_J: tuple[float, ...]
    joint_indices_J: tuple[tuple[int, ...], ...]
    group_size: int
    children_J: tuple[CreditNode | None, ...] = ()

    def __post_init__(self) -> None:
        num_joint = len(self.rewards_J)
        if num_joint == 0:
            raise ValueError("a node needs at least one joint action, got no rewards")
        if len(self.joint_indices_J) != num_joint:
            raise ValueError(
                f"got {num_joint} rewards but {len(self.joint_indices_J)} joint actions; "
                "give one reward per joint action"
            )
        if self.children_J and len(self.children_J) != num_joint:
            raise ValueError(
                f"got {len(self.children_J)} children for {num_joint} joint actions; give one "
                "child (or None) per joint action, or none at all"
            )
        if not all(math.isfinite(r) for r in self.rewards_J):
            raise ValueError(f"rewards must be finite, got {self.rewards_J}")
        agents = {len(indices) for indices in self.joint_indices_J}
        if len(agents) != 1:
            raise ValueError(f"every joint action needs one index per agent, got {agents} agents")
        for agent in range(self.num_agents):
            used = {indices[agent] for indices in self.joint_indices_J}
            if used != set(range(self.group_size)):
                raise ValueError(
                    f"agent {agent}'s completions in the joint actions are {sorted(used)}; "
                    f"each of its {self.group_size} completions must take part in one at least"
                )

    @property
    def num_agents(self) -> int:
        """The number of agents (the length of a joint action)."""
        return len(self.joint_indices_J[0])

    def child(self, j: int) -> CreditNode | None:
        """The child node of joint action ``j``, or None."""
        return self.children_J[j] if self.children_J else None


def joint_action_returns(node: CreditNode, discount: float = 0.9) -> tuple[float, ...]:
    """``R_j = r_j + discount * mean(R of j's child)``, or ``r_j`` without a child.

    Example:
        A two-turn align tree, G = 2. The root's joint action 0 (reward 1) leads to a
        node whose joint actions earn 2 and 4 (mean 3); joint action 1 (reward 0) to
        one earning 0 and 2 (mean 1)::

            >>> leaf_a = CreditNode((2.0, 4.0), ((0, 0), (1, 1)), 2)
            >>> leaf_b = CreditNode((0.0, 2.0), ((0, 0), (1, 1)), 2)
            >>> root = CreditNode((1.0, 0.0), ((0, 0), (1, 1)), 2, (leaf_a, leaf_b))
            >>> joint_action_returns(root, discount=0.5)  # 1 + 0.5*3, 0 + 0.5*1
            (2.5, 0.5)
    """
    return tree_credit(node, discount).returns_J


def completion_returns(
    returns_J: Sequence[float],
    joint_indices_J: Sequence[Sequence[int]],
    agent: int,
    group_size: int,
    reduction: ReturnReduction = "mean",
) -> tuple[float, ...]:
    """The return of each of ``agent``'s G completions: mean (or sum) over its joint actions.

    Example:
        Cross mode, two agents, G = 2: agent 0's completion 0 is in joint actions
        (0, 0) and (0, 1)::

            >>> R = [1.0, 3.0, 0.0, 2.0]
            >>> J = [(0, 0), (0, 1), (1, 0), (1, 1)]
            >>> completion_returns(R, J, agent=0, group_size=2)  # (1+3)/2, (0+2)/2
            (2.0, 1.0)
            >>> completion_returns(R, J, agent=1, group_size=2, reduction="sum")  # 1+0, 3+2
            (1.0, 5.0)
    """
    if reduction not in get_args(ReturnReduction):
        raise ValueError(
            f"reduction must be one of {list(get_args(ReturnReduction))}, got {reduction!r}"
        )
    if len(returns_J) != len(joint_indices_J):
        raise ValueError(f"got {len(returns_J)} returns for {len(joint_indices_J)} joint actions")
    members: list[list[float]] = [[] for _ in range(group_size)]
    for value, indices in zip(returns_J, joint_indices_J, strict=True):
        members[indices[agent]].append(float(value))
    if any(not m for m in members):
        missing = [g for g, m in enumerate(members) if not m]
        raise ValueError(f"agent {agent}'s completions {missing} take part in no joint action")
    if reduction == "sum":
        return tuple(math.fsum(m) for m in members)
    return tuple(_mean(m) for m in members)


@dataclass(frozen=True)
class NodeCredit:
    """Credit of one node, mirroring a :class:`CreditNode`.

    Attributes:
        returns_J: the return of each joint action.
        returns_A_G: per agent (in joint-action order), the return of each completion.
        advantages_A_G: per agent, each completion's return minus the agent's mean.
        children_J: the credit of each joint action's child node, or None.
    """

    returns_J: tuple[float, ...]
    returns_A_G: tuple[tuple[float, ...], ...]
    advantages_A_G: tuple[tuple[float, ...], ...]
    children_J: tuple[NodeCredit | None, ...]


def tree_credit(
    root: CreditNode, discount: float = 0.9, reduction: ReturnReduction = "mean"
) -> NodeCredit:
    """Returns and advantages of every node of a tree, as a tree of :class:`NodeCredit`.

    Args:
        root: the tree.
        discount: gamma of ``R = r + gamma * mean(child returns)``, in [0, 1].
        reduction: how a completion's return is read from its joint actions
            (``"mean"``, or ``"sum"`` as upstream does in cross mode).

    Example:
        The docstring tree of :func:`joint_action_returns`: both agents' completion
        returns equal the joint returns (align), centred on their mean 1.5::

            >>> leaf_a = CreditNode((2.0, 4.0), ((0, 0), (1, 1)), 2)
            >>> leaf_b = CreditNode((0.0, 2.0), ((0, 0), (1, 1)), 2)
            >>> root = CreditNode((1.0, 0.0), ((0, 0), (1, 1)), 2, (leaf_a, leaf_b))
            >>> credit = tree_credit(root, discount=0.5)
            >>> credit.advantages_A_G
            ((1.0, -1.0), (1.0, -1.0))
            >>> credit.children_J[0].advantages_A_G[0]  # 2 - 3, 4 - 3
            (-1.0, 1.0)
    """
    if not 0.0 <= discount <= 1.0:
        raise ValueError(f"discount must be in [0, 1], got {discount}")
    # Children first: a node's returns read its children's, so each node is visited once.
    children = tuple(
        None if (child := root.child(j)) is None else tree_credit(child, discount, reduction)
        for j in range(len(root.rewards_J))
    )
    returns_J = tuple(
        reward if child is None else reward + discount * _mean(child.returns_J)
        for reward, child in zip(root.rewards_J, children, strict=True)
    )
    returns_A_G = tuple(
        completion_returns(returns_J, root.joint_indices_J, agent, root.group_size, reduction)
        for agent in range(root.num_agents)
    )
    return NodeCredit(
        returns_J=returns_J,
        returns_A_G=returns_A_G,
        advantages_A_G=tuple(tuple(center_advantages(r).tolist()) for r in returns_A_G),
        children_J=children,
    )


def iter_credit(
    node: CreditNode, credit: NodeCredit, turn: int = 0
) -> Iterator[tuple[int, CreditNode, NodeCredit]]:
    """Walk a tree and its credit together in pre-order: ``(turn, node, credit)``.

    Example:
        >>> leaf = CreditNode((1.0, 3.0), ((0,), (1,)), 2)
        >>> root = CreditNode((0.0, 0.0), ((0,), (1,)), 2, (leaf, None))
        >>> [(t, c.returns_J) for t, _, c in iter_credit(root, tree_credit(root, 1.0))]
        [(0, (2.0, 0.0)), (1, (1.0, 3.0))]
    """
    yield turn, node, credit
    for j in range(len(node.rewards_J)):
        child, child_credit = node.child(j), credit.children_J[j]
        if child is not None and child_credit is not None:
            yield from iter_credit(child, child_credit, turn + 1)
