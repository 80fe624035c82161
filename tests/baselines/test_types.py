"""The token-level contract: normalization, validation errors, read-only Datums."""

from __future__ import annotations

import doctest
import math
import pickle
import subprocess
import sys
from typing import Any

import numpy as np
import pytest

import baselines
import baselines.data.advantages
import baselines.data.datums
import baselines.types
from baselines.types import Datum, Trajectory, TrajectoryGroup, Transition, as_tokens


def _datum(length: int = 3, **overrides: Any) -> Datum:
    fields: dict[str, Any] = {
        "model_input": list(range(length)),
        "target_tokens": list(range(1, length + 1)),
        "logprobs": [0.0] * length,
        "advantages": [0.0] * length,
        "mask": [0.0] * length,
        "weights": [0.0] * length,
    }
    fields.update(overrides)
    return Datum(**fields)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ([1, 2, 3], (1, 2, 3)),
        ((4, 5), (4, 5)),
        (np.array([7, 8], dtype=np.int32), (7, 8)),
        ([], ()),
    ],
)
def test_as_tokens_normalizes_to_tuples_of_ints(value: object, expected: tuple[int, ...]) -> None:
    tokens = as_tokens(value)  # type: ignore[arg-type]
    assert tokens == expected
    assert all(type(t) is int for t in tokens)


def test_as_tokens_rejects_text_and_2d_arrays() -> None:
    with pytest.raises(TypeError, match="tokenize it first"):
        as_tokens("hello")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="must be 1-D"):
        as_tokens(np.zeros((2, 2), dtype=np.int64))


def test_transition_normalizes_sequences_and_defaults() -> None:
    t = Transition(observation=[1, 2, 3], action=np.array([4, 5]), logprobs=np.array([-0.1, -0.2]))
    assert t.observation == (1, 2, 3)
    assert t.action == (4, 5)
    assert t.logprobs == (-0.1, -0.2)
    assert (t.reward, t.done, dict(t.info)) == (0.0, False, {})
    assert t.loss_weight == 1.0
    assert t.training_messages is None


def test_transition_reads_loss_weight_and_training_messages_from_info() -> None:
    messages = [{"role": "user", "content": "2 + 2?"}]
    t = Transition([1], [2], [-0.5], info={"loss_weight": 0, "training_messages": messages})
    assert t.loss_weight == 0.0
    assert t.training_messages == messages


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"action": [4, 5], "logprobs": [-0.1]}, "2 action tokens but 1 logprobs"),
        ({"action": [4], "logprobs": [-math.inf]}, r"logprobs\[0\] is -inf"),
        ({"action": [4, 5], "logprobs": [-0.1, math.nan]}, r"logprobs\[1\] is nan"),
        ({"action": [4], "logprobs": [-0.1], "reward": math.nan}, "reward must be finite"),
        ({"action": [4], "logprobs": [-0.1], "info": {"loss_weight": -1}}, "loss_weight"),
        ({"action": [4], "logprobs": [-0.1], "info": {"loss_weight": "1"}}, "loss_weight"),
        ({"action": [4], "logprobs": [-0.1], "info": {"loss_weight": math.inf}}, "loss_weight"),
    ],
)
def test_transition_rejects_bad_input_with_a_named_error(
    kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        Transition(observation=[1], **kwargs)  # type: ignore[arg-type]


def test_transition_is_frozen() -> None:
    t = Transition([1], [2], [-0.5])
    with pytest.raises(AttributeError):
        t.reward = 1.0  # type: ignore[misc]


def test_trajectory_step_reward_and_token_count() -> None:
    trajectory = Trajectory(
        [Transition([1], [2, 3], [-0.1, -0.2], reward=-1.0), Transition([1], [4], [-0.3])],
        agent_id="agent_0",
        strategy="iid",
    )
    assert isinstance(trajectory.transitions, tuple)
    assert trajectory.step_reward == -1.0
    assert trajectory.num_action_tokens == 3


def test_trajectory_rejects_non_transitions() -> None:
    not_a_transition: Any = ([1], [2], [-0.1])
    with pytest.raises(TypeError, match=r"transitions\[0\] must be a Transition"):
        Trajectory([not_a_transition])


def test_trajectory_group_fills_defaults_and_exposes_strategies() -> None:
    a = Trajectory((Transition([1], [2], [-0.1]),), strategy="iid")
    b = Trajectory((Transition([1], [3], [-0.1]),), strategy=None)
    group = TrajectoryGroup([a, b])
    assert group.final_rewards_G == (0.0, 0.0)
    assert group.metrics_G == ({}, {})
    assert group.strategies_G == ("iid", None)
    assert len(group) == 2


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"trajectories_G": []}, "at least one trajectory"),
        ({"final_rewards_G": [1.0]}, "final_rewards_G has 1 entries for 2"),
        ({"metrics_G": [{}]}, "metrics_G has 1 entries for 2"),
        ({"final_rewards_G": [1.0, math.nan]}, "must be finite"),
    ],
)
def test_trajectory_group_rejects_bad_input(kwargs: dict[str, object], message: str) -> None:
    t = Trajectory((Transition([1], [2], [-0.1]),))
    fields: dict[str, object] = {"trajectories_G": [t, t], **kwargs}
    with pytest.raises(ValueError, match=message):
        TrajectoryGroup(**fields)  # type: ignore[arg-type]


def test_datum_casts_dtypes_and_is_read_only() -> None:
    datum = _datum(mask=[0, 1, 1])
    assert datum.model_input.dtype == np.int64
    assert datum.target_tokens.dtype == np.int64
    for name in ("logprobs", "advantages", "mask", "weights"):
        assert getattr(datum, name).dtype == np.float32
    assert len(datum) == 3
    assert datum.num_action_tokens == 2
    with pytest.raises(ValueError, match="read-only"):
        datum.advantages[0] = 1.0


def test_datum_survives_pickling_read_only() -> None:
    datum = _datum(mask=[0, 1, 1], strategy="iid")
    restored = pickle.loads(pickle.dumps(datum))
    assert restored.strategy == "iid"
    np.testing.assert_array_equal(restored.mask, datum.mask)
    assert not restored.mask.flags.writeable


def test_datum_does_not_freeze_the_callers_array() -> None:
    mine = np.zeros(3, dtype=np.float32)
    _datum(advantages=mine)
    mine[0] = 1.0  # still writable: the Datum froze a view, not my array


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"mask": [0.0, 1.0]}, "must have one length"),
        ({"weights": [[0.0, 0.0, 0.0]]}, "must be 1-D"),
    ],
)
def test_datum_rejects_misaligned_fields(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _datum(**overrides)


@pytest.mark.parametrize(
    "module",
    [baselines.types, baselines.data.advantages, baselines.data.datums],
    ids=lambda m: m.__name__,
)
def test_docstring_examples_run(module: object) -> None:
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)  # type: ignore[arg-type]
    assert result.attempted > 0
    assert result.failed == 0


def test_data_modules_import_without_torch() -> None:
    code = (
        "import sys, baselines, baselines.types, baselines.data.advantages, baselines.data.datums; "
        "sys.exit('torch' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


def test_package_exports_the_contract_types() -> None:
    assert set(baselines.__all__) == {"Datum", "Trajectory", "TrajectoryGroup", "Transition"}
