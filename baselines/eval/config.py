"""The settings of an evaluation (``python -m baselines.eval``), checked at construction.

:class:`EvalConfig` is a frozen pydantic dataclass documented field by field,
like the trainers' configs (:mod:`baselines.config`): :func:`parse_eval_args`
builds the command line from that text, and every value is checked before a
model is loaded. Importing it does not import torch.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import field
from typing import Annotated, Any, Final, Literal

from annotated_types import Interval
from pydantic.dataclasses import dataclass

from baselines.cli import parse_config
from baselines.config import (
    VALIDATION,
    DeviceName,
    EnvName,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    TaskName,
    UnitFraction,
)
from llm_envs.registration import family_class

__all__ = [
    "PLAN_FIELDS",
    "EvalConfig",
    "EvalEnvName",
    "EvalTaskName",
    "SeatingChoice",
    "parse_eval_args",
]

EvalEnvName = EnvName
EvalTaskName = TaskName
SeatingChoice = Literal["auto", "self", "rotations", "permutations"]
"""How models are seated; see :mod:`baselines.eval.seating`."""
Coverage = Annotated[float, Interval(gt=0, lt=1)]
"""An interval's coverage, in ``(0, 1)``."""


PLAN_FIELDS: Final = (
    "models",
    "env",
    "env_kwargs",
    "task",
    "task_kwargs",
    "seating",
    "max_tokens",
    "temperature",
    "top_p",
    "seed",
)
"""The settings that decide what each episode is: a resumed evaluation must keep them."""


@dataclass(frozen=True, kw_only=True, config=VALIDATION)
class EvalConfig:
    """Evaluate models in an llm-envs environment: scores with intervals, and debate ratings."""

    env: EvalEnvName = "debate"
    """the environment: any registered family, yours included (docs/your_own_environment.md). A
    debate is a tournament when several models are seated together; in expert iteration the solver
    answers held-out problems, no help; in code collaboration helper and main write one program.
    """
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """the environment's arguments as a JSON object, e.g. ``{"num_agents": 3, "max_rounds": 1,
    "on_parse_error": "mask"}`` for ``debate`` (see :class:`llm_envs.debate.DebateConfig`). Problems
    come from ``task``, not from here.
    """
    task: EvalTaskName = "default"
    """problems: ``default`` (debate: its built-in questions; expert_iteration: arithmetic;
    code_collab: ``coophumaneval``), ``arithmetic`` (procedural, exact answers), ``gsm8k`` (its test
    split), or for ``code_collab`` ``coophumaneval``, ``humaneval`` or ``mbpp`` (see docs/tasks.md
    for the data).
    """
    task_kwargs: dict[str, Any] = field(default_factory=dict)
    """settings of the ``arithmetic`` task as a JSON object (see
    :class:`llm_envs.tasks.ArithmeticTask`), e.g. ``{"max_digits": 2, "operations": ["+"]}``.
    """
    problems: PositiveInt = 4
    """problems to play; each is played once per seating, so the evaluation plays ``problems`` times
    the number of seatings episodes. A finished evaluation given more problems plays only the new
    ones.
    """
    seating: SeatingChoice = "auto"
    """who plays which agent (see :mod:`baselines.eval.seating`): ``self`` (each model plays every
    agent of its own episodes), ``rotations`` (models mixed in every episode, each model equally
    often in each seat and every two models together at least once per problem),
    ``permutations`` (every mixed assignment) or ``auto`` (the family's: ``rotations`` for
    several models in a debate or a game, else ``self``).
    """
    max_tokens: PositiveInt = 256
    """most tokens sampled per turn (a model spec may override it)."""
    temperature: PositiveFloat = 0.7
    """sampling temperature (a model spec may override it)."""
    top_p: UnitFraction = 1.0
    """nucleus sampling mass (a model spec may override it)."""
    seed: NonNegativeInt = 0
    """seed of the problems, the environments' resets and sampling."""
    concurrency: PositiveInt = 8
    """episodes played at once (their turns are batched per model), and requests in flight at once
    per server.
    """
    retries: PositiveInt = 5
    """attempts per request to a server, the first included; HTTP 429 and 5xx answers and connection
    errors are tried again after exponential backoff.
    """
    timeout: PositiveFloat = 300.0
    """seconds per request to a server."""
    api_key_env: str | None = "OPENAI_API_KEY"
    """the environment variable holding the servers' API key (its value is sent, never shown or
    written); ``none`` sends no key.
    """
    device: DeviceName = "auto"
    """where local models run: ``auto`` (CUDA when available), ``cpu`` or ``cuda``."""
    num_threads: NonNegativeInt = 0
    """CPU threads of torch for local models; 0 chooses for the machine: one per core when it is
    idle, else the cores other work leaves free (:mod:`baselines.threads`; the choice is printed).
    """
    baseline: str | None = None
    """the model every other one is compared with (its name); None: the first model given."""
    num_bootstrap: NonNegativeInt = 1000
    """bootstrap resamples behind every interval (scores: problems resampled; ratings: debates
    resampled); 0: no intervals.
    """
    confidence: Coverage = 0.95
    """the intervals' coverage."""
    meter_samples: NonNegativeInt = 16
    """texts sampled from each model at each point the family's meter measures (Kuhn Poker: its 12
    information sets; an ``exploitability`` column, see the family's page under ``docs/envs``),
    kept in ``meter.json``; 0: none. Families without a meter ignore it.
    """
    prior_wins: PositiveFloat = 1.0
    """debate ratings: virtual wins each way per pair of models (see :mod:`baselines.eval.ratings`).
    """
    output_dir: str = "runs/eval"
    """the evaluation's folder: ``config.json``, ``episodes/eval.jsonl`` (one line per episode,
    written as it finishes; a restarted evaluation skips the episodes already there),
    ``summary.json`` and the HTML report.
    """
    report: bool = True
    """write the HTML report (``output_dir/report/index.html``) at the end."""
    progress: bool = True
    """show a progress bar (in a terminal) or a line per batch of episodes, and a line
    whenever 30 s pass without one."""
    models: tuple[str, ...]
    """the models, one spec each: ``[NAME=]MODEL[@temperature=T,top_p=P,max_tokens=N]`` with
    ``MODEL`` ``tiny``, ``smollm2-135m-instruct``, a checkpoint folder, a Hugging Face id, a server
    ``http://HOST:PORT/v1#MODEL_NAME``, or ``reference`` (debate: a scripted debater that knows the
    answers and votes by them; see :mod:`baselines.eval.entrants`).
    """

    def __post_init__(self) -> None:
        """Check the rules between fields (pydantic has checked each field's type)."""
        from baselines.eval.entrants import parse_entrants

        names = [e.name for e in parse_entrants(self.models)]
        if self.baseline is not None and self.baseline not in names:
            raise ValueError(
                f"baseline {self.baseline!r} is none of the models {names}; name one of them "
                "(NAME=MODEL names a model)"
            )
        tasks = family_class(self.env).tasks  # an unknown env names the registered ones
        if self.task not in tasks:
            raise ValueError(
                f"task {self.task!r} is not for env={self.env!r}; choose one of {tasks}"
            )
        if self.api_key_env is not None and not self.api_key_env.strip():
            raise ValueError("api_key_env must name an environment variable, or be none")

    @property
    def baseline_name(self) -> str:
        """The model compared with: ``baseline``, or the first model's name."""
        from baselines.eval.entrants import parse_entrant

        return self.baseline or parse_entrant(self.models[0]).name

    def to_json(self) -> str:
        """The settings as a JSON object (``config.json``; an API key is never in it)."""
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True)

    def plan_changes(self, before: Mapping[str, Any]) -> list[str]:
        """The :data:`PLAN_FIELDS` that differ from ``before`` (a stored ``config.json``)."""
        now = json.loads(self.to_json())
        return [name for name in PLAN_FIELDS if name in before and before[name] != now[name]]


def parse_eval_args(
    argv: Sequence[str] | None = None, *, prog: str = "python -m baselines.eval"
) -> EvalConfig:
    """Parse a command line into an :class:`EvalConfig`; a bad value exits with its message.

    Every field of :class:`EvalConfig` is a flag (``--env-kwargs``...);
    ``--models`` takes one or more model specs.

    Example:
        >>> config = parse_eval_args(["--models", "tiny", "hot=tiny@temperature=1.5"])
        >>> config.models, config.env, config.baseline_name
        (('tiny', 'hot=tiny@temperature=1.5'), 'debate', 'tiny')
    """
    example = (
        "example: %(prog)s --env debate --models cold=smollm2-135m-instruct@temperature=0.3 "
        "hot=smollm2-135m-instruct@temperature=1.5 tiny"
    )
    return parse_config(EvalConfig, argv, prog=prog, epilog=example)
