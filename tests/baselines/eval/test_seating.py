"""Seatings: every model in every seat equally often, models mixed, a fixed order."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from baselines.eval.seating import SEATING_MODES, seat_counts, seatings


@pytest.mark.parametrize(
    ("models", "seats", "mode", "expected"),
    [
        (3, 3, "rotations", ((0, 1, 2), (1, 2, 0), (2, 0, 1))),
        (2, 3, "rotations", ((0, 1, 0), (1, 0, 1))),
        # 0 and 2, 1 and 3 never meet in the plain rotation: a square of stride 2 joins.
        (4, 2, "rotations", ((0, 1), (1, 2), (2, 3), (3, 0), (0, 2), (1, 3), (2, 0), (3, 1))),
        (4, 3, "rotations", ((0, 1, 2), (1, 2, 3), (2, 3, 0), (3, 0, 1))),  # all meet already
        (2, 2, "self", ((0, 0), (1, 1))),
        (1, 3, "self", ((0, 0, 0),)),
        (2, 2, "permutations", ((0, 1), (1, 0))),
        (2, 3, "permutations", ((0, 0, 1), (0, 1, 0), (0, 1, 1), (1, 0, 0), (1, 0, 1), (1, 1, 0))),
    ],
)
def test_schedules(models, seats, mode, expected):
    assert seatings(models, seats, mode) == expected


@given(models=st.integers(1, 6), seats=st.integers(1, 5), mode=st.sampled_from(SEATING_MODES))
def test_every_model_sits_in_every_seat_equally_often(models, seats, mode):
    if mode != "self" and (models < 2 or seats < 2):
        with pytest.raises(ValueError, match="use seating='self'"):
            seatings(models, seats, mode)
        return
    schedule = seatings(models, seats, mode)
    counts = seat_counts(schedule, models)
    assert len({c for row in counts for c in row}) == 1  # one count for every (model, seat)
    assert all(len(seating) == seats for seating in schedule)
    assert len(set(schedule)) == len(schedule)  # no seating twice
    if mode != "self":
        assert all(len(set(seating)) > 1 for seating in schedule)  # mixed
        distinct = min(models, seats)
        if mode == "rotations":
            assert len(schedule) % models == 0
            assert all(len(set(s)) == distinct for s in schedule)
        met = {frozenset((a, b)) for s in schedule for a in s for b in s if a != b}
        assert len(met) == models * (models - 1) // 2  # every two models meet


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((0, 3, "self"), "num_models must be an int >= 1, got 0"),
        ((2, True, "self"), "num_seats must be an int >= 1, got True"),
        ((2, 3, "round_robin"), "seating must be one of"),
        ((1, 3, "rotations"), "with one model use seating='self'"),
        ((3, 1, "permutations"), "with an environment with one seat use seating='self'"),
        ((12, 8, "permutations"), "use seating='rotations'"),
    ],
)
def test_bad_arguments_name_the_fix(args, message):
    with pytest.raises(ValueError, match=message):
        seatings(*args)
