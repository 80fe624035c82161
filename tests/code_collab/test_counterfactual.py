"""The parts of ``aux_bonus="when_called"`` that need no sandbox: variation, weighing, skips.

:func:`vary_value` changes every value aux returns in the varied run;
:func:`weigh_evidence` turns the two split runs into the share of the seed's
bonus paid; :func:`evaluate_many` runs the split pair only for programs the
seed's rule would pay (counted here with a sandbox that records its jobs).
"""

from __future__ import annotations

import inspect
import math
from collections import Counter, OrderedDict, defaultdict, deque
from collections.abc import Sequence
from decimal import Decimal
from fractions import Fraction
from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_envs.code_collab.counterfactual import (
    SPLIT_RUNS,
    VARY_DEPTH,
    VARY_ITEMS,
    AuxEvidence,
    split_helper_program,
    vary_value,
    weigh_evidence,
)
from llm_envs.code_collab.rewards import evaluate_many
from llm_envs.sandbox import (
    ProgramStatus,
    Sandbox,
    SandboxJob,
    TestOutcome,
    TestReport,
    TestStatus,
)
from llm_envs.tasks import CodeProblem

# ------------------------------------------------------------------------- the variation

scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True)
    | st.complex_numbers(allow_nan=False)
    | st.text(max_size=8)
    | st.binary(max_size=8)
)
hashable = st.recursive(
    scalars, lambda inner: st.tuples(inner, inner) | st.frozensets(inner, max_size=3), max_leaves=6
)
plain = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(hashable, inner, max_size=4)
        | st.sets(hashable, max_size=4)
        | st.frozensets(hashable, max_size=4)
    ),
    max_leaves=20,
)


def same(a: Any, b: Any) -> bool:
    """Equal, of the same types all the way down, nan equal to nan."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, complex):
        return same(a.real, b.real) and same(a.imag, b.imag)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return len(a) == len(b) and all(k in b and same(v, b[k]) for k, v in a.items())
    return bool(a == b)


@settings(max_examples=200, deadline=None)
@given(plain)
def test_delta_zero_is_an_equal_copy_of_the_same_types(value: Any) -> None:
    assert same(vary_value(value, 0), value)


@settings(max_examples=200, deadline=None)
@given(plain)
def test_delta_one_keeps_the_type_and_changes_what_main_could_use(value: Any) -> None:
    varied = vary_value(value, 1)
    assert type(varied) is (int if value is None else type(value))
    if isinstance(value, list | tuple | str | bytes):
        assert len(varied) == len(value) + 1  # type: ignore[arg-type]
    elif isinstance(value, bool | int) or (isinstance(value, float) and not math.isnan(value)):
        assert varied != value


# (value, varied): hand-computed.
VARIED = [
    (7, -8),
    (0, -1),
    (-1, 0),
    (True, False),
    (False, True),
    (2.0, -3.0),
    (-0.5, 0.5),  # -x - 1's fixed point
    (math.inf, -math.inf),
    (1j, 1 + 1j),
    ("ab", "bcb"),
    ("", "a"),
    (b"\xff", b"\x00\x00"),
    ([], [0]),
    ([1, 2], [-2, -3, -2]),
    ((3,), (-4, -4)),
    ({"a": 1}, {"bb": -2}),
    ({}, {0: 0}),
    ({1}, {-2}),
    (frozenset(), frozenset({0})),
    (range(3), range(1, 5)),
    (Counter("aab"), Counter({"bb": -3, "cc": -2})),
    (OrderedDict(a=1), OrderedDict(bb=-2)),
    (deque([1], maxlen=2), deque([-2, -2], maxlen=2)),
    (Decimal("1.5"), Decimal("2.5")),
    (Fraction(1, 3), Fraction(4, 3)),
    (None, 0),  # the one change of type
]


@pytest.mark.parametrize(("value", "varied"), VARIED)
def test_the_variation_by_type(value: object, varied: object) -> None:
    assert vary_value(value, 1) == varied
    assert type(vary_value(value, 1)) is type(varied)


def test_a_defaultdict_keeps_its_factory() -> None:
    varied = vary_value(defaultdict(list, {1: [2]}), 1)
    assert isinstance(varied, defaultdict) and varied.default_factory is list
    assert dict(varied) == {-2: [-3, -3]}


class Unhashable:
    """Hashes once, then raises: a set holding it cannot be rebuilt."""

    calls = 0

    def __hash__(self) -> int:
        Unhashable.calls += 1
        if Unhashable.calls > 1:
            raise RuntimeError("hash twice")
        return 1


def nested(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


def cyclic() -> list[Any]:
    value: list[Any] = [1]
    value.append(value)
    return value


@pytest.mark.parametrize(
    "value",
    [cyclic(), nested(100_000), (i for i in range(3)), object(), {Unhashable()}, 10**5000],
    ids=["cycle", "deep", "generator", "object", "hash-raises", "huge-int"],
)
def test_hostile_values_never_raise(value: object) -> None:
    vary_value(value, 1)
    vary_value(value, 0)


def test_a_value_it_cannot_walk_comes_back_as_it_is() -> None:
    Unhashable.calls = 0
    value = {Unhashable()}
    assert vary_value(value, 1) is value


def test_only_the_first_items_are_varied() -> None:
    value = list(range(VARY_ITEMS + 10))
    varied = vary_value(value, 1)
    assert isinstance(varied, list)
    # The list itself is the first item: VARY_ITEMS - 1 of its members are varied.
    assert varied[0] == -1 and varied[VARY_ITEMS - 2] == ~(VARY_ITEMS - 2)
    assert varied[VARY_ITEMS - 1] == VARY_ITEMS - 1 and varied[-2] == value[-1]


def test_only_values_up_to_the_depth_are_varied() -> None:
    value: Any = nested(VARY_DEPTH + 5)
    value.append(5)
    deepest: Any = vary_value(value, 1)
    for _ in range(VARY_DEPTH + 5):
        deepest = deepest[0]
    assert deepest == []  # below the depth: returned as it was


def test_the_limits_are_the_functions_defaults() -> None:
    # vary_value runs without this module inside the sandbox: its limits are literals.
    parameters = inspect.signature(vary_value).parameters
    assert (parameters["items"].default, parameters["depth"].default) == (VARY_ITEMS, VARY_DEPTH)


# ---------------------------------------------------------------- the helper's program


@pytest.mark.parametrize(("delta", "expected"), [(0, 3), (1, -4)])
def test_the_helper_program_exposes_only_the_varied_aux(delta: int, expected: int) -> None:
    # Our own program text around a trusted aux, run here to read its module names.
    source = split_helper_program(
        "import math", "def aux(x):\n    return x if x < 1 else aux(x - 1) + 1", delta
    )
    names: dict[str, Any] = {}
    exec(compile(source, "<split helper>", "exec"), names)
    assert sorted(set(names) - {"__builtins__"}) == ["aux", "math"]
    assert names["aux"](3) == expected  # recursion reaches the true aux, unvaried


@pytest.mark.parametrize("delta", [-1, 2, True, "1"])
def test_a_bad_delta_names_the_value(delta: object) -> None:
    with pytest.raises(ValueError, match="delta must be 0"):
        split_helper_program("", "def aux():\n    return 1", delta)  # type: ignore[arg-type]


# -------------------------------------------------------------------------- weighing


def report(passes: Sequence[bool | int]) -> TestReport:
    status = [TestStatus.FAILED, TestStatus.PASSED]
    return TestReport(ProgramStatus.OK, tuple(TestOutcome(status[bool(p)]) for p in passes))


# (scored, true, varied, passed, won, lost): hand-counted.
WEIGHED = [
    ((1, 1, 1), (1, 1, 1), (0, 0, 0), 3, 3, 0),  # every test carried by aux's values
    ((1, 1, 1), (1, 1, 1), (1, 1, 1), 3, 0, 0),  # values ignored
    ((1, 1, 0), (1, 1, 1), (0, 1, 0), 2, 1, 0),  # the third test does not count
    ((1, 1, 1), (0, 0, 0), (0, 0, 0), 3, 0, 0),  # both split runs fail
    ((1, 1, 1), (0, 1, 1), (1, 1, 0), 3, 1, 1),
    ((0, 0), (1, 1), (0, 0), 0, 0, 0),  # nothing passed
]


@pytest.mark.parametrize(("scored", "true", "varied", "passed", "won", "lost"), WEIGHED)
def test_weighing_counts_tests_won_and_lost(scored, true, varied, passed, won, lost) -> None:
    evidence = weigh_evidence(report(scored), report(true), report(varied))
    assert (evidence.passed, evidence.won, evidence.lost) == (passed, won, lost)
    assert evidence.weight == ((won - lost) / passed if passed else 0.0)


def test_a_short_report_counts_as_not_passed() -> None:
    short = TestReport(ProgramStatus.KILLED, (TestOutcome(TestStatus.PASSED),))
    assert weigh_evidence(report((1, 1)), report((1, 1)), short) == AuxEvidence(2, 1, 0)


outcomes = st.lists(st.booleans(), min_size=0, max_size=12)


@given(st.data())
def test_swapping_the_split_runs_negates_the_weight(data: st.DataObject) -> None:
    # The guarantee: runs a main cannot tell apart pay nothing in expectation.
    size = data.draw(st.integers(0, 12))
    scored, true, varied = (
        data.draw(st.lists(st.booleans(), min_size=size, max_size=size)) for _ in range(3)
    )
    forward = weigh_evidence(report(scored), report(true), report(varied)).weight
    backward = weigh_evidence(report(scored), report(varied), report(true)).weight
    assert forward == -backward
    assert -1.0 <= forward <= 1.0
    assert weigh_evidence(report(scored), report(true), report(true)).weight == 0.0


# ---------------------------------------------------------------------------- skips


class RecordingSandbox:
    """Runs nothing: scored runs pass what it is given, in order; split runs pass everything."""

    def __init__(self, scored: Sequence[Sequence[bool]] = ()) -> None:
        self.scored = list(scored)
        self.jobs: list[SandboxJob] = []

    def run_tests_many(self, jobs: Sequence[SandboxJob]) -> list[TestReport]:
        self.jobs += jobs
        return [
            report(self.scored.pop(0) if job.helper is None else [True] * len(job.tests))
            for job in jobs
        ]

    @property
    def split_jobs(self) -> int:
        return sum(job.helper is not None for job in self.jobs)


PROBLEM = CodeProblem(
    "demo/1", "def f(x):\n", "f", ("assert f(1) == 1", "assert f(2) == 2", "assert f(3) == 3")
)
HELPERS = {"aux": "def aux(x):\n    return x\n", "none": ""}
MAINS = {
    "calls": "def f(x):\n    return aux(x) + 0\n",
    "alone": "def f(x):\n    return x\n",
    "broken": "def f(x):\n    return (\n",
    "absent": "def g(x):\n    return x\n",
}


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(sorted(HELPERS)),
            st.sampled_from(sorted(MAINS)),
            st.tuples(st.booleans(), st.booleans(), st.booleans()),
        ),
        max_size=6,
    ),
    st.sampled_from(["as_written", "when_called"]),
)
def test_the_split_runs_run_only_when_a_bonus_would_be_paid(items, rule) -> None:
    runnable = [passes for _, main, passes in items if main in ("calls", "alone")]
    fake = RecordingSandbox(runnable)
    joint = [(PROBLEM, HELPERS[helper], MAINS[main]) for helper, main, _ in items]
    evaluations = evaluate_many(joint, cast(Sandbox, fake), aux_bonus=rule)
    # Paid by the seed: aux defined, main runs and calls it, a test passed.
    paid = [helper == "aux" and main == "calls" and any(passes) for helper, main, passes in items]
    assert fake.split_jobs == (SPLIT_RUNS * sum(paid) if rule == "when_called" else 0)
    for evaluation, was_paid in zip(evaluations, paid, strict=True):
        assert (evaluation.evidence is not None) == (was_paid and rule == "when_called")
        if evaluation.evidence is not None:  # split runs pass everything: nothing won
            assert evaluation.reward.bonus == 0.0
        elif was_paid:
            assert evaluation.reward.bonus == 1.5


def test_the_split_pair_differs_only_in_delta_and_its_order_is_drawn() -> None:
    joint = [(PROBLEM, HELPERS["aux"], MAINS["calls"])]
    varied_first = set()
    for _ in range(40):
        fake = RecordingSandbox([(True, True, True)])
        evaluate_many(joint, cast(Sandbox, fake), aux_bonus="when_called")
        split = [job for job in fake.jobs if job.helper is not None]
        assert len(split) == 2 and split[0].program == split[1].program
        helpers = [job.helper or "" for job in split]
        deltas = [", 1, globals()" in helper for helper in helpers]
        assert sorted(deltas) == [False, True]
        varied = helpers[deltas.index(True)]
        assert varied.replace(", 1, globals()", ", 0, globals()") == helpers[deltas.index(False)]
        varied_first.add(deltas[0])
    assert varied_first == {False, True}
