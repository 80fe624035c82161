"""The configuration of the MAGRPO trainer (:mod:`baselines.magrpo.trainer`).

One frozen pydantic dataclass; its documentation, flags, docs table
(``docs/magrpo.md``) and checks work as :mod:`baselines.config` says (the rules
between fields here).
"""

from __future__ import annotations

from dataclasses import field
from typing import Annotated, Any

from annotated_types import Ge, Interval
from pydantic.dataclasses import dataclass

from baselines.config import (
    VALIDATION,
    DeviceName,
    EnvName,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    Precision,
    TaskName,
    TrainerConfig,
    UnitFraction,
)
from baselines.magrpo.credit import JointMode, ReturnReduction
from llm_envs.capabilities import TeamReward, provides, require
from llm_envs.registration import family_class, family_names

__all__ = ["DeviceName", "EnvName", "MAGRPOConfig", "Precision", "TaskName"]


_TRAINER_OWNED = frozenset({"termination_threshold"})


@dataclass(frozen=True, kw_only=True, config=VALIDATION)
class MAGRPOConfig(TrainerConfig):
    """Train a model per agent together with MAGRPO, on a team's shared reward.

    MAGRPO is the multi-agent GRPO of the paper "LLM Collaboration with
    Multi-Agent Reinforcement Learning". It takes any registered environment
    family whose environments are parallel (every agent acts at every turn)
    and whose agents share one team reward; code collaboration by default
    (a ``helper`` writes ``aux``, ``main`` the entry point).
    """

    # Shared fields (documented in baselines.config) with this trainer's defaults.
    max_tokens: PositiveInt = 64
    output_dir: str = "runs/magrpo"
    num_iterations: NonNegativeInt = 2
    save_every: NonNegativeInt = 0
    eval_every: NonNegativeInt = 2
    env: EnvName = "code_collab"
    """environment family: ``code_collab`` (the code-collaboration env of the MAGRPO paper), or any
    registered family with parallel environments and a team reward.
    """
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """keyword arguments for the environment constructor as a JSON object; for ``code_collab``
    (:func:`llm_envs.code_collab.parallel_env`) e.g. ``{"num_agents": 1, "external_mode": "plain",
    "reward_shift": -4.0}``: ``num_agents`` 2 (``helper`` and ``main``) or 1 (``main`` alone:
    single-agent GRPO on the same tree), ``external_mode`` the feedback between turns
    (``level_feedback``, ``plain``; ``expert_edits`` needs an expert: Python only), ``num_turns``
    the episode's horizon (at least ``num_turns`` below). Problems come from ``task``, not from
    here.
    """
    task: TaskName = "default"
    """problem source of the family: for ``code_collab`` ``default`` (``coophumaneval``, 82
    problems), ``coophumaneval``, ``humaneval`` (164) or ``mbpp`` (its 257-problem test split); see
    docs/tasks.md for the data.
    """
    task_kwargs: dict[str, Any] = field(default_factory=dict)
    """the task's settings as a JSON object; for ``code_collab`` ``{"num_problems": n}`` keeps the
    first ``n`` problems.
    """
    eval_problems: NonNegativeInt = 2
    """problems held out from training and evaluated (for ``code_collab`` the last this many of
    ``task``'s; a family whose evaluation draws its own problems evaluates this many of them); 0
    trains on every problem and never evaluates. With ``save_episodes`` > 0 every evaluation episode
    is saved too (``episodes/eval_NNNNN.jsonl``).
    """
    num_turns: PositiveInt = 2
    """turns of every episode (tree depth); at most the env's own horizon where it declares one."""
    group_size: Annotated[int, Ge(2)] = 2  # the baseline is the mean of G siblings
    """G, completions each agent samples at each node."""
    joint_mode: JointMode = "align"
    """``align`` pairs the agents' g-th completions (G joint actions per node, G**T leaves),
    ``cross`` takes the Cartesian product (G**N per node, G**(N*T) leaves).
    """
    termination_threshold: float | None = None
    """a node whose joint actions' mean reward (shift included) exceeds it gets no children; None
    always expands to ``num_turns``.
    """
    discount: Annotated[float, Interval(ge=0, le=1)] = 0.9
    """gamma of ``R = r + gamma * mean(child returns)``."""
    return_reduction: ReturnReduction = "mean"
    """cross mode: a completion's return is the ``mean`` of the returns of the joint actions it
    takes part in, or their ``sum`` (the upstream convention: the same advantages times G**(N-1)).
    """
    problems_per_iteration: PositiveInt = 1
    """trees per iteration, one per training group of the family (for ``code_collab`` a problem;
    problems are visited in a seeded order, reshuffled every pass over the data); an iteration makes
    one optimizer step per agent. The transcript of a tree (``save_episodes``) is the episode taking
    every node's first joint action.
    """
    top_p: UnitFraction = 1.0
    """nucleus sampling mass."""
    eval_temperature: PositiveFloat = 1e-4
    """evaluation temperature; a tiny value decodes greedily."""
    share_prompts: bool = True
    """train the completions of one node (which share their prompt) on one forward pass of the
    prompt, its key/value cache repeated for them: the same gradient for about ``P + G * C`` instead
    of ``G * (P + C)`` tokens. False runs each prompt + completion as its own row (for a model
    without a repeatable cache).
    """

    def _check_rules(self) -> None:
        family = family_class(self.env)  # an unknown env names the registered ones
        if self.task not in family.tasks:
            raise ValueError(
                f"--env {self.env} takes --task {' | '.join(family.tasks)}, got {self.task!r}"
            )
        if not provides(family, TeamReward):
            teams = [name for name in family_names() if provides(family_class(name), TeamReward)]
            require(
                family,
                TeamReward,
                by="MAGRPO trains agents on one team reward",
                otherwise="the registered families with a team reward: "
                + (", ".join(teams) or "none"),
            )
        clash = _TRAINER_OWNED & set(self.env_kwargs)
        if clash:
            raise ValueError(
                f"env_kwargs must not set {sorted(clash)}: they are fields of this config "
                "(termination is the trainer's, per node)"
            )
