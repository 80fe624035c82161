"""HumanEval, MBPP and CoopHumanEval loaders: counts, fields, check splitting, quirks.

The loaders only parse; running the reference solutions against these tests is
the sandbox's job (tests/sandbox/test_datasets.py).
"""

from __future__ import annotations

import ast
import json

import pytest

from llm_envs.tasks import (
    CodeProblem,
    load_coophumaneval,
    load_humaneval,
    load_mbpp,
    split_check,
)
from llm_envs.tasks.coophumaneval import problems_from_coophumaneval_records
from llm_envs.tasks.mbpp import MBPP_SPLITS, mbpp_prompt, problems_from_mbpp_records

# The tests parse the data's code too; its old string escapes are not our warnings.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::SyntaxWarning")

LOADERS = {
    "humaneval": load_humaneval,
    "mbpp": lambda: load_mbpp("all"),
    "coophumaneval": load_coophumaneval,
}


@pytest.mark.parametrize(
    ("load", "expected"),
    [
        (load_humaneval, 164),
        (lambda: load_mbpp("test"), 257),
        (lambda: load_mbpp("train"), 120),
        (lambda: load_mbpp("validation"), 43),
        (lambda: load_mbpp("prompt"), 7),
        (lambda: load_mbpp("all"), 427),
        (load_coophumaneval, 82),
    ],
)
def test_counts(load, expected):
    assert len(load()) == expected


def test_mbpp_splits_partition_all_by_task_id():
    everything = {p.task_id for p in load_mbpp("all")}
    parts = [load_mbpp(split) for split in MBPP_SPLITS]  # type: ignore[arg-type]
    ids = [p.task_id for part in parts for p in part]
    assert len(ids) == len(set(ids)) == len(everything)
    assert set(ids) == everything
    for split, part in zip(MBPP_SPLITS, parts, strict=True):
        assert all(int(p.task_id.split("/")[1]) in MBPP_SPLITS[split] for p in part)


def test_unknown_mbpp_split_names_the_choices():
    with pytest.raises(ValueError, match="split must be one of"):
        load_mbpp("dev")  # type: ignore[arg-type]


@pytest.mark.parametrize("name", list(LOADERS))
def test_order_is_deterministic_and_by_task_number(name):
    problems = LOADERS[name]()
    numbers = [int(p.task_id.rpartition("/")[2]) for p in problems]
    assert numbers == sorted(numbers)
    assert len(set(numbers)) == len(numbers)
    assert LOADERS[name]() == problems


@pytest.mark.parametrize("name", list(LOADERS))
def test_field_sanity(name):
    for problem in LOADERS[name]():
        assert isinstance(problem, CodeProblem)
        assert problem.entry_point.isidentifier()
        assert problem.tests, problem.task_id
        for test in problem.tests:
            tree = ast.parse(test)  # every test parses on its own
            assert any(isinstance(node, ast.Assert) for node in ast.walk(tree)), test
        ast.parse(problem.test_setup)
        ast.parse(problem.prompt)
        if problem.canonical_solution is not None:
            # prompt + solution is the program the sandbox runs, for every data set.
            program = ast.parse(problem.prompt + problem.canonical_solution)
            defined = {n.name for n in program.body if isinstance(n, ast.FunctionDef)}
            assert problem.entry_point in defined, problem.task_id


def test_humaneval_and_coop_setup_binds_candidate():
    for problem in (*load_humaneval(), *load_coophumaneval()):
        assert f"candidate = {problem.entry_point}\n" in problem.test_setup
        assert "def check" not in problem.test_setup  # split, never the whole-check fallback


def test_loaders_cache_parsed_problems():
    assert load_humaneval() is load_humaneval()
    assert load_mbpp("all") is load_mbpp("all")
    assert load_coophumaneval() is load_coophumaneval()


# --- HumanEval check splitting on hand-picked problems ------------------------------

# task -> (number of tests, number of `assert True`-like statements moved to setup)
HUMANEVAL_SPLITS = {
    "HumanEval/0": (7, 0),
    "HumanEval/32": (1, 0),  # one `for` loop with 100 random polynomials
    "HumanEval/33": (4, 0),  # plus 3 self-comparisons moved to setup
    "HumanEval/38": (1, 0),
    "HumanEval/53": (6, 0),  # 5 asserts, then a loop of 100 random sums
    "HumanEval/64": (7, 1),
    "HumanEval/66": (8, 2),
    "HumanEval/129": (11, 0),
    "HumanEval/151": (7, 0),  # `lst = ...`, `odd_sum = ...` sit between asserts
}


@pytest.fixture(scope="module")
def humaneval() -> dict[str, CodeProblem]:
    return {p.task_id: p for p in load_humaneval()}


@pytest.mark.parametrize(("task_id", "expected"), HUMANEVAL_SPLITS.items())
def test_humaneval_check_split_counts(humaneval, task_id, expected):
    tests, inert = expected
    problem = humaneval[task_id]
    assert len(problem.tests) == tests
    assert problem.test_setup.count("assert True") == inert
    assert not any("assert True" in test for test in problem.tests)


def test_humaneval_0_exact_split(humaneval):
    problem = humaneval["HumanEval/0"]
    assert problem.tests[0] == "assert candidate([1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.3) == True"
    # The prompt's import (trusted_helpers), then the test code's module level.
    assert problem.test_setup.startswith("from typing import List\nMETADATA = {")
    assert problem.test_setup.endswith("candidate = has_close_elements\n")


def test_humaneval_151_setup_runs_before_all_tests(humaneval):
    # In check(), `lst` and `odd_sum` are assigned after six asserts and read by the
    # seventh; they read nothing the earlier tests read, so setup may run them first.
    problem = humaneval["HumanEval/151"]
    setup = problem.test_setup
    assert setup.index("candidate = double_the_difference") < setup.index("lst = list(")
    assert setup.index("lst = list(") < setup.index("odd_sum = sum(")
    assert problem.tests[-1].startswith("assert candidate(lst) == odd_sum")


def test_humaneval_loop_tests_keep_their_names_local(humaneval):
    # HumanEval/38 assigns `str` in its loop: at module level that would shadow the
    # builtin for the candidate's own code, so the loop runs inside a function.
    (test,) = humaneval["HumanEval/38"].tests
    assert test.startswith("def _llm_envs_test():\n    for _ in range(100):\n")
    assert test.endswith("\n_llm_envs_test()")
    assert "from random import randint, choice" in humaneval["HumanEval/38"].test_setup
    loop = humaneval["HumanEval/53"].tests[-1]
    assert loop.startswith("def _llm_envs_test():")
    assert humaneval["HumanEval/53"].tests[0] == "assert candidate(0, 1) == 1"


def test_humaneval_33_self_comparisons_are_not_tests(humaneval):
    # Three asserts compare candidate(x) with sort_third(x), the candidate itself:
    # any deterministic program would pass them.
    problem = humaneval["HumanEval/33"]
    assert problem.test_setup.count("sort_third([") == 3
    assert not any("sort_third" in test for test in problem.tests)


def test_assert_true_census():
    # Every inert assertion in the data (never refers to the candidate), counted.
    # A change here means the data changed; the loader keeps them out of `tests`.
    from llm_envs.tasks.data_location import find_local_file, read_records

    file, _ = find_local_file("HumanEval.jsonl.gz", None, dataset="HumanEval")
    assert file is not None
    splits = [split_check(r["test"], r["entry_point"]) for r in read_records(file)]
    assert sum(len(s.inert_asserts) for s in splits) == 48
    assert sum(1 for s in splits if s.inert_asserts) == 36
    assert sum(len(s.self_comparisons) for s in splits) == 3
    assert not any(s.whole_check for s in splits)
    assert all(a.startswith("assert True") for s in splits for a in s.inert_asserts)


# --- split_check on synthetic code ---------------------------------------------------

SPLIT_CASES = [
    # (check body, expected tests, expected whole_check)
    ("    assert candidate(1) == 1\n    assert candidate(2) == 4\n", 2, False),
    ("    x = 3\n    assert candidate(x) == 9\n", 1, False),
    # setup depends on the candidate: cannot move it before the tests
    ("    y = candidate(2)\n    assert y == 4\n", 1, True),
    # setup mutates what an earlier test read: moving it first would change that test
    (
        "    lst = [1]\n    assert candidate(lst) == 1\n    lst.append(2)\n"
        "    assert candidate(lst) == 2\n",
        1,
        True,
    ),
    # a later test reads a loop variable of an earlier test
    (
        "    for i in range(3):\n        assert candidate(i) >= 0\n    assert candidate(i) == 4\n",
        1,
        True,
    ),
    # asserts hidden in a nested helper
    ("    def helper(v):\n        assert candidate(v) == v * v\n    helper(3)\n", 1, True),
    # no test refers to the candidate at all
    ("    assert True\n", 1, True),
]


@pytest.mark.parametrize(("body", "tests", "whole"), SPLIT_CASES)
def test_split_check_cases(body, tests, whole):
    split = split_check(f"def check(candidate):\n{body}", "f")
    assert len(split.tests) == tests
    assert split.whole_check is whole
    if whole:
        assert split.tests == ("check(candidate)",)
        assert "def check(candidate):" in split.setup
    for test in split.tests:
        ast.parse(test)
    ast.parse(split.setup)


def test_split_check_uses_the_parameter_name_and_keeps_multiline_strings():
    code = 'def check(f):\n    s = """a\n  b"""\n    assert f(s) == """x\n    y"""\n'
    split = split_check(code, "solve")
    assert split.setup.startswith("f = solve\n")
    (test,) = split.tests
    assert ast.literal_eval(ast.parse(test).body[0].test.comparators[0]) == "x\n    y"  # type: ignore[attr-defined]
    setup_tree = ast.parse(split.setup)
    assert ast.literal_eval(setup_tree.body[1].value) == "a\n  b"  # type: ignore[attr-defined]


def test_split_check_rejects_code_without_check():
    with pytest.raises(ValueError, match="exactly one `def check"):
        split_check("assert 1\n", "f", task_id="T/1")
    with pytest.raises(ValueError, match="does not parse"):
        split_check("def check(:\n", "f", task_id="T/1")


# --- MBPP ---------------------------------------------------------------------------

MBPP_ENTRY_POINTS = {
    "Mbpp/2": "similar_elements",
    "Mbpp/6": "differ_At_One_Bit_Pos",  # defines is_Power_Of_Two as a helper too
    "Mbpp/18": "remove_dirty_chars",  # three helpers
    "Mbpp/56": "check",  # the entry point really is called `check`
    "Mbpp/223": "is_majority",  # helper binary_search is defined after it
    "Mbpp/751": "check_min_heap",
}


@pytest.fixture(scope="module")
def mbpp() -> dict[str, CodeProblem]:
    return {p.task_id: p for p in load_mbpp("all")}


@pytest.mark.parametrize(("task_id", "entry"), MBPP_ENTRY_POINTS.items())
def test_mbpp_entry_points(mbpp, task_id, entry):
    assert mbpp[task_id].entry_point == entry


def test_mbpp_entry_point_is_called_by_every_test(mbpp):
    for problem in mbpp.values():
        for test in problem.tests:
            called = {
                n.func.id
                for n in ast.walk(ast.parse(test))
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
            }
            assert problem.entry_point in called, (problem.task_id, test)


def test_mbpp_prompt_is_a_stub_with_the_task_as_docstring(mbpp):
    problem = mbpp["Mbpp/2"]
    assert problem.prompt == (
        "def similar_elements(test_tup1, test_tup2):\n"
        '    """Write a function to find the shared elements from the given two lists."""\n'
    )
    assert mbpp["Mbpp/627"].prompt.startswith("def find_First_Missing(array, start=0, end=None):\n")
    for problem in mbpp.values():
        (function,) = ast.parse(problem.prompt).body
        assert isinstance(function, ast.FunctionDef)
        assert function.name == problem.entry_point


def test_mbpp_setup_and_tests(mbpp):
    assert mbpp["Mbpp/82"].test_setup == "import math\n"
    assert mbpp["Mbpp/2"].test_setup == ""
    assert mbpp["Mbpp/2"].tests[0] == (
        "assert set(similar_elements((3, 4, 5, 6),(5, 7, 4, 10))) == set((4, 5))"
    )
    assert mbpp["Mbpp/2"].canonical_solution is not None
    assert mbpp["Mbpp/2"].canonical_solution.startswith("def similar_elements(")


@pytest.mark.parametrize(
    "description",
    ['Say "hi"', 'Ends with a quote"', 'Has """triple""" quotes', "Back\\slash", "two\nlines"],
)
def test_mbpp_prompt_escapes_awkward_descriptions(description):
    prompt = mbpp_prompt(description, "def f(x):")
    (function,) = ast.parse(prompt).body
    assert ast.get_docstring(function) == description


def test_mbpp_conversion_from_hub_records():
    # Field names of the hub's `sanitized` config (as in sanitized-mbpp.json).
    record = {
        "source_file": "fake.ipynb",
        "task_id": 700,
        "prompt": "Write a function to double a number.",
        "code": (
            "import math\ndef helper(x):\n    return x\ndef double(x):\n    return 2 * helper(x)"
        ),
        "test_imports": ["import math"],
        "test_list": ["assert double(2) == 4", "assert double(math.floor(1.5)) == 2"],
    }
    (problem,) = problems_from_mbpp_records([record])
    assert problem == CodeProblem(
        task_id="Mbpp/700",
        prompt='def double(x):\n    """Write a function to double a number."""\n',
        entry_point="double",
        tests=("assert double(2) == 4", "assert double(math.floor(1.5)) == 2"),
        test_setup="import math\n",
        canonical_solution=record["code"],
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"test_list": []}, "test_list"),
        ({"code": None}, "'code'"),
        ({"code": "def other(x):\n    return x"}, "call no function"),
        ({"task_id": "x"}, "task_id"),
    ],
)
def test_mbpp_malformed_records_name_the_problem(change, message):
    record = {
        "task_id": 3,
        "prompt": "p",
        "code": "def f(x):\n    return x",
        "test_imports": [],
        "test_list": ["assert f(1) == 1"],
        **change,
    }
    with pytest.raises(ValueError, match=message):
        problems_from_mbpp_records([record])


# --- CoopHumanEval ------------------------------------------------------------------


def test_coophumaneval_2_date_format_quirk():
    # Known data quirk (shared/data/README.md), kept as in the data, not fixed:
    # the prompt describes mm-dd-yyyy, the tests expect dd-mm-yyyy.
    problem = {p.task_id: p for p in load_coophumaneval()}["CoopHumanEval/2"]
    assert problem.entry_point == "valid_date"
    assert "The date should be in the format: mm-dd-yyyy" in problem.prompt
    assert "assert candidate('15-01-2023') == True" in problem.tests  # day 15, month 01
    assert "assert candidate('29-02-2024') == True" in problem.tests
    assert "assert candidate('32-01-2023') == False" in problem.tests


def test_coophumaneval_has_no_reference_solutions():
    assert all(p.canonical_solution is None for p in load_coophumaneval())


def test_coophumaneval_conversion_from_hub_records():
    record = {
        "task_id": "CoopHumanEval/90",
        "prompt": "def inc(x):\n    '''Add one.'''\n",
        "test": "def check(candidate):\n    assert candidate(1) == 2\n    assert True\n",
        "entry_point": "inc",
    }
    (problem,) = problems_from_coophumaneval_records([record])
    assert problem.tests == ("assert candidate(1) == 2",)
    assert problem.test_setup == "candidate = inc\nassert True\n"
    assert problem.canonical_solution is None


def test_coophumaneval_malformed_record_names_the_field():
    with pytest.raises(ValueError, match="'test'"):
        problems_from_coophumaneval_records([{"task_id": "C/1", "prompt": "", "entry_point": "f"}])


def test_explicit_json_lines_file_is_read(tmp_path):
    records = [
        {
            "task_id": f"HumanEval/{i}",
            "prompt": "def f(x):\n",
            "canonical_solution": "    return x\n",
            "test": "def check(candidate):\n    assert candidate(1) == 1\n",
            "entry_point": "f",
        }
        for i in (10, 9)
    ]
    file = tmp_path / "mine.jsonl"
    file.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    problems = load_humaneval(file)
    assert [p.task_id for p in problems] == ["HumanEval/9", "HumanEval/10"]
