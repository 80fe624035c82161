"""A command line built from a config: one flag per field, its help from the field's docstring.

A trainer's config is a pydantic dataclass (see :mod:`baselines.config`) whose
fields each carry a docstring, in the class that introduces them; pydantic keeps
that text as the field's ``description``. :func:`parse_config` turns the fields
into an :mod:`argparse` command line (``field_name`` becomes ``--field-name``)
whose help is that text as plain text (:func:`plain_text` takes the docstring
markup out), followed by the bounds the field's type declares (``Must be >= 1.``);
:func:`config_table` renders the same text as a Markdown table for the docs, so
the three can never disagree. The config checks the values; a bad one is a
command-line error naming the field, the rule and the value. :func:`to_argv`
writes a config back as a command line.

Field types understood: ``bool`` (``--flag`` / ``--no-flag``), ``int``,
``float``, ``str``, ``Literal[...]`` of strs (choices), tuples of ints, floats or
strs (several values), ``dict[...]`` (a JSON object), and any of these
``| None`` (the word ``none`` on the command line). Anything else is a
``TypeError`` when the parser is built, so a config cannot grow a field that the
command line silently cannot set.

Example:
    >>> from pydantic import Field
    >>> from pydantic.dataclasses import dataclass
    >>> from baselines.config import VALIDATION
    >>> @dataclass(frozen=True, kw_only=True, config=VALIDATION)
    ... class Demo:
    ...     '''A demo (in a module, the docstring under a field is its description).'''
    ...
    ...     steps: int = Field(3, ge=1, description="how many steps.")
    ...     name: str | None = Field(None, description="a name, or None.")
    >>> parse_config(Demo, ["--steps", "5"])
    Demo(steps=5, name=None)
    >>> config_table(Demo).splitlines()[2]
    '| `--steps` | `3` | how many steps. Must be >= 1. |'
"""

from __future__ import annotations

import argparse
import inspect
import json
import re
import sys
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from typing import Annotated, Any, Literal, TypeVar, get_args, get_origin

from annotated_types import GroupedMetadata
from pydantic import ValidationError
from pydantic.dataclasses import is_pydantic_dataclass
from pydantic.fields import FieldInfo

from baselines.config import FlatField, flat_fields, flat_values
from llm_envs.command_line import CommandParser

__all__ = ["build_parser", "config_table", "parse_config", "plain_text", "to_argv"]

ConfigT = TypeVar("ConfigT")


def _field_infos(cls: type) -> dict[str, FlatField]:
    """Every setting of the config class ``cls`` by its flat name (a sub-config's too), in order."""
    if not is_pydantic_dataclass(cls):
        raise TypeError(f"a config must be a pydantic dataclass, got {cls!r}")
    return {f.name: f for f in flat_fields(cls)}


def _description(cls: type, name: str) -> str | None:
    """The docstring under the field ``name``, on one line; None if it has none.

    pydantic reads the docstrings in a class's own source only, so a field a
    subclass inherits (or declares again to change its default) finds its text in
    the base class that documents it.
    """
    for klass in cls.__mro__:
        info = getattr(klass, "__pydantic_fields__", {}).get(name)
        if info is not None and info.description:
            return " ".join(info.description.split())
    return None


def _strip_none(hint: Any) -> tuple[Any, bool]:
    """``(X, True)`` for ``X | None``, ``(hint, False)`` otherwise."""
    if get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in get_args(hint) if a is not type(None)]
        if len(args) == 1 and len(get_args(hint)) == 2:
            return args[0], True
        raise TypeError(f"only `X | None` unions are supported on the command line, got {hint}")
    return hint, False


def _base(hint: Any) -> Any:
    """The type under ``Annotated[...]``."""
    return get_args(hint)[0] if get_origin(hint) is Annotated else hint


def _metadata(hint: Any) -> tuple[Any, ...]:
    return hint.__metadata__ if get_origin(hint) is Annotated else ()


def _number(x: Any) -> str:
    return str(int(x)) if float(x).is_integer() else repr(x)


def _interval(metadata: Iterable[Any]) -> str:
    """The bounds among :mod:`annotated_types` metadata: ``>= 1``, ``in (0, 1]``; "" if none."""
    bounds: dict[str, Any] = {}
    for item in metadata:
        for part in item if isinstance(item, GroupedMetadata) else (item,):
            for key in ("ge", "gt", "le", "lt"):
                if getattr(part, key, None) is not None:
                    bounds[key] = getattr(part, key)
    low = ("[", ">=", bounds["ge"]) if "ge" in bounds else ("(", ">", bounds.get("gt"))
    high = ("]", "<=", bounds["le"]) if "le" in bounds else (")", "<", bounds.get("lt"))
    if low[2] is not None and high[2] is not None:
        return f"in {low[0]}{_number(low[2])}, {_number(high[2])}{high[0]}"
    return next((f"{sign} {_number(b)}" for _, sign, b in (low, high) if b is not None), "")


def _bounds_text(info: FieldInfo) -> str:
    """The bounds a field's type declares, as a sentence: ``Must be >= 1.`` ("" if none)."""
    hint = _strip_none(info.annotation)[0]
    own = _interval([*info.metadata, *_metadata(hint)])
    if own:
        return f"Must be {own}."
    origin, args = get_origin(_base(hint)), get_args(_base(hint))
    if origin is tuple:
        each = {_interval(_metadata(a)) for a in args if a is not Ellipsis}
        if len(each) == 1 and "" not in each:
            return f"Each must be {each.pop()}."
    if origin is dict and len(args) == 2 and _interval(_metadata(args[1])):
        return f"Values must be {_interval(_metadata(args[1]))}."
    return ""


def _field_rows(cls: type) -> list[tuple[str, FieldInfo, str]]:
    """``(name, field info, text)`` of every field: its docstring, then its bounds.

    Raises:
        ValueError: a field has no docstring (every field is documented).
    """
    infos = _field_infos(cls)
    missing = [name for name, f in infos.items() if _description(f.owner, f.field) is None]
    if missing:
        raise ValueError(
            f"{cls.__name__} fields {missing} are not documented; add a docstring under each, "
            "in the class that introduces it"
        )
    rows = []
    for name, setting in infos.items():
        text = f"{_description(setting.owner, setting.field)} {_bounds_text(setting.info)}"
        rows.append((name, setting.info, text.strip()))
    return rows


def _default(info: FieldInfo) -> Any:
    return info.get_default(call_default_factory=True)


def _shown(info: FieldInfo) -> str:
    if info.is_required():
        return "required"
    default = _default(info)
    return json.dumps(default) if isinstance(default, Mapping) else repr(default)


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
        >>> plain_text("``auto`` picks :class:`~baselines.config.RunConfig` via :mod:`argparse`")
        'auto picks RunConfig via argparse'
    """
    return _LITERAL.sub(r"\1", _ROLE.sub(_role_text, text))


def _add_field(parser: argparse.ArgumentParser, name: str, info: FieldInfo, text: str) -> None:
    flag = "--" + name.replace("_", "-")
    inner, optional = _strip_none(info.annotation)
    inner = _base(inner)
    origin = get_origin(inner)
    # argparse %-formats help strings: escape the percent signs of the text.
    help_text = f"{plain_text(text)} (default: {_shown(info)})".replace("%", "%%")
    kwargs: dict[str, Any] = {"dest": name, "help": help_text}
    if info.is_required():
        kwargs["required"] = True
    else:
        kwargs["default"] = _default(info)
    if inner is bool and not optional:
        parser.add_argument(flag, action=argparse.BooleanOptionalAction, **kwargs)
    elif inner in (int, float, str):
        parser.add_argument(flag, type=_none_or(inner, optional), metavar=inner.__name__, **kwargs)
    elif origin is Literal:
        choices = list(get_args(inner)) + ([None] if optional else [])
        if {type(c) for c in choices if c is not None} != {str}:
            raise TypeError(f"{name}: Literal choices must be strings, got {choices}")
        parser.add_argument(flag, type=_none_or(str, optional), choices=choices, **kwargs)
    elif origin is tuple:
        args = [_base(a) for a in get_args(inner)]
        variadic = len(args) == 2 and args[1] is Ellipsis
        element = args[0]
        if element not in (int, float, str) or not (variadic or all(a is element for a in args)):
            raise TypeError(f"{name}: tuples of one type, int, float or str, only; got {inner}")
        count: Any = "+" if variadic else len(args)
        convert = _none_or(element, optional)  # an optional tuple's "none" reads back as None
        parser.add_argument(flag, type=convert, nargs=count, metavar=element.__name__, **kwargs)
    elif origin is dict or inner is dict:
        parser.add_argument(flag, type=_none_or(_json_object, optional), metavar="JSON", **kwargs)
    else:
        raise TypeError(f"{name}: type {info.annotation} cannot be set from the command line")


_NEGATIVE_NUMBER = re.compile(r"^-(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")
"""What :func:`build_parser` reads as a negative number: ``-1``, ``-0.5``, ``-.5``, ``-1e-5``."""


def build_parser(
    cls: type, *, prog: str | None = None, epilog: str | None = None
) -> argparse.ArgumentParser:
    """An :class:`argparse.ArgumentParser` with one flag per field of the config class ``cls``.

    The description is the class docstring, with its line breaks; each flag's
    help is the field's docstring followed by the bounds its type declares and
    its default, all as plain text (:func:`plain_text`). ``epilog`` (an example
    command, say) is shown as written, after the flags.
    """
    rows = _field_rows(cls)
    summary = plain_text(inspect.cleandoc(cls.__doc__ or ""))
    parser = CommandParser(
        prog=prog,
        description=summary.replace("%", "%%"),
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    # A negative number in any notation is a value, not a flag (argparse before
    # Python 3.13 reads "-1e-5" as an unknown option and reports a missing value).
    parser._negative_number_matcher = _NEGATIVE_NUMBER
    for name, info, text in rows:
        _add_field(parser, name, info, text)
    return parser


def _error_text(error: ValidationError) -> str:
    """A config's refusal in one line: ``top_p: Input should be a finite number, got nan``."""
    problems = []
    for item in error.errors(include_url=False):
        if not item["loc"] and item["type"] == "value_error":  # a rule of the config's own
            problems.append(str(item["ctx"]["error"]))
            continue
        first, *rest = item["loc"]
        where = f"{first}{''.join(f'[{part!r}]' for part in rest)}"
        problems.append(f"{where}: {item['msg']}, got {item['input']!r}")
    return "; ".join(problems)


def parse_config(
    cls: type[ConfigT],
    argv: Sequence[str] | None = None,
    *,
    prog: str | None = None,
    epilog: str | None = None,
) -> ConfigT:
    """Parse ``argv`` (default: ``sys.argv[1:]``) into an instance of the config class ``cls``.

    The config checks the values; a refusal is reported as a command-line error
    (exit status 2) naming the field, the rule and the value. ``prog`` and
    ``epilog`` are :func:`build_parser`'s.
    """
    parser = build_parser(cls, prog=prog, epilog=epilog)
    namespace = parser.parse_args(sys.argv[1:] if argv is None else list(argv))
    values = {
        k: (None if v == [None] else tuple(v)) if isinstance(v, list) else v
        for k, v in vars(namespace).items()
    }
    try:
        return cls(**values)
    except ValidationError as exc:
        parser.error(_error_text(exc))


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
    argv: list[str] = []
    values = flat_values(config)
    for name, setting in _field_infos(type(config)).items():
        flag = "--" + name.replace("_", "-")
        value = values[name]
        inner, optional = _strip_none(setting.info.annotation)
        if value is None:
            argv += [flag, "none"]
        elif _base(inner) is bool and not optional:
            argv.append(flag if value else "--no-" + flag[2:])
        elif isinstance(value, Mapping):
            try:
                argv.append(f"{flag}={json.dumps(value)}")
            except TypeError as exc:
                raise ValueError(f"{name} cannot be written as JSON: {exc}") from None
        elif isinstance(value, tuple | list):
            argv += [flag, *(v if isinstance(v, str) else repr(v) for v in value)]
        elif optional and isinstance(value, str) and value.lower() == "none":
            raise ValueError(f"{name}={value!r} would read back as None")
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
    for name, info, text in _field_rows(cls):
        flag = "--" + name.replace("_", "-")
        rows.append(f"| `{flag}` | `{_shown(info)}` | {_markdown(text)} |")
    return "\n".join(rows)


if __name__ == "__main__":  # pragma: no cover - used to regenerate the docs table
    import importlib

    if len(sys.argv) != 2 or ":" not in sys.argv[1]:
        sys.exit("usage: python -m baselines.cli package.module:ConfigClass")
    module_name, class_name = sys.argv[1].split(":")
    print(config_table(getattr(importlib.import_module(module_name), class_name)))
