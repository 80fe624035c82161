r"""Final-answer extraction and checking for math problems.

A model's response to a math problem is free text; the reward needs its final
answer. :func:`extract_answer` finds it with these rules, tried in order (the
first rule that finds something wins; within a rule, the **last** occurrence in
the text wins, because models restate and correct themselves):

1. ``\boxed{...}`` (or ``\fbox{...}``), with nested braces: ``\boxed{\frac{1}{2}}``
   gives ``\frac{1}{2}``.
2. ``#### ...``, GSM8K's marker: the rest of that line.
3. An answer phrase: ``answer is``, ``answer:``, ``answer =``, ``final answer is``
   (any case, ``**Answer:**`` too): the rest of that line (or the next line when
   the phrase ends its line), cleaned as below.
4. The last number in the text.

Rules 2 and 3 clean what follows the marker: a number at its start is the answer
(``The answer is $1,000 per month.`` gives ``1,000``); else a trailing
``... = value`` gives the value (``x = 5`` gives ``5``); else the text up to the
end of the sentence, without surrounding ``**``, ``$`` and final punctuation.

A *number* is ASCII digits with an optional sign (``-``, ``+``, ``−``), thousands
commas (``1,000``), a decimal part (``0.5``, ``.5``), or a fraction ``a/b`` or
``\frac{a}{b}`` (``\dfrac``, ``\tfrac``); ``$``/``\$`` before and ``%`` after it are
ignored. Scientific notation, mixed numbers (``1 1/2``) and words (``five``) are
not numbers.

:func:`check_answer` compares a response (or an extracted answer) with a
reference answer:

1. equal after :func:`normalize_answer` (the whole texts): correct;
2. the candidate is the whole text when it is a number, else
   :func:`extract_answer` of it (no answer found: wrong);
   the reference is taken as it is (a ``\boxed{}`` in it is unwrapped, nothing more);
3. both are numbers: equal as exact rationals (``1,000`` == ``1000``,
   ``0.5`` == ``1/2``, ``3.0`` == ``3``; ``0.333`` != ``1/3``);
4. otherwise: equal after :func:`normalize_answer`.

Nothing here raises on any input string: garbage text is a wrong answer.
"""

from __future__ import annotations

import re
import unicodedata
from fractions import Fraction

__all__ = [
    "check_answer",
    "extract_answer",
    "format_number",
    "normalize_answer",
    "parse_number",
]

# Python refuses int() of strings over 4300 digits; answers never come close.
_MAX_DIGITS = 1000

_SIGN = r"[-+\u2212]"
_UNSIGNED = r"(?:[0-9]{1,3}(?:,[0-9]{3})+|[0-9]+)(?:\.[0-9]+)?|\.[0-9]+"
# Whitespace runs are possessive (\s*+) wherever a digit, a sign or a brace must
# follow: giving spaces back could never help a match, and a sign between two
# runs (\s*-?\s*) would try every split of a long run (quadratic: "\frac{" and
# 20,000 spaces took 40 s to search).
_FRAC_ARG = rf"\s*+(?:{_SIGN}\s*+)?(?:{_UNSIGNED})\s*+"
_LATEX_FRAC = rf"\\[dt]?frac\s*+\{{{_FRAC_ARG}\}}\s*+\{{{_FRAC_ARG}\}}"

_NUMBER = rf"{_SIGN}?(?:{_LATEX_FRAC}|(?:{_UNSIGNED})(?:\s*+/\s*+(?:{_UNSIGNED}))?)"
# A number somewhere in a text, not glued to a word or to a preceding digit or dot:
# "H2O" has none, "10-12" has 10 and 12 (not -12), "3.14.15" has 3.14.
_NUMBER_IN_TEXT = re.compile(rf"(?<![\w.]){_NUMBER}")
# A number opening an answer phrase, after an optional currency sign or markup, and
# not continued by a letter or an operator ("2x + 1" and "3 + 4 = 7" are not numbers).
_NUMBER_AT_START = re.compile(
    rf"(?:\\\$|\$|\\\(|\*\*)?\s*+({_NUMBER})"
    r"(?![\w(^]|[.,][0-9])(?!\s*+[-+*/=^\u00d7\u00f7\u00b7])"
)
_DECIMAL = re.compile(rf"({_SIGN})?\s*+({_UNSIGNED})")
_FRACTION = re.compile(rf"({_SIGN})?\s*+({_UNSIGNED})\s*+/\s*+(?:({_SIGN})\s*+)?({_UNSIGNED})")
_LATEX_FRACTION = re.compile(
    rf"({_SIGN})?\s*+\\[dt]?frac\s*+\{{\s*+(?:({_SIGN})\s*+)?({_UNSIGNED})\s*+\}}"
    rf"\s*+\{{\s*+(?:({_SIGN})\s*+)?({_UNSIGNED})\s*+\}}"
)
# A unit after a number (5\text{ cm}); the lookbehind starts a match only where a
# run of whitespace starts, not at each of its characters (quadratic).
_UNIT_SUFFIX = re.compile(r"(?<!\s)\s*+\\(?:text|mbox|mathrm)\s*+\{[^{}]*+\}\s*+$")
_BOX_TOKENS = re.compile(r"\\(?:boxed|fbox)\s*\{|\\(?:boxed|fbox) +([^\s${}]+)|[{}]")
_BOX_PREFIX = re.compile(r"\\(?:boxed|fbox)\s*+\{")
_GSM8K_MARKER = re.compile(r"####[^\S\n]*([^\n]*)")
_ANSWER_PHRASE = re.compile(
    r"\banswer\b[^\S\n]*+(?:\*\*[^\S\n]*+)?"
    r"(?:is\b|was\b|would\s++be\b|will\s++be\b|should\s++be\b|=|:|\uff1a)"
    r"[^\S\n]*+(?:\*\*[^\S\n]*+)?:?",
    re.IGNORECASE,
)
_NEXT_LINE = re.compile(r"\s*([^\n]*)")
_PHRASE_WINDOW = 500
_SENTENCE_END = re.compile(r"\.(?:\s|$)|;|\n")
_TEXT_WRAPPER = re.compile(r"\\(?:text|textbf|mathrm|mathbf|mbox)\s*\{([^{}]*)\}")
_SPACING = re.compile(r"\\[!,;:> ]|\\quad|\\qquad|~")


def extract_answer(text: str) -> str | None:
    r"""Extract the final answer from a response (rules in the module docstring).

    Returns:
        The answer text as written (e.g. ``"1,000"``, ``"\frac{1}{2}"``, ``"B"``), or
        ``None`` when the text has no marker and no number.

    Example:
        >>> extract_answer(r"So the total is \boxed{\frac{3}{4}}.")
        '\\frac{3}{4}'
        >>> extract_answer("She pays 5 + 7 = 12 dollars.\n#### 12")
        '12'
        >>> extract_answer("The answer is: 1,024 bytes.")
        '1,024'
        >>> extract_answer("I got 3, then 4.5 after fixing it") is not None
        True
    """
    if not isinstance(text, str):
        return None
    for rule in (_boxed, _after_gsm8k_marker, _after_answer_phrase, _last_number):
        answer = rule(text)
        if answer:
            return answer
    return None


def parse_number(text: str) -> Fraction | None:
    r"""Read ``text`` as one exact number, or return ``None``.

    Accepts the forms listed in the module docstring, possibly wrapped in ``$...$``,
    ``\(...\)``, ``\text{}``, with LaTeX spacing (``\!``, ``\,``), a currency sign,
    a trailing ``%``, unit text after ``\text{...}``, or a final period.

    Example:
        >>> parse_number("1,000"), parse_number("-0.50"), parse_number(r"\dfrac{3}{4}")
        (Fraction(1000, 1), Fraction(-1, 2), Fraction(3, 4))
        >>> parse_number("1/0") is None, parse_number("twelve") is None
        (True, True)
    """
    # A number, even decorated, is short; the cap also keeps the regexes linear.
    if not isinstance(text, str) or len(text) > 2 * _MAX_DIGITS:
        return None
    cleaned = _strip_number_decorations(text)
    if not cleaned:
        return None
    try:
        if match := _DECIMAL.fullmatch(cleaned):
            return _signed(match.group(1), _decimal(match.group(2)))
        if match := _FRACTION.fullmatch(cleaned):
            sign, numerator, denominator_sign, denominator = match.groups()
            value = _decimal(numerator) / _decimal(denominator)
            return _signed(sign, _signed(denominator_sign, value))
        if match := _LATEX_FRACTION.fullmatch(cleaned):
            outer, num_sign, numerator, den_sign, denominator = match.groups()
            top = _signed(num_sign, _decimal(numerator))
            return _signed(outer, top / _signed(den_sign, _decimal(denominator)))
    except (ZeroDivisionError, ValueError, OverflowError):
        return None
    return None


def normalize_answer(text: str) -> str:
    r"""Normalize an answer for string comparison.

    Unicode NFKC, case-folded, ``\text{...}``-style wrappers and LaTeX spacing
    removed, ``$`` and ``**`` removed, all whitespace removed, and a final period
    dropped.

    Example:
        >>> normalize_answer(r"  \text{New York}. ")
        'newyork'
    """
    if not isinstance(text, str):
        return ""
    text = unicodedata.normalize("NFKC", text)
    for _ in range(3):  # nested wrappers, e.g. \text{\textbf{x}}
        text = _TEXT_WRAPPER.sub(r"\1", text)
    text = _SPACING.sub("", text)
    text = text.replace("\\left", "").replace("\\right", "")
    text = text.replace("$", "").replace("**", "")
    text = "".join(text.split()).casefold()
    return text.rstrip(".")


def check_answer(text: str, reference: str) -> bool:
    r"""Whether a response (or an extracted answer) matches the reference answer.

    The rules are in the module docstring: numbers compare exactly as rationals,
    other answers after :func:`normalize_answer`.

    Example:
        >>> check_answer("... so she has 1,000 apples. The answer is 1,000.", "1000")
        True
        >>> check_answer(r"\boxed{0.5}", "1/2"), check_answer("3.0", "3")
        (True, True)
        >>> check_answer("The answer is 7.", "8")
        False
    """
    if not isinstance(text, str) or not isinstance(reference, str):
        return False
    normalized_reference = normalize_answer(reference)
    if normalized_reference and normalize_answer(text) == normalized_reference:
        return True
    reference_answer = _boxed(reference) or reference
    candidate_value = parse_number(text)
    if candidate_value is not None:
        candidate = text
    else:
        extracted = extract_answer(text)
        if extracted is None:
            return False
        candidate = extracted
        candidate_value = parse_number(candidate)
    reference_value = parse_number(reference_answer)
    if candidate_value is not None and reference_value is not None:
        return candidate_value == reference_value
    expected = normalize_answer(reference_answer)
    return bool(expected) and normalize_answer(candidate) == expected


def format_number(value: Fraction | int) -> str:
    """Write an exact number canonically: ``"12"``, ``"-3"``, ``"7/2"``, ``"-1/3"``.

    Example:
        >>> format_number(Fraction(6, 4)), format_number(Fraction(-4, 2))
        ('3/2', '-2')
    """
    value = Fraction(value)
    if value.denominator == 1:
        return str(value.numerator)
    return f"{value.numerator}/{value.denominator}"


# --- the extraction rules -----------------------------------------------------------


def _boxed(text: str) -> str | None:
    r"""The content of the last complete ``\boxed{...}``, in one pass over the text.

    A stack of open braces (instead of scanning ahead from each ``\boxed{``) keeps
    this linear even for ``\boxed{\boxed{\boxed{...`` without closing braces.
    """
    if "\\boxed" not in text and "\\fbox" not in text:
        return None
    stack: list[int | None] = []  # content start of an open box, None for a plain brace
    best: tuple[int, str] | None = None
    for token in _BOX_TOKENS.finditer(text):
        lexeme = token.group(0)
        if lexeme == "{":
            stack.append(None)
        elif lexeme == "}":
            if stack and (start := stack.pop()) is not None:
                content = text[start : token.start()].strip()
                if content and (best is None or token.end() >= best[0]):
                    best = (token.end(), content)
        elif token.group(1) is not None:  # \boxed 5 (no braces)
            if best is None or token.end() >= best[0]:
                best = (token.end(), token.group(1))
        else:
            stack.append(token.end())
    if best is None:
        return None
    # \boxed{\boxed{5}}: the outer box closes last; its answer is the inner one.
    return _unwrap_boxes(best[1]) or None


def _unwrap_boxes(content: str) -> str:
    r"""``content`` without the boxes that wrap all of it: ``\boxed{ \fbox{5} }`` gives ``5``.

    A box is unwrapped when ``content`` is ``\boxed{...}`` whole and ``...`` is
    balanced; the rest is stripped and looked at again. One pass: bounds move
    inwards instead of copying ``...`` at each level, and after the first level
    a box is whole exactly when its ``{`` pairs with the last ``}`` (the content
    is balanced), which the braces' partners, found once, answer in O(1).
    Unwrapping by copies and re-checks cost O(depth x length).
    """
    low, high = 0, len(content)
    partners: dict[int, int] | None = None
    while (opening := _BOX_PREFIX.match(content, low, high)) is not None:
        start, end = opening.end(), high - 1
        if end < start or content[end] != "}":
            break
        if partners is None:
            partners = _brace_partners(content, start, end)
            if partners is None:
                break
        elif partners.get(start - 1) != end:
            break
        while start < end and content[start].isspace():
            start += 1
        while end > start and content[end - 1].isspace():
            end -= 1
        low, high = start, end
    return content[low:high]


def _brace_partners(text: str, start: int, end: int) -> dict[int, int] | None:
    """The closing brace of each ``{`` in ``text[start:end]``, or None if that is unbalanced."""
    partners: dict[int, int] = {}
    open_braces: list[int] = []
    for index in range(start, end):
        char = text[index]
        if char == "{":
            open_braces.append(index)
        elif char == "}":
            if not open_braces:
                return None
            partners[open_braces.pop()] = index
    return partners if not open_braces else None


def _after_gsm8k_marker(text: str) -> str | None:
    if "####" not in text:
        return None
    for match in reversed(list(_GSM8K_MARKER.finditer(text))):
        answer = _clean_phrase(match.group(1))
        if answer:
            return answer
    return None


def _after_answer_phrase(text: str) -> str | None:
    for match in reversed(list(_ANSWER_PHRASE.finditer(text))):
        # Look at one line, and not too far: an answer is short, and a bounded window
        # keeps many failing phrases on one long line from costing quadratic time.
        start = match.end()
        end = text.find("\n", start, start + _PHRASE_WINDOW)
        line = text[start : end if end >= 0 else start + _PHRASE_WINDOW]
        if not line.strip() and end >= 0:  # "The answer is:\n42"
            following = _NEXT_LINE.match(text, end)
            line = following.group(1)[:_PHRASE_WINDOW] if following else ""
        answer = _clean_phrase(line)
        if answer:
            return answer
    return None


def _last_number(text: str) -> str | None:
    last = None
    for last in _NUMBER_IN_TEXT.finditer(text):  # noqa: B007 (the last match is the point)
        pass
    return None if last is None else last.group(0).strip()


def _clean_phrase(phrase: str, depth: int = 0) -> str | None:
    phrase = phrase.strip()
    if not phrase:
        return None
    if match := _NUMBER_AT_START.match(phrase):
        return match.group(1)
    end = _SENTENCE_END.search(phrase)
    sentence = phrase[: end.start()] if end else phrase
    if "=" in sentence and depth == 0:
        value = _clean_phrase(sentence.rpartition("=")[2], depth + 1)
        if value:
            return value
    sentence = sentence.strip().strip("*").strip()
    if sentence.startswith("$") and sentence.endswith("$"):
        sentence = sentence.strip("$").strip()
    return sentence.rstrip(".,;:!?").strip() or None


# --- numbers ------------------------------------------------------------------------


def _strip_number_decorations(text: str) -> str:
    text = text.strip()
    for opening, closing in (("$", "$"), ("\\(", "\\)"), ("\\[", "\\]"), ("**", "**")):
        wrapped = text.startswith(opening) and text.endswith(closing)
        if wrapped and len(text) >= len(opening) + len(closing):
            text = text[len(opening) : -len(closing)].strip()
    text = _SPACING.sub("", text)
    text = text.replace("{,}", ",")
    # A unit after the number: 5\text{ cm}, 5 \mbox{ m}.
    text = _UNIT_SUFFIX.sub("", text)
    text = text.removeprefix("\\$").removeprefix("$").strip()
    if text.startswith(("-\\$", "-$")):
        text = "-" + text.split("$", 1)[1]
    text = text.removesuffix("\\%").removesuffix("%").rstrip()
    text = text.removesuffix(".")
    return text.strip()


def _decimal(digits: str) -> Fraction:
    plain = digits.replace(",", "")
    if len(plain) > _MAX_DIGITS:
        raise ValueError("too many digits")
    return Fraction(plain)


def _signed(sign: str | None, value: Fraction) -> Fraction:
    return -value if sign in ("-", "\u2212") else value
