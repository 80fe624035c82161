r"""The parsers of agent text as they were before issue 45: the reference for their rewrites.

Each was quadratic on some adversarial text (a run of ``*`` in a comparison, a
run of spaces after ``\frac{``, openers without closers...), so the
differential tests call them on short texts only, where their answers are
the specification the linear rewrites must keep. Copied verbatim from
``llm_envs`` at the commit before the rewrites (docstrings dropped), apart
from this header and the imports.
"""

from __future__ import annotations

import ast
import re
from fractions import Fraction

from llm_envs.debate.labels import Lookup
from llm_envs.debate.protocol import Comparison, ParsedComparisons
from llm_envs.tasks.math_answers import normalize_answer

_FLAGS = re.IGNORECASE | re.ASCII

# ------------------------------------------------------------ llm_envs.debate.protocol

_AGENT = r"[*_`]*+agent[ \t]*+_?[ \t]*+([0-9]{1,18})(?![0-9])[*_`]*+"

_OP = r"[ \t]*+(==|=|>|<|&gt;|&lt;)[ \t]*+"

_PAIR = re.compile(rf"(?<![A-Za-z0-9]){_AGENT}{_OP}{_AGENT}", _FLAGS)

_LINK = re.compile(rf"{_OP}{_AGENT}", _FLAGS)

_NO_COMPARISON = re.compile(r"[^A-Za-z0-9]*+(?:n/a|n\.a\.|na|none)(?![A-Za-z0-9])", _FLAGS)

_MIRRORED_OPS = frozenset({"<", "&lt;"})

_TIE_OPS = frozenset({"=", "=="})


def parse_comparisons(text: str, author: int | None = None) -> ParsedComparisons:
    comparisons: list[Comparison] = []
    dropped = 0
    unparsed = 0
    for raw_line in text.splitlines():
        line = raw_line.strip()
        match = _PAIR.search(line)
        if match is None:
            if any(ch.isalnum() for ch in line) and _NO_COMPARISON.match(line) is None:
                unparsed += 1
            continue
        ids = [int(match.group(1)), int(match.group(3))]
        ops = [match.group(2)]
        position = match.end()
        while (link := _LINK.match(line, position)) is not None:
            ops.append(link.group(1))
            ids.append(int(link.group(2)))
            position = link.end()
        for left, op, right in zip(ids, ops, ids[1:], strict=False):
            comparison = _canonical(left, op.lower(), right)
            if author is not None and author in (left, right):
                dropped += 1
            else:
                comparisons.append(comparison)
    return ParsedComparisons(tuple(comparisons), dropped, unparsed)


def _canonical(left: int, op: str, right: int) -> Comparison:
    if op in _TIE_OPS:
        return (left, "=", right)
    if op in _MIRRORED_OPS:
        return (right, ">", left)  # "a < b" says "b > a"
    return (left, ">", right)


# -------------------------------------------------------------- llm_envs.debate.labels

_MENTION = re.compile(r"(?<![A-Za-z0-9])([*_`]*agent[ \t]*_?[ \t]*)([0-9]{1,18})(?![0-9])", re.I)


def relabel_mentions(text: str, rename: Lookup) -> str:

    def swap(match: re.Match[str]) -> str:
        k = int(match.group(2))
        return match.group(1) + str(rename[k]) if k < len(rename) else match.group(0)

    return _MENTION.sub(swap, text)


# ------------------------------------------------- llm_envs.expert_iteration.verifier

_FENCE = re.compile(r"```[ \t]*([\w+.-]*)[^\n]*\n(.*?)^[ \t]*```", re.DOTALL | re.MULTILINE)

_OPEN_FENCE = re.compile(r"```[ \t]*([\w+.-]*)[^\n]*\n")

_CODE_LANGUAGES = frozenset({"", "python", "py", "python3"})


def extract_code(text: str) -> str | None:
    blocks = [m.group(2) for m in _FENCE.finditer(text) if m.group(1).lower() in _CODE_LANGUAGES]
    if blocks:
        return blocks[-1]
    if text.count("```") % 2 == 0:
        return None
    # An odd number of fences: the last one opens a block the response never closed.
    opening = _OPEN_FENCE.match(text, text.rfind("```"))
    if opening is not None and opening.group(1).lower() in _CODE_LANGUAGES:
        return text[opening.end() :]
    return None


# ------------------------------------------------------ llm_envs.tasks.math_answers

_MAX_DIGITS = 1000

_SIGN = r"[-+\u2212]"

_UNSIGNED = r"(?:[0-9]{1,3}(?:,[0-9]{3})+|[0-9]+)(?:\.[0-9]+)?|\.[0-9]+"

_FRAC_ARG = rf"\s*{_SIGN}?\s*(?:{_UNSIGNED})\s*"

_LATEX_FRAC = rf"\\[dt]?frac\s*\{{{_FRAC_ARG}\}}\s*\{{{_FRAC_ARG}\}}"

_NUMBER = rf"{_SIGN}?(?:{_LATEX_FRAC}|(?:{_UNSIGNED})(?:\s*/\s*(?:{_UNSIGNED}))?)"

_NUMBER_IN_TEXT = re.compile(rf"(?<![\w.]){_NUMBER}")

_NUMBER_AT_START = re.compile(
    rf"(?:\\\$|\$|\\\(|\*\*)?\s*({_NUMBER})"
    r"(?![\w(^]|[.,][0-9])(?!\s*[-+*/=^\u00d7\u00f7\u00b7])"
)

_DECIMAL = re.compile(rf"({_SIGN})?\s*({_UNSIGNED})")

_FRACTION = re.compile(rf"({_SIGN})?\s*({_UNSIGNED})\s*/\s*({_SIGN})?\s*({_UNSIGNED})")

_LATEX_FRACTION = re.compile(
    rf"({_SIGN})?\s*\\[dt]?frac\s*\{{\s*({_SIGN})?\s*({_UNSIGNED})\s*\}}"
    rf"\s*\{{\s*({_SIGN})?\s*({_UNSIGNED})\s*\}}"
)

_BOX_TOKENS = re.compile(r"\\(?:boxed|fbox)\s*\{|\\(?:boxed|fbox) +([^\s${}]+)|[{}]")

_BOX_WHOLE = re.compile(r"\\(?:boxed|fbox)\s*\{(.*)\}", re.DOTALL)

_GSM8K_MARKER = re.compile(r"####[^\S\n]*([^\n]*)")

_ANSWER_PHRASE = re.compile(
    r"\banswer\b[^\S\n]*(?:\*\*)?[^\S\n]*"
    r"(?:is\b|was\b|would\s+be\b|will\s+be\b|should\s+be\b|=|:|\uff1a)"
    r"[^\S\n]*(?:\*\*)?[^\S\n]*:?",
    re.IGNORECASE,
)

_NEXT_LINE = re.compile(r"\s*([^\n]*)")

_PHRASE_WINDOW = 500

_SENTENCE_END = re.compile(r"\.(?:\s|$)|;|\n")

_SPACING = re.compile(r"\\[!,;:> ]|\\quad|\\qquad|~")


def extract_answer(text: str) -> str | None:
    if not isinstance(text, str):
        return None
    for rule in (_boxed, _after_gsm8k_marker, _after_answer_phrase, _last_number):
        answer = rule(text)
        if answer:
            return answer
    return None


def parse_number(text: str) -> Fraction | None:
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


def check_answer(text: str, reference: str) -> bool:
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


def _boxed(text: str) -> str | None:
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
    content = best[1]
    # \boxed{\boxed{5}}: the outer box closes last; its answer is the inner one.
    while (inner := _BOX_WHOLE.fullmatch(content)) and _balanced(inner.group(1)):
        content = inner.group(1).strip()
    return content or None


def _balanced(text: str) -> bool:
    depth = 0
    for char in text:
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth < 0:
                return False
    return depth == 0


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


def _strip_number_decorations(text: str) -> str:
    text = text.strip()
    for opening, closing in (("$", "$"), ("\\(", "\\)"), ("\\[", "\\]"), ("**", "**")):
        wrapped = text.startswith(opening) and text.endswith(closing)
        if wrapped and len(text) >= len(opening) + len(closing):
            text = text[len(opening) : -len(closing)].strip()
    text = _SPACING.sub("", text)
    text = text.replace("{,}", ",")
    # A unit after the number: 5\text{ cm}, 5 \mbox{ m}.
    text = re.sub(r"\s*\\(?:text|mbox|mathrm)\s*\{[^{}]*\}\s*$", "", text)
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


# ------------------------------------------------------------ llm_envs.parsing.python_code

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)


def strip_think_blocks(text: str) -> str:
    return _THINK.sub("", text)


# ----------------------------------------------------- llm_envs.expert_iteration.agents

_QUESTION = re.compile(r"What is (.+?)\?")

_MAX_EXPRESSION_CHARS = 2000


def evaluate_arithmetic(question: str) -> Fraction | None:
    match = _QUESTION.search(question)
    if match is None or len(match.group(1)) > _MAX_EXPRESSION_CHARS:
        return None
    try:
        tree = ast.parse(match.group(1), mode="eval")
        return _evaluate(tree.body)
    except (SyntaxError, ValueError, ZeroDivisionError, RecursionError):
        return None


def _evaluate(node: ast.expr) -> Fraction:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return Fraction(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        value = _evaluate(node.operand)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp):
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Add):
            return left + right
        if isinstance(node.op, ast.Sub):
            return left - right
        if isinstance(node.op, ast.Mult):
            return left * right
        if isinstance(node.op, ast.Div):
            return left / right
    raise ValueError(f"not plain arithmetic: {ast.dump(node)[:80]}")
