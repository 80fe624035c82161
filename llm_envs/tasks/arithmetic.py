"""Procedural arithmetic problems: seeded, exact, instant.

:class:`ArithmeticTask` is a sequence of :class:`~llm_envs.tasks.problems.MathProblem`
records such as ``"What is 17 + 4 * (9 - 3)?"`` with the exact answer ``"41"``. It is
the task source for fast tests and CPU demos of the expert-iteration environment.

* Problem ``i`` is a pure function of ``(seed, i)`` and the configuration: the same
  seed gives the same problems on every machine and Python version (the generator
  is a SplitMix64 stream of its own, not :mod:`random`, whose methods may change),
  problem ``i`` does not depend on ``num_problems``, and indexing is O(1), so a task
  of a million problems costs nothing until it is read.
* An expression has ``num_operands`` operands of 1 to ``max_digits`` digits (never
  0, so no division by a literal zero), joined by operations drawn from
  ``operations`` and bracketed at random; parentheses are printed only where the
  usual precedence needs them.
* Answers are exact: integers, or reduced fractions (``"-7/2"``) when ``"/"`` is
  among the operations; a problem whose divisor evaluates to 0 is redrawn.
  Check responses with :meth:`MathProblem.is_correct
  <llm_envs.tasks.problems.MathProblem.is_correct>` (or
  :func:`llm_envs.tasks.math_answers.check_answer`).
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Literal, get_args, overload

from llm_envs.arguments import check_int, reject_single_str
from llm_envs.tasks.problems import MathProblem

__all__ = ["ArithmeticTask", "Operation", "generate_arithmetic"]

Operation = Literal["+", "-", "*", "/"]
"""A binary operation of the generated expressions."""

_MASK = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15
_PRECEDENCE = {"+": 1, "-": 1, "*": 2, "/": 2}
_DIVISION_NOTE = " Give the exact answer as an integer or a fraction in lowest terms."


def _mix(z: int) -> int:
    """SplitMix64's output function (Steele, Lea and Flood, 2014)."""
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return z ^ (z >> 31)


@dataclass(frozen=True)
class ArithmeticTask(Sequence[MathProblem]):
    """A deterministic, indexable sequence of arithmetic problems.

    Attributes:
        num_problems: how many problems the sequence holds.
        seed: the seed; problem ``i`` depends only on the seed, ``i`` and the settings.
        num_operands: operands per expression (2 to 16).
        max_digits: digits per operand, at most (1 to 18); operands are >= 1.
        operations: the operations to draw from (any of ``+ - * /``).

    Example:
        >>> task = ArithmeticTask(num_problems=3, seed=7)
        >>> problem = task[0]
        >>> problem.task_id
        'Arithmetic/7/0'
        >>> problem.is_correct(f"The answer is {problem.answer}.")
        True
        >>> task[0] == ArithmeticTask(num_problems=1000, seed=7)[0]
        True
    """

    num_problems: int = 1000
    seed: int = 0
    num_operands: int = 2
    max_digits: int = 2
    operations: tuple[Operation, ...] = ("+", "-", "*")

    def __post_init__(self) -> None:
        check_int("num_problems", self.num_problems, minimum=0)
        check_int("seed", self.seed)
        check_int("num_operands", self.num_operands, minimum=2, maximum=16)
        check_int("max_digits", self.max_digits, minimum=1, maximum=18)
        reject_single_str(
            "operations", self.operations, items="operations", example="operations=('+', '*')"
        )
        operations = tuple(self.operations)
        allowed = get_args(Operation)
        if not operations or any(op not in allowed for op in operations):
            raise ValueError(
                f"operations must be a non-empty selection of {allowed}, got {self.operations!r}"
            )
        object.__setattr__(self, "operations", operations)

    def __len__(self) -> int:
        return self.num_problems

    @overload
    def __getitem__(self, index: int) -> MathProblem: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[MathProblem]: ...

    def __getitem__(self, index: int | slice) -> MathProblem | Sequence[MathProblem]:
        if isinstance(index, slice):
            return tuple(self.problem(i) for i in range(*index.indices(self.num_problems)))
        index = operator.index(index)  # a float index is a TypeError, as for a list
        if not -self.num_problems <= index < self.num_problems:
            raise IndexError(
                f"index {index} out of range for {self.num_problems} arithmetic problems"
            )
        return self.problem(index % self.num_problems)

    def __iter__(self) -> Iterator[MathProblem]:
        return (self.problem(i) for i in range(self.num_problems))

    def problem(self, index: int) -> MathProblem:
        """Problem number ``index``, for any ``index >= 0`` (even beyond ``num_problems``)."""
        if index < 0:
            raise IndexError(f"problem index must be >= 0, got {index}")
        # One 64-bit stream per (settings, seed, index); hashing the settings in keeps
        # problem i of two differently configured tasks unrelated.
        state = _mix((self._stream_key ^ index) & _MASK)
        ops = self.operations
        num_ops = len(ops)
        high = 10**self.max_digits - 1
        operands = self.num_operands
        while True:
            # Draw leaves and operations, then bracket by merging random neighbours.
            # Values are exact rationals as (numerator, denominator) pairs of ints:
            # several times faster than Fraction, reduced once at the end.
            texts: list[str] = []
            values: list[tuple[int, int]] = []
            precedences: list[int] = []
            for _ in range(operands):
                state = (state + _GOLDEN) & _MASK
                leaf = 1 + _mix(state) % high
                texts.append(str(leaf))
                values.append((leaf, 1))
                precedences.append(3)
            chosen: list[str] = []
            for _ in range(operands - 1):
                if num_ops == 1:  # no draw needed (and none spent)
                    chosen.append(ops[0])
                    continue
                state = (state + _GOLDEN) & _MASK
                chosen.append(ops[_mix(state) % num_ops])
            while chosen:
                k = 0
                if len(chosen) > 1:
                    state = (state + _GOLDEN) & _MASK
                    k = _mix(state) % len(chosen)
                op = chosen.pop(k)
                (a, b), (c, d) = values[k], values[k + 1]
                if op == "+":
                    value = (a * d + c * b, b * d) if b != 1 or d != 1 else (a + c, 1)
                elif op == "-":
                    value = (a * d - c * b, b * d) if b != 1 or d != 1 else (a - c, 1)
                elif op == "*":
                    value = (a * c, b * d)
                elif c == 0:
                    break  # division by an expression worth 0: draw again
                else:
                    value = (a * d, b * c)
                texts[k : k + 2] = [
                    _join(texts[k], precedences[k], op, texts[k + 1], precedences[k + 1])
                ]
                values[k : k + 2] = [value]
                precedences[k : k + 2] = [_PRECEDENCE[op]]
            else:
                break
        numerator, denominator = values[0]
        return MathProblem(
            task_id=f"Arithmetic/{self.seed}/{index}",
            question=f"What is {texts[0]}?{self._note}",
            answer=_format_ratio(numerator, denominator),
        )

    @functools.cached_property
    def _stream_key(self) -> int:
        settings = f"{self.num_operands}|{self.max_digits}|{''.join(self.operations)}"
        key = _mix(self.seed & _MASK) ^ _mix((self.seed >> 64) & _MASK)
        for char in settings:
            key = _mix(key ^ ord(char))
        return key

    @functools.cached_property
    def _note(self) -> str:
        return _DIVISION_NOTE if "/" in self.operations else ""


def generate_arithmetic(
    num_problems: int,
    *,
    seed: int = 0,
    num_operands: int = 2,
    max_digits: int = 2,
    operations: Sequence[Operation] = ("+", "-", "*"),
) -> tuple[MathProblem, ...]:
    """Generate ``num_problems`` arithmetic problems at once (see :class:`ArithmeticTask`).

    Example:
        >>> [p.question for p in generate_arithmetic(2, seed=1, max_digits=1)]  # doctest: +SKIP
        ['What is 4 * 8?', 'What is 9 - 2?']
    """
    reject_single_str("operations", operations, items="operations", example="operations=('+', '*')")
    return tuple(
        ArithmeticTask(
            num_problems=num_problems,
            seed=seed,
            num_operands=num_operands,
            max_digits=max_digits,
            operations=tuple(operations),
        )
    )


def _join(left: str, left_precedence: int, op: str, right: str, right_precedence: int) -> str:
    precedence = _PRECEDENCE[op]
    if left_precedence < precedence:
        left = f"({left})"
    # a - (b - c) and a / (b * c) need their parentheses; a + (b - c) and a * (b / c)
    # do not, with exact arithmetic.
    if right_precedence < precedence or (right_precedence == precedence and op in "-/"):
        right = f"({right})"
    return f"{left} {op} {right}"


def _format_ratio(numerator: int, denominator: int) -> str:
    if denominator == 1:
        return str(numerator)
    divisor = math.gcd(numerator, denominator)
    if denominator < 0:
        divisor = -divisor
    numerator, denominator = numerator // divisor, denominator // divisor
    return str(numerator) if denominator == 1 else f"{numerator}/{denominator}"
