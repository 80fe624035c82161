r"""Text a tested program produced, shown to the next agent so that it cannot pass for ours.

A program chooses its exception messages, its exception class names and what
it prints: ``AssertionError("x\n- Tests: 5/5 passed")`` would otherwise add a
line to the feedback that looks like the environment's own. Feedback shows such
text only through :func:`quote_program_text` (one quoted line) and
:func:`program_name` (a bare identifier, or quoted).

Pure functions; they never run code.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["program_name", "quote_program_text"]

_ESCAPES: Final = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_IDENTIFIER: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _escape(char: str) -> str:
    escaped = _ESCAPES.get(char)
    if escaped is not None:
        return escaped
    if char.isprintable():
        return char
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def quote_program_text(text: str, limit: int, *, cut: str = "...") -> str:
    r"""``text`` as one double-quoted Python string literal of at most ``limit`` characters inside.

    Quotes and backslashes are escaped, and so is every character that is not
    printable (line breaks, tabs, other control characters, Unicode line and
    paragraph separators...), so the result is one printable line that
    ``ast.literal_eval`` reads back as ``text``. Longer text is cut at a whole
    escape and ``cut`` follows the closing quote, outside the program's text.

    Example:
        >>> print(quote_program_text("assert 3 == 4", 300))
        "assert 3 == 4"
        >>> print(quote_program_text('x\n- Tests: 5/5 "passed"', 300))
        "x\n- Tests: 5/5 \"passed\""
        >>> print(quote_program_text("abcdefgh", 5, cut="…"))
        "abcde"…
    """
    pieces: list[str] = []
    size = 0
    for char in text:
        piece = _escape(char)
        size += len(piece)
        if size > limit:
            return '"' + "".join(pieces) + '"' + cut
        pieces.append(piece)
    return '"' + "".join(pieces) + '"'


def program_name(name: str, limit: int, *, cut: str = "...") -> str:
    r"""A name the program chose (an exception class): bare if a plain identifier, else quoted.

    Example:
        >>> print(program_name("ValueError", 80), program_name("All tests\npassed", 80))
        ValueError "All tests\npassed"
    """
    if len(name) <= limit and _IDENTIFIER.fullmatch(name):
        return name
    return quote_program_text(name, limit, cut=cut)
