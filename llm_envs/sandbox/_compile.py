"""Compiling in the worker: test rewriting, and programs compiled before their run starts.

The worker compiles each test suite once (rewritten, see :func:`prepare_tests`)
and each program before handing it to its run (:func:`compile_program`), so a
run only unmarshals code objects: compiling allocates far more than executing
a typical solution, and every page a run writes after its fork costs a
copy-on-write fault. Compiling never executes the program.

This module is only imported by the worker (after its spawner has forked, so
runs do not carry ``ast`` in their memory) and by the caller's process for
:func:`check_test_syntax`; the runs do not import it. It only uses the standard library.
"""

from __future__ import annotations

import ast
import types
import warnings
from collections.abc import Sequence
from typing import NamedTuple

from llm_envs.sandbox._judge import COMPARE_NAME, COMPARISONS, JUDGE_NAMES

__all__ = [
    "COMPILE_IN_WORKER_LIMIT",
    "CompiledProgram",
    "PreparedTests",
    "check_test_syntax",
    "compile_program",
    "helper_names",
    "prepare_tests",
]

#: Programs up to this many characters are compiled by the worker; longer ones
#: are compiled by their run, under its resource limits and timeout (compiling
#: takes time and memory roughly in proportion to the source: this bounds what
#: the worker spends on one untrusted source outside those limits).
COMPILE_IN_WORKER_LIMIT = 64 * 1024

# The operator argument of the judge's comparison: its index in _judge.COMPARISONS.
_CMP_INDEX: dict[type[ast.cmpop], int] = {
    operator: COMPARISONS.index(symbol)
    for operator, symbol in (
        (ast.Eq, "=="),
        (ast.NotEq, "!="),
        (ast.Lt, "<"),
        (ast.LtE, "<="),
        (ast.Gt, ">"),
        (ast.GtE, ">="),
        (ast.Is, "is"),
        (ast.IsNot, "is not"),
        (ast.In, "in"),
        (ast.NotIn, "not in"),
    )
}


# --- programs -------------------------------------------------------------------------------


class CompiledProgram(NamedTuple):
    """A program compiled by the worker, or why it does not compile.

    Attributes:
        code: the module code object (None when the program does not compile).
        error: ``"<error type>: <message>"`` when it does not compile, as a run
            reports it (a ``SyntaxError`` says its line).
        warnings: what compiling printed (``SyntaxWarning`` lines, as Python's
            default warning display writes them): the run writes it to its stderr.
    """

    code: types.CodeType | None
    error: str | None
    warnings: str


def compile_program(source: str) -> CompiledProgram:
    """Compile an untrusted program the way its run would, without executing it.

    Warnings go through the worker's filters, which are Python's defaults as in
    every run, and come back as text.

    Example:
        >>> compile_program("x = 1").error is None
        True
        >>> compile_program("def f(:").error
        'SyntaxError: invalid syntax (line 1)'
    """
    with warnings.catch_warnings(record=True) as caught:
        try:
            code = compile(source, "<program>", "exec", dont_inherit=True, optimize=0)
        except Exception as error:  # SyntaxError, ValueError (NUL), RecursionError...
            if isinstance(error, SyntaxError):
                message = f"{error.msg} (line {error.lineno})"
            else:
                message = str(error)[:1000]
            return CompiledProgram(None, f"{type(error).__name__}: {message}", _shown(caught))
    return CompiledProgram(code, None, _shown(caught))


def _shown(caught: list[warnings.WarningMessage]) -> str:
    return "".join(
        warnings.formatwarning(item.message, item.category, item.filename, item.lineno, "")
        for item in caught
    )


# --- test rewriting -------------------------------------------------------------------------


class _AssertRewriter(ast.NodeTransformer):
    """Rewrites ``assert a <op> b`` (at any depth) so that a failure says what the values were.

    ``assert f(3) == 5`` becomes ``assert __sandbox_compare__(f(3), 5, 0)``: the
    judge's comparison remembers ``assert 6 == 5`` when it is false. This only
    shapes the failure message; the tests run in the judge, where every value
    the program returned is already plain data.
    """

    def visit_Assert(self, node: ast.Assert) -> ast.stmt:
        self.generic_visit(node)
        test = node.test
        if node.msg is None and isinstance(test, ast.Compare) and len(test.ops) == 1:
            op = ast.Constant(_CMP_INDEX[type(test.ops[0])])
            call = ast.Call(
                func=ast.Name(id=COMPARE_NAME, ctx=ast.Load()),
                args=[test.left, test.comparators[0], op],
                keywords=[],
            )
            node.test = ast.copy_location(call, test)
        return node


class PreparedTests(NamedTuple):
    """Compiled, rewritten setup and tests, ready to run in many processes.

    Attributes:
        setup: the setup's code object.
        tests: one code object per test snippet.
        names: every name the setup and tests load (globals, and attribute names:
            a superset), which the judge asks the program about.
    """

    setup: types.CodeType
    tests: tuple[types.CodeType, ...]
    names: frozenset[str]


def _parse(source: str, where: str) -> ast.Module:
    try:
        with warnings.catch_warnings():
            # Benchmark tests use old string escapes; their warnings are not ours to show.
            warnings.simplefilter("ignore")
            return ast.parse(source, filename=f"<{where}>")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as error:
        raise ValueError(f"{where} is not valid Python: {type(error).__name__}: {error}") from None


def check_test_syntax(setup: str, tests: Sequence[str]) -> None:
    """Raise ValueError naming the first of ``setup``/``tests`` that does not parse.

    Example:
        >>> check_test_syntax("", ["assert f(1) == 2", "assert f("])  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: tests[1] is not valid Python: SyntaxError: '(' was never closed ...
    """
    _parse(setup, "setup")
    for index, test in enumerate(tests):
        _parse(test, f"tests[{index}]")


def _compile_rewritten(source: str, where: str) -> types.CodeType:
    tree = _AssertRewriter().visit(_parse(source, where))
    ast.fix_missing_locations(tree)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        code: types.CodeType = compile(tree, f"<{where}>", "exec", dont_inherit=True, optimize=0)
    return code


def _names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            names |= _names(constant)
    return names


def prepare_tests(setup: str, tests: Sequence[str]) -> PreparedTests:
    """Parse, rewrite and compile a setup and its tests; the names they use.

    Every ``assert a <op> b`` is rewritten so that its failure message shows the
    values (see :class:`_AssertRewriter`); the sources themselves are not changed.

    Raises:
        ValueError: naming the snippet that is not valid Python.

    Example:
        >>> prepared = prepare_tests("candidate = add", ["assert candidate(1, 2) == 3"])
        >>> sorted(prepared.names)
        ['__sandbox_compare__', 'add', 'candidate']
    """
    setup_code = _compile_rewritten(setup, "setup")
    test_codes = tuple(
        _compile_rewritten(test, f"tests[{index}]") for index, test in enumerate(tests)
    )
    names = _names(setup_code)
    for code in test_codes:
        names |= _names(code)
    return PreparedTests(setup=setup_code, tests=test_codes, names=frozenset(names))


def helper_names(
    code: str | types.CodeType, builtin_names: frozenset[str], parse_limit: int
) -> frozenset[str]:
    """The names a helper's module code binds or uses that may be its functions.

    The helper's run reports which of them it defines as functions; those are
    bound in the program's run. A helper its run compiles (one with a
    ``finally``) is parsed here instead, which takes time in proportion to its
    length; one longer than ``parse_limit`` offers none.
    """
    if isinstance(code, str):
        if len(code) > parse_limit:
            return frozenset()
        try:
            tree = ast.parse(code)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return frozenset()  # (its run reports why)
        names = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
        names |= {
            node.name
            for node in tree.body
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        }
        names |= {
            (alias.asname or alias.name).split(".")[0]
            for node in tree.body
            if isinstance(node, ast.Import | ast.ImportFrom)
            for alias in node.names
        }
    else:
        names = set(code.co_names)
    return frozenset(names) - builtin_names - JUDGE_NAMES
