"""Scores with intervals: a model's mean over problems, and the paired difference of two models.

An evaluation plays every problem once per seating, so a model has one score
per problem: the mean of what it earned in that problem's episodes (every
seat it played). Episodes of one problem share the question and, in a
debate, the other debaters, so they are not independent: the bootstrap
resamples *problems*, with replacement, from a seeded
:class:`numpy.random.Generator`, and takes the central ``confidence``
percentile interval of the resampled means (widened where needed to contain
the mean itself, as :mod:`baselines.eval.ratings` does).

Two models compared on the same problems (a trained checkpoint and its base
model) are compared *paired*: the difference of their scores per problem,
resampled by problem. A problem only one of them played is left out of the
difference. Pairing removes what the problems share (a hard question is hard
for both), so the difference's interval is usually narrower than the two
means' intervals suggest.

With fewer than two problems there is nothing to resample: the interval is
NaN (shown as ``n/a``), never a zero-width interval that would read as certainty.

Shapes in names: ``P`` problems, ``B`` bootstrap replicates. Pure: no files,
no randomness but the seed given.

Example:
    >>> est = mean_with_interval([0.0, 1.0, 1.0, 1.0], num_bootstrap=2000, seed=0)
    >>> est.mean, est.num_problems, est.low <= est.mean <= est.high
    (0.75, 4, True)
    >>> paired_difference({"q1": 1.0, "q2": 0.5}, {"q1": 0.5, "q2": 0.5, "q3": 1.0}).mean
    0.25
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

__all__ = ["Estimate", "format_estimate", "mean_with_interval", "paired_difference"]

ProblemT = TypeVar("ProblemT", bound=Hashable)


@dataclass(frozen=True, slots=True)
class Estimate:
    """A mean over problems and its bootstrap interval.

    Attributes:
        mean: The mean of the per-problem values (NaN when there are none).
        low: The lower end of the interval, ``<= mean`` (NaN with fewer than
            two problems or no bootstrap).
        high: The upper end, ``>= mean`` (NaN likewise).
        num_problems: How many problems the mean is over.
        confidence: The interval's coverage, e.g. ``0.95``.
    """

    mean: float
    low: float
    high: float
    num_problems: int
    confidence: float

    def to_json(self) -> dict[str, float | int | None]:
        """The estimate as JSON-ready values; NaN becomes None."""
        return {
            "mean": _json_number(self.mean),
            "low": _json_number(self.low),
            "high": _json_number(self.high),
            "num_problems": self.num_problems,
            "confidence": self.confidence,
        }


def _json_number(x: float) -> float | None:
    return None if math.isnan(x) else float(x)


def mean_with_interval(
    values_P: Sequence[float],
    *,
    num_bootstrap: int = 1000,
    confidence: float = 0.95,
    seed: int | np.random.Generator = 0,
) -> Estimate:
    """The mean of per-problem values and its percentile-bootstrap interval.

    Args:
        values_P: One value per problem, finite.
        num_bootstrap: Resamples of the problems; 0 skips the interval.
        confidence: The interval's coverage, in ``(0, 1)``.
        seed: Seeds a fresh :func:`numpy.random.default_rng`; a Generator is used as is.

    Raises:
        ValueError: A value that is not a finite number, or an argument out of range.

    Example:
        >>> mean_with_interval([2.0, 2.0, 2.0]).low
        2.0
        >>> mean_with_interval([1.0]).high  # one problem: no interval
        nan
    """
    check_bootstrap(num_bootstrap, confidence)
    values = np.asarray([_finite(v, i) for i, v in enumerate(values_P)], dtype=np.float64)
    num_problems = len(values)
    if num_problems == 0:
        return Estimate(math.nan, math.nan, math.nan, 0, float(confidence))
    mean = float(values.mean())
    if num_problems < 2 or num_bootstrap == 0:
        return Estimate(mean, math.nan, math.nan, num_problems, float(confidence))
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    draws_BP = rng.integers(0, num_problems, size=(num_bootstrap, num_problems))
    means_B = values[draws_BP].mean(axis=1)
    tail = 50.0 * (1.0 - confidence)
    low, high = np.percentile(means_B, [tail, 100.0 - tail])
    return Estimate(
        mean, float(min(low, mean)), float(max(high, mean)), num_problems, float(confidence)
    )


def paired_difference(
    first: Mapping[ProblemT, float],
    second: Mapping[ProblemT, float],
    *,
    num_bootstrap: int = 1000,
    confidence: float = 0.95,
    seed: int | np.random.Generator = 0,
) -> Estimate:
    """``first - second`` over the problems both have, with a paired bootstrap interval.

    Args:
        first: Problem -> the first model's score on it.
        second: Problem -> the second model's score.
        num_bootstrap: See :func:`mean_with_interval`.
        confidence: See :func:`mean_with_interval`.
        seed: See :func:`mean_with_interval`.

    Returns:
        The mean difference over the shared problems (``num_problems`` of
        them; NaN when none are shared), its interval resampling those problems.

    Example:
        >>> paired_difference({0: 1.0, 1: 0.0}, {0: 1.0, 1: 1.0}, num_bootstrap=0)
        Estimate(mean=-0.5, low=nan, high=nan, num_problems=2, confidence=0.95)
    """
    shared = sorted((p for p in first if p in second), key=repr)
    differences = [first[p] - second[p] for p in shared]
    return mean_with_interval(
        differences, num_bootstrap=num_bootstrap, confidence=confidence, seed=seed
    )


def format_estimate(estimate: Estimate, digits: int = 3) -> str:
    """``mean [low, high]`` with ``digits`` decimals; ``n/a`` for a missing part.

    Example:
        >>> format_estimate(Estimate(0.5, 0.25, 0.75, 4, 0.95))
        '0.500 [0.250, 0.750]'
        >>> format_estimate(Estimate(0.5, math.nan, math.nan, 1, 0.95))
        '0.500 [n/a]'
    """

    def number(x: float) -> str:
        return "n/a" if math.isnan(x) else f"{x:.{digits}f}"

    if math.isnan(estimate.low) or math.isnan(estimate.high):
        return f"{number(estimate.mean)} [n/a]"
    return f"{number(estimate.mean)} [{number(estimate.low)}, {number(estimate.high)}]"


def _finite(value: object, index: int) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise ValueError(f"values[{index}] must be a finite number, got {value!r}")
    return float(value)


def check_bootstrap(num_bootstrap: int, confidence: float) -> None:
    """Raise a clear error unless ``num_bootstrap`` is an int >= 0 and ``confidence`` is in (0, 1).

    Shared by the scores' intervals and the ratings' (:mod:`baselines.eval.ratings`).
    """
    if isinstance(num_bootstrap, bool) or not isinstance(num_bootstrap, int) or num_bootstrap < 0:
        raise ValueError(
            f"num_bootstrap must be an int >= 0, got {num_bootstrap!r} (0 skips the intervals)"
        )
    if (
        isinstance(confidence, bool)
        or not isinstance(confidence, numbers.Real)
        or not 0 < confidence < 1
    ):
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}: e.g. 0.95")
