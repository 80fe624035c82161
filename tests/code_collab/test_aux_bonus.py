"""The strict collaboration bonus (``aux_bonus="when_called"``): did aux's values carry the tests?

The seed reads the bonus from main's syntax tree: a call that never runs, or
whose result main ignores, earns it. With ``"when_called"`` a program the seed
would pay runs twice more, split (``aux`` in a process of its own): once with
aux's true values and once with every value it returns varied. The bonus is
the seed's times (tests won by the true values - tests lost by them) / tests
passed; the tests' score is always the scored run's. See
:mod:`llm_envs.code_collab.counterfactual` for the guarantee and its limits.
"""

from __future__ import annotations

import pytest

from llm_envs.code_collab import CodeCollabConfig
from llm_envs.code_collab.env import parallel_env, step_batch
from llm_envs.code_collab.rewards import evaluate_many
from llm_envs.sandbox import Sandbox, SandboxJob, TestReport
from llm_envs.sandbox.pool import DEFAULT_MAX_PROGRAM_CHARS
from llm_envs.tasks import CodeProblem
from tests.code_collab.cases import INLINE, IS_PRIME, USES_AUX

DOUBLE = CodeProblem(
    "demo/0", "def double(x):\n", "double", ("assert double(2) == 4", "assert double(3) == 6")
)
HELPER = "def aux(x):\n    return 2 * x\n"
OWN = "    return 2 * x\n"

# (main's answer, bonus as written (the seed), bonus when called). Every main
# passes both tests; the helper is HELPER.
HONEST = [
    # A real call whose result is returned: a thin wrapper, +0.5 either way.
    ("def double(x):\n    return aux(x)\n", 0.5, 0.5),
    # A real call, not a thin wrapper.
    ("def double(x):\n    y = aux(x)\n    return y + 0\n", 1.5, 1.5),
    # A fallback for when aux raises: aux's values are still what main returns.
    ("def double(x):\n    try:\n        y = aux(x)\n    except Exception:\n        y = 2 * x\n"
     "    return y\n", 1.5, 1.5),
    # No call at all.
    ("def double(x):\n" + OWN, 0.0, 0.0),
]  # fmt: skip
ATTACKS = [
    # The one-token hack: solve alone, call aux, ignore what it returns.
    ("def double(x):\n    _ = aux(x)\n" + OWN, 1.5, 0.0),
    # A bare call, its result discarded (the seed takes 0.5 off).
    ("def double(x):\n    aux(x)\n" + OWN, 1.0, 0.0),
    # A call that never runs, or runs only when the program loads.
    ("def double(x):\n    if False:\n        aux(x)\n" + OWN, 1.0, 0.0),
    ("def double(x):\n    if False:\n        y = aux(x)\n" + OWN, 1.5, 0.0),
    ("def double(x, _=aux(0)):\n    if False:\n        y = aux(x)\n" + OWN, 1.5, 0.0),
    # A call on a branch the tests never take.
    ("def double(x):\n    return aux(x) if x < 0 else 2 * x\n", 1.5, 0.0),
    # try/except around a call whose result is ignored: a raising stub would
    # see these pass; the varied values change nothing they return.
    ("def double(x):\n    try:\n        aux(x)\n    except Exception:\n        pass\n" + OWN,
     1.0, 0.0),
    ("def double(x):\n    try:\n        _ = aux(x)\n    except BaseException:\n"
     "        pass\n" + OWN, 1.5, 0.0),
    # Catching one exception class (a stub's) to fail on purpose.
    ("def double(x):\n    try:\n        _ = aux(x)\n    except ValueError:\n"
     "        raise RuntimeError('a stub')\n" + OWN, 1.5, 0.0),
    # A local answer used only when aux raises.
    ("def double(x):\n    try:\n        aux(x)\n    except Exception:\n"
     "        return 2 * x\n" + OWN, 1.0, 0.0),
    # Telling the split runs from the scored one (main sees a proxy there) and
    # failing in both: nothing won, nothing lost.
    ("def double(x):\n    if aux.__name__ != 'aux':\n        raise RuntimeError('split')\n"
     "    _ = aux(x)\n" + OWN, 1.5, 0.0),
    # Checking only the type of aux's value: the variation keeps types.
    ("def double(x):\n    if not isinstance(aux(x), int):\n        raise TypeError\n" + OWN,
     1.5, 0.0),
    # Looking for an unvaried aux among the program's names, to compare: there is none.
    ("def double(x):\n    for name, value in list(globals().items()):\n"
     "        if callable(value) and name not in ('aux', 'double'):\n"
     "            try:\n                same = value(x) == aux(x)\n"
     "            except Exception:\n                continue\n"
     "            if not same:\n                raise RuntimeError(name)\n" + OWN, 1.5, 0.0),
]  # fmt: skip
LIMITS = [
    # What no run of main against a changed aux can tell from collaboration:
    # main checks aux's value against its own answer, so its tests depend on
    # it (the helper must be right on every test for the team to pass).
    ("def double(x):\n    assert aux(x) == 2 * x\n" + OWN, 1.5, 1.5),
]


@pytest.fixture(scope="module")
def pool():
    with Sandbox(workers=2, timeout=10.0) as sandbox:
        yield sandbox


def rewards(pool: Sandbox, problem: CodeProblem, helper: str, main: str):
    return [
        evaluate_many([(problem, helper, main)], pool, aux_bonus=rule)[0].reward
        for rule in ("as_written", "when_called")
    ]


@pytest.mark.parametrize(("main", "as_written", "when_called"), HONEST + ATTACKS + LIMITS)
def test_the_bonus_by_rule(pool: Sandbox, main: str, as_written: float, when_called: float) -> None:
    seed, strict = rewards(pool, DOUBLE, HELPER, main)
    assert seed.passed == 2
    assert seed.bonus == as_written
    assert strict.bonus == when_called
    # Only the bonus differs: the tests' score is the same run's.
    assert (seed.level1, seed.level2, seed.level3) == (strict.level1, strict.level2, strict.level3)
    assert strict.total == pytest.approx(seed.total - as_written + when_called)


def test_the_one_token_hack_earns_what_solving_alone_earns(pool: Sandbox, x_or_y) -> None:
    hack = INLINE.replace("\n", "\n    _ = aux(n)\n", 1)
    alone_seed, alone = rewards(pool, x_or_y, IS_PRIME, INLINE)
    hack_seed, hacked = rewards(pool, x_or_y, IS_PRIME, hack)
    honest_seed, honest = rewards(pool, x_or_y, IS_PRIME, USES_AUX)
    # The numbers: the seed pays the hack 4.0 against 2.5 alone.
    assert (alone_seed.total, hack_seed.total, honest_seed.total) == (2.5, 4.0, 4.0)
    assert (alone.total, hacked.total, honest.total) == (2.5, 2.5, 4.0)


def test_a_guard_main_handles_itself_earns_its_share(pool: Sandbox, x_or_y) -> None:
    # CoopHumanEval/0's tests: n = 7, 15, 2, 1, 13. For n = 1 main answers
    # without aux, so 4 of the 5 tests passed need aux's values: 1.5 x 4/5.
    main = "def x_or_y(n, x, y):\n    if n < 2:\n        return y\n    return x if aux(n) else y\n"
    seed, strict = rewards(pool, x_or_y, IS_PRIME, main)
    assert (seed.passed, seed.bonus) == (5, 1.5)
    assert strict.bonus == pytest.approx(1.5 * 4 / 5)


def test_a_wrong_helper_earns_the_bonus_only_on_the_tests_it_carries(pool: Sandbox, x_or_y) -> None:
    # "n > 10" is right on n = 1 and 13 only: 2 tests passed, both through aux.
    wrong = "def aux(n):\n    return n > 10"
    seed, strict = rewards(pool, x_or_y, wrong, USES_AUX)
    assert (seed.passed, seed.bonus, strict.bonus) == (2, 1.5, 1.5)


def test_a_helper_whose_values_cannot_cross_earns_nothing_and_keeps_its_tests(
    pool: Sandbox,
) -> None:
    helper = "def aux(n):\n    return (i for i in range(n))\n"
    main = "def double(x):\n    return sum(aux(3)) * 0 + 2 * x\n"
    seed, strict = rewards(pool, DOUBLE, helper, main)
    assert seed.level3 == strict.level3 == 1.0
    # Both split runs fail (a generator cannot cross): nothing won, nothing lost.
    assert (seed.bonus, strict.bonus) == (1.5, 0.0)


def test_recursion_in_aux_reaches_the_true_aux(pool: Sandbox) -> None:
    # aux's own recursive calls are not varied: only what main receives is.
    helper = "def aux(x):\n    return 0 if x == 0 else aux(x - 1) + 2\n"
    seed, strict = rewards(pool, DOUBLE, helper, "def double(x):\n    return aux(x)\n")
    assert (seed.passed, strict.bonus) == (2, 0.5)


def test_the_environment_takes_the_rule(pool: Sandbox) -> None:
    hack = "def double(x):\n    _ = aux(x)\n" + OWN
    totals = {}
    for rule in ("as_written", "when_called"):
        env = parallel_env(problems=[DOUBLE], num_turns=1, sandbox=pool, aux_bonus=rule)
        env.reset(seed=0)
        _, rewards_, _, _, infos = env.step({"helper": HELPER, "main": hack})
        totals[rule] = (rewards_["main"], infos["main"]["bonus"])
    assert totals == {"as_written": (4.0, 1.5), "when_called": (2.5, 0.0)}


class CountingSandbox(Sandbox):
    """A real pool that also records the size of every batch it is given."""

    batches: list[list[SandboxJob]]

    def run_tests_many(self, jobs, *args, **kwargs) -> list[TestReport]:  # type: ignore[override]
        self.batches.append(list(jobs))
        return super().run_tests_many(jobs, *args, **kwargs)


def test_step_batch_sends_every_split_pair_in_one_batch() -> None:
    honest = "def double(x):\n    y = aux(x)\n    return y + 0\n"
    hack = "def double(x):\n    _ = aux(x)\n" + OWN
    alone = "def double(x):\n" + OWN
    mains = [honest, hack, honest, hack, alone]
    with CountingSandbox(workers=2, timeout=10.0) as pool:
        pool.batches = []
        envs = [
            parallel_env(problems=[DOUBLE], num_turns=1, sandbox=pool, aux_bonus="when_called")
            for _ in mains
        ]
        for env in envs:
            env.reset(seed=0)
        results = step_batch(envs, [{"helper": HELPER, "main": main} for main in mains])
    # One batch of scored runs, one of split pairs: two per program the seed pays.
    assert [len(batch) for batch in pool.batches] == [5, 8]
    assert all(job.helper is not None for job in pool.batches[1])
    assert [result[1]["main"] for result in results] == [4.0, 2.5, 4.0, 2.5, 2.5]


def test_a_helper_too_long_to_split_earns_nothing_and_raises_nothing(pool: Sandbox) -> None:
    # Its split program quotes aux's source (4 characters per \x01): past the
    # pool's limit, both split runs are refused alike, and the scored run stands.
    text = "\x01" * (DEFAULT_MAX_PROGRAM_CHARS // 3)
    helper = f"def aux(x):\n    return 2 * x + 0 * len('{text}')\n"
    seed, strict = rewards(pool, DOUBLE, helper, "def double(x):\n    return aux(x)\n")
    assert (seed.passed, seed.bonus) == (2, 0.5)
    assert (strict.passed, strict.bonus) == (2, 0.0)


@pytest.mark.parametrize("bad", ["when-called", "", None, 1])
def test_a_bad_rule_names_the_value_and_the_fix(bad: object) -> None:
    with pytest.raises(ValueError, match="aux_bonus must be one of") as caught:
        CodeCollabConfig(problems=[DOUBLE], aux_bonus=bad)  # type: ignore[arg-type]
    assert "when_called" in str(caught.value) and repr(bad) in str(caught.value)
