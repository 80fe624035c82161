"""A command line built from a config dataclass: one flag per field, help from its docstring.

A trainer's config is a dataclass whose docstring has a Google-style
``Attributes:`` section documenting every field once (see
:class:`baselines.is_trainer.config.ISTrainerConfig`). :func:`parse_config` turns it into
an :mod:`argparse` command line (``field_name`` becomes ``--field-name``) whose
help text is that documentation, and :func:`config_table` renders the same text
as a Markdown table for the docs, so the three can never disagree.

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

__all__ = ["attribute_docs", "build_parser", "config_table", "parse_config"]

ConfigT = TypeVar("ConfigT")

_SECTION = re.compile(r"^(\s*)Attributes:\s*$")
_ENTRY = re.compile(r"^(\s*)([A-Za-z_][A-Za-z0-9_]*)(?:\s*\([^)]*\))?:\s*(.*)$")


def attribute_docs(cls: type) -> dict[str, str]:
    """Return ``{field: description}`` from the ``Attributes:`` section of ``cls.__doc__``.

    Continuation lines are joined with single spaces.

    Raises:
        ValueError: a dataclass field has no entry in the section (every field is
            documented exactly once, in the docstring).
    """
    lines = (cls.__doc__ or "").splitlines()
    docs: dict[str, str] = {}
    section_indent: int | None = None
    entry_indent: int | None = None
    current: str | None = None
    for line in lines:
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
    if dataclasses.is_dataclass(cls):
        missing = [f.name for f in dataclasses.fields(cls) if f.name not in docs]
        if missing:
            raise ValueError(
                f"{cls.__name__} fields {missing} are not documented; add them to the "
                "Attributes: section of its docstring"
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


def _add_field(
    parser: argparse.ArgumentParser, field: dataclasses.Field[Any], annotation: Any, doc: str
) -> None:
    flag = "--" + field.name.replace("_", "-")
    inner, optional = _strip_optional(annotation)
    origin = get_origin(inner)
    default = field.default
    if default is dataclasses.MISSING and field.default_factory is not dataclasses.MISSING:
        default = field.default_factory()
    kwargs: dict[str, Any] = {"dest": field.name, "default": default}
    shown = json.dumps(default) if isinstance(default, Mapping) else repr(default)
    # argparse %-formats help strings: escape the percent signs of the text.
    kwargs["help"] = f"{doc} (default: {shown})".replace("%", "%%")
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


def build_parser(cls: type, *, prog: str | None = None) -> argparse.ArgumentParser:
    """An :class:`argparse.ArgumentParser` with one flag per field of the dataclass ``cls``.

    The description is the first paragraph of ``cls.__doc__``; each flag's help is
    the field's entry in its ``Attributes:`` section.
    """
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"build_parser needs a dataclass, got {cls!r}")
    docs = attribute_docs(cls)
    summary = (cls.__doc__ or "").strip().split("\n\n")[0]
    parser = argparse.ArgumentParser(prog=prog, description=summary)
    hints = typing.get_type_hints(cls)
    for field in dataclasses.fields(cls):
        _add_field(parser, field, hints[field.name], docs[field.name])
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


def _markdown(text: str) -> str:
    """Docstring markup to Markdown: Sphinx roles and double backticks become single backticks."""
    text = re.sub(r":[a-z]+:`~?([^`]+)`", r"`\1`", text)
    return re.sub(r"``([^`]+)``", r"`\1`", text).replace("|", "\\|")


def config_table(cls: type) -> str:
    """The fields of ``cls`` as a Markdown table: flag, default, description.

    Example:
        >>> from baselines.is_trainer.config import ISTrainerConfig
        >>> config_table(ISTrainerConfig).splitlines()[0]
        '| flag | default | description |'
    """
    docs = attribute_docs(cls)
    rows = ["| flag | default | description |", "| --- | --- | --- |"]
    for field in dataclasses.fields(cls):
        default = field.default
        if default is dataclasses.MISSING and field.default_factory is not dataclasses.MISSING:
            default = field.default_factory()
        shown = json.dumps(default) if isinstance(default, Mapping) else repr(default)
        flag = "--" + field.name.replace("_", "-")
        rows.append(f"| `{flag}` | `{shown}` | {_markdown(docs[field.name])} |")
    return "\n".join(rows)


if __name__ == "__main__":  # pragma: no cover - used to regenerate the docs table
    import importlib

    if len(sys.argv) != 2 or ":" not in sys.argv[1]:
        sys.exit("usage: python -m baselines.cli package.module:ConfigClass")
    module_name, class_name = sys.argv[1].split(":")
    print(config_table(getattr(importlib.import_module(module_name), class_name)))
