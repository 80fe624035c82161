r"""Python code in agent text: cleaning it out of prose and fences, and finding functions in it.

A model's answer is rarely bare code: it thinks aloud in a ``<think>`` block,
wraps code in markdown fences, and explains itself in prose before and after.
This module turns such text into code and takes functions out of it:

1. **Cleaning** (:func:`clean_code`): a ``<think>`` block is dropped; when the
   text has markdown fences only the fenced code is kept; when what is left
   does not parse, prose lines (unindented lines that are not Python, outside
   strings and brackets) are dropped.
2. **Extraction** (:func:`extract_function`): a top-level function by name,
   found with :mod:`ast` when the cleaned code parses, else from the text (the
   ``def`` line and the lines indented under it), so a syntax error hides
   neither the definition nor its ``return``.
3. **Imports** (:func:`top_level_imports`): the top-level import statements.

Code is parsed with :func:`llm_envs.tasks.code_parsing.parse_quietly` (the
data's invalid-escape warnings silenced) and compiled, never executed: this
module must never run agent code.

Example:
    >>> code = clean_code("Sure!\n```python\ndef aux(x):\n    return x + 1\n```")
    >>> f = extract_function(code, "aux")
    >>> f.found, f.has_return, f.syntax_error
    (True, True, None)
"""

from __future__ import annotations

import ast
import re
import textwrap
import warnings
from collections.abc import Iterable
from dataclasses import dataclass

from llm_envs.tasks.code_parsing import parse_quietly

__all__ = [
    "ExtractedFunction",
    "SyntaxErrorInfo",
    "clean_code",
    "compile_error",
    "extract_function",
    "find_function",
    "top_level_imports",
    "try_parse",
]

# ----------------------------------------------------------------------------- records


@dataclass(frozen=True)
class SyntaxErrorInfo:
    """Where a piece of code stops compiling.

    Attributes:
        line: 1-based line in the code that was compiled (None when unknown).
        column: 1-based column (None when unknown).
        message: the compiler's message, e.g. ``"expected ':'"``.
    """

    line: int | None
    column: int | None
    message: str

    def describe(self) -> str:
        """``"line 2, column 9: expected ':'"``."""
        where = []
        if self.line is not None:
            where.append(f"line {self.line}")
        if self.column is not None:
            where.append(f"column {self.column}")
        return f"{', '.join(where)}: {self.message}" if where else self.message


@dataclass(frozen=True)
class ExtractedFunction:
    """One function taken out of an agent's text.

    Attributes:
        name: the function looked for (``aux`` or the entry point).
        source: its source, dedented (``""`` when not found).
        has_return: whether its own body (nested functions aside) has a ``return``.
        syntax_error: where its source alone stops compiling (None: it compiles, or
            it was not found).
    """

    name: str
    source: str
    has_return: bool
    syntax_error: SyntaxErrorInfo | None

    @property
    def found(self) -> bool:
        """Whether the text defines the function."""
        return bool(self.source)

    @classmethod
    def not_found(cls, name: str) -> ExtractedFunction:
        """The record of a function the text does not define."""
        return cls(name, "", False, None)


# ------------------------------------------------------------------------ text scanning


@dataclass(frozen=True)
class _Scan:
    """A light lexical pass over text that may not be valid Python.

    ``masked`` is the text with the contents of strings and comments replaced by
    spaces (same length, newlines kept), so regular expressions see only code.
    ``continued[i]`` says whether line ``i`` starts inside a string, inside
    brackets, or after a backslash continuation.
    """

    masked: str
    continued: tuple[bool, ...]


def _scan(text: str) -> _Scan:
    masked = list(text)
    continued = [False]
    depth = 0
    backslash = False
    i, n = 0, len(text)

    def blank(start: int, end: int) -> None:
        for k in range(start, end):
            if masked[k] != "\n":
                masked[k] = " "

    while i < n:
        c = text[i]
        if c == "\n":
            continued.append(depth > 0 or backslash)
            backslash = False
            i += 1
            continue
        backslash = False
        if c == "#":
            end = text.find("\n", i)
            end = n if end < 0 else end
            blank(i, end)
            i = end
            continue
        if c in "\"'":
            quote = c * 3 if text.startswith(c * 3, i) else c
            j = i + len(quote)
            while j < n:
                if text[j] == "\\":
                    j += 2
                    continue
                if text.startswith(quote, j):
                    j += len(quote)
                    break
                if text[j] == "\n" and len(quote) == 1:
                    break  # an unterminated one-line string ends with its line
                j += 1
            j = min(j, n)
            blank(i, j)
            continued.extend(True for _ in range(text.count("\n", i, j)))
            i = j
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth = max(0, depth - 1)
        elif c == "\\" and text.startswith("\n", i + 1):
            backslash = True
        i += 1
    return _Scan("".join(masked), tuple(continued))


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def try_parse(source: str) -> ast.Module | None:
    """:func:`~llm_envs.tasks.code_parsing.parse_quietly`, or None for code that does not parse.

    Model code can be anything: besides a ``SyntaxError``, null bytes raise a
    ``ValueError`` and deep nesting a ``RecursionError`` or ``MemoryError``.

    Example:
        >>> try_parse("def f(:") is None, type(try_parse("x = 1")).__name__
        (True, 'Module')
    """
    try:
        return parse_quietly(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def compile_error(source: str) -> SyntaxErrorInfo | None:
    r"""Where ``source`` stops compiling (the sandbox's own judgment), or None when it compiles.

    Example:
        >>> compile_error("def f(x)\n    return x").describe()
        "line 1, column 9: expected ':'"
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            compile(source, "<program>", "exec", dont_inherit=True)
        except SyntaxError as error:
            return SyntaxErrorInfo(error.lineno, error.offset, error.msg)
        except ValueError as error:  # null bytes
            return SyntaxErrorInfo(None, None, str(error))
        except (RecursionError, MemoryError):
            return SyntaxErrorInfo(None, None, "too deeply nested to compile")
    return None


# ----------------------------------------------------------------------------- cleaning

_FENCE = re.compile(r"^[ \t]*```")
_KEYWORD_START = re.compile(
    r"^(?:def|class|async|import|from|return|if|elif|else|for|while|try|except|finally|"
    r"with|assert|raise|pass|break|continue|global|nonlocal|del|yield|lambda|match|case)\b"
)


def _strip_think_blocks(text: str) -> str:
    """``text`` without its ``<think>...</think>`` blocks (each to the first closer after it).

    A search for ``<think>.*?</think>`` would read to the end of the text from
    every opener when the closer is missing (quadratic on ``<think>`` repeated);
    an opener without a closer means no later opener has one either, so the
    scan stops there: linear.
    """
    pieces = []
    position = 0
    while (start := text.find("<think>", position)) >= 0:
        end = text.find("</think>", start + len("<think>"))
        if end < 0:
            break
        pieces.append(text[position:start])
        position = end + len("</think>")
    pieces.append(text[position:])
    return "".join(pieces)


def _fenced_blocks(text: str) -> str | None:
    """The contents of every markdown code block, joined; None when there is no fence."""
    lines = text.splitlines()
    if not any(_FENCE.match(line) for line in lines):
        return None
    blocks: list[list[str]] = []
    current: list[str] | None = None
    for line in lines:
        if _FENCE.match(line):
            if current is None:
                current = []
            else:
                blocks.append(current)
                current = None
        elif current is not None:
            current.append(line)
    if current is not None:  # an unclosed fence: the model stopped before closing it
        blocks.append(current)
    return "\n\n".join("\n".join(block) for block in blocks)


def _is_code_line(line: str) -> bool:
    """Whether an unindented line that starts a statement reads as Python rather than prose."""
    stripped = line.strip()
    if stripped.startswith(("#", "@")) or _KEYWORD_START.match(stripped):
        return True
    masked = _scan(stripped).masked
    if masked.count("(") + masked.count("[") + masked.count("{") > (
        masked.count(")") + masked.count("]") + masked.count("}")
    ):
        return True  # it opens brackets the next lines close: a multi-line expression
    if try_parse(stripped) is not None:
        return True
    return stripped.endswith(":") and try_parse(stripped + "\n    pass") is not None


def clean_code(text: str) -> str:
    r"""Strip what is not code from an agent's answer: a ``<think>`` block, markdown, prose.

    Code that already parses is returned as it is (apart from fences and
    surrounding blank lines); prose lines are only looked for when it does not.

    Example:
        >>> clean_code("Here it is:\n```python\ndef f():\n    return 1\n```\nEnjoy!")
        'def f():\n    return 1'
        >>> clean_code("Here it is:\ndef f():\n    return 1\nThis returns one.")
        'def f():\n    return 1'
    """
    if not isinstance(text, str):
        return ""
    text = _strip_think_blocks(text)
    fenced = _fenced_blocks(text)
    if fenced is not None:
        text = fenced
    text = textwrap.dedent(text.replace("\r\n", "\n").replace("\r", "\n")).strip("\n")
    if not text.strip() or try_parse(text) is not None:
        return text.rstrip()
    lines = text.split("\n")
    continued = _scan(text).continued
    kept = [
        line
        for line, inside in zip(lines, continued, strict=True)
        if inside or not line.strip() or line[0].isspace() or _is_code_line(line)
    ]
    return "\n".join(kept).strip("\n").rstrip()


# --------------------------------------------------------------------------- extraction

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def _own_nodes(function: ast.FunctionDef | ast.AsyncFunctionDef) -> Iterable[ast.AST]:
    """Every node in ``function``'s body that belongs to it, not to a nested scope."""
    stack: list[ast.AST] = list(function.body)
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, _SCOPES):
            continue
        stack.extend(ast.iter_child_nodes(node))


def _has_own_return(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any(isinstance(node, ast.Return) for node in _own_nodes(function))


def _top_level_function(
    module: ast.Module, name: str
) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    found = None
    for node in module.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
            found = node  # the last definition wins, as when Python runs the module
    return found


def find_function(source: str, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    r"""The AST of the top-level function ``name`` in ``source`` (None: no parse, or no such def).

    Example:
        >>> find_function("def f():\n    pass\ndef g():\n    pass", "g").lineno
        3
    """
    module = try_parse(source)
    return None if module is None else _top_level_function(module, name)


def _text_block(code: str, name: str) -> str:
    """The ``def name`` block found in text that does not parse (``""`` if none)."""
    lines = code.split("\n")
    continued = _scan(code).continued
    header = re.compile(rf"^[ \t]*(?:async[ \t]+)?def[ \t]+{re.escape(name)}[ \t]*\(")
    starts = [i for i, line in enumerate(lines) if not continued[i] and header.match(line)]
    if not starts:
        return ""
    outermost = min(_indent(lines[i]) for i in starts)
    start = [i for i in starts if _indent(lines[i]) == outermost][-1]
    base = _indent(lines[start])
    first = start
    while (
        first > 0
        and lines[first - 1].strip().startswith("@")
        and (_indent(lines[first - 1]) == base)
    ):
        first -= 1
    end = start + 1
    while end < len(lines) and (
        continued[end] or not lines[end].strip() or _indent(lines[end]) > base
    ):
        end += 1
    return textwrap.dedent("\n".join(lines[first:end])).strip("\n").rstrip()


def extract_function(code: str, name: str) -> ExtractedFunction:
    r"""Take the top-level function ``name`` out of cleaned code.

    With :mod:`ast` when ``code`` parses (the last definition wins, as in
    Python); otherwise from the text: the outermost ``def name(`` line, the
    decorators above it and every following line indented under it (or inside
    a string or brackets it opened). ``has_return`` comes from the function's
    AST when its source parses, else from its text with strings and comments
    masked.

    Example:
        >>> f = extract_function("def aux(x)\n    return x", "aux")
        >>> f.found, f.has_return, f.syntax_error.line
        (True, True, 1)
    """
    module = try_parse(code)
    node = None if module is None else _top_level_function(module, name)
    if module is not None and node is None:
        # Valid Python without a top-level `def name` (a method, a nested function):
        # the tests could not call it.
        return ExtractedFunction.not_found(name)
    if node is not None:
        lines = code.split("\n")
        first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
        last = node.end_lineno or node.lineno
        source = textwrap.dedent("\n".join(lines[first - 1 : last])).strip("\n").rstrip()
    else:
        source = _text_block(code, name)
    if not source:
        return ExtractedFunction.not_found(name)
    parsed = find_function(source, name)
    if parsed is not None:
        has_return = _has_own_return(parsed)
    else:
        body = _scan(source).masked.split("\n", 1)[1:]
        has_return = bool(body) and re.search(r"\breturn\b", body[0]) is not None
    return ExtractedFunction(name, source, has_return, compile_error(source))


def top_level_imports(code: str) -> list[str]:
    r"""The top-level import statements of cleaned code (from its AST, or from its lines).

    When the code parses, relative imports are left out (a program assembled
    from agents' code has no package), and so are imports inside functions.

    Example:
        >>> top_level_imports("import math\nfrom . import x\ndef f():\n    import os")
        ['import math']
    """
    module = try_parse(code)
    if module is not None:
        return [
            ast.unparse(node)
            for node in module.body
            if isinstance(node, ast.Import)
            or (isinstance(node, ast.ImportFrom) and node.level == 0)  # no relative imports
        ]
    continued = _scan(code).continued
    found = []
    for line, inside in zip(code.split("\n"), continued, strict=True):
        if inside or not re.match(r"^(?:import|from)[ \t]", line):
            continue
        module = try_parse(line)
        if module is not None and all(
            isinstance(n, ast.Import | ast.ImportFrom) for n in module.body
        ):
            found.append(line.strip())
    return found
