"""MAGRPO credit assignment (the MAGRPO paper): hand-computed trees and invariants."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from baselines.data.advantages import center_advantages
from baselines.magrpo.credit import (
    CreditNode,
    NodeCredit,
    completion_returns,
    iter_credit,
    joint_action_returns,
    joint_indices,
    should_expand,
    tree_credit,
    tree_shape,
)

ALIGN2 = ((0, 0), (1, 1))  # two agents, G = 2, aligned
CROSS2 = ((0, 0), (0, 1), (1, 0), (1, 1))  # two agents, G = 2, crossed


def node(rewards, indices=ALIGN2, children=(), group_size=2):
    return CreditNode(tuple(rewards), tuple(indices), group_size, tuple(children))


def assert_close(actual, expected):
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected, strict=True):
        if isinstance(e, tuple | list):
            assert_close(a, e)
        else:
            assert a == pytest.approx(e, abs=1e-12)


# --------------------------------------------------------------------------- joint actions


@pytest.mark.parametrize(
    ("num_agents", "group_size", "mode", "expected"),
    [
        (2, 2, "align", [(0, 0), (1, 1)]),
        (2, 3, "align", [(0, 0), (1, 1), (2, 2)]),
        (2, 2, "cross", [(0, 0), (0, 1), (1, 0), (1, 1)]),
        (1, 3, "cross", [(0,), (1,), (2,)]),  # one agent: cross is align
        (3, 2, "cross", [(a, b, c) for a in (0, 1) for b in (0, 1) for c in (0, 1)]),
    ],
)
def test_joint_indices(num_agents, group_size, mode, expected):
    assert joint_indices(num_agents, group_size, mode) == expected


def test_joint_indices_rejects_unknown_mode():
    with pytest.raises(ValueError, match="joint mode must be one of"):
        joint_indices(2, 2, "aligned")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("num_agents", "group_size", "num_turns", "mode", "nodes", "leaves"),
    [
        (2, 2, 1, "align", [1], 2),  # G^T = 2
        (2, 2, 2, "align", [1, 2], 4),  # G^T = 4
        (2, 3, 3, "align", [1, 3, 9], 27),  # G^T = 27
        (2, 2, 2, "cross", [1, 4], 16),  # G^(N*T) = 2^4
        (2, 3, 2, "cross", [1, 9], 81),  # G^(N*T) = 3^4
        (3, 2, 1, "cross", [1], 8),  # G^(N*T) = 2^3
    ],
)
def test_tree_shape(num_agents, group_size, num_turns, mode, nodes, leaves):
    assert tree_shape(num_agents, group_size, num_turns, mode) == (nodes, leaves)


# --------------------------------------------------------------------------- termination


@pytest.mark.parametrize(
    ("rewards", "turn", "num_turns", "threshold", "expand"),
    [
        ([1.0, 3.0], 0, 2, None, True),  # no threshold: always, but for the last turn
        ([1.0, 3.0], 1, 2, None, False),  # last turn
        ([4.0, 3.0], 0, 2, 3.4, False),  # mean 3.5 > 3.4
        ([3.0, 3.8], 0, 2, 3.4, True),  # mean 3.4 is not above 3.4
        ([4.0, 4.0], 1, 3, 3.5, False),  # mean 4 > 3.5 on a middle turn
        ([-0.1, -0.2, 0.0, -0.1], 0, 2, -0.2, False),  # a shifted reward: mean -0.1 > -0.2
        ([-4.0, 0.0], 0, 2, -0.2, True),  # mean -2
    ],
)
def test_should_expand(rewards, turn, num_turns, threshold, expand):
    assert should_expand(rewards, turn, num_turns, threshold) is expand


# --------------------------------------------------------------------------- hand-computed trees


def test_align_two_turns():
    # Root joint actions earn 1 and 3. Child 0 earns (2, 4), mean 3; child 1 earns (0, 1),
    # mean 0.5. gamma = 0.9:
    #   R_root = (1 + 0.9*3, 3 + 0.9*0.5) = (3.7, 3.45), mean 3.575 -> A = (0.125, -0.125)
    #   child 0: R = (2, 4), A = (-1, 1); child 1: R = (0, 1), A = (-0.5, 0.5)
    root = node([1.0, 3.0], children=[node([2.0, 4.0]), node([0.0, 1.0])])
    credit = tree_credit(root, discount=0.9)
    assert_close(credit.returns_J, (3.7, 3.45))
    # align: each completion is in one joint action, so both agents get the same credit
    assert_close(credit.returns_A_G, ((3.7, 3.45), (3.7, 3.45)))
    assert_close(credit.advantages_A_G, ((0.125, -0.125), (0.125, -0.125)))
    child0, child1 = credit.children_J
    assert child0 is not None and child1 is not None
    assert_close(child0.advantages_A_G, ((-1.0, 1.0), (-1.0, 1.0)))
    assert_close(child1.advantages_A_G, ((-0.5, 0.5), (-0.5, 0.5)))


def test_cross_one_turn_mean_and_sum():
    # The code-collaboration rewards of CoopHumanEval/0 (docs/envs/code_collab.md):
    # helper 0 is a correct aux, helper 1 a wrong one; main 0 uses aux, main 1 is garbage.
    #   (0,0): 4.0   (0,1): 0.4   (1,0): 3.4   (1,1): 0.4
    root = node([4.0, 0.4, 3.4, 0.4], CROSS2)
    mean = tree_credit(root, reduction="mean")
    # helper 0 in (0,0),(0,1): (4.0+0.4)/2 = 2.2; helper 1 in (1,0),(1,1): (3.4+0.4)/2 = 1.9
    # main 0 in (0,0),(1,0): (4.0+3.4)/2 = 3.7;   main 1 in (0,1),(1,1): (0.4+0.4)/2 = 0.4
    assert_close(mean.returns_A_G, ((2.2, 1.9), (3.7, 0.4)))
    # both means are 2.05: A = (0.15, -0.15) and (1.65, -1.65)
    assert_close(mean.advantages_A_G, ((0.15, -0.15), (1.65, -1.65)))
    # upstream's sum: helper (4.4, 3.8), main (7.4, 0.8): the advantages times G^(N-1) = 2
    total = tree_credit(root, reduction="sum")
    assert_close(total.returns_A_G, ((4.4, 3.8), (7.4, 0.8)))
    assert_close(total.advantages_A_G, ((0.3, -0.3), (3.3, -3.3)))


def test_cross_two_turns_discount_half():
    # Root joint actions (0,0),(0,1),(1,0),(1,1) earn (1, 0, 0, 0); their children earn
    #   c0: (2, 2, 2, 2) mean 2   c1: (0, 0, 0, 4) mean 1   c2: (0, 0, 0, 0) mean 0
    #   c3: (4, 4, 0, 0) mean 2
    # gamma = 0.5: R_root = (1 + 1, 0 + 0.5, 0 + 0, 0 + 1) = (2, 0.5, 0, 1)
    children = [
        node([2.0, 2.0, 2.0, 2.0], CROSS2),
        node([0.0, 0.0, 0.0, 4.0], CROSS2),
        node([0.0, 0.0, 0.0, 0.0], CROSS2),
        node([4.0, 4.0, 0.0, 0.0], CROSS2),
    ]
    credit = tree_credit(node([1.0, 0.0, 0.0, 0.0], CROSS2, children), discount=0.5)
    assert_close(credit.returns_J, (2.0, 0.5, 0.0, 1.0))
    # agent 0: g0 in (0,0),(0,1): (2+0.5)/2 = 1.25; g1 in (1,0),(1,1): (0+1)/2 = 0.5
    # agent 1: g0 in (0,0),(1,0): (2+0)/2 = 1;     g1 in (0,1),(1,1): (0.5+1)/2 = 0.75
    assert_close(credit.returns_A_G, ((1.25, 0.5), (1.0, 0.75)))
    assert_close(credit.advantages_A_G, ((0.375, -0.375), (0.125, -0.125)))
    c1 = credit.children_J[1]
    assert c1 is not None
    # c1 is a leaf node: R = r; agent 0: g0 (0+0)/2 = 0, g1 (0+4)/2 = 2 -> A = (-1, 1)
    assert_close(c1.returns_A_G, ((0.0, 2.0), (0.0, 2.0)))
    assert_close(c1.advantages_A_G, ((-1.0, 1.0), (-1.0, 1.0)))
    c0 = credit.children_J[0]
    assert c0 is not None
    assert_close(c0.advantages_A_G, ((0.0, 0.0), (0.0, 0.0)))


def test_termination_three_turns():
    # Three turns, align, gamma 0.9, termination threshold 3.5.
    # Root earns (0, 2), mean 1: expands.
    #   child 0 earns (1, 3), mean 2: expands; its children earn gc0 (2, 0) mean 1 and
    #     gc1 (4, 2) mean 3.  R_child0 = (1 + 0.9*1, 3 + 0.9*3) = (1.9, 5.7), A = (-1.9, 1.9)
    #   child 1 earns (4, 4), mean 4 > 3.5: stops. R_child1 = (4, 4), A = (0, 0)
    # R_root = (0 + 0.9*mean(1.9, 5.7), 2 + 0.9*4) = (3.42, 5.6), mean 4.51, A = (-1.09, 1.09)
    assert should_expand([0.0, 2.0], 0, 3, 3.5)
    assert should_expand([1.0, 3.0], 1, 3, 3.5)
    assert not should_expand([4.0, 4.0], 1, 3, 3.5)
    child0 = node([1.0, 3.0], children=[node([2.0, 0.0]), node([4.0, 2.0])])
    child1 = node([4.0, 4.0])  # stopped: no children
    credit = tree_credit(node([0.0, 2.0], children=[child0, child1]), discount=0.9)
    assert_close(credit.returns_J, (3.42, 5.6))
    assert_close(credit.advantages_A_G[0], (-1.09, 1.09))
    c0, c1 = credit.children_J
    assert c0 is not None and c1 is not None
    assert_close(c0.returns_J, (1.9, 5.7))
    assert_close(c0.advantages_A_G[1], (-1.9, 1.9))
    assert_close(c1.returns_J, (4.0, 4.0))
    assert_close(c1.advantages_A_G[0], (0.0, 0.0))
    # pre-order walk: root, child 0, its two children, child 1
    assert [
        turn for turn, _, _ in iter_credit(node([0.0, 2.0], children=[child0, child1]), credit)
    ] == [0, 1, 2, 2, 1]


@pytest.mark.parametrize(
    ("discount", "expected_root_returns"),
    [
        (0.0, (1.0, 3.0)),  # only the immediate reward
        (0.5, (1.0 + 0.5 * 3.0, 3.0 + 0.5 * 0.5)),  # (2.5, 3.25)
        (1.0, (4.0, 3.5)),  # undiscounted: 1 + 3, 3 + 0.5
    ],
)
def test_discount(discount, expected_root_returns):
    root = node([1.0, 3.0], children=[node([2.0, 4.0]), node([0.0, 1.0])])
    assert_close(joint_action_returns(root, discount), expected_root_returns)


def test_single_agent_group_of_three():
    # One agent (GRPO on a tree): rewards (1, 2, 6), mean 3 -> A = (-2, -1, 3)
    root = node([1.0, 2.0, 6.0], [(0,), (1,), (2,)], group_size=3)
    assert_close(tree_credit(root).advantages_A_G, ((-2.0, -1.0, 3.0),))


def test_credit_centres_without_std_normalization():
    # One agent, rewards (0, 10): A = (-5, 5); GRPO with std would give (-1, 1).
    root = node([0.0, 10.0], [(0,), (1,)])
    assert tree_credit(root).advantages_A_G == ((-5.0, 5.0),)


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"rewards_J": (), "joint_indices_J": (), "group_size": 1}, "at least one joint action"),
        ({"rewards_J": (1.0,), "joint_indices_J": ALIGN2, "group_size": 2}, "one reward per"),
        (
            {"rewards_J": (1.0, 2.0), "joint_indices_J": ((0, 0), (0, 0)), "group_size": 2},
            "must take part in one at least",
        ),
        ({"rewards_J": (1.0, math.nan), "joint_indices_J": ALIGN2, "group_size": 2}, "finite"),
        (
            {"rewards_J": (1.0, 2.0), "joint_indices_J": ((0, 0), (1,)), "group_size": 2},
            "one index per agent",
        ),
    ],
)
def test_credit_node_rejects_bad_trees(kwargs, message):
    with pytest.raises(ValueError, match=message):
        CreditNode(**kwargs)


def test_children_must_match_joint_actions():
    with pytest.raises(ValueError, match="one child"):
        node([1.0, 2.0], children=[node([0.0, 0.0])])


def test_discount_out_of_range():
    with pytest.raises(ValueError, match="discount must be in"):
        tree_credit(node([1.0, 2.0]), discount=1.5)


def test_completion_returns_rejects_unknown_reduction():
    with pytest.raises(ValueError, match="reduction must be one of"):
        completion_returns([1.0, 2.0], ALIGN2, 0, 2, reduction="max")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- invariants


@st.composite
def trees(draw, *, full=False, mode=None):
    """Random credit trees: N agents, G completions, up to three turns, random stops."""
    num_agents = draw(st.integers(1, 3))
    group_size = draw(st.integers(1, 3))
    mode = mode or draw(st.sampled_from(["align", "cross"]))
    depth = draw(st.integers(1, 3))
    combos = joint_indices(num_agents, group_size, mode)
    reward = st.floats(-5.0, 5.0, allow_nan=False).map(lambda r: round(r, 3))

    def build(turn):
        rewards = draw(st.lists(reward, min_size=len(combos), max_size=len(combos)))
        expand = turn + 1 < depth and (full or draw(st.booleans()))
        children = [build(turn + 1) for _ in combos] if expand else []
        return CreditNode(tuple(rewards), tuple(combos), group_size, tuple(children))

    return build(0)


def walk(tree, credit):
    return [(n, c) for _, n, c in iter_credit(tree, credit)]


@given(trees(), st.sampled_from([0.0, 0.5, 0.9, 1.0]), st.sampled_from(["mean", "sum"]))
def test_advantages_sum_to_zero_among_siblings(tree, discount, reduction):
    for _, credit in walk(tree, tree_credit(tree, discount, reduction)):
        for advantages_G in credit.advantages_A_G:
            assert math.fsum(advantages_G) == pytest.approx(0.0, abs=1e-9)


@given(trees())
def test_leaf_nodes_return_their_rewards(tree):
    for n, credit in walk(tree, tree_credit(tree, 0.9)):
        if not n.children_J:
            assert credit.returns_J == n.rewards_J


@given(trees())
def test_zero_discount_returns_are_rewards(tree):
    for n, credit in walk(tree, tree_credit(tree, 0.0)):
        assert credit.returns_J == pytest.approx(n.rewards_J)


@given(trees(mode="align"))
def test_align_every_agent_gets_the_joint_credit(tree):
    mean = tree_credit(tree, 0.9, "mean")
    total = tree_credit(tree, 0.9, "sum")
    for (_, m), (_, s) in zip(walk(tree, mean), walk(tree, total), strict=True):
        for advantages_G in m.advantages_A_G:
            assert advantages_G == pytest.approx(m.advantages_A_G[0])
            assert advantages_G == pytest.approx(center_advantages(m.returns_J).tolist())
        assert s.advantages_A_G == m.advantages_A_G  # each completion is in one joint action


@given(trees(mode="cross"))
def test_cross_sum_is_mean_times_group_power(tree):
    # Every completion is in G^(N-1) joint actions of its node.
    scale = tree.group_size ** (tree.num_agents - 1)
    mean = tree_credit(tree, 0.9, "mean")
    total = tree_credit(tree, 0.9, "sum")
    for (_, m), (_, s) in zip(walk(tree, mean), walk(tree, total), strict=True):
        for m_G, s_G in zip(m.advantages_A_G, s.advantages_A_G, strict=True):
            assert s_G == pytest.approx([scale * a for a in m_G], abs=1e-9)


@given(trees(), st.floats(0.1, 10.0))
def test_scaling_rewards_scales_advantages(tree, factor):
    def scaled(n: CreditNode) -> CreditNode:
        return CreditNode(
            tuple(r * factor for r in n.rewards_J),
            n.joint_indices_J,
            n.group_size,
            tuple(None if c is None else scaled(c) for c in n.children_J),
        )

    base = walk(tree, tree_credit(tree, 0.9))
    other = walk(scaled(tree), tree_credit(scaled(tree), 0.9))
    for (_, b), (_, o) in zip(base, other, strict=True):
        for b_G, o_G in zip(b.advantages_A_G, o.advantages_A_G, strict=True):
            assert o_G == pytest.approx([factor * a for a in b_G], abs=1e-9)


@given(trees(full=True), st.floats(-4.0, 4.0))
def test_full_trees_ignore_a_reward_offset(tree, offset):
    # Without termination every branch of a node has the same depth, so a constant
    # added to every reward shifts all sibling returns equally: advantages are unchanged.
    def shifted(n: CreditNode) -> CreditNode:
        return CreditNode(
            tuple(r + offset for r in n.rewards_J),
            n.joint_indices_J,
            n.group_size,
            tuple(None if c is None else shifted(c) for c in n.children_J),
        )

    base = walk(tree, tree_credit(tree, 0.9))
    other = walk(shifted(tree), tree_credit(shifted(tree), 0.9))
    for (_, b), (_, o) in zip(base, other, strict=True):
        for b_G, o_G in zip(b.advantages_A_G, o.advantages_A_G, strict=True):
            assert o_G == pytest.approx(b_G, abs=1e-9)


@given(trees())
def test_completion_returns_lie_within_the_joint_returns(tree):
    for _, credit in walk(tree, tree_credit(tree, 0.9, "mean")):
        low, high = min(credit.returns_J), max(credit.returns_J)
        for returns_G in credit.returns_A_G:
            assert all(low - 1e-9 <= r <= high + 1e-9 for r in returns_G)


@given(trees(full=True), st.floats(-3.0, 3.0))
def test_constant_rewards_give_zero_advantages(tree, value):
    def constant(n: CreditNode) -> CreditNode:
        return CreditNode(
            (value,) * len(n.rewards_J),
            n.joint_indices_J,
            n.group_size,
            tuple(None if c is None else constant(c) for c in n.children_J),
        )

    flat = constant(tree)
    for n, credit in walk(flat, tree_credit(flat, 0.9)):
        for advantages_G in credit.advantages_A_G:
            assert advantages_G == pytest.approx((0.0,) * n.group_size, abs=1e-9)


def test_node_credit_mirrors_the_tree():
    root = node([1.0, 3.0], children=[node([2.0, 4.0]), node([0.0, 1.0])])
    credit = tree_credit(root)
    assert isinstance(credit, NodeCredit)
    assert len(credit.children_J) == 2
    assert all(isinstance(c, NodeCredit) for c in credit.children_J)
    assert tree_credit(node([1.0, 3.0])).children_J == (None, None)
