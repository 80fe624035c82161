"""The team reward of code collaboration (the MAGRPO paper) on real CoopHumanEval problems.

Every case is a hand-written (helper, main) pair; the expected numbers are
worked out in the comments from the rule table of llm_envs.code_collab.rewards:
level 1 = 0.4 (aux with return) + 0.6 (entry point with return), level 2 = 0.5
(compiles), level 3 = passed / total, bonus = +0.5 (main calls aux) + 1.0 (not
a thin wrapper) - 0.5 (a discarded call), only when a test passed and aux exists.

All programs run in one sandbox batch (evaluate_many), so the table is cheap.
"""

from __future__ import annotations

from dataclasses import FrozenInstanceError

import pytest

from llm_envs.code_collab.rewards import (
    MAX_TEAM_REWARD,
    CodeRewardBreakdown,
    analyze_aux_usage,
    assemble,
    clean_code,
    evaluate_many,
    extract_function,
    prompt_preamble,
    score,
    team_reward,
)
from llm_envs.sandbox import ProgramStatus, TestOutcome, TestReport, TestStatus
from llm_envs.tasks import CodeProblem, load_coophumaneval, load_humaneval

CHE = {p.task_id: p for p in load_coophumaneval()}
X_OR_Y = CHE["CoopHumanEval/0"]  # x if n is prime else y; 5 tests
UNIQUE_DIGITS = CHE["CoopHumanEval/3"]  # sorted elements without an even digit; 5 tests

# x_or_y's tests: (7, 34, 12) -> 34, (15, 8, 5) -> 5, (2, 10, 20) -> 10,
# (1, 100, 200) -> 200, (13, 1, 2) -> 1.
IS_PRIME = """\
def aux(n):
    if n < 2:
        return False
    for d in range(2, int(n ** 0.5) + 1):
        if n % d == 0:
            return False
    return True"""
# Wrong: "odd" instead of "prime". Right on (7 odd prime) and (13 odd prime); wrong
# on 15 (odd, not prime), 2 (even, prime) and 1 (odd, not prime): 2 of 5 tests.
IS_ODD = "def aux(n):\n    return n % 2 == 1"
USES_AUX = "def x_or_y(n, x, y):\n    if aux(n):\n        return x\n    return y"
INLINE = """\
def x_or_y(n, x, y):
    if n < 2:
        return y
    for d in range(2, n):
        if n % d == 0:
            return y
    return x"""
DOES_EVERYTHING = """\
def aux(n, x, y):
    if n < 2:
        return y
    for d in range(2, n):
        if n % d == 0:
            return y
    return x"""

CASES: dict[str, tuple[CodeProblem, str, str, CodeRewardBreakdown]] = {
    # 0.4 + 0.6 | 0.5 | 5/5 | 0.5 + 1.0 = 4.0
    "full collaboration": (
        X_OR_Y,
        IS_PRIME,
        USES_AUX,
        CodeRewardBreakdown(1.0, 0.5, 1.0, 1.5, 4.0, 5, 5),
    ),
    # main only returns aux(...): the call earns 0.5, the anti-wrapper 1.0 is lost.
    "thin wrapper (return aux)": (
        X_OR_Y,
        DOES_EVERYTHING,
        "def x_or_y(n, x, y):\n    '''Delegate.'''\n    return aux(n, x, y)",
        CodeRewardBreakdown(1.0, 0.5, 1.0, 0.5, 3.0, 5, 5),
    ),
    "thin wrapper (assign then return)": (
        X_OR_Y,
        DOES_EVERYTHING,
        "def x_or_y(n, x, y):\n    result = aux(n, x, y)\n    return result",
        CodeRewardBreakdown(1.0, 0.5, 1.0, 0.5, 3.0, 5, 5),
    ),
    # Work after the call: not a wrapper.
    "not a wrapper (work on the result)": (
        X_OR_Y,
        DOES_EVERYTHING,
        "def x_or_y(n, x, y):\n    result = aux(n, x, y)\n    return result if n > 0 else y",
        CodeRewardBreakdown(1.0, 0.5, 1.0, 1.5, 4.0, 5, 5),
    ),
    # 2/5 tests (see IS_ODD): 1.0 + 0.5 + 0.4 + 1.5 = 3.4
    "partially wrong aux": (
        X_OR_Y,
        IS_ODD,
        USES_AUX,
        CodeRewardBreakdown(1.0, 0.5, 0.4, 1.5, 3.4, 2, 5),
    ),
    # unique_digits with "last digit odd": wrong only on [152, 323, 1422, 10] -> 4/5.
    "partially wrong aux, second problem": (
        UNIQUE_DIGITS,
        "def aux(n):\n    return n % 2 == 1",
        "def unique_digits(x):\n    return sorted(v for v in x if aux(v))",
        CodeRewardBreakdown(1.0, 0.5, 0.8, 1.5, 3.8, 4, 5),
    ),
    # Correct, but no call to aux: no bonus. 1.0 + 0.5 + 1.0 = 2.5
    "main ignores aux": (
        X_OR_Y,
        IS_PRIME,
        INLINE,
        CodeRewardBreakdown(1.0, 0.5, 1.0, 0.0, 2.5, 5, 5),
    ),
    # A bare `aux (n)` statement (odd spacing): +0.5 + 1.0 - 0.5 = 1.0
    "discarded call": (
        X_OR_Y,
        IS_PRIME,
        INLINE.replace("    if n < 2:", "    aux (n)\n    if n < 2:", 1),
        CodeRewardBreakdown(1.0, 0.5, 1.0, 1.0, 3.5, 5, 5),
    ),
    "discarded call next to a used one": (
        X_OR_Y,
        IS_PRIME,
        "def x_or_y(n, x, y):\n    aux(n)\n    return x if aux(n) else y",
        CodeRewardBreakdown(1.0, 0.5, 1.0, 1.0, 3.5, 5, 5),
    ),
    # aux prints instead of returning: 0.6 at level 1; aux(n) is None, so main
    # always returns y: right on 15 and 1 only (2/5). aux exists, main calls it.
    "aux without return": (
        X_OR_Y,
        "def aux(n):\n    print(n > 1 and all(n % d for d in range(2, n)))",
        USES_AUX,
        CodeRewardBreakdown(0.6, 0.5, 0.4, 1.5, 3.0, 2, 5),
    ),
    # The entry point exists without a return: 0.4 at level 1, it compiles, every
    # test sees None. No test passed: no bonus. 0.4 + 0.5 = 0.9
    "main without return": (
        X_OR_Y,
        IS_PRIME,
        "def x_or_y(n, x, y):\n    result = x if aux(n) else y",
        CodeRewardBreakdown(0.4, 0.5, 0.0, 0.0, 0.9, 0, 5),
    ),
    # Missing colon: level 1 is read from the text (1.0); no level 2, no tests.
    "syntax error in main": (
        X_OR_Y,
        IS_PRIME,
        "def x_or_y(n, x, y)\n    return x if aux(n) else y",
        CodeRewardBreakdown(1.0, 0.0, 0.0, 0.0, 1.0, 0, 5),
    ),
    "syntax error in aux": (
        X_OR_Y,
        "def aux(n):\n    return n >",
        USES_AUX,
        CodeRewardBreakdown(1.0, 0.0, 0.0, 0.0, 1.0, 0, 5),
    ),
    # No x_or_y: only aux's 0.4, and the reward stops at level 1.
    "missing entry point": (
        X_OR_Y,
        IS_PRIME,
        "def choose(n, x, y):\n    return x if aux(n) else y",
        CodeRewardBreakdown(0.4, 0.0, 0.0, 0.0, 0.4, 0, 5),
    ),
    "both missing": (
        X_OR_Y,
        "I would write a primality test.",
        "Sorry, I cannot do that.",
        CodeRewardBreakdown(0.0, 0.0, 0.0, 0.0, 0.0, 0, 5),
    ),
    # Markdown, prose around and between: cleaned away; same as full collaboration.
    "fenced code with prose": (
        X_OR_Y,
        f"Sure! Here is the helper:\n```python\n{IS_PRIME}\n```\nIt checks primality.",
        f"Here is my solution:\n\n{USES_AUX}\n\nThis returns x for primes.",
        CodeRewardBreakdown(1.0, 0.5, 1.0, 1.5, 4.0, 5, 5),
    ),
    "think block and unclosed fence": (
        X_OR_Y,
        f"<think>primes...</think>\n```python\n{IS_PRIME}",
        f"```py\n{USES_AUX}\n```",
        CodeRewardBreakdown(1.0, 0.5, 1.0, 1.5, 4.0, 5, 5),
    ),
    # The single-agent setting: no aux, so at most 0.6 + 0.5 + 1.0 = 2.1.
    "empty helper": (
        X_OR_Y,
        "",
        INLINE,
        CodeRewardBreakdown(0.6, 0.5, 1.0, 0.0, 2.1, 5, 5),
    ),
    # main calls an aux nobody wrote: NameError in every test.
    "empty helper, main calls aux": (
        X_OR_Y,
        "",
        USES_AUX,
        CodeRewardBreakdown(0.6, 0.5, 0.0, 0.0, 1.1, 0, 5),
    ),
    # main's own aux is dropped: the helper's wrong aux runs (as "partially wrong aux").
    "main redefines aux": (
        X_OR_Y,
        IS_ODD,
        f"{IS_PRIME}\n\n{USES_AUX}",
        CodeRewardBreakdown(1.0, 0.5, 0.4, 1.5, 3.4, 2, 5),
    ),
    # The helper's x_or_y is dropped: main's x_or_y runs.
    "helper writes the entry point too": (
        X_OR_Y,
        f"{IS_PRIME}\n\ndef x_or_y(n, x, y):\n    return y",
        USES_AUX,
        CodeRewardBreakdown(1.0, 0.5, 1.0, 1.5, 4.0, 5, 5),
    ),
    # A nested `def aux` shadows the helper's: the call is not to the helper's aux.
    "main shadows aux": (
        X_OR_Y,
        IS_PRIME,
        "def x_or_y(n, x, y):\n    def aux(k):\n        return k in (2, 7, 13)\n"
        "    return x if aux(n) else y",
        CodeRewardBreakdown(1.0, 0.5, 1.0, 0.0, 2.5, 5, 5),
    ),
    # The agents' own imports are kept (math.isqrt needs `import math`).
    "imports above the function": (
        X_OR_Y,
        "import math\n\ndef aux(n):\n"
        "    return n > 1 and all(n % d for d in range(2, math.isqrt(n) + 1))",
        "from __future__ import annotations\n\n" + USES_AUX,
        CodeRewardBreakdown(1.0, 0.5, 1.0, 1.5, 4.0, 5, 5),
    ),
    # An import that fails: the program does not load, no test passes.
    "import error": (
        X_OR_Y,
        "import no_such_module_anywhere\n\n" + IS_PRIME,
        USES_AUX,
        CodeRewardBreakdown(1.0, 0.5, 0.0, 0.0, 1.5, 0, 5),
    ),
    # An endless loop: the first test times out and the run ends.
    "endless loop": (
        X_OR_Y,
        IS_PRIME,
        "def x_or_y(n, x, y):\n    while True:\n        pass\n    return aux(n)",
        CodeRewardBreakdown(1.0, 0.5, 0.0, 0.0, 1.5, 0, 5),
    ),
}


@pytest.fixture(scope="module")
def evaluations():
    names = list(CASES)
    done = evaluate_many([CASES[n][:3] for n in names], timeout=1.0)
    return dict(zip(names, done, strict=True))


@pytest.mark.parametrize("name", list(CASES))
def test_team_reward_table(name, evaluations):
    expected = CASES[name][3]
    got = evaluations[name].reward
    assert got.passed == expected.passed
    assert got.total_tests == expected.total_tests
    for part in ("level1", "level2", "level3", "bonus", "total"):
        assert getattr(got, part) == pytest.approx(getattr(expected, part)), part
    assert got.total <= MAX_TEAM_REWARD


def test_endless_loop_is_a_timeout(evaluations):
    report = evaluations["endless loop"].report
    assert report.status is ProgramStatus.TIMEOUT
    assert report.outcomes[0].status is TestStatus.TIMEOUT


def test_tests_do_not_run_without_entry_point_or_syntax(evaluations):
    for name in ("missing entry point", "syntax error in main", "both missing"):
        assert evaluations[name].report is None
        assert not evaluations[name].program.runnable


def test_team_reward_entry_point_matches_batch(evaluations):
    reward = team_reward(X_OR_Y, IS_PRIME, USES_AUX)
    assert reward == evaluations["full collaboration"].reward


def test_breakdown_is_frozen_and_serializable():
    reward = CodeRewardBreakdown(1.0, 0.5, 0.4, 1.5, 3.4, 2, 5)
    with pytest.raises(FrozenInstanceError):
        reward.total = 0.0  # type: ignore[misc]
    assert reward.as_dict() == {
        "level1": 1.0,
        "level2": 0.5,
        "level3": 0.4,
        "bonus": 1.5,
        "total": 3.4,
        "passed": 2,
        "total_tests": 5,
    }
    assert reward.pass_rate == pytest.approx(0.4)


# ------------------------------------------------------------------ score without a sandbox


def report_with(passed: int, total: int) -> TestReport:
    outcomes = [TestOutcome(TestStatus.PASSED)] * passed
    outcomes += [TestOutcome(TestStatus.FAILED, "AssertionError", "assert 1 == 2")] * (
        total - passed
    )
    return TestReport(ProgramStatus.OK, tuple(outcomes))


@pytest.mark.parametrize(
    ("passed", "main", "expected_bonus"),
    [
        (0, USES_AUX, 0.0),  # no test passed: no bonus at all
        (1, USES_AUX, 1.5),
        (1, "def x_or_y(n, x, y):\n    return aux(n)", 0.5),
        (1, "def x_or_y(n, x, y):\n    aux(n)\n    return y", 1.0),
        (1, INLINE, 0.0),
    ],
)
def test_score_bonus_rules(passed, main, expected_bonus):
    program = assemble(X_OR_Y, IS_PRIME, main)
    reward = score(program, report_with(passed, 5))
    assert reward.bonus == pytest.approx(expected_bonus)
    assert reward.level3 == pytest.approx(passed / 5)


def test_score_needs_the_report_of_a_runnable_program():
    program = assemble(X_OR_Y, IS_PRIME, USES_AUX)
    with pytest.raises(ValueError, match="needs its test report"):
        score(program, None)
    with pytest.raises(ValueError, match="has 5"):
        score(program, report_with(1, 2))


def test_bonus_needs_aux_to_exist():
    # main calls aux and a test passes by luck (aux missing -> NameError is caught
    # nowhere, so craft the report): no aux, no bonus.
    program = assemble(X_OR_Y, "", USES_AUX)
    assert score(program, report_with(3, 5)).bonus == 0.0


# ------------------------------------------------------------------------------ cleaning


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("def f():\n    return 1", "def f():\n    return 1"),
        ("```python\ndef f():\n    return 1\n```", "def f():\n    return 1"),
        ("Intro:\n```\ndef f():\n    return 1\n```\nOutro.", "def f():\n    return 1"),
        ("Here it is:\ndef f():\n    return 1\nThis returns one.", "def f():\n    return 1"),
        ("    def f():\n        return 1", "def f():\n    return 1"),  # indented answer
        ("<think>f? g?</think>def f():\n    return 1", "def f():\n    return 1"),
        ("", ""),
        # A docstring line at column 0 is not prose (it is inside a string).
        (
            "Answer:\ndef f():\n    '''Doc.\nFor example:\n'''\n    return 1",
            "def f():\n    '''Doc.\nFor example:\n'''\n    return 1",
        ),
        # Code lines at column 0 survive, multi-line calls too.
        (
            "Note:\nx = f(\n    1)\ndef f(a):\n    return a",
            "x = f(\n    1)\ndef f(a):\n    return a",
        ),
    ],
)
def test_clean_code(text, expected):
    assert clean_code(text) == expected


def test_extract_function_from_text_that_does_not_parse():
    function = "@cache\ndef aux(n,\n        k=1):\n    s = 'return'  # return\n    return n +"
    f = extract_function(function + "\n\nprint(1)", "aux")
    assert f.source == function
    assert f.has_return and f.syntax_error is not None and f.syntax_error.line == 5
    only_in_string = extract_function("def aux(n)\n    s = 'return n'\n", "aux")
    assert only_in_string.found and not only_in_string.has_return


def test_extract_function_ast_rules():
    nested_return = "def aux(n):\n    def inner():\n        return 1\n    inner()"
    assert not extract_function(nested_return, "aux").has_return
    twice = "def aux(n):\n    return 1\n\ndef aux(n):\n    return 2"
    assert extract_function(twice, "aux").source == "def aux(n):\n    return 2"
    in_class = "class A:\n    def aux(self):\n        return 1"
    assert not extract_function(in_class, "aux").found


def test_aux_usage_rules():
    usage = analyze_aux_usage("def f(x):\n    '''doc'''\n    r: int = aux(x)\n    return r", "f")
    assert usage.calls_aux and usage.thin_wrapper
    usage = analyze_aux_usage("def f(aux):\n    return aux(1)", "f")
    assert usage.shadowed and not usage.calls_aux
    usage = analyze_aux_usage("def f(x):\n    for i in x:\n        aux(i)\n    return x", "f")
    assert usage.discarded_call_lines == (3,)
    assert analyze_aux_usage("def f(x)\n    return aux(x)", "f") is None


def test_prompt_preamble_gives_the_prompts_helpers():
    he10 = {p.task_id: p for p in load_humaneval()}["HumanEval/10"]
    imports, definitions = prompt_preamble(he10)
    assert imports == []
    assert [d.splitlines()[0] for d in definitions] == ["def is_palindrome(string: str) -> bool:"]
    program = assemble(he10, "", he10.prompt + he10.canonical_solution)
    assert "def is_palindrome" in program.source and program.runnable
    he0 = {p.task_id: p for p in load_humaneval()}["HumanEval/0"]
    assert prompt_preamble(he0) == (["from typing import List"], [])


def test_never_raises_on_garbage():
    for text in [
        "\x00",
        "def aux(" * 2000,
        "(" * 10_000,
        "'''",
        "def x_or_y(:\n\treturn",
        "\ud800",
    ]:
        program = assemble(X_OR_Y, text, text)
        score(program, report_with(0, 5) if program.runnable else None)
