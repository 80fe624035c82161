"""The opt-in collaboration bonus that needs ``aux`` to have run (``aux_bonus="when_called"``).

The seed reads the bonus from main's syntax tree: a call that never runs earns
it. With ``"when_called"`` the program runs a second time with ``aux`` in a
process of its own, and the sandbox's judge counts the calls main makes into
it; the tests' score is the first run's, unchanged.
"""

from __future__ import annotations

import pytest

from llm_envs.code_collab import CodeCollabConfig
from llm_envs.code_collab.env import parallel_env
from llm_envs.code_collab.rewards import evaluate_many
from llm_envs.sandbox import Sandbox
from llm_envs.tasks import CodeProblem

DOUBLE = CodeProblem(
    "demo/0", "def double(x):\n", "double", ("assert double(2) == 4", "assert double(3) == 6")
)
HELPER = "def aux(x):\n    return 2 * x\n"

# (main's answer, bonus as written (the seed), bonus when called)
CASES = [
    # A real call whose result is returned: a thin wrapper, +0.5 either way.
    ("def double(x):\n    return aux(x)\n", 0.5, 0.5),
    # A dead call: the seed pays the bonus, the stricter rule nothing.
    ("def double(x):\n    if False:\n        aux(x)\n    return x * 2\n", 1.0, 0.0),
    ("def double(x):\n    if False:\n        y = aux(x)\n    return x * 2\n", 1.5, 0.0),
    # A call made once, when the program loads (a default argument), never by the tests.
    ("def double(x, _=aux(0)):\n    if False:\n        y = aux(x)\n    return x * 2\n", 1.5, 0.0),
    # A call on a branch the tests never take.
    ("def double(x):\n    return aux(x) if x < 0 else 2 * x\n", 1.5, 0.0),
    # A real call, not a thin wrapper.
    ("def double(x):\n    y = aux(x)\n    return y + 0\n", 1.5, 1.5),
    # A real call whose result is discarded: -0.5 either way.
    ("def double(x):\n    aux(x)\n    return 2 * x\n", 1.0, 1.0),
    # No call at all.
    ("def double(x):\n    return 2 * x\n", 0.0, 0.0),
]


@pytest.fixture(scope="module")
def pool():
    with Sandbox(workers=2, timeout=10.0) as sandbox:
        yield sandbox


@pytest.mark.parametrize(("main", "as_written", "when_called"), CASES)
def test_the_bonus_by_rule(pool: Sandbox, main: str, as_written: float, when_called: float) -> None:
    seed, strict = (
        evaluate_many([(DOUBLE, HELPER, main)], pool, aux_bonus=rule)[0]
        for rule in ("as_written", "when_called")
    )
    assert seed.reward.bonus == as_written
    assert strict.reward.bonus == when_called
    # Only the bonus differs: the tests' score is the same run's.
    assert (seed.reward.level1, seed.reward.level2, seed.reward.level3) == (
        strict.reward.level1,
        strict.reward.level2,
        strict.reward.level3,
    )
    assert strict.reward.total == pytest.approx(seed.reward.total - as_written + when_called)


def test_a_helper_whose_values_cannot_cross_keeps_its_tests(pool: Sandbox) -> None:
    helper = "def aux(n):\n    return (i for i in range(n))\n"
    main = "def double(x):\n    return sum(aux(3)) * 0 + 2 * x\n"
    seed, strict = (
        evaluate_many([(DOUBLE, helper, main)], pool, aux_bonus=rule)[0]
        for rule in ("as_written", "when_called")
    )
    assert seed.reward.level3 == strict.reward.level3 == 1.0
    # The generator could not cross, but aux ran: the call counts.
    assert strict.reward.bonus == seed.reward.bonus == 1.5


def test_the_environment_takes_the_rule(pool: Sandbox) -> None:
    dead = "def double(x):\n    if False:\n        y = aux(x)\n    return x * 2\n"
    totals = {}
    for rule in ("as_written", "when_called"):
        env = parallel_env(problems=[DOUBLE], num_turns=1, sandbox=pool, aux_bonus=rule)
        env.reset(seed=0)
        _, rewards, _, _, infos = env.step({"helper": HELPER, "main": dead})
        totals[rule] = (rewards["main"], infos["main"]["bonus"])
    assert totals == {"as_written": (4.0, 1.5), "when_called": (2.5, 0.0)}


@pytest.mark.parametrize("bad", ["when-called", "", None, 1])
def test_a_bad_rule_names_the_value_and_the_fix(bad: object) -> None:
    with pytest.raises(ValueError, match="aux_bonus must be one of") as caught:
        CodeCollabConfig(problems=[DOUBLE], aux_bonus=bad)  # type: ignore[arg-type]
    assert "when_called" in str(caught.value) and repr(bad) in str(caught.value)
