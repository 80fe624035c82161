"""Who sits where: balanced seat assignments of several models over an environment's agents.

An evaluation plays every problem once per *seating*: a tuple naming the model
(by its index among the entrants) that plays each agent of the environment,
in the order of ``env.possible_agents``. A schedule of seatings is *balanced*
when every model sits in every seat equally often, so no model gains from a
seat (the first debater speaks without seeing anyone's answer; the last sees
them all). The modes (:data:`SeatingMode`):

``self``
    Model ``m`` plays every seat of seating ``m``: each model is measured on its
    own (the code environment's team reward, expert iteration's solver), ``K``
    seatings. The only mode for a single model.
``rotations``
    Seating ``r`` puts model ``(r + s) mod K`` in seat ``s``: a cyclic Latin
    square, ``K`` seatings, each model once in each seat. With ``K >= N``
    seats every seating has ``N`` different models; with fewer models than
    seats, models repeat within a seating (``A B A``, ``B A B``). When that
    square leaves two models that never meet (4 models in 2 seats: A never
    plays C), squares of other seat offsets join it (seat ``s`` holds model
    ``(r + o[s]) mod K``) until every two models meet: still balanced, each
    square ``K`` seatings (4 models in 2 seats: 8).
``permutations``
    Every assignment of models to seats that uses at least two different
    models: ``K! / (K - N)!`` (distinct models only) when ``K >= N``, else the
    ``K^N - K`` assignments that are not one model alone. Balanced by symmetry
    (relabelling the models maps the set onto itself), and balanced in who
    speaks before whom, at a higher cost.

A debate tournament uses ``rotations`` by default. This module is pure: no
environments, no models.

Example:
    >>> seatings(3, 3, "rotations")
    ((0, 1, 2), (1, 2, 0), (2, 0, 1))
    >>> seatings(2, 3, "rotations")
    ((0, 1, 0), (1, 0, 1))
    >>> seatings(2, 2, "self")
    ((0, 0), (1, 1))
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Sequence
from typing import Literal, TypeAlias, get_args

__all__ = ["SEATING_MODES", "Seating", "SeatingMode", "seat_counts", "seatings"]

SeatingMode = Literal["self", "rotations", "permutations"]
"""How models are seated; see the module docstring."""
SEATING_MODES: tuple[SeatingMode, ...] = get_args(SeatingMode)
"""Every :data:`SeatingMode`."""

Seating: TypeAlias = tuple[int, ...]
"""``seating[s]``: the index of the model in seat ``s``."""

_MOST_SEATINGS = 10_000  # a schedule longer than this is a mistake, not a plan


def seatings(num_models: int, num_seats: int, mode: SeatingMode) -> tuple[Seating, ...]:
    """The balanced schedule of ``mode`` for ``num_models`` models over ``num_seats`` seats.

    Args:
        num_models: the entrants, ``K >= 1``.
        num_seats: the environment's agents, ``N >= 1``.
        mode: ``self``, ``rotations`` or ``permutations`` (module docstring).

    Returns:
        The seatings, in a fixed order; every model sits in every seat equally often.

    Raises:
        ValueError: a count below 1, an unknown mode, ``rotations`` or
            ``permutations`` with one model or one seat (nobody to mix with), or
            more than 10,000 seatings.
    """
    for name, value in (("num_models", num_models), ("num_seats", num_seats)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be an int >= 1, got {value!r}")
    if mode not in SEATING_MODES:
        raise ValueError(f"seating must be one of {list(SEATING_MODES)}, got {mode!r}")
    if mode == "self":
        return tuple((m,) * num_seats for m in range(num_models))
    if num_models < 2 or num_seats < 2:
        what = "one model" if num_models < 2 else "an environment with one seat"
        raise ValueError(
            f"seating={mode!r} mixes models within an episode, which needs two models and two "
            f"seats; with {what} use seating='self'"
        )
    if mode == "rotations":
        return tuple(
            tuple((r + offset) % num_models for offset in row)
            for row in _offsets(num_models, num_seats)
            for r in range(num_models)
        )
    count = _permutation_count(num_models, num_seats)
    if count > _MOST_SEATINGS:
        raise ValueError(
            f"seating='permutations' of {num_models} models over {num_seats} seats is {count} "
            f"seatings per problem (at most {_MOST_SEATINGS}); use seating='rotations' "
            f"({num_models} seatings)"
        )
    if num_models >= num_seats:
        return tuple(itertools.permutations(range(num_models), num_seats))
    return tuple(
        seating
        for seating in itertools.product(range(num_models), repeat=num_seats)
        if len(set(seating)) > 1
    )


def _offsets(num_models: int, num_seats: int) -> list[tuple[int, ...]]:
    """Seat offsets of cyclic squares that together seat every two models together at least once.

    A square of offsets ``o`` puts model ``(r + o[s]) mod K`` in seat ``s``
    for ``r`` in ``0..K-1``: each model once in each seat, and models whose
    indices differ by ``o[i] - o[j]`` (mod K) together. The plain rotation
    first, ``(0, 1, ..., N-1)``; then, for each difference still missing, a
    square whose first two seats differ by it (its other seats take the
    smallest offsets left, so its models stay different).
    """
    rows = [tuple(range(num_seats))]
    if num_models <= num_seats:
        return rows  # every seating holds every model

    def differences(row: tuple[int, ...]) -> set[int]:
        return {(a - b) % num_models for a in row for b in row if a != b}

    met = differences(rows[0])
    for difference in range(1, num_models):
        if difference in met:
            continue
        rest = [o for o in range(1, num_models) if o != difference][: num_seats - 2]
        row = (0, difference, *rest)
        rows.append(row)
        met |= differences(row)
    return rows


def _permutation_count(num_models: int, num_seats: int) -> int:
    if num_models >= num_seats:
        count = 1
        for k in range(num_models - num_seats + 1, num_models + 1):
            count *= k
        return count
    return int(num_models**num_seats - num_models)


def seat_counts(schedule: Sequence[Seating], num_models: int) -> list[list[int]]:
    """``counts[m][s]``: how often model ``m`` sits in seat ``s`` over ``schedule``.

    Example:
        >>> seat_counts(seatings(2, 3, "rotations"), 2)
        [[1, 1, 1], [1, 1, 1]]
    """
    num_seats = len(schedule[0]) if schedule else 0
    counts = Counter((m, s) for seating in schedule for s, m in enumerate(seating))
    return [[counts[m, s] for s in range(num_seats)] for m in range(num_models)]
