"""Checks of constructor arguments, shared by every config, task and wrapper of llm-envs.

A wrong argument is an exception at construction, never a surprise at the
first step (see ``docs/contributing.md``). These checks make the errors read
the same everywhere: they name the argument, show the value (and its type when
the type is wrong) and say what to pass instead, e.g.
``num_agents must be an int >= 2, got True (a bool)``.

The rules: an int argument takes an ``int``, never a ``bool``, a ``float`` (even
``2.0``) or a numeric string; a number argument takes an ``int`` or a ``float``
that is finite (never NaN nor infinity) and within its range. A wrong type is a
``TypeError``, a value out of range a ``ValueError``. A sequence argument never
takes a ``str``: one string is one item, not a sequence of characters.

This module never converts a wrong value into a right one (no ``int("3")``).
"""

from __future__ import annotations

import math

__all__ = [
    "MAX_TIMEOUT",
    "check_bool",
    "check_int",
    "check_number",
    "check_timeout",
    "describe",
    "reject_single_str",
]

MAX_TIMEOUT = 3600.0
"""The longest test run (seconds) the sandbox allows; a timeout above it is refused early."""


def describe(value: object) -> str:
    """``repr(value)`` cut to 80 characters, for error messages.

    Example:
        >>> describe("x" * 100)[-5:]
        'xx...'
    """
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _got(value: object) -> str:
    # The type is named where the repr hides it: True (a bool), '3' (a str), 2.0 (a float).
    if value is None:
        return "got None"
    article = "an" if type(value).__name__[:1] in "aeiou" else "a"
    return f"got {describe(value)} ({article} {type(value).__name__})"


def _number_text(value: float) -> str:
    # Whole numbers in full (1048576, not 1.04858e+06); others as :g does.
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def _range(minimum: float | None, maximum: float | None, *, open_minimum: bool) -> str:
    low = None if minimum is None else _number_text(minimum)
    high = None if maximum is None else _number_text(maximum)
    if low is not None and high is not None:
        return f" in {'(' if open_minimum else '['}{low}, {high}]"
    if low is not None:
        return f" {'>' if open_minimum else '>='} {low}"
    if high is not None:
        return f" <= {high}"
    return ""


def check_int(
    name: str,
    value: object,
    *,
    minimum: int | None = None,
    maximum: int | None = None,
    meaning: str = "",
) -> int:
    """``value`` if it is an int in ``[minimum, maximum]``; else a clear error.

    Args:
        name: the argument's name, as the caller wrote it.
        value: the value given.
        minimum: the smallest allowed value, or None.
        maximum: the largest allowed value, or None.
        meaning: what the values mean, appended to the requirement
            (e.g. ``" (-1: all, 0: none, K: the last K)"``).

    Raises:
        TypeError: ``value`` is not an int (a bool, a float, a str...).
        ValueError: ``value`` is out of range.

    Example:
        >>> check_int("num_agents", 3, minimum=2)
        3
        >>> check_int("num_agents", True, minimum=2)
        Traceback (most recent call last):
        TypeError: num_agents must be an int >= 2, got True (a bool)
    """
    requirement = f"{name} must be an int{_range(minimum, maximum, open_minimum=False)}{meaning}"
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{requirement}, {_got(value)}")
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise ValueError(f"{requirement}, got {value!r}")
    return value


def check_number(
    name: str,
    value: object,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    open_minimum: bool = False,
    unit: str = "",
) -> float:
    """``value`` as a float if it is a finite number in range; else a clear error.

    Args:
        name: the argument's name.
        value: the value given: an int or a float (never a bool, a str, NaN or infinity).
        minimum: the smallest allowed value (excluded with ``open_minimum``), or None.
        maximum: the largest allowed value, or None.
        open_minimum: exclude ``minimum`` itself (``timeout > 0``).
        unit: what the number counts, e.g. ``" seconds"``.

    Raises:
        TypeError: ``value`` is not a number.
        ValueError: ``value`` is NaN, infinite or out of range.

    Example:
        >>> check_number("reward_shift", -4)
        -4.0
        >>> check_number("reward_shift", float("nan"))
        Traceback (most recent call last):
        ValueError: reward_shift must be a finite number, got nan
    """
    span = _range(minimum, maximum, open_minimum=open_minimum)
    requirement = f"{name} must be a finite number{unit}{span}"
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{requirement}, {_got(value)}")
    number = float(value)
    too_low = minimum is not None and (number <= minimum if open_minimum else number < minimum)
    too_high = maximum is not None and number > maximum
    if not math.isfinite(number) or too_low or too_high:
        raise ValueError(f"{requirement}, got {value!r}")
    return number


def check_timeout(name: str, value: object) -> float:
    """``value`` as seconds of one test run: a finite number in ``(0, MAX_TIMEOUT]``.

    The sandbox refuses a longer run when it is asked to start one; checking
    here makes the mistake an error at construction rather than at the first step.

    Example:
        >>> check_timeout("timeout", 1e9)
        Traceback (most recent call last):
        ValueError: timeout must be a finite number of seconds in (0, 3600], got 1000000000.0
    """
    return check_number(
        name, value, minimum=0, maximum=MAX_TIMEOUT, open_minimum=True, unit=" of seconds"
    )


def check_bool(name: str, value: object) -> bool:
    """``value`` if it is a bool; ``"no"`` and ``0`` are refused (they would read as yes or no).

    Example:
        >>> check_bool("critic_sees_reference", "no")
        Traceback (most recent call last):
        TypeError: critic_sees_reference must be True or False, got 'no' (a str)
    """
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, {_got(value)}")
    return value


def reject_single_str(name: str, value: object, *, items: str, example: str) -> None:
    """Refuse one ``str`` where a sequence of ``items`` is expected.

    Iterating a string gives its characters, so a forgotten list would silently
    turn ``"What is 2 + 2?"`` into fourteen one-character items.

    Args:
        name: the argument's name.
        value: the value given.
        items: what the sequence holds, e.g. ``"MathProblem or CodeProblem records"``.
        example: the fix, e.g. ``"problems=[MathProblem(...)]"``.

    Raises:
        TypeError: ``value`` is a ``str`` or ``bytes``.

    Example:
        >>> reject_single_str("stop", "</a>", items="stop strings", example="stop=['</a>']")
        Traceback (most recent call last):
        TypeError: stop must be a sequence of stop strings, got one str '</a>'; pass stop=['</a>']
    """
    if isinstance(value, str | bytes):
        raise TypeError(
            f"{name} must be a sequence of {items}, got one {type(value).__name__} "
            f"{describe(value)}; pass {example}"
        )
