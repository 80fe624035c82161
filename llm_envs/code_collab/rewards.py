r"""The team reward of code collaboration (the MAGRPO paper): levels, tests, collaboration.

A helper agent writes a function ``aux``; a main agent writes the problem's
entry point, which may call ``aux``. Their texts become one program, the
program runs against the problem's tests in the sandbox, and the team gets one
reward of at most 4.0:

============  ======  ==========================================================
part          points  rule
============  ======  ==========================================================
level 1       +0.4    ``aux`` is defined and contains a ``return``
level 1       +0.6    the entry point is defined and contains a ``return``;
                      without an entry point the reward stops here
level 2       +0.5    the combined program compiles; otherwise it stops here
level 3       +1.0    x passed / total, every test of the problem
bonus         +0.5    main calls ``aux`` (only if a test passed and ``aux`` exists)
bonus         +1.0    ... and main is not a thin wrapper of ``aux``
bonus         -0.5    ... and main calls ``aux`` as a statement, discarding its result
============  ======  ==========================================================

How texts become the program (:func:`assemble`), with the cleaning and
extraction of :mod:`llm_envs.parsing.python_code` (re-exported here):

1. **Cleaning** (:func:`~llm_envs.parsing.python_code.clean_code`): a ``<think>``
   block is dropped; when the text has markdown fences only the fenced code is
   kept; when what is left does not parse, prose lines (unindented lines that
   are not Python, outside strings and brackets) are dropped.
2. **Extraction** (:func:`~llm_envs.parsing.python_code.extract_function`): from
   the helper only the top-level function ``aux``, from the main agent only the
   entry point (an ``aux`` or any other function it defines is dropped). Found
   with :mod:`ast` when the cleaned code parses, else from the text (the ``def``
   line and the lines indented under it), so a syntax error hides neither the
   definition nor its ``return``.
3. **Assembly**: ``from __future__`` imports, the imports and helper definitions
   the problem prompt itself gives (HumanEval/10's ``is_palindrome``), the
   agents' own top-level imports, ``aux``, then the entry point.

With ``aux_bonus="when_called"`` (opt-in; the seed reads the bonus from the
syntax tree alone, so a call that never runs, ``if False: aux(n)``, or whose
result main ignores, ``_ = aux(n)``, earns it) the bonus also asks whether
aux's *values* carried the tests: a program the seed would pay runs twice
more, split in two processes, once with aux's true values and once with every
value it returns varied, and the seed's bonus is scaled by ``(won - lost) /
passed`` (see :mod:`llm_envs.code_collab.counterfactual`: the rule, what it
guarantees, and what it cannot stop). The tests' score comes from the first
run, as always.

The bonus rules read the entry point's AST: a *call* is ``aux(...)`` anywhere in
it unless the function binds the name ``aux`` itself (a parameter, a nested
``def aux``, an assignment: then the call is not to the helper's function); a
*thin wrapper* is a body (docstring aside) that is only ``return aux(...)``, or
``v = aux(...)`` followed by ``return v``; a *discarded call* is an expression
statement whose value is an ``aux(...)`` call, whatever the spacing.

Everything here is pure except :func:`evaluate`, :func:`evaluate_many` and
:func:`team_reward`, which run the program in a :class:`~llm_envs.sandbox.Sandbox`
(the shared default pool unless one is given). Nothing here ever executes agent
code in this process: code is only parsed and compiled.

Example:
    >>> from llm_envs.tasks import CodeProblem
    >>> problem = CodeProblem("demo/0", "def double(x):\n", "double", ("assert double(2) == 4",))
    >>> helper = "def aux(x):\n    return 2 * x"
    >>> reward = team_reward(problem, helper, "def double(x):\n    return aux(x)")
    >>> reward.level1, reward.level2, reward.level3, reward.bonus, reward.total
    (1.0, 0.5, 1.0, 0.5, 3.0)
"""

from __future__ import annotations

import ast
import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final, Literal

from llm_envs.code_collab.counterfactual import (
    SPLIT_RUNS,
    AuxEvidence,
    split_helper_program,
    weigh_evidence,
)
from llm_envs.parsing.python_code import (
    ExtractedFunction,
    SyntaxErrorInfo,
    clean_code,
    compile_error,
    extract_function,
    find_function,
    top_level_imports,
    try_parse,
)
from llm_envs.sandbox import Sandbox, SandboxJob, TestReport, default_sandbox
from llm_envs.tasks.problems import CodeProblem

__all__ = [
    "AUX_BONUS_RULES",
    "AUX_NAME",
    "MAX_TEAM_REWARD",
    "AssembledProgram",
    "AuxBonus",
    "AuxEvidence",
    "AuxUsage",
    "CodeEvaluation",
    "CodeRewardBreakdown",
    "ExtractedFunction",
    "SyntaxErrorInfo",
    "analyze_aux_usage",
    "assemble",
    "clean_code",
    "evaluate",
    "evaluate_many",
    "extract_function",
    "prompt_preamble",
    "score",
    "team_reward",
]

AUX_NAME: Final = "aux"
"""The name of the helper agent's function."""

AuxBonus = Literal["as_written", "when_called"]
"""When the collaboration bonus counts: ``"as_written"`` (the seed: main's syntax tree
calls ``aux``) or ``"when_called"`` (and aux's values carried the tests)."""
AUX_BONUS_RULES: Final = ("as_written", "when_called")

MAX_TEAM_REWARD: Final = 4.0
"""The largest team reward: 0.4 + 0.6 + 0.5 + 1.0 + 0.5 + 1.0."""

# Points of each rule (the MAGRPO paper; the table in the module docstring).
AUX_DEFINED_POINTS: Final = 0.4
MAIN_DEFINED_POINTS: Final = 0.6
SYNTAX_POINTS: Final = 0.5
TESTS_POINTS: Final = 1.0
CALLS_AUX_POINTS: Final = 0.5
NOT_WRAPPER_POINTS: Final = 1.0
DISCARDED_CALL_PENALTY: Final = 0.5


# ----------------------------------------------------------------------------- records


@dataclass(frozen=True)
class AuxUsage:
    """How the entry point uses ``aux``, read from its AST.

    Attributes:
        calls_aux: it calls the helper's ``aux`` (a name it does not bind itself).
        thin_wrapper: its body only returns ``aux(...)``, or assigns it and returns that.
        discarded_call_lines: lines (in the entry point's source) of ``aux(...)``
            calls used as statements, their result thrown away.
        shadowed: it binds the name ``aux`` itself, so its calls are not to the helper's.
    """

    calls_aux: bool = False
    thin_wrapper: bool = False
    discarded_call_lines: tuple[int, ...] = ()
    shadowed: bool = False

    @property
    def discards_result(self) -> bool:
        """Whether some call to ``aux`` throws its result away."""
        return bool(self.discarded_call_lines)


@dataclass(frozen=True)
class AssembledProgram:
    """The program two agents' texts make, with what the reward needs to know about it.

    Attributes:
        problem: the problem it answers.
        aux: the helper's ``aux`` (not found when the helper wrote none).
        main: the main agent's entry point.
        source: the combined program run against the tests (``""`` without an entry point).
        syntax_error: where :attr:`source` stops compiling (None: it compiles).
        aux_usage: how the entry point uses ``aux`` (None when it does not parse).
        main_source: the program without ``aux`` (the preamble, both agents'
            imports, the entry point), and
        aux_preamble: what the helper's program has before ``aux`` (the
            preamble, the helper's imports): the two processes of
            ``aux_bonus="when_called"``'s split runs.
    """

    problem: CodeProblem
    aux: ExtractedFunction
    main: ExtractedFunction
    source: str
    syntax_error: SyntaxErrorInfo | None
    aux_usage: AuxUsage | None
    main_source: str = ""
    aux_preamble: str = ""

    @property
    def runnable(self) -> bool:
        """Whether the tests run: the entry point exists and the program compiles."""
        return self.main.found and self.syntax_error is None


@dataclass(frozen=True)
class CodeRewardBreakdown:
    """The team reward and its parts (the MAGRPO paper).

    Attributes:
        level1: definitions, 0 to 1.0.
        level2: syntax, 0 or 0.5.
        level3: tests, 1.0 x passed / total.
        bonus: collaboration bonus: 0 to 1.5 (the seed); -1.5 to 1.5 with
            ``aux_bonus="when_called"``, where it is the seed's bonus times
            :attr:`AuxEvidence.weight`.
        total: the sum, at most :data:`MAX_TEAM_REWARD`.
        passed: tests passed.
        total_tests: tests of the problem (all of them, whether they ran or not).
    """

    level1: float = 0.0
    level2: float = 0.0
    level3: float = 0.0
    bonus: float = 0.0
    total: float = 0.0
    passed: int = 0
    total_tests: int = 0

    @property
    def pass_rate(self) -> float:
        """The fraction of tests passed (0.0 for a problem without tests)."""
        return self.passed / self.total_tests if self.total_tests else 0.0

    def as_dict(self) -> dict[str, float | int]:
        """The seven fields as a dict (the environment puts them in infos)."""
        return {
            "level1": self.level1,
            "level2": self.level2,
            "level3": self.level3,
            "bonus": self.bonus,
            "total": self.total,
            "passed": self.passed,
            "total_tests": self.total_tests,
        }


@dataclass(frozen=True)
class CodeEvaluation:
    """One joint action, evaluated: the program, its test report and its reward.

    Attributes:
        program: the assembled program.
        report: the sandbox's report (None when the tests did not run).
        reward: the breakdown.
        evidence: with ``aux_bonus="when_called"``, what the split runs said
            about aux's values; None when they did not run (the other rule, or
            no bonus to pay: they run only when the seed's rule pays one).
    """

    program: AssembledProgram
    report: TestReport | None
    reward: CodeRewardBreakdown
    evidence: AuxEvidence | None = None


def prompt_preamble(problem: CodeProblem) -> tuple[list[str], list[str]]:
    """What the problem prompt itself contributes to the program: its imports and helpers.

    HumanEval prompts import modules (``from typing import List``) and some
    define functions the entry point relies on (HumanEval/10 ``is_palindrome``,
    HumanEval/32 ``poly``, HumanEval/38 ``encode_cyclic``). They are part of the
    problem, not of an agent's answer, so they are prepended to every program.

    Returns:
        ``(imports, definitions)``: import statements, and the source of every
        other top-level statement of the prompt except the entry point's stub
        and anything named ``aux``.
    """
    module = try_parse(problem.prompt)
    if module is None:
        return top_level_imports(problem.prompt), []
    lines = problem.prompt.split("\n")
    imports, definitions = [], []
    for node in module.body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            imports.append(ast.unparse(node))
            continue
        name = getattr(node, "name", None)
        if name in (problem.entry_point, AUX_NAME):
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # a module docstring or stray string
        first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", ()))])
        definitions.append("\n".join(lines[first - 1 : node.end_lineno]).rstrip())
    return imports, definitions


# ---------------------------------------------------------------------------- aux usage


def _is_aux_call(node: ast.AST | None) -> bool:
    return (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == AUX_NAME
    )


def _binds_aux(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    arguments = function.args
    every_arg = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
    every_arg += [a for a in (arguments.vararg, arguments.kwarg) if a is not None]
    if any(a.arg == AUX_NAME for a in every_arg):
        return True
    for node in ast.walk(function):
        if node is function:
            continue
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and (
            node.name == AUX_NAME
        ):
            return True
        if isinstance(node, ast.Name) and node.id == AUX_NAME and isinstance(node.ctx, ast.Store):
            return True
        if isinstance(node, ast.alias) and (node.asname or node.name) == AUX_NAME:
            return True
    return False


def _body_without_docstring(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.stmt]:
    body = list(function.body)
    if (
        body
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    ):
        body = body[1:]
    return body


def _is_thin_wrapper(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    body = _body_without_docstring(function)
    if len(body) == 1:
        return isinstance(body[0], ast.Return) and _is_aux_call(body[0].value)
    if len(body) == 2 and isinstance(body[1], ast.Return):
        first, returned = body[0], body[1].value
        if isinstance(first, ast.Assign) and len(first.targets) == 1:
            target, value = first.targets[0], first.value
        elif isinstance(first, ast.AnnAssign) and first.value is not None:
            target, value = first.target, first.value
        else:
            return False
        return (
            _is_aux_call(value)
            and isinstance(target, ast.Name)
            and isinstance(returned, ast.Name)
            and returned.id == target.id
        )
    return False


def analyze_aux_usage(main_source: str, entry_point: str) -> AuxUsage | None:
    r"""How the entry point in ``main_source`` uses ``aux`` (None when it does not parse).

    Example:
        >>> usage = analyze_aux_usage("def f(x):\n    aux (x)\n    return x", "f")
        >>> usage.calls_aux, usage.thin_wrapper, usage.discarded_call_lines
        (True, False, (2,))
    """
    function = find_function(main_source, entry_point)
    if function is None:
        return None
    shadowed = _binds_aux(function)
    calls = [node for node in ast.walk(function) if _is_aux_call(node)]
    if shadowed or not calls:
        return AuxUsage(shadowed=shadowed)
    discarded = sorted(
        node.lineno
        for node in ast.walk(function)
        if isinstance(node, ast.Expr)
        and (
            _is_aux_call(node.value)
            or (isinstance(node.value, ast.Await) and _is_aux_call(node.value.value))
        )
    )
    return AuxUsage(
        calls_aux=True,
        thin_wrapper=_is_thin_wrapper(function),
        discarded_call_lines=tuple(discarded),
    )


# ----------------------------------------------------------------------------- assembly


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def assemble(problem: CodeProblem, helper_code: str, main_code: str) -> AssembledProgram:
    """Clean both texts, extract ``aux`` and the entry point, and build the program.

    Args:
        problem: the problem (its prompt's imports and helpers are prepended).
        helper_code: the helper's raw answer (``""`` in the single-agent setting).
        main_code: the main agent's raw answer.
    """
    helper_clean = clean_code(helper_code)
    main_clean = clean_code(main_code)
    aux = (
        extract_function(helper_clean, AUX_NAME)
        if helper_clean
        else ExtractedFunction.not_found(AUX_NAME)
    )
    main = extract_function(main_clean, problem.entry_point)
    if not main.found:
        return AssembledProgram(problem, aux, main, "", None, None)

    prompt_imports, prompt_definitions = prompt_preamble(problem)
    # The agents' own imports are kept (an `import math` above a function is part of it);
    # the helper contributes only when it wrote aux.
    helper_imports = top_level_imports(helper_clean) if aux.found else []
    main_imports = top_level_imports(main_clean)

    def program(imports: list[str], functions: list[str]) -> str:
        imports = _unique([*prompt_imports, *imports])
        # A __future__ import must open the module; hoist them all.
        future = [line for line in imports if line.startswith("from __future__")]
        others = [line for line in imports if not line.startswith("from __future__")]
        parts = ["\n".join(future), "\n".join(others), *prompt_definitions, *functions]
        return "\n\n".join(part for part in parts if part) + "\n"

    source = program([*helper_imports, *main_imports], [aux.source, main.source])
    return AssembledProgram(
        problem=problem,
        aux=aux,
        main=main,
        source=source,
        syntax_error=compile_error(source),
        aux_usage=analyze_aux_usage(main.source, problem.entry_point),
        # main's split program has the helper's imports too: a main that relies on
        # them runs split as it runs whole.
        main_source=program([*helper_imports, *main_imports], [main.source]),
        aux_preamble=program(helper_imports, []) if aux.found else "",
    )


# ------------------------------------------------------------------------------ scoring


def score(
    program: AssembledProgram, report: TestReport | None, evidence: AuxEvidence | None = None
) -> CodeRewardBreakdown:
    """The team reward of an assembled program given its test report (pure).

    Args:
        program: from :func:`assemble`.
        report: the sandbox's report of ``program.source`` against every test of
            the problem; required exactly when ``program.runnable``.
        evidence: with ``aux_bonus="when_called"``, what the split runs said
            (:func:`~llm_envs.code_collab.counterfactual.weigh_evidence`): the
            seed's bonus is scaled by its weight. None: the seed's rule, the
            syntax tree alone.

    Raises:
        ValueError: a runnable program without a report, or a report whose
            number of tests is not the problem's.
    """
    total_tests = len(program.problem.tests)
    level1 = 0.0
    if program.aux.found and program.aux.has_return:
        level1 += AUX_DEFINED_POINTS
    if program.main.found and program.main.has_return:
        level1 += MAIN_DEFINED_POINTS
    if not program.main.found:
        return CodeRewardBreakdown(level1=level1, total=level1, total_tests=total_tests)
    if program.syntax_error is not None:
        return CodeRewardBreakdown(level1=level1, total=level1, total_tests=total_tests)
    level2 = SYNTAX_POINTS
    if report is None:
        raise ValueError(
            f"the program for {program.problem.task_id!r} is runnable: score() needs its test "
            "report (run it with evaluate() or the sandbox)"
        )
    if report.total != total_tests:
        raise ValueError(
            f"the report has {report.total} tests, the problem {program.problem.task_id!r} has "
            f"{total_tests}; run every test of the problem"
        )
    passed = report.passed
    level3 = TESTS_POINTS * passed / total_tests if total_tests else 0.0
    bonus = 0.0
    usage = program.aux_usage
    if passed > 0 and program.aux.found and usage is not None and usage.calls_aux:
        bonus += CALLS_AUX_POINTS
        if not usage.thin_wrapper:
            bonus += NOT_WRAPPER_POINTS
        if usage.discards_result:
            bonus -= DISCARDED_CALL_PENALTY
        if evidence is not None:
            bonus *= evidence.weight
    return CodeRewardBreakdown(
        level1=level1,
        level2=level2,
        level3=level3,
        bonus=bonus,
        total=math.fsum((level1, level2, level3, bonus)),
        passed=passed,
        total_tests=total_tests,
    )


def _job(program: AssembledProgram, timeout: float | None, delta: int | None = None) -> SandboxJob:
    problem = program.problem
    if delta is not None:  # split: aux in a process of its own, its values varied by delta
        return SandboxJob(
            program.main_source,
            problem.tests,
            problem.test_setup,
            problem.entry_point,
            timeout,
            helper=split_helper_program(program.aux_preamble, program.aux.source, delta),
        )
    return SandboxJob(
        program.source, problem.tests, problem.test_setup, problem.entry_point, timeout
    )


def _weigh(
    pool: Sandbox,
    programs: list[AssembledProgram],
    reports: list[TestReport | None],
    candidates: list[int],
    timeout: float | None,
) -> dict[int, AuxEvidence]:
    """Run the true and the varied split run of each candidate, all in one batch."""
    # Which run of a pair goes first is drawn at random, so that a program cannot
    # tell the two apart by the order they start in (the rule needs them alike).
    order = random.SystemRandom()
    pairs = [(i, delta) for i in candidates for delta in order.sample((0, 1), SPLIT_RUNS)]
    ran = pool.run_tests_many([_job(programs[i], timeout, delta) for i, delta in pairs])
    split: dict[tuple[int, int], TestReport] = dict(zip(pairs, ran, strict=True))
    evidence = {}
    for i in candidates:
        scored = reports[i]
        assert scored is not None  # candidates ran
        evidence[i] = weigh_evidence(scored, split[i, 0], split[i, 1])
    return evidence


def check_aux_bonus(aux_bonus: object) -> AuxBonus:
    """``aux_bonus``, checked: one of :data:`AUX_BONUS_RULES`."""
    if aux_bonus not in AUX_BONUS_RULES:
        raise ValueError(
            f"aux_bonus must be one of {AUX_BONUS_RULES}, got {aux_bonus!r}: leave it out (or "
            "'as_written') for the seed's rule (main's code calls aux), or pass 'when_called' "
            "to pay the bonus only as far as aux's values carried the tests"
        )
    return aux_bonus


def evaluate_many(
    items: Sequence[tuple[CodeProblem, str, str]],
    sandbox: Sandbox | None = None,
    *,
    timeout: float | None = None,
    aux_bonus: AuxBonus = "as_written",
) -> list[CodeEvaluation]:
    """Evaluate many ``(problem, helper_code, main_code)`` joint actions in one sandbox batch.

    Only runnable programs go to the sandbox, all at once
    (:meth:`~llm_envs.sandbox.Sandbox.run_tests_many` spreads them over its
    workers). A test that times out ends its program's run: later tests count
    as not passed.

    Args:
        items: the joint actions.
        sandbox: the pool to use (default: :func:`~llm_envs.sandbox.default_sandbox`).
        timeout: each run's wall-clock limit in seconds (default: the pool's).
        aux_bonus: ``"as_written"`` (the seed) or ``"when_called"``: programs the
            seed's rule would pay a bonus run twice more, split, with aux's true
            and varied values (one more batch for all of them), and the bonus is
            scaled by what that shows (:mod:`~llm_envs.code_collab.counterfactual`).
    """
    check_aux_bonus(aux_bonus)
    programs = [assemble(problem, helper, main) for problem, helper, main in items]
    runnable = [i for i, program in enumerate(programs) if program.runnable]
    reports: list[TestReport | None] = [None] * len(programs)
    if runnable:
        pool = sandbox if sandbox is not None else default_sandbox()
        ran = pool.run_tests_many([_job(programs[i], timeout) for i in runnable])
        for i, report in zip(runnable, ran, strict=True):
            reports[i] = report
    evidence: dict[int, AuxEvidence] = {}
    if aux_bonus == "when_called":
        # Only programs the seed's rule pays a bonus need the split runs.
        candidates = [i for i in runnable if score(programs[i], reports[i]).bonus != 0.0]
        if candidates:
            evidence = _weigh(pool, programs, reports, candidates, timeout)
    return [
        CodeEvaluation(program, report, score(program, report, evidence.get(i)), evidence.get(i))
        for i, (program, report) in enumerate(zip(programs, reports, strict=True))
    ]


def evaluate(
    problem: CodeProblem,
    helper_code: str,
    main_code: str,
    sandbox: Sandbox | None = None,
    *,
    timeout: float | None = None,
) -> CodeEvaluation:
    """Evaluate one joint action: assemble, run the tests if it can, score."""
    return evaluate_many([(problem, helper_code, main_code)], sandbox, timeout=timeout)[0]


def team_reward(
    problem: CodeProblem,
    helper_code: str,
    main_code: str,
    sandbox: Sandbox | None = None,
) -> CodeRewardBreakdown:
    """The team reward of the MAGRPO paper for a helper's and a main agent's raw answers.

    With ``helper_code=""`` it scores single-agent code the same way (no
    ``aux``: at most 0.6 + 0.5 + 1.0 = 2.1).

    Args:
        problem: the problem; every one of its tests runs.
        helper_code: the helper's answer, expected to define ``aux``.
        main_code: the main agent's answer, expected to define the entry point.
        sandbox: the pool that runs the tests (default: the shared one).

    Returns:
        The breakdown: ``level1``, ``level2``, ``level3``, ``bonus``, ``total``,
        ``passed``, ``total_tests``.
    """
    return evaluate(problem, helper_code, main_code, sandbox).reward
