"""A command line built from a config dataclass: one flag per field, help from its docstring.

A trainer's config is a dataclass whose docstrings have Google-style
``Attributes:`` sections documenting every field once, in the class that
introduces it (see :mod:`baselines.config` and
:class:`baselines.is_trainer.config.ISTrainerConfig`). :func:`parse_config` turns it into
an :mod:`argparse` command line (``field_name`` becomes ``--field-name``) whose
help text is that documentation as plain text (:func:`plain_text` takes the
docstring markup out), and :func:`config_table` renders the same text as a
Markdown table for the docs, so the three can never disagree. Bounds declared
with a field's type (``Annotated[int, Range(ge=1)]``, see
:class:`baselines.config.Range`) are appended to its text (``Must be >= 1.``).
:func:`to_argv` writes a config back as a command line.

Field types understood: ``bool`` (``--flag`` / ``--no-flag``), ``int``,
``float``, ``str``, ``Literal[...]`` (choices), ``tuple[float, ...]`` and
``tuple[int, ...]`` (several values), ``dict[...]`` (a JSON object), and any of
these ``| None`` (the word ``none`` on the command line). Anything else is a
``TypeError`` when the parser is built, so a config cannot grow a field that
the command line silently cannot set.

Example:
    >>> from dataclasses import dataclass
    >>> @dataclass(frozen=True)
    ... class Demo:
    ...     '''A demo.
    ...
    ...     Attributes:
    ...         steps: how many steps.
    ...         name: a name, or None.
    ...     '''
    ...
    ...     steps: int = 3
    ...     name: str | None = None
    >>> parse_config(Demo, ["--steps", "5"])
    Demo(steps=5, name=None)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypeVar, get_args, get_origin

from baselines.config import bounds_text

__all__ = [
    "attribute_docs",
    "build_parser",
    "config_table",
    "parse_config",
    "plain_text",
    "to_argv",
]

ConfigT = TypeVar("ConfigT")

_SECTION = re.compile(r"^(\s*)Attributes:\s*$", re.MULTILINE)
_ENTRY = re.compile(r"^(\s*)([A-Za-z_][A-Za-z0-9_]*)(?:\s*\([^)]*\))?:\s*(.*)$")


def _own_attribute_docs(doc: str) -> dict[str, str]:
    """``{field: description}`` from the ``Attributes:`` section of one docstring."""
    docs: dict[str, str] = {}
    section_indent: int | None = None
    entry_indent: int | None = None
    current: str | None = None
    for line in doc.splitlines():
        if section_indent is None:
            match = _SECTION.match(line)
            if match:
                section_indent = len(match.group(1))
            continue
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        if indent <= section_indent:  # the next section starts
            break
        entry = _ENTRY.match(line)
        if entry and (entry_indent is None or indent == entry_indent):
            entry_indent = indent
            current = entry.group(2)
            docs[current] = entry.group(3).strip()
        elif current is not None:
            docs[current] = f"{docs[current]} {line.strip()}".strip()
    return docs


def attribute_docs(cls: type) -> dict[str, str]:
    """Return ``{field: description}`` from the ``Attributes:`` sections of ``cls`` and its bases.

    Each class documents the fields it introduces, in its own docstring; the
    entries are collected base first. Continuation lines are joined with single
    spaces.

    Raises:
        ValueError: a dataclass field has no entry, two classes of the hierarchy
            document the same field, or a dataclass documents a name that is not
            one of its fields (every field is documented exactly once).
    """
    docs: dict[str, str] = {}
    where: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        own = _own_attribute_docs(vars(klass).get("__doc__") or "")
        if own and dataclasses.is_dataclass(klass):
            names = {f.name for f in dataclasses.fields(klass)}
            stray = [name for name in own if name not in names]
            if stray:
                raise ValueError(
                    f"{klass.__name__} documents {stray}, which are not its fields; remove "
                    "them from the Attributes: section of its docstring"
                )
        for name, text in own.items():
            if name in where:
                raise ValueError(
                    f"{cls.__name__} field {name!r} is documented in both {where[name]} and "
                    f"{klass.__name__}; document it once, in the class that introduces it"
                )
            docs[name] = text
            where[name] = klass.__name__
    if dataclasses.is_dataclass(cls):
        missing = [f.name for f in dataclasses.fields(cls) if f.name not in docs]
        if missing:
            raise ValueError(
                f"{cls.__name__} fields {missing} are not documented; add them to the "
                "Attributes: section of the docstring of the class that introduces them"
            )
    return docs


def _strip_optional(annotation: Any) -> tuple[Any, bool]:
    origin = get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        args = [a for a in get_args(annotation) if a is not type(None)]
        if len(args) == 1 and len(get_args(annotation)) == 2:
            return args[0], True
        raise TypeError(
            f"only `X | None` unions are supported on the command line, got {annotation}"
        )
    return annotation, False


def _none_or(convert: Any, optional: bool) -> Any:
    if not optional:
        return convert

    def parse(text: str) -> Any:
        return None if text.lower() == "none" else convert(text)

    parse.__name__ = getattr(convert, "__name__", "value")
    return parse


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"expected a JSON object, got {text!r}: {exc}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object, got {text!r}")
    return value


_json_object.__name__ = "JSON object"


def _default(field: dataclasses.Field[Any]) -> Any:
    """The field's default (``dataclasses.MISSING`` when it has none)."""
    if field.default is dataclasses.MISSING and field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return field.default


def _shown(default: Any) -> str:
    if default is dataclasses.MISSING:
        return "required"
    return json.dumps(default) if isinstance(default, Mapping) else repr(default)


_ROLE = re.compile(r":[a-z]+(?::[a-z]+)?:`([^`]+)`")
_LITERAL = re.compile(r"``(.+?)``")


def _role_text(match: re.Match[str]) -> str:
    """What a Sphinx cross-reference reads as: its title, or its target (``~``: the last name)."""
    target = match.group(1)
    titled = re.fullmatch(r"(.*?)\s*<[^<>]+>", target, flags=re.S)
    if titled:
        return titled.group(1)
    if target.startswith("~"):
        return target[1:].split(".")[-1]
    return target.lstrip("!")


def plain_text(text: str) -> str:
    """Docstring markup to the plain text a terminal shows (``--help``).

    Example:
        >>> plain_text("``auto`` picks :class:`~baselines.config.Range` via :mod:`argparse`")
        'auto picks Range via argparse'
    """
    return _LITERAL.sub(r"\1", _ROLE.sub(_role_text, text))


def _described(doc: str, hint: Any) -> str:
    """The field's documentation, followed by the bounds its type declares (if any)."""
    bounds = bounds_text(hint)
    return f"{doc} {bounds}" if bounds else doc


def _add_field(
    parser: argparse.ArgumentParser, field: dataclasses.Field[Any], annotation: Any, doc: str
) -> None:
    flag = "--" + field.name.replace("_", "-")
    inner, optional = _strip_optional(annotation)
    origin = get_origin(inner)
    default = _default(field)
    kwargs: dict[str, Any] = {"dest": field.name}
    if default is dataclasses.MISSING:
        kwargs["required"] = True
    else:
        kwargs["default"] = default
    # argparse %-formats help strings: escape the percent signs of the text.
    kwargs["help"] = f"{plain_text(doc)} (default: {_shown(default)})".replace("%", "%%")
    if inner is bool and not optional:
        parser.add_argument(flag, action=argparse.BooleanOptionalAction, **kwargs)
    elif inner in (int, float, str):
        parser.add_argument(flag, type=_none_or(inner, optional), metavar=inner.__name__, **kwargs)
    elif origin is Literal:
        choices = list(get_args(inner)) + ([None] if optional else [])
        kinds = {type(c) for c in choices if c is not None}
        if kinds != {str}:
            raise TypeError(f"{field.name}: Literal choices must be strings, got {choices}")
        parser.add_argument(flag, type=_none_or(str, optional), choices=choices, **kwargs)
    elif origin is tuple:
        args = get_args(inner)
        variadic = len(args) == 2 and args[1] is Ellipsis
        element = args[0]
        if element not in (int, float) or not (variadic or all(a is element for a in args)):
            raise TypeError(f"{field.name}: tuples of int or float only, got {inner}")
        count: Any = "+" if variadic else len(args)
        parser.add_argument(flag, type=element, nargs=count, metavar=element.__name__, **kwargs)
    elif origin in (dict, Mapping) or inner in (dict, Mapping):
        parser.add_argument(flag, type=_none_or(_json_object, optional), metavar="JSON", **kwargs)
    else:
        raise TypeError(f"{field.name}: type {annotation} cannot be set from the command line")


def _field_rows(cls: type) -> list[tuple[dataclasses.Field[Any], Any, str]]:
    """``(field, plain type, help text)`` of every field of the dataclass ``cls``.

    The help text is the field's documentation followed by the bounds its
    ``Annotated`` type declares (``Must be >= 1.``).
    """
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"a config must be a dataclass, got {cls!r}")
    docs = attribute_docs(cls)
    plain = typing.get_type_hints(cls)
    annotated = typing.get_type_hints(cls, include_extras=True)
    return [
        (f, plain[f.name], _described(docs[f.name], annotated[f.name]))
        for f in dataclasses.fields(cls)
    ]


_NEGATIVE_NUMBER = re.compile(r"^-(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")
"""What :func:`build_parser` reads as a negative number: ``-1``, ``-0.5``, ``-.5``, ``-1e-5``."""


def build_parser(cls: type, *, prog: str | None = None) -> argparse.ArgumentParser:
    """An :class:`argparse.ArgumentParser` with one flag per field of the dataclass ``cls``.

    The description is the text of ``cls.__doc__`` before its ``Attributes:``
    section; each flag's help is the field's entry in the ``Attributes:`` section
    of the class that introduces it, followed by the bounds its type declares.
    Both are shown as plain text (:func:`plain_text`).
    """
    rows = _field_rows(cls)
    summary = plain_text(_SECTION.split(cls.__doc__ or "", maxsplit=1)[0].strip())
    parser = argparse.ArgumentParser(prog=prog, description=summary.replace("%", "%%"))
    # A negative number in any notation is a value, not a flag (argparse before
    # Python 3.13 reads "-1e-5" as an unknown option and reports a missing value).
    parser._negative_number_matcher = _NEGATIVE_NUMBER
    for field, annotation, doc in rows:
        _add_field(parser, field, annotation, doc)
    return parser


def parse_config(
    cls: type[ConfigT], argv: Sequence[str] | None = None, *, prog: str | None = None
) -> ConfigT:
    """Parse ``argv`` (default: ``sys.argv[1:]``) into an instance of the dataclass ``cls``.

    The dataclass validates the values (``__post_init__``); a ``ValueError``
    from it is reported as a command-line error naming the problem.
    """
    parser = build_parser(cls, prog=prog)
    namespace = parser.parse_args(sys.argv[1:] if argv is None else list(argv))
    values = vars(namespace)
    for key, value in values.items():
        if isinstance(value, list):
            values[key] = tuple(value)
    try:
        return cls(**values)
    except (TypeError, ValueError) as exc:
        parser.error(str(exc))
        raise  # unreachable: parser.error exits


def to_argv(config: Any) -> list[str]:
    """The command line that :func:`parse_config` reads back into ``config``: one flag per field.

    Example:
        >>> from baselines.grpo.config import GRPORunConfig
        >>> config = GRPORunConfig(max_steps=2, env_kwargs={"num_agents": 3})
        >>> parse_config(GRPORunConfig, to_argv(config)) == config
        True

    Raises:
        ValueError: a value the command line cannot carry: a dict that is not
            JSON, or the text ``none`` in a ``str | None`` field (it reads back as None).
    """
    hints = typing.get_type_hints(type(config))
    argv: list[str] = []
    for field in dataclasses.fields(config):
        flag = "--" + field.name.replace("_", "-")
        value = getattr(config, field.name)
        inner, optional = _strip_optional(hints[field.name])
        if value is None:
            argv += [flag, "none"]
        elif inner is bool and not optional:
            argv.append(flag if value else "--no-" + flag[2:])
        elif isinstance(value, Mapping):
            try:
                argv.append(f"{flag}={json.dumps(value)}")
            except TypeError as exc:
                raise ValueError(f"{field.name} cannot be written as JSON: {exc}") from None
        elif isinstance(value, tuple | list):
            argv += [flag, *(repr(v) for v in value)]
        elif optional and isinstance(value, str) and value.lower() == "none":
            raise ValueError(f"{field.name}={value!r} would read back as None")
        else:
            argv.append(f"{flag}={value if isinstance(value, str) else repr(value)}")
    return argv


def _markdown(text: str) -> str:
    """Docstring markup to Markdown: Sphinx roles and double backticks become single backticks."""
    text = re.sub(r":[a-z]+:`~?([^`]+)`", r"`\1`", text)
    return re.sub(r"``([^`]+)``", r"`\1`", text).replace("|", "\\|")


def config_table(cls: type) -> str:
    """The fields of ``cls`` as a Markdown table: flag, default, description (with bounds).

    Example:
        >>> from baselines.is_trainer.config import ISTrainerConfig
        >>> config_table(ISTrainerConfig).splitlines()[0]
        '| flag | default | description |'
    """
    rows = ["| flag | default | description |", "| --- | --- | --- |"]
    for field, _, doc in _field_rows(cls):
        flag = "--" + field.name.replace("_", "-")
        rows.append(f"| `{flag}` | `{_shown(_default(field))}` | {_markdown(doc)} |")
    return "\n".join(rows)


if __name__ == "__main__":  # pragma: no cover - used to regenerate the docs table
    import importlib

    if len(sys.argv) != 2 or ":" not in sys.argv[1]:
        sys.exit("usage: python -m baselines.cli package.module:ConfigClass")
    module_name, class_name = sys.argv[1].split(":")
    print(config_table(getattr(importlib.import_module(module_name), class_name)))
