r"""Did the helper carry weight? The two split runs of ``aux_bonus="when_called"``.

The seed pays the collaboration bonus when main's *source* calls ``aux``, so a
main that solves the problem alone and adds ``_ = aux(n)`` earns the full 4.0.
With ``aux_bonus="when_called"`` a program the seed's rule would pay runs twice
more, split in two processes (``aux`` in one, the entry point in the other,
calling it through the sandbox's judge):

* the **true** run: ``aux`` answers with what it computed;
* the **varied** run: the same, except that every value ``aux`` returns is
  changed by :func:`vary_value` (the same type, a different value: ``7 -> -8``,
  ``True -> False``, ``"ab" -> "bcb"``, ``[1, 2] -> [-2, -3, -2]``; and
  ``None -> 0``).

Over the tests the team passed (the scored run, one process, as the seed says),
each test the true run passes and the varied run does not counts +1 ("won" by
aux's values), each test the varied run passes and the true run does not counts
-1 ("lost"); the bonus is the seed's bonus times ``(won - lost) / passed``.

**The guarantee.** The two split runs differ only in the values ``aux``
returns: the same programs, the same proxies, the same work in the helper's
process (``delta=0`` and ``delta=1`` take the same path), the same batch, and
which of the pair is submitted first is drawn at random. So a main whose
behaviour does not depend on those values -- whatever else it looks at:
whether or when ``aux`` is called, its exceptions, its name or type, whether it
runs split, the clock, chance -- sees the two runs alike, and since the rule is
antisymmetric (swapping the runs negates it) its expected bonus is exactly 0;
a deterministic such main gets exactly 0. Edits this defeats include
``_ = aux(n)``, a bare ``aux(n)``, ``try: aux(n) except: pass``, catching any
exception class, checking ``aux.__name__``, a call on a path the tests do not
take, a local fallback used only when ``aux`` raises, and a main that fails at
random when it runs split.

**What it cannot stop.** (1) A main that *checks* aux's values against its own
(``assert aux(n) == n`` with a helper that returns ``n``; ``assert aux(n) ==
answer``): its tests do depend on those values, though ``aux`` may do nothing
main does not do itself. No rule that runs main against a changed ``aux`` can
tell this from collaboration; the helper must at least be right on every test.
(2) A helper that reads ``delta`` out of its own process (its caller's frame)
and behaves differently in the varied run; closing that needs the judge to
change the values on the channel, outside both programs.
(3) Honest teams get less, or nothing, where their tests do not change with
aux's values: a helper that works only by changing its arguments in place (its return
value is what is varied), a main that uses only something the variation keeps
(the number of keys of a dict aux returns), and tests the split runs fail
either way (a helper that calls main's function, absent from its process; a
value that cannot cross between processes, such as a generator) count for
nothing.

This module never runs agent code in this process: it builds the helper
program's text for the sandbox and reads the sandbox's reports.
:func:`vary_value` also runs *inside* the helper's run (its source is sent with
the helper program), so it uses nothing but builtins and never raises.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Final

from llm_envs.sandbox import TestReport

__all__ = [
    "SPLIT_RUNS",
    "VARY_DEPTH",
    "VARY_ITEMS",
    "AuxEvidence",
    "fits_channel",
    "split_helper_program",
    "vary_value",
    "weigh_evidence",
]

SPLIT_RUNS: Final = 2
"""Sandbox jobs per program whose bonus is checked: the true run and the varied run."""

VARY_DEPTH: Final = 100
"""Containers nested deeper than this are returned as they are (none deeper crosses to main)."""

VARY_ITEMS: Final = 1_000_000
"""Items :func:`vary_value` changes in one value; the rest are returned as they are."""


def vary_value(value: object, delta: int, items: int = 1_000_000, depth: int = 100) -> object:
    r"""``value`` with every scalar in it changed when ``delta`` is 1; an equal copy when 0.

    Both deltas do the same work on the same path, so the true and the varied
    run of a helper take the same time. The variation keeps each type and
    breaks what main could use: ints become ``~x`` (sign, parity and magnitude
    change; an index still indexes), bools flip, floats become ``-x - 1``,
    strings shift every code point by one, and every sequence gets one more
    item (so its length changes too); ``None`` becomes ``0``, the one change
    of type. Types it does not know (a generator, an object) are returned as
    they are. It never raises: a
    value it cannot walk (a cycle, a recursion limit the helper lowered) comes
    back unchanged, and only the first ``items`` items (:data:`VARY_ITEMS`),
    at most ``depth`` deep (:data:`VARY_DEPTH`), are walked.

    This function's source runs inside the helper's sandboxed run: builtins only.

    Example:
        >>> vary_value([7, True, "ab", (1.5,)], 1)
        [-8, False, 'bcb', (-2.5, -2.5), -8]
        >>> vary_value({"k": [0]}, 0)
        {'k': [0]}
    """
    budget = [items]
    modules = __import__("sys").modules
    special = {}  # the standard containers that cross to main, by the name of their type
    for module, names in (
        ("collections", ("Counter", "OrderedDict", "defaultdict", "deque")),
        ("decimal", ("Decimal",)),
        ("fractions", ("Fraction",)),
    ):
        for name in names:
            kind = getattr(modules.get(module), name, None)
            if isinstance(kind, type):
                special[kind] = name

    class Shift(dict):  # str.translate's table, filled as needed
        def __missing__(self, code):
            shifted = (code + delta) % 0x110000
            self[code] = shifted
            return shifted

    letters = Shift()
    byte_table = bytes((byte + delta) % 256 for byte in range(256))

    def number(x):
        if type(x) is float:
            changed = -x - 1.0 if delta else x
            return x + 1.0 if delta and changed == x else changed  # -0.5 is -x - 1's fixed point
        return x + delta  # complex, Decimal, Fraction

    def walk(x, level):
        budget[0] -= 1
        kind = type(x)
        if budget[0] < 0 or level > depth:
            return x
        if x is None:  # HumanEval's "None when there is no answer"
            return 0 if delta else None
        if kind is bool:
            return x ^ (delta == 1)
        if kind is int:
            return x ^ -delta  # ~x when delta is 1
        if kind is float or kind is complex:
            return number(x)
        if kind is str:
            text = x.translate(letters)
            return text + text[:delta] if text else "a" * delta
        if kind is bytes:
            data = x.translate(byte_table)
            return data + data[:delta] if data else b"a" * delta
        if kind is list or kind is tuple:
            walked = [walk(item, level + 1) for item in x]
            walked = walked + walked[:delta] if walked else [0] * delta
            return walked if kind is list else tuple(walked)
        if kind is dict:
            pairs = {walk(k, level + 1): walk(v, level + 1) for k, v in x.items()}
            return pairs if pairs or not delta else {0: 0}
        if kind is set or kind is frozenset:
            members = {walk(item, level + 1) for item in x} or set(range(delta))
            return members if kind is set else frozenset(members)
        if kind is range:
            return range(x.start + delta, x.stop + delta + x.step * delta, x.step)
        name = special.get(kind)
        if name in ("Decimal", "Fraction"):
            return number(x)
        if name == "deque":
            walked = [walk(item, level + 1) for item in x]
            return kind(walked + walked[:delta] if walked else [0] * delta, x.maxlen)
        if name is not None:  # Counter, OrderedDict, defaultdict
            pairs = {walk(k, level + 1): walk(v, level + 1) for k, v in x.items()}
            pairs = pairs if pairs or not delta else {0: 0}
            return kind(x.default_factory, pairs) if name == "defaultdict" else kind(pairs)
        return x

    try:
        return walk(value, 0)
    except Exception:
        return value  # the same in both runs: a value it cannot walk stays as it is


def fits_channel(value: object) -> bool:
    """Whether ``value`` surely crosses the sandbox's channel, with room to spare.

    A sufficient condition, well inside the judge's limits (``docs/sandbox.md``:
    100 levels, 1,000,000 items, ints of 300,000 bits, a range of 1,000,000
    items, a Decimal exponent of 80,000, 16 MiB per message, 100 distinct items
    of one hash): at most 90 levels, 500,000 items, ints and a Fraction's terms
    of 250,000 bits, a Decimal exponent of 50,000, about 8 MiB in all, and at
    most 50 distinct hashable items per hash in a value of more than 1,000.
    The split runs vary a value only when it and its variation both fit
    (:func:`split_helper_program`): the variation grows sizes (``~x`` of
    ``2**k - 1`` has one more bit, a range one more item), and a value just
    under a limit would fail to cross in the varied run alone. Never raises
    (False instead); runs inside the helper's run too: builtins only.

    Example:
        >>> fits_channel([1, "a", {2: (3.0,)}]), fits_channel(range(1000000))
        (True, False)
    """
    budget = [500_000, 8 << 20]  # items, bytes (a generous estimate of the encoding)
    hashable = []
    modules = __import__("sys").modules
    decimal = getattr(modules.get("decimal"), "Decimal", None)
    fraction = getattr(modules.get("fractions"), "Fraction", None)

    def visit(x, level):
        budget[0] -= 1
        kind = type(x)
        if budget[0] < 0 or level > 90:
            return False
        if kind is int or kind is bool:
            budget[1] -= 16 + x.bit_length() // 8
            hashable.append(x)
            return x.bit_length() <= 250_000 and budget[1] >= 0
        if x is None or kind is float or kind is complex:
            budget[1] -= 32
            hashable.append(x)
            return budget[1] >= 0
        if kind is str or kind is bytes or kind is bytearray:
            budget[1] -= 16 + 4 * len(x)
            if kind is not bytearray:
                hashable.append(x)
            return budget[1] >= 0
        if kind is range:
            budget[1] -= 64
            return len(x) <= 500_000 and all(
                visit(end, level + 1) for end in (x.start, x.stop, x.step)
            )
        if decimal is not None and kind is decimal:
            _, digits, exponent = x.as_tuple()
            budget[1] -= 32 + len(digits)
            hashable.append(x)
            return (type(exponent) is not int or abs(exponent) <= 50_000) and budget[1] >= 0
        if fraction is not None and kind is fraction:
            hashable.append(x)
            return visit(x.numerator, level + 1) and visit(x.denominator, level + 1)
        if isinstance(x, dict):
            budget[1] -= 16
            return all(visit(k, level + 1) and visit(v, level + 1) for k, v in x.items())
        if isinstance(x, (list, tuple, set, frozenset)) or type(x).__name__ == "deque":
            budget[1] -= 16
            if kind is tuple or kind is frozenset:
                hashable.append(x)
            return all(visit(item, level + 1) for item in x)
        return True  # a value of another type crosses in neither run or in both

    try:
        if not visit(value, 0):
            return False
        if len(hashable) > 1000:
            classes: dict[int, set[Any]] = {}
            for item in hashable:
                try:
                    members = classes.setdefault(hash(item), set())
                except TypeError:
                    continue
                if len(members) <= 50:
                    members.add(item)
                if len(members) > 50:
                    return False
        return True
    except Exception:
        return False


_VARY_SOURCE: Final = inspect.getsource(vary_value) + "\n\n" + inspect.getsource(fits_channel)


def split_helper_program(preamble: str, aux_source: str, delta: int) -> str:
    """The helper's program of a split run: ``aux`` answers through :func:`vary_value`.

    The helper's own ``aux`` is defined in a private copy of the module's
    names, so its recursive calls reach itself, unvaried; the module's ``aux``,
    the only one the judge lets main call, returns what it returns varied by
    ``delta``. The real function and the variation are not module names of the
    helper's run (main cannot call around them): only ``delta`` differs
    between the true and the varied program.

    Both runs compute both versions of each value (``delta`` 0 and 1) and
    check that both surely cross (:func:`fits_channel`); when one might not
    (a range of 1,000,000 items grows to 1,000,001), both runs return the
    value as it is, so the channel's limits never fail the varied run alone.

    Args:
        preamble: the helper program's imports and the prompt's definitions.
        aux_source: the helper's ``aux`` (its ``def``, decorators included).
        delta: 0 for the true run, 1 for the varied run.

    Raises:
        ValueError: ``delta`` is neither 0 nor 1.
    """
    if type(delta) is not int or delta not in (0, 1):
        raise ValueError(f"delta must be 0 (the true run) or 1 (the varied run), got {delta!r}")
    wrapper = (
        "def _llm_envs_split_aux(source, delta, names, vary, fits):\n"
        "    private = dict(names)\n"
        "    exec(compile(source, '<aux>', 'exec'), private)\n"
        "    real = private['aux']\n"
        "\n"
        "    def aux(*args, **kwargs):\n"
        "        value = real(*args, **kwargs)\n"
        "        kept, changed = vary(value, 0), vary(value, 1)\n"
        "        if not (fits(kept) and fits(changed)):\n"
        "            return kept\n"
        "        return changed if delta else kept\n"
        "\n"
        "    return aux\n"
        "\n"
        f"aux = _llm_envs_split_aux({aux_source!r}, {delta}, globals(), vary_value, fits_channel)\n"
        "del _llm_envs_split_aux, vary_value, fits_channel\n"
    )
    return "\n\n".join(part for part in (preamble.rstrip(), _VARY_SOURCE, wrapper) if part)


@dataclass(frozen=True)
class AuxEvidence:
    """What the true and the varied split runs say about aux's values.

    Attributes:
        passed: tests the scored run passed (those the evidence is about).
        won: of them, tests the true run passes and the varied run does not.
        lost: of them, tests the varied run passes and the true run does not.
        helper_calls: calls of ``aux`` the judge counted in the true run.
    """

    passed: int
    won: int
    lost: int
    helper_calls: int = 0

    @property
    def weight(self) -> float:
        """``(won - lost) / passed``, in [-1, 1]: the share of the seed's bonus paid."""
        return (self.won - self.lost) / self.passed if self.passed else 0.0


def weigh_evidence(scored: TestReport, true: TestReport, varied: TestReport) -> AuxEvidence:
    """Compare the true and the varied run on the tests the scored run passed (pure).

    Antisymmetric: swapping ``true`` and ``varied`` negates :attr:`AuxEvidence.weight`.
    A test a run did not reach (its report is shorter, or the test did not
    run) counts as not passed by that run.

    Example:
        >>> from llm_envs.sandbox import ProgramStatus, TestOutcome, TestStatus
        >>> def report(*passes):
        ...     return TestReport(ProgramStatus.OK, tuple(
        ...         TestOutcome(TestStatus.PASSED if p else TestStatus.FAILED) for p in passes))
        >>> weigh_evidence(report(1, 1, 1, 0), report(1, 1, 0, 1), report(0, 1, 1, 1)).weight
        0.0
        >>> weigh_evidence(report(1, 1, 1, 0), report(1, 1, 1, 1), report(0, 0, 1, 0))
        AuxEvidence(passed=3, won=2, lost=0, helper_calls=0)
    """

    def passes(report: TestReport, index: int) -> bool:
        return index < len(report.outcomes) and report.outcomes[index].passed

    considered = [i for i, outcome in enumerate(scored.outcomes) if outcome.passed]
    won = sum(passes(true, i) and not passes(varied, i) for i in considered)
    lost = sum(passes(varied, i) and not passes(true, i) for i in considered)
    return AuxEvidence(len(considered), won, lost, true.helper_calls)
