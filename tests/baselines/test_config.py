"""The shared run settings (``baselines.config``): the checker, docs once, round trips."""

from __future__ import annotations

import dataclasses
import json
import math
import re
import subprocess
import sys
import typing
from typing import Annotated, Any, Literal, get_args, get_origin

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from baselines.cli import _own_attribute_docs, attribute_docs, build_parser, parse_config, to_argv
from baselines.config import (
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    Range,
    RunConfig,
    TrainerConfig,
    UnitFraction,
    bounds_text,
    check_value,
)
from baselines.grpo.config import GRPORunConfig
from baselines.is_trainer.config import ISTrainerConfig
from baselines.magrpo.config import MAGRPOConfig

CONFIGS = [ISTrainerConfig, MAGRPOConfig, GRPORunConfig]
Beta = Annotated[float, Range(ge=0, lt=1)]
Closed = Annotated[float, Range(ge=0, le=1)]
TwoAtMost = Annotated[int, Range(ge=1, le=2, why="two at most")]
Negative = Annotated[float, Range(lt=0)]

# ------------------------------------------------------------------ the checker

NAN, INF = math.nan, math.inf


@pytest.mark.parametrize(
    ("hint", "value", "message"),
    [
        # int: a real int (no bool, float or text), in range
        (PositiveInt, 0, "n must be an int >= 1, got 0"),
        (PositiveInt, True, "n must be an int >= 1, got True"),
        (PositiveInt, 1.0, "n must be an int >= 1, got 1.0"),
        (PositiveInt, "3", "n must be an int >= 1, got '3'"),
        (PositiveInt, None, "n must be an int >= 1, got None"),
        (NonNegativeInt, -1, "n must be an int >= 0, got -1"),
        (TwoAtMost, 3, "n must be an int in [1, 2] (two at most), got 3"),
        (int, NAN, "n must be an int, got nan"),
        # float: a finite int or float, in range
        (PositiveFloat, NAN, "n must be a finite number > 0, got nan"),
        (PositiveFloat, INF, "n must be a finite number > 0, got inf"),
        (PositiveFloat, -INF, "n must be a finite number > 0, got -inf"),
        (PositiveFloat, 0.0, "n must be a finite number > 0, got 0.0"),
        (PositiveFloat, True, "n must be a finite number > 0, got True"),
        (PositiveFloat, "1e-5", "n must be a finite number > 0, got '1e-5'"),
        (NonNegativeFloat, -0.5, "n must be a finite number >= 0, got -0.5"),
        (UnitFraction, 0, "n must be a finite number in (0, 1], got 0"),
        (UnitFraction, 1.5, "n must be a finite number in (0, 1], got 1.5"),
        (Closed, -0.1, "n must be a finite number in [0, 1], got -0.1"),
        (Beta, 1.0, "n must be a finite number in [0, 1), got 1.0"),
        (Negative, 0.0, "n must be a finite number < 0, got 0.0"),
        (float, INF, "n must be a finite number, got inf"),
        # bool, str, Literal
        (bool, 1, "n must be a bool, got 1"),
        (bool, "yes", "n must be a bool, got 'yes'"),
        (str, 3, "n must be a str, got 3"),
        (str, None, "n must be a str, got None"),
        (Literal["a", "b"], "c", "n must be one of ['a', 'b'], got 'c'"),
        (Literal["a", "b"], None, "n must be one of ['a', 'b'], got None"),
        # | None
        (str | None, 3, "n must be a str or None, got 3"),
        (PositiveFloat | None, NAN, "n must be a finite number > 0 or None, got nan"),
        (Literal["a"] | None, "b", "n must be one of ['a'] or None, got 'b'"),
        # tuples: length, then each element, named by its index
        (tuple[Beta, Beta], (0.5,), "n must be a tuple of 2 numbers, got (0.5,)"),
        (tuple[Beta, Beta], 0.5, "n must be a tuple of 2 numbers, got 0.5"),
        (tuple[Beta, Beta], (0.5, 1.0), "n[1] must be a finite number in [0, 1), got 1.0"),
        (tuple[Beta, Beta], (NAN, 0.5), "n[0] must be a finite number in [0, 1), got nan"),
        (tuple[int, ...], (1, "x"), "n[1] must be an int, got 'x'"),
        # dicts: str keys, then each value, named by its key
        (dict[str, NonNegativeInt], [1], "n must be a dict with str keys, got [1]"),
        (dict[str, NonNegativeInt], {1: 1}, "n must be a dict with str keys, got {1: 1}"),
        (dict[str, NonNegativeInt], {"a": -1}, "n['a'] must be an int >= 0, got -1"),
        (dict[str, NonNegativeInt], {"a": True}, "n['a'] must be an int >= 0, got True"),
        (dict[str, float], {"a": NAN}, "n['a'] must be a finite number, got nan"),
        (dict[str, Any], "{}", "n must be a dict with str keys, got '{}'"),
    ],
)
def test_checker_rejects_with_the_field_the_rule_and_the_value(hint, value, message):
    with pytest.raises(ValueError, match=re.escape(message)) as error:
        check_value("n", value, hint)
    assert str(error.value) == message


@pytest.mark.parametrize(
    ("hint", "value", "expected"),
    [
        (PositiveFloat, 1, 1.0),  # an int for a float is stored as a float
        (PositiveInt, np.int64(3), 3),
        (NonNegativeInt, 0, 0),  # bounds are inclusive where they say >=
        (UnitFraction, 1, 1.0),
        (Beta, 0, 0.0),
        (float, -1e300, -1e300),
        (tuple[Beta, Beta], [0.9, 0], (0.9, 0.0)),  # a list for a tuple becomes a tuple
        (tuple[int, ...], [1, 2, 3], (1, 2, 3)),
        (dict[str, float], {"a": 1}, {"a": 1.0}),
        (dict[str, NonNegativeInt] | None, None, None),
        (str | None, None, None),
        (Literal["a", "b"], "b", "b"),
        (bool, False, False),
    ],
)
def test_checker_accepts_and_normalizes(hint, value, expected):
    checked = check_value("n", value, hint)
    assert checked == expected and type(checked) is type(expected)


def test_checker_returns_valid_values_themselves():
    kwargs, pair, anything = {"a": [1]}, (0.5, 0.5), object()
    assert check_value("n", kwargs, dict[str, Any]) is kwargs
    assert check_value("n", pair, tuple[Beta, Beta]) is pair
    assert check_value("n", anything, Any) is anything


@pytest.mark.parametrize(
    ("make", "error", "message"),
    [
        (lambda: Range(), ValueError, "needs at least one bound"),
        (lambda: Range(ge=0, gt=0), ValueError, "one lower and one upper bound at most"),
        (lambda: Range(le=1, lt=1), ValueError, "one lower and one upper bound at most"),
        (lambda: check_value("n", "x", Annotated[str, Range(ge=1)]), TypeError, "bounds an int"),
        (lambda: check_value("n", 1, int | str), TypeError, "only `X | None` unions"),
        (lambda: check_value("n", 1, typing.Callable[[], int]), TypeError, "cannot check"),
    ],
)
def test_bad_declarations_are_type_errors(make, error, message):
    with pytest.raises(error, match=message):
        make()


@pytest.mark.parametrize(
    ("hint", "text"),
    [
        (PositiveInt, "Must be >= 1."),
        (UnitFraction | None, "Must be in (0, 1]."),
        (tuple[Beta, Beta], "Each must be in [0, 1)."),
        (dict[str, NonNegativeFloat] | None, "Values must be >= 0."),
        (str, ""),
        (dict[str, Any], ""),
    ],
)
def test_bounds_text(hint, text):
    assert bounds_text(hint) == text


# ------------------------------------------------------ every numeric field of every config


def _numeric_fields(cls: type) -> list[tuple[str, Any, Range | None, bool]]:
    """``(field, int or float, range, inside a dict)`` of every number a config holds."""
    found = []
    for name, hint in typing.get_type_hints(cls, include_extras=True).items():
        inner = hint
        in_dict = False
        for arg in get_args(hint) if get_origin(hint) in (typing.Union, type(int | None)) else ():
            if arg is not type(None):
                inner = arg
        if get_origin(inner) is dict:
            inner, in_dict = get_args(inner)[1], True
        bounds = None
        if get_origin(inner) is Annotated:
            bounds = next(m for m in inner.__metadata__ if isinstance(m, Range))
            inner = get_args(inner)[0]
        if inner in (int, float):
            found.append((name, inner, bounds, in_dict))
    return found


def _bad_values(kind: type, bounds: Range | None) -> list[Any]:
    bad: list[Any] = [True, "1", None] if kind is int else [NAN, INF, -INF, True, "1.0"]
    if kind is int:
        bad.append(1.5)
    if bounds is not None:
        step = 1 if kind is int else 1e-9
        if bounds.ge is not None:
            bad.append(kind(bounds.ge - step))
        if bounds.gt is not None:
            bad.append(kind(bounds.gt))
        if bounds.le is not None:
            bad.append(kind(bounds.le + step))
        if bounds.lt is not None:
            bad.append(kind(bounds.lt))
    return bad


NUMERIC_CASES = [
    pytest.param(cls, name, value, in_dict, id=f"{cls.__name__}.{name}={value!r}")
    for cls in CONFIGS
    for name, kind, bounds, in_dict in _numeric_fields(cls)
    for value in _bad_values(kind, bounds)
]


def test_every_numeric_field_is_covered():
    names = {(p.values[0].__name__, p.values[1]) for p in NUMERIC_CASES}
    assert ("ISTrainerConfig", "strategy_mix") in names and ("MAGRPOConfig", "top_p") in names
    assert ("GRPORunConfig", "beta") in names and ("MAGRPOConfig", "termination_threshold") in names
    assert len(names) == sum(len(_numeric_fields(c)) for c in CONFIGS)


@pytest.mark.parametrize(("cls", "name", "value", "in_dict"), NUMERIC_CASES)
def test_every_numeric_field_rejects_nan_inf_bool_text_and_out_of_range(cls, name, value, in_dict):
    field = f"{name}['iid']" if in_dict else name
    with pytest.raises(ValueError, match=f"^{re.escape(field)} must be ") as error:
        cls(**{name: {"iid": value} if in_dict else value})
    assert str(error.value).startswith(f"{field} must be ")
    assert str(error.value).endswith(f", got {value!r}")


def test_cross_field_rules_stay_in_their_config():
    with pytest.raises(ValueError, match="needs sampler_url"):
        ISTrainerConfig(sampler="openai")
    with pytest.raises(ValueError, match="strategy_mix must ask for at least one episode"):
        ISTrainerConfig(strategy_mix={})
    with pytest.raises(ValueError, match="warm_start_broken_rate is for --env debate"):
        ISTrainerConfig(env="expert_iteration", warm_start_broken_rate=0.5)
    with pytest.raises(ValueError, match=r"warm_start_broken_rate must be .*\[0, 1\], got 1.5"):
        ISTrainerConfig(warm_start_broken_rate=1.5)
    with pytest.raises(ValueError, match="needs an expert"):
        MAGRPOConfig(external_mode="expert_edits")
    with pytest.raises(ValueError, match="task for env='debate'"):
        GRPORunConfig(task="mbpp")


# --------------------------------------------------------------- docs, once each


@pytest.mark.parametrize("cls", CONFIGS)
def test_every_field_is_documented_exactly_once_in_the_hierarchy(cls):
    fields = [f.name for f in dataclasses.fields(cls)]
    assert set(attribute_docs(cls)) == set(fields)
    documented = [
        name
        for klass in cls.__mro__
        for name in _own_attribute_docs(vars(klass).get("__doc__") or "")
    ]
    assert sorted(documented) == sorted(fields)  # each field once, none more
    assert all(attribute_docs(cls)[name].strip() for name in fields)


def test_shared_fields_come_first_and_in_the_same_order():
    shared = [f.name for f in dataclasses.fields(TrainerConfig)]
    assert [f.name for f in dataclasses.fields(ISTrainerConfig)][: len(shared)] == shared
    assert [f.name for f in dataclasses.fields(MAGRPOConfig)][: len(shared)] == shared
    run = [f.name for f in dataclasses.fields(RunConfig)]
    assert [f.name for f in dataclasses.fields(GRPORunConfig)][: len(run)] == run


def test_documenting_a_field_twice_is_an_error():
    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Twice(RunConfig):
        """A config that documents ``seed`` again.

        Attributes:
            seed: my seed.
        """

    with pytest.raises(ValueError, match="'seed' is documented in both RunConfig and Twice"):
        attribute_docs(Twice)


def test_documenting_a_name_that_is_no_field_is_an_error():
    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Stray(RunConfig):
        """A config with a stale entry.

        Attributes:
            gone: a removed field.
        """

    with pytest.raises(ValueError, match=r"Stray documents \['gone'\], which are not its fields"):
        attribute_docs(Stray)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Retyped(RunConfig):
    """A subclass that changes a field's type, not only its default."""

    max_tokens: int = 3
    output_dir: str = "out"


def test_an_override_may_change_the_default_only():
    with pytest.raises(TypeError, match="declared with different types"):
        Retyped()


def test_configs_are_keyword_only():
    with pytest.raises(TypeError):
        GRPORunConfig("tiny")


# ------------------------------------------------------------------ command line


def test_help_and_tables_show_the_bounds():
    text = build_parser(ISTrainerConfig).format_help()
    assert "Must be >= 1." in " ".join(text.split())
    assert "Each must be in [0, 1)." in " ".join(text.split())


def test_a_bad_flag_value_names_field_bound_and_value(capsys):
    with pytest.raises(SystemExit):
        parse_config(MAGRPOConfig, ["--top-p", "nan"])
    assert "top_p must be a finite number in (0, 1], got nan" in capsys.readouterr().err


def test_to_argv_refuses_what_the_command_line_cannot_carry():
    with pytest.raises(ValueError, match="would read back as None"):
        to_argv(ISTrainerConfig(eval_opponent="None"))
    with pytest.raises(ValueError, match="cannot be written as JSON"):
        to_argv(MAGRPOConfig(external_mode="expert_edits", env_kwargs={"expert": print}))


# -------------------------------------------------- property: to_json and back


def _strategy(hint: Any, optional_text: bool = False) -> st.SearchStrategy[Any]:
    origin, args = get_origin(hint), get_args(hint)
    if origin is Annotated:
        base = args[0]
        bounds = next(m for m in hint.__metadata__ if isinstance(m, Range))
        low = bounds.ge if bounds.ge is not None else bounds.gt
        high = bounds.le if bounds.le is not None else bounds.lt
        if base is int:
            return st.integers(
                min_value=None if low is None else int(low) + (bounds.gt is not None),
                max_value=int(high) - (bounds.lt is not None) if high is not None else 10**9,
            )
        return st.floats(
            min_value=low,
            max_value=high,
            exclude_min=bounds.gt is not None,
            exclude_max=bounds.lt is not None,
            allow_nan=False,
            allow_infinity=False,
        )
    if origin in (typing.Union, type(int | None)):
        (inner,) = [a for a in args if a is not type(None)]
        return st.none() | _strategy(inner, optional_text=True)
    if hint is bool:
        return st.booleans()
    if hint is int:
        return st.integers()
    if hint is float:
        return st.floats(allow_nan=False, allow_infinity=False)
    if hint is str:
        text = st.text(max_size=12)
        return text.filter(lambda s: s.lower() != "none") if optional_text else text
    if hint is Any:
        return (
            st.none()
            | st.booleans()
            | st.integers()
            | st.text(max_size=5)
            | st.floats(allow_nan=False, allow_infinity=False)
        )
    if origin is Literal:
        return st.sampled_from(args)
    if origin is tuple:
        return st.tuples(*(_strategy(a) for a in args))
    if origin is dict:
        return st.dictionaries(st.text(max_size=8), _strategy(args[1]), max_size=3)
    raise TypeError(f"no strategy for {hint}")


def _is_valid(values: dict[str, Any]) -> dict[str, Any]:
    """Repair what the cross-field rules forbid (a few rules, so no draw is thrown away)."""
    if "loss_type" in values:  # GRPO: no `sampler` field; a sampler_url turns servers on
        if values["sampler_url"] is not None:
            values["sampler_url"] = "http://127.0.0.1:8000/v1"
            values["vllm"] = "off" if values["vllm"] == "on" else values["vllm"]
        servers = values["sampler_url"] is not None
    else:
        servers = values.get("sampler") == "openai"
    if values.get("sampler") == "openai" and not values["sampler_url"]:
        values["sampler_url"] = "http://127.0.0.1:8000/v1"
    if values.get("sampler_weights_dir") is not None and not servers:
        values["sampler_weights_dir"] = None
    if values.get("sampler_weight_transfer") == "nccl" and (
        not servers or values["sampler_weights_dir"] is not None or values["device"] == "cpu"
    ):
        values["sampler_weight_transfer"] = "folder"
    if "strategy_mix" in values and sum(values["strategy_mix"].values()) < 1:
        values["strategy_mix"] = {**values["strategy_mix"], "iid": 1}
    if values.get("strategy_weights") is not None:
        values["strategy_weights"] = {s: 1.0 for s in values["strategy_mix"]}
    if "warm_start_steps" in values:  # the IS trainer: a task, a teacher of the family
        from llm_envs.registration import family_class

        family = family_class(values["env"])
        if values["task"] not in family.tasks:
            values["task"] = "default"
        if family.teacher_options is None:
            values["warm_start_steps"] = 0
        if "broken_rate" not in (family.teacher_options or ()):
            values["warm_start_broken_rate"] = 0.0
    if values.get("external_mode") == "expert_edits":
        values["external_mode"] = "plain"
    if not values["project"].strip():  # every config: a tracker project has a name
        values["project"] = "llm-envs"
    if not all(n.strip() for n in values["lora_target_modules"].split(",")):
        values["lora_target_modules"] = "all-linear"
    if "num_agents" in values:  # MAGRPO: fields of the config, not env arguments
        owned = {"problems", "num_agents", "num_turns", "external_mode", "termination_threshold"}
        values["env_kwargs"] = {k: v for k, v in values["env_kwargs"].items() if k not in owned}
    if "loss_type" in values:  # GRPO: a task of the env, task_kwargs for arithmetic only
        from baselines.grpo.config import tasks_of

        if values["task"] not in tasks_of(values["env"]):
            values["task"] = "default"
        if values["task"] != "arithmetic":
            values["task_kwargs"] = {}
    return values


def _configs(cls: type) -> st.SearchStrategy[Any]:
    hints = typing.get_type_hints(cls, include_extras=True)
    from llm_envs.registration import family_names

    fields = {f.name: _strategy(hints[f.name]) for f in dataclasses.fields(cls)}
    if hints.get("env") is str:  # a registered family's name
        fields["env"] = st.sampled_from(family_names())
    return st.fixed_dictionaries(fields).map(_is_valid).map(lambda values: cls(**values))


@pytest.mark.parametrize("cls", CONFIGS)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_valid_config_round_trips_through_json_and_the_command_line(cls, data):
    config = data.draw(_configs(cls))
    from_json = cls(**json.loads(config.to_json()))
    assert from_json == config
    assert parse_config(cls, to_argv(from_json)) == config


@pytest.mark.parametrize("cls", CONFIGS)
def test_defaults_round_trip(cls):
    assert parse_config(cls, to_argv(cls())) == cls() == parse_config(cls, [])


# ------------------------------------------------------------------------ imports


def test_configs_do_not_import_torch():
    code = (
        "import sys, baselines.is_trainer.config, baselines.magrpo.config, "
        "baselines.grpo.config, baselines.cli; assert 'torch' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_loss_names_agree_with_the_losses():
    pytest.importorskip("torch")
    from baselines.config import LossName
    from baselines.training import losses

    assert get_args(LossName) == get_args(losses.LossName) == tuple(losses.LOSSES)


@dataclasses.dataclass(frozen=True)
class _Signed:
    """A config with signed numbers.

    Attributes:
        x: a number.
        y: two numbers.
        n: a whole number.
    """

    x: float = 0.0
    y: tuple[float, float] = (0.0, 0.0)
    n: int = 0


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--x", "-1e-5"], _Signed(x=-1e-5)),
        (["--x", "-.5", "--n", "-3"], _Signed(x=-0.5, n=-3)),
        (["--y", "-2", "-1.5E+2"], _Signed(y=(-2.0, -150.0))),
    ],
)
def test_negative_numbers_are_values_not_flags(argv, expected):
    assert parse_config(_Signed, argv) == expected


def test_a_negative_learning_rate_is_refused_by_its_rule_not_as_a_missing_value(capsys):
    with pytest.raises(SystemExit):
        parse_config(ISTrainerConfig, ["--learning-rate", "-1e-5"])
    assert "learning_rate must be a finite number > 0, got -1e-05" in capsys.readouterr().err
