"""The prompt's helpers in the trusted setup: `trusted_helpers` and what the loaders do with it.

Some HumanEval tests call a function that the prompt defines next to the entry
point (HumanEval/38 `encode_cyclic`, HumanEval/50 `encode_shift`, HumanEval/32
`poly`). They must call the data set's copy, run by the setup, not the program's,
which a completion can redefine. The data checks below run the data's code in
plain Python, the way the sandbox orders it (program, then setup in a namespace
holding the program's names, then each test); the loaders themselves only parse.
"""

from __future__ import annotations

import ast
from typing import Any

import pytest

from llm_envs.tasks import CodeProblem, load_coophumaneval, load_humaneval
from llm_envs.tasks.coophumaneval import problems_from_coophumaneval_records
from llm_envs.tasks.humaneval import problems_from_humaneval_records, trusted_helpers

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::SyntaxWarning")

STUB = "def solve(x):\n    '''The entry point.'''\n"

# (prompt, entry point, expected helpers)
CASES = {
    "helper kept, entry point dropped": (
        "import math\n\n\ndef helper(x):\n    return math.floor(x)\n\n\n" + STUB,
        "solve",
        "import math\ndef helper(x):\n    return math.floor(x)\n",
    ),
    "only the entry point": (STUB, "solve", ""),
    "only imports": ("from typing import List\n\n\n" + STUB, "solve", "from typing import List\n"),
    "empty prompt": ("", "solve", ""),
    "a helper after the entry point, order kept": (
        "X = 1\n" + STUB + "def later():\n    return X\n",
        "solve",
        "X = 1\ndef later():\n    return X\n",
    ),
    "module constant with a multi-line string (HumanEval/64)": (
        '\nFIX = """\nAdd more test cases.\n"""\n\n' + STUB,
        "solve",
        'FIX = """\nAdd more test cases.\n"""\n',
    ),
    "module docstring and bare constants dropped": (
        '"""A module."""\n...\nY = 2\n' + STUB,
        "solve",
        "Y = 2\n",
    ),
    "classes kept, even with a method named like the entry point": (
        "class Box:\n    def solve(self):\n        return 1\n" + STUB,
        "solve",
        "class Box:\n    def solve(self):\n        return 1\n",
    ),
    "decorated helper keeps its decorators": (
        "import functools\n\n@functools.lru_cache(\n    maxsize=None,\n)\n@staticmethod\n"
        "def helper(n):\n    return n\n\n" + STUB,
        "solve",
        "import functools\n@functools.lru_cache(\n    maxsize=None,\n)\n@staticmethod\n"
        "def helper(n):\n    return n\n",
    ),
    "decorated entry point dropped with its decorators": (
        "import functools\n\n@functools.cache\ndef solve(n):\n    '''Stub.'''\n",
        "solve",
        "import functools\n",
    ),
    "any statement binding the entry point is dropped": (
        "solve = None\nfrom m import solve\nimport solve\nif True:\n    def solve(): pass\n"
        "for solve in []: pass\nZ = 3\n" + STUB,
        "solve",
        "Z = 3\n",
    ),
    "statements sharing a line are split": (
        "import os; W = os.sep\n" + STUB,
        "solve",
        "import os\nW = os.sep\n",
    ),
    "an async entry point": ("V = 0\nasync def solve():\n    pass\n", "solve", "V = 0\n"),
    "does not parse": ("def helper(:\n    pass\n" + STUB, "solve", ""),
    "null byte": ("X = 1\x00\n" + STUB, "solve", ""),
    "nested too deep to parse": ("X = " + "-" * 100_000 + "1\n" + STUB, "solve", ""),
    "__future__ import moved first": (
        "from __future__ import annotations\n\ndef helper(x: Later) -> Later:\n    return x\n"
        + STUB,
        "solve",
        "from __future__ import annotations\ndef helper(x: Later) -> Later:\n    return x\n",
    ),
    "__future__ import after other code still opens the result": (
        "import math\nfrom __future__ import annotations\nfrom __future__ import annotations\n"
        "def helper(x: Later):\n    return x\n" + STUB,
        "solve",
        "from __future__ import annotations\nimport math\ndef helper(x: Later):\n    return x\n",
    ),
    "unknown __future__ features dropped": (
        "from __future__ import braces, annotations\nfrom __future__ import nonsense\nU = 1\n"
        + STUB,
        "solve",
        "from __future__ import annotations\nU = 1\n",
    ),
    "__future__ import alone is nothing": (
        "from __future__ import annotations\n" + STUB,
        "solve",
        "",
    ),
}


@pytest.mark.parametrize(("prompt", "entry_point", "expected"), CASES.values(), ids=list(CASES))
def test_trusted_helpers(prompt, entry_point, expected):
    helpers = trusted_helpers(prompt, entry_point)
    assert helpers == expected
    if helpers:
        # Valid on its own, at the top of a module (__future__ imports included).
        compile(helpers, "<helpers>", "exec", dont_inherit=True)


def test_trusted_helpers_text_with_tabs_and_unicode_matches_the_prompt():
    prompt = "def helper(s):\n\tif s:\n\t\treturn 'é' + s\n\treturn ''\n\n" + STUB
    helpers = trusted_helpers(prompt, "solve")
    (node,) = ast.parse(helpers).body
    assert ast.dump(node) == ast.dump(ast.parse(prompt).body[0])


def test_trusted_helpers_never_executes_the_prompt():
    prompt = "raise SystemExit('ran')\nimport os\nos._exit(3)\n" + STUB
    assert trusted_helpers(prompt, "solve") == "raise SystemExit('ran')\nimport os\nos._exit(3)\n"


def test_records_get_the_helpers_first_in_the_setup():
    prompt = "def helper(x):\n    return x + 1\n\n\ndef solve(x):\n    '''Add two.'''\n"
    test = "def check(candidate):\n    assert candidate(1) == helper(2)\n"
    record = {"task_id": "T/1", "prompt": prompt, "entry_point": "solve", "test": test}
    (coop,) = problems_from_coophumaneval_records([record])
    (humaneval,) = problems_from_humaneval_records([{**record, "canonical_solution": ""}])
    expected = "def helper(x):\n    return x + 1\ncandidate = solve\n"
    assert coop.test_setup == humaneval.test_setup == expected
    (plain,) = problems_from_coophumaneval_records([{**record, "prompt": STUB}])
    assert plain.test_setup == "candidate = solve\n"


# --- the data sets ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def humaneval() -> dict[str, CodeProblem]:
    return {p.task_id: p for p in load_humaneval()}


@pytest.fixture(scope="module")
def coophumaneval() -> dict[str, CodeProblem]:
    return {p.task_id: p for p in load_coophumaneval()}


def _definitions(helpers: str) -> list[str]:
    """What the helpers define other than imports, as `Kind name` strings."""
    found = []
    for node in ast.parse(helpers).body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            continue
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            found.append(f"{type(node).__name__} {node.name}")
        else:
            found.append(f"{type(node).__name__} {ast.unparse(node).split(' =')[0]}")
    return found


def test_which_problems_have_helpers(humaneval, coophumaneval):
    # A change here means the data changed (or the rules did): review the new helpers.
    defined = {}
    imports_only = []
    for problem in (*humaneval.values(), *coophumaneval.values()):
        helpers = trusted_helpers(problem.prompt, problem.entry_point)
        assert problem.test_setup.startswith(helpers)
        if not helpers:
            continue
        definitions = _definitions(helpers)
        if definitions:
            defined[problem.task_id] = definitions
        else:
            imports_only.append(problem.task_id)
    assert defined == {
        "HumanEval/10": ["FunctionDef is_palindrome"],
        "HumanEval/32": ["FunctionDef poly"],
        "HumanEval/38": ["FunctionDef encode_cyclic"],
        "HumanEval/50": ["FunctionDef encode_shift"],
        "HumanEval/64": ["Assign FIX"],
    }
    # The others hold only the stub's `from typing import ...`: 21 HumanEval problems
    # (HumanEval/0 to 29) and CoopHumanEval/15.
    assert len(imports_only) == 22
    assert imports_only[-1] == "CoopHumanEval/15"
    typing_only = trusted_helpers(humaneval["HumanEval/8"].prompt, "sum_product")
    assert typing_only == "from typing import List, Tuple\n"


def _program_namespace(program: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": "solution"}
    exec(compile(program, "<program>", "exec"), namespace)
    return namespace


def _tests_namespace(program_namespace: dict[str, Any]) -> dict[str, Any]:
    # As the sandbox does: the tests see the program's names, then the setup's.
    return {k: v for k, v in program_namespace.items() if not k.startswith("__")}


def _dummy(*args: object, **kwargs: object) -> tuple[()]:
    # An empty tuple: HumanEval/33's self-comparisons, in the setup, take tuple() of it.
    return ()


def test_every_setup_runs_with_a_dummy_entry_point(humaneval, coophumaneval):
    for problem in (*humaneval.values(), *coophumaneval.values()):
        namespace: dict[str, Any] = {problem.entry_point: _dummy}
        exec(compile(problem.test_setup, f"<{problem.task_id} setup>", "exec"), namespace)
        assert namespace["candidate"] is _dummy, problem.task_id


def test_every_canonical_solution_passes_with_the_trusted_setup(humaneval):
    for problem in humaneval.values():
        assert problem.canonical_solution is not None
        program = _program_namespace(problem.prompt + problem.canonical_solution)
        namespace = _tests_namespace(program)
        exec(compile(problem.test_setup, "<setup>", "exec"), namespace)
        for index, test in enumerate(problem.tests):
            try:
                exec(compile(test, "<test>", "exec"), namespace)
            except Exception as error:
                pytest.fail(f"{problem.task_id} test {index} failed: {error!r}")


# A completion that redefines the helper its tests call, so that a wrong entry point passes.
CHEATS = {
    "HumanEval/38": "def encode_cyclic(s):\n    return s\n\ndef decode_cyclic(s):\n    return s\n",
    "HumanEval/50": "def encode_shift(s):\n    return s\n\ndef decode_shift(s):\n    return s\n",
    "HumanEval/32": "def poly(xs, x):\n    return 0.0\n\ndef find_zero(xs):\n    return 0.0\n",
}


@pytest.mark.parametrize("task_id", list(CHEATS))
def test_a_redefined_helper_does_not_reach_the_tests(humaneval, task_id):
    problem = humaneval[task_id]
    program = _program_namespace(problem.prompt + "    pass\n\n\n" + CHEATS[task_id])
    (test,) = problem.tests
    # Without the trusted helpers (the old setup), the program's copy makes the test pass...
    old_setup = problem.test_setup.removeprefix(
        trusted_helpers(problem.prompt, problem.entry_point)
    )
    namespace = _tests_namespace(program)
    exec(compile(old_setup, "<old setup>", "exec"), namespace)
    exec(compile(test, "<test>", "exec"), namespace)
    # ...with them, the data set's helper runs and the cheat fails.
    namespace = _tests_namespace(program)
    exec(compile(problem.test_setup, "<setup>", "exec"), namespace)
    with pytest.raises(AssertionError):
        exec(compile(test, "<test>", "exec"), namespace)
