"""The settings of ``llm-envs check``: which family, how much to play, and each check's threshold.

Every field is a flag (:func:`baselines.cli.parse_config`); the family's name
may also come first, alone (``llm-envs check debate``). Importing this does
not import torch.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Sequence
from dataclasses import field
from typing import Any

from pydantic.dataclasses import dataclass

from baselines.cli import parse_config
from baselines.config import (
    VALIDATION,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    UnitFraction,
)
from llm_envs.registration import family_class

__all__ = ["CheckConfig", "parse_check_args"]


@dataclass(frozen=True, kw_only=True, config=VALIDATION)
class CheckConfig:
    """Check, before any GPU is spent, that training on an environment family can work."""

    env: str
    """the family to check: a registered name (``debate``), an installed package's, or
    ``package.module:name``.
    """
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """the environment's arguments as a JSON object, as a trainer takes them."""
    task: str = "default"
    """where problems come from: one of the family's tasks."""
    task_kwargs: dict[str, Any] = field(default_factory=dict)
    """the task's settings as a JSON object (``arithmetic``: ``{"max_digits": 2}``)."""
    seed: NonNegativeInt = 0
    """seed of the plans, the scripted players' draws and the model's sampling."""
    groups: PositiveInt = 8
    """training groups played (the share of groups whose rewards vary, the judge)."""
    judge_groups: PositiveInt = 32
    """training groups played for the judge of a judged family (debates are cheap, and
    the position bias needs votes).
    """
    problems: PositiveInt = 8
    """evaluation problems played by the reference, the empty and the random-text player."""
    model: str | None = None
    """a model that also plays the training groups: ``tiny``, ``smollm2-135m-instruct``, a
    checkpoint folder, a Hugging Face id or a server ``http://HOST:PORT/v1#MODEL``; none: the
    scripted players alone.
    """
    max_tokens: PositiveInt = 128
    """most tokens the model samples per turn."""
    temperature: PositiveFloat = 1.0
    """the model's sampling temperature (1: its own distribution, as a trainer samples)."""
    conformance_cycles: PositiveInt = 50
    """cycles of PettingZoo's api and seed tests per environment."""
    min_margin: PositiveFloat = 0.1
    """the least the reference player's mean return must beat the empty and the random-text
    player's by, as a share of the declared reward range's width (of 1 where none is declared).
    """
    min_varied_share: UnitFraction = 0.5
    """the least share of training groups whose rewards vary (a group of equal rewards has no
    advantage to learn from).
    """
    min_judge_agreement: UnitFraction = 0.6
    """the least share of a judge's comparisons that agree with the reference answer."""
    max_position_bias: UnitFraction = 0.15
    """the most a judge's share of strict votes for the lower seat may stray from one half,
    beyond its 95% margin of error.
    """
    min_votes: PositiveInt = 10
    """answers with strict votes needed before the position bias is judged."""
    max_step_seconds: PositiveFloat = 5.0
    """the most an environment step may take on average (seconds; the sandbox's own default
    timeout for one test run).
    """
    burners: NonNegativeInt = 0
    """CPU-burning processes beside the loaded replay of the reference episodes; 0: one per core.
    """
    output_dir: str = "runs/check"
    """where the page (``index.html``) and its numbers (``check.json``) go, in a folder named for
    the family (and the task, when it is not ``default``).
    """

    def __post_init__(self) -> None:
        """Check the family and its task (the message lists what there is)."""
        tasks = family_class(self.env).tasks
        if self.task not in tasks:
            raise ValueError(
                f"task {self.task!r} is not for env={self.env!r}; choose one of {tasks}"
            )

    def to_json(self) -> str:
        """The settings as a JSON object."""
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True)


def parse_check_args(
    argv: Sequence[str] | None = None, *, prog: str = "python -m baselines.check"
) -> CheckConfig:
    """Parse a command line into a :class:`CheckConfig`; a bad value exits with its message.

    A first argument that is not a flag is the family's name.

    Example:
        >>> config = parse_check_args(["debate", "--groups", "4"])
        >>> config.env, config.groups, config.min_varied_share
        ('debate', 4, 0.5)
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if args and not args[0].startswith("-"):
        args = ["--env", args[0], *args[1:]]
    example = "example: %(prog)s debate --task arithmetic --model tiny"
    return parse_config(CheckConfig, args, prog=prog, epilog=example)
