"""The strict collaboration bonus at the sandbox's crossing limits.

A main that ignores aux's values (``_ = aux(n)``) must get no bonus whatever
the helper returns. The variation changes a value's size (a sequence and a
string grow by one, ``~x`` of ``2**k - 1`` has one more bit), so a helper that
returns a value just under one of the sandbox's crossing limits (a range of
1,000,000 items, an int of 300,000 bits) could make only the varied run's call
fail: every test would "win" by aux's values, the full bonus for a
value-independent main.
"""

from __future__ import annotations

import pytest

from llm_envs.code_collab.counterfactual import split_helper_program, vary_value
from llm_envs.code_collab.rewards import evaluate_many
from llm_envs.tasks.problems import CodeProblem

PRIME_TESTS = (
    "assert candidate(7, 34, 12) == 34",
    "assert candidate(15, 8, 5) == 5",
    "assert candidate(2, 10, 20) == 10",
)
PROBLEM = CodeProblem(
    task_id="attack/x_or_y",
    prompt='def x_or_y(n, x, y):\n    """x if n is prime, else y."""\n',
    entry_point="x_or_y",
    tests=PRIME_TESTS,
    test_setup="candidate = x_or_y",
)
SOLVE = (
    "    if n < 2:\n        return y\n"
    "    for k in range(2, int(n ** 0.5) + 1):\n"
    "        if n % k == 0:\n            return y\n"
    "    return x\n"
)
HACK = "def x_or_y(n, x, y):\n    _ = aux(n)\n" + SOLVE

POISONS = {
    # a range of 1,000,000 items crosses; its variation has 1,000,001
    "range at the item limit": "def aux(n):\n    return range(1000000)\n",
    # 2**300000 - 1 has 300,000 bits; ~x == -2**300000 has 300,001
    "int at the bit limit": "def aux(n):\n    return (1 << 300000) - 1\n",
}


@pytest.mark.parametrize("helper", list(POISONS.values()), ids=list(POISONS))
def test_a_value_at_a_crossing_limit_earns_no_bonus_for_a_main_that_ignores_it(helper):
    (evaluation,) = evaluate_many([(PROBLEM, helper, HACK)], aux_bonus="when_called")
    assert evaluation.reward.passed == len(PRIME_TESTS)
    assert evaluation.evidence is not None
    assert evaluation.evidence.won == evaluation.evidence.lost == 0, evaluation.evidence
    assert evaluation.reward.bonus == 0.0


def test_an_honest_team_keeps_its_bonus():
    helper = "def aux(n):\n    return n >= 2 and all(n % k for k in range(2, int(n ** 0.5) + 1))\n"
    main = "def x_or_y(n, x, y):\n    return x if aux(n) else y\n"
    (evaluation,) = evaluate_many([(PROBLEM, helper, main)], aux_bonus="when_called")
    assert evaluation.evidence is not None and evaluation.evidence.won == len(PRIME_TESTS)
    assert evaluation.reward.bonus > 0


def test_both_runs_of_a_helper_answer_a_value_too_large_to_vary_alike():
    # run the split wrapper in this process: the true and the varied aux agree
    # on values whose variation could not cross, and differ on ordinary ones
    answers = {}
    for delta in (0, 1):
        names: dict = {}
        exec(split_helper_program("", "def aux(v):\n    return v\n", delta), names)
        answers[delta] = names["aux"]
    for value in (range(1000000), (1 << 300000) - 1, [0] * 1000000):
        assert answers[0](value) == answers[1](value) == vary_value(value, 0)
    assert answers[0](7) == 7 and answers[1](7) == -8
