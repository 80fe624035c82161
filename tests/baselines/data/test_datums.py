"""trajectory_to_data (with the context swap), assemble_training_data, packing and padding."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from baselines.data.datums import (
    assemble_training_data,
    pack_data,
    pad_data,
    training_context_transform,
    trajectory_to_data,
    unpack_data,
)
from baselines.types import Datum, Message, Tokens, Trajectory, TrajectoryGroup, Transition

A = 0.5  # the trajectory advantage used by the table below


def _t(
    observation: Sequence[int],
    action: Sequence[int],
    logprobs: Sequence[float],
    *,
    loss_weight: float | None = None,
    reward: float = 0.0,
    info: dict[str, object] | None = None,
) -> Transition:
    info = dict(info or {})
    if loss_weight is not None:
        info["loss_weight"] = loss_weight
    return Transition(observation, action, logprobs, reward=reward, info=info)


@dataclass(frozen=True)
class Expected:
    """One expected Datum, written as the full sequence x and the arrays after the shift."""

    full: list[int]
    logprobs: Sequence[float]
    advantages: Sequence[float]
    mask: Sequence[float]
    weights: Sequence[float]


def _check(datum: Datum, expected: Expected) -> None:
    assert datum.model_input.tolist() == expected.full[:-1]
    assert datum.target_tokens.tolist() == expected.full[1:]
    np.testing.assert_allclose(datum.logprobs, expected.logprobs, rtol=1e-6)
    np.testing.assert_allclose(datum.advantages, expected.advantages, rtol=1e-6)
    assert datum.mask.tolist() == list(expected.mask)
    np.testing.assert_allclose(datum.weights, expected.weights, rtol=1e-6)


# Each case: transitions, expected Datums. Arrays are aligned with the targets x[1:],
# so the first full-sequence token never appears in them.
CASES: dict[str, tuple[list[Transition], list[Expected]]] = {
    "single turn": (
        # x = [1, 2, 3 | 4, 5]: targets [2, 3, 4, 5]; 4 and 5 are action tokens
        [_t([1, 2, 3], [4, 5], [-0.1, -0.2])],
        [Expected([1, 2, 3, 4, 5], [0, 0, -0.1, -0.2], [0, 0, A, A], [0, 0, 1, 1], [0, 0, 1, 1])],
    ),
    "prefix merge": (
        # turn 1's observation [1, 2, 3, 4, 5] extends x = [1, 2 | 3, 4]: only the delta [5]
        # is appended, then the action [6]
        [_t([1, 2], [3, 4], [-1.0, -2.0]), _t([1, 2, 3, 4, 5], [6], [-3.0])],
        [
            Expected(
                [1, 2, 3, 4, 5, 6],
                [0, -1, -2, 0, -3],
                [0, A, A, 0, A],
                [0, 1, 1, 0, 1],
                [0, 1, 1, 0, 1],
            )
        ],
    ),
    "observation equal to the sequence": (
        # turn 1 sees exactly x = [1, 2 | 3, 4]: empty delta, actions back to back
        [_t([1, 2], [3, 4], [-1.0, -2.0]), _t([1, 2, 3, 4], [5], [-3.0])],
        [Expected([1, 2, 3, 4, 5], [0, -1, -2, -3], [0, A, A, A], [0, 1, 1, 1], [0, 1, 1, 1])],
    ),
    "non-prefix split": (
        # [1, 9, 3, 4, 5] does not start with x = [1, 2, 3, 4] (an edited history):
        # the first Datum is finalized and a second starts from the whole observation
        [_t([1, 2], [3, 4], [-1.0, -2.0]), _t([1, 9, 3, 4, 5], [6], [-3.0])],
        [
            Expected([1, 2, 3, 4], [0, -1, -2], [0, A, A], [0, 1, 1], [0, 1, 1]),
            Expected(
                [1, 9, 3, 4, 5, 6],
                [0, 0, 0, 0, -3],
                [0, 0, 0, 0, A],
                [0, 0, 0, 0, 1],
                [0] * 4 + [1],
            ),
        ],
    ),
    "truncated history splits": (
        # [1, 2, 3] is shorter than x = [1, 2, 3, 4] (history_rounds dropped a round)
        [_t([1, 2], [3, 4], [-1.0, -2.0]), _t([1, 2, 3], [7], [-0.5])],
        [
            Expected([1, 2, 3, 4], [0, -1, -2], [0, A, A], [0, 1, 1], [0, 1, 1]),
            Expected([1, 2, 3, 7], [0, 0, -0.5], [0, 0, A], [0, 0, 1], [0, 0, 1]),
        ],
    ),
    "merge, split, merge": (
        [
            _t([1], [2], [-0.1]),
            _t([1, 2, 3], [4], [-0.2]),  # extends [1, 2]
            _t([8], [9], [-0.3]),  # does not extend [1, 2, 3, 4]
            _t([8, 9, 10], [11], [-0.4]),  # extends [8, 9]
        ],
        [
            Expected([1, 2, 3, 4], [-0.1, 0, -0.2], [A, 0, A], [1, 0, 1], [1, 0, 1]),
            Expected([8, 9, 10, 11], [-0.3, 0, -0.4], [A, 0, A], [1, 0, 1], [1, 0, 1]),
        ],
    ),
    "loss_weight 0 keeps the turn as context": (
        # attempt 1 (weight 0) stays in the sequence; only attempt 2 is trained on, but
        # both are action tokens (mask 1) with the trajectory advantage
        [_t([1, 2], [3, 4], [-1.0, -2.0], loss_weight=0.0), _t([1, 2, 3, 4, 5], [6], [-3.0])],
        [
            Expected(
                [1, 2, 3, 4, 5, 6],
                [0, -1, -2, 0, -3],
                [0, A, A, 0, A],
                [0, 1, 1, 0, 1],
                [0, 0, 0, 0, 1],
            )
        ],
    ),
    "fractional loss_weight": (
        [_t([1, 2], [3], [-1.0], loss_weight=0.25)],
        [Expected([1, 2, 3], [0, -1], [0, A], [0, 1], [0, 0.25])],
    ),
    "single-token sequence yields nothing": (
        [_t([], [3], [-1.0])],
        [],
    ),
    "empty observation drops the first action token": (
        # x = [3, 4]: token 3 has no context to be predicted from, so only 4 is a target
        [_t([], [3, 4], [-1.0, -2.0])],
        [Expected([3, 4], [-2], [A], [1], [1])],
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_trajectory_to_data_table(name: str) -> None:
    transitions, expected = CASES[name]
    data = trajectory_to_data(Trajectory(tuple(transitions), strategy="s"), advantage=A)
    assert len(data) == len(expected)
    for datum, want in zip(data, expected, strict=True):
        _check(datum, want)
        assert datum.strategy == "s"


def test_shift_alignment_target_t_is_input_t_plus_one() -> None:
    trajectory = Trajectory((_t([1, 2], [3, 4], [-1.0, -2.0]), _t([1, 2, 3, 4, 5], [6], [-3.0])))
    [datum] = trajectory_to_data(trajectory, advantage=1.0)
    # model_input[t + 1] == target_tokens[t]: both are x[t + 1]
    assert datum.model_input[1:].tolist() == datum.target_tokens[:-1].tolist()
    # the sampling logprob of token 4 (-2.0) sits where 4 is the target, i.e. after input 3
    position = datum.target_tokens.tolist().index(4)
    assert datum.model_input[position] == 3
    assert datum.logprobs[position] == np.float32(-2.0)


# --- context swap (the expert-iteration plan) ---------------------------------------


def test_context_swap_seed_003_example() -> None:
    # the plan's "Test 1": ob [1, 2, 3], ac [4, 5], lps [-0.1, -0.2]; the training context
    # is [9, 9]. Full sequence x = [9, 9, 4, 5].
    trajectory = Trajectory((_t([1, 2, 3], [4, 5], [-0.1, -0.2]),))
    calls: list[tuple[Tokens, int]] = []

    def to_training(observation: Tokens, turn: int) -> list[int]:
        calls.append((observation, turn))
        return [9, 9]

    [datum] = trajectory_to_data(trajectory, advantage=2.0, context_transform=to_training)
    assert calls == [((1, 2, 3), 0)]  # the sampling observation and the turn index
    assert datum.model_input.tolist() == [9, 9, 4]  # starts with [9, 9], not [1, 2, 3]
    assert datum.target_tokens.tolist() == [9, 4, 5]
    # the sampled logprobs are untouched and still sit on the action tokens
    np.testing.assert_allclose(datum.logprobs, [0.0, -0.1, -0.2], rtol=1e-6)
    assert datum.mask.tolist() == [0.0, 1.0, 1.0]  # only action tokens
    assert datum.advantages.tolist() == [0.0, 2.0, 2.0]


def test_context_swap_happens_before_the_prefix_check() -> None:
    # The plan's 2-turn feedback strategy: sampled as problem -> attempt1 -> feedback ->
    # attempt2; attempt 2 is trained on "problem + attempt1" without the feedback.
    problem, attempt1, feedback, attempt2 = [1, 2], [3, 4], [50, 51], [5, 6]
    turns = [
        _t(problem, attempt1, [-0.1, -0.2], loss_weight=0.0),
        _t(problem + attempt1 + feedback, attempt2, [-0.3, -0.4]),
    ]

    def drop_feedback(observation: Tokens, turn: int) -> list[int]:
        return [t for t in observation if t not in feedback]

    # Without the transform the sampling context extends x: one Datum with the feedback.
    [sampled] = trajectory_to_data(Trajectory(tuple(turns)), 1.0)
    assert sampled.model_input.tolist() == [1, 2, 3, 4, 50, 51, 5]
    # With it, the training observation [1, 2, 3, 4] equals x: still one Datum, no feedback.
    [trained] = trajectory_to_data(Trajectory(tuple(turns)), 1.0, drop_feedback)
    assert trained.target_tokens.tolist() == [2, 3, 4, 5, 6]
    np.testing.assert_allclose(trained.logprobs, [0, -0.1, -0.2, -0.3, -0.4], rtol=1e-6)
    assert trained.weights.tolist() == [0, 0, 0, 1, 1]

    # "problem only" (drop attempt1 too): no longer a prefix -> a second Datum starts
    def problem_only(observation: Tokens, turn: int) -> list[int]:
        return list(problem) if turn == 1 else list(observation)

    first, second = trajectory_to_data(Trajectory(tuple(turns)), 1.0, problem_only)
    assert first.target_tokens.tolist() == [2, 3, 4]
    assert second.model_input.tolist() == [1, 2, 5]
    assert second.target_tokens.tolist() == [2, 5, 6]
    np.testing.assert_allclose(second.logprobs, [0, -0.3, -0.4], rtol=1e-6)


def test_context_transform_output_is_validated() -> None:
    trajectory = Trajectory((_t([1], [2], [-0.1]),))
    with pytest.raises(TypeError, match="context_transform output at turn 0"):
        trajectory_to_data(trajectory, 1.0, lambda ob, turn: "text")  # type: ignore[arg-type,return-value]


# --- training_messages ----------------------------------------------------------------


def _render(messages: Sequence[Message]) -> list[int]:
    """A stand-in chat template: 100 + message index, then the content's length."""
    return [token for i, m in enumerate(messages) for token in (100 + i, len(m["content"]))]


def test_training_messages_are_rendered_as_the_training_context() -> None:
    messages = [{"role": "user", "content": "abc"}]
    trajectory = Trajectory(
        (_t([1, 2, 3], [4, 5], [-0.1, -0.2], info={"training_messages": messages}),)
    )
    transform = training_context_transform(trajectory, _render)
    assert transform is not None
    [datum] = trajectory_to_data(trajectory, 1.0, transform)
    assert datum.model_input.tolist() == [100, 3, 4]  # _render(messages) = [100, 3]
    np.testing.assert_allclose(datum.logprobs, [0.0, -0.1, -0.2], rtol=1e-6)


def test_training_messages_then_context_transform_compose() -> None:
    messages = [{"role": "user", "content": "abc"}]
    trajectory = Trajectory((_t([1], [4], [-0.1], info={"training_messages": messages}),))
    transform = training_context_transform(
        trajectory, _render, lambda ob, turn: [*ob, 7]
    )  # rendered [100, 3], then the caller's transform appends 7
    assert transform is not None
    [datum] = trajectory_to_data(trajectory, 1.0, transform)
    assert datum.model_input.tolist() == [100, 3, 7]


def test_training_messages_without_a_renderer_is_an_error() -> None:
    messages = [{"role": "user", "content": "abc"}]
    trajectory = Trajectory(
        (_t([1], [2], [-0.1]), _t([1, 2], [3], [-0.1], info={"training_messages": messages})),
        agent_id="agent_1",
    )
    with pytest.raises(ValueError, match=r"turns \[1\] of trajectory \(agent 'agent_1'\)"):
        training_context_transform(trajectory, None)
    group = TrajectoryGroup([trajectory, trajectory], final_rewards_G=[0.0, 1.0])
    with pytest.raises(ValueError, match="render_messages is None"):
        assemble_training_data([group])


def test_no_training_messages_returns_the_callers_transform() -> None:
    trajectory = Trajectory((_t([1], [2], [-0.1]),))
    assert training_context_transform(trajectory, _render) is None

    def mine(ob: Tokens, turn: int) -> Tokens:
        return ob

    assert training_context_transform(trajectory, _render, mine) is mine


# --- assemble_training_data -----------------------------------------------------------


def _one_turn(token: int, strategy: str | None = None, reward: float = 0.0) -> Trajectory:
    return Trajectory((_t([1, 2], [token], [-0.5], reward=reward),), strategy=strategy)


def test_assemble_centres_returns_per_group() -> None:
    # group returns [1, 0, 0.5] (final rewards): mean 0.5 -> advantages [0.5, -0.5, 0]
    group = TrajectoryGroup(
        [_one_turn(10), _one_turn(11), _one_turn(12)], final_rewards_G=[1.0, 0.0, 0.5]
    )
    batch = assemble_training_data([group])
    assert [d.target_tokens[-1] for d in batch.data_D] == [10, 11, 12]
    assert [float(d.advantages[-1]) for d in batch.data_D] == [0.5, -0.5, 0.0]
    assert batch.metrics["data/num_datums"] == 3
    assert batch.metrics["data/num_tokens"] == 6
    assert batch.metrics["data/num_action_tokens"] == 3
    assert batch.metrics["env/all/reward/total"] == pytest.approx(0.5)


def test_assemble_uses_step_rewards_too() -> None:
    # a parse error: step reward -1 on trajectory 2. Returns [0, -1]: mean -0.5 -> [0.5, -0.5]
    group = TrajectoryGroup([_one_turn(10), _one_turn(11, reward=-1.0)])
    batch = assemble_training_data([group])
    assert [float(d.advantages[-1]) for d in batch.data_D] == [0.5, -0.5]


def test_assemble_drops_constant_groups_but_keeps_one() -> None:
    constant = TrajectoryGroup([_one_turn(10), _one_turn(11)], final_rewards_G=[1.0, 1.0])
    mixed = TrajectoryGroup([_one_turn(20), _one_turn(21)], final_rewards_G=[1.0, 0.0])
    batch = assemble_training_data([constant, mixed])
    assert [int(d.target_tokens[-1]) for d in batch.data_D] == [20, 21]
    assert batch.metrics["data/num_groups"] == 2
    assert batch.metrics["data/num_groups_kept"] == 1
    assert batch.metrics["data/num_groups_with_signal"] == 1
    assert batch.metrics["env/all/by_group/frac_mixed"] == 0.5

    other_constant = TrajectoryGroup([_one_turn(30), _one_turn(31)])
    kept_anyway = assemble_training_data([constant, other_constant])
    assert [int(d.target_tokens[-1]) for d in kept_anyway.data_D] == [10, 11]  # the first
    assert all(float(d.advantages[-1]) == 0.0 for d in kept_anyway.data_D)
    assert kept_anyway.metrics["data/num_groups_with_signal"] == 0

    everything = assemble_training_data([constant, mixed], drop_constant=False)
    assert len(everything.data_D) == 4


def test_assemble_normalizes_std_when_asked() -> None:
    # returns [3, 1]: centred [1, -1], std 1 -> [1 / (1 + eps), -1 / (1 + eps)] ~ [1, -1]
    group = TrajectoryGroup([_one_turn(10), _one_turn(11)], final_rewards_G=[3.0, 1.0])
    plain = assemble_training_data([group])
    normalized = assemble_training_data([group], normalize_std=True, std_epsilon=1.0)
    assert [float(d.advantages[-1]) for d in plain.data_D] == [1.0, -1.0]
    # with eps = 1: [1 / 2, -1 / 2]
    assert [float(d.advantages[-1]) for d in normalized.data_D] == [0.5, -0.5]


def test_assemble_stratifies_advantages_by_w_s_over_n_s() -> None:
    # group 1 (iid): returns [1, 0] -> A [0.5, -0.5]; n_iid = 4 (groups 1 and 3), w_iid = 2
    #   -> scale 2 / 4 = 0.5 -> [0.25, -0.25]
    # group 2 (hint): returns [2, 0] -> A [1, -1]; n_hint = 2, w_hint = 3 -> scale 1.5
    #   -> [1.5, -1.5]
    # group 3 (iid): constant, dropped, but its 2 trajectories still count in n_iid
    g1 = TrajectoryGroup([_one_turn(10, "iid"), _one_turn(11, "iid")], final_rewards_G=[1, 0])
    g2 = TrajectoryGroup([_one_turn(20, "hint"), _one_turn(21, "hint")], final_rewards_G=[2, 0])
    g3 = TrajectoryGroup([_one_turn(30, "iid"), _one_turn(31, "iid")], final_rewards_G=[1, 1])
    batch = assemble_training_data([g1, g2, g3], strategy_weights={"iid": 2.0, "hint": 3.0})
    advantages = {int(d.target_tokens[-1]): float(d.advantages[-1]) for d in batch.data_D}
    assert advantages == {10: 0.25, 11: -0.25, 20: 1.5, 21: -1.5}
    assert batch.metrics["strategy/iid/num_trajectories"] == 4
    assert batch.metrics["strategy/hint/num_trajectories"] == 2
    assert {d.strategy for d in batch.data_D} == {"iid", "hint"}


def test_assemble_without_weights_leaves_advantages_unscaled() -> None:
    g1 = TrajectoryGroup([_one_turn(10, "iid"), _one_turn(11, "iid")], final_rewards_G=[1, 0])
    g2 = TrajectoryGroup([_one_turn(20, "hint"), _one_turn(21, "hint")], final_rewards_G=[2, 0])
    batch = assemble_training_data([g1, g2])
    assert [float(d.advantages[-1]) for d in batch.data_D] == [0.5, -0.5, 1.0, -1.0]


def test_assemble_errors_name_the_problem() -> None:
    with pytest.raises(ValueError, match="groups_P is empty"):
        assemble_training_data([])
    group = TrajectoryGroup([_one_turn(10, "hint"), _one_turn(11, "hint")], final_rewards_G=[1, 0])
    with pytest.raises(ValueError, match=r"strategies \['hint'\] have no weight"):
        assemble_training_data([group], strategy_weights={"iid": 1.0})


# --- packing and padding --------------------------------------------------------------


def _sample_data() -> list[Datum]:
    return trajectory_to_data(
        Trajectory(
            (
                _t([1, 2, 3], [4, 5], [-0.1, -0.2]),  # x = [1 2 3 4 5] -> T = 4
                _t([7], [8], [-0.3]),  # x = [7 8] -> T = 1
            ),
            strategy="iid",
        ),
        advantage=1.5,
    )


def test_pack_data_concatenates_with_boundaries() -> None:
    packed = pack_data(_sample_data())
    assert packed.input_ids_N.tolist() == [1, 2, 3, 4, 7]
    assert packed.target_tokens_N.tolist() == [2, 3, 4, 5, 8]
    assert packed.position_ids_N.tolist() == [0, 1, 2, 3, 0]
    assert packed.cu_seqlens_D1.tolist() == [0, 4, 5]
    assert packed.cu_seqlens_D1.dtype == np.int32
    assert packed.lengths_D.tolist() == [4, 1]
    assert (packed.max_seqlen, packed.num_tokens) == (4, 5)
    assert packed.mask_N.tolist() == [0, 0, 1, 1, 1]
    np.testing.assert_allclose(packed.logprobs_N, [0, 0, -0.1, -0.2, -0.3], rtol=1e-6)
    assert packed.advantages_N.tolist() == [0, 0, 1.5, 1.5, 1.5]
    assert packed.strategies_D == ("iid", "iid")


def test_pad_data_right_pads_with_zero_weight() -> None:
    padded = pad_data(_sample_data(), pad_token_id=-1)
    assert padded.input_ids_B_T.tolist() == [[1, 2, 3, 4], [7, -1, -1, -1]]
    assert padded.target_tokens_B_T.tolist() == [[2, 3, 4, 5], [8, -1, -1, -1]]
    assert padded.attention_mask_B_T.tolist() == [[1, 1, 1, 1], [1, 0, 0, 0]]
    assert padded.mask_B_T.tolist() == [[0, 0, 1, 1], [1, 0, 0, 0]]
    assert padded.weights_B_T.tolist() == [[0, 0, 1, 1], [1, 0, 0, 0]]
    assert padded.num_tokens == 8  # 2 rows x 4, versus 5 packed
    assert pad_data(_sample_data(), pad_to_multiple_of=8).input_ids_B_T.shape == (2, 8)


def test_pack_and_pad_reject_empty_input() -> None:
    with pytest.raises(ValueError, match="data_D is empty"):
        pack_data([])
    with pytest.raises(ValueError, match="data_D is empty"):
        pad_data([])
    with pytest.raises(ValueError, match="pad_to_multiple_of must be >= 1"):
        pad_data(_sample_data(), pad_to_multiple_of=0)


# --- properties -----------------------------------------------------------------------

tokens = st.integers(min_value=0, max_value=20)


@st.composite
def trajectories(draw: st.DrawFn) -> Trajectory:
    """Trajectories whose observations sometimes extend the previous sequence, sometimes not."""
    transitions = []
    sequence: list[int] = []
    for _ in range(draw(st.integers(1, 5))):
        extend = draw(st.booleans())
        if sequence and extend:
            observation = sequence + draw(st.lists(tokens, max_size=4))
        else:
            observation = draw(st.lists(tokens, min_size=1, max_size=6))
        action = draw(st.lists(tokens, min_size=1, max_size=4))
        logprobs = draw(
            st.lists(st.floats(-20, 0, width=32), min_size=len(action), max_size=len(action))
        )
        weight = draw(st.sampled_from([0.0, 0.5, 1.0]))
        transitions.append(_t(observation, action, logprobs, loss_weight=weight))
        sequence = observation + action
    return Trajectory(tuple(transitions), strategy=draw(st.sampled_from([None, "iid", "hint"])))


def _full_sequence(datum: Datum) -> list[int]:
    return [int(datum.model_input[0]), *datum.target_tokens.tolist()]


@given(trajectories(), st.floats(-5, 5, width=32))
def test_property_datum_arrays_are_aligned(trajectory: Trajectory, advantage: float) -> None:
    for datum in trajectory_to_data(trajectory, advantage):
        lengths = {
            len(getattr(datum, f))
            for f in ("model_input", "target_tokens", "logprobs", "advantages", "mask", "weights")
        }
        assert len(lengths) == 1
        assert datum.model_input[1:].tolist() == datum.target_tokens[:-1].tolist()
        # observation targets carry nothing; action targets carry the advantage
        observation = datum.mask == 0
        assert not datum.logprobs[observation].any()
        assert not datum.advantages[observation].any()
        assert not datum.weights[observation].any()
        assert np.all(datum.advantages[~observation] == np.float32(advantage))


@given(trajectories())
def test_property_masks_cover_exactly_the_action_tokens(trajectory: Trajectory) -> None:
    # Observations are never empty here, so every action token is a target somewhere.
    data = trajectory_to_data(trajectory, 1.0)
    masked_targets = [t for d in data for t in d.target_tokens[d.mask == 1].tolist()]
    masked_logprobs = [lp for d in data for lp in d.logprobs[d.mask == 1].tolist()]
    masked_weights = [w for d in data for w in d.weights[d.mask == 1].tolist()]
    assert masked_targets == [a for t in trajectory.transitions for a in t.action]
    np.testing.assert_array_equal(
        np.array(masked_logprobs, dtype=np.float32),
        np.array([lp for t in trajectory.transitions for lp in t.logprobs], dtype=np.float32),
    )
    assert masked_weights == [t.loss_weight for t in trajectory.transitions for _ in t.action]


@given(trajectories())
def test_property_context_swap_never_touches_actions(trajectory: Trajectory) -> None:
    # a transform that rewrites the first observation token of every turn
    def swap(observation: Tokens, turn: int) -> Tokens:
        return (50 + turn, *observation[1:])

    data = trajectory_to_data(trajectory, 1.0, swap)
    assert [t for d in data for t in d.target_tokens[d.mask == 1].tolist()] == [
        a for t in trajectory.transitions for a in t.action
    ]
    np.testing.assert_array_equal(
        np.concatenate([d.logprobs[d.mask == 1] for d in data]),
        np.array([lp for t in trajectory.transitions for lp in t.logprobs], dtype=np.float32),
    )
    # every Datum starts with a swapped observation, never a sampling one
    assert all(50 <= d.model_input[0] < 60 for d in data)


@given(trajectories())
def test_property_each_turn_is_a_prefix_of_its_datum_in_order(trajectory: Trajectory) -> None:
    data = [_full_sequence(d) for d in trajectory_to_data(trajectory, 1.0)]
    index, used = 0, 0  # current Datum, tokens of it explained by earlier turns
    for transition in trajectory.transitions:
        observation, action = list(transition.observation), list(transition.action)
        turn = observation + action
        if not (len(observation) >= used and data[index][: len(turn)] == turn):
            index, used = index + 1, 0  # this turn must open the next Datum
            assert data[index][: len(turn)] == turn
        used = len(turn)
    assert index == len(data) - 1
    assert used == len(data[-1])  # the last turn ends the last Datum


@given(st.lists(st.lists(tokens, min_size=1, max_size=5), min_size=1, max_size=5))
def test_property_extending_observations_give_one_datum(deltas: list[list[int]]) -> None:
    sequence: list[int] = []
    transitions = []
    for i, delta in enumerate(deltas):
        observation = sequence + delta
        transitions.append(_t(observation, [i], [-1.0]))
        sequence = [*observation, i]
    [datum] = trajectory_to_data(Trajectory(tuple(transitions)), 1.0)
    assert _full_sequence(datum) == sequence


@given(st.integers(1, 6))
def test_property_fresh_observations_give_one_datum_per_turn(turns: int) -> None:
    # each observation starts with a token no earlier sequence starts with
    transitions = [_t([100 + i, 1], [2], [-1.0]) for i in range(turns)]
    assert len(trajectory_to_data(Trajectory(tuple(transitions)), 1.0)) == turns


@given(st.lists(trajectories(), min_size=1, max_size=4))
def test_property_packing_round_trips(trajectories_: list[Trajectory]) -> None:
    data = [d for t in trajectories_ for d in trajectory_to_data(t, 0.5)]
    if not data:
        return
    packed = pack_data(data)
    assert packed.num_tokens == sum(len(d) for d in data)
    assert packed.cu_seqlens_D1[-1] == packed.num_tokens
    for original, restored in zip(data, unpack_data(packed), strict=True):
        assert restored.strategy == original.strategy
        for field in ("model_input", "target_tokens", "logprobs", "advantages", "mask", "weights"):
            np.testing.assert_array_equal(getattr(restored, field), getattr(original, field))
    for start, end in zip(packed.cu_seqlens_D1[:-1], packed.cu_seqlens_D1[1:], strict=True):
        assert packed.position_ids_N[start:end].tolist() == list(range(end - start))

    padded = pad_data(data)
    assert padded.num_tokens == len(data) * max(len(d) for d in data) >= packed.num_tokens
    for row, datum in enumerate(data):
        np.testing.assert_array_equal(
            padded.target_tokens_B_T[row, : len(datum)], datum.target_tokens
        )
        np.testing.assert_array_equal(padded.weights_B_T[row, : len(datum)], datum.weights)
        assert not padded.weights_B_T[row, len(datum) :].any()
        assert padded.attention_mask_B_T[row].sum() == len(datum)
