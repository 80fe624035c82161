"""Credit assignment: every scheme against hand-computed numbers, then its properties.

Tables first (the numbers are worked out in the comments), then hypothesis
properties over random batches: seats from a small alphabet, one to three turns
per trajectory, rewards and final rewards of any sign.
"""

from __future__ import annotations

import json
import math
from typing import get_args

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from baselines.data.advantages import center_advantages, group_returns
from baselines.data.credit import (
    CREDIT_NAMES,
    CREDIT_SCHEMES,
    ROLE_BASELINE_DECAY,
    CreditName,
    RoleBaselines,
    agent_turn_advantages,
    assign_credit,
    per_agent_advantages,
    role_baseline_advantages,
    turn_returns,
)
from baselines.data.datums import assemble_training_data, trajectory_to_data
from baselines.types import Trajectory, TrajectoryGroup, Transition

EPS = 1e-6


def trajectory(seat: str | None, *rewards: float, obs: int = 1) -> Trajectory:
    """One agent's turns: a fresh observation each turn (one Datum per turn), one action token."""
    turns = [Transition([obs, 10 + t], [20 + t], [-0.5], reward=r) for t, r in enumerate(rewards)]
    return Trajectory(turns, agent_id=seat)


def group(*members: tuple[str | None, tuple[float, ...], float]) -> TrajectoryGroup:
    """``(seat, step rewards, final reward)`` per trajectory."""
    return TrajectoryGroup(
        [trajectory(seat, *rewards) for seat, rewards, _ in members],
        final_rewards_G=[final for _, _, final in members],
    )


def episodes(*finals: tuple[float, float], seats: tuple[str, str] = ("h", "m")) -> TrajectoryGroup:
    """Episodes of two seats, one turn each, rewarded at the end: one group."""
    return group(
        *[(seat, (0.0,), f) for pair in finals for seat, f in zip(seats, pair, strict=True)]
    )


# ------------------------------------------------------------------------ the registry


def test_the_registry_holds_every_scheme_the_trainers_offer():
    from baselines.grpo.config import GRPORunConfig
    from baselines.is_trainer.config import ISTrainerConfig

    assert tuple(CREDIT_SCHEMES) == CREDIT_NAMES == get_args(CreditName)
    assert CREDIT_NAMES[0] == "group_mean"
    for config in (ISTrainerConfig, GRPORunConfig):
        assert config.__dataclass_fields__["credit"].default == "group_mean"
        assert config().credit == "group_mean"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"scheme": "leave_one_out"}, r"must be one of \['group_mean', 'role_baseline'"),
        ({"scheme": "role_baseline", "normalize_std": True}, "'role_baseline' never divides"),
        ({"scheme": "per_agent_norm", "normalize_std": True}, "'per_agent_norm' always divides"),
        ({"epsilon": 0.0}, "epsilon must be > 0"),
    ],
)
def test_bad_settings_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        assign_credit([episodes((1.0, 0.0), (0.0, 1.0))], **kwargs)


@pytest.mark.parametrize("scheme", ["role_baseline", "per_agent_norm", "agent_turn_groups"])
def test_seatwise_schemes_need_seats(scheme):
    nameless = group((None, (0.0,), 1.0), (None, (0.0,), 0.0))
    with pytest.raises(ValueError, match="trajectory 0 of group 0 has no agent_id"):
        assign_credit([nameless], scheme)
    assign_credit([nameless])  # group_mean needs none


@pytest.mark.parametrize("scheme", ["per_agent_norm", "agent_turn_groups"])
def test_groups_of_one_trajectory_per_seat_are_refused_with_the_fix(scheme):
    # One episode per group, every seat once: nothing to compare a seat with.
    one_episode = [episodes((1.0, -1.0)), episodes((0.0, 0.0))]
    with pytest.raises(ValueError, match="use credit='role_baseline'"):
        assign_credit(one_episode, scheme)
    assign_credit(one_episode, "role_baseline")


def test_the_config_refuses_a_std_the_scheme_decides():
    from baselines.grpo.config import GRPORunConfig
    from baselines.is_trainer.config import ISTrainerConfig

    with pytest.raises(ValueError, match="credit='per_agent_norm' decides the scale itself"):
        ISTrainerConfig(credit="per_agent_norm", normalize_advantages=True)
    ISTrainerConfig(credit="agent_turn_groups", normalize_advantages=True)
    with pytest.raises(ValueError, match="set scale_rewards='none'"):
        GRPORunConfig(credit="role_baseline", scale_rewards="group")
    GRPORunConfig(credit="role_baseline")


# -------------------------------------------------------------------------- group_mean


def test_group_mean_is_todays_centring_exactly():
    groups = [
        group(("a", (0.0, -1.0), 0.5), ("b", (0.25,), 0.0), ("c", (), 1.0)),  # R = -0.5, 0.25, 1
        episodes((0.1, 0.1), (0.1, 0.1)),  # constant: no signal
    ]
    for normalize in (False, True):
        credit = assign_credit(groups, normalize_std=normalize, epsilon=0.5)
        for g, advantages in zip(groups, credit.advantages_P_G, strict=True):
            expected = center_advantages(group_returns(g), normalize_std=normalize, epsilon=0.5)
            assert advantages.tolist() == expected.tolist()
        assert credit.signal_P == (True, False) and credit.turn_advantages_P_G is None
        assert credit.baselines == RoleBaselines() and dict(credit.metrics) == {}


def test_assembling_with_group_mean_credit_gives_todays_batch():
    groups = [
        group(("a", (0.0, -1.0), 0.5), ("b", (0.25,), 0.0), ("c", (0.0,), 1.0)),
        episodes((0.0, 0.0), (0.0, 0.0)),
        episodes((1.0, 0.0), (0.0, 0.5)),
    ]
    for kwargs in ({}, {"drop_constant": False}, {"strategy_weights": {"untagged": 2.0}}):
        today = assemble_training_data(groups, **kwargs)
        credited = assemble_training_data(groups, credit=assign_credit(groups), **kwargs)
        assert today.metrics == credited.metrics
        assert len(today.data_D) == len(credited.data_D)
        for a, b in zip(today.data_D, credited.data_D, strict=True):
            for name in ("model_input", "target_tokens", "logprobs", "advantages", "weights"):
                assert getattr(a, name).tolist() == getattr(b, name).tolist()


def test_assembly_refuses_credit_of_another_batch():
    groups = [episodes((1.0, 0.0))]
    with pytest.raises(ValueError, match=r"sizes \[4\] but the batch's groups have sizes \[2\]"):
        assemble_training_data(groups, credit=assign_credit([episodes((1, 0), (0, 1))]))
    with pytest.raises(ValueError, match="pass normalize_std to assign_credit"):
        assemble_training_data(groups, credit=assign_credit(groups), normalize_std=True)


# ----------------------------------------------------------------------- role_baseline


def test_role_baselines_move_by_the_spiral_ema_and_measure_the_next_batch():
    a = ROLE_BASELINE_DECAY
    # Batch 1, two games: p0 wins one (1) and draws one (0); p1 the opposite.
    first = [episodes((1.0, -1.0), seats=("p0", "p1")), episodes((0.0, 0.0), seats=("p0", "p1"))]
    credit = assign_credit(first, "role_baseline", env="game")
    # Measured against baselines of 0: the advantages are the returns, draws included.
    assert [x.tolist() for x in credit.advantages_P_G] == [[1.0, -1.0], [0.0, 0.0]]
    assert credit.signal_P == (True, False)  # a draw against a baseline of 0 says nothing
    # Two returns of mean 1/2 enter as two EMA steps: (1 - a^2) * 1/2 = 0.04875.
    b0 = (1 - a**2) * 0.5
    assert credit.baselines.value("game", "p0") == pytest.approx(b0, abs=1e-15)
    assert credit.baselines.value("game", "p1") == pytest.approx(-b0, abs=1e-15)
    assert credit.baselines.count("game", "p0") == 2
    assert credit.metrics == {"credit/baseline/p0": 0.0, "credit/baseline/p1": 0.0}

    # Batch 2, one draw: now a draw is below p0's record and above p1's.
    second = [episodes((0.0, 0.0), seats=("p0", "p1"))]
    again = assign_credit(second, "role_baseline", env="game", baselines=credit.baselines)
    np.testing.assert_allclose(again.advantages_P_G[0], [-b0, b0], rtol=1e-15)
    assert again.signal_P == (True,)
    # One more step: b0 * a + (1 - a) * 0.
    assert again.baselines.value("game", "p0") == pytest.approx(b0 * a, abs=1e-15)
    assert again.metrics["credit/baseline/p0"] == pytest.approx(b0, abs=1e-15)
    # Another environment has baselines of its own.
    other = assign_credit(second, "role_baseline", env="other", baselines=credit.baselines)
    assert other.advantages_P_G[0].tolist() == [0.0, 0.0]
    assert set(other.baselines.to_json()) == {"game", "other"}


def test_role_baselines_round_trip_through_json_exactly():
    state = assign_credit(
        [episodes((1 / 3, -0.1), (2.0, 7e-9))], "role_baseline", env="g"
    ).baselines
    assert RoleBaselines.from_json(json.loads(json.dumps(state.to_json()))) == state
    assert state.to_json()["g"]["h"]["count"] == 2


@pytest.mark.parametrize(
    "data",
    [
        [1.0],
        {"g": [0.5]},
        {"g": {"p0": {"baseline": "0.5", "count": 1}}},
        {"g": {"p0": {"baseline": math.nan, "count": 1}}},
        {"g": {"p0": {"baseline": 0.5, "count": -1}}},
        {"g": {"p0": {"baseline": 0.5}}},
    ],
)
def test_broken_role_baselines_are_refused(data):
    with pytest.raises(ValueError, match="must be"):
        RoleBaselines.from_json(data)


@pytest.mark.parametrize("decay", [0.0, 1.0, -0.5, 1.5])
def test_the_decay_is_in_the_open_unit_interval(decay):
    with pytest.raises(ValueError, match=r"decay must be in \(0, 1\), got"):
        role_baseline_advantages([1.0], ["p0"], env="g", baselines=RoleBaselines(), decay=decay)


# ---------------------------------------------------------------------- per_agent_norm


def test_per_agent_norm_compares_each_seat_with_itself():
    # Two episodes of h and m: h earns 11 and 9 (mean 10, std 1), m 1 and -1 (mean 0, std 1).
    batch = [episodes((11.0, 1.0), (9.0, -1.0))]
    credit = assign_credit(batch, "per_agent_norm", epsilon=EPS)
    np.testing.assert_allclose(
        credit.advantages_P_G[0], np.array([1.0, 1.0, -1.0, -1.0]) / (1 + EPS), rtol=1e-15
    )
    # The group mean (5) would rate every h above every m instead.
    assert assign_credit(batch).advantages_P_G[0].tolist() == [6.0, -4.0, 4.0, -6.0]


def test_per_agent_norm_gives_a_lone_or_constant_seat_zero():
    # x: 3, 0, 6 (mean 3, population std sqrt(6)); y constant; z alone.
    out = per_agent_advantages([3.0, 2.0, 0.0, 2.0, 6.0, 5.0], ["x", "y", "x", "y", "x", "z"])
    expected = np.array([0.0, 0.0, -3.0, 0.0, 3.0, 0.0])
    np.testing.assert_allclose(out, expected / (math.sqrt(6) + EPS), rtol=1e-15)
    assert out[[1, 3, 5]].tolist() == [0.0, 0.0, 0.0]  # exactly


# ------------------------------------------------------------------- agent_turn_groups


def test_turn_returns_count_from_each_turn_on():
    # rewards 1, 0, -2 then a final 0.5: from turn 0 -0.5, from turn 1 -1.5, from turn 2 -1.5
    assert turn_returns(trajectory("a", 1.0, 0.0, -2.0), 0.5).tolist() == [-0.5, -1.5, -1.5]
    assert turn_returns(trajectory("a"), 3.0).tolist() == []


def test_agent_turn_groups_compare_a_seats_turn_with_the_same_turn():
    # Three episodes of h and m; h has 2 turns (3 in the last episode), m 1 turn.
    batch = [
        group(
            ("h", (1.0, 0.0), 0.0),  # G = [1, 0]
            ("m", (0.0,), 2.0),  # G = [2]
            ("h", (0.0, 1.0), 1.0),  # G = [2, 2]
            ("m", (0.0,), 0.0),  # G = [0]
            ("h", (0.0, 0.0, 4.0), 0.0),  # G = [4, 4, 4]
            ("m", (0.0,), 1.0),  # G = [1]
        )
    ]
    credit = assign_credit(batch, "agent_turn_groups")
    turns = [a.tolist() for a in credit.turn_advantages_P_G[0]]
    # h turn 0: 1, 2, 4 (mean 7/3); h turn 1: 0, 2, 4 (mean 2); h turn 2: 4 alone -> 0;
    # m turn 0: 2, 0, 1 (mean 1).
    np.testing.assert_allclose(turns[0], [1 - 7 / 3, -2.0], rtol=1e-15)
    np.testing.assert_allclose(turns[2], [2 - 7 / 3, 0.0], atol=1e-15)
    np.testing.assert_allclose(turns[4], [4 - 7 / 3, 2.0, 0.0], rtol=1e-15)
    assert [turns[1], turns[3], turns[5]] == [[1.0], [-1.0], [0.0]]
    # One advantage per trajectory: the mean of its turns'.
    np.testing.assert_allclose(credit.advantages_P_G[0][4], (4 - 7 / 3 + 2.0) / 3, rtol=1e-15)
    # With the std: h turn 1 is (0, 2, 4) - 2 over sqrt(8/3).
    std = assign_credit(batch, "agent_turn_groups", normalize_std=True, epsilon=EPS)
    np.testing.assert_allclose(
        std.turn_advantages_P_G[0][0][1], -2.0 / (math.sqrt(8 / 3) + EPS), rtol=1e-14
    )


def test_per_turn_advantages_reach_their_turns_tokens():
    batch = [group(("h", (1.0, 0.0), 0.0), ("h", (0.0, 0.0), 0.0))]  # G = [1, 0] and [0, 0]
    data = assemble_training_data(batch, credit=assign_credit(batch, "agent_turn_groups"))
    # Each turn is its own Datum here (fresh observations): turn 0 +-0.5, turn 1 has no signal.
    actions = [d.advantages[d.mask == 1].tolist() for d in data.data_D]
    assert actions == [[0.5], [0.0], [-0.5], [0.0]]
    with pytest.raises(ValueError, match="got 1 per-turn advantages for a trajectory of 2 turns"):
        trajectory_to_data(batch[0].trajectories_G[0], [1.0])


def test_a_trajectory_advantage_and_its_per_turn_copy_give_the_same_datums():
    t = trajectory("a", 0.0, 0.0, 0.0)
    as_float = trajectory_to_data(t, 0.3)
    per_turn = trajectory_to_data(t, [0.3, 0.3, 0.3])
    assert [d.advantages.tolist() for d in as_float] == [d.advantages.tolist() for d in per_turn]


# ------------------------------------------------------------------------------ properties

SEATS = ("a", "b", "c")
reward = st.floats(min_value=-1e3, max_value=1e3, allow_nan=False, allow_infinity=False)
member = st.tuples(st.sampled_from(SEATS), st.lists(reward, min_size=0, max_size=3), reward)


@st.composite
def batches(draw) -> list[TrajectoryGroup]:
    """One to three groups, each with a seat that plays twice (at least one turn each)."""
    groups = []
    for _ in range(draw(st.integers(1, 3))):
        seat = draw(st.sampled_from(SEATS))
        pair = [(seat, draw(st.lists(reward, min_size=1, max_size=3)), draw(reward)) for _ in "ab"]
        members = draw(st.permutations(pair + draw(st.lists(member, max_size=6))))
        groups.append(group(*[(s, tuple(r), f) for s, r, f in members]))
    return groups


def run(scheme: str, groups, **kwargs):
    kwargs.setdefault("epsilon", EPS)
    return assign_credit(groups, scheme, env="env", **kwargs)


@settings(max_examples=60, deadline=None)
@given(batches(), st.sampled_from(CREDIT_NAMES), st.booleans())
def test_property_every_scheme_gives_finite_advantages_of_the_batchs_shape(
    groups, scheme, normalize
):
    normalize = normalize and scheme in ("group_mean", "agent_turn_groups")
    credit = run(scheme, groups, normalize_std=normalize)
    assert [len(a) for a in credit.advantages_P_G] == [len(g) for g in groups]
    assert all(np.all(np.isfinite(a)) for a in credit.advantages_P_G)
    for g, turns_G in zip(groups, credit.turn_advantages_P_G or [[]] * len(groups), strict=True):
        for t, turns in zip(g.trajectories_G, turns_G, strict=False):  # none: trajectory-level
            assert turns.shape == (len(t.transitions),) and np.all(np.isfinite(turns))
    # A group without a non-zero advantage is exactly a group without signal.
    for p, signal in enumerate(credit.signal_P):
        cells = (
            credit.turn_advantages_P_G[p]
            if credit.turn_advantages_P_G
            else [credit.advantages_P_G[p]]
        )
        if scheme != "group_mean":
            assert signal == any(np.any(c != 0) for c in cells)


@settings(max_examples=60, deadline=None)
@given(batches(), st.sampled_from(CREDIT_NAMES), st.randoms(use_true_random=False))
def test_property_permuting_a_group_permutes_its_advantages(groups, scheme, rng):
    order = list(range(len(groups[0])))
    rng.shuffle(order)
    first = groups[0]
    shuffled = TrajectoryGroup(
        [first.trajectories_G[i] for i in order], [first.final_rewards_G[i] for i in order]
    )
    before, after = run(scheme, groups), run(scheme, [shuffled, *groups[1:]])
    if scheme == "group_mean":  # numpy's mean: equal up to the order of its sum
        np.testing.assert_allclose(
            after.advantages_P_G[0], before.advantages_P_G[0][order], atol=1e-9
        )
        return
    assert after.advantages_P_G[0].tolist() == before.advantages_P_G[0][order].tolist()
    assert after.baselines == before.baselines
    if before.turn_advantages_P_G is not None:
        moved = [before.turn_advantages_P_G[0][i].tolist() for i in order]
        assert [a.tolist() for a in after.turn_advantages_P_G[0]] == moved


@settings(max_examples=60, deadline=None)
@given(batches())
def test_property_per_agent_norm_gives_each_seat_zero_mean_and_unit_std(groups):
    credit = run("per_agent_norm", groups)
    for g, advantages in zip(groups, credit.advantages_P_G, strict=True):
        returns = group_returns(g)
        for seat in {t.agent_id for t in g.trajectories_G}:
            mine = [i for i, t in enumerate(g.trajectories_G) if t.agent_id == seat]
            spread = np.std(returns[mine])
            # the centred returns sum to zero up to the rounding of their mean
            scale = max(1.0, float(np.max(np.abs(returns[mine]))))
            assert abs(np.mean(advantages[mine])) * (spread + EPS) <= 1e-12 * scale
            if np.all(returns[mine] == returns[mine][0]):
                assert advantages[mine].tolist() == [0.0] * len(mine)  # no comparison: zero
            elif spread > 1e-2:  # sigma / (sigma + eps) is 1 up to 1e-4
                assert np.std(advantages[mine]) == pytest.approx(1.0, abs=1e-4)


@settings(max_examples=60, deadline=None)
@given(batches(), st.sampled_from(SEATS), st.floats(min_value=-100, max_value=100))
def test_property_per_agent_norm_ignores_a_constant_added_to_one_seat(groups, seat, constant):
    shifted = [
        TrajectoryGroup(
            g.trajectories_G,
            [
                f + (constant if t.agent_id == seat else 0.0)
                for t, f in zip(g.trajectories_G, g.final_rewards_G, strict=True)
            ],
        )
        for g in groups
    ]
    before, after = run("per_agent_norm", groups), run("per_agent_norm", shifted)
    for a, b in zip(before.advantages_P_G, after.advantages_P_G, strict=True):
        # centred returns agree to the float error of |R| + |c| (about 1e-13), over std + eps
        np.testing.assert_allclose(a, b, atol=1e-6)


@settings(max_examples=30, deadline=None)
@given(
    st.lists(st.lists(st.tuples(reward, reward), min_size=1, max_size=4), min_size=1, max_size=8),
    st.floats(min_value=-50, max_value=50),
)
def test_property_role_baseline_forgets_a_constant_added_to_one_seat(batches_, constant):
    """A constant c on p0's returns moves its advantage by exactly c * decay**(returns seen)."""
    plain, shifted = RoleBaselines(), RoleBaselines()
    seen = 0
    for games in batches_:
        groups = [episodes(game, seats=("p0", "p1")) for game in games]
        moved = [episodes((r0 + constant, r1), seats=("p0", "p1")) for r0, r1 in games]
        a = assign_credit(groups, "role_baseline", env="g", baselines=plain)
        b = assign_credit(moved, "role_baseline", env="g", baselines=shifted)
        drift = constant * ROLE_BASELINE_DECAY**seen
        for x, y in zip(a.advantages_P_G, b.advantages_P_G, strict=True):
            assert y[0] - x[0] == pytest.approx(drift, abs=1e-9)  # p0
            assert y[1] == x[1]  # p1 never sees it
        plain, shifted, seen = a.baselines, b.baselines, seen + len(games)


def test_role_baseline_has_forgotten_the_constant_once_converged():
    rng = np.random.default_rng(0)
    plain, shifted = RoleBaselines(), RoleBaselines()
    for _ in range(120):  # 4 returns a batch: 480 returns, 0.95**480 < 1e-10
        games = rng.choice([-1.0, 0.0, 1.0], size=4)
        a = assign_credit(
            [episodes(*[(r, -r) for r in games], seats=("p0", "p1"))],
            "role_baseline",
            baselines=plain,
        )
        b = assign_credit(
            [episodes(*[(r + 5.0, -r) for r in games], seats=("p0", "p1"))],
            "role_baseline",
            baselines=shifted,
        )
        plain, shifted = a.baselines, b.baselines
    np.testing.assert_allclose(a.advantages_P_G[0], b.advantages_P_G[0], atol=1e-9)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(reward, min_size=1, max_size=4), min_size=1, max_size=6))
def test_property_role_baselines_of_a_zero_sum_game_keep_every_game_zero_sum(batches_):
    # In a two-player zero-sum game both seats' baselines stay opposite, so each game's two
    # advantages sum to zero: TRL's centring of a group (one game) then changes nothing.
    state = RoleBaselines()
    for results in batches_:
        credit = assign_credit(
            [episodes((r, -r), seats=("p0", "p1")) for r in results],
            "role_baseline",
            baselines=state,
        )
        for advantages in credit.advantages_P_G:
            assert advantages[0] == -advantages[1]
        state = credit.baselines
        assert state.value("", "p0") == -state.value("", "p1")


@settings(max_examples=60, deadline=None)
@given(batches(), st.data())
def test_property_agent_turn_groups_never_compare_other_seats_or_turns(groups, data):
    """Changing turn t of seat k changes the advantages of (k, t) only, as its set alone gives."""
    g = groups[0]
    seats = [t.agent_id for t in g.trajectories_G]
    turns_G = [turn_returns(t, f) for t, f in zip(g.trajectories_G, g.final_rewards_G, strict=True)]
    before = agent_turn_advantages(turns_G, seats)
    cells = [(i, t) for i, r in enumerate(turns_G) for t in range(r.size)]
    i, t = data.draw(st.sampled_from(cells))
    key = (seats[i], t)
    changed = [r.copy() for r in turns_G]
    for j, r in enumerate(changed):
        if seats[j] == key[0] and r.size > t:
            r[t] = data.draw(reward)
    after = agent_turn_advantages(changed, seats)
    members = [j for j, r in enumerate(changed) if seats[j] == key[0] and r.size > t]
    alone = _reference_centre(np.array([changed[j][t] for j in members]))
    for j, (x, y) in enumerate(zip(before, after, strict=True)):
        for u in range(x.size):
            if (seats[j], u) != key:
                assert x[u] == y[u]
    assert [after[j][t] for j in members] == pytest.approx(alone.tolist(), abs=1e-9)


def _reference_centre(values: np.ndarray) -> np.ndarray:
    return np.zeros_like(values) if np.all(values == values[0]) else values - values.mean()


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(reward, reward), min_size=2, max_size=6))
def test_property_agent_turn_groups_of_one_seat_and_one_turn_are_the_group_mean(pairs):
    # One seat, one turn per trajectory: AT-GRPO's grouping is GRPO's.
    g = group(*[("solver", (r,), f) for r, f in pairs])
    at = assign_credit([g], "agent_turn_groups").advantages_P_G[0]
    np.testing.assert_allclose(at, center_advantages(group_returns(g)), atol=1e-9)


@settings(max_examples=40, deadline=None)
@given(batches(), st.sampled_from(CREDIT_NAMES))
def test_property_assembled_tokens_carry_the_credit(groups, scheme):
    credit = run(scheme, groups)
    batch = assemble_training_data(groups, credit=credit, drop_constant=False)
    expected = []
    for p, g in enumerate(groups):
        for i, t in enumerate(g.trajectories_G):
            for u in range(len(t.transitions)):
                turns = credit.turn_advantages_P_G
                value = turns[p][i][u] if turns is not None else credit.advantages_P_G[p][i]
                expected.append(np.float32(value))
    actions = [float(d.advantages[d.mask == 1][0]) for d in batch.data_D]
    assert actions == [float(v) for v in expected]
