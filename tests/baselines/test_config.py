"""The shared run settings (``baselines.config``): checks, docs once, round trips."""

from __future__ import annotations

import dataclasses
import math
import re
import subprocess
import sys
import typing
from typing import Annotated, Any, Literal, get_args, get_origin

import pytest
from annotated_types import GroupedMetadata
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from pydantic.dataclasses import dataclass

from baselines.cli import build_parser, config_table, parse_config, to_argv
from baselines.config import VALIDATION, RunConfig, TrainerConfig, flat_fields, flat_values
from baselines.grpo.config import GRPORunConfig
from baselines.is_trainer.config import ISTrainerConfig
from baselines.magrpo.config import MAGRPOConfig

CONFIGS = [ISTrainerConfig, MAGRPOConfig, GRPORunConfig]

# ------------------------------------------------- a bad value names field, rule, value

NAN, INF = math.nan, math.inf


@pytest.mark.parametrize(
    ("cls", "kwargs", "where", "message", "value"),
    [
        # int: a real int (no bool, float or text), in range
        (ISTrainerConfig, {"max_tokens": 0}, "max_tokens", "greater than or equal to 1", 0),
        (ISTrainerConfig, {"max_tokens": True}, "max_tokens", "a valid integer", True),
        (ISTrainerConfig, {"max_tokens": 1.0}, "max_tokens", "a valid integer", 1.0),
        (ISTrainerConfig, {"max_tokens": "3"}, "max_tokens", "a valid integer", "3"),
        (ISTrainerConfig, {"max_tokens": None}, "max_tokens", "a valid integer", None),
        (ISTrainerConfig, {"seed": -1}, "seed", "greater than or equal to 0", -1),
        (MAGRPOConfig, {"group_size": 1}, "group_size", "greater than or equal to 2", 1),
        # float: a finite int or float, in range
        (ISTrainerConfig, {"learning_rate": NAN}, "learning_rate", "a finite number", NAN),
        (ISTrainerConfig, {"learning_rate": INF}, "learning_rate", "a finite number", INF),
        (ISTrainerConfig, {"learning_rate": -INF}, "learning_rate", "a finite number", -INF),
        (ISTrainerConfig, {"learning_rate": 0.0}, "learning_rate", "greater than 0", 0.0),
        (ISTrainerConfig, {"learning_rate": True}, "learning_rate", "a valid number", True),
        (ISTrainerConfig, {"learning_rate": "1e-5"}, "learning_rate", "a valid number", "1e-5"),
        (
            ISTrainerConfig,
            {"weight_decay": -0.5},
            "weight_decay",
            "greater than or equal to 0",
            -0.5,
        ),
        (MAGRPOConfig, {"top_p": 0}, "top_p", "greater than 0", 0),
        (MAGRPOConfig, {"top_p": 1.5}, "top_p", "less than or equal to 1", 1.5),
        (MAGRPOConfig, {"discount": -0.1}, "discount", "greater than or equal to 0", -0.1),
        (MAGRPOConfig, {"termination_threshold": INF}, "termination_threshold", "a finite", INF),
        # bool, str, Literal
        (ISTrainerConfig, {"overwrite": 1}, "overwrite", "a valid boolean", 1),
        (ISTrainerConfig, {"overwrite": "yes"}, "overwrite", "a valid boolean", "yes"),
        (ISTrainerConfig, {"model": 3}, "model", "a valid string", 3),
        (ISTrainerConfig, {"model": None}, "model", "a valid string", None),
        (GRPORunConfig, {"sampler_url": 3}, "sampler_url", "a valid string", 3),
        (
            ISTrainerConfig,
            {"loss": "dpo"},
            "loss",
            "'importance_sampling', 'ppo' or 'cispo'",
            "dpo",
        ),
        (GRPORunConfig, {"vllm": None}, "vllm", "'auto', 'on' or 'off'", None),
        # tuples: a tuple (not a list), its length, then each element by its index
        (ISTrainerConfig, {"adam_betas": 0.5}, "adam_betas", "a valid tuple", 0.5),
        (ISTrainerConfig, {"adam_betas": [0.9, 0.95]}, "adam_betas", "a valid tuple", [0.9, 0.95]),
        (ISTrainerConfig, {"adam_betas": (0.5,)}, "adam_betas.1", "Field required", (0.5,)),
        (ISTrainerConfig, {"adam_betas": (0.5, 1.0)}, "adam_betas.1", "less than 1", 1.0),
        (ISTrainerConfig, {"adam_betas": (NAN, 0.5)}, "adam_betas.0", "a finite number", NAN),
        # dicts: str keys, then each value by its key
        (ISTrainerConfig, {"env_kwargs": "{}"}, "env_kwargs", "a valid dictionary", "{}"),
        (ISTrainerConfig, {"strategy_mix": {1: 1}}, "strategy_mix.1.[key]", "a valid string", 1),
        (ISTrainerConfig, {"strategy_mix": {"a": -1}}, "strategy_mix.a", "greater than or", -1),
        (ISTrainerConfig, {"strategy_mix": {"a": True}}, "strategy_mix.a", "a valid integer", True),
        (ISTrainerConfig, {"loss_kwargs": {"a": NAN}}, "loss_kwargs.a", "a finite number", NAN),
        # a misspelt keyword is an error, not ignored
        (ISTrainerConfig, {"sampler_urls": "x"}, "sampler_urls", "Unexpected keyword", "x"),
    ],
)
def test_a_bad_value_is_refused_naming_the_field_the_rule_and_the_value(
    cls, kwargs, where, message, value
):
    with pytest.raises(ValidationError) as error:
        cls(**kwargs)
    (problem,) = error.value.errors()
    assert ".".join(map(str, problem["loc"])) == where and message in problem["msg"]
    text = str(error.value)  # what a user reads
    assert f"\n{where}\n  " in text and message in text and f"input_value={value!r}" in text


@pytest.mark.parametrize(
    ("kwargs", "text"),
    [
        ({"sampler_url": 3}, "sampler_url: Input should be a valid string, got 3"),
        ({"eval_groups": True}, "eval_groups: Input should be a valid integer, got True"),
        ({"warm_start_steps": -1}, "warm_start_steps: Input should be greater than or equal to 0"),
        (
            {"opponents": "league", "league_rating_decay": 0.0},
            "league_rating_decay: Input should be greater than 0, got 0.0",
        ),
        ({"sampler": "openai"}, "sampler='openai' needs sampler_url"),  # the sub-config's rule
    ],
)
def test_a_sub_config_setting_is_refused_under_its_flag_name(kwargs, text):
    with pytest.raises(ValidationError, match=re.escape(text)):
        ISTrainerConfig(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "name", "expected"),
    [
        ({"learning_rate": 1}, "learning_rate", 1.0),  # an int for a float becomes a float
        ({"save_episodes": 0}, "save_episodes", 0),  # bounds are inclusive where they say >=
        ({"vllm_gpu_memory_utilization": 1}, "vllm_gpu_memory_utilization", 1.0),
        ({"adam_betas": (0, 0.5)}, "adam_betas", (0.0, 0.5)),
        ({"loss_kwargs": {"eps_high": 1}}, "loss_kwargs", {"eps_high": 1.0}),
        (
            {"strategy_mix": {"iid": 2}, "strategy_weights": {"iid": 1}},
            "strategy_weights",
            {"iid": 1.0},
        ),
        ({"eval_opponent": None}, "eval_opponent", None),
    ],
)
def test_a_good_value_is_kept_and_an_int_for_a_float_becomes_a_float(kwargs, name, expected):
    kept = flat_values(ISTrainerConfig(**kwargs))[name]
    assert kept == expected and repr(kept) == repr(expected)


# ------------------------------------------------------ every numeric field of every config


def _limits(metadata: typing.Iterable[Any]) -> dict[str, float]:
    """``{"ge": 1, ...}``: the bounds among :mod:`annotated_types` metadata."""
    found = {}
    for item in metadata:
        for part in item if isinstance(item, GroupedMetadata) else (item,):
            found |= {
                k: getattr(part, k)
                for k in ("ge", "gt", "le", "lt")
                if getattr(part, k, None) is not None
            }
    return found


def _numeric_fields(cls: type) -> list[tuple[str, type, dict[str, float], bool]]:
    """``(field, int or float, bounds, inside a dict)`` of every number a config holds."""
    found = []
    for setting in flat_fields(cls):
        name, info = setting.name, setting.info
        hint, metadata, in_dict = info.annotation, list(info.metadata), False
        if get_origin(hint) in (typing.Union, type(int | None)):
            (hint,) = [a for a in get_args(hint) if a is not type(None)]
        if get_origin(hint) is dict:
            hint, in_dict = get_args(hint)[1], True
        if get_origin(hint) is Annotated:
            hint, metadata = get_args(hint)[0], [*metadata, *hint.__metadata__]
        if hint in (int, float):
            found.append((name, hint, _limits(metadata), in_dict))
    return found


def _bad_values(kind: type, bounds: dict[str, float]) -> list[Any]:
    bad: list[Any] = [True, "1", None, 1.5] if kind is int else [NAN, INF, -INF, True, "1.0"]
    step = 1 if kind is int else 1e-9
    if "ge" in bounds:
        bad.append(kind(bounds["ge"] - step))
    if "gt" in bounds:
        bad.append(kind(bounds["gt"]))
    if "le" in bounds:
        bad.append(kind(bounds["le"] + step))
    if "lt" in bounds:
        bad.append(kind(bounds["lt"]))
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
    assert ("ISTrainerConfig", "league_rating_decay") in names  # a sub-config's too
    assert ("ISTrainerConfig", "adam_eps") in names and (
        "GRPORunConfig",
        "num_generations",
    ) in names
    assert len(names) == sum(len(_numeric_fields(c)) for c in CONFIGS)


@pytest.mark.parametrize(("cls", "name", "value", "in_dict"), NUMERIC_CASES)
def test_every_numeric_field_rejects_nan_inf_bool_text_and_out_of_range(cls, name, value, in_dict):
    with pytest.raises(ValidationError) as error:
        cls(**{name: {"iid": value} if in_dict else value})
    (problem,) = error.value.errors()
    if problem["loc"] == ():  # a sub-config's setting: named by its flag in the message
        assert f"{name}: " in problem["msg"] and f", got {value!r}" in problem["msg"]
        return
    assert problem["loc"] == ((name, "iid") if in_dict else (name,))
    assert repr(problem["input"]) == repr(value)


def test_cross_field_rules_stay_in_their_config():
    with pytest.raises(ValueError, match="needs sampler_url"):
        ISTrainerConfig(sampler="openai")
    with pytest.raises(ValueError, match="strategy_mix must ask for at least one episode"):
        ISTrainerConfig(strategy_mix={})
    with pytest.raises(ValueError, match="warm_start_broken_rate is for --env debate"):
        ISTrainerConfig(env="expert_iteration", warm_start_broken_rate=0.5)
    with pytest.raises(ValueError, match="warm_start_mistake_rate is for --env debate"):
        ISTrainerConfig(env="expert_iteration", warm_start_mistake_rate=0.5)
    with pytest.raises(ValueError, match=r"warm_start_broken_rate: Input should be less than or "):
        ISTrainerConfig(warm_start_broken_rate=1.5)
    with pytest.raises(ValueError, match="--env debate has none"):
        MAGRPOConfig(env="debate")
    with pytest.raises(ValueError, match="task for env='debate'"):
        GRPORunConfig(task="mbpp")


# --------------------------------------------------------------- docs, once each


def _declared_in(cls: type, name: str) -> list[type]:
    """The classes of ``cls``'s hierarchy that declare the field ``name``, base first."""
    return [k for k in reversed(cls.__mro__) if name in vars(k).get("__annotations__", {})]


@pytest.mark.parametrize("cls", CONFIGS)
def test_every_field_is_documented_exactly_once_in_the_class_that_introduces_it(cls):
    for field in dataclasses.fields(cls):
        documented = [
            k
            for k in _declared_in(cls, field.name)
            if k.__pydantic_fields__[field.name].description
        ]
        assert documented == _declared_in(cls, field.name)[:1], field.name
    grouped = [f for f in flat_fields(cls) if f.group is not None]  # documented in their class
    assert all(f.owner.__pydantic_fields__[f.field].description for f in grouped)
    rows = config_table(cls).splitlines()[2:]
    assert len(rows) == len(flat_fields(cls))
    assert all(row.split(" | ")[2].strip(" |") for row in rows)  # a description each


@pytest.mark.parametrize("cls", CONFIGS)
def test_an_override_changes_the_default_only(cls):
    for field in dataclasses.fields(cls):
        types = {vars(k)["__annotations__"][field.name] for k in _declared_in(cls, field.name)}
        assert len(types) == 1, f"{cls.__name__}.{field.name} is declared as {types}"


def test_an_undocumented_field_is_an_error():
    @dataclass(frozen=True, kw_only=True, config=VALIDATION)
    class Config:
        """A config."""

        documented: int = 1
        """yes."""
        forgotten: int = 2

    with pytest.raises(ValueError, match=r"Config fields \['forgotten'\] are not documented"):
        build_parser(Config)


def test_shared_fields_come_first_and_in_the_same_order():
    shared = [f.name for f in dataclasses.fields(TrainerConfig)]
    assert [f.name for f in dataclasses.fields(ISTrainerConfig)][: len(shared)] == shared
    assert [f.name for f in dataclasses.fields(MAGRPOConfig)][: len(shared)] == shared
    run = [f.name for f in dataclasses.fields(RunConfig)]
    assert [f.name for f in dataclasses.fields(GRPORunConfig)][: len(run)] == run


def test_configs_are_keyword_only_frozen_and_checked_again_by_replace():
    with pytest.raises(ValidationError, match="Unexpected positional argument"):
        GRPORunConfig("tiny")
    config = GRPORunConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.seed = 1
    assert dataclasses.replace(config, seed=3).seed == 3
    with pytest.raises(ValidationError, match="seed\n  Input should be greater than or equal to 0"):
        dataclasses.replace(config, seed=-1)
    assert dataclasses.asdict(config)["max_steps"] == config.max_steps


# ------------------------------------------------------------------ command line


@pytest.mark.parametrize(
    ("flag", "bounds"),
    [
        ("--groups-per-batch", "Must be >= 1."),
        ("--seed", "Must be >= 0."),
        ("--adam-eps", "Must be > 0."),
        ("--vllm-gpu-memory-utilization", "Must be in (0, 1]."),
        ("--warm-start-broken-rate", "Must be in [0, 1]."),
        ("--adam-betas", "Each must be in [0, 1)."),
        ("--strategy-mix", "Values must be >= 0."),
        ("--strategy-weights", "Values must be >= 0."),
    ],
)
def test_help_and_tables_show_the_bounds(flag, bounds):
    (row,) = [r for r in config_table(ISTrainerConfig).splitlines() if r.startswith(f"| `{flag}`")]
    assert row.endswith(f" {bounds} |")
    text = " ".join(build_parser(ISTrainerConfig).format_help().split())
    assert f"{bounds} (default: " in text.split(f"{flag} ", 1)[1]


@pytest.mark.parametrize(
    ("cls", "argv", "error"),
    [
        (MAGRPOConfig, ["--top-p", "nan"], "top_p: Input should be a finite number, got nan"),
        (
            MAGRPOConfig,
            ["--top-p", "1.5"],
            "top_p: Input should be less than or equal to 1, got 1.5",
        ),
        (
            ISTrainerConfig,
            ["--adam-betas", "0.9", "1"],
            "adam_betas[1]: Input should be less than 1, got 1.0",
        ),
        (
            ISTrainerConfig,
            ["--strategy-mix", '{"iid": -1}'],
            "strategy_mix['iid']: Input should be greater than or equal to 0, got -1",
        ),
        (ISTrainerConfig, ["--sampler", "openai"], "sampler='openai' needs sampler_url"),
    ],
)
def test_a_bad_flag_value_names_field_rule_and_value(cls, argv, error, capsys):
    with pytest.raises(SystemExit) as exit_info:
        parse_config(cls, argv)
    assert exit_info.value.code == 2
    assert f"error: {error}" in capsys.readouterr().err


def test_to_argv_refuses_what_the_command_line_cannot_carry():
    with pytest.raises(ValueError, match="would read back as None"):
        to_argv(ISTrainerConfig(eval_opponent="None"))
    with pytest.raises(ValueError, match="cannot be written as JSON"):
        to_argv(MAGRPOConfig(env_kwargs={"external_mode": "expert_edits", "expert": print}))


# -------------------------------------------------- property: to_json and back


def _strategy(hint: Any, optional_text: bool = False) -> st.SearchStrategy[Any]:
    origin, args = get_origin(hint), get_args(hint)
    if origin is Annotated:
        base = args[0]
        bounds = _limits(hint.__metadata__)
        low = bounds.get("ge", bounds.get("gt"))
        high = bounds.get("le", bounds.get("lt"))
        if base is int:
            return st.integers(
                min_value=None if low is None else int(low) + ("gt" in bounds),
                max_value=int(high) - ("lt" in bounds) if high is not None else 10**9,
            )
        return st.floats(
            min_value=low,
            max_value=high,
            exclude_min="gt" in bounds,
            exclude_max="lt" in bounds,
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
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return st.lists(_strategy(args[0]), min_size=1, max_size=3).map(tuple)
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
        if "mistake_rate" not in (family.teacher_options or ()):
            values["warm_start_mistake_rate"] = 0.25
    if values.get("opponents") == "mirror":  # the IS trainer: league_* settings with a league
        for f in flat_fields(ISTrainerConfig):
            if f.group == "league":
                values[f.name] = f.info.default
    if values.get("league_anchors") is not None:  # anchors are specs: a scripted set's name
        values["league_anchors"] = tuple(
            f"scripted:{a.strip() or 'x'}" for a in values["league_anchors"]
        )
    if not values["project"].strip():  # every config: a tracker project has a name
        values["project"] = "llm-envs"
    if not all(n.strip() for n in values["lora_target_modules"].split(",")):
        values["lora_target_modules"] = "all-linear"
    if "joint_mode" in values:  # MAGRPO: a family with a team reward; termination is its own
        from llm_envs.registration import family_class

        if not family_class(values["env"]).team_reward:
            values["env"] = "code_collab"
        if values["task"] not in family_class(values["env"]).tasks:
            values["task"] = "default"
        values["env_kwargs"].pop("termination_threshold", None)
    if values.get("credit", "group_mean") != "group_mean":  # a scheme that sets its own scale
        for name, plain in (("normalize_advantages", False), ("scale_rewards", "none")):
            if name in values:
                values[name] = plain
    if "loss_type" in values:  # GRPO: a task of the env, task_kwargs for arithmetic only
        from baselines.grpo.config import tasks_of

        if values["task"] not in tasks_of(values["env"]):
            values["task"] = "default"
        if values["task"] != "arithmetic":
            values["task_kwargs"] = {}
    return values


def _configs(cls: type) -> st.SearchStrategy[Any]:
    from llm_envs.registration import family_names

    fields = {
        f.name: _strategy(typing.get_type_hints(f.owner, include_extras=True)[f.field])
        for f in flat_fields(cls)
    }
    if "env" in fields:  # a registered family's name
        fields["env"] = st.sampled_from(family_names())
    return st.fixed_dictionaries(fields).map(_is_valid).map(lambda values: cls(**values))


@pytest.mark.parametrize("cls", CONFIGS)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_valid_config_round_trips_through_json_and_the_command_line(cls, data):
    config = data.draw(_configs(cls))
    from_json = cls.from_json(config.to_json())
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


@dataclass(frozen=True, kw_only=True, config=VALIDATION)
class _Signed:
    """A config with signed numbers."""

    x: float = 0.0
    """a number."""
    y: tuple[float, float] = (0.0, 0.0)
    """two numbers."""
    n: int = 0
    """a whole number."""


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
    assert "learning_rate: Input should be greater than 0, got -1e-05" in capsys.readouterr().err
