"""Count the work a parser does on a text, deterministically: regex steps and Python lines.

Time is a poor witness of complexity (a shared machine, a warm cache), and
CPython's regex engine counts nothing. :class:`WorkMeter` counts instead:

* **Regex steps.** Every compiled pattern a module holds (and every pattern it
  builds through ``re`` or a pattern factory) is replaced, for the duration of
  the measurement, by a proxy that returns the real engine's answer and
  replays the same call on a small backtracking matcher (:class:`Steps`) that
  explores the pattern's parse tree (``re._parser``, the engine's own parser)
  in the engine's order: a search tries every start, a greedy repeat gives
  back one at a time, a possessive one never does. Each character test,
  give-back, branch and start is one step. The replay's match must equal the
  engine's (checked on every call), so the count describes what the engine
  really walked through; it is an upper bound of the engine's work (the
  engine skips starts with a literal prefix scan, the replay never does).
* **Python lines** executed in ``llm_envs`` (``sys.settrace``), for the loops
  written in Python.

Work done inside C calls other than regexes (``str.find``, ``json``) is not
counted: the parsers give each such call a part of the text that no other
call reads again, which their code shows and their comments say.

The meter finds a module's patterns by type (every ``re.Pattern`` attribute,
every cached pattern factory, its ``re``), never by name, and puts each back
when the measurement ends.
"""

from __future__ import annotations

import re
import sys
import types
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from re import _compiler, _constants, _parser  # the engine's own parser: the replay's source
from typing import Any

__all__ = ["OverBudget", "ReplayMismatch", "Steps", "WorkMeter", "sample_match"]

_CHAR_OPS = {_constants.LITERAL, _constants.NOT_LITERAL, _constants.ANY, _constants.IN}
_REPEATS = {_constants.MAX_REPEAT, _constants.MIN_REPEAT, _constants.POSSESSIVE_REPEAT}
_UNLIMITED = int(_constants.MAXREPEAT)


class OverBudget(BaseException):
    """More steps than the meter's budget: the walk stops at once.

    A BaseException, as :class:`ReplayMismatch`, so that no ``except Exception`` in
    the code under measurement swallows it.
    """


class ReplayMismatch(BaseException):
    """The replay matched elsewhere than the engine: its count would not describe the engine."""


class Steps:
    """Replay one compiled pattern's calls on a counting backtracking matcher."""

    def __init__(self, pattern: re.Pattern[str], meter: WorkMeter) -> None:
        self.pattern = pattern
        self.meter = meter
        self.tree = _parser.parse(pattern.pattern, pattern.flags)
        self._tests: dict[int, tuple[Any, re.Pattern[str]]] = {}
        self._members: dict[int, dict[str, bool]] = {}  # keyed like _tests, whose nodes live on
        self.text = ""

    # ----------------------------------------------------------------- the calls

    def match(self, text: str, pos: int, endpos: int, full: bool = False) -> tuple[int, int] | None:
        self.text = text[:endpos]
        end = self._first_end(list(self.tree), pos, full)
        return None if end is None else (pos, end)

    def search(self, text: str, pos: int, endpos: int) -> tuple[int, int] | None:
        self.text = text[:endpos]
        for start in range(max(pos, 0), len(self.text) + 1):
            self._tick()
            end = self._first_end(list(self.tree), start, False)
            if end is not None:
                return (start, end)
        return None

    def all(self, text: str, pos: int, endpos: int) -> list[tuple[int, int]]:
        spans = []
        at = pos
        while at <= min(endpos, len(text)):
            span = self.search(text, at, endpos)
            if span is None:
                break
            spans.append(span)
            at = span[1] if span[1] > span[0] else span[1] + 1
        return spans

    # --------------------------------------------------------------- the matcher

    def _tick(self, count: int = 1) -> None:
        meter = self.meter
        meter.regex_steps += count
        meter.by_pattern[self.pattern.pattern] += count
        if meter.regex_steps > meter.budget:
            raise OverBudget(meter.regex_steps)

    def _compiled(self, node: tuple[Any, Any]) -> re.Pattern[str]:
        # One node compiled alone by the engine decides what that node accepts here,
        # so character classes, case folding and anchors mean exactly what they mean
        # in the real pattern.
        key = id(node)
        if key not in self._tests:
            sub = _parser.SubPattern(self.tree.state, [node])
            # The node is kept with its test, so that its id is never reused.
            self._tests[key] = (node, _compiler.compile(sub, self.pattern.flags))
        return self._tests[key][1]

    def _char(self, node: tuple[Any, Any], pos: int) -> bool:
        self._tick()
        if pos >= len(self.text):
            return False
        char = self.text[pos]
        members = self._members.get(id(node))
        if members is None:
            members = self._members[id(node)] = {}
        if char not in members:
            members[char] = self._compiled(node).match(char) is not None
        return members[char]

    def _first_end(self, items: list[Any], pos: int, full: bool) -> int | None:
        found: list[int] = []

        def accept(end: int) -> bool:
            if full and end != len(self.text):
                return False
            found.append(end)
            return True

        return found[0] if self._seq(items, 0, pos, accept) else None

    def _seq(self, items: list[Any], i: int, pos: int, then: Callable[[int], bool]) -> bool:
        while i < len(items):
            op, arg = items[i]
            if op in _CHAR_OPS:
                if not self._char(items[i], pos):
                    return False
                pos, i = pos + 1, i + 1
            elif op is _constants.AT:
                self._tick()
                if self._compiled(items[i]).match(self.text, pos) is None:
                    return False
                i += 1
            else:
                break
        if i == len(items):
            return then(pos)
        op, arg = items[i]

        def rest(end: int) -> bool:
            return self._seq(items, i + 1, end, then)

        if op is _constants.SUBPATTERN:
            _group, add_flags, del_flags, sub = arg
            if add_flags or del_flags:
                raise NotImplementedError("inline flags in a group")
            return self._seq(list(sub), 0, pos, rest)
        if op is _constants.BRANCH:
            for alternative in arg[1]:
                self._tick()
                if self._seq(list(alternative), 0, pos, rest):
                    return True
            return False
        if op is _constants.ATOMIC_GROUP:
            end = self._first_end_of(list(arg), pos)
            return end is not None and rest(end)
        if op in (_constants.ASSERT, _constants.ASSERT_NOT):
            direction, sub = arg
            if direction == 1:
                holds = self._first_end_of(list(sub), pos) is not None
            else:
                start = pos - sub.getwidth()[0]
                holds = start >= 0 and self._seq(list(sub), 0, start, lambda end: end == pos)
            if op is _constants.ASSERT_NOT:
                holds = not holds
            return holds and rest(pos)
        if op in _REPEATS:
            return self._repeat(op, arg, pos, rest)
        raise NotImplementedError(f"regex construct {op} in {self.pattern.pattern!r}")

    def _first_end_of(self, items: list[Any], pos: int) -> int | None:
        found: list[int] = []

        def accept(end: int) -> bool:
            found.append(end)
            return True

        return found[0] if self._seq(items, 0, pos, accept) else None

    def _repeat(self, op: Any, arg: Any, pos: int, rest: Callable[[int], bool]) -> bool:
        low, high, sub = arg
        high = min(int(high), _UNLIMITED)
        sub = list(sub)
        if len(sub) == 1 and sub[0][0] in _CHAR_OPS:
            return self._repeat_one(op, low, high, sub[0], pos, rest)
        if op is _constants.POSSESSIVE_REPEAT:
            greedy = [(_constants.MAX_REPEAT, (low, high, sub))]
            end = self._first_end_of(greedy, pos)
            return end is not None and rest(end)
        lazy = op is _constants.MIN_REPEAT

        def again(count: int, at: int) -> bool:
            self._tick()
            if count < low:
                return self._seq(sub, 0, at, lambda end: again(count + 1, end))
            if lazy and rest(at):
                return True
            if count < high and self._seq(
                sub, 0, at, lambda end: end != at and again(count + 1, end)
            ):
                return True
            return not lazy and rest(at)

        return again(0, pos)

    def _repeat_one(
        self, op: Any, low: int, high: int, node: Any, pos: int, rest: Callable[[int], bool]
    ) -> bool:
        if op is _constants.MIN_REPEAT:
            at = pos
            for _ in range(low):
                if not self._char(node, at):
                    return False
                at += 1
            count = low
            while True:
                self._tick()
                if rest(at):
                    return True
                if count >= high or not self._char(node, at):
                    return False
                at, count = at + 1, count + 1
        count = 0
        while count < high and self._char(node, pos + count):
            count += 1
        if count < low:
            return False
        if op is _constants.POSSESSIVE_REPEAT:
            return rest(pos + count)
        for taken in range(count, low - 1, -1):
            self._tick()
            if rest(pos + taken):
                return True
        return False


class _Counting:
    """A compiled pattern that answers as the engine does and counts the steps it took."""

    def __init__(self, real: re.Pattern[str], meter: WorkMeter) -> None:
        self._real = real
        self._steps = Steps(real, meter)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def _replay(self, call: Callable[..., Any], *args: Any) -> Any:
        # The replay's own Python is not the parser's work: tracing pauses meanwhile.
        trace = sys.gettrace()
        sys.settrace(None)
        try:
            return call(*args)
        finally:
            sys.settrace(trace)

    def _check(self, got: tuple[int, int] | None, real: re.Match[str] | None) -> None:
        expected = None if real is None else real.span()
        if got != expected:
            raise ReplayMismatch(self._real.pattern, got, expected)

    def search(self, text: str, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[str] | None:
        real = self._real.search(text, pos, endpos)
        self._check(self._replay(self._steps.search, text, pos, endpos), real)
        return real

    def match(self, text: str, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[str] | None:
        real = self._real.match(text, pos, endpos)
        self._check(self._replay(self._steps.match, text, pos, endpos), real)
        return real

    def fullmatch(self, text: str, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[str] | None:
        real = self._real.fullmatch(text, pos, endpos)
        self._check(self._replay(self._steps.match, text, pos, endpos, True), real)
        return real

    def _all(self, text: str, pos: int = 0, endpos: int = sys.maxsize) -> list[re.Match[str]]:
        real = list(self._real.finditer(text, pos, endpos))
        spans = self._replay(self._steps.all, text, pos, endpos)
        if spans != [m.span() for m in real]:
            raise ReplayMismatch(self._real.pattern, spans[:5], [m.span() for m in real][:5])
        return real

    def finditer(self, text: str, pos: int = 0, endpos: int = sys.maxsize) -> Iterator[Any]:
        return iter(self._all(text, pos, endpos))

    def findall(self, text: str, pos: int = 0, endpos: int = sys.maxsize) -> list[Any]:
        self._all(text, pos, endpos)
        return self._real.findall(text, pos, endpos)

    def sub(self, repl: Any, text: str, count: int = 0) -> str:
        if count == 0:
            self._all(text)
        return self._real.sub(repl, text, count)

    def split(self, text: str, maxsplit: int = 0) -> list[str]:
        if maxsplit == 0:
            self._all(text)
        return self._real.split(text, maxsplit)


def _re_shim(meter: WorkMeter) -> types.SimpleNamespace:
    # What a module reaches through its `re` global: the one-call functions count.
    # `re.compile` stays the real one: what it returns may be kept (an lru_cache of
    # patterns) beyond the measurement; a pattern factory is wrapped instead.
    def compile_(pattern: Any, flags: Any = 0) -> Any:
        if isinstance(pattern, re.Pattern):
            return meter.counted(pattern)
        return meter.counted(re.compile(pattern, int(flags)))

    shim = types.SimpleNamespace(**{k: getattr(re, k) for k in dir(re) if not k.startswith("__")})
    shim.search = lambda p, s, flags=0: compile_(p, flags).search(s)
    shim.match = lambda p, s, flags=0: compile_(p, flags).match(s)
    shim.fullmatch = lambda p, s, flags=0: compile_(p, flags).fullmatch(s)
    shim.finditer = lambda p, s, flags=0: compile_(p, flags).finditer(s)
    shim.findall = lambda p, s, flags=0: compile_(p, flags).findall(s)
    shim.sub = lambda p, r, s, count=0, flags=0: compile_(p, flags).sub(r, s, count)
    shim.split = lambda p, s, maxsplit=0, flags=0: compile_(p, flags).split(s, maxsplit)
    return shim


@dataclass
class WorkMeter:
    """Counts regex steps and ``llm_envs`` Python lines while :meth:`measuring` is active.

    Args:
        budget: Regex steps after which the walk stops with :class:`OverBudget`
            (a quadratic pattern on a long text would otherwise take minutes to replay).
    """

    budget: int = 10_000_000
    regex_steps: int = 0
    python_lines: int = 0
    by_pattern: Counter[str] = field(default_factory=Counter)
    _proxies: dict[int, _Counting] = field(default_factory=dict)

    @property
    def work(self) -> int:
        """Regex steps plus Python lines."""
        return self.regex_steps + self.python_lines

    def counted(self, pattern: re.Pattern[str]) -> _Counting:
        key = id(pattern)
        if key not in self._proxies:
            self._proxies[key] = _Counting(pattern, self)
        return self._proxies[key]

    @contextmanager
    def measuring(self, *modules: types.ModuleType, lines: bool = True) -> Iterator[WorkMeter]:
        """Count the work of whatever runs inside, through the patterns of ``modules``.

        ``lines=False`` counts regex steps only.
        """
        saved: list[tuple[types.ModuleType, str, Any]] = []
        for module in modules:
            for name, value in list(vars(module).items()):
                if isinstance(value, re.Pattern):
                    replacement: Any = self.counted(value)
                elif value is re:
                    replacement = _re_shim(self)
                elif callable(value) and hasattr(value, "cache_info"):  # a pattern factory
                    replacement = self._counting_factory(value)
                else:
                    continue
                saved.append((module, name, value))
                setattr(module, name, replacement)

        def trace(frame: types.FrameType, event: str, arg: Any) -> Any:
            if "llm_envs" not in frame.f_code.co_filename:
                return None
            if event == "line":
                self.python_lines += 1
            return trace

        previous = sys.gettrace()
        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(max(limit, 200_000))
        if lines:
            sys.settrace(trace)
        try:
            yield self
        finally:
            sys.settrace(previous)
            sys.setrecursionlimit(limit)
            for module, name, value in reversed(saved):
                setattr(module, name, value)

    def _counting_factory(self, factory: Callable[..., Any]) -> Callable[..., Any]:
        def counting(*args: Any) -> Any:
            made = factory(*args)
            return self.counted(made) if isinstance(made, re.Pattern) else made

        return counting


_ALPHABET = [chr(c) for c in range(32, 127)] + [
    "\n",
    "\t",
    "\r",
    "\u2212",
    "\u3000",
    "\xe9",
    "\uff1a",
]


def sample_match(pattern: re.Pattern[str], rng: Any) -> str:
    """A random text shaped like a match of ``pattern`` (anchors and lookarounds ignored).

    Branches, repeat counts (up to three past the minimum) and class members are
    drawn from ``rng`` (a :class:`random.Random`); the text usually matches, and
    a near-match is as useful: it leads the engine deep into the pattern.
    """
    steps = Steps(pattern, WorkMeter())
    tree = steps.tree

    def members(node: Any) -> list[str]:
        test = steps._compiled(node)
        return [c for c in _ALPHABET if test.match(c)] or ["x"]

    def walk(items: Any) -> str:
        out = []
        for node in items:
            op, arg = node
            if op in _CHAR_OPS:
                out.append(rng.choice(members(node)))
            elif op is _constants.BRANCH:
                out.append(walk(rng.choice(arg[1])))
            elif op is _constants.SUBPATTERN:
                out.append(walk(arg[3]))
            elif op is _constants.ATOMIC_GROUP:
                out.append(walk(arg))
            elif op in _REPEATS:
                low, high, sub = arg
                count = rng.randint(low, min(int(high), low + 3))
                out.extend(walk(sub) for _ in range(count))
        return "".join(out)

    return walk(list(tree))
