"""Checks and centring shared by the credit-assignment schemes (:mod:`baselines.data.credit`)."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from baselines.data.advantages import is_constant_group

Float64Array = npt.NDArray[np.float64]


def centre(values: Float64Array, normalize_std: bool, epsilon: float) -> Float64Array:
    """``v - mean(v)``, optionally over ``std + epsilon``; exactly 0 for a set of equal values."""
    if values.size == 0 or is_constant_group(values):
        return np.zeros_like(values)
    mean = math.fsum(values) / values.size
    centred = values - mean
    if normalize_std:
        std = math.sqrt(math.fsum(centred * centred) / values.size)
        centred = centred / (std + epsilon)
    return centred


def finite_1d(name: str, values: Sequence[float] | np.ndarray) -> Float64Array:
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1:
        raise ValueError(f"{name} must be a 1-D sequence, got shape {array.shape}")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} must be finite, got {array.tolist()}")
    return array


def check_epsilon(epsilon: float) -> None:
    if not epsilon > 0:
        raise ValueError(f"epsilon must be > 0, got {epsilon}")


def check_lengths(name: str, values: Sequence[Any] | np.ndarray, seats: Sequence[str]) -> None:
    if len(values) != len(seats):
        raise ValueError(
            f"got {len(values)} {name} for {len(seats)} seats; give one seat per trajectory"
        )


def indices_by(keys: Sequence[Hashable]) -> dict[Hashable, list[int]]:
    """Positions of each key, keys in order of first appearance."""
    members: dict[Hashable, list[int]] = defaultdict(list)
    for index, key in enumerate(keys):
        members[key].append(index)
    return members
