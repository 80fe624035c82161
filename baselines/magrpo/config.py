"""The configuration of the MAGRPO trainer (:mod:`baselines.magrpo.trainer`).

One frozen dataclass, every field documented once, in the docstring of the class
that introduces it (the shared ones in :mod:`baselines.config`): the command line
(:mod:`baselines.cli`) and the docs table (``docs/magrpo.md``) are built from that
text. Values are checked at construction (types and bounds by
:class:`baselines.config.RunConfig`, the rules between fields here), so a broken
config fails before a model is loaded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any

from baselines.config import (
    DeviceName,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    Precision,
    Range,
    TrainerConfig,
    UnitFraction,
)
from baselines.magrpo.credit import JointMode, ReturnReduction
from llm_envs.code_collab.env import DatasetName
from llm_envs.code_collab.feedback import ExternalMode

__all__ = ["DeviceName", "MAGRPOConfig", "Precision"]

_ENV_OWNED = frozenset({"problems", "num_agents", "num_turns", "external_mode"})
_TRAINER_OWNED = frozenset({"termination_threshold"})


@dataclass(frozen=True, kw_only=True)
class MAGRPOConfig(TrainerConfig):
    """Train a helper and a main model together on code collaboration with MAGRPO.

    MAGRPO is the multi-agent GRPO of the paper "LLM Collaboration with
    Multi-Agent Reinforcement Learning".

    Attributes:
        dataset: problems: ``coophumaneval`` (82), ``humaneval`` (164) or
            ``mbpp`` (its 257-problem test split); see docs/tasks.md for the data.
        eval_problems: the last this many problems of ``dataset`` are held out
            from training and evaluated; 0 trains on every problem and never
            evaluates. With ``save_episodes`` > 0 every evaluation episode is
            saved too (``episodes/eval_NNNNN.jsonl``).
        num_agents: 2 (``helper`` writes ``aux``, ``main`` the entry point) or 1
            (``main`` alone: single-agent GRPO on the same tree).
        num_turns: turns of every episode (tree depth).
        external_mode: the env's feedback between turns: ``level_feedback``
            (diagnostics and the first test), ``plain`` (a revise instruction) or
            ``expert_edits`` (needs an expert: not available from the command line).
        env_kwargs: further arguments of :func:`llm_envs.code_collab.parallel_env`
            as a JSON object, e.g. ``{"sandbox_slice": 0, "reward_shift": -4.0}``.
        group_size: G, completions each agent samples at each node.
        joint_mode: ``align`` pairs the agents' g-th completions (G joint actions
            per node, G**T leaves), ``cross`` takes the Cartesian product (G**N
            per node, G**(N*T) leaves).
        termination_threshold: a node whose joint actions' mean reward (shift
            included) exceeds it gets no children; None always expands to
            ``num_turns``.
        discount: gamma of ``R = r + gamma * mean(child returns)``.
        return_reduction: cross mode: a completion's return is the ``mean`` of the
            returns of the joint actions it takes part in, or their ``sum`` (the
            upstream convention: the same advantages times G**(N-1)).
        problems_per_iteration: trees (problems) per iteration (an iteration
            makes one optimizer step per agent); problems are visited in a
            seeded order, reshuffled every pass over the data. The transcript of
            a tree (``save_episodes``) is the episode taking every node's first
            joint action.
        top_p: nucleus sampling mass.
        eval_temperature: evaluation temperature; a tiny value decodes greedily.
        share_prompts: train the completions of one node (which share their
            prompt) on one forward pass of the prompt, its key/value cache
            repeated for them: the same gradient for about ``P + G * C`` instead
            of ``G * (P + C)`` tokens. False runs each prompt + completion as its
            own row (for a model without a repeatable cache).
    """

    # Shared fields (documented in baselines.config) with this trainer's defaults.
    max_tokens: PositiveInt = 64
    output_dir: str = "runs/magrpo"
    num_iterations: NonNegativeInt = 2
    save_every: NonNegativeInt = 0
    eval_every: NonNegativeInt = 2
    dataset: DatasetName = "coophumaneval"
    eval_problems: NonNegativeInt = 2
    num_agents: Annotated[int, Range(ge=1, le=2, why="2: helper and main, 1: main alone")] = 2
    num_turns: PositiveInt = 2
    external_mode: ExternalMode = "level_feedback"
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    group_size: Annotated[int, Range(ge=2, why="the baseline is the mean of G siblings")] = 2
    joint_mode: JointMode = "align"
    termination_threshold: float | None = None
    discount: Annotated[float, Range(ge=0, le=1)] = 0.9
    return_reduction: ReturnReduction = "mean"
    problems_per_iteration: PositiveInt = 1
    top_p: UnitFraction = 1.0
    eval_temperature: PositiveFloat = 1e-4
    share_prompts: bool = True

    def _check_rules(self) -> None:
        if self.external_mode == "expert_edits" and "expert" not in self.env_kwargs:
            raise ValueError(
                "external_mode='expert_edits' needs an expert callable: build the config in "
                "Python with env_kwargs={'expert': ...} (the command line cannot pass one)"
            )
        clash = (_ENV_OWNED | _TRAINER_OWNED) & set(self.env_kwargs)
        if clash:
            raise ValueError(
                f"env_kwargs must not set {sorted(clash)}: they are fields of this config "
                "(termination is the trainer's, per node)"
            )
