"""The configuration of the TRL GRPO runner (:mod:`baselines.grpo.run`).

One frozen dataclass, every field documented once, in the docstring of the class
that introduces it (the shared ones in :mod:`baselines.config`): the command line
(:mod:`baselines.cli`) and the docs table (``docs/trl_grpo.md``) are built from
that text. Values are checked at construction (types and bounds by
:class:`baselines.config.RunConfig`, the rules between fields here).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from baselines.config import (
    DeviceName,
    NonNegativeFloat,
    PositiveInt,
    Range,
    RunConfig,
    UnitFraction,
)

__all__ = ["DeviceName", "EnvName", "GRPORunConfig", "LossType", "Switch", "TaskName"]

EnvName = Literal["debate", "expert_iteration", "code_collab"]
"""The environment families the TRL adapters know."""
TaskName = Literal["default", "arithmetic", "gsm8k", "humaneval", "mbpp", "coophumaneval"]
"""Where questions or problems come from; see :attr:`GRPORunConfig.task`."""
LossType = Literal["dapo", "grpo", "dr_grpo", "bnpo", "cispo", "sapo", "luspo", "vespo"]
"""TRL 1.16's ``loss_type`` values."""
Switch = Literal["auto", "on", "off"]
"""Whether to use something: ``auto`` decides from what is installed and where."""

_TASKS: dict[str, tuple[str, ...]] = {
    "debate": ("default", "arithmetic", "gsm8k"),
    "expert_iteration": ("default", "arithmetic", "gsm8k", "humaneval", "mbpp", "coophumaneval"),
    "code_collab": ("default", "humaneval", "mbpp", "coophumaneval"),
}


@dataclass(frozen=True, kw_only=True)
class GRPORunConfig(RunConfig):
    """Train a language model in an llm-envs environment with TRL's GRPOTrainer.

    Attributes:
        env: environment family: ``debate`` (one debate per question, generation
            ``g`` is agent ``g``'s whole trajectory; its transcript is one episode
            of all its agents), ``expert_iteration`` (one
            episode per generation) or ``code_collab`` (the single-agent setting:
            the main agent alone, one episode per generation).
        env_kwargs: environment arguments as a JSON object: for ``debate``
            ``num_agents``, ``max_rounds``, ``reward``, ``on_parse_error``,
            ``max_chars_per_field`` (see :class:`llm_envs.debate.DebateConfig`);
            for ``expert_iteration`` those of
            :class:`llm_envs.expert_iteration.ExpertIterationConfig` (e.g.
            ``{"attempt1_loss_weight": 0.5}``); for ``code_collab`` those of
            :class:`llm_envs.code_collab.CodeCollabConfig` (e.g. ``{"num_turns":
            2}``). Problems come from ``task``, not from here.
        task: question or problem source: ``default`` (debate: the built-in
            questions; expert iteration: arithmetic; code collaboration:
            HumanEval), ``arithmetic``, ``gsm8k``, ``humaneval``, ``mbpp`` or
            ``coophumaneval`` (see docs/tasks.md for the data).
        task_kwargs: settings of the ``arithmetic`` task as a JSON object (see
            :class:`llm_envs.tasks.ArithmeticTask`), e.g. ``{"max_digits": 1}``.
        strategy: expert iteration only: ``iid`` or ``two_turn_feedback`` (the
            strategies whose training context is their sampling context).
        num_generations: episodes per problem (``expert_iteration``,
            ``code_collab``); a debate's generations are its ``num_agents``.
        items_per_step: questions or problems per optimizer step.
        max_steps: optimizer steps.
        loss_type: TRL's ``loss_type``.
        scale_rewards: TRL's ``scale_rewards``: ``none`` is the mean baseline of
            the debate recipe, the expert-iteration plan and the MAGRPO paper (no
            standard-deviation normalization), ``group`` or ``batch`` divide by the
            group's or batch's standard deviation.
        beta: KL coefficient against the initial model; 0 loads no reference model.
        vllm: sample through TRL's colocated vLLM engine: ``auto`` (on a GPU
            when vLLM is installed), ``on`` or ``off``.
        vllm_gpu_memory_utilization: the GPU memory share of TRL's vLLM engine.
        vllm_max_model_length: the longest prompt plus multi-turn completion the
            vLLM engine must hold.
        save_model: save the trained model and tokenizer in ``output_dir`` at the
            end. TRL saves no checkpoints here: a run started again starts afresh,
            its ``metrics.jsonl`` and ``episodes/step_*.jsonl`` too.
    """

    # Shared fields (documented in baselines.config) with this runner's defaults.
    max_tokens: PositiveInt = 96
    output_dir: str = "runs/grpo"
    env: EnvName = "debate"
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    task: TaskName = "default"
    task_kwargs: dict[str, Any] = field(default_factory=dict)
    strategy: Literal["iid", "two_turn_feedback"] = "iid"
    num_generations: Annotated[int, Range(ge=2, why="GRPO centres returns within a group")] = 4
    items_per_step: PositiveInt = 1
    max_steps: PositiveInt = 4
    loss_type: LossType = "dapo"
    scale_rewards: Literal["none", "group", "batch"] = "none"
    beta: NonNegativeFloat = 0.0
    vllm: Switch = "auto"
    vllm_gpu_memory_utilization: UnitFraction = 0.3
    vllm_max_model_length: PositiveInt = 8192
    save_model: bool = True

    def _check_rules(self) -> None:
        if self.task not in _TASKS[self.env]:
            raise ValueError(
                f"task for env={self.env!r} must be one of {_TASKS[self.env]}, got {self.task!r}"
            )
        if self.task_kwargs and self.task != "arithmetic":
            raise ValueError(f"task_kwargs are for task='arithmetic', got task={self.task!r}")
        owned = sorted({"questions", "problems"} & set(self.env_kwargs))
        if owned:
            raise ValueError(
                f"env_kwargs must not set {owned}: the questions or problems come from "
                f"task (and task_kwargs); got env_kwargs={self.env_kwargs!r}"
            )
